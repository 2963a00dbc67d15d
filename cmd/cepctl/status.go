package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type statusOptions struct {
	globalOptions
	// Wait, when positive, is how long to wait for the cluster to be
	// reachable with a metadata leader and every shard led.
	Wait time.Duration
}

func newStatusCmd(d *deps, runF func(*statusOptions) error) *cobra.Command {
	opts := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's nodes and shards",
		Long: `Show the cluster's nodes, its shards (key-group range, leader, replicas,
Raft indexes and load, each as its leader reports it: the node asked gathers
them from the others) and a summary line. Each replica's applied index is
the one its own node reports; "unknown" (in JSON: appliedUnknown, no
appliedIndex) when that node did not answer. Indexes may lag the leaders by
a moment.

With --wait, it first waits (up to the duration) until a server answers and
the cluster has a metadata leader and a leader for every shard — what a
script that just started the nodes needs — and fails saying what is still
missing when the time runs out.`,
		Example: `  cepctl status
  cepctl status --wait 30s   # right after starting nodes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if runF != nil {
				return runF(opts)
			}
			return runStatus(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for the cluster to answer, with a metadata leader and every shard led")
	return cmd
}

// statusWaitPoll is how often status --wait asks again, statusWaitCall
// how long it waits for one answer.
var statusWaitPoll, statusWaitCall = 200 * time.Millisecond, 2 * time.Second

// waitLed asks for the status until the cluster answers with a metadata
// leader and every shard led, or wait runs out: then the last reason.
func waitLed(ctx context.Context, c *apiClients, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		// each call bounded too: a node still starting may take a
		// connection and not answer yet
		callCtx, callCancel := context.WithTimeout(ctx, statusWaitCall)
		st, err := c.cluster.GetStatus(callCtx, connect.NewRequest(&cepv1.GetStatusRequest{}))
		callCancel()
		switch {
		case err != nil && last != nil && connect.CodeOf(err) == connect.CodeDeadlineExceeded:
			// the call ran out of time (the wait's end, here or at the
			// server, which had its deadline): the answer before says
			// what is missing, a deadline does not
			err = last
		case err != nil:
		case st.Msg.GetSummary().GetMetaLeaderId() == "":
			err = fmt.Errorf("the cluster has no metadata leader yet")
		case st.Msg.GetSummary().GetShards() == 0:
			err = fmt.Errorf("the cluster has laid out no shards yet")
		case st.Msg.GetSummary().GetShardsWithoutLeader() > 0:
			err = fmt.Errorf("%d shards have no leader yet", st.Msg.GetSummary().GetShardsWithoutLeader())
		default:
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("after waiting %v: %w", wait, err)
		case <-time.After(statusWaitPoll):
		}
	}
}

func runStatus(ctx context.Context, d *deps, opts *statusOptions) error {
	c := newClients(d, opts.globalOptions)
	if opts.Wait > 0 {
		if err := waitLed(ctx, c, opts.Wait); err != nil {
			return err
		}
	}
	st, err := c.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		return err
	}
	sh, err := c.cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		return err
	}
	if opts.Output != "table" {
		// {"nodes": [...], "summary": {...}, "shards": [...]}
		var out map[string]json.RawMessage
		b, err := marshalJSON.Marshal(st.Msg)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return err
		}
		shards, err := shardsJSON(sh.Msg)
		if err != nil {
			return err
		}
		out["shards"] = shards
		b, err = json.Marshal(out)
		if err != nil {
			return err
		}
		return writeStructured(d.stdout, opts.Output, b)
	}
	writeStatusTable(d.stdout, st.Msg, sh.Msg)
	return nil
}

func writeStatusTable(w io.Writer, st *cepv1.GetStatusResponse, sh *cepv1.ListShardsResponse) {
	tw := newTable(w)
	row(tw, "NODE", "ADDRESS", "API", "STATE", "META", "REPLICAS", "RELEASE", "WRITES")
	for _, n := range st.GetNodes() {
		meta := "-"
		if n.GetIsMetaLeader() {
			meta = "leader"
		}
		state := enumName(n.GetState(), "NODE_STATE_")
		if n.GetRemoving() {
			state += ",removing"
		}
		row(tw, n.GetId(), orDash(n.GetAddress()), orDash(n.GetApiAddress()), state, meta, n.GetReplicas(), orDash(n.GetVersion()), highestVersion(n))
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = newTable(w)
	row(tw, "SHARD", "KEY GROUPS", "LEADER", "REPLICAS", "COMMIT", "APPLIED", "APPLIED BY REPLICA", "PATTERNS", "PARTIAL MATCHES", "BUFFERED EVENTS", "OUTBOX")
	for _, s := range sh.GetShards() {
		kg := s.GetKeyGroups()
		leader := s.GetLeaderNodeId()
		if leader == "" {
			leader = "NONE"
		} else if ms := s.GetNatsUnreachableMs(); ms > 0 {
			// it reads and publishes nothing until it reaches NATS again
			// or hands over
			leader += fmt.Sprintf(" (NO NATS %s)", (time.Duration(ms) * time.Millisecond).Round(time.Second))
		}
		row(tw, s.GetId(), fmt.Sprintf("%d-%d", kg.GetFirst(), kg.GetLast()), leader, replicas(s.GetReplicas()),
			s.GetCommitIndex(), s.GetLastAppliedIndex(), replicaApplied(s.GetReplicas()), s.GetPatterns(), s.GetPartialMatches(), s.GetBufferedEvents(), s.GetOutboxRecords())
	}
	tw.Flush()
	for _, s := range sh.GetShards() {
		for _, u := range s.GetUnreadStreams() {
			fmt.Fprintf(w, "shard %d does not read stream %s\n", s.GetId(), u)
		}
	}
	fmt.Fprintln(w)
	// a damaged replica, closed until it is rebuilt (the shard stopped
	// when it has no other)
	for _, s := range sh.GetShards() {
		if s.GetQuarantined() != "" {
			fmt.Fprintf(w, "shard %d STOPPED: replica %s\n", s.GetId(), s.GetQuarantined())
			continue
		}
		for _, r := range s.GetReplicas() {
			if r.GetQuarantined() != "" {
				fmt.Fprintf(w, "shard %d: replica on %s quarantined, rebuilding: %s\n", s.GetId(), r.GetNodeId(), r.GetQuarantined())
			}
		}
	}
	writeClocks(w, sh)
	fmt.Fprintln(w, summaryLine(st.GetSummary()))
}

// replicas lists a shard's replicas as "n1,n2,n3(nonvoter)".
func replicas(rs []*cepv1.Replica) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.GetNodeId()
		if r.GetSuffrage() == cepv1.Suffrage_SUFFRAGE_NONVOTER {
			parts[i] += "(nonvoter)"
		}
		if r.GetNatsUnreachable() {
			parts[i] += "(no NATS)"
		}
		if r.GetQuarantined() != "" {
			parts[i] += "(quarantined)"
		}
	}
	return joinOrDash(parts)
}

// replicaApplied lists each replica's applied index as its own node
// reports it, as "n1=42,n2=41,n3=unknown" (unknown: the node did not
// answer).
func replicaApplied(rs []*cepv1.Replica) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		if r.GetAppliedUnknown() {
			parts[i] = r.GetNodeId() + "=unknown"
		} else {
			parts[i] = fmt.Sprintf("%s=%d", r.GetNodeId(), r.GetAppliedIndex())
		}
	}
	return joinOrDash(parts)
}

// shardsJSON is the shards of sh as JSON, without the applied index of a
// replica whose node did not report it (a 0 there would read as "behind").
func shardsJSON(sh *cepv1.ListShardsResponse) (json.RawMessage, error) {
	b, err := marshalJSON.Marshal(sh)
	if err != nil {
		return nil, err
	}
	var s struct {
		Shards []map[string]json.RawMessage `json:"shards"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	for i, shard := range s.Shards {
		var reps []map[string]json.RawMessage
		if err := json.Unmarshal(shard["replicas"], &reps); err != nil {
			return nil, err
		}
		for j, rep := range reps {
			if sh.GetShards()[i].GetReplicas()[j].GetAppliedUnknown() {
				delete(rep, "appliedIndex")
			}
		}
		if shard["replicas"], err = json.Marshal(reps); err != nil {
			return nil, err
		}
	}
	if s.Shards == nil {
		return json.RawMessage("[]"), nil
	}
	return json.Marshal(s.Shards)
}

// summaryLine is e.g. "3 nodes (3 alive), meta leader n1 at index 42;
// 4 shards over 256 key groups, all led; 2 patterns, 1 source; NATS
// nats://10.0.0.1:4222".
func summaryLine(s *cepv1.ClusterSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d alive", plural(s.GetNodes(), "node"), s.GetAlive())
	if s.GetSuspect() > 0 {
		fmt.Fprintf(&b, ", %d suspect", s.GetSuspect())
	}
	if s.GetDead() > 0 {
		fmt.Fprintf(&b, ", %d dead", s.GetDead())
	}
	b.WriteString("), ")
	if s.GetMetaLeaderId() == "" {
		b.WriteString("NO META LEADER")
	} else {
		fmt.Fprintf(&b, "meta leader %s", s.GetMetaLeaderId())
	}
	fmt.Fprintf(&b, " at index %d; %s over %s, ", s.GetMetaCommitIndex(), plural(s.GetShards(), "shard"), plural(s.GetKeyGroups(), "key group"))
	if n := s.GetShardsWithoutLeader(); n > 0 {
		fmt.Fprintf(&b, "%d WITHOUT A LEADER", n)
	} else {
		b.WriteString("all led")
	}
	fmt.Fprintf(&b, "; %s, %s", plural(s.GetPatterns(), "pattern"), plural(s.GetSources(), "source"))
	if u := s.GetNatsUrl(); u != "" {
		fmt.Fprintf(&b, "; NATS %s", u)
	}
	if v := s.GetClusterVersion(); v > 0 {
		fmt.Fprintf(&b, "; cluster version v%d", v)
	}
	if s.GetInsecure() {
		b.WriteString("; INSECURE: no cluster secret, members do not authenticate each other (cepnode --insecure)")
	}
	return b.String()
}

// formatEventTime writes an event time (Unix ms) as RFC 3339 in UTC,
// with the milliseconds; -o json keeps the number.
func formatEventTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// writeClocks lists each shard's source clocks (docs/time.md): the
// watermark it logged, how far it trails the newest event there, and
// whether the shard is idle for the source. Nothing without clocks.
func writeClocks(w io.Writer, sh *cepv1.ListShardsResponse) {
	tw := newTable(w)
	anyClock := false
	for _, s := range sh.GetShards() {
		for _, c := range s.GetClocks() {
			if !anyClock {
				row(tw, "SHARD", "SOURCE", "PATTERN", "WATERMARK", "LAG", "IDLE")
				anyClock = true
			}
			wm, lag, idle := "-", "-", "-"
			if c.GetHasWatermark() {
				wm = formatEventTime(c.GetWatermarkMs())
				if c.GetHasNewestEvent() {
					lag = (time.Duration(max(0, c.GetNewestEventMs()-c.GetWatermarkMs())) * time.Millisecond).String()
				}
			}
			if c.GetIdleKnown() {
				idle = strconv.FormatBool(c.GetIdle())
			}
			row(tw, s.GetId(), c.GetSource(), c.GetPattern(), wm, lag, idle)
		}
	}
	if anyClock {
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// highestVersion is the highest cluster version a node's release writes,
// as status prints it: "v2"; "v1?" for a node that says none (a release
// before cluster versions, or one not seen: taken for the base version).
func highestVersion(n *cepv1.Node) string {
	if v := n.GetHighestVersion(); v > 0 {
		return fmt.Sprintf("v%d", v)
	}
	return "v1?"
}
