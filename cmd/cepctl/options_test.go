package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
)

// These tests parse command lines through the runF seam: nothing runs, the
// options a command would have run with are compared with the expected ones.

// parseEnv is what a parse sees of the process: environment and home.
type parseEnv struct {
	env  map[string]string
	home string
}

// parse builds the bare root, hangs the command mk makes under its group
// (parent, "" for a top-level command) and executes args; it returns the
// options runF received, or nil and the error.
func parse[O any](t *testing.T, pe parseEnv, parent string, mk func(*deps, func(*O) error) *cobra.Command, args ...string) (*O, error) {
	t.Helper()
	if pe.home == "" {
		pe.home = t.TempDir()
	}
	var got *O
	var out bytes.Buffer
	d := &deps{
		stdin: strings.NewReader(""), stdout: &out, stderr: &out,
		getenv:  func(k string) string { return pe.env[k] },
		homeDir: func() (string, error) { return pe.home, nil },
	}
	root := newBareRootCmd(d)
	cmd := mk(d, func(o *O) error { got = o; return nil })
	if parent != "" {
		group := &cobra.Command{Use: parent}
		group.AddCommand(cmd)
		root.AddCommand(group)
	} else {
		root.AddCommand(cmd)
	}
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.ExecuteContext(context.Background()); err != nil {
		return nil, err
	}
	if got == nil {
		t.Fatalf("runF was not called; output:\n%s", out.String())
	}
	return got, nil
}

// optCase is one command line and the options (or error) it should give.
type optCase[O any] struct {
	name    string
	args    []string
	want    O
	wantErr string
}

func checkOptions[O any](t *testing.T, parent string, mk func(*deps, func(*O) error) *cobra.Command, cases []optCase[O]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, parseEnv{}, parent, mk, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("options\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

// defaults are the global options with no config, environment or flags.
var defaults = globalOptions{Server: defaultServer, Output: "table"}

func with(f func(*globalOptions)) globalOptions {
	g := defaults
	f(&g)
	return g
}

func TestGlobalOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := writeFile("explicit.yaml", "server: http://file:7070\ntoken: file-token\n")
	serverOnly := writeFile("server-only.yaml", "server: file-host:7070\n")
	bad := writeFile("bad.yaml", "server: [\n")
	unknown := writeFile("unknown.yaml", "sever: http://typo:7070\n")
	home := filepath.Join(dir, "home")
	homeCfg := writeFile("home/.config/cep/cepctl.yaml", "server: http://home:7070\ntoken: home-token\n")
	xdg := filepath.Join(dir, "xdg")
	xdgCfg := writeFile("xdg/cep/cepctl.yaml", "server: http://xdg:7070\n")
	tokenFile := writeFile("token", "  file-held-token\n")
	twoWords := writeFile("two-words", "tok-a tok-b\n")
	emptyToken := writeFile("empty-token", "\n")
	fileWithTokenFile := writeFile("with-token-file.yaml", "server: http://file:7070\ntoken-file: "+tokenFile+"\n")

	for _, tc := range []struct {
		name    string
		pe      parseEnv
		args    []string
		want    globalOptions
		wantErr string
		// wantServers is the list of servers when there are several.
		wantServers []string
	}{
		{name: "defaults", want: defaults},
		{name: "default config in home", pe: parseEnv{home: home},
			want: globalOptions{Server: "http://home:7070", Token: "home-token", Output: "table", ConfigFile: homeCfg}},
		{name: "XDG_CONFIG_HOME wins over home", pe: parseEnv{home: home, env: map[string]string{"XDG_CONFIG_HOME": xdg}},
			want: globalOptions{Server: "http://xdg:7070", Output: "table", ConfigFile: xdgCfg}},
		{name: "missing default config is fine", pe: parseEnv{env: map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "none")}},
			want: defaults},
		{name: "explicit config", args: []string{"--config", file},
			want: globalOptions{Server: "http://file:7070", Token: "file-token", Output: "table", ConfigFile: file}},
		{name: "explicit config beats the default one", pe: parseEnv{home: home}, args: []string{"--config", serverOnly},
			want: globalOptions{Server: "http://file-host:7070", Output: "table", ConfigFile: serverOnly}},
		{name: "env beats file", pe: parseEnv{env: map[string]string{"CEPCTL_SERVER": "http://env:1", "CEPCTL_TOKEN": "env-token"}},
			args: []string{"--config", file},
			want: globalOptions{Server: "http://env:1", Token: "env-token", Output: "table", ConfigFile: file}},
		{name: "env token only", pe: parseEnv{env: map[string]string{"CEPCTL_TOKEN": "env-token"}}, args: []string{"--config", file},
			want: globalOptions{Server: "http://file:7070", Token: "env-token", Output: "table", ConfigFile: file}},
		{name: "flags beat env and file", pe: parseEnv{env: map[string]string{"CEPCTL_SERVER": "http://env:1", "CEPCTL_TOKEN": "env-token"}},
			args: []string{"--config", file, "--server", "https://flag:443/", "--token", "flag-token"},
			want: globalOptions{Server: "https://flag:443", Token: "flag-token", Output: "table", ConfigFile: file}},
		{name: "an empty --token clears the configured one", args: []string{"--config", file, "--token", ""},
			want: globalOptions{Server: "http://file:7070", Output: "table", ConfigFile: file}},
		{name: "--token-file", args: []string{"--config", file, "--token-file", tokenFile},
			want: globalOptions{Server: "http://file:7070", Token: "file-held-token", Output: "table", ConfigFile: file}},
		{name: "CEPCTL_TOKEN_FILE beats the file, CEPCTL_TOKEN beats it", pe: parseEnv{env: map[string]string{"CEPCTL_TOKEN_FILE": tokenFile}},
			args: []string{"--config", file},
			want: globalOptions{Server: "http://file:7070", Token: "file-held-token", Output: "table", ConfigFile: file}},
		{name: "CEPCTL_TOKEN over CEPCTL_TOKEN_FILE", pe: parseEnv{env: map[string]string{"CEPCTL_TOKEN_FILE": tokenFile, "CEPCTL_TOKEN": "env-token"}},
			want: with(func(g *globalOptions) { g.Token = "env-token" })},
		{name: "token-file in the config file", args: []string{"--config", fileWithTokenFile},
			want: globalOptions{Server: "http://file:7070", Token: "file-held-token", Output: "table", ConfigFile: fileWithTokenFile}},
		{name: "--token and --token-file", args: []string{"--token", "x", "--token-file", tokenFile}, wantErr: "--token and --token-file: give one"},
		{name: "missing --token-file", args: []string{"--token-file", filepath.Join(dir, "nope")}, wantErr: "--token-file: open"},
		{name: "two words in a token file", args: []string{"--token-file", twoWords}, wantErr: "more than one word"},
		{name: "empty token file", args: []string{"--token-file", emptyToken}, wantErr: "no token in it"},
		{name: "host:port gets http://", args: []string{"--server", "10.0.0.1:7070"},
			want: with(func(g *globalOptions) { g.Server = "http://10.0.0.1:7070" })},
		{name: "-o json", args: []string{"-o", "json"}, want: with(func(g *globalOptions) { g.Output = "json" })},
		{name: "--output yaml", args: []string{"--output=yaml"}, want: with(func(g *globalOptions) { g.Output = "yaml" })},
		{name: "bad output", args: []string{"-o", "xml"}, wantErr: `unknown output format "xml"`},
		{name: "missing explicit config", args: []string{"--config", filepath.Join(dir, "nope.yaml")}, wantErr: "no such file"},
		{name: "malformed config", args: []string{"--config", bad}, wantErr: "config " + bad},
		{name: "unknown config key", args: []string{"--config", unknown}, wantErr: "sever"},
		{name: "bad scheme", args: []string{"--server", "ftp://x"}, wantErr: "want http://HOST:PORT"},
		{name: "a list of servers", args: []string{"--server", "10.0.0.1:7070, https://b:443/"},
			want: with(func(g *globalOptions) { g.Server = "http://10.0.0.1:7070" }), wantServers: []string{"http://10.0.0.1:7070", "https://b:443"}},
		{name: "an empty server in the list", args: []string{"--server", "a:1,,b:2"}, wantErr: "no server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.pe, "", newStatusCmd, append([]string{"status"}, tc.args...)...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Servers = tc.wantServers
			if !reflect.DeepEqual(got.globalOptions, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got.globalOptions, tc.want)
			}
		})
	}
}

// Global flags may come before or after the command.
func TestGlobalFlagsAnywhere(t *testing.T) {
	a, err := parse(t, parseEnv{}, "pattern", newPatternGetCmd, "-o", "json", "--server", "h:1", "pattern", "get", "p")
	if err != nil {
		t.Fatal(err)
	}
	b, err := parse(t, parseEnv{}, "pattern", newPatternGetCmd, "pattern", "get", "p", "--server", "h:1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*a, *b) || a.Server != "http://h:1" || a.Output != "json" {
		t.Errorf("%+v vs %+v", *a, *b)
	}
}

func TestStatusOptions(t *testing.T) {
	checkOptions(t, "", newStatusCmd, []optCase[statusOptions]{
		{name: "plain", args: []string{"status"}, want: statusOptions{globalOptions: defaults}},
		{name: "wait", args: []string{"status", "--wait", "30s"}, want: statusOptions{globalOptions: defaults, Wait: 30 * time.Second}},
		{name: "no args", args: []string{"status", "x"}, wantErr: "unknown command"},
	})
}

func TestPatternOptions(t *testing.T) {
	checkOptions(t, "pattern", newPatternValidateCmd, []optCase[patternValidateOptions]{
		{name: "file", args: []string{"pattern", "validate", "p.yaml"}, want: patternValidateOptions{globalOptions: defaults, File: "p.yaml"}},
		{name: "name", args: []string{"pattern", "validate", "q.sql", "--name", "fraud"}, want: patternValidateOptions{globalOptions: defaults, File: "q.sql", Name: "fraud"}},
		{name: "sample", args: []string{"pattern", "validate", "p.yaml", "--sample", "ev.jsonl"}, want: patternValidateOptions{globalOptions: defaults, File: "p.yaml", Sample: "ev.jsonl"}},
		{name: "schema and sample", args: []string{"pattern", "validate", "p.yaml", "--sample", "ev.jsonl", "--schema", "s.yaml"}, wantErr: "none of the others can be"},
		{name: "tests", args: []string{"pattern", "validate", "p.yaml", "--test", "a.test.yaml", "--test", "b.test.yaml"},
			want: patternValidateOptions{globalOptions: defaults, File: "p.yaml", Tests: []string{"a.test.yaml", "b.test.yaml"}}},
		{name: "no file", args: []string{"pattern", "validate"}, wantErr: "accepts 1 arg"},
	})
	checkOptions(t, "pattern", newPatternDeployCmd, []optCase[patternDeployOptions]{
		{name: "defaults", args: []string{"pattern", "deploy", "p.yaml"}, want: patternDeployOptions{globalOptions: defaults, File: "p.yaml"}},
		{name: "all flags", args: []string{"pattern", "deploy", "q.sql", "--name", "n", "--output-subject", "alerts.n", "-o", "yaml"},
			want: patternDeployOptions{globalOptions: with(func(g *globalOptions) { g.Output = "yaml" }), File: "q.sql", Name: "n", OutputSubject: "alerts.n"}},
		{name: "two files", args: []string{"pattern", "deploy", "a", "b"}, wantErr: "accepts 1 arg"},
		{name: "no bound, matches and late events", args: []string{"pattern", "deploy", "p.yaml", "--max-partial-matches", "0", "--records", "match", "--records", "LATE"},
			want: patternDeployOptions{globalOptions: defaults, File: "p.yaml", outputFlags: outputFlags{MaxPartialMatches: new(uint64(0)), Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH, cepv1.RecordType_RECORD_TYPE_LATE}}}},
		{name: "a bound", args: []string{"pattern", "deploy", "p.yaml", "--max-partial-matches=5000", "--records=match,timeout"},
			want: patternDeployOptions{globalOptions: defaults, File: "p.yaml", outputFlags: outputFlags{MaxPartialMatches: new(uint64(5000)), Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH, cepv1.RecordType_RECORD_TYPE_TIMEOUT}}}},
		{name: "unknown record type", args: []string{"pattern", "deploy", "p.yaml", "--records", "match,alert"}, wantErr: `--records: unknown record type "alert"`},
		{name: "no record type", args: []string{"pattern", "deploy", "p.yaml", "--records", ""}, wantErr: "--records: name at least one"},
		{name: "negative bound", args: []string{"pattern", "deploy", "p.yaml", "--max-partial-matches", "-1"}, wantErr: "max-partial-matches"},
		{name: "from the start", args: []string{"pattern", "deploy", "p.yaml", "--from-start"},
			want: patternDeployOptions{globalOptions: defaults, File: "p.yaml", FromStart: true}},
		{name: "tests first", args: []string{"pattern", "deploy", "p.yaml", "--test", "p.test.yaml"},
			want: patternDeployOptions{globalOptions: defaults, File: "p.yaml", Tests: []string{"p.test.yaml"}}},
	})
	checkOptions(t, "pattern", newPatternUpdateCmd, []optCase[patternUpdateOptions]{
		{name: "default policy is drain", args: []string{"pattern", "update", "p.yaml"},
			want: patternUpdateOptions{globalOptions: defaults, File: "p.yaml", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN}},
		{name: "reset", args: []string{"pattern", "update", "p.yaml", "--policy", "reset"},
			want: patternUpdateOptions{globalOptions: defaults, File: "p.yaml", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_RESET}},
		{name: "migrate with name and subject", args: []string{"pattern", "update", "q.sql", "--policy=migrate", "--name", "q", "--output-subject", "s"},
			want: patternUpdateOptions{globalOptions: defaults, File: "q.sql", Name: "q", OutputSubject: "s", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE}},
		{name: "bad policy", args: []string{"pattern", "update", "p.yaml", "--policy", "keep"}, wantErr: `unknown --policy "keep"`},
		{name: "records", args: []string{"pattern", "update", "p.yaml", "--records", "timeout"},
			want: patternUpdateOptions{globalOptions: defaults, File: "p.yaml", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN, outputFlags: outputFlags{Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_TIMEOUT}}}},
	})
	checkOptions(t, "pattern", newPatternApplyCmd, []optCase[patternApplyOptions]{
		{name: "defaults", args: []string{"pattern", "apply", "p.yaml"},
			want: patternApplyOptions{globalOptions: defaults, File: "p.yaml", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN}},
		{name: "all flags", args: []string{"pattern", "apply", "q.sql", "--name", "q", "--policy", "reset", "--output-subject", "s", "--records", "match", "--max-partial-matches", "7"},
			want: patternApplyOptions{globalOptions: defaults, File: "q.sql", Name: "q", OutputSubject: "s", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_RESET,
				outputFlags: outputFlags{MaxPartialMatches: new(uint64(7)), Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH}}}},
		{name: "bad policy", args: []string{"pattern", "apply", "p.yaml", "--policy", "x"}, wantErr: `unknown --policy "x"`},
		{name: "paths", args: []string{"pattern", "apply", "-f", "patterns/", "--filename", "more", "-f", "a,b.yaml", "-R", "--prune", "--dry-run"},
			want: patternApplyOptions{globalOptions: defaults, Paths: []string{"patterns/", "more", "a,b.yaml"}, Recursive: true, Prune: true, DryRun: true,
				Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN}},
		{name: "FILE and paths", args: []string{"pattern", "apply", "p.yaml", "-f", "q/", "--recursive"},
			want: patternApplyOptions{globalOptions: defaults, File: "p.yaml", Paths: []string{"q/"}, Recursive: true, Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN}},
		{name: "no files", args: []string{"pattern", "apply", "-R", "--prune"}, wantErr: "no pattern files: give FILE, or -f FILE|DIR"},
		{name: "two FILEs", args: []string{"pattern", "apply", "p.yaml", "q.yaml"}, wantErr: "accepts at most 1 arg"},
	})
	checkOptions(t, "pattern", newPatternDiffCmd, []optCase[patternDiffOptions]{
		{name: "FILE", args: []string{"pattern", "diff", "p.yaml"}, want: patternDiffOptions{globalOptions: defaults, File: "p.yaml"}},
		{name: "all flags", args: []string{"pattern", "diff", "-f", "patterns/", "-f", "q.sql", "-R", "--prune", "--name", "q", "--output-subject", "s", "--records", "late", "--max-partial-matches", "0"},
			want: patternDiffOptions{globalOptions: defaults, Paths: []string{"patterns/", "q.sql"}, Recursive: true, Prune: true, Name: "q", OutputSubject: "s",
				outputFlags: outputFlags{MaxPartialMatches: new(uint64(0)), Records: []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_LATE}}}},
		{name: "no files", args: []string{"pattern", "diff", "--prune"}, wantErr: "no pattern files: give FILE, or -f FILE|DIR"},
		{name: "unknown flag", args: []string{"pattern", "diff", "p.yaml", "--policy", "drain"}, wantErr: "unknown flag: --policy"},
	})
	checkOptions(t, "pattern", newPatternDeleteCmd, []optCase[patternDeleteOptions]{
		{name: "name", args: []string{"pattern", "delete", "p"}, want: patternDeleteOptions{defaults, "p"}},
		{name: "no name", args: []string{"pattern", "delete"}, wantErr: "accepts 1 arg"},
	})
	checkOptions(t, "pattern", newPatternListCmd, []optCase[patternListOptions]{
		{name: "list", args: []string{"pattern", "list"}, want: patternListOptions{defaults}},
		{name: "ls", args: []string{"pattern", "ls", "-o", "json"}, want: patternListOptions{with(func(g *globalOptions) { g.Output = "json" })}},
	})
	checkOptions(t, "pattern", newPatternGetCmd, []optCase[patternGetOptions]{
		{name: "name", args: []string{"pattern", "get", "p"}, want: patternGetOptions{defaults, "p"}},
	})
}

func TestSourceOptions(t *testing.T) {
	checkOptions(t, "source", newSourceCreateCmd, []optCase[sourceCreateOptions]{
		{name: "subjects are the cluster's choice", args: []string{"source", "create", "logins"},
			want: sourceCreateOptions{globalOptions: defaults, Name: "logins"}},
		{name: "all flags", args: []string{"source", "create", "orders", "--subjects", "orders.>,shop.orders.*", "--subjects", "x.y", "--key", "e.customer.id", "--stream", "ORDERS"},
			want: sourceCreateOptions{globalOptions: defaults, Name: "orders", Subjects: []string{"orders.>", "shop.orders.*", "x.y"}, Key: "e.customer.id", Stream: "ORDERS"}},
		{name: "limits", args: []string{"source", "create", "metrics", "--max-age", "72h", "--max-bytes", "50G", "--max-msgs", "1000000"},
			want: sourceCreateOptions{globalOptions: defaults, Name: "metrics", MaxAge: 72 * time.Hour, MaxBytes: 50 << 30, MaxMsgs: 1000000}},
		{name: "bad max bytes", args: []string{"source", "create", "m", "--max-bytes", "lots"}, wantErr: "--max-bytes"},
		{name: "short max age", args: []string{"source", "create", "m", "--max-age", "10ms"}, wantErr: "--max-age"},
		{name: "negative max msgs", args: []string{"source", "create", "m", "--max-msgs", "-1"}, wantErr: "--max-msgs"},
		{name: "limits on an existing stream", args: []string{"source", "create", "m", "--stream", "M", "--max-age", "1h"}, wantErr: "nats stream edit"},
		{name: "no name", args: []string{"source", "create"}, wantErr: "accepts 1 arg"},
	})
	checkOptions(t, "source", newSourceListCmd, []optCase[sourceListOptions]{
		{name: "list", args: []string{"source", "list"}, want: sourceListOptions{defaults}},
	})
	checkOptions(t, "source", newSourceGetCmd, []optCase[sourceGetOptions]{
		{name: "name", args: []string{"source", "get", "logins"}, want: sourceGetOptions{defaults, "logins"}},
	})
}

func TestPublishOptions(t *testing.T) {
	checkOptions(t, "", newPublishCmd, []optCase[publishOptions]{
		{name: "defaults", args: []string{"publish", "--source", "logins"},
			want: publishOptions{globalOptions: defaults, Source: "logins", File: "-", MaxPending: 4096, AckWait: 30 * time.Second}},
		{name: "all flags", args: []string{"publish", "-s", "logins", "-f", "ev.jsonl", "--nats", "nats://n:4222", "--key", "e.user.id", "--max-pending", "100", "--ack-wait", "5s"},
			want: publishOptions{globalOptions: defaults, Source: "logins", File: "ev.jsonl", NATSURL: "nats://n:4222", Key: "e.user.id", MaxPending: 100, AckWait: 5 * time.Second}},
		{name: "no source", args: []string{"publish", "-f", "x"}, wantErr: "--source"},
		{name: "bad max pending", args: []string{"publish", "-s", "x", "--max-pending", "0"}, wantErr: "--max-pending"},
		{name: "bad ack wait", args: []string{"publish", "-s", "x", "--ack-wait", "0s"}, wantErr: "--ack-wait"},
		{name: "no args", args: []string{"publish", "-s", "x", "file"}, wantErr: "unknown command"},
	})
}

func TestTailOptions(t *testing.T) {
	checkOptions(t, "", newTailCmd, []optCase[tailOptions]{
		{name: "default from new", args: []string{"tail", "p"},
			want: tailOptions{Follow: true, globalOptions: defaults, Pattern: "p", Start: cepv1.TailStart_TAIL_START_NEW}},
		{name: "from all", args: []string{"tail", "p", "--from", "all"},
			want: tailOptions{Follow: true, globalOptions: defaults, Pattern: "p", Start: cepv1.TailStart_TAIL_START_ALL}},
		{name: "from sequence", args: []string{"tail", "p", "--from", "42", "-o", "json"},
			want: tailOptions{Follow: true, globalOptions: with(func(g *globalOptions) { g.Output = "json" }), Pattern: "p", Start: cepv1.TailStart_TAIL_START_SEQUENCE, StartSequence: 42}},
		{name: "bad from", args: []string{"tail", "p", "--from", "yesterday"}, wantErr: `bad --from "yesterday"`},
		{name: "negative from", args: []string{"tail", "p", "--from", "-1"}, wantErr: "bad --from"},
		{name: "no pattern", args: []string{"tail"}, wantErr: "tail needs a PATTERN, or --dead-letters"},
		{name: "dead letters", args: []string{"tail", "--dead-letters", "--from", "all"},
			want: tailOptions{Follow: true, globalOptions: defaults, Start: cepv1.TailStart_TAIL_START_ALL, DeadLetters: true}},
		{name: "dead letters of a source", args: []string{"tail", "--dead-letters", "--source", "bank"},
			want: tailOptions{Follow: true, globalOptions: defaults, Start: cepv1.TailStart_TAIL_START_NEW, DeadLetters: true, Source: "bank"}},
		{name: "dead letters and a pattern", args: []string{"tail", "p", "--dead-letters"}, wantErr: "tail --dead-letters takes no pattern"},
		{name: "no follow", args: []string{"tail", "--dead-letters", "--from", "all", "--follow=false"},
			want: tailOptions{globalOptions: defaults, Start: cepv1.TailStart_TAIL_START_ALL, DeadLetters: true}},
		{name: "source without dead letters", args: []string{"tail", "p", "--source", "bank"}, wantErr: "--source goes with --dead-letters"},
	})
}

func TestSavepointOptions(t *testing.T) {
	checkOptions(t, "savepoint", newSavepointCreateCmd, []optCase[savepointCreateOptions]{
		{name: "dir", args: []string{"savepoint", "create", "dir:///var/sp"}, want: savepointCreateOptions{defaults, "dir:///var/sp"}},
		{name: "no target", args: []string{"savepoint", "create"}, wantErr: "accepts 1 arg"},
	})
	checkOptions(t, "savepoint", newSavepointListCmd, []optCase[savepointListOptions]{
		{name: "list", args: []string{"savepoint", "list"}, want: savepointListOptions{defaults}},
	})
	checkOptions(t, "savepoint", newSavepointRestoreCmd, []optCase[savepointRestoreOptions]{
		{name: "by id", args: []string{"savepoint", "restore", "sp-1"}, want: savepointRestoreOptions{globalOptions: defaults, ID: "sp-1"}},
		{name: "by location with shards", args: []string{"savepoint", "restore", "nats://bucket/sp-1", "--shards", "8"},
			want: savepointRestoreOptions{globalOptions: defaults, Location: "nats://bucket/sp-1", Shards: 8}},
		{name: "bad shards", args: []string{"savepoint", "restore", "sp-1", "--shards", "-1"}, wantErr: "invalid argument"},
		{name: "positions", args: []string{"savepoint", "restore", "sp-1", "--positions", "from-start"},
			want: savepointRestoreOptions{globalOptions: defaults, ID: "sp-1", Positions: "from-start"}},
		{name: "positions from a time", args: []string{"savepoint", "restore", "sp-1", "--positions", "from-time=2026-12-01T09:00:00Z"},
			want: savepointRestoreOptions{globalOptions: defaults, ID: "sp-1", Positions: "from-time=2026-12-01T09:00:00Z"}},
		{name: "positions from a bad time", args: []string{"savepoint", "restore", "sp-1", "--positions", "from-time=yesterday"}, wantErr: "not an RFC 3339 time"},
		{name: "unknown positions", args: []string{"savepoint", "restore", "sp-1", "--positions", "start"}, wantErr: "want keep, from-start"},
	})
}

func TestRunOptions(t *testing.T) {
	checkOptions(t, "", newRunCmd, []optCase[runOptions]{
		{name: "defaults", args: []string{"run", "-p", "p.yaml"},
			want: runOptions{patterns: []string{"p.yaml"}, input: "-", finalWatermark: true, maxPartial: nfa.DefaultMaxPartialMatches, trace: traceOptions{format: "text"}}},
		{name: "all flags", args: []string{"run", "-p", "a.yaml", "--pattern", "b.json", "--sql", "q.sql", "-i", "ev.jsonl", "--final-watermark=false", "--max-partial-matches", "0"},
			want: runOptions{patterns: []string{"a.yaml", "b.json"}, sql: []string{"q.sql"}, input: "ev.jsonl", trace: traceOptions{format: "text"}}},
		{name: "trace", args: []string{"run", "-p", "p.yaml", "--trace", "--trace-out", "t.txt", "--trace-format", "json", "--trace-key", "a", "--trace-key", "b", "--trace-pattern", "p"},
			want: runOptions{patterns: []string{"p.yaml"}, input: "-", finalWatermark: true, maxPartial: nfa.DefaultMaxPartialMatches,
				trace: traceOptions{on: true, out: "t.txt", format: "json", keys: []string{"a", "b"}, patterns: []string{"p"}}}},
		{name: "nothing to run", args: []string{"run"}, wantErr: "at least one pattern"},
		{name: "trace format", args: []string{"run", "-p", "p.yaml", "--trace-format", "xml"}, wantErr: `--trace-format "xml": use text or json`},
	})
}
