package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

const defaultServer = "http://127.0.0.1:7070"

// globalOptions are the settings every API command shares, resolved from the
// config file, the environment and the flags.
type globalOptions struct {
	// Server is the API base URL, with a scheme and no trailing slash:
	// the first of Servers.
	Server string
	// Servers are the API base URLs when several were given as a
	// comma-separated list (--server, CEPCTL_SERVER or the config's
	// server:), nodes of one cluster: a call that cannot reach one goes
	// to the next (failover), and a tail whose node fails goes on with
	// the next. Nil for one server.
	Servers []string
	// Token is the bearer token; empty sends none.
	Token string
	// Output is "table", "json" or "yaml".
	Output string
	// ConfigFile is the config file that was read; empty when none was.
	ConfigFile string
	// CA is a PEM file of CAs to trust for an https server (default: the
	// system's); Cert and Key are a client certificate to present.
	CA, Cert, Key string
	// Context is the context whose settings were used; empty when none.
	Context string
	// NATS, NATSCreds and NATSCA are the context's NATS settings, for
	// the commands that talk to NATS themselves when their flags are not
	// given.
	NATS, NATSCreds, NATSCA string
}

// configFile is the YAML config file. Its top-level settings apply under
// any context; the context's own override them.
type configFile struct {
	Server    string `json:"server,omitempty"`
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token-file,omitempty"`
	CA        string `json:"tls-ca,omitempty"`
	Cert      string `json:"tls-cert,omitempty"`
	Key       string `json:"tls-key,omitempty"`

	CurrentContext string                   `json:"current-context,omitempty"`
	Contexts       map[string]*contextEntry `json:"contexts,omitempty"`
}

// contextEntry is a named set of settings for one cluster. It names a
// token file, never a token.
type contextEntry struct {
	Server    string `json:"server,omitempty"`
	TokenFile string `json:"token-file,omitempty"`
	CA        string `json:"tls-ca,omitempty"`
	Cert      string `json:"tls-cert,omitempty"`
	Key       string `json:"tls-key,omitempty"`
	NATS      string `json:"nats,omitempty"`
	NATSCreds string `json:"nats-creds,omitempty"`
	NATSCA    string `json:"nats-ca,omitempty"`
}

// resolveGlobals applies, in increasing precedence, the defaults, the config
// file, CEPCTL_SERVER / CEPCTL_TOKEN and the flags the user set. A missing
// default config file is not an error; a missing --config file is.
func resolveGlobals(d *deps, cmd *cobra.Command) (globalOptions, error) {
	g := globalOptions{Server: defaultServer, Output: d.flags.output}
	switch g.Output {
	case "table", "json", "yaml":
	default:
		return g, fmt.Errorf("unknown output format %q: use table, json or yaml", g.Output)
	}

	getenv := d.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	path, explicit := configPath(d, cmd)
	wanted, wantedBy := d.flags.context, "--context"
	if !flagChanged(cmd, "context") {
		wanted, wantedBy = getenv("CEPCTL_CONTEXT"), "CEPCTL_CONTEXT"
	}
	if path != "" {
		cfg, err := readConfig(path)
		switch {
		case err == nil:
			g.ConfigFile = path
			if cfg.Server != "" {
				g.Server = cfg.Server
			}
			g.Token = cfg.Token
			if cfg.TokenFile != "" {
				if g.Token, err = readTokenFile("token-file in "+path, cfg.TokenFile); err != nil {
					return g, err
				}
			}
			g.CA, g.Cert, g.Key = cfg.CA, cfg.Cert, cfg.Key
			if wanted == "" {
				wanted, wantedBy = cfg.CurrentContext, "current-context in "+path
			}
			if wanted != "" {
				if err := applyContext(&g, cfg, wanted, wantedBy, path); err != nil {
					return g, err
				}
			}
		case explicit || !errors.Is(err, fs.ErrNotExist):
			return g, err
		}
	}
	if wanted != "" && g.Context == "" {
		return g, fmt.Errorf("%s: no context %q (no config file %s; cepctl context set makes one)", wantedBy, wanted, path)
	}

	if v := getenv("CEPCTL_SERVER"); v != "" {
		g.Server = v
	}
	if v := getenv("CEPCTL_TOKEN_FILE"); v != "" {
		t, err := readTokenFile("CEPCTL_TOKEN_FILE", v)
		if err != nil {
			return g, err
		}
		g.Token = t
	}
	if v := getenv("CEPCTL_TOKEN"); v != "" {
		g.Token = v
	}
	if flagChanged(cmd, "server") {
		g.Server = d.flags.server
	}
	switch {
	case flagChanged(cmd, "token") && flagChanged(cmd, "token-file"):
		return g, errors.New("--token and --token-file: give one")
	case flagChanged(cmd, "token"):
		g.Token = d.flags.token
	case flagChanged(cmd, "token-file"):
		t, err := readTokenFile("--token-file", d.flags.tokenFile)
		if err != nil {
			return g, err
		}
		g.Token = t
	}
	for _, o := range []struct {
		v         *string
		env, flag string
		flagValue string
	}{{&g.CA, "CEPCTL_TLS_CA", "tls-ca", d.flags.ca}, {&g.Cert, "CEPCTL_TLS_CERT", "tls-cert", d.flags.cert}, {&g.Key, "CEPCTL_TLS_KEY", "tls-key", d.flags.key}} {
		if v := getenv(o.env); v != "" {
			*o.v = v
		}
		if flagChanged(cmd, o.flag) {
			*o.v = o.flagValue
		}
	}

	secure := g.CA != "" || g.Cert != "" || g.Key != ""
	g.Servers = nil
	for _, s := range strings.Split(g.Server, ",") {
		s, err := normalizeServer(s, secure)
		if err != nil {
			return g, err
		}
		g.Servers = append(g.Servers, s)
	}
	g.Server = g.Servers[0]
	if len(g.Servers) == 1 {
		g.Servers = nil // one server: Server
	}
	if secure {
		if err := useTLS(d, g); err != nil {
			return g, err
		}
	}
	return g, nil
}

// useTLS sets the TLS configuration of d's HTTP client: the CAs of g.CA
// to trust, the client certificate g.Cert with g.Key to present.
func useTLS(d *deps, g globalOptions) error {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.CA != "" {
		b, err := os.ReadFile(g.CA)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", g.CA)
		}
	}
	if (g.Cert == "") != (g.Key == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if g.Cert != "" {
		c, err := tls.LoadX509KeyPair(g.Cert, g.Key)
		if err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", g.Cert, g.Key, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	var t *http.Transport
	if d.httpClient != nil {
		t, _ = d.httpClient.Transport.(*http.Transport)
	}
	if t == nil {
		t = http.DefaultTransport.(*http.Transport).Clone()
		d.httpClient = &http.Client{Transport: t}
	}
	t.TLSClientConfig = cfg
	t.ForceAttemptHTTP2 = true
	return nil
}

// readTokenFile reads a file holding a bearer token (white space around
// it ignored); what names where the file was given. Errors never show the
// file's content.
func readTokenFile(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
		return "", fmt.Errorf("%s %s: no token in it", what, path)
	case strings.ContainsAny(t, " \t\r\n"):
		return "", fmt.Errorf("%s %s: more than one word in it (want only the token)", what, path)
	}
	return t, nil
}

func flagChanged(cmd *cobra.Command, name string) bool {
	f := cmd.Flags().Lookup(name)
	return f != nil && f.Changed
}

// defaultConfigPath is $XDG_CONFIG_HOME/cep/cepctl.yaml, else
// ~/.config/cep/cepctl.yaml; empty when neither can be determined.
func defaultConfigPath(d *deps, getenv func(string) string) string {
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "cep", "cepctl.yaml")
	}
	if d.homeDir == nil {
		return ""
	}
	home, err := d.homeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "cep", "cepctl.yaml")
}

// configPath is the config file: --config (explicit), else the default.
func configPath(d *deps, cmd *cobra.Command) (path string, explicit bool) {
	if flagChanged(cmd, "config") {
		return d.flags.config, true
	}
	getenv := d.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return defaultConfigPath(d, getenv), false
}

// applyContext puts the settings of the context name of cfg over g's.
func applyContext(g *globalOptions, cfg configFile, name, by, path string) error {
	c := cfg.Contexts[name]
	if c == nil {
		return fmt.Errorf("%s: no context %q in %s (cepctl context list shows them)", by, name, path)
	}
	g.Context = name
	if c.Server != "" {
		g.Server = c.Server
	}
	if c.TokenFile != "" {
		t, err := readTokenFile(fmt.Sprintf("token-file of context %s", name), c.TokenFile)
		if err != nil {
			return err
		}
		g.Token = t
	}
	for _, o := range []struct {
		to *string
		v  string
	}{{&g.CA, c.CA}, {&g.Cert, c.Cert}, {&g.Key, c.Key}} {
		if o.v != "" {
			*o.to = o.v
		}
	}
	g.NATS, g.NATSCreds, g.NATSCA = c.NATS, c.NATSCreds, c.NATSCA
	return nil
}

func readConfig(path string) (configFile, error) {
	var cfg configFile
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %v", path, err)
	}
	return cfg, nil
}

// normalizeServer accepts "host:port" as well as a URL and returns an http
// or https URL without a trailing slash; "host:port" is https when secure
// (TLS options were given).
func normalizeServer(s string, secure bool) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("no server: give --server URL")
	}
	if !strings.Contains(s, "://") {
		if secure {
			s = "https://" + s
		} else {
			s = "http://" + s
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("server %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("server %q: want http://HOST:PORT or https://HOST:PORT", s)
	}
	return strings.TrimRight(s, "/"), nil
}
