package transport

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/internal/testutil"
)

// A guarded replica refuses the votes and pre-votes it is asked for and
// asks for none, while every other RPC passes both ways; released, it
// votes and asks again.
func TestVoteGuard(t *testing.T) {
	log := testutil.Logger(t, slog.LevelInfo)
	a, b := newTestMux(t, log, time.Second), newTestMux(t, log, time.Second)
	ta := NewTransport(mustLayer(t, a, 1), log)
	defer ta.Close()
	guard := NewVoteGuard(NewTransport(mustLayer(t, b, 1), log))
	defer guard.Close()
	addrA, addrB := raft.ServerAddress(a.Addr().String()), raft.ServerAddress(b.Addr().String())

	// what reaches b's consumer is answered as a replica that grants
	// everything would; what the guard answers never reaches it
	reached := make(chan string, 8)
	done, served := make(chan struct{}), make(chan struct{})
	defer func() { close(done); <-served }()
	go func() {
		defer close(served)
		for {
			var rpc raft.RPC
			select {
			case rpc = <-guard.Consumer():
			case <-done:
				return
			}
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				reached <- "vote"
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case *raft.RequestPreVoteRequest:
				reached <- "prevote"
				rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
			case *raft.AppendEntriesRequest:
				reached <- "append"
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			}
		}
	}()
	ask := func() (vote, prevote bool) {
		t.Helper()
		var v raft.RequestVoteResponse
		if err := ta.RequestVote("b", addrB, &raft.RequestVoteRequest{Term: 2}, &v); err != nil {
			t.Fatal(err)
		}
		var p raft.RequestPreVoteResponse
		if err := ta.RequestPreVote("b", addrB, &raft.RequestPreVoteRequest{Term: 2}, &p); err != nil {
			t.Fatal(err)
		}
		return v.Granted, p.Granted
	}
	if v, p := ask(); v || p {
		t.Fatalf("held: vote granted %v, pre-vote granted %v", v, p)
	}
	var ae raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", addrB, &raft.AppendEntriesRequest{Term: 2}, &ae); err != nil || !ae.Success {
		t.Fatalf("held: append entries %v, %v", ae.Success, err)
	}
	if got := <-reached; got != "append" {
		t.Fatalf("held: %s reached the replica, want only the append", got)
	}
	var v raft.RequestVoteResponse
	if err := guard.RequestVote("a", addrA, &raft.RequestVoteRequest{Term: 2}, &v); !errors.Is(err, errVotesWithheld) {
		t.Fatalf("held: the replica asked for a vote: %v", err)
	}
	var p raft.RequestPreVoteResponse
	if err := guard.RequestPreVote("a", addrA, &raft.RequestPreVoteRequest{Term: 2}, &p); !errors.Is(err, errVotesWithheld) {
		t.Fatalf("held: the replica asked for a pre-vote: %v", err)
	}

	guard.Release()
	if v, p := ask(); !v || !p {
		t.Fatalf("released: vote granted %v, pre-vote granted %v", v, p)
	}
	if got := []string{<-reached, <-reached}; got[0] != "vote" || got[1] != "prevote" {
		t.Fatalf("released: %v reached the replica", got)
	}
}
