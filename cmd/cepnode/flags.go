package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/peterbourgon/ff/v3"
	"sigs.k8s.io/yaml"

	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/version"
)

// envPrefix prefixes the environment variable of every flag: --dead-after
// is CEPNODE_DEAD_AFTER.
const envPrefix = "CEPNODE"

// envName is the environment variable of a flag, as ff derives it.
func envName(flagName string) string {
	return envPrefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// withEnvNames ends each flag's usage with its environment variable, so
// that --help names it.
func withEnvNames(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += " (env " + envName(f.Name) + ")"
	})
}

// parseFlags sets fs from, in decreasing precedence, args, the CEPNODE_*
// environment and the --config file. Every flag goes through its own
// flag.Value whichever of the three gives it, so a value reads the same
// way everywhere.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := ff.Parse(fs, args,
		ff.WithEnvVarPrefix(envPrefix),
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(func(r io.Reader, set func(name, value string) error) error {
			if strings.EqualFold(filepath.Ext(fs.Lookup("config").Value.String()), ".toml") {
				return tomlParser(r, set)
			}
			return yamlParser(r, set)
		}),
	)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	// ff wraps the flag package's message in words of its own; keep the
	// part that says what is wrong, and where
	msg := err.Error()
	for _, p := range []string{"error parsing commandline arguments: ", "error parsing environment variables: "} {
		if m, ok := strings.CutPrefix(msg, p); ok {
			return errors.New(m)
		}
	}
	return fmt.Errorf("--config %s: %s", fs.Lookup("config").Value.String(), strings.Replace(msg, " from config file", "", 1))
}

// yamlParser reads a YAML (or JSON) mapping of flag names to values; a
// list is the comma-separated value (peers, join):
//
//	id: n1
//	dead-after: 30s
//	join: [h1:7946, h2:7946]
//	auto-split: false
func yamlParser(r io.Reader, set func(name, value string) error) error {
	b, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigBytes {
		return fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return errors.New("not a mapping of flag names to values")
	}
	return setAll(m, set)
}

// tomlParser reads a TOML file of flag names and values (a file whose
// name ends in .toml), as yamlParser does YAML:
//
//	id = "n1"
//	dead-after = "30s"
//	join = ["h1:7946", "h2:7946"]
func tomlParser(r io.Reader, set func(name, value string) error) error {
	b, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigBytes {
		return fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		return err
	}
	return setAll(m, set)
}

// setAll sets each flag m names, in the order of the names.
func setAll(m map[string]any, set func(name, value string) error) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names) // the first bad key is the same on every run
	for _, k := range names {
		v, err := configValue(m[k])
		if err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
		if err := set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// maxConfigBytes bounds the config file read.
const maxConfigBytes = 1 << 20

func configValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			if _, nested := e.([]any); nested {
				return "", errors.New("a list in a list")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case nil:
		return "", nil
	}
	return "", errors.New("not a string, number, boolean or list of them")
}

// wantsVersion reports whether the command line asks for --version.
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-version", "--version", "-version=true", "--version=true":
			return true
		}
	}
	return false
}

func printVersion(out io.Writer) error {
	// the cluster version too: what an operator checks before a rolling
	// upgrade or a rollback (README "Upgrading")
	_, err := fmt.Fprintf(out, "cepnode %s; cluster versions up to %v\n", version.Get().String(), clusterversion.Highest)
	return err
}
