// Command cepctl administers a CEP cluster and evaluates patterns offline.
//
//	cepctl run -p pattern.yaml -i events.jsonl
//
// See `cepctl --help` for every command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run executes cepctl with args and returns the process exit code. Errors are
// printed to stderr as one line.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(&deps{stdin: stdin, stdout: stdout, stderr: stderr})
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "cepctl: %s\n", oneLine(err.Error()))
		return 1
	}
	return 0
}
