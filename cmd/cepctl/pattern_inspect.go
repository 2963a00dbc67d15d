package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternInspectOptions struct {
	globalOptions
	Name  string
	Key   string
	Limit uint32
}

func newPatternInspectCmd(d *deps, runF func(*patternInspectOptions) error) *cobra.Command {
	opts := &patternInspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect NAME --key KEY",
		Short: "Show a key's live partial matches in a deployed pattern",
		Long: `Show what a deployed pattern holds for one key now, as the leader of the
key's shard has applied it: each partial match with the automaton state it
waits in (the names pattern explain draws), its start, the deadline of its
window and the events it has taken, each with the stage it is bound to;
the key's events waiting for the watermark; the pattern's watermark and
its sources' clocks on that shard.

KEY is the value of the pattern's key expression (acc-3 for key:
e.account; '' for a pattern without a key). At most --limit partial matches and waiting events are
listed, with how many there are. -o json or yaml print the answer as
data, each event as the JSON it was published as.`,
		Example: `  cepctl pattern inspect login-fail-logout --key acc-3
  cepctl pattern inspect login-fail-logout --key acc-3 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Name = g, args[0]
			if !cmd.Flags().Changed("key") {
				return fmt.Errorf("--key is required: the key to inspect, the value of the pattern's key expression (--key '' for a pattern without a key)")
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternInspect(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "the key to inspect (required)")
	cmd.Flags().Uint32Var(&opts.Limit, "limit", 100, "list at most this many partial matches and waiting events (at most 10000)")
	return cmd
}

func runPatternInspect(ctx context.Context, d *deps, opts *patternInspectOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.InspectKey(ctx, connect.NewRequest(&cepv1.InspectKeyRequest{Name: opts.Name, Key: opts.Key, Limit: opts.Limit}))
	if err != nil {
		return err
	}
	if opts.Output == "table" {
		return writeInspection(d.stdout, res.Msg)
	}
	js, err := json.Marshal(inspectionJSON(res.Msg))
	if err != nil {
		return err
	}
	return writeStructured(d.stdout, opts.Output, js)
}

// writeInspection writes the answer for a terminal: a heading, then each
// partial match and its events in aligned columns, then the waiting
// events.
func writeInspection(w io.Writer, x *cepv1.InspectKeyResponse) error {
	// the applied index is in -o json: it changes with every entry, even
	// when the key's state does not
	fmt.Fprintf(w, "pattern %s version %d, key %s: shard %d (key group %d), leader %s\n",
		x.GetName(), x.GetVersion(), x.GetKey(), x.GetShardId(), x.GetKeyGroup(), x.GetLeaderNodeId())
	wm := "none yet"
	if x.GetHasWatermark() {
		wm = fmt.Sprint(x.GetWatermarkMs())
	}
	var clocks []string
	for _, c := range x.GetClocks() {
		clock, newest := "none", "none"
		if c.GetHasWatermark() {
			clock = fmt.Sprint(c.GetWatermarkMs())
		}
		if c.GetHasNewestEvent() {
			newest = fmt.Sprint(c.GetNewestEventMs())
		}
		clocks = append(clocks, fmt.Sprintf("source %s: clock %s, newest event on this shard %s", c.GetSource(), clock, newest))
	}
	if len(clocks) > 0 {
		wm += " (" + strings.Join(clocks, "; ") + ")"
	}
	fmt.Fprintf(w, "watermark %s\n", wm)
	if err := writeHeld(w, "", x.GetPartialMatches(), x.GetPartialMatchCount(), x.GetBufferedEvents(), x.GetBufferedEventCount()); err != nil {
		return err
	}
	for _, d := range x.GetDraining() {
		fmt.Fprintf(w, "version %d, draining:\n", d.GetVersion())
		if err := writeHeld(w, "  ", d.GetPartialMatches(), d.GetPartialMatchCount(), d.GetBufferedEvents(), d.GetBufferedEventCount()); err != nil {
			return err
		}
	}
	return nil
}

// writeHeld writes partial matches and waiting events, each line after
// indent.
func writeHeld(w io.Writer, indent string, pms []*cepv1.PartialMatch, count uint64, buffered []*cepv1.InspectedEvent, bcount uint64) error {
	head := fmt.Sprintf("%d partial matches", count)
	if count == 1 {
		head = "1 partial match"
	}
	fmt.Fprintf(w, "%s%s%s\n", indent, head, shown(len(pms), count))
	// a heading line has no tab: each partial match's events align
	// among themselves
	tw := newTable(w)
	for i, pm := range pms {
		deadline := "none"
		if pm.GetHasDeadline() {
			deadline = fmt.Sprint(pm.GetDeadlineMs())
		}
		state := pm.GetState()
		if pm.GetStage() != state {
			state += " (stage " + pm.GetStage() + ")"
		}
		fmt.Fprintf(tw, "%s#%d state %s, start %d, deadline %s\n", indent, i+1, state, pm.GetStartMs(), deadline)
		for _, e := range pm.GetEvents() {
			row(tw, indent+"  "+e.GetStage(), fmt.Sprintf("at %d", e.GetTimeMs()), fmt.Sprintf("seq %d", e.GetSequence()), eventLine(e.GetJson()))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s%s waiting for the watermark%s\n", indent, plural(bcount, "event"), shown(len(buffered), bcount))
	tw = newTable(w)
	for _, e := range buffered {
		row(tw, indent+"  at "+fmt.Sprint(e.GetTimeMs()), fmt.Sprintf("seq %d", e.GetSequence()), eventLine(e.GetJson()))
	}
	return tw.Flush()
}

// shown says how many of n were listed, when not all were.
func shown(listed int, n uint64) string {
	if uint64(listed) >= n {
		return ""
	}
	return fmt.Sprintf(" (the first %d shown: --limit)", listed)
}

// eventLine is an event's JSON on one line.
func eventLine(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.String()
	}
	return strings.ReplaceAll(string(b), "\n", " ")
}

// The -o json and yaml forms: the response's fields by their protobuf
// JSON names, each event as the JSON it was published as (not base64).
type inspectionOut struct {
	Name               string              `json:"name"`
	Version            uint64              `json:"version"`
	Key                string              `json:"key"`
	ShardID            uint32              `json:"shardId"`
	KeyGroup           uint32              `json:"keyGroup"`
	LeaderNodeID       string              `json:"leaderNodeId"`
	AppliedIndex       uint64              `json:"appliedIndex"`
	Watermark          *int64              `json:"watermarkMs"`
	Clocks             []clockOut          `json:"clocks"`
	PartialMatchCount  uint64              `json:"partialMatchCount"`
	PartialMatches     []partialMatchOut   `json:"partialMatches"`
	BufferedEventCount uint64              `json:"bufferedEventCount"`
	BufferedEvents     []inspectedEventOut `json:"bufferedEvents"`
	Draining           []drainingOut       `json:"draining"`
}

type drainingOut struct {
	Version            uint64              `json:"version"`
	PartialMatchCount  uint64              `json:"partialMatchCount"`
	PartialMatches     []partialMatchOut   `json:"partialMatches"`
	BufferedEventCount uint64              `json:"bufferedEventCount"`
	BufferedEvents     []inspectedEventOut `json:"bufferedEvents"`
}

type clockOut struct {
	Source      string `json:"source"`
	Watermark   *int64 `json:"watermarkMs"`
	NewestEvent *int64 `json:"newestEventMs"`
}

type partialMatchOut struct {
	State    string              `json:"state"`
	Stage    string              `json:"stage"`
	Start    int64               `json:"startMs"`
	Deadline *int64              `json:"deadlineMs"`
	Events   []inspectedEventOut `json:"events"`
}

type inspectedEventOut struct {
	Stage    string          `json:"stage,omitempty"`
	Time     int64           `json:"timeMs"`
	Sequence uint64          `json:"sequence"`
	Event    json.RawMessage `json:"event"`
}

func inspectionJSON(x *cepv1.InspectKeyResponse) inspectionOut {
	opt := optInt
	out := inspectionOut{Name: x.GetName(), Version: x.GetVersion(), Key: x.GetKey(), ShardID: x.GetShardId(), KeyGroup: x.GetKeyGroup(),
		LeaderNodeID: x.GetLeaderNodeId(), AppliedIndex: x.GetAppliedIndex(), Watermark: opt(x.GetWatermarkMs(), x.GetHasWatermark()),
		PartialMatchCount: x.GetPartialMatchCount(), BufferedEventCount: x.GetBufferedEventCount(),
		Clocks: []clockOut{}, Draining: []drainingOut{}}
	for _, c := range x.GetClocks() {
		out.Clocks = append(out.Clocks, clockOut{Source: c.GetSource(), Watermark: opt(c.GetWatermarkMs(), c.GetHasWatermark()),
			NewestEvent: opt(c.GetNewestEventMs(), c.GetHasNewestEvent())})
	}
	out.PartialMatches, out.BufferedEvents = heldJSON(x.GetPartialMatches(), x.GetBufferedEvents())
	for _, d := range x.GetDraining() {
		do := drainingOut{Version: d.GetVersion(), PartialMatchCount: d.GetPartialMatchCount(), BufferedEventCount: d.GetBufferedEventCount()}
		do.PartialMatches, do.BufferedEvents = heldJSON(d.GetPartialMatches(), d.GetBufferedEvents())
		out.Draining = append(out.Draining, do)
	}
	return out
}

// heldJSON is partial matches and waiting events in the -o json form.
func heldJSON(pms []*cepv1.PartialMatch, buffered []*cepv1.InspectedEvent) ([]partialMatchOut, []inspectedEventOut) {
	ev := func(e *cepv1.InspectedEvent) inspectedEventOut {
		raw := json.RawMessage(e.GetJson())
		if !json.Valid(raw) {
			raw, _ = json.Marshal(string(e.GetJson()))
		}
		return inspectedEventOut{Stage: e.GetStage(), Time: e.GetTimeMs(), Sequence: e.GetSequence(), Event: raw}
	}
	outPM, outEv := []partialMatchOut{}, []inspectedEventOut{}
	for _, pm := range pms {
		p := partialMatchOut{State: pm.GetState(), Stage: pm.GetStage(), Start: pm.GetStartMs(), Deadline: optInt(pm.GetDeadlineMs(), pm.GetHasDeadline()),
			Events: []inspectedEventOut{}}
		for _, e := range pm.GetEvents() {
			p.Events = append(p.Events, ev(e))
		}
		outPM = append(outPM, p)
	}
	for _, e := range buffered {
		outEv = append(outEv, ev(e))
	}
	return outPM, outEv
}

// optInt is v when ok, else nil (null in JSON).
func optInt(v int64, ok bool) *int64 {
	if !ok {
		return nil
	}
	return &v
}
