package nfa

// Config is how a Matcher runs. It is given when the matcher is built
// (NewMatcherWith) and is part of neither its output's encoding nor its
// state: a matcher built from state (restored, migrated) takes its
// deployment's with Configure. Start from DefaultConfig: its zero value
// reports no timeouts and lets no event move the watermark.
//
// One mode changes while a matcher runs: whether it takes its sources'
// clock across shards (SetClocked).
type Config struct {
	// AutoWatermark: when true (the default) the watermark follows the
	// events (max seen − outOfOrderness − 1); when false only Watermark
	// calls advance it, as in a cluster where the leader logs watermarks.
	AutoWatermark bool

	// Clocked: the watermark is a source's clock across shards, logged by
	// the leader (Clock). The events still move the source's own
	// progress (SourceProgress, what this shard reports of the source)
	// but not the watermark: a shard must not run ahead of the other
	// partitions of its sources.
	Clocked bool

	// MaxPartialMatches bounds the partial matches holding events that one
	// key keeps (DefaultMaxPartialMatches by default; 0 or less: no
	// bound). Flink keeps every one, so a pattern whose partial matches
	// multiply with each event (followedByAny into a loop with
	// allowCombinations, say) makes a key's state and the time of each of
	// its events grow exponentially until memory runs out. Past the bound,
	// the step that made too many keeps the earliest by start (Flink's
	// queue order: start time, start event, then position in the queue)
	// and discards the others without a record; Stats.Dropped counts them.
	// The choice depends only on the state, so replicas agree.
	MaxPartialMatches int

	// MaxStepsPerEvent bounds the work of one event on one key
	// (DefaultMaxStepsPerEvent by default; 0 or less: no bound):
	// partial matches visited plus events read into completed matches.
	// MaxPartialMatches bounds how many partial matches a key holds, not
	// what an event costs: under followedByAny with allowCombinations
	// each of them completes a match as long as the key's history on every
	// event. Once a step reaches the bound, the partial matches it has not
	// visited yet lose the event — the started ones are discarded, start
	// states kept —, the completed matches not yet read are discarded
	// without a record, and the key then keeps only the earlier half of its
	// partial matches (as MaxPartialMatches does), so that the next event
	// costs less. Stats.Dropped counts what is discarded, Stats.StepCapped
	// the events. It depends only on the state, so replicas agree.
	MaxStepsPerEvent int

	// ReportTimeouts: when true (the default) every partial match whose
	// window passes is returned as a "timeout" record. When false it is
	// discarded as Flink's NFA does for a job without a timeout handler:
	// counted in Stats.Timeouts, its events not read and no record built.
	// The state is the same either way.
	ReportTimeouts bool

	// MaxKeys bounds the keys the matcher holds state for (0: none): Offer
	// refuses an event of a new key past it (RefusedKeys). Keys whose state
	// empties are dropped and no longer count; a late event takes no state,
	// so it is let through to its late record.
	MaxKeys int

	// MaxStateBytes bounds the raw bytes of the events held (StateBytes,
	// with Arrival.Held; 0: none): Offer refuses an event that would take
	// them past it (RefusedStateBytes). A late event takes no state and is
	// let through.
	MaxStateBytes int64
}

// DefaultConfig is a new Matcher's Config: the watermark follows the
// events, timeouts are reported, partial matches and steps are bounded by
// their defaults, keys and bytes are not.
func DefaultConfig() Config {
	return Config{
		AutoWatermark:     true,
		MaxPartialMatches: DefaultMaxPartialMatches,
		MaxStepsPerEvent:  DefaultMaxStepsPerEvent,
		ReportTimeouts:    true,
	}
}

// Config returns the matcher's Config.
func (m *Matcher) Config() Config { return m.cfg }

// Configure gives a matcher built from state — restored
// (UnmarshalHeader, UnmarshalMatcher), migrated (Migrate) — or one that
// drains under the deployment that replaced it, its deployment's Config,
// whatever it had: a replica restored from a snapshot and one that
// applied the log must run alike. It changes no state and returns no
// records: a matcher it takes off the clock moves its watermark with its
// next event, where SetClocked(false) moves it at once.
func (m *Matcher) Configure(c Config) { m.cfg = c }

// SetClocked starts or stops taking the sources' clock across shards
// (Config.Clocked): the one mode that changes while a pattern runs, as
// its deployment does. Stopping moves the watermark at once (Unclock) and
// returns what that produces.
func (m *Matcher) SetClocked(on bool) []Record {
	if !on {
		return m.Unclock()
	}
	m.cfg.Clocked = true
	return nil
}
