package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// versionGated are the kinds no older node decodes, proposed only once
// every member runs a release that applies them: TestEncodingOlderNodeDecodes
// and the golden log leave them out.
var versionGated = map[string]bool{Requested{}.Kind(): true}

func requested(t tb, id string, c Command) []byte {
	t.Helper()
	r, err := NewRequested(id, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A deploy sent twice with one request id — a client's retry after its
// first answer was lost — is applied once: one version, and the retry
// answered with the first deploy's pattern; the same deploy without an id
// is refused as a second create.
func TestRequestAppliedOnce(t *testing.T) {
	f := NewFSM()
	src, _ := Encode(PutSource{Source: &Source{Name: "bank", Stream: "S", Subjects: []string{"bank.*"}}})
	applyEntry(f, 1, src)
	deploy := PutPattern{Create: true, Pattern: &Pattern{Name: "p", Spec: "name: p", Sources: []string{"bank"}}}
	first := applyEntry(f, 2, requested(t, "req-1", deploy))
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	again := applyEntry(f, 3, requested(t, "req-1", deploy))
	if again.Err != nil {
		t.Fatalf("the retry: %v", again.Err)
	}
	if got, want := applyResult(again.Obj, nil), applyResult(first.Obj, nil); got != want {
		t.Fatalf("the retry answered %s, the deploy %s", got, want)
	}
	var m *Meta
	f.Read(func(x *Meta) { m = x.Clone() })
	if p := m.Patterns["p"]; p == nil || p.Version != 1 || p.UpdatedIndex != 2 {
		t.Fatalf("pattern after the retry: %+v, want version 1 of entry 2", p)
	}
	if m.Index != 3 {
		t.Fatalf("index %d, want 3: the retry's entry counts as applied", m.Index)
	}
	plain, _ := Encode(deploy)
	if res := applyEntry(f, 4, plain); !errors.Is(res.Err, ErrExists) {
		t.Fatalf("the same deploy without a request id: %v, want ErrExists", res.Err)
	}
	// a new id is a new request
	if res := applyEntry(f, 5, requested(t, "req-2", deploy)); !errors.Is(res.Err, ErrExists) {
		t.Fatalf("the deploy with another id: %v, want ErrExists", res.Err)
	}
}

// A refusal is the first result too: the retry of a delete refused as
// not found is refused alike even once the pattern exists, and leaves it.
// An id met again with another kind of change is refused as invalid; ids
// of no or over MaxRequestID bytes, and the cluster's own changes, are
// refused.
func TestRequestRemembersRefusalsAndKinds(t *testing.T) {
	f := NewFSM()
	del := DeletePattern{Name: "p"}
	if res := applyEntry(f, 1, requested(t, "r", del)); !errors.Is(res.Err, ErrNotFound) {
		t.Fatalf("delete of nothing: %v", res.Err)
	}
	src, _ := Encode(PutSource{Source: &Source{Name: "bank"}})
	applyEntry(f, 2, src)
	dep, _ := Encode(PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}})
	applyEntry(f, 3, dep)
	res := applyEntry(f, 4, requested(t, "r", del))
	var e *Error
	if !errors.As(res.Err, &e) || e.Kind != ErrNotFound || e.Msg != `pattern "p"` {
		t.Fatalf("the delete's retry: %#v, want the first refusal", res.Err)
	}
	f.Read(func(m *Meta) {
		if p := m.Patterns["p"]; p == nil || p.Deleted {
			t.Fatalf("the retry of a refused delete deleted %+v", p)
		}
	})
	if res := applyEntry(f, 5, requested(t, "r", PutSource{Source: &Source{Name: "other"}})); !errors.Is(res.Err, ErrInvalid) || !strings.Contains(res.Err.Error(), "deletePattern") {
		t.Fatalf("id reused for another kind: %v", res.Err)
	}
	for _, id := range []string{"", strings.Repeat("x", MaxRequestID+1)} {
		if res := applyEntry(f, 6, requested(t, id, del)); !errors.Is(res.Err, ErrInvalid) {
			t.Fatalf("id of %d bytes: %v", len(id), res.Err)
		}
	}
	if res := applyEntry(f, 7, requested(t, "n", SplitDone{ShardID: 1})); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("a cluster change with an id: %v", res.Err)
	}
	nested, _ := NewRequested("a", DeletePattern{Name: "p"})
	if res := applyEntry(f, 8, requested(t, "b", nested)); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("a request in a request: %v", res.Err)
	}
}

// The metadata remembers the last MaxRequests ids, forgetting the oldest
// first: a request older than that applies again.
func TestRequestsBounded(t *testing.T) {
	m := New()
	idx := uint64(0)
	for i := range MaxRequests + 3 {
		idx++
		if _, err := m.Apply(idx, Requested{ID: fmt.Sprint("id-", i), Entry: mustEncode(t, AddSavepoint{Savepoint: &Savepoint{ID: fmt.Sprint("sp-", i)}})}); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.Requests) != MaxRequests || m.Requests[0].ID != "id-3" || m.Requests[MaxRequests-1].ID != fmt.Sprint("id-", MaxRequests+2) {
		t.Fatalf("%d requests remembered, from %s to %s", len(m.Requests), m.Requests[0].ID, m.Requests[len(m.Requests)-1].ID)
	}
	idx++
	if _, err := m.Apply(idx, Requested{ID: "id-0", Entry: mustEncode(t, AddSavepoint{Savepoint: &Savepoint{ID: "sp-0"}})}); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Savepoints); n != MaxRequests+4 {
		t.Fatalf("%d savepoints: a forgotten request id applies again, want %d", n, MaxRequests+4)
	}
	idx++
	if _, err := m.Apply(idx, Requested{ID: "id-5", Entry: mustEncode(t, AddSavepoint{Savepoint: &Savepoint{ID: "sp-5"}})}); err != nil || len(m.Savepoints) != MaxRequests+4 {
		t.Fatalf("a remembered id: %v, %d savepoints", err, len(m.Savepoints))
	}
}

func mustEncode(t tb, c Command) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A snapshot of the release before (no request ids) reads with none and
// writes back byte for byte; one with request ids keeps them through a
// snapshot and a restore, answering a retry after it as before it.
func TestRequestsInSnapshots(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Unmarshal(old)
	if err != nil || m.Requests != nil {
		t.Fatalf("the previous release's snapshot: %v, requests %v", err, m.Requests)
	}
	if b, _ := m.Marshal(); bytes.Contains(b, []byte(`"requests"`)) {
		t.Fatal("metadata without request ids writes a requests field")
	}
	f := NewFSM()
	applyEntry(f, 1, mustEncode(t, PutSource{Source: &Source{Name: "bank"}}))
	applyEntry(f, 2, requested(t, "r", PutPattern{Create: true, Pattern: &Pattern{Name: "p", Spec: "s", Sources: []string{"bank"}}}))
	g := NewFSM()
	if err := g.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	res := applyEntry(g, 3, requested(t, "r", PutPattern{Create: true, Pattern: &Pattern{Name: "p", Spec: "s", Sources: []string{"bank"}}}))
	if p, ok := res.Obj.(*Pattern); res.Err != nil || !ok || p.Version != 1 || p.Spec != "s" {
		t.Fatalf("the retry after a restore: %v %#v", res.Err, res.Obj)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// Against a model: a log of clients' changes, some with request ids and
// some of them retried, leaves the metadata that applying each request id
// once (and every change without one) leaves, and answers each retry as
// its first application was answered; replicas applying the log agree
// byte for byte.
func TestRequestsAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		model, f, g := New(), NewFSM(), NewFSM()
		first := map[string]string{} // request id: its first result
		kinds := map[string]string{}
		var sent []struct {
			id string
			c  Command
		}
		for i := range rapid.IntRange(1, 40).Draw(t, "entries") {
			idx := uint64(i + 1)
			var id string
			var c Command
			if len(sent) > 0 && rapid.IntRange(0, 3).Draw(t, "retry") == 0 {
				s := sent[rapid.IntRange(0, len(sent)-1).Draw(t, "which")]
				id, c = s.id, s.c
			} else {
				c = drawCommandOf(t, rapid.IntRange(1, 7).Draw(t, "kind"))
				id = rapid.SampledFrom([]string{"", "a", "b", "c", "d", "e"}).Draw(t, "id")
				if id != "" {
					sent = append(sent, struct {
						id string
						c  Command
					}{id, c})
				}
			}
			var want string
			model.Index = idx
			switch k, seen := kinds[id]; {
			case id == "":
				want = applyResult(model.Apply(idx, c))
			case seen && k != c.Kind():
				want = "invalid"
			case seen:
				want = first[id]
			default:
				want = applyResult(model.Apply(idx, c))
				kinds[id], first[id] = c.Kind(), want
			}
			var entry []byte
			if id == "" {
				entry, _ = Encode(c)
			} else {
				entry = requested(t, id, c)
			}
			res := applyEntry(f, idx, entry)
			applyEntry(g, idx, entry)
			got := applyResult(res.Obj, res.Err)
			if want == "invalid" {
				if !errors.Is(res.Err, ErrInvalid) {
					t.Fatalf("entry %d: id %q reused for a %s: %s", idx, id, c.Kind(), got)
				}
				continue
			}
			if withoutSpecs(got) != withoutSpecs(want) {
				t.Fatalf("entry %d %s: answered\n%s\nthe model\n%s", idx, entry, got, want)
			}
			var m *Meta
			f.Read(func(x *Meta) { m = x.Clone() })
			m.Requests = nil
			mb, _ := m.Marshal()
			wb, _ := model.Marshal()
			if !bytes.Equal(mb, wb) {
				t.Fatalf("entry %d %s: metadata\n%s\nthe model's\n%s", idx, entry, mb, wb)
			}
			if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
				t.Fatalf("entry %d: two replicas differ", idx)
			}
		}
	})
}

// withoutSpecs drops the patterns' documents from a result: a retry's
// pattern has its document only while the metadata holds that version.
func withoutSpecs(res string) string {
	if strings.HasPrefix(res, "error: ") {
		return res
	}
	var v any
	if json.Unmarshal([]byte(res), &v) != nil {
		return res
	}
	var drop func(any)
	drop = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "spec")
			for _, e := range x {
				drop(e)
			}
		case []any:
			for _, e := range x {
				drop(e)
			}
		}
	}
	drop(v)
	b, _ := json.Marshal(v)
	return string(b)
}
