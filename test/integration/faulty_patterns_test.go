package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
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
	n := startConfigured(t, cluster.Config{StreamCheckEvery: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sb strings.Builder
	sb.WriteString("name: doubling\nsource: bank\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n")
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&sb, "  - name: b%d\n    contiguity: followedByAny\n    where: e.type == \"B\"\n", i)
	}
	sb.WriteString("  - name: c\n    contiguity: followedByAny\n    where: e.type == \"C\"\n")
	spec := []byte(sb.String())
	deployOnBank(t, ctx, n, spec)

	var lines []string
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

	dropped := offlineStats(t, spec, lines).Dropped
	if dropped == 0 {
		t.Fatal("the offline engine dropped nothing; the test would prove nothing")
	}
	publishAndCompare(t, n.NATSURL(), spec, "cep.out.doubling", lines, 60*time.Second)
	if got := metric(t, n, "cep_partial_matches_dropped_total", `pattern="doubling"`); got != float64(dropped) {
		t.Fatalf("cep_partial_matches_dropped_total %v, want the offline engine's %d", got, dropped)
	}
	// the shard leader says so, once
	want := fmt.Sprintf("pattern=doubling version=1 bound=%d dropped=%d", nfa.DefaultMaxPartialMatches, dropped)
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), want) {
			return fmt.Errorf("no warning with %q in the log:\n%s", want, logs.String())
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if c := strings.Count(logs.String(), "partial matches than the bound per key"); c != 1 {
		t.Fatalf("the warning is logged %d times, want once:\n%s", c, logs.String())
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
	n := startConfigured(t, cluster.Config{StreamCheckEvery: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := []byte("name: big\nsource: bank\nkey: e.account\ntime: e.ts\nemit:\n  cur: e.currency\nstages:\n  - name: a\n    where: e.amount > 100\n")
	deployOnBank(t, ctx, n, spec)
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
	publishAndCompare(t, n.NATSURL(), spec, "cep.out.big", lines, 30*time.Second)
	checkFor(t, 10*time.Second, func() error {
		c := metric(t, n, "cep_condition_errors_total", `pattern="big"`)
		e := metric(t, n, "cep_emit_errors_total", `pattern="big"`)
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
