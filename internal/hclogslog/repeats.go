package hclogslog

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// RepeatWindow is how often one warning or error about one peer is
// logged. While a member is down, every Raft group that replicates to it
// reports each failed heartbeat and election round, tens of lines a
// second for one fact; the first says so, the rest are counted and the
// count comes with the next line logged after the window.
const RepeatWindow = 30 * time.Second

// peerArgs are the arguments raft names the other side by.
var peerArgs = map[string]bool{"peer": true, "server-id": true, "target": true, "candidate": true}

// repeats remembers, per message and peer, when it was last logged and
// how many were left out since. It is shared by every adapter of the
// process: the groups of one node report the same dead peer.
type repeats struct {
	mu     sync.Mutex
	now    func() time.Time
	window time.Duration
	seen   map[repeatKey]*repeat
}

type repeatKey struct{ msg, peer string }

type repeat struct {
	logged  time.Time
	dropped int
}

var processRepeats = newRepeats(time.Now, RepeatWindow)

func newRepeats(now func() time.Time, window time.Duration) *repeats {
	return &repeats{now: now, window: window, seen: map[repeatKey]*repeat{}}
}

// peerOf returns the peer a message is about, if any.
func peerOf(args []any) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && peerArgs[k] {
			return fmt.Sprint(args[i+1]), true
		}
	}
	return "", false
}

// admit decides whether a warning or error about a peer is logged now;
// when it is, extra are the arguments to add: how many like it were left
// out since the last, or, on the first, that repeats will be.
func (r *repeats) admit(level hclog.Level, msg string, args []any) (ok bool, extra []any) {
	if level < hclog.Warn {
		return true, nil
	}
	peer, about := peerOf(args)
	if !about {
		return true, nil
	}
	k := repeatKey{msg, peer}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.seen[k]
	if e == nil {
		r.forgetOld(now)
		r.seen[k] = &repeat{logged: now}
		return true, []any{"repeats", fmt.Sprintf("logged at most once per %s", r.window)}
	}
	if now.Sub(e.logged) < r.window {
		e.dropped++
		return false, nil
	}
	dropped, since := e.dropped, now.Sub(e.logged)
	e.logged, e.dropped = now, 0
	if dropped == 0 {
		return true, nil
	}
	return true, []any{"left_out", dropped, "in_last", since.Round(time.Second).String()}
}

// forgetOld drops what has been quiet for ten windows, so that the
// table stays as small as the set of peers currently failing.
func (r *repeats) forgetOld(now time.Time) {
	if len(r.seen) < 64 {
		return
	}
	for k, e := range r.seen {
		if now.Sub(e.logged) > 10*r.window {
			delete(r.seen, k)
		}
	}
}
