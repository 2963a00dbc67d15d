package hclogslog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclog's levels, names and key/value pairs arrive in slog as slog's own,
// and SetLevel sets a floor for the logger and those derived from it.
func TestLevelsNamesAndArgs(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))).Named("raft").With("shard", 3)
	l.Error("failed to make requestVote RPC", "target", "n2")
	l.Debug("dropped", "n", 1)
	l.SetLevel(hclog.Warn)
	l.Named("net").Info("chatty")
	l.Warn("heartbeat timeout reached")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("from the standard logger\n")
	got := buf.String()
	for _, want := range []string{
		`level=ERROR msg="failed to make requestVote RPC" shard=3 logger=raft target=n2`,
		`level=DEBUG msg=dropped shard=3 logger=raft n=1`,
		`level=WARN msg="heartbeat timeout reached" shard=3 logger=raft`,
		`level=ERROR msg="from the standard logger" shard=3 logger=raft`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatty") {
		t.Errorf("an info line passed a warn floor:\n%s", got)
	}
}

// Values hclog formats itself arrive formatted: raft logs its
// configuration as "servers", hclog.Fmt("%+v", servers), which must read
// as the servers, not as the format string and a slice.
func TestFormattedValues(t *testing.T) {
	var buf bytes.Buffer
	type server struct{ ID, Address string }
	servers := []server{{"n1", "127.0.0.1:7001"}, {"n2", "127.0.0.1:7002"}}
	l := New(slog.New(slog.NewTextHandler(&buf, nil))).With("group", hclog.Fmt("shard-%d", 7))
	l.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", servers),
		"flags", hclog.Hex(255), "mode", hclog.Octal(8), "bits", hclog.Binary(5), "name", hclog.Quote("a b"))
	got := buf.String()
	want := []string{
		`group=shard-7`,
		`servers="` + fmt.Sprintf("%+v", servers) + `"`,
		`flags=0xff`, `mode=010`, `bits=0b101`, `name="\"a b\""`,
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("no %s in:\n%s", w, got)
		}
	}
	if strings.Contains(got, "%+v") || strings.Contains(got, "%d") {
		t.Errorf("a format string left unformatted:\n%s", got)
	}
}

// raft's periodic snapshot check that finds nothing new logs an error;
// it arrives as a debug line, and any other failure to snapshot as the
// error it is.
func TestNothingNewToSnapshotIsNoError(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Error("failed to take snapshot", "error", raft.ErrNothingNewToSnapshot)
	l.Error("failed to take snapshot", "error", fmt.Errorf("disk full"))
	got := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="failed to take snapshot" error="nothing new to snapshot"`,
		`level=ERROR msg="failed to take snapshot" error="disk full"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}

// While a peer is down every group logs each failed heartbeat: one line
// per message and peer per window, the first saying so and the next
// carrying the count left out; other peers and other messages are not
// held back, nor are lines below Warn or without a peer.
func TestPeerFailuresLoggedOncePerWindow(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := newRepeats(func() time.Time { return now }, 30*time.Second)
	root := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))).(*hclogAdapter)
	root.repeats = r
	groups := []hclog.Logger{root.With("group", "meta"), root.With("group", "shard-1"), root.With("group", "shard-2")}
	for range 10 { // 10 heartbeats a second for 10 s, in every group
		for _, g := range groups {
			g.Error("failed to heartbeat to", "peer", "n3:7000", "error", "connection refused")
		}
		now = now.Add(time.Second)
	}
	groups[0].Error("failed to heartbeat to", "peer", "n2:7000", "error", "connection refused")
	groups[0].Warn("failed to contact", "server-id", "n3", "time", "10s")
	groups[0].Error("failed to commit logs", "error", "disk full")
	groups[0].Error("failed to commit logs", "error", "disk full")
	groups[0].Debug("failed to heartbeat to", "peer", "n3:7000")
	now = now.Add(25 * time.Second)
	groups[1].Error("failed to heartbeat to", "peer", "n3:7000", "error", "connection refused")
	got := buf.String()
	count := func(s string) int { return strings.Count(got, s) }
	if n := count(`msg="failed to heartbeat to"`); n != 4 { // n3 twice, n2 once, the debug line once
		t.Errorf("%d heartbeat lines, want 4:\n%s", n, got)
	}
	if n := count(`repeats="logged at most once per 30s"`); n != 3 {
		t.Errorf("%d first lines saying so, want 3 (n3, n2, contact):\n%s", n, got)
	}
	if !strings.Contains(got, `group=shard-1 peer=n3:7000 error="connection refused" left_out=29 in_last=35s`) {
		t.Errorf("no count of the 29 left out:\n%s", got)
	}
	if n := count(`msg="failed to commit logs"`); n != 2 {
		t.Errorf("a message about no peer was held back (%d lines):\n%s", n, got)
	}
}
