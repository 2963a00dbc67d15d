package nfa_test

import (
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// configure changes m's Config by f, as a caller that builds a matcher
// from state does (Matcher.Configure).
func configure(m *nfa.Matcher, f func(*nfa.Config)) {
	c := m.Config()
	f(&c)
	m.Configure(c)
}

// A new matcher runs with DefaultConfig, which bounds partial matches
// and steps and reports timeouts, and a restored one takes what it is
// given: modes are not state.
func TestDefaultConfig(t *testing.T) {
	p := mustCompile(t, doublingSpec())
	m := nfa.NewMatcher(p)
	if got, want := m.Config(), nfa.DefaultConfig(); got != want {
		t.Fatalf("NewMatcher's config %+v, want %+v", got, want)
	}
	if c := m.Config(); !c.AutoWatermark || !c.ReportTimeouts || c.MaxPartialMatches != nfa.DefaultMaxPartialMatches ||
		c.MaxStepsPerEvent != nfa.DefaultMaxStepsPerEvent || c.MaxKeys != 0 || c.MaxStateBytes != 0 || c.Clocked {
		t.Fatalf("DefaultConfig %+v", c)
	}
	cfg := nfa.DefaultConfig()
	cfg.MaxPartialMatches, cfg.ReportTimeouts = 3, false
	b, _ := nfa.NewMatcherWith(p, cfg).MarshalBinary()
	r, err := nfa.UnmarshalMatcher(p, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config() != nfa.DefaultConfig() {
		t.Fatalf("restored config %+v, want the default until configured", r.Config())
	}
	r.Configure(cfg)
	if r.Config() != cfg {
		t.Fatalf("configured %+v, want %+v", r.Config(), cfg)
	}
}
