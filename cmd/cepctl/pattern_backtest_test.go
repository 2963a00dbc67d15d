package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/multiset"
	"github.com/cepcluster/cep/internal/testutil"
)

// Against a real node: the example pattern deployed, its events
// published, a version with a shorter window backtested against it. The
// records that differ are exactly those the offline engine (cepctl run)
// gives the two versions differently over the same events.
func TestPatternBacktestAgainstANode(t *testing.T) {
	url := quickStartNode(t)
	before := time.Now().Add(-time.Millisecond)
	events := "../../examples/events.jsonl"
	cepctl(t, url, "publish", "--source", "bank", "-f", events).mustOK(t)

	oldFile := "../../examples/login-fail-logout.yaml"
	b, err := os.ReadFile(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	newFile := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(newFile, bytes.Replace(b, []byte("within: 5m"), []byte("within: 2s"), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	// the reference: each version run offline over the same events
	offline := func(p string) []string {
		out, errOut, code := run(t, "", "run", "-p", p, "-i", events)
		if code != 0 {
			t.Fatalf("run %s: %s", p, errOut)
		}
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	onlyOld, onlyNew := multiset.Diff(offline(oldFile), offline(newFile))
	if len(onlyOld) == 0 || len(onlyNew) == 0 {
		t.Fatalf("the change makes no difference offline: the test shows nothing")
	}

	var got struct {
		Events                int
		OnlyNew, OnlyDeployed []json.RawMessage
		Changed               []struct {
			Deployed, New json.RawMessage
			Differences   []string
		}
		Same, NewRecords, DeployedRecords int
	}
	// the events are stored at once, but the stream's tail may lag a moment
	testutil.Eventually(t, 30*time.Second, func() error {
		r := cepctl(t, url, "pattern", "backtest", newFile, "--against", "login-fail-logout", "-o", "json")
		if r.code != 0 {
			return &testError{r.stderr}
		}
		got.Events = 0
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if got.Events != 9 {
			return &testError{"events read: " + strconv.Itoa(got.Events)}
		}
		return nil
	})
	// -o json is indented; the records are compared as cepctl run prints them
	compact := func(r json.RawMessage) string {
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	var gotOld, gotNew []string
	for _, r := range got.OnlyDeployed {
		gotOld = append(gotOld, compact(r))
	}
	for _, r := range got.OnlyNew {
		gotNew = append(gotNew, compact(r))
	}
	for _, c := range got.Changed {
		gotOld, gotNew = append(gotOld, compact(c.Deployed)), append(gotNew, compact(c.New))
		if len(c.Differences) == 0 {
			t.Errorf("a changed record without differences: %s", c.Deployed)
		}
	}
	if a, b := multiset.Diff(gotOld, onlyOld); len(a)+len(b) > 0 {
		t.Errorf("records of the deployed version only: backtest has %q more, lacks %q", a, b)
	}
	if a, b := multiset.Diff(gotNew, onlyNew); len(a)+len(b) > 0 {
		t.Errorf("records of the new version only: backtest has %q more, lacks %q", a, b)
	}
	// acc-3's login and failure time out in both, at the window's end
	found := false
	for _, c := range got.Changed {
		if strings.Contains(compact(c.Deployed), `"key":"acc-3"`) {
			found = slices.Equal(c.Differences, []string{"timeoutAt: 305000 → 7000"})
		}
	}
	if !found {
		t.Errorf("acc-3's timeout is not changed from 305000 to 7000: %+v", got.Changed)
	}

	out := cepctl(t, url, "pattern", "backtest", newFile, "--against", "login-fail-logout").mustOK(t).stdout
	if !strings.Contains(out, "the versions differ over 9 stored events") || !strings.Contains(out, "only the deployed version (") || !strings.Contains(out, "    timeoutAt: 305000 → 7000") {
		t.Errorf("table output:\n%s", out)
	}
	// before the events were stored there is nothing to compare
	out = cepctl(t, url, "pattern", "backtest", newFile, "--against", "login-fail-logout", "--to", strconv.FormatInt(before.UnixMilli(), 10)).mustOK(t).stdout
	if !strings.HasPrefix(out, "no difference over 0 stored events") {
		t.Errorf("--to before the events:\n%s", out)
	}
	// the deployed version against itself: no difference
	out = cepctl(t, url, "pattern", "backtest", oldFile, "--against", "login-fail-logout").mustOK(t).stdout
	if !strings.HasPrefix(out, "no difference over 9 stored events") {
		t.Errorf("against itself:\n%s", out)
	}
	cepctl(t, url, "pattern", "backtest", newFile, "--against", "nope").mustFail(t, "nope")
	cepctl(t, url, "pattern", "backtest", newFile, "--against", "login-fail-logout", "--max-events", "8").mustFail(t, "more than 8 events stored")
	if r := cepctl(t, url, "__complete", "pattern", "backtest", newFile, "--against", "").mustOK(t); !strings.Contains(r.stdout, "login-fail-logout") {
		t.Errorf("completing --against: %q", r.stdout)
	}

	// one key's history: the part of the stream holding acc-1 has all its
	// events, in order, and with the key kept, those alone
	c := newClients(&deps{}, globalOptions{Server: url})
	ps, err := compilePatternFiles([]string{oldFile})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := readSourceHistory(context.Background(), c, historyQuery{Source: "bank", Key: "acc-1", Keep: keepKey(ps[0], "acc-1")})
	if err != nil {
		t.Fatal(err)
	}
	var want, have []string
	lines, _ := os.ReadFile(events)
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		if strings.Contains(l, `"acc-1"`) {
			want = append(want, l)
		}
	}
	for _, e := range hist {
		have = append(have, string(e.JSON))
	}
	if !slices.Equal(have, want) {
		t.Errorf("acc-1's history:\n%s\nwant\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
	if last, err := readSourceHistory(context.Background(), c, historyQuery{Source: "bank", Last: 2}); err != nil || len(last) != 2 || !strings.Contains(string(last[1].JSON), `"ts":7000`) {
		t.Errorf("the last 2 events: %+v, %v", last, err)
	}
}
