package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// deps are what commands read and write; tests inject buffers.
type deps struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func newRootCmd(d *deps) *cobra.Command {
	root := &cobra.Command{
		Use:           "cepctl",
		Short:         "Administer a CEP cluster and run patterns offline",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(d, nil))
	return root
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
