package plan

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/meta"
)

// reconcileBefore is the decision the leader's reconcile made in place
// before it asked ReconcileOf, kept to show the planner decides the same.
// sourcesOf is the leader's list of the sources live patterns read.
func reconcileBefore(m *meta.Meta, have map[string]uint64, readers map[string][]string) Reconcile {
	sourcesOf := func() []string {
		set := map[string]bool{}
		for _, name := range m.PatternNames() {
			for _, s := range m.Patterns[name].ReadsOf() {
				set[s] = true
			}
		}
		return slices.Sorted(maps.Keys(set))
	}
	unread := map[string]bool{}
	for _, name := range sourcesOf() {
		unread[name] = !slices.ContainsFunc(readers[name], func(p string) bool { return m.Patterns[p] != nil && !m.Patterns[p].Deleted })
	}
	var rc Reconcile
	for _, name := range slices.Sorted(maps.Keys(m.Patterns)) {
		p := m.Patterns[name]
		v, ok := have[name]
		switch {
		case p.Deleted && ok:
			rc.Delete = append(rc.Delete, name)
		case !p.Deleted && v != p.Version:
			rc.Deploy = append(rc.Deploy, name)
			for _, src := range p.ReadsOf() {
				if unread[src] {
					unread[src] = false
					rc.Skip = append(rc.Skip, Skip{Source: src, FromStart: p.FromStart && !ok})
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if m.Patterns[name] == nil && have[name] <= m.ForgottenOf(name) {
			rc.Delete = append(rc.Delete, name)
		}
	}
	return rc
}

func drawReconcileCase(t *rapid.T) (*meta.Meta, Running) {
	names := []string{"a", "b", "c", "d", "e"}
	sources := []string{"s1", "s2", "s3"}
	m := &meta.Meta{Patterns: map[string]*meta.Pattern{}, ForgottenVersion: rapid.Uint64Range(0, 4).Draw(t, "forgotten"),
		Forgotten: rapid.MapOf(rapid.SampledFrom(names), rapid.Uint64Range(0, 6)).Draw(t, "forgotten-by-name")}
	for _, n := range names {
		if !rapid.Bool().Draw(t, n+"-in-meta") {
			continue
		}
		srcs := rapid.SliceOfNDistinct(rapid.SampledFrom(sources), 1, 2, rapid.ID[string]).Draw(t, n+"-sources")
		m.Patterns[n] = &meta.Pattern{Name: n, Version: rapid.Uint64Range(1, 6).Draw(t, n+"-version"), Sources: srcs,
			Deleted: rapid.IntRange(0, 3).Draw(t, n+"-deleted") == 0, FromStart: rapid.Bool().Draw(t, n+"-from-start")}
	}
	run := Running{Versions: map[string]uint64{}, Readers: map[string][]string{}}
	for _, n := range names {
		if !rapid.Bool().Draw(t, n+"-runs") {
			continue
		}
		run.Versions[n] = rapid.Uint64Range(1, 6).Draw(t, n+"-runs-version")
		for _, s := range rapid.SliceOfNDistinct(rapid.SampledFrom(sources), 1, 2, rapid.ID[string]).Draw(t, n+"-reads") {
			run.Readers[s] = append(run.Readers[s], n)
		}
	}
	return m, run
}

// The planner decides what the reconcile decided in place.
func TestReconcileOfAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, run := drawReconcileCase(t)
		got, want := ReconcileOf(m, run), reconcileBefore(m, run.Versions, run.Readers)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ReconcileOf = %+v, before %+v", got, want)
		}
	})
}

// Applied, the reconcile leaves the shard running exactly the live
// patterns at the metadata's versions (bar forgotten tombstones above
// ForgottenOf their name, which it must not take for deletions), and a source is
// skipped at most once, only for a deployment that reads it.
func TestReconcileOfConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, run := drawReconcileCase(t)
		rc := ReconcileOf(m, run)
		after := maps.Clone(run.Versions)
		for _, n := range rc.Delete {
			delete(after, n)
		}
		for _, n := range rc.Deploy {
			after[n] = m.Patterns[n].Version
		}
		for n, v := range after {
			p := m.Patterns[n]
			switch {
			case p == nil && v > m.ForgottenOf(n): // not known yet here: left alone
			case p == nil || p.Deleted || p.Version != v:
				t.Fatalf("after %+v the shard runs %s v%d; the metadata holds %+v", rc, n, v, p)
			}
		}
		for n, p := range m.Patterns {
			if !p.Deleted && after[n] != p.Version {
				t.Fatalf("after %+v the shard does not run %s v%d", rc, n, p.Version)
			}
		}
		seen := map[string]bool{}
		for _, sk := range rc.Skip {
			if seen[sk.Source] {
				t.Fatalf("%s skipped twice: %+v", sk.Source, rc)
			}
			seen[sk.Source] = true
			if !slices.ContainsFunc(rc.Deploy, func(n string) bool { return slices.Contains(m.Patterns[n].ReadsOf(), sk.Source) }) {
				t.Fatalf("%s skipped for no deployment: %+v", sk.Source, rc)
			}
		}
	})
}
