package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// deps are what commands read, write and call; Run fills them from the
// process and tests inject their own. A deps is used by one command
// execution at a time.
type deps struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// getenv reads an environment variable (os.Getenv).
	getenv func(string) string
	// homeDir returns the user's home directory (os.UserHomeDir).
	homeDir func() (string, error)
	// httpClient carries the API calls; nil means http.DefaultClient.
	httpClient *http.Client
	// isTerminal reports whether w is an interactive terminal; nil means
	// never (no progress output).
	isTerminal func(w io.Writer) bool

	// flags are the root's persistent flags as parsed, before the config
	// file and the environment are applied (see resolveGlobals).
	flags globalFlags
}

// globalFlags are the raw values of the persistent flags.
type globalFlags struct {
	server, token, tokenFile string
	config, output, context  string
	ca, cert, key            string
}

// newRootCmd returns cepctl with every command.
func newRootCmd(d *deps) *cobra.Command {
	root := newBareRootCmd(d)
	root.AddCommand(
		newRunCmd(d, nil),
		newBenchCmd(d, nil),
		newStatusCmd(d, nil),
		newPatternCmd(d),
		newSourceCmd(d),
		newPublishCmd(d, nil),
		newTailCmd(d, nil),
		newSavepointCmd(d),
		newNodeCmd(d),
		newShardCmd(d),
		newVersionCmd(d),
		newContextCmd(d),
		newNATSContextCmd(d, nil),
	)
	addCompletions(d, root)
	return root
}

// newBareRootCmd returns the root command with its persistent flags and no
// subcommands; tests hang single commands with a runF under it.
func newBareRootCmd(d *deps) *cobra.Command {
	root := &cobra.Command{
		Use:   "cepctl",
		Short: "Administer a CEP cluster and run patterns offline",
		Long: `cepctl administers a CEP cluster through its API and evaluates patterns
offline (cepctl run).

The API server and token come from, in increasing order of precedence: the
config file (YAML with "server:" and "token:" or "token-file:"; --config,
else $XDG_CONFIG_HOME/cep/cepctl.yaml or ~/.config/cep/cepctl.yaml), the
environment (CEPCTL_SERVER, CEPCTL_TOKEN_FILE, CEPCTL_TOKEN) and the flags
(--server, --token-file or --token). So do the TLS
settings of a cluster whose nodes serve HTTPS: "tls-ca:", "tls-cert:" and
"tls-key:", CEPCTL_TLS_CA, CEPCTL_TLS_CERT and CEPCTL_TLS_KEY, --tls-ca,
--tls-cert and --tls-key (a server given as HOST:PORT is then https).

A context (cepctl context set NAME ...) names a cluster's settings in the
config file; the one in use (--context, CEPCTL_CONTEXT or cepctl context
use) overrides the file's top-level settings, and the environment and flags
override it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&d.flags.server, "server", "", "API server URL, or several nodes' as a comma-separated list (a command goes to the next when one cannot be reached; tail goes on with the next when one fails) (default from the config file, else "+defaultServer+")")
	pf.StringVar(&d.flags.token, "token", "", "API bearer token (default from the config file); prefer --token-file or CEPCTL_TOKEN, as a command line is visible to others on the machine")
	pf.StringVar(&d.flags.tokenFile, "token-file", "", "file holding the API bearer token (default from the config file's token-file, or CEPCTL_TOKEN_FILE)")
	pf.StringVar(&d.flags.ca, "tls-ca", "", "PEM file of the CA(s) to trust for an https server (default from the config file, else the system's)")
	pf.StringVar(&d.flags.cert, "tls-cert", "", "PEM client certificate to present to an https server, with --tls-key")
	pf.StringVar(&d.flags.key, "tls-key", "", "PEM private key of --tls-cert")
	pf.StringVar(&d.flags.config, "config", "", "config file (default $XDG_CONFIG_HOME/cep/cepctl.yaml or ~/.config/cep/cepctl.yaml)")
	pf.StringVarP(&d.flags.output, "output", "o", "table", "output format: table, json or yaml")
	pf.StringVar(&d.flags.context, "context", "", "the context of the config file to use (default $CEPCTL_CONTEXT, else the config file's current context; see cepctl context)")
	return root
}

// runGroup is the RunE of a command that only groups others: with no
// argument it prints the help, with one it fails as cobra does for an
// unknown command of the root.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
