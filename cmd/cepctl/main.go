// Command cepctl administers a CEP cluster and evaluates patterns offline.
//
//	cepctl run -p pattern.yaml -i events.jsonl
//	cepctl status
//	cepctl pattern deploy login-fail.yaml
//	cepctl source create logins --key e.user
//	cepctl publish --source logins -f events.jsonl
//	cepctl tail login-fail
//	cepctl savepoint create dir:///var/lib/cep/savepoints
//
// See `cepctl --help` for every command. Each command lives in its own file
// as newXCmd(deps, runF) plus an options struct; runF lets tests check the
// parsed options without running the command.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run executes cepctl with args and returns the process exit code. Errors are
// printed to stderr as one line. The config file, environment and terminal
// are the process's.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(ctx, &deps{
		stdin:      stdin,
		stdout:     stdout,
		stderr:     stderr,
		getenv:     os.Getenv,
		homeDir:    os.UserHomeDir,
		isTerminal: isTerminal,
	}, args)
}

// execute runs cepctl with d; it gives d an HTTP client of its own when it
// has none and closes that client's connections at the end.
func execute(ctx context.Context, d *deps, args []string) int {
	if d.httpClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		defer t.CloseIdleConnections()
		d.httpClient = &http.Client{Transport: t}
	}
	root := newRootCmd(d)
	root.SetArgs(args)
	root.SetIn(d.stdin)
	root.SetOut(d.stdout)
	root.SetErr(d.stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(d.stderr, "cepctl: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
