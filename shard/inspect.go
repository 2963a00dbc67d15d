package shard

import (
	"fmt"

	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
)

// KeyInspection is what a shard holds for one key of one pattern: the
// pattern's current version's partial matches and buffered events for
// the key (nfa.Matcher.InspectKey), with the clocks of its sources on
// this shard.
type KeyInspection struct {
	Pattern  string
	Version  uint64
	KeyGroup int
	View     nfa.KeyView
	Clocks   []SourceClock // none for a pattern on processing time
	// Draining are the older versions still finishing their partial
	// matches after an update that hold something for the key, oldest
	// first.
	Draining []DrainingView
	// Index is the log index the state had applied.
	Index uint64
}

// DrainingView is what an older version of a pattern holds for a key.
type DrainingView struct {
	Version uint64
	View    nfa.KeyView
}

// ErrNoPattern is InspectKey's error for a pattern the shard does not run.
type ErrNoPattern struct{ Pattern string }

func (e *ErrNoPattern) Error() string {
	return fmt.Sprintf("pattern %q does not run on this shard", e.Pattern)
}

// InspectKey lists what the state holds for key of pattern, at most limit
// partial matches and buffered events (limit <= 0: all). A key of a key
// group the shard does not own is an error, as is a pattern it does not
// run (*ErrNoPattern).
func (s *State) InspectKey(pattern, key string, limit int) (KeyInspection, error) {
	kg := keygroup.OfKey(key, s.groups)
	if kg < s.first || kg > s.last {
		return KeyInspection{}, fmt.Errorf("key %q is in key group %d, not in this shard's %d-%d", key, kg, s.first, s.last)
	}
	_, p := s.find(pattern)
	if p == nil {
		return KeyInspection{}, &ErrNoPattern{Pattern: pattern}
	}
	out := KeyInspection{Pattern: pattern, Version: p.deploy.Version, KeyGroup: kg, View: p.m.InspectKey(key, limit)}
	for _, d := range p.draining {
		if v := d.m.InspectKey(key, limit); v.PartialCount+v.BufferedCount > 0 {
			out.Draining = append(out.Draining, DrainingView{Version: d.version, View: v})
		}
	}
	if p.pattern.EventTime() {
		out.Clocks = s.clocksOf(p)
	}
	return out, nil
}

// InspectKey is State.InspectKey on the replica's state, under the lock
// Apply takes (the engine may index a node's edges as it reads them), so
// it sees the state between two entries.
func (f *FSM) InspectKey(pattern, key string, limit int) (KeyInspection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, err := f.state.InspectKey(pattern, key, limit)
	out.Index = f.index
	return out, err
}
