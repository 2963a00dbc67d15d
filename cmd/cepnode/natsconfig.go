package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cepcluster/cep/cluster"
)

// natsConfig is "cepnode nats-config": a nats-server configuration whose
// users are those of a node's embedded server for the cluster secret
// (cluster.NATSServerConfig), for an external NATS the nodes reach with
// nothing but the secret. It is written to --out (mode 0600: it holds
// passwords), or out; a distroless image has no shell to redirect with.
func natsConfig(args []string, out, stderr io.Writer) error {
	fs := flag.NewFlagSet("cepnode nats-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secretFile := fs.String("cluster-secret-file", env("cluster-secret-file", ""), "file holding the cluster secret (or env CEPNODE_CLUSTER_SECRET)")
	storeDir := fs.String("store-dir", "/data", "the server's JetStream store directory")
	httpPort := fs.Int("http-port", 8222, "the server's HTTP monitoring port (health probes); 0: none")
	outFile := fs.String("out", "", "file to write (mode 0600); empty: standard output")
	lim := cluster.DefaultPublisherLimits
	fs.IntVar(&lim.MaxConnections, "publisher-max-connections", lim.MaxConnections, "connections the publisher account may hold at once")
	fs.IntVar(&lim.MaxSubscriptions, "publisher-max-subscriptions", lim.MaxSubscriptions, "subscriptions per publisher connection (a publisher needs one, for its acks)")
	fs.IntVar(&lim.MaxPayload, "publisher-max-payload", lim.MaxPayload, "bytes of one message a publisher sends")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cepnode nats-config [flags]\n\nPrints a nats-server configuration with JetStream and the cluster's NATS users:\ncep-node (the nodes, every permission; account CEP) and cep-publisher\n(producers: publish events only, in account CEP_PUBLISH, which imports the\nnode account's subjects so that acks stay in its own), their passwords derived\nfrom the cluster secret. Nodes given the\nsecret reach such a server with --nats and no credentials file.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cepnode nats-config: unexpected argument %q", fs.Arg(0))
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"--publisher-max-connections", lim.MaxConnections}, {"--publisher-max-subscriptions", lim.MaxSubscriptions}, {"--publisher-max-payload", lim.MaxPayload}} {
		if l.v <= 0 || l.v > 1<<31-1 {
			return fmt.Errorf("cepnode nats-config: %s %d: want a positive number below 2^31", l.name, l.v)
		}
	}
	sec, err := clusterSecret(*secretFile)
	if err != nil {
		return err
	}
	if sec.IsZero() {
		return errors.New("cepnode nats-config needs the cluster secret: --cluster-secret-file FILE or CEPNODE_CLUSTER_SECRET")
	}
	conf := cluster.NATSServerConfig(sec, *storeDir, *httpPort, lim)
	if *outFile == "" {
		_, err := io.WriteString(out, conf)
		return err
	}
	if err := os.WriteFile(*outFile, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}
