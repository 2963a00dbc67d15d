package hclogslog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
