package expr

// fakeCtx serves events() from a map of stage name to accepted events.
type fakeCtx map[string][]Event

func (f fakeCtx) EventsFor(stage string) []Event { return f[stage] }
