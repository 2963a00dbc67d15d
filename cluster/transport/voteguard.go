package transport

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// VoteGuard is a Raft transport that withholds a replica's votes: it
// answers vote and pre-vote requests with a refusal and sends none, until
// released. Everything else passes. A replica rebuilding its log from
// nothing (a quarantined metadata replica) runs behind one: a member that
// lost the entries it once acknowledged must not help elect a leader that
// lacks them.
type VoteGuard struct {
	*Transport
	held  atomic.Bool
	in    chan raft.RPC
	stop  chan struct{}
	close sync.Once
}

// NewVoteGuard wraps t, votes held.
func NewVoteGuard(t *Transport) *VoteGuard {
	g := &VoteGuard{Transport: t, in: make(chan raft.RPC), stop: make(chan struct{})}
	g.held.Store(true)
	// owned by the guard: it ends when the transport closes (raft's
	// Shutdown closes it)
	go g.forward()
	return g
}

var errVotesWithheld = errors.New("votes withheld: this replica is rebuilding its log")

func (g *VoteGuard) forward() {
	src := g.Transport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-src:
		case <-g.stop:
			return
		}
		if g.held.Load() {
			switch req := rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: false}, nil)
				continue
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: false}, nil)
				continue
			}
		}
		select {
		case g.in <- rpc:
		case <-g.stop:
			return
		}
	}
}

// Release lets the replica vote again (it has caught up).
func (g *VoteGuard) Release() { g.held.Store(false) }

func (g *VoteGuard) Consumer() <-chan raft.RPC { return g.in }

func (g *VoteGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.held.Load() {
		return errVotesWithheld
	}
	return g.Transport.RequestVote(id, target, args, resp)
}

func (g *VoteGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.held.Load() {
		return errVotesWithheld
	}
	return g.Transport.RequestPreVote(id, target, args, resp)
}

func (g *VoteGuard) Close() error {
	g.close.Do(func() { close(g.stop) })
	return g.Transport.Close()
}
