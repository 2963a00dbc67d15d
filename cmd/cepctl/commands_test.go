package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// End-to-end tests: cepctl in process against api.NewHandler over fakes,
// checking the requests it sends and what it prints.

func statusCluster() *fakeCluster {
	return &fakeCluster{
		StatusFunc: func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			return &cepv1.GetStatusResponse{
				Nodes: []*cepv1.Node{
					{Id: "n1", Address: "10.0.0.1:7946", ApiAddress: "10.0.0.1:7070", State: cepv1.NodeState_NODE_STATE_ALIVE, IsMetaLeader: true, Replicas: 2, Version: "v1.4.0", HighestVersion: 2},
					{Id: "n2", Address: "10.0.0.2:7946", ApiAddress: "10.0.0.2:7070", State: cepv1.NodeState_NODE_STATE_SUSPECT, Removing: true, Replicas: 1},
				},
				Summary: &cepv1.ClusterSummary{Nodes: 2, Alive: 1, Suspect: 1, MetaLeaderId: "n1", MetaCommitIndex: 42,
					KeyGroups: 128, Shards: 2, ShardsWithoutLeader: 1, Patterns: 3, Sources: 1, NatsUrl: "nats://10.0.0.1:4222", ClusterVersion: 1},
			}, nil
		},
		ShardsFunc: func(_ context.Context, r *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
			if !r.ClusterWide {
				return nil, fmt.Errorf("%w: status lists the shards of the node asked only", api.ErrInvalidArgument)
			}
			return &cepv1.ListShardsResponse{Shards: []*cepv1.Shard{
				{Id: 1, KeyGroups: &cepv1.KeyGroupRange{First: 0, Last: 63}, LeaderNodeId: "n1",
					Replicas: []*cepv1.Replica{
						{NodeId: "n1", Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER, AppliedIndex: 100},
						{NodeId: "n2", Suffrage: cepv1.Suffrage_SUFFRAGE_NONVOTER, AppliedIndex: 90},
						{NodeId: "n3", Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER, AppliedUnknown: true},
					},
					CommitIndex: 100, LastAppliedIndex: 99, Patterns: 3, PartialMatches: 17, BufferedEvents: 5, OutboxRecords: 12},
				{Id: 2, KeyGroups: &cepv1.KeyGroupRange{First: 64, Last: 127}},
			}}, nil
		},
	}
}

func TestStatus(t *testing.T) {
	url := startAPI(t, api.Backends{Cluster: statusCluster()})

	out := cepctl(t, url, "status").mustOK(t).stdout
	for _, row := range [][]string{
		{"NODE", "ADDRESS", "API", "STATE", "META", "REPLICAS", "RELEASE", "WRITES"},
		{"SHARD", "KEY GROUPS", "LEADER", "REPLICAS", "COMMIT", "APPLIED", "APPLIED BY REPLICA", "PATTERNS", "PARTIAL MATCHES", "BUFFERED EVENTS", "OUTBOX"},
		{"n1", "10.0.0.1:7946", "10.0.0.1:7070", "alive", "leader", "2", "v1.4.0", "v2"},
		{"n2", "10.0.0.2:7946", "10.0.0.2:7070", "suspect,removing", "-", "1", "-", "v1?"},
		{"1", "0-63", "n1", "n1,n2(nonvoter),n3", "100", "99", "n1=100,n2=90,n3=unknown", "3", "17", "5", "12"},
		{"2", "64-127", "NONE", "-", "0", "0", "-", "0", "0", "0", "0"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}
	for _, want := range []string{"2 nodes (1 alive, 1 suspect)", "meta leader n1 at index 42", "2 shards over 128 key groups", "1 WITHOUT A LEADER", "3 patterns, 1 source", "NATS nats://10.0.0.1:4222", "cluster version v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}

	if strings.Contains(out, "INSECURE") {
		t.Errorf("a secure cluster said insecure:\n%s", out)
	}
	if strings.Contains(out, "quarantined") || strings.Contains(out, "STOPPED") {
		t.Errorf("a healthy cluster shows a quarantine:\n%s", out)
	}
	t.Run("quarantined", func(t *testing.T) {
		fc := statusCluster()
		healthy := fc.ShardsFunc
		fc.ShardsFunc = func(ctx context.Context, r *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
			res, err := healthy(ctx, r)
			res.Shards[0].Replicas[1].Quarantined = "shard 1: /data/n2/shards/1/raft.db: log entry 7: damaged log entry"
			res.Shards[1].Quarantined = "n1: shard 2: /data/n1/shards/2/raft.db: log entry 3: damaged log entry"
			return res, err
		}
		url := startAPI(t, api.Backends{Cluster: fc})
		out := cepctl(t, url, "status").mustOK(t).stdout
		for _, want := range []string{
			"n1,n2(nonvoter)(quarantined),n3",
			"shard 1: replica on n2 quarantined, rebuilding: shard 1: /data/n2/shards/1/raft.db: log entry 7",
			"shard 2 STOPPED: replica n1: shard 2: /data/n1/shards/2/raft.db: log entry 3",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("insecure", func(t *testing.T) {
		fc := statusCluster()
		secure := fc.StatusFunc
		fc.StatusFunc = func(ctx context.Context, r *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			st, err := secure(ctx, r)
			st.Summary.Insecure = true
			return st, err
		}
		url := startAPI(t, api.Backends{Cluster: fc})
		if out := cepctl(t, url, "status").mustOK(t).stdout; !strings.Contains(out, "INSECURE: no cluster secret") {
			t.Errorf("an insecure cluster is not said so:\n%s", out)
		}
		var v struct {
			Summary struct {
				Insecure bool `json:"insecure"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(cepctl(t, url, "status", "-o", "json").mustOK(t).stdout), &v); err != nil || !v.Summary.Insecure {
			t.Errorf("json: insecure %v, %v", v.Summary.Insecure, err)
		}
	})

	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			out := cepctl(t, url, "status", "-o", format).mustOK(t).stdout
			var v struct {
				Nodes []struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"nodes"`
				Summary struct {
					NatsURL string `json:"natsUrl"`
					Shards  int    `json:"shards"`
				} `json:"summary"`
				Shards []struct {
					ID             int    `json:"id"`
					PartialMatches int64  `json:"partialMatches"`
					LeaderNodeID   string `json:"leaderNodeId"`
					Replicas       []struct {
						NodeID         string `json:"nodeId"`
						AppliedIndex   *int64 `json:"appliedIndex"`
						AppliedUnknown bool   `json:"appliedUnknown"`
					} `json:"replicas"`
				} `json:"shards"`
			}
			unmarshal := yaml.Unmarshal
			if format == "json" {
				unmarshal = func(b []byte, v any, _ ...yaml.JSONOpt) error { return json.Unmarshal(b, v) }
			}
			if err := unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("%v in\n%s", err, out)
			}
			if len(v.Nodes) != 2 || v.Nodes[0].ID != "n1" || v.Nodes[1].State != "suspect" {
				t.Errorf("nodes: %+v", v.Nodes)
			}
			if v.Summary.NatsURL != "nats://10.0.0.1:4222" || v.Summary.Shards != 2 {
				t.Errorf("summary: %+v", v.Summary)
			}
			if len(v.Shards) != 2 || v.Shards[0].PartialMatches != 17 || v.Shards[1].LeaderNodeID != "" {
				t.Errorf("shards: %+v", v.Shards)
			}
			// a replica whose node did not answer has no index, not 0
			if reps := v.Shards[0].Replicas; len(reps) != 3 || reps[1].AppliedIndex == nil || *reps[1].AppliedIndex != 90 ||
				reps[2].AppliedIndex != nil || !reps[2].AppliedUnknown {
				t.Errorf("replicas: %+v", reps)
			}
		})
	}
}

const sqlQuery = `SELECT * FROM logins MATCH_RECOGNIZE (
  PARTITION BY user ORDER BY ts
  MEASURES A.ts AS t
  PATTERN (A B)
  DEFINE A AS type = 'LOGIN', B AS type = 'FAIL'
)`

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPatternValidate(t *testing.T) {
	var got *cepv1.ValidatePatternRequest
	resp := &cepv1.ValidatePatternResponse{}
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ValidateFunc: func(_ context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
			got = r
			return resp, nil
		},
	}})
	doc := writeTemp(t, "login.yaml", loginPattern)
	query := writeTemp(t, "Fraud Check.sql", sqlQuery)
	querySQLText := writeTemp(t, "q2.txt", "-- detected as SQL\n"+sqlQuery)

	t.Run("document ok", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Valid: true, Format: cepv1.SpecFormat_SPEC_FORMAT_SPEC, Name: "login-fail",
			Stages: []string{"login", "failed", "logout"}, EventTime: true}
		out := cepctl(t, url, "pattern", "validate", doc).mustOK(t).stdout
		if strings.TrimSpace(out) != "ok: login-fail (3 stages, event time)" {
			t.Errorf("output %q", out)
		}
		if got.GetSpec() != loginPattern || got.GetFormat() != cepv1.SpecFormat_SPEC_FORMAT_UNSPECIFIED || got.GetName() != "" {
			t.Errorf("request %v", got)
		}
	})
	t.Run("sql by extension, name from the file", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Valid: true, Name: "fraud-check", Stages: []string{"A"}}
		out := cepctl(t, url, "pattern", "validate", query).mustOK(t).stdout
		if strings.TrimSpace(out) != "ok: fraud-check (1 stage, processing time)" {
			t.Errorf("output %q", out)
		}
		if got.GetFormat() != cepv1.SpecFormat_SPEC_FORMAT_SQL || got.GetName() != "fraud-check" {
			t.Errorf("request %v", got)
		}
	})
	t.Run("sql detected, --name", func(t *testing.T) {
		cepctl(t, url, "pattern", "validate", querySQLText, "--name", "mine").mustOK(t)
		if got.GetFormat() != cepv1.SpecFormat_SPEC_FORMAT_UNSPECIFIED || got.GetName() != "mine" {
			t.Errorf("request %v", got)
		}
		cepctl(t, url, "pattern", "validate", querySQLText).mustOK(t)
		if got.GetName() != "q2" {
			t.Errorf("derived name %q, want q2", got.GetName())
		}
	})
	t.Run("stdin", func(t *testing.T) {
		cepctlEnv(t, nil, loginPattern, "--server", url, "pattern", "validate", "-").mustOK(t)
		if got.GetSpec() != loginPattern {
			t.Errorf("spec from stdin %q", got.GetSpec())
		}
	})
	t.Run("invalid sql has line:col", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Format: cepv1.SpecFormat_SPEC_FORMAT_SQL, Error: &cepv1.SpecError{
			Message: "DEFINE: unknown column \"tyep\" (did you mean \"type\"?)", Line: 5, Column: 12}}
		r := cepctl(t, url, "pattern", "validate", query).mustFail(t, query+":5:12: DEFINE: unknown column")
		if r.stdout != "" {
			t.Errorf("stdout %q", r.stdout)
		}
	})
	t.Run("invalid document names stage and field", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Error: &cepv1.SpecError{
			Message: `pattern "login-fail": stage "failed": field "times": from must be > 0`, Stage: "failed", Field: "times"}}
		cepctl(t, url, "pattern", "validate", doc).mustFail(t, doc+`: pattern "login-fail": stage "failed": field "times"`)
	})
	t.Run("invalid without message", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Error: &cepv1.SpecError{Stage: "g/b", Field: "where"}}
		cepctl(t, url, "pattern", "validate", doc).mustFail(t, `stage "g/b": field "where"`)
	})
	t.Run("invalid as json still fails", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Error: &cepv1.SpecError{Message: "bad", Line: 1, Column: 2}}
		r := cepctl(t, url, "pattern", "validate", query, "-o", "json").mustFail(t, ":1:2: bad")
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v["valid"] != false {
			t.Errorf("stdout %q: %v", r.stdout, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		cepctl(t, url, "pattern", "validate", "/nonexistent.yaml").mustFail(t, "read pattern")
	})
	t.Run("warnings go to stderr", func(t *testing.T) {
		resp = &cepv1.ValidatePatternResponse{Valid: true, Name: "login-fail", Stages: []string{"a", "b"},
			Warnings: []string{`pattern "login-fail": field "within": none`, `pattern "login-fail": field "key": none`}}
		for _, format := range []string{"table", "json"} {
			r := cepctl(t, url, "pattern", "validate", doc, "-o", format).mustOK(t)
			want := "cepctl: warning: pattern \"login-fail\": field \"within\": none\ncepctl: warning: pattern \"login-fail\": field \"key\": none\n"
			if r.stderr != want {
				t.Errorf("-o %s: stderr %q, want %q", format, r.stderr, want)
			}
			if strings.Contains(r.stdout, "warning") != (format == "json") {
				t.Errorf("-o %s: stdout %q", format, r.stdout)
			}
		}
	})
}

func samplePattern(name string, version uint64, state cepv1.PatternState) *cepv1.Pattern {
	return &cepv1.Pattern{Name: name, Version: version, Spec: loginPattern, Format: cepv1.SpecFormat_SPEC_FORMAT_SPEC,
		Sources: []string{"logins"}, OutputSubject: "cep.out." + name, CreatedIndex: 7, UpdatedIndex: 9, State: state,
		MaxPartialMatches: 100000, Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH, cepv1.RecordType_RECORD_TYPE_LATE}}
}

func TestPatternDeployUpdateDelete(t *testing.T) {
	var deployed *cepv1.DeployPatternRequest
	var updated *cepv1.UpdatePatternRequest
	var deleted *cepv1.DeletePatternRequest
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		DeployFunc: func(_ context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
			deployed = r
			if r.GetName() == "taken" {
				return nil, fmt.Errorf("pattern %q: %w", r.GetName(), api.ErrAlreadyExists)
			}
			return &cepv1.DeployPatternResponse{Pattern: samplePattern("login-fail", 1, cepv1.PatternState_PATTERN_STATE_ACTIVE),
				Warnings: []string{"deploy warning"}}, nil
		},
		UpdateFunc: func(_ context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
			updated = r
			return &cepv1.UpdatePatternResponse{Pattern: samplePattern("login-fail", 2, cepv1.PatternState_PATTERN_STATE_DRAINING),
				Warnings: []string{"update warning"}, PendingShards: []uint32{2, 5}}, nil
		},
		DeleteFunc: func(_ context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
			deleted = r
			if r.GetName() != "login-fail" {
				return nil, fmt.Errorf("pattern %q: %w", r.GetName(), api.ErrNotFound)
			}
			return &cepv1.DeletePatternResponse{Pattern: samplePattern("login-fail", 2, cepv1.PatternState_PATTERN_STATE_DELETING), PendingShards: []uint32{3}}, nil
		},
	}})
	doc := writeTemp(t, "login.yaml", loginPattern)
	query := writeTemp(t, "fraud_v2.SQL", sqlQuery)

	r := cepctl(t, url, "pattern", "deploy", doc, "--output-subject", "alerts.login").mustOK(t)
	out := r.stdout
	if r.stderr != "cepctl: warning: deploy warning\n" {
		t.Errorf("deploy stderr %q", r.stderr)
	}
	if deployed.GetSpec() != loginPattern || deployed.GetOutputSubject() != "alerts.login" || deployed.GetName() != "" {
		t.Errorf("deploy request %v", deployed)
	}
	if !strings.Contains(out, "deployed pattern login-fail version 1") || !strings.Contains(out, "output subject cep.out.login-fail") {
		t.Errorf("deploy output %q", out)
	}
	out = cepctl(t, url, "pattern", "deploy", query, "-o", "json").mustOK(t).stdout
	if deployed.GetFormat() != cepv1.SpecFormat_SPEC_FORMAT_SQL || deployed.GetName() != "fraud-v2" {
		t.Errorf("deploy request %v", deployed)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil || p["name"] != "login-fail" || p["version"] != 1.0 || p["state"] != "active" {
		t.Errorf("deploy json %q: %v", out, err)
	}
	cepctl(t, url, "pattern", "deploy", doc, "--name", "taken").mustFail(t, `pattern "taken": api: already exists`)
	if deployed.MaxPartialMatches != nil || len(deployed.Records) != 0 {
		t.Errorf("deploy without output flags sent a bound %v and records %v", deployed.MaxPartialMatches, deployed.Records)
	}
	cepctl(t, url, "pattern", "deploy", doc, "--max-partial-matches", "0", "--records", "match", "--from-start").mustOK(t)
	if !deployed.FromStart {
		t.Errorf("deploy --from-start sent %v", deployed)
	}
	if deployed.MaxPartialMatches == nil || *deployed.MaxPartialMatches != 0 || !slices.Equal(deployed.Records, []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH}) {
		t.Errorf("deploy with output flags sent a bound %v and records %v", deployed.MaxPartialMatches, deployed.Records)
	}

	r = cepctl(t, url, "pattern", "update", doc, "--policy", "migrate").mustOK(t)
	out = r.stdout
	if r.stderr != "cepctl: warning: update warning\ncepctl: warning: pattern login-fail version 2 does not run yet on shard(s) 2, 5; each starts it once it has a leader, and events of its keys logged before then are not matched by this version\n" {
		t.Errorf("update stderr %q", r.stderr)
	}
	if updated.GetPolicy() != cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE || updated.GetSpec() != loginPattern {
		t.Errorf("update request %v", updated)
	}
	if !strings.Contains(out, "updated pattern login-fail to version 2 (policy migrate, state draining)") {
		t.Errorf("update output %q", out)
	}
	out = cepctl(t, url, "pattern", "update", query, "-o", "yaml").mustOK(t).stdout
	if updated.GetPolicy() != cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN || updated.GetName() != "fraud-v2" {
		t.Errorf("update request %v", updated)
	}
	if err := yaml.Unmarshal([]byte(out), &p); err != nil || p["version"] != 2.0 || p["spec"] != loginPattern {
		t.Errorf("update yaml %q: %v", out, err)
	}

	r = cepctl(t, url, "pattern", "delete", "login-fail").mustOK(t)
	if deleted.GetName() != "login-fail" || r.stdout != "deleted pattern login-fail (version 2)\n" {
		t.Errorf("delete %v: %q", deleted, r.stdout)
	}
	if r.stderr != "cepctl: warning: pattern login-fail still runs on shard(s) 3; each stops it once it has a leader\n" {
		t.Errorf("delete stderr %q", r.stderr)
	}
	cepctl(t, url, "pattern", "delete", "nope").mustFail(t, `pattern "nope": api: not found`)
}

func TestPatternListGet(t *testing.T) {
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
			return &cepv1.ListPatternsResponse{Patterns: []*cepv1.Pattern{
				samplePattern("a", 1, cepv1.PatternState_PATTERN_STATE_ACTIVE),
				samplePattern("b", 4, cepv1.PatternState_PATTERN_STATE_DRAINING),
			}}, nil
		},
		GetFunc: func(_ context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
			var pending []uint32
			if r.GetName() == "slow" {
				pending = []uint32{4}
			}
			return &cepv1.GetPatternResponse{Pattern: samplePattern(r.GetName(), 3, cepv1.PatternState_PATTERN_STATE_ACTIVE), PendingShards: pending}, nil
		},
	}})
	out := cepctl(t, url, "pattern", "list").mustOK(t).stdout
	for _, row := range [][]string{
		{"NAME", "VERSION", "STATE", "FORMAT", "SOURCES", "OUTPUT", "SUBJECT", "UPDATED", "INDEX"},
		{"a", "1", "active", "spec", "logins", "cep.out.a", "9"},
		{"b", "4", "draining", "spec", "logins", "cep.out.b", "9"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}
	out = cepctl(t, url, "pattern", "list", "-o", "json").mustOK(t).stdout
	var l struct {
		Patterns []struct{ Name string } `json:"patterns"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Patterns) != 2 || l.Patterns[1].Name != "b" {
		t.Errorf("list json %q: %v", out, err)
	}

	r := cepctl(t, url, "pattern", "get", "x").mustOK(t)
	out = r.stdout
	if r.stderr != "" {
		t.Errorf("get stderr %q", r.stderr)
	}
	for _, row := range [][]string{{"Name:", "x"}, {"Version:", "3"}, {"State:", "active"}, {"Sources:", "logins"}, {"Output", "subject:", "cep.out.x"},
		{"Records:", "match,", "late"}, {"Partial", "match", "bound:", "100000", "per", "key"}} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}
	if !strings.Contains(out, strings.TrimSpace(loginPattern)) {
		t.Errorf("get does not show the spec:\n%s", out)
	}
	r = cepctl(t, url, "pattern", "get", "slow", "-o", "json").mustOK(t)
	if !strings.HasPrefix(r.stderr, "cepctl: warning: pattern slow version 3 does not run yet on shard(s) 4;") || !strings.Contains(r.stdout, `"name": "slow"`) {
		t.Errorf("get of a pattern some shards do not run yet: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestSources(t *testing.T) {
	var created *cepv1.CreateSourceRequest
	var asked string
	src := &cepv1.Source{Name: "logins", Stream: "CEP_LOGINS", Subjects: []string{"logins.>"}, KeyGroups: 128, Managed: true, CreatedIndex: 3, Key: "e.user"}
	url := startAPI(t, api.Backends{Sources: &fakeSources{
		CreateFunc: func(_ context.Context, r *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
			created = r
			return &cepv1.CreateSourceResponse{Source: src}, nil
		},
		ListFunc: func(context.Context, *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
			return &cepv1.ListSourcesResponse{Sources: []*cepv1.Source{src, {Name: "orders", Stream: "ORDERS", Subjects: []string{"shop.orders.*", "orders.>"}}}}, nil
		},
		GetFunc: func(_ context.Context, r *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
			asked = r.GetName()
			if r.GetName() == "metrics" {
				return &cepv1.GetSourceResponse{Source: &cepv1.Source{Name: "metrics", Stream: "CEP_METRICS", Managed: true,
					Limits: &cepv1.SourceLimits{MaxAge: durationpb.New(72 * time.Hour), MaxBytes: 50 << 30, MaxMsgs: 1_000_000}}}, nil
			}
			if r.GetName() != "logins" {
				return nil, fmt.Errorf("source %q: %w", r.GetName(), api.ErrNotFound)
			}
			return &cepv1.GetSourceResponse{Source: src}, nil
		},
		DeleteFunc: func(_ context.Context, r *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error) {
			switch {
			case r.Name == "orders":
				return nil, fmt.Errorf("%w: source %q is read by pattern(s) big-orders; delete them first", api.ErrFailedPrecondition, r.Name)
			case r.DeleteStream:
				return &cepv1.DeleteSourceResponse{Sources: []*cepv1.Source{src, {Name: "logins.k1234"}}, DeletedStreams: []string{"CEP_LOGINS", "CEP_LOGINS_K1234"}}, nil
			}
			return &cepv1.DeleteSourceResponse{Sources: []*cepv1.Source{src}}, nil
		},
	}})
	out := cepctl(t, url, "source", "create", "logins", "--key", "e.user").mustOK(t).stdout
	if created.GetName() != "logins" || created.GetKey() != "e.user" || len(created.GetSubjects()) != 0 || created.GetStream() != "" {
		t.Errorf("create request %v", created)
	}
	if !strings.Contains(out, "created source logins (stream CEP_LOGINS, subjects logins.>, key e.user)") {
		t.Errorf("create output %q", out)
	}
	cepctl(t, url, "source", "create", "orders", "--subjects", "shop.orders.*", "--stream", "ORDERS").mustOK(t)
	if created.GetStream() != "ORDERS" || strings.Join(created.GetSubjects(), ",") != "shop.orders.*" || created.GetKey() != "" {
		t.Errorf("create request %v", created)
	}

	out = cepctl(t, url, "source", "list").mustOK(t).stdout
	for _, row := range [][]string{
		{"NAME", "STREAM", "SUBJECTS", "KEY", "RE-KEYS", "MANAGED", "KEY", "GROUPS"},
		{"logins", "CEP_LOGINS", "logins.>", "e.user", "-", "true", "128"},
		{"orders", "ORDERS", "shop.orders.*,orders.>", "-", "-", "false", "0"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}

	out = cepctl(t, url, "source", "delete", "logins").mustOK(t).stdout
	if out != "deleted source(s) logins (streams kept)\n" {
		t.Errorf("delete output %q", out)
	}
	out = cepctl(t, url, "source", "delete", "logins", "--delete-stream").mustOK(t).stdout
	if out != "deleted source(s) logins, logins.k1234 (streams deleted: CEP_LOGINS, CEP_LOGINS_K1234)\n" {
		t.Errorf("delete --delete-stream output %q", out)
	}
	cepctl(t, url, "source", "delete", "orders").mustFail(t, `source "orders" is read by pattern(s) big-orders; delete them first`)

	out = cepctl(t, url, "source", "get", "logins").mustOK(t).stdout
	if asked != "logins" || !hasRow(out, "Key:", "e.user") || !hasRow(out, "Stream:", "CEP_LOGINS") {
		t.Errorf("get %q:\n%s", asked, out)
	}
	out = cepctl(t, url, "source", "get", "logins", "-o", "yaml").mustOK(t).stdout
	var s map[string]any
	if err := yaml.Unmarshal([]byte(out), &s); err != nil || s["key"] != "e.user" || s["keyGroups"] != 128.0 {
		t.Errorf("get yaml %q: %v", out, err)
	}
	cepctl(t, url, "source", "get", "nope").mustFail(t, `source "nope": api: not found`)
	if out := cepctl(t, url, "source", "get", "logins").mustOK(t).stdout; !hasRow(out, "Retention:", "-") {
		t.Errorf("a source without limits shows retention:\n%s", out)
	}

	// retention limits: sent as given, shown by get
	cepctl(t, url, "source", "create", "metrics", "--max-age", "72h", "--max-bytes", "50G", "--max-msgs", "1000000").mustOK(t)
	if l := created.GetLimits(); l.GetMaxAge().AsDuration() != 72*time.Hour || l.GetMaxBytes() != 50<<30 || l.GetMaxMsgs() != 1_000_000 {
		t.Errorf("create request limits %v", l)
	}
	cepctl(t, url, "source", "create", "plain").mustOK(t)
	if created.GetLimits() != nil {
		t.Errorf("create without limits sent %v", created.GetLimits())
	}
	out = cepctl(t, url, "source", "get", "metrics").mustOK(t).stdout
	if !strings.Contains(out, "max age 72h0m0s, max bytes 50 GiB, max msgs 1,000,000") {
		t.Errorf("get of a source with limits:\n%s", out)
	}
}

func TestSavepoints(t *testing.T) {
	var created *cepv1.CreateSavepointRequest
	var restored *cepv1.RestoreSavepointRequest
	sp := &cepv1.Savepoint{Id: "sp-7", Location: "dir:///var/sp/sp-7", CreatedIndex: 99,
		CreatedTime: timestamppb.New(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)), ShardCount: 4, KeyGroups: 128,
		SourcePositions: []*cepv1.SourcePosition{{Source: "logins", Stream: "CEP_LOGINS", Sequence: 1042}},
		PatternVersions: []*cepv1.PatternVersion{{Name: "login-fail", Version: 3}}}
	url := startAPI(t, api.Backends{Savepoints: &fakeSavepoints{
		DeleteFunc: func(_ context.Context, r *cepv1.DeleteSavepointRequest) (*cepv1.DeleteSavepointResponse, error) {
			switch {
			case r.Id != "sp-7":
				return nil, fmt.Errorf("savepoint %q: %w", r.Id, api.ErrNotFound)
			case r.KeepFiles:
				return &cepv1.DeleteSavepointResponse{Savepoint: sp}, nil
			}
			return &cepv1.DeleteSavepointResponse{Savepoint: sp, DeletedFiles: []string{"sp-7-shard-1", "sp-7-shard-2"}}, nil
		},
		CreateFunc: func(_ context.Context, r *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
			created = r
			if !strings.Contains(r.GetTarget(), "://") {
				return nil, fmt.Errorf("target %q: want dir:// or nats://: %w", r.GetTarget(), api.ErrInvalidArgument)
			}
			return &cepv1.CreateSavepointResponse{Savepoint: sp}, nil
		},
		ListFunc: func(context.Context, *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
			return &cepv1.ListSavepointsResponse{Savepoints: []*cepv1.Savepoint{sp}}, nil
		},
		RestoreFunc: func(_ context.Context, r *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
			restored = r
			n := r.GetShardCount()
			if n == 0 {
				n = 4
			}
			var pending []uint32
			if n == 8 {
				pending = []uint32{3, 6}
			}
			return &cepv1.RestoreSavepointResponse{Savepoint: sp, ShardCount: n, RestoredIndex: 120, PendingShards: pending}, nil
		},
	}})
	out := cepctl(t, url, "savepoint", "create", "dir:///var/sp").mustOK(t).stdout
	if created.GetTarget() != "dir:///var/sp" {
		t.Errorf("create request %v", created)
	}
	for _, row := range [][]string{{"ID:", "sp-7"}, {"Created:", "2025-03-04T05:06:07Z"}, {"Shards:", "4"}, {"Patterns:", "login-fail@3"}, {"Positions:", "logins(CEP_LOGINS)@1042"}} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}
	cepctl(t, url, "savepoint", "create", "/var/sp").mustFail(t, `target "/var/sp": want dir:// or nats://`)

	out = cepctl(t, url, "savepoint", "list").mustOK(t).stdout
	if !hasRow(out, "sp-7", "dir:///var/sp/sp-7", "2025-03-04T05:06:07Z", "99", "4", "128", "login-fail@3") {
		t.Errorf("list:\n%s", out)
	}
	out = cepctl(t, url, "savepoint", "list", "-o", "json").mustOK(t).stdout
	var l struct {
		Savepoints []struct {
			ID          string `json:"id"`
			CreatedTime string `json:"createdTime"`
		} `json:"savepoints"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Savepoints) != 1 || l.Savepoints[0].CreatedTime != "2025-03-04T05:06:07Z" {
		t.Errorf("list json %q: %v", out, err)
	}

	out = cepctl(t, url, "savepoint", "restore", "sp-7").mustOK(t).stdout
	if restored.GetId() != "sp-7" || restored.GetLocation() != "" || restored.GetShardCount() != 0 {
		t.Errorf("restore request %v", restored)
	}
	if !strings.Contains(out, "restored savepoint sp-7 (dir:///var/sp/sp-7) into 4 shards at index 120") {
		t.Errorf("restore output %q", out)
	}
	if r := cepctl(t, url, "savepoint", "restore", "nats://bucket/sp-7", "--shards", "8").mustOK(t); !strings.HasPrefix(r.stderr, "cepctl: warning: shard(s) 3, 6 have not restored their part yet") {
		t.Errorf("restore with pending shards: stderr %q", r.stderr)
	}
	if restored.GetLocation() != "nats://bucket/sp-7" || restored.GetId() != "" || restored.GetShardCount() != 8 {
		t.Errorf("restore request %v", restored)
	}
	r := cepctl(t, url, "savepoint", "delete", "sp-7").mustOK(t)
	if r.stdout != "deleted savepoint sp-7 (2 files deleted)\n" || !strings.HasPrefix(r.stderr, "cepctl: warning: 2 of the savepoint's 4 files were found at dir:///var/sp/sp-7 and deleted") {
		t.Errorf("delete: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := cepctl(t, url, "savepoint", "delete", "sp-7", "--keep-files").mustOK(t); r.stdout != "deleted savepoint sp-7 (files kept)\n" || r.stderr != "" {
		t.Errorf("delete --keep-files: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	cepctl(t, url, "savepoint", "delete", "sp-8").mustFail(t, `savepoint "sp-8": api: not found`)
}

func TestErrors(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + l.Addr().String()
		l.Close()
		cepctl(t, url, "pattern", "list").mustFail(t, "cannot reach the server at "+url+": ", "connection refused")
	})
	t.Run("not a cep node", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		cepctl(t, srv.URL, "status").mustFail(t, "the server at "+srv.URL+" does not serve cep.v1.ClusterService/GetStatus")
	})
	t.Run("service not mounted", func(t *testing.T) {
		url := startAPI(t, api.Backends{Patterns: &fakePatterns{}})
		cepctl(t, url, "savepoint", "list").mustFail(t, "does not serve cep.v1.SavepointService/ListSavepoints")
	})

	list := &fakePatterns{ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
		return &cepv1.ListPatternsResponse{}, nil
	}}
	t.Run("token", func(t *testing.T) {
		url := startAPI(t, api.Backends{Patterns: list}, api.WithToken("s3cret"))
		cepctl(t, url, "pattern", "list").mustFail(t, "the server needs a token (--token-file, CEPCTL_TOKEN, --token or config)")
		cepctl(t, url, "pattern", "list", "--token", "wrong").mustFail(t, "the server rejected the token")
		cepctl(t, url, "pattern", "list", "--token", "s3cret").mustOK(t)
		cepctlEnv(t, map[string]string{"CEPCTL_TOKEN": "s3cret", "CEPCTL_SERVER": url}, "", "pattern", "list").mustOK(t)
		cfg := writeTemp(t, "c.yaml", "server: "+url+"\ntoken: s3cret\n")
		cepctlEnv(t, nil, "", "--config", cfg, "pattern", "list").mustOK(t)
		xdg := t.TempDir()
		os.MkdirAll(filepath.Join(xdg, "cep"), 0o755)
		os.WriteFile(filepath.Join(xdg, "cep", "cepctl.yaml"), []byte("server: "+url+"\ntoken: s3cret\n"), 0o600)
		cepctlEnv(t, map[string]string{"XDG_CONFIG_HOME": xdg}, "", "pattern", "list").mustOK(t)
	})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unavailable", fmt.Errorf("shard 3 has no leader: %w", api.ErrUnavailable), "the cluster is unavailable: shard 3 has no leader"},
		{"internal", fmt.Errorf("disk on fire"), "server error: disk on fire"},
		{"failed precondition", fmt.Errorf("key groups differ: %w", api.ErrFailedPrecondition), "cepctl: key groups differ: api: failed precondition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b time.Duration) { retryBudget = b }(retryBudget)
			retryBudget = 0 // the message after the retries
			url := startAPI(t, api.Backends{Patterns: &fakePatterns{
				ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
					return nil, tc.err
				},
			}})
			cepctl(t, url, "pattern", "list").mustFail(t, tc.want)
		})
	}
	t.Run("usage errors are one line", func(t *testing.T) {
		r := cepctl(t, "http://127.0.0.1:1", "pattern", "deploy").mustFail(t, "accepts 1 arg")
		if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("stderr is not one line: %q", r.stderr)
		}
		cepctl(t, "http://127.0.0.1:1", "pattern", "deploy", "x", "--nope").mustFail(t, "unknown flag: --nope")
		cepctl(t, "http://127.0.0.1:1", "pattern", "deplyo", "x").mustFail(t, `unknown command "deplyo" for "cepctl pattern"`)
		cepctl(t, "http://127.0.0.1:1", "nope").mustFail(t, `unknown command "nope" for "cepctl"`)
		if r := cepctl(t, "http://127.0.0.1:1", "savepoint").mustOK(t); !strings.Contains(r.stdout, "Available Commands") {
			t.Errorf("a group alone prints its help:\n%s", r.stdout)
		}
	})
}

func TestWriteRekeyed(t *testing.T) {
	var b strings.Builder
	p := &cepv1.Pattern{Sources: []string{"bank", "cards"}, Reads: []string{"bank", "cards.k0a1b2c3d"}}
	if err := writeRekeyed(&b, p); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "  cards is keyed otherwise: the pattern reads it re-keyed by its own key through cards.k0a1b2c3d\n" {
		t.Errorf("got %q", got)
	}
	b.Reset()
	if err := writeRekeyed(&b, &cepv1.Pattern{Sources: []string{"bank"}, Reads: []string{"bank"}}); err != nil || b.Len() != 0 {
		t.Errorf("a pattern reading its source directly: %q, %v", b.String(), err)
	}
}

// apply deploys a pattern that is not running, updates one whose spec or
// given settings differ, and leaves one alone that is the same.
func TestPatternApply(t *testing.T) {
	running := map[string]*cepv1.Pattern{}
	var calls []string
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ValidateFunc: func(_ context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
			if strings.Contains(r.Spec, "broken") {
				return &cepv1.ValidatePatternResponse{Valid: false, Error: &cepv1.SpecError{Message: `stage "a": field "where": broken`}}, nil
			}
			return &cepv1.ValidatePatternResponse{Valid: true, Name: "login-fail"}, nil
		},
		GetFunc: func(_ context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
			calls = append(calls, "get "+r.Name)
			p := running[r.Name]
			if p == nil {
				return nil, fmt.Errorf("pattern %q: %w", r.Name, api.ErrNotFound)
			}
			return &cepv1.GetPatternResponse{Pattern: p}, nil
		},
		DeployFunc: func(_ context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
			calls = append(calls, "deploy")
			p := samplePattern("login-fail", 1, cepv1.PatternState_PATTERN_STATE_ACTIVE)
			p.Spec = r.Spec
			running[p.Name] = p
			return &cepv1.DeployPatternResponse{Pattern: p}, nil
		},
		UpdateFunc: func(_ context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
			calls = append(calls, "update "+r.Policy.String())
			p := running["login-fail"]
			p.Spec, p.Version = r.Spec, p.Version+1
			if len(r.Records) > 0 {
				p.Records = r.Records
			}
			return &cepv1.UpdatePatternResponse{Pattern: p}, nil
		},
	}})
	doc := writeTemp(t, "login.yaml", loginPattern)
	changed := writeTemp(t, "login2.yaml", loginPattern+"# changed\n")
	for _, c := range []struct {
		args      []string
		wantOut   string
		wantCalls []string
	}{
		{[]string{doc}, "deployed pattern login-fail version 1", []string{"get login-fail", "deploy"}},
		{[]string{doc}, "pattern login-fail unchanged at version 1", []string{"get login-fail"}},
		{[]string{doc, "--records", "late,match"}, "pattern login-fail unchanged at version 1", []string{"get login-fail"}},
		{[]string{changed, "--policy", "migrate"}, "updated pattern login-fail to version 2 (policy migrate", []string{"get login-fail", "update UPDATE_POLICY_MIGRATE"}},
		{[]string{changed, "--records", "match"}, "updated pattern login-fail to version 3 (policy drain", []string{"get login-fail", "update UPDATE_POLICY_DRAIN"}},
		{[]string{changed, "--records", "match"}, "pattern login-fail unchanged at version 3", []string{"get login-fail"}},
	} {
		calls = nil
		out := cepctl(t, url, append([]string{"pattern", "apply"}, c.args...)...).mustOK(t).stdout
		if !strings.Contains(out, c.wantOut) || !slices.Equal(calls, c.wantCalls) {
			t.Errorf("apply %v: %q after %v, want %q after %v", c.args, out, calls, c.wantOut, c.wantCalls)
		}
	}
	broken := writeTemp(t, "broken.yaml", "broken")
	cepctl(t, url, "pattern", "apply", broken).mustFail(t, `broken.yaml: stage "a": field "where": broken`)
}

// cepctl node remove asks for the removal and, with --wait, follows the
// node in GetStatus until it is gone (or says it is still there).
func TestNodeRemove(t *testing.T) {
	var asked []string
	polls := 0
	url := startAPI(t, api.Backends{Cluster: &fakeCluster{
		RemoveFunc: func(_ context.Context, r *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error) {
			asked = append(asked, fmt.Sprintf("%s%s", r.GetNodeId(), map[bool]string{true: "!"}[r.GetAllowFewerReplicas()]))
			if r.GetNodeId() == "n9" {
				return nil, fmt.Errorf("%w: node %q", api.ErrNotFound, r.GetNodeId())
			}
			return &cepv1.RemoveNodeResponse{Node: &cepv1.Node{Id: r.GetNodeId(), Removing: true, Replicas: 3}}, nil
		},
		StatusFunc: func(_ context.Context, _ *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			polls++
			nodes := []*cepv1.Node{{Id: "n1"}}
			if polls < 3 {
				nodes = append(nodes, &cepv1.Node{Id: "n3", Removing: true, Replicas: uint32(3 - polls)})
			}
			return &cepv1.GetStatusResponse{Nodes: nodes}, nil
		},
	}})
	out := cepctl(t, url, "node", "remove", "n3").mustOK(t).stdout
	if out != "removing node n3: its 3 replicas move to other nodes (cepctl status shows the progress)\n" {
		t.Errorf("remove output %q", out)
	}
	if r := cepctl(t, url, "node", "remove", "n9"); r.code == 0 || !strings.Contains(r.stderr, `not found: node "n9"`) {
		t.Errorf("removing an unknown node: %+v", r)
	}
	out = cepctl(t, url, "node", "remove", "n3", "--wait", "1m").mustOK(t).stdout
	if out != "node n3 removed from the cluster; stop its process\n" || polls != 3 {
		t.Errorf("remove --wait output %q after %d polls", out, polls)
	}
	polls = -100
	if r := cepctl(t, url, "node", "remove", "n3", "--wait", "1s", "--allow-fewer-replicas"); r.code == 0 || !strings.Contains(r.stderr, "still holds") {
		t.Errorf("remove --wait that times out: %+v", r)
	}
	if strings.Join(asked, ",") != "n3,n9,n3,n3!" {
		t.Errorf("asked to remove %v", asked)
	}
}

// cepctl shard split passes the shard and split point and says what each
// shard holds afterwards, or that the split is not done yet.
func TestShardSplit(t *testing.T) {
	var asked []string
	url := startAPI(t, api.Backends{Cluster: &fakeCluster{
		SplitFunc: func(_ context.Context, r *cepv1.SplitShardRequest) (*cepv1.SplitShardResponse, error) {
			asked = append(asked, fmt.Sprintf("%d@%d", r.GetShardId(), r.GetAtKeyGroup()))
			if r.GetShardId() == 9 {
				return nil, fmt.Errorf("%w: shard 9", api.ErrNotFound)
			}
			at := max(r.GetAtKeyGroup(), 128)
			return &cepv1.SplitShardResponse{ShardId: r.GetShardId(), KeyGroups: &cepv1.KeyGroupRange{First: 0, Last: at - 1},
				NewShardId: 4, NewKeyGroups: &cepv1.KeyGroupRange{First: at, Last: 255}, Pending: r.GetAtKeyGroup() == 200}, nil
		},
	}})
	if out := cepctl(t, url, "shard", "split", "1").mustOK(t).stdout; out != "shard 1 split: it keeps key groups 0-127, new shard 4 takes 128-255\n" {
		t.Errorf("split output %q", out)
	}
	if out := cepctl(t, url, "shard", "split", "1", "--at", "200").mustOK(t).stdout; !strings.Contains(out, "shard 1 splitting (not done yet") {
		t.Errorf("pending split output %q", out)
	}
	if r := cepctl(t, url, "shard", "split", "9"); r.code == 0 || !strings.Contains(r.stderr, "not found: shard 9") {
		t.Errorf("splitting an unknown shard: %+v", r)
	}
	if r := cepctl(t, url, "shard", "split", "one"); r.code == 0 || !strings.Contains(r.stderr, "want a shard number") {
		t.Errorf("a shard id that is not a number: %+v", r)
	}
	if strings.Join(asked, ",") != "1@0,1@200,9@0" {
		t.Errorf("asked %v", asked)
	}
}
