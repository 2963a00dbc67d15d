package api

import (
	"github.com/cepcluster/cep/api/apitest"
)

// The fakes live in apitest (shared with cepctl's tests); these aliases keep
// the tests' names short.
type (
	fakePatterns   = apitest.Patterns
	fakeSources    = apitest.Sources
	fakeCluster    = apitest.Cluster
	fakeSavepoints = apitest.Savepoints
	fakeMatches    = apitest.Matches
)

var (
	_ PatternBackend   = (*fakePatterns)(nil)
	_ SourceBackend    = (*fakeSources)(nil)
	_ ClusterBackend   = (*fakeCluster)(nil)
	_ SavepointBackend = (*fakeSavepoints)(nil)
	_ MatchBackend     = (*fakeMatches)(nil)

	_ PublishAccessBackend   = (*apitest.PublishingCluster)(nil)
	_ SubscribeAccessBackend = (*apitest.PublishingCluster)(nil)
	_ SourceSampleBackend    = (*apitest.Sources)(nil)
)

// allFakes returns a Backends with every service mounted on empty fakes.
func allFakes() (Backends, *fakePatterns, *fakeSources, *fakeCluster, *fakeSavepoints, *fakeMatches) {
	p, s, c, sp, m := &fakePatterns{}, &fakeSources{}, &fakeCluster{}, &fakeSavepoints{}, &fakeMatches{}
	return Backends{Patterns: p, Sources: s, Cluster: &apitest.PublishingCluster{Cluster: c}, Savepoints: sp, Matches: m}, p, s, c, sp, m
}
