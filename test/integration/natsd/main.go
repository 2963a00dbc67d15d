// Command natsd runs the cluster's own JetStream server configuration
// (cluster.StartSecureEmbeddedNATS: the node and publisher users of a
// cluster secret) as a process of its own, so that the fault suite can
// put NATS in a network namespace, kill it and restart it.
//
//	natsd -addr 10.0.0.10:4222 -store DIR -secret-file FILE
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4222", "client listen address")
	store := flag.String("store", "", "JetStream store directory")
	secretFile := flag.String("secret-file", "", "the cluster secret (hex); empty: an open server")
	flag.Parse()
	if err := run(*addr, *store, *secretFile); err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
}

func run(addr, store, secretFile string) error {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("-addr %q: port: %v", addr, err)
	}
	if store == "" {
		return fmt.Errorf("-store is required")
	}
	var sec secret.Secret
	if secretFile != "" {
		if sec, err = secret.ReadFile(secretFile); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := cluster.StartSecureEmbeddedNATS(store, host, port, log, sec)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}
