package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func newContextCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Name the settings of clusters and switch between them",
		Long: `A context names the settings of one cluster — its API server, the file of
its token, TLS files and its NATS — in the config file ($XDG_CONFIG_HOME/cep/cepctl.yaml
or ~/.config/cep/cepctl.yaml, or --config), written readable by its owner
only. A context keeps the path of a token file, never a token.

The context in use is --context, else $CEPCTL_CONTEXT, else the one
cepctl context use chose. Its settings override the file's top-level ones;
the environment (CEPCTL_SERVER, ...) and the flags override it.`,
		Example: `  cepctl context set prod --server https://cep.example.com:7070 --token-file ~/.cep/prod.token --tls-ca ca.pem
  cepctl context set local --server 127.0.0.1:7070
  cepctl context use prod
  cepctl --context local status`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(newContextSetCmd(d), newContextUseCmd(d), newContextListCmd(d), newContextCurrentCmd(d), newContextDeleteCmd(d))
	return cmd
}

// loadContexts reads the config file contexts are read from and written
// to (a missing one is empty), and says which it is.
func loadContexts(d *deps, cmd *cobra.Command) (path string, cfg configFile, err error) {
	path, _ = configPath(d, cmd)
	if path == "" {
		return "", configFile{}, errors.New("no config file: give --config FILE (no home directory or XDG_CONFIG_HOME)")
	}
	cfg, err = readConfig(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, configFile{}, nil
	}
	return path, cfg, err
}

// saveConfig writes cfg to path, mode 0600 (its directory 0700 when
// made), replacing the file at once so that a reader never sees half.
func saveConfig(path string, cfg configFile) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f, err := os.CreateTemp(dir, ".cepctl-*.yaml")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer os.Remove(f.Name()) // gone once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// validContextName refuses names a shell or YAML would make awkward.
func validContextName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n/\\:#\"'") || strings.HasPrefix(name, "-") {
		return fmt.Errorf("context name %q: use letters, digits, '.', '_' and '-'", name)
	}
	return nil
}

func newContextSetCmd(d *deps) *cobra.Command {
	var ca, nats, natsCreds, natsCA string
	cmd := &cobra.Command{
		Use:   "set NAME [--server URL] [--token-file FILE] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--nats URL] [--nats-creds FILE] [--nats-ca FILE]",
		Short: "Create or change a context",
		Long: `Create the context NAME, or change the settings given of an existing one
(an empty value, as --nats-creds "", removes one). Files are kept as
absolute paths. The token must be in a file (--token-file): a context never
holds a token. The first context made becomes the current one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := validContextName(name); err != nil {
				return err
			}
			if flagChanged(cmd, "token") {
				return errors.New("a context keeps a token file, not a token: write the token to a file readable by you only and give --token-file FILE")
			}
			path, cfg, err := loadContexts(d, cmd)
			if err != nil {
				return err
			}
			c := cfg.Contexts[name]
			created := c == nil
			if created {
				c = &contextEntry{}
			}
			if flagChanged(cmd, "ca") {
				if flagChanged(cmd, "tls-ca") {
					return errors.New("--ca and --tls-ca: give one")
				}
				d.flags.ca = ca
				cmd.Flags().Lookup("tls-ca").Changed = true
			}
			for _, o := range []struct {
				flag, value string
				to          *string
				file        bool
			}{
				{"server", d.flags.server, &c.Server, false},
				{"token-file", d.flags.tokenFile, &c.TokenFile, true},
				{"tls-ca", d.flags.ca, &c.CA, true},
				{"tls-cert", d.flags.cert, &c.Cert, true},
				{"tls-key", d.flags.key, &c.Key, true},
				{"nats", nats, &c.NATS, false},
				{"nats-creds", natsCreds, &c.NATSCreds, true},
				{"nats-ca", natsCA, &c.NATSCA, true},
			} {
				if !flagChanged(cmd, o.flag) {
					continue
				}
				v := strings.TrimSpace(o.value)
				if o.file && v != "" {
					if v, err = filepath.Abs(v); err != nil {
						return fmt.Errorf("--%s: %w", o.flag, err)
					}
					if _, err := os.Stat(v); err != nil {
						return fmt.Errorf("--%s: %w", o.flag, err)
					}
				}
				if o.flag == "server" && v != "" {
					for _, s := range strings.Split(v, ",") { // a list of nodes
						if _, err := normalizeServer(s, false); err != nil {
							return fmt.Errorf("--server: %w", err)
						}
					}
				}
				*o.to = v
			}
			if c.TokenFile != "" && flagChanged(cmd, "token-file") {
				if _, err := readTokenFile("--token-file", c.TokenFile); err != nil {
					return err
				}
			}
			if (c.Cert == "") != (c.Key == "") {
				return errors.New("--tls-cert and --tls-key go together")
			}
			if cfg.Contexts == nil {
				cfg.Contexts = map[string]*contextEntry{}
			}
			cfg.Contexts[name] = c
			if cfg.CurrentContext == "" {
				cfg.CurrentContext = name
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			verb := "changed"
			if created {
				verb = "created"
			}
			_, err = fmt.Fprintf(d.stdout, "context %s %s in %s\n", name, verb, path)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&ca, "ca", "", "the same as --tls-ca")
	f.StringVar(&nats, "nats", "", "NATS URL for cepctl publish (default: the one the cluster reports)")
	f.StringVar(&natsCreds, "nats-creds", "", "NATS credentials file for cepctl publish")
	f.StringVar(&natsCA, "nats-ca", "", "PEM CAs of the NATS server's certificate")
	return cmd
}

func newContextUseCmd(d *deps) *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editContext(d, cmd, args[0], "using context %s\n", func(cfg *configFile) {
				cfg.CurrentContext = args[0]
			})
		},
	}
}

func newContextDeleteCmd(d *deps) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a context",
		Long:  "Delete a context from the config file (not the files it names). Deleting the current one leaves no current context.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editContext(d, cmd, args[0], "context %s deleted\n", func(cfg *configFile) {
				delete(cfg.Contexts, args[0])
				if cfg.CurrentContext == args[0] {
					cfg.CurrentContext = ""
				}
			})
		},
	}
}

// editContext changes the config file with edit, for the context name,
// which must be there, and says done (a format of the name).
func editContext(d *deps, cmd *cobra.Command, name, done string, edit func(cfg *configFile)) error {
	path, cfg, err := loadContexts(d, cmd)
	if err != nil {
		return err
	}
	if cfg.Contexts[name] == nil {
		return fmt.Errorf("no context %q in %s (cepctl context list shows them)", name, path)
	}
	edit(&cfg)
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	_, err = fmt.Fprintf(d.stdout, done, name)
	return err
}

// currentContext is the context in use and what chose it.
func currentContext(d *deps, cmd *cobra.Command, cfg configFile) (name, by string) {
	switch {
	case flagChanged(cmd, "context"):
		return d.flags.context, "--context"
	case d.getenv != nil && d.getenv("CEPCTL_CONTEXT") != "":
		return d.getenv("CEPCTL_CONTEXT"), "CEPCTL_CONTEXT"
	}
	return cfg.CurrentContext, "current-context"
}

func newContextCurrentCmd(d *deps) *cobra.Command {
	return &cobra.Command{
		Use:   "current",
		Short: "Print the context in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, cfg, err := loadContexts(d, cmd)
			if err != nil {
				return err
			}
			name, by := currentContext(d, cmd, cfg)
			switch {
			case name == "":
				return errors.New("no context in use (cepctl context use NAME chooses one)")
			case cfg.Contexts[name] == nil:
				return fmt.Errorf("%s names context %q, which %s does not have", by, name, path)
			}
			_, err = fmt.Fprintln(d.stdout, name)
			return err
		},
	}
}

func newContextListCmd(d *deps) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the contexts",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, cfg, err := loadContexts(d, cmd)
			if err != nil {
				return err
			}
			current, _ := currentContext(d, cmd, cfg)
			names := make([]string, 0, len(cfg.Contexts))
			for n := range cfg.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			switch d.flags.output {
			case "json", "yaml":
				type item struct {
					Name    string `json:"name"`
					Current bool   `json:"current"`
					*contextEntry
				}
				out := struct {
					Contexts []item `json:"contexts"`
				}{Contexts: []item{}}
				for _, n := range names {
					out.Contexts = append(out.Contexts, item{n, n == current, cfg.Contexts[n]})
				}
				js, err := json.Marshal(out)
				if err != nil {
					return err
				}
				return writeStructured(d.stdout, d.flags.output, js)
			case "table":
			default:
				return fmt.Errorf("unknown output format %q: use table, json or yaml", d.flags.output)
			}
			tw := newTable(d.stdout)
			row(tw, "CURRENT", "NAME", "SERVER", "TOKEN FILE", "TLS CA", "NATS")
			for _, n := range names {
				c := cfg.Contexts[n]
				mark := ""
				if n == current {
					mark = "*"
				}
				row(tw, mark, n, orDash(c.Server), orDash(c.TokenFile), orDash(c.CA), orDash(c.NATS))
			}
			return tw.Flush()
		},
	}
}

// contextNames are the contexts of the config file, for completion.
func contextNames(d *deps, cmd *cobra.Command) []cobra.Completion {
	_, cfg, err := loadContexts(d, cmd)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for n, c := range cfg.Contexts {
		out = append(out, cobra.CompletionWithDesc(n, c.Server))
	}
	sort.Strings(out)
	return out
}
