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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"

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
		return report(d.stderr, err)
	}
	return 0
}

// report prints err, a line per problem, and returns the exit status: 1,
// or an exitError's own.
func report(w io.Writer, err error) int {
	code := 1
	if ee, ok := errors.AsType[*exitError](err); ok {
		code, err = ee.code, ee.err
	}
	if err == nil {
		return code
	}
	lines := []error{err}
	if ps, ok := errors.AsType[problems](err); ok {
		lines = ps
	}
	for _, e := range lines {
		fmt.Fprintf(w, "cepctl: %s\n", oneLine(e.Error()))
	}
	return code
}

// exitError gives err an exit status of its own, as `pattern diff` has
// (1 for differences, 2 for an error, as diff(1)); with a nil err nothing
// is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// problems are several errors found together (every file of an apply is
// checked before any changes), printed a line each.
type problems []error

func (ps problems) Error() string {
	s := make([]string, len(ps))
	for i, e := range ps {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func (ps problems) Unwrap() []error { return ps }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
