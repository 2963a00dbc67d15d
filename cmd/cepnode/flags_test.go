package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/testutil"
)

// Every flag is read from its CEPNODE_* variable, and the README's table
// lists each flag with that variable and, where it gives one literally,
// its default.
func TestEveryFlagHasItsVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // flag → its table row's cells
	for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z-]+)` \\|(.*)\\|$").FindAllStringSubmatch(string(readme), -1) {
		var cells []string
		for _, c := range strings.Split(m[2], "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows[m[1]] = cells
	}
	all := flag.NewFlagSet("cepnode", flag.ContinueOnError)
	defineFlags(all, cluster.DefaultConfig())
	n := 0
	all.VisitAll(func(f *flag.Flag) {
		n++
		v := "CEPNODE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if !strings.HasSuffix(f.Usage, "(env "+v+")") {
			t.Errorf("--%s: its help does not name %s: %q", f.Name, v, f.Usage)
		}
		row, ok := rows["--"+f.Name]
		switch {
		case !ok:
			t.Errorf("the README's flag table lacks --%s", f.Name)
		case len(row) != 3 || row[0] != "`"+v+"`":
			t.Errorf("the README's row of --%s names %q, want `%s`", f.Name, row, v)
		case strings.Count(row[1], "`") == 2 && strings.HasPrefix(row[1], "`") && strings.HasSuffix(row[1], "`") && f.DefValue != "" && strings.Trim(row[1], "`") != f.DefValue:
			t.Errorf("the README gives --%s the default %s, cepnode %q", f.Name, row[1], f.DefValue)
		}
		delete(rows, "--"+f.Name)

		// a value of the flag's type, not its default
		val := "v-from-env"
		switch f.Value.(flag.Getter).Get().(type) {
		case bool:
			val = map[string]string{"true": "false", "false": "true"}[f.DefValue]
		case int:
			val = "17"
		case time.Duration:
			val = "17s"
		}
		if f.Name == "config" {
			val = filepath.Join(t.TempDir(), "empty.yaml")
			os.WriteFile(val, nil, 0o600)
		}
		fs := flag.NewFlagSet("cepnode", flag.ContinueOnError)
		defineFlags(fs, cluster.DefaultConfig())
		t.Setenv(v, val)
		if err := parseFlags(fs, nil); err != nil {
			t.Errorf("%s=%s: %v", v, val, err)
		} else if got := fs.Lookup(f.Name).Value.String(); got != val {
			t.Errorf("%s=%s: --%s is %q", v, val, f.Name, got)
		}
		os.Unsetenv(v)
	})
	if n < 39 {
		t.Errorf("%d flags, want at least 39", n)
	}
	for f := range rows {
		if strings.HasPrefix(f, "--") && !strings.Contains(string(readme), "| "+"`"+f+"` | `CEPNODE_") {
			continue // another table (ports, cepctl)
		}
		t.Errorf("the README's flag table lists %s, which cepnode does not have", f)
	}
}

// runRefused runs cepnode with args, failing the test unless it returns
// an error at once (the node never starts: old code that ignored a
// variable would start one, and run until the deadline).
func runRefused(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	dir := t.TempDir()
	err := Run(ctx, append([]string{"--data", dir + "/data", "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--nats-port", "-1"}, args...), &stderr)
	if err == nil {
		t.Fatalf("%v: started, want an error", args)
	}
	return stderr.String(), err
}

// A variable counts as its flag does: a value the flag refuses is refused
// from the variable too, naming it.
func TestVariablesAreRead(t *testing.T) {
	for _, c := range []struct{ env, value, want string }{
		{"CEPNODE_DEAD_AFTER", "1s", "--dead-after must be at least 10s"},
		{"CEPNODE_REPLICAS", "0", "--replicas must be at least 1"},
		{"CEPNODE_OUTBOX_LIMIT", "0", "--outbox-limit must be at least 1"},
		{"CEPNODE_DEPLOY_WAIT", "0s", "--deploy-wait must be positive"},
		{"CEPNODE_OUTPUT_MAX_AGE", "10m", "--output-max-age 10m0s: at least 30m0s"},
		{"CEPNODE_OUTPUT_MAX_BYTES", "lots", `--output-max-bytes: "lots" is not a positive size`},
		{"CEPNODE_KEY_GROUPS", "0", "--key-groups must be at least 1"},
		{"CEPNODE_SHARDS", "-1", "--shards must not be negative"},
		{"CEPNODE_PPROF", "maybe", `CEPNODE_PPROF`},
		{"CEPNODE_AUTO_SPLIT", "maybe", `CEPNODE_AUTO_SPLIT`},
		{"CEPNODE_MAX_KEYS", "0", "--max-keys: 0 is not a positive number"},
		{"CEPNODE_LOG_FORMAT", "xml", `--log-format: "xml" is neither text nor json`},
		{"CEPNODE_RAFT_SNAPSHOT_THRESHOLD", "-3", "--raft-snapshot-threshold must be at least 1 (got -3)"},
		{"CEPNODE_RAFT_SNAPSHOT_INTERVAL", "0s", "--raft-snapshot-interval must be at least 100ms (got 0s)"},
	} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			_, err := runRefused(t)
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s=%s: %v, want one line with %q", c.env, c.value, err, c.want)
			}
		})
	}
}

// The command line wins over the environment, which wins over the config
// file, which wins over the defaults; YAML and JSON files both work.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	yamlFile, jsonFile := filepath.Join(dir, "cepnode.yaml"), filepath.Join(dir, "cepnode.json")
	os.WriteFile(yamlFile, []byte("# a node\noutput-max-bytes: from-file\nauto-split: false\njoin: [h1:7946, h2:7946]\n"), 0o600)
	os.WriteFile(jsonFile, []byte(`{"output-max-bytes": "from-json", "replicas": 2}`), 0o600)

	_, err := runRefused(t, "--config", yamlFile)
	if !strings.Contains(err.Error(), `"from-file"`) {
		t.Errorf("file only: %v", err)
	}
	_, err = runRefused(t, "--config", jsonFile)
	if !strings.Contains(err.Error(), `"from-json"`) {
		t.Errorf("JSON file: %v", err)
	}
	tomlFile := filepath.Join(dir, "cepnode.toml")
	os.WriteFile(tomlFile, []byte("# a node\noutput-max-bytes = \"from-toml\"\nreplicas = 2\nauto-split = false\njoin = [\"h1:7946\", \"h2:7946\"]\n"), 0o600)
	_, err = runRefused(t, "--config", tomlFile)
	if !strings.Contains(err.Error(), `"from-toml"`) {
		t.Errorf("TOML file: %v", err)
	}
	fsT := flag.NewFlagSet("cepnode", flag.ContinueOnError)
	fT := defineFlags(fsT, cluster.DefaultConfig())
	if err := parseFlags(fsT, []string{"--config", tomlFile}); err != nil || *fT.replicas != 2 || *fT.autoSplit || *fT.join != "h1:7946,h2:7946" {
		t.Errorf("from the TOML file: %v, replicas %d, auto-split %v, join %q", err, *fT.replicas, *fT.autoSplit, *fT.join)
	}
	t.Setenv("CEPNODE_OUTPUT_MAX_BYTES", "from-env")
	_, err = runRefused(t, "--config", yamlFile)
	if !strings.Contains(err.Error(), `"from-env"`) {
		t.Errorf("file and environment: %v", err)
	}
	_, err = runRefused(t, "--config", yamlFile, "--output-max-bytes", "from-flag")
	if !strings.Contains(err.Error(), `"from-flag"`) {
		t.Errorf("file, environment and flag: %v", err)
	}
	os.Unsetenv("CEPNODE_OUTPUT_MAX_BYTES")
	t.Setenv("CEPNODE_CONFIG", yamlFile)
	_, err = runRefused(t)
	if !strings.Contains(err.Error(), `"from-file"`) {
		t.Errorf("CEPNODE_CONFIG: %v", err)
	}
	os.Unsetenv("CEPNODE_CONFIG")

	// the values a file gives reach the flags, a list joined by commas
	fs := flag.NewFlagSet("cepnode", flag.ContinueOnError)
	f := defineFlags(fs, cluster.DefaultConfig())
	if err := parseFlags(fs, []string{"--config", yamlFile}); err != nil {
		t.Fatal(err)
	}
	if *f.autoSplit || *f.join != "h1:7946,h2:7946" || *f.outputMaxBytes != "from-file" {
		t.Errorf("from the file: auto-split %v, join %q, output-max-bytes %q", *f.autoSplit, *f.join, *f.outputMaxBytes)
	}

	for _, c := range []struct{ content, want string }{
		{"bogus: 1\n", `--config ` + dir + `/bad.yaml: config file flag "bogus" not defined`},
		{"replicas: three\n", `--config ` + dir + `/bad.yaml: error setting flag "replicas"`},
		{"peers: {n1: x}\n", `--config ` + dir + `/bad.yaml: peers: not a string, number, boolean or list`},
		{"- id\n", `--config ` + dir + `/bad.yaml: not a mapping`},
		{"id: [\n", `--config ` + dir + `/bad.yaml: `},
	} {
		os.WriteFile(dir+"/bad.yaml", []byte(c.content), 0o600)
		_, err := runRefused(t, "--config", dir+"/bad.yaml")
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", c.content, err, c.want)
		}
	}
	if _, err := runRefused(t, "--config", dir+"/none.yaml"); !strings.Contains(err.Error(), "--config "+dir+"/none.yaml: open") {
		t.Errorf("a missing file: %v", err)
	}
}

// --log-format json writes one JSON object a line, the hashicorp
// libraries' lines too.
func TestLogFormatJSON(t *testing.T) {
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("admin tok-admin-secret\n"), 0o644) // too open: a warning is logged
	stderr, _ := runRefused(t, "--log-format", "json", "--token-file", tokens, "--gossip-addr", taken.LocalAddr().String())
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	warned := false
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		if rec["level"] == "WARN" && strings.Contains(rec["msg"].(string), "token file") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no JSON warning about the token file in:\n%s", stderr)
	}
	if strings.Contains(stderr, "tok-admin-secret") {
		t.Error("a token logged")
	}
}

// The version set at build time with -ldflags is what --version and
// cepnode version print.
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cepnode")
	}
	bin := filepath.Join(t.TempDir(), "cepnode")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/cepcluster/cep/internal/version.Version=v9.8.7-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--version"}, {"version"}, {"--id", "n1", "--version"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CEPNODE_DEAD_AFTER=nonsense") // not parsed for --version
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "cepnode v9.8.7-test") || strings.Count(string(out), "\n") != 1 ||
			!strings.Contains(string(out), "cluster versions up to "+clusterversion.Highest.String()) {
			t.Errorf("cepnode %v: %v, %q", args, err, out)
		}
	}
}

// The snapshot flags, from the command line, the environment or the
// config file, reach the Raft configuration of the node's groups, on a
// copy: the defaults stay as they are.
func TestRaftSnapshotFlagsReachTheConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cepnode.yaml")
	os.WriteFile(file, []byte("raft-snapshot-threshold: 40\nraft-snapshot-interval: 3s\n"), 0o600)
	for _, c := range []struct {
		name      string
		args, env []string
		threshold uint64
		interval  time.Duration
	}{
		{"defaults", nil, nil, 256, 10 * time.Second},
		{"flags", []string{"--raft-snapshot-threshold", "16", "--raft-snapshot-interval", "500ms"}, nil, 16, 500 * time.Millisecond},
		{"environment", nil, []string{"CEPNODE_RAFT_SNAPSHOT_THRESHOLD=1", "CEPNODE_RAFT_SNAPSHOT_INTERVAL=100ms"}, 1, 100 * time.Millisecond},
		{"file", []string{"--config", file}, nil, 40, 3 * time.Second},
		{"file and flag", []string{"--config", file, "--raft-snapshot-interval", "2m"}, nil, 40, 2 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range c.env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			d := cluster.DefaultConfig()
			fs := flag.NewFlagSet("cepnode", flag.ContinueOnError)
			f := defineFlags(fs, d)
			if err := parseFlags(fs, c.args); err != nil {
				t.Fatal(err)
			}
			cfg := d
			if err := setSnapshots(&cfg, *f.snapThreshold, *f.snapInterval); err != nil {
				t.Fatal(err)
			}
			if cfg.Raft.SnapshotThreshold != c.threshold || cfg.Raft.SnapshotInterval != c.interval {
				t.Errorf("Raft snapshots every %d entries, checked every %v; want %d, %v", cfg.Raft.SnapshotThreshold, cfg.Raft.SnapshotInterval, c.threshold, c.interval)
			}
			if def := cluster.DefaultConfig().Raft; d.Raft.SnapshotThreshold != def.SnapshotThreshold || d.Raft.SnapshotInterval != def.SnapshotInterval ||
				cfg.Raft.HeartbeatTimeout != def.HeartbeatTimeout || cfg.Raft.TrailingLogs != def.TrailingLogs {
				t.Errorf("the defaults changed, or the rest of the Raft configuration was lost: %+v", cfg.Raft)
			}
		})
	}
}

// A node run with a threshold of one entry checked every 100ms has
// snapshots of its shard and of its metadata group on disk within
// seconds: with the defaults (256 entries, every 10s) an idle node takes
// none in that time.
func TestRaftSnapshotFlagsReachTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--data", dir, "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--nats-port", "-1",
			"--log-level", "error", "--raft-snapshot-threshold", "1", "--raft-snapshot-interval", "100ms"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the node: %v", err)
		}
	}()
	testutil.EventuallyEvery(t, 5*time.Second, 50*time.Millisecond, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the node stopped: %v", err)
		default:
		}
		shards, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "snapshots", "*", "state.bin"))
		metas, _ := filepath.Glob(filepath.Join(dir, "meta", "snapshots", "*", "state.bin"))
		if len(shards) == 0 || len(metas) == 0 {
			return fmt.Errorf("snapshots of shards %v, of the metadata %v", shards, metas)
		}
		return nil
	})
}
