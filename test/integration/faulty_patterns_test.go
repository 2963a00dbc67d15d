package integration

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/nfa"
)

// A pattern whose partial matches double with each event of one key (an
// A, then fourteen followedByAny B's) would hold 2^20 of them after twenty
// B's, and every replica would run out of memory applying the same log
// again after each restart. The engine keeps 100,000 per key; the shard
// goes on applying, other keys still match, the output is the offline
// engine's, and cep_partial_matches_dropped_total names the pattern.
func TestExplodingPatternIsBounded(t *testing.T) {
	var logs lockedBuffer
	tc := newSingle(t, 90*time.Second, cluster.Config{StreamCheckEvery: 100 * time.Millisecond,
		Logger: logs.warnings()})
	spec, lines := doubling()
	tc.deployOnBank(0, spec)

	dropped := offlineStats(t, spec, lines).Dropped
	if dropped == 0 {
		t.Fatal("the offline engine dropped nothing; the test would prove nothing")
	}
	tc.publishAndCompare(spec, "cep.out.doubling", lines, 60*time.Second)
	if got := tc.metric(0, "cep_partial_matches_dropped_total", `pattern="doubling"`); got != float64(dropped) {
		t.Fatalf("cep_partial_matches_dropped_total %v, want the offline engine's %d", got, dropped)
	}
	// the shard leader says so, once, with what had been dropped when it
	// looked (its check runs every StreamCheckEvery while events apply)
	want := regexp.MustCompile(fmt.Sprintf(`pattern=doubling version=1 bound=%d dropped=([0-9]+)`, nfa.DefaultMaxPartialMatches))
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		m := want.FindStringSubmatch(logs.String())
		if m == nil {
			return fmt.Errorf("no warning matching %q in the log:\n%s", want, logs.String())
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 || n > int(dropped) {
			return fmt.Errorf("the warning says %s dropped, want 1 to %d:\n%s", m[1], dropped, logs.String())
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if c := strings.Count(logs.String(), "partial matches than the bound per key"); c != 1 {
		t.Fatalf("the warning is logged %d times, want once:\n%s", c, logs.String())
	}
}

// doubling is a pattern whose partial matches double with every B after
// an A (14 followedByAny stages of B), and events that make a key ("hot")
// hold 2^20 of them, and another ("cold") complete a match.
func doubling() (spec []byte, lines []string) {
	var sb strings.Builder
	sb.WriteString("name: doubling\nsource: bank\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n")
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&sb, "  - name: b%d\n    contiguity: followedByAny\n    where: e.type == \"B\"\n", i)
	}
	sb.WriteString("  - name: c\n    contiguity: followedByAny\n    where: e.type == \"C\"\n")
	ts := 1000
	add := func(account, typ string) {
		ts++
		lines = append(lines, fmt.Sprintf(`{"account":%q,"type":%q,"ts":%d}`, account, typ, ts))
	}
	add("hot", "A")
	for range 20 {
		add("hot", "B")
	}
	add("cold", "A")
	for range 14 {
		add("cold", "B")
	}
	add("cold", "C")
	add("cold", "A") // moves the watermark past the C
	return []byte(sb.String()), lines
}

// A deployment chooses the record types its pattern publishes (the others
// are counted and dropped) and its bound on partial matches per key; an
// update that leaves them out keeps them. The records on NATS equal the
// offline engine's with the same bound, of the chosen types.
func TestDeployOutputOptions(t *testing.T) {
	tc := newSingle(t, 90*time.Second, cluster.Config{Shards: 1})
	c, ctx := tc.client(0), tc.ctx
	tc.createBank(c)
	matches := []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH}
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec), Records: matches})
	spec, lines := doubling()
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec), MaxPartialMatches: new(uint64(50))})
	// the doubling events come first: the bank events after them are late
	// for both patterns at first, then not
	lines = append(lines, bankEvents(41, 600)...)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	var want []string
	for _, r := range offline(t, lflSpec, lines) {
		if strings.HasPrefix(r, `{"type":"match"`) {
			want = append(want, r)
		}
	}
	if len(want) == 0 || len(want) == len(offline(t, lflSpec, lines)) {
		t.Fatalf("the offline engine makes %d matches of %d records; the test would prove nothing", len(want), len(offline(t, lflSpec, lines)))
	}
	// (in what order a shard reports records of different keys depends on
	// how often its watermark moves: compared as multisets)
	got := withoutIDs(tc.waitOutputs("cep.out.lfl", len(want), time.Minute))
	slices.Sort(got)
	slices.Sort(want)
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("lfl publishing only matches: %s", d)
	}

	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, want := offlineRunner(t, p, lines, func(m *nfa.Matcher) { c := m.Config(); c.MaxPartialMatches = 50; m.Configure(c) })
	dropped := r.Matchers()[0].Stats().Dropped
	if dropped == 0 || len(want) == 0 {
		t.Fatalf("the offline engine with a bound of 50 dropped %d partial matches and made %d records; the test would prove nothing", dropped, len(want))
	}
	got = withoutIDs(tc.waitOutputs("cep.out.doubling", len(want), time.Minute))
	slices.Sort(got)
	slices.Sort(want)
	if d := differsFromOffline(got, want, string(spec)); d != "" {
		t.Fatalf("doubling with a bound of 50: %s", d)
	}
	if m := tc.metric(0, "cep_partial_matches_dropped_total", `pattern="doubling"`); m != float64(dropped) {
		t.Fatalf("cep_partial_matches_dropped_total %v, want the offline engine's %d", m, dropped)
	}

	// the API shows them, and an update without them keeps them
	up, err := c.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Spec: string(lflSpec), Policy: cepv1.UpdatePolicy_UPDATE_POLICY_RESET}))
	if err != nil {
		t.Fatal(err)
	}
	if got := up.Msg.Pattern; !slices.Equal(got.Records, matches) || got.MaxPartialMatches != nfa.DefaultMaxPartialMatches {
		t.Fatalf("lfl after an update: records %v, bound %d", got.Records, got.MaxPartialMatches)
	}
	g, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "doubling"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Msg.Pattern; len(got.Records) != 3 || got.MaxPartialMatches != 50 {
		t.Fatalf("doubling: records %v, bound %d", got.Records, got.MaxPartialMatches)
	}
	// so does its output subject (the name comes from the spec)
	custom := []byte(strings.Replace(string(lflSpec), "name: lfl", "name: custom", 1))
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(custom), OutputSubject: "cep.out.alerts"})
	up, err = c.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Spec: string(custom)}))
	if err != nil || up.Msg.Pattern.OutputSubject != "cep.out.alerts" {
		t.Fatalf("update of a pattern with its own output subject: %v, subject %q", err, up.Msg.GetPattern().GetOutputSubject())
	}

	// a bound over the largest allowed, an unknown record type
	for _, r := range []*cepv1.DeployPatternRequest{
		{Spec: string(lflSpec), Name: "big", MaxPartialMatches: new(uint64(1 << 40))},
		{Spec: string(lflSpec), Name: "odd", Records: []cepv1.RecordType{9}},
	} {
		if _, err := c.patterns.DeployPattern(ctx, req(r)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("deploy %s: %v, want InvalidArgument", r.Name, err)
		}
	}
}

// offlineStats runs spec over lines as offline does and returns the
// matcher's statistics.
func offlineStats(t *testing.T, spec []byte, lines []string) nfa.Stats {
	t.Helper()
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := offlineRunner(t, p, lines)
	return r.Matchers()[0].Stats()
}

// lockedBuffer is a log destination the test reads while the node writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// warnings is a logger writing warnings and errors to l.
func (l *lockedBuffer) warnings() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A condition on a field the events lack fails and counts as false, and
// an emitted field that fails is null: the pattern's metrics count both as
// the offline engine does, and the shard leader logs the first of each, once.
func TestFailedExpressionsAreCountedAndLogged(t *testing.T) {
	var logs lockedBuffer
	tc := newSingle(t, 60*time.Second, cluster.Config{StreamCheckEvery: 100 * time.Millisecond,
		Logger: logs.warnings()})
	spec := []byte("name: big\nsource: bank\nkey: e.account\ntime: e.ts\nemit:\n  cur: e.currency\nstages:\n  - name: a\n    where: e.amount > 100\n")
	tc.deployOnBank(0, spec)
	var lines []string
	for i := range 10 {
		if i%2 == 0 {
			lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","type":"LOGIN","ts":%d}`, i%3, 1000+i))
		} else {
			lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","type":"PAY","amount":%d,"ts":%d}`, i%3, 50*i, 1000+i))
		}
	}
	st := offlineStats(t, spec, lines)
	if st.ConditionErrors == 0 || st.EmitErrors == 0 {
		t.Fatalf("offline: %+v; the test would prove nothing", st)
	}
	tc.publishAndCompare(spec, "cep.out.big", lines, 30*time.Second)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		c := tc.metric(0, "cep_condition_errors_total", `pattern="big"`)
		e := tc.metric(0, "cep_emit_errors_total", `pattern="big"`)
		if c != float64(st.ConditionErrors) || e != float64(st.EmitErrors) {
			return fmt.Errorf("cep_condition_errors_total %v, cep_emit_errors_total %v; the offline engine counts %d and %d", c, e, st.ConditionErrors, st.EmitErrors)
		}
		out := logs.String()
		for _, want := range []string{`first="e.amount > 100: no such key: amount"`, `first="cur: no such key: currency"`} {
			if strings.Count(out, want) != 1 {
				return fmt.Errorf("the log has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
			}
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // three more checks: nothing is logged again
	if out := logs.String(); strings.Count(out, "no such key") != 2 {
		t.Fatalf("the failures were logged more than once:\n%s", out)
	}
}
