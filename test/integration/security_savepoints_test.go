package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// Savepoints are files anyone with access to their store can change, and
// their targets are paths an API client names. A restore reads and checks
// every part before it changes anything: a damaged section, or metadata a
// deploy would refuse, fails it and leaves the cluster as it was (the
// same patterns, every shard processing on). dir:// targets and locations
// stay inside the node's savepoint directory, symbolic links included.
func TestSecuritySavepoints(t *testing.T) {
	tc := newCluster(t, 3*time.Minute)
	ctx, base := tc.ctx, tc.base
	spDir := filepath.Join(base, "sp")
	outside := filepath.Join(base, "outside") // not under spDir
	a := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "a"), Shards: 2, SavepointDir: spDir})
	c := tc.client(a)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})

	lines := bankEvents(11, 2400)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", keyOf, lines[:800])

	good := filepath.Join(spDir, "good")
	sp, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + good}))
	if err != nil {
		t.Fatal(err)
	}
	id := sp.Msg.Savepoint.Id
	parts, _ := filepath.Glob(filepath.Join(good, id+"-shard-*.ceps"))
	if len(parts) != 2 {
		t.Fatalf("savepoint %s: parts %v in %s", id, parts, good)
	}
	tc.publish("bank", keyOf, lines[800:1600])

	patternsBefore := patternSummary(t, ctx, c)
	unchanged := func(t *testing.T, what string) {
		t.Helper()
		if got := patternSummary(t, ctx, c); got != patternsBefore {
			t.Fatalf("after %s the patterns are\n%s\nnot\n%s", what, got, patternsBefore)
		}
		res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range res.Msg.Shards {
			if sh.RestoreId != "" {
				t.Fatalf("after %s shard %d restored %q", what, sh.Id, sh.RestoreId)
			}
		}
	}
	restore := func(loc string) error {
		_, err := c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: loc}}))
		return err
	}
	restoreUnsealed := func(loc string) error {
		_, err := c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: loc}, Unsealed: true}))
		return err
	}
	wantRefused := func(t *testing.T, what string, err error, code connect.Code, mentions ...string) {
		t.Helper()
		if connect.CodeOf(err) != code {
			t.Fatalf("%s: %v, want %v", what, err, code)
		}
		for _, m := range mentions {
			if !strings.Contains(err.Error(), m) {
				t.Fatalf("%s: %q does not name %q", what, err, m)
			}
		}
	}

	t.Run("damaged section", func(t *testing.T) {
		dir := copyParts(t, parts, filepath.Join(spDir, "damaged"))
		part := filepath.Join(dir, id+"-shard-2.ceps")
		b, err := os.ReadFile(part)
		if err != nil {
			t.Fatal(err)
		}
		r, err := snapshot.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		// the largest key-group section, in the middle of its payload: the
		// header, the index and the footer stay valid
		var sec snapshot.SectionInfo
		for _, s := range r.Sections() {
			if s.Kind == snapshot.KeyGroupSection && s.Length > sec.Length {
				sec = s
			}
		}
		if sec.Length == 0 {
			t.Fatalf("part %s has no key-group state to damage", part)
		}
		b[sec.Offset+13+sec.Length/2] ^= 0x40
		if err := os.WriteFile(part, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("the damage is found before the sections are read: %v", err)
		}
		err = restore("dir://" + dir + "#" + id)
		wantRefused(t, "restore of a damaged part", err, connect.CodeDataLoss, id+"-shard-2", sec.String())
		unchanged(t, "the damaged restore")

		// a part missing: its key groups would restore empty
		partial := copyParts(t, parts[:1], filepath.Join(spDir, "partial"))
		err = restore("dir://" + partial + "#" + id)
		wantRefused(t, "restore with a part missing", err, connect.CodeDataLoss, "key groups")
		unchanged(t, "the restore with a part missing")
	})

	t.Run("edited header", func(t *testing.T) {
		for _, tt := range []struct {
			name    string
			edit    func(p *meta.Pattern)
			mention string
		}{
			{"pattern name", func(p *meta.Pattern) { p.Name = "../x" }, `"../x"`},
			{"pattern name in its spec too", func(p *meta.Pattern) {
				p.Name = "../x"
				p.Spec = strings.Replace(p.Spec, "name: lfl", "name: ../x", 1)
			}, `"../x"`},
			{"output subject", func(p *meta.Pattern) { p.OutputSubject = "$JS.API.INFO" }, "$JS.API.INFO"},
			{"wildcard output subject", func(p *meta.Pattern) { p.OutputSubject = "cep.out.>" }, "cep.out.>"},
		} {
			dir := copyParts(t, parts, filepath.Join(spDir, "edited"))
			for _, part := range parts {
				editPatterns(t, filepath.Join(dir, filepath.Base(part)), tt.edit)
			}
			// the parts were written again without the cluster's seal
			err := restore("dir://" + dir + "#" + id)
			wantRefused(t, "restore with an edited "+tt.name, err, connect.CodeFailedPrecondition, id+"-shard-", "not sealed")
			// restored as unsealed, the metadata is checked as a deploy's
			err = restoreUnsealed("dir://" + dir + "#" + id)
			wantRefused(t, "unsealed restore with an edited "+tt.name, err, connect.CodeInvalidArgument, tt.mention)
			unchanged(t, "the restore with an edited "+tt.name)
		}
		// as a deploy of the same is
		_, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: strings.Replace(string(lflSpec), "name: lfl", "name: other", 1), OutputSubject: "$JS.API.INFO"}))
		wantRefused(t, "deploy to $JS.API.INFO", err, connect.CodeInvalidArgument, "$JS.API.INFO")
		_, err = c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: strings.Replace(string(lflSpec), "name: lfl", "name: ../x", 1)}))
		wantRefused(t, "deploy of ../x", err, connect.CodeInvalidArgument, `"../x"`)
	})

	// a part written again with this project's own packages, a key
	// group's state changed and every checksum valid, as someone who can
	// write the store can: the part has no seal of the cluster's secret,
	// and the restore is refused naming it (it restored, and published
	// what the edited state held)
	t.Run("rewritten part", func(t *testing.T) {
		dir := copyParts(t, parts, filepath.Join(spDir, "rewritten"))
		part := filepath.Join(dir, id+"-shard-2.ceps")
		rewritePart(t, part)
		err := restore("dir://" + dir + "#" + id)
		wantRefused(t, "restore of a rewritten part", err, connect.CodeFailedPrecondition, id+"-shard-2", "not sealed")
		unchanged(t, "the restore of a rewritten part")
	})

	t.Run("outside the savepoint directory", func(t *testing.T) {
		copyParts(t, parts, outside)
		if err := os.Symlink(outside, filepath.Join(spDir, "link")); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"dir://" + outside, "dir://../outside", "dir://good/../../outside", "dir://link", "dir://link/deeper", "dir:///tmp"} {
			_, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: target}))
			wantRefused(t, "savepoint to "+target, err, connect.CodeInvalidArgument, spDir)
			err = restore(target + "#" + id)
			wantRefused(t, "restore from "+target, err, connect.CodeInvalidArgument, spDir)
		}
		// a relative dir:// target is taken inside the savepoint directory
		rel, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://nightly"}))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := filepath.Glob(filepath.Join(spDir, "nightly", rel.Msg.Savepoint.Id+"-shard-*.ceps")); len(got) != 2 {
			t.Fatalf("dir://nightly: parts %v in %s", got, filepath.Join(spDir, "nightly"))
		}
		if _, err := c.savepoints.DeleteSavepoint(ctx, req(&cepv1.DeleteSavepointRequest{Id: rel.Msg.Savepoint.Id})); err != nil {
			t.Fatal(err)
		}
		files, _ := os.ReadDir(outside)
		if len(files) != len(parts) {
			t.Fatalf("%d files in %s, want the %d copied there", len(files), outside, len(parts))
		}
		if l, err := c.savepoints.ListSavepoints(ctx, req(&cepv1.ListSavepointsRequest{})); err != nil || len(l.Msg.Savepoints) != 1 {
			t.Fatalf("savepoints: %v %v", l.Msg.GetSavepoints(), err)
		}
		unchanged(t, "the refused targets")
	})

	// the shards processed on across all of it: the output of every event
	// is the offline engine's
	tc.publish("bank", keyOf, lines[1600:])
	want := withoutIDs(offline(t, lflSpec, lines))
	if len(want) < 20 {
		t.Fatalf("the offline run produced only %d records", len(want))
	}
	got := withoutIDs(tc.waitOutputs("cep.out.lfl", len(want), 60*time.Second))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output after the refused restores differs from the offline engine: %s", d)
	}

	// and the savepoint itself, undamaged, restores
	if err := restore("dir://" + good + "#" + id); err != nil {
		t.Fatalf("restore of the undamaged savepoint: %v", err)
	}
}

// patternSummary lists the cluster's patterns with what they publish.
func patternSummary(t *testing.T, ctx context.Context, c clients) string {
	t.Helper()
	res, err := c.patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range res.Msg.Patterns {
		out = append(out, fmt.Sprintf("%s@%d %s %v %s", p.Name, p.Version, p.OutputSubject, p.Sources, p.State))
	}
	return strings.Join(out, "\n")
}

// copyParts copies savepoint files into dir (made afresh) and returns it.
func copyParts(t *testing.T, parts []string, dir string) string {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rewritePart writes a savepoint file again, its first key group's state
// cut short by a byte (a change to the state; what it decodes to does
// not matter to a seal), with every checksum valid.
func rewritePart(t *testing.T, path string) {
	t.Helper()
	edited := false
	rewriteSavepoint(t, path, nil, func(p []byte) []byte {
		if !edited && len(p) > 0 {
			p, edited = p[:len(p)-1], true
		}
		return p
	})
	if !edited {
		t.Fatalf("%s has no key-group state to edit", path)
	}
}

// editPatterns rewrites a savepoint file with every pattern of its header
// metadata edited, and every checksum valid: what someone who can write
// the store can do.
func editPatterns(t *testing.T, path string, edit func(*meta.Pattern)) {
	t.Helper()
	rewriteSavepoint(t, path, func(h *snapshot.Header) {
		var pats []meta.Pattern
		if err := json.Unmarshal([]byte(h.Metadata["patterns"]), &pats); err != nil || len(pats) == 0 {
			t.Fatalf("%s: patterns %q: %v", path, h.Metadata["patterns"], err)
		}
		for i := range pats {
			edit(&pats[i])
		}
		pj, _ := json.Marshal(pats)
		h.Metadata["patterns"] = string(pj)
	}, nil)
}

// rewriteSavepoint writes a savepoint file again with this project's own
// package, its header and key groups passed through the edits (nil: kept),
// every checksum valid and no seal (which takes the cluster's secret).
func rewriteSavepoint(t *testing.T, path string, header func(*snapshot.Header), keyGroup func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if header != nil {
		header(&h)
	}
	var out bytes.Buffer
	w, err := snapshot.NewWriter(&out, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Sections() {
		var p []byte
		switch {
		case s.Name == snapshot.MACSection:
			continue
		case s.Kind == snapshot.KeyGroupSection:
			if p, err = r.KeyGroup(s.KeyGroup); err == nil {
				if keyGroup != nil {
					p = keyGroup(p)
				}
				err = w.KeyGroup(s.KeyGroup, p)
			}
		default:
			if p, err = r.Named(s.Name); err == nil {
				err = w.Named(s.Name, p)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(out.Bytes(), b) {
		t.Fatalf("%s: the edit changed nothing", path)
	}
	if _, err := snapshot.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len())); err != nil {
		t.Fatalf("the rewritten part's checksums: %v", err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Deploying and deleting a big pattern 200 times on three nodes leaves
// each node's metadata about the size it started with: a deletion keeps a
// tombstone, which the metadata leader removes once every shard has
// applied it. Every deletion still ends the pattern on every shard, and a
// re-deploy afterwards runs, with a version above the deleted ones.
func TestSecurityTombstonesDeployDeleteCycles(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	for i := range tc.cfgs {
		// 400 entries of 32 KiB on a loaded machine: the production
		// timeouts, not the tests' short ones
		tc.cfgs[i].Raft = shard.DefaultRaftConfig()
	}
	tc.startAll()
	ctx := tc.ctx
	// a call that meets an election is retried; one that took effect
	// before it answers as already done
	retried := func(what string, call func() error, done connect.Code) {
		t.Helper()
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			err := call()
			switch code := connect.CodeOf(err); {
			case err == nil, code == done:
				return nil
			case code == connect.CodeUnavailable:
				return err
			}
			t.Fatalf("%s: %v", what, err)
			return nil
		})
	}
	c := tc.client(0)
	tc.createBank(c)
	metaSize := func(i int) int {
		b, err := tc.nodes[i].Meta().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	var start [3]int
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		for i := range tc.nodes {
			if tc.nodes[i].Meta().Sources["bank"] == nil {
				return fmt.Errorf("node %d has no source bank yet", i)
			}
			start[i] = metaSize(i)
		}
		return nil
	})
	big := strings.Replace(string(lflSpec), "name: lfl", "name: big", 1) + "# " + strings.Repeat("x", 32<<10) + "\n"
	// a delete returns once the shard leaders stopped the pattern; a
	// follower applies it a moment later (a resurrected pattern would stay)
	runningNowhere := func(what string) {
		t.Helper()
		testutil.EventuallyEvery(t, 5*time.Second, poll, func() error {
			for i := range tc.nodes {
				res, err := tc.client(i).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
				if err != nil {
					return err
				}
				for _, sh := range res.Msg.Shards {
					for _, pv := range sh.Running {
						if pv.Name == "big" {
							return fmt.Errorf("%s: node %d's replica of shard %d runs big@%d", what, i, sh.Id, pv.Version)
						}
					}
				}
			}
			return nil
		})
	}
	var last uint64
	deadline := time.Now().Add(90 * time.Second)
	for i := range 200 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d deploy/delete cycles in 90 s", i)
		}
		retried(fmt.Sprintf("deploy %d", i), func() error {
			res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: big}))
			if err == nil && len(res.Msg.PendingShards) > 0 {
				t.Fatalf("deploy %d returned with shards %v not running it", i, res.Msg.PendingShards)
			}
			return err
		}, connect.CodeAlreadyExists)
		retried(fmt.Sprintf("delete %d", i), func() error {
			del, err := c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: "big"}))
			if err != nil {
				return err
			}
			if p := del.Msg.PendingShards; len(p) > 0 {
				t.Fatalf("delete %d returned with shards %v running it", i, p)
			}
			if v := del.Msg.Pattern.Version; v <= last {
				t.Fatalf("cycle %d: deleted at version %d after %d", i, v, last)
			} else {
				last = v
			}
			return nil
		}, connect.CodeNotFound)
		if i%50 == 49 {
			runningNowhere(fmt.Sprintf("after %d cycles", i+1))
		}
	}
	// the tombstone is forgotten on every node, and the metadata is back
	// near its first size (the spec alone is 32 KiB)
	testutil.EventuallyEvery(t, 20*time.Second, poll, func() error {
		for i := range tc.nodes {
			if p := tc.nodes[i].Meta().Patterns["big"]; p != nil {
				return fmt.Errorf("node %d keeps %+v", i, *p)
			}
			if got := metaSize(i); got > start[i]+256 {
				return fmt.Errorf("node %d's metadata is %d bytes after 200 cycles, %d before", i, got, start[i])
			}
		}
		return nil
	})
	runningNowhere("after the tombstone is forgotten")

	// a re-deploy runs, above every deleted version, and processes
	retried("the re-deploy", func() error {
		_, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: big}))
		return err
	}, connect.CodeAlreadyExists)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		// every shard has a replica running it (then it sees every event
		// published from now on)
		runs := map[uint32]bool{}
		for i := range tc.nodes {
			res, err := tc.client(i).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
			if err != nil {
				return err
			}
			for _, sh := range res.Msg.Shards {
				runs[sh.Id] = runs[sh.Id] || slices.ContainsFunc(sh.Running, func(pv *cepv1.PatternVersion) bool { return pv.Name == "big" })
			}
		}
		for id, ok := range runs {
			if !ok {
				return fmt.Errorf("shard %d does not run big yet", id)
			}
		}
		if len(runs) == 0 {
			return errors.New("no shards")
		}
		return nil
	})
	got, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "big"}))
	if err != nil || got.Msg.Pattern.Version <= last {
		t.Fatalf("re-deployed: %v %v, want a version above %d", got, err, last)
	}
	tc.publishAndCompare([]byte(big), "cep.out.big", bankEvents(5, 1500), 60*time.Second)
}
