package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/internal/version"
	"github.com/cepcluster/cep/nfa"
)

// scrape parses node i's /metrics.
func (tc *testCluster) scrape(i int) map[string]*dto.MetricFamily {
	tc.t.Helper()
	b, err := tc.metrics(i)
	if err != nil {
		tc.t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		tc.t.Fatalf("node %d's /metrics: %v", i, err)
	}
	return fams
}

// patternSeries sums, over the running nodes, family name's samples of
// pattern, and says which nodes export which shard's.
func (tc *testCluster) patternSeries(name, pattern string) (sum float64, by map[string][]int) {
	tc.t.Helper()
	by = map[string][]int{}
	for i, n := range tc.nodes {
		if n == nil {
			continue
		}
		mf := tc.scrape(i)[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pattern"] != pattern {
				continue
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			by[labels["shard"]] = append(by[labels["shard"]], i)
		}
	}
	return sum, by
}

// offlineCounts is what the offline engine counts for spec over lines.
func offlineCounts(t *testing.T, spec []byte, lines []string) nfa.Stats {
	t.Helper()
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := offlineRunner(t, p, lines)
	return r.Matchers()[0].Stats()
}

// A pattern's counters are exported by each shard's leader only, so the
// sum over the nodes is the offline engine's count; stopping the node that
// leads a shard moves its series to the new leader with the same value
// (neither reset nor counted twice), and counting goes on from there.
func TestPatternMetricsFollowTheLeader(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.deployOnBank(0, lflSpec)
	byAccount := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	lines := bankEvents(31, 300)
	tc.publish("bank", byAccount, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
	want := offlineCounts(t, lflSpec, lines)
	if want.Matches == 0 || want.Timeouts == 0 {
		t.Fatalf("offline %+v: the events do not exercise the counters", want)
	}
	check := func(when string, want nfa.Stats) {
		t.Helper()
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			for _, f := range []struct {
				name string
				want uint64
			}{{"cep_pattern_matches_total", want.Matches}, {"cep_pattern_timeouts_total", want.Timeouts}, {"cep_pattern_late_events_total", want.Late}} {
				sum, by := tc.patternSeries(f.name, "lfl")
				if sum != float64(f.want) {
					return fmt.Errorf("%s: %s{pattern=\"lfl\"} sums to %v over the nodes, the offline engine counts %d", when, f.name, sum, f.want)
				}
				if len(by) != len(tc.nodes[0].Meta().Shards) {
					return fmt.Errorf("%s: %s: series of shards %v, want every shard's", when, f.name, by)
				}
				for sh, nodes := range by {
					if len(nodes) != 1 {
						return fmt.Errorf("%s: %s of shard %s exported by nodes %v, want its leader only", when, f.name, sh, nodes)
					}
				}
			}
			return nil
		})
	}
	check("after the events", want)

	// the leader of some shard goes; another node takes the shard over
	var gone int
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for i, n := range tc.nodes {
			for _, sh := range n.Shards() {
				if sh.Raft().State() == raft.Leader && i != 0 {
					gone = i
					return nil
				}
			}
		}
		return fmt.Errorf("nodes 2 and 3 lead no shard")
	})
	if err := tc.stop(gone); err != nil {
		t.Fatal(err)
	}
	check(fmt.Sprintf("node %d stopped", gone+1), want)

	more := bankEvents(32, 200)
	for i := range more { // after the first events, fillers too
		var e map[string]any
		if err := json.Unmarshal([]byte(more[i]), &e); err != nil {
			t.Fatal(err)
		}
		e["ts"] = e["ts"].(float64) + 2_000_000
		b, _ := json.Marshal(e)
		more[i] = string(b)
	}
	tc.publish("bank", byAccount, more)
	all := append(append([]string(nil), lines...), more...)
	check("after more events", offlineCounts(t, lflSpec, all))
}

// docFamilies lists the metric families docs/metrics.md describes: the
// first column of its tables.
func docFamilies(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:][a-z0-9_:]*)`").FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	sort.Strings(out)
	return out
}

// promQueries lists the PromQL of the dashboard's panels and of the
// alert rules, each with where it is.
func promQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dash, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "cep-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Name, Type, Query string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("cep-dashboard.json: %v", err)
	}
	for _, p := range d.Panels {
		for j, tg := range p.Targets {
			out[fmt.Sprintf("dashboard panel %q target %d", p.Title, j)] = tg.Expr
		}
	}
	// template variables' label_values(metric, label)
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			continue
		}
		if m := regexp.MustCompile(`^label_values\(([a-z_:][a-z0-9_:]*),\s*\w+\)$`).FindStringSubmatch(v.Query); m != nil {
			out[fmt.Sprintf("dashboard variable %q", v.Name)] = m[1]
		} else if v.Query != "" {
			t.Errorf("dashboard variable %q: query %q is not label_values(metric, label)", v.Name, v.Query)
		}
	}
	for where, expr := range alertRules(t) {
		out[where] = expr
	}
	return out
}

// alertRules checks deploy/prometheus/cep-alerts.yaml as Prometheus
// loads a rule file (the checks of promtool check rules that need no
// server: groups named once, alerts named, expressions that parse,
// durations, labels and annotations) and returns the expressions.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "cep-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval"`
			Rules    []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("cep-alerts.yaml: %v", err)
	}
	if len(f.Groups) == 0 {
		t.Fatal("cep-alerts.yaml: no groups")
	}
	out := map[string]string{}
	groups := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("cep-alerts.yaml: group %q: empty or repeated name", g.Name)
		}
		groups[g.Name] = true
		if g.Interval != "" {
			if _, err := model.ParseDuration(g.Interval); err != nil {
				t.Errorf("group %s: interval: %v", g.Name, err)
			}
		}
		for i, r := range g.Rules {
			where := fmt.Sprintf("alert rule %s/%s", g.Name, r.Alert)
			switch {
			case r.Record != "":
				t.Errorf("%s: recording rules are not expected here", where)
			case !model.LegacyValidation.IsValidMetricName(r.Alert):
				t.Errorf("group %s rule %d: alert name %q", g.Name, i, r.Alert)
			case r.Expr == "":
				t.Errorf("%s: no expr", where)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for: %v", where, err)
				}
			}
			for k := range r.Labels {
				if !model.LegacyValidation.IsValidLabelName(k) {
					t.Errorf("%s: label %q", where, k)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: wants a severity label, a summary and a description", where)
			}
			out[where] = r.Expr
		}
	}
	return out
}

// metricNames parses expr and returns the metric names its selectors name.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				bad = fmt.Errorf("a selector without a metric name: %s", vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, bad
}

// Every metric family a node exports is in docs/metrics.md, and the doc
// names no other; every metric the Grafana dashboard and the alert rules
// query is one the node exports. The node is put in the states that have
// it export its conditional families: patterns deployed, one of them
// reading a re-keyed source, and API calls made.
func TestMetricsDocumentedAndQueried(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	c := tc.deployOnBank(0, lflSpec)
	byRegion := bytes.Replace(bytes.Replace(lflSpec, []byte("name: lfl"), []byte("name: by-region"), 1), []byte("key: e.account"), []byte("key: e.region"), 1)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(byRegion)})
	lines := bankEvents(41, 100)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
	if _, err := c.patterns.GetPattern(tc.ctx, req(&cepv1.GetPatternRequest{Name: "none"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("GetPattern of none: %v", err)
	}

	var scraped map[string]*dto.MetricFamily
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		scraped = tc.scrape(0)
		for _, name := range []string{"cep_forward_lag_messages", "cep_ingest_lag_messages", "cep_pattern_matches_total", "cep_rpc_requests_total"} {
			if scraped[name] == nil {
				return fmt.Errorf("no %s in /metrics yet", name)
			}
		}
		return nil
	})
	families := tc.nodes[0].MetricFamilies()
	for name := range scraped {
		if !slices.Contains(families, name) {
			t.Errorf("/metrics serves %s, which Node.MetricFamilies does not list", name)
		}
	}
	if mf := scraped["cep_build_info"]; mf == nil || len(mf.Metric) != 1 || mf.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("cep_build_info: %v", mf)
	} else {
		v := version.Get()
		got := map[string]string{}
		for _, l := range mf.Metric[0].Label {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != v.Version || got["revision"] != v.Revision || got["goversion"] != runtime.Version() {
			t.Errorf("cep_build_info labels %v, the build is %+v (%s)", got, v, runtime.Version())
		}
	}

	// the Go runtime's and the process's families are the client
	// library's; the doc describes them as a group
	var exported []string
	for _, f := range families {
		if !strings.HasPrefix(f, "go_") && !strings.HasPrefix(f, "process_") {
			exported = append(exported, f)
		}
	}
	doc := docFamilies(t)
	for _, f := range exported {
		if !slices.Contains(doc, f) {
			t.Errorf("metric %s is exported but not in docs/metrics.md: add a row for it", f)
		}
	}
	for _, f := range doc {
		if !slices.Contains(exported, f) {
			t.Errorf("docs/metrics.md describes %s, which a node does not export", f)
		}
	}

	queries := promQueries(t)
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard and the alerts", len(queries))
	}
	for where, expr := range queries {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			continue
		}
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && scraped[b] != nil && scraped[b].GetType() == dto.MetricType_HISTOGRAM {
					base = b
				}
			}
			if !slices.Contains(families, base) {
				t.Errorf("%s queries %s, which a node does not export", where, n)
			}
		}
	}
}

// A JSON client (here a plain HTTP client speaking the Connect protocol's
// JSON, as grpcurl and browsers do) gets each record of a tail as a JSON
// object in "record", the same as the base64 "json" holds, and the
// node answers a browser's preflight from the origins it is configured
// with only.
func TestTailJSONAndCORS(t *testing.T) {
	const origin = "https://console.example.com"
	tc := newSingle(t, 2*time.Minute, cluster.Config{CORSOrigins: []string{origin}})
	tc.deployOnBank(0, lflSpec)
	lines := bankEvents(51, 150)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
	want := len(offline(t, lflSpec, lines))
	base := "http://" + tc.nodes[0].APIAddr()

	ctx, cancel := context.WithTimeout(tc.ctx, 30*time.Second)
	defer cancel()
	body := []byte(`{"pattern":"lfl","start":"TAIL_START_ALL"}`)
	frame := append([]byte{0, 0, 0, 0, byte(len(body))}, body...)
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cep.v1.MatchService/Tail", bytes.NewReader(frame))
	hr.Header.Set("Content-Type", "application/connect+json")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("tail: %s", res.Status)
	}
	for got := 0; got < want; got++ {
		var head [5]byte
		if _, err := io.ReadFull(res.Body, head[:]); err != nil {
			t.Fatalf("record %d of %d: %v", got, want, err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(res.Body, msg); err != nil {
			t.Fatal(err)
		}
		if head[0] != 0 {
			t.Fatalf("the stream ended after %d of %d records: %s", got, want, msg)
		}
		var rec struct {
			Pattern string
			JSON    []byte `json:"json"` // base64 in JSON
			Record  map[string]any
		}
		if err := json.Unmarshal(msg, &rec); err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		var fromBytes map[string]any
		if err := json.Unmarshal(rec.JSON, &fromBytes); err != nil {
			t.Fatal(err)
		}
		if rec.Record == nil || !reflect.DeepEqual(rec.Record, fromBytes) || rec.Record["pattern"] != "lfl" {
			t.Fatalf("record %s, want the object of json %s", msg, rec.JSON)
		}
	}

	preflight := func(from string) http.Header {
		r, _ := http.NewRequest(http.MethodOptions, base+"/cep.v1.PatternService/ListPatterns", nil)
		r.Header.Set("Origin", from)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "connect-protocol-version,content-type") // sorted, as browsers send them
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header
	}
	if h := preflight(origin); h.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "connect-protocol-version") {
		t.Errorf("preflight from %s: %v", origin, h)
	}
	if h := preflight("https://elsewhere.example.com"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %v", h)
	}
}
