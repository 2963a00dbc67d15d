package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/anishathalye/porcupine"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Concurrent clients deploy, update, delete and read patterns through
// every node of three while the metadata leader is stopped and started
// again; the history they saw, checked by porcupine against a model of
// a pattern's life, is linearizable: every answer is one a single copy
// of the metadata, changed one call at a time, could have given.
// CEP_LINEARIZABLE_OPS sets the calls per client (default 20) and
// CEP_LINEARIZABLE_KILLS how many times the leader stops (default 1).
func TestMetadataLinearizable(t *testing.T) {
	ops, kills := envInt(t, "CEP_LINEARIZABLE_OPS", 20), envInt(t, "CEP_LINEARIZABLE_KILLS", 1)
	tc := newPeers(t, 3, time.Duration(ops+60*kills)*3*time.Second+2*time.Minute)
	tc.startAll()
	tc.createBank(tc.client(0))
	addrs := make([]string, len(tc.nodes))
	for i, n := range tc.nodes {
		addrs[i] = n.APIAddr()
	}

	const clients = 4
	names := []string{"p0", "p1", "p2"}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	faultsDone := make(chan struct{})
	for cl := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(cl), 7))
			// at least ops calls, and on until the faults are over
			for i := 0; ; i++ {
				if i >= ops {
					select {
					case <-faultsDone:
						return
					default:
					}
				}
				if i >= 50*ops { // bounded whatever the faults take
					return
				}
				in := linInput{kind: linKinds[rng.IntN(len(linKinds))], name: names[rng.IntN(len(names))],
					spec: fmt.Sprintf("name: NAME\nsource: bank\nkey: e.account\nwithin: %ds\nstages:\n  - name: a\n    where: e.type == \"A\"\n", 1000*cl+i+1)}
				c := tc.clients(addrs[rng.IntN(len(addrs))])
				call := time.Since(start).Nanoseconds()
				out := linCall(tc.ctx, c, in)
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
				if out.code != "ok" {
					time.Sleep(20 * time.Millisecond) // a node down refuses at once
				}
				if tc.ctx.Err() != nil {
					return
				}
			}
		})
	}
	// the metadata leader stops, and starts again, while the calls go on
	for range kills {
		time.Sleep(500 * time.Millisecond)
		leader := -1
		for deadline := time.Now().Add(10 * time.Second); leader < 0 && time.Now().Before(deadline); time.Sleep(poll) {
			for i, n := range tc.nodes {
				if n != nil && n.IsMetaLeader() {
					leader = i
				}
			}
		}
		if leader < 0 {
			t.Fatal("no metadata leader to stop within 10s")
		}
		t.Logf("stopping n%d, the metadata leader, at %v", leader+1, time.Since(start).Round(time.Millisecond))
		tc.stop(leader)
		time.Sleep(3 * time.Second)
		tc.start(leader)
	}
	time.Sleep(2 * time.Second) // calls go on after the last restart
	close(faultsDone)
	wg.Wait()

	// a call whose outcome the client cannot know (no answer in time, the
	// node gone) may have taken effect at any time after it was made
	unknown := 0
	for i := range history {
		if history[i].Output.(linOutput).code == "unknown" {
			history[i].Return = 1 << 62
			unknown++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(linModel(), history, time.Minute)
	t.Logf("%d calls (%d of unknown outcome): %s", len(history), unknown, res)
	if res != porcupine.Ok {
		if f, err := os.CreateTemp("", "cep-linearizable-*.html"); err == nil {
			porcupine.Visualize(linModel(), info, f)
			f.Close()
			t.Logf("history drawn in %s", f.Name())
		}
		if f, err := os.CreateTemp("", "cep-linearizable-*.txt"); err == nil {
			slices.SortFunc(history, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
			for _, op := range history {
				in, out := op.Input.(linInput), op.Output.(linOutput)
				fmt.Fprintf(f, "%s c%d [%d, %d] %s(%s %q) -> %s v%d %q\n", in.name, op.ClientId, op.Call/1e6, op.Return/1e6, in.kind, in.name, specWithin(in.spec), out.code, out.version, specWithin(out.spec))
			}
			f.Close()
			t.Logf("history listed in %s", f.Name())
		}
		t.Fatalf("the metadata's history is not linearizable: %s", res)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

var linKinds = []string{"deploy", "deploy", "update", "delete", "get", "get"}

type linInput struct{ kind, name, spec string }

// linOutput: code "ok", a definite refusal ("already_exists",
// "not_found"), or "unknown" (the change may or may not have been made).
type linOutput struct {
	code    string
	version uint64
	spec    string
}

func linCall(ctx context.Context, c clients, in linInput) linOutput {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	spec := replaceName(in.spec, in.name)
	var v uint64
	var gotSpec string
	var err error
	switch in.kind {
	case "deploy":
		var res *connect.Response[cepv1.DeployPatternResponse]
		if res, err = c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: spec})); err == nil {
			v = res.Msg.GetPattern().GetVersion()
		}
	case "update":
		var res *connect.Response[cepv1.UpdatePatternResponse]
		if res, err = c.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Spec: spec, Policy: cepv1.UpdatePolicy_UPDATE_POLICY_RESET})); err == nil {
			v = res.Msg.GetPattern().GetVersion()
		}
	case "delete":
		var res *connect.Response[cepv1.DeletePatternResponse]
		if res, err = c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: in.name})); err == nil {
			v = res.Msg.GetPattern().GetVersion()
		}
	case "get":
		var res *connect.Response[cepv1.GetPatternResponse]
		if res, err = c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: in.name})); err == nil {
			v, gotSpec = res.Msg.GetPattern().GetVersion(), res.Msg.GetPattern().GetSpec()
		}
	}
	switch code := connect.CodeOf(err); {
	case err == nil:
		return linOutput{code: "ok", version: v, spec: gotSpec}
	case code == connect.CodeAlreadyExists:
		return linOutput{code: "already_exists"}
	case code == connect.CodeNotFound:
		return linOutput{code: "not_found"}
	case in.kind == "get" || notSent(err):
		// a read that failed, or a call no node received, changed
		// nothing: as if never made
		return linOutput{code: "failed"}
	default:
		// unavailable, timed out, the node gone mid-call: the change may
		// or may not have been made
		return linOutput{code: "unknown"}
	}
}

// specWithin is the part of a spec that tells the calls apart.
func specWithin(spec string) string {
	if i := strings.Index(spec, "within: "); i >= 0 {
		return strings.SplitN(spec[i:], "\n", 2)[0]
	}
	return ""
}

// notSent: the call failed to connect, so no node saw it.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func replaceName(spec, name string) string {
	return "name: " + name + spec[len("name: NAME"):]
}

// linState is one pattern name's state: deployed or not, its version
// (versionKnown false after a change of unknown outcome, until a read
// says it) and the spec it runs.
type linState struct {
	exists, versionKnown bool
	version              uint64
	spec                 string
}

// linModel is a pattern's life as the API documents it: a deploy creates
// a name not deployed, at a version above every earlier one of the name;
// an update moves a deployed pattern to the next version; a delete takes
// it away and counts its version on; a read sees the last of these.
// Names are independent.
func linModel() porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				n := op.Input.(linInput).name
				if by[n] == nil {
					order = append(order, n)
				}
				by[n] = append(by[n], op)
			}
			var out [][]porcupine.Operation
			for _, n := range order {
				out = append(out, by[n])
			}
			return out
		},
		Init: func() []any { return []any{linState{versionKnown: true}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(linState), input.(linInput), output.(linOutput)
			spec := replaceName(in.spec, in.name)
			if out.code == "failed" {
				return []any{s}
			}
			if out.code == "unknown" {
				next := []any{s}
				switch {
				case in.kind == "deploy" && !s.exists:
					next = append(next, linState{exists: true, spec: spec})
				case in.kind == "update" && s.exists:
					next = append(next, linState{exists: true, versionKnown: s.versionKnown, version: s.version + 1, spec: spec})
				case in.kind == "delete" && s.exists:
					next = append(next, linState{versionKnown: s.versionKnown, version: s.version + 1})
				}
				return next
			}
			above := func(v uint64) bool { return !s.versionKnown || v > s.version }
			switch in.kind {
			case "deploy":
				if out.code == "already_exists" && s.exists {
					return []any{s}
				}
				if out.code == "ok" && !s.exists && above(out.version) {
					return []any{linState{exists: true, versionKnown: true, version: out.version, spec: spec}}
				}
			case "update":
				if out.code == "not_found" && !s.exists {
					return []any{s}
				}
				if out.code == "ok" && s.exists && (!s.versionKnown || out.version == s.version+1) {
					return []any{linState{exists: true, versionKnown: true, version: out.version, spec: spec}}
				}
			case "delete":
				if out.code == "not_found" && !s.exists {
					return []any{s}
				}
				if out.code == "ok" && s.exists && (!s.versionKnown || out.version == s.version+1) {
					return []any{linState{versionKnown: true, version: out.version}}
				}
			case "get":
				if out.code == "not_found" && !s.exists {
					return []any{s}
				}
				if out.code == "ok" && s.exists && out.spec == s.spec && (!s.versionKnown || out.version == s.version) {
					return []any{linState{exists: true, versionKnown: true, version: out.version, spec: s.spec}}
				}
			}
			return nil
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			return fmt.Sprintf("%s(%s) -> %s v%d", in.kind, in.name, out.code, out.version)
		},
		DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(linState)) },
	}
	return nm.ToModel()
}

// The model refuses what a single copy could not have answered: two
// deploys of one name both succeeding, a read of a spec after a later
// update finished, a version that skips; it takes a change of unknown
// outcome either way.
func TestMetadataModelRefuses(t *testing.T) {
	spec := func(n int) string { return fmt.Sprintf("name: NAME\nwithin: %ds\n", n) }
	op := func(kind string, n int, call, ret int64, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: linInput{kind: kind, name: "p", spec: spec(n)}, Call: call, Return: ret, Output: out}
	}
	got := func(n int, v uint64) linOutput {
		return linOutput{code: "ok", version: v, spec: replaceName(spec(n), "p")}
	}
	for _, tt := range []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"deploy, update, read", []porcupine.Operation{
			op("deploy", 1, 0, 10, linOutput{code: "ok", version: 1}), op("update", 2, 20, 30, linOutput{code: "ok", version: 2}),
			op("get", 0, 40, 50, got(2, 2))}, true},
		{"two deploys of one name succeed", []porcupine.Operation{
			op("deploy", 1, 0, 10, linOutput{code: "ok", version: 1}), op("deploy", 2, 20, 30, linOutput{code: "ok", version: 2})}, false},
		{"a stale read after the update returned", []porcupine.Operation{
			op("deploy", 1, 0, 10, linOutput{code: "ok", version: 1}), op("update", 2, 20, 30, linOutput{code: "ok", version: 2}),
			op("get", 0, 40, 50, got(1, 1))}, false},
		{"an update skips a version", []porcupine.Operation{
			op("deploy", 1, 0, 10, linOutput{code: "ok", version: 1}), op("update", 2, 20, 30, linOutput{code: "ok", version: 3})}, false},
		{"a deploy of unknown outcome that took effect", []porcupine.Operation{
			op("deploy", 1, 0, 1<<62, linOutput{code: "unknown"}), op("get", 0, 40, 50, got(1, 1))}, true},
		{"a deploy of unknown outcome that did not", []porcupine.Operation{
			op("deploy", 1, 0, 1<<62, linOutput{code: "unknown"}), op("get", 0, 40, 50, linOutput{code: "not_found"})}, true},
		{"a read of what nobody wrote", []porcupine.Operation{
			op("deploy", 1, 0, 1<<62, linOutput{code: "unknown"}), op("get", 0, 40, 50, got(7, 1))}, false},
	} {
		if ok := porcupine.CheckOperations(linModel(), tt.h); ok != tt.ok {
			t.Errorf("%s: linearizable %v, want %v", tt.name, ok, tt.ok)
		}
	}
}
