package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type savepointDeleteOptions struct {
	globalOptions
	ID        string
	KeepFiles bool
}

func newSavepointDeleteCmd(d *deps, runF func(*savepointDeleteOptions) error) *cobra.Command {
	opts := &savepointDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a savepoint and its files",
		Long: `Remove a savepoint from the cluster's list and delete its files from its
location (as the node handling the call sees it: a dir:// location on several
machines keeps the parts the other machines wrote). --keep-files only
removes it from the list.`,
		Example: `  cepctl savepoint delete sp-1764400000000`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.ID = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runSavepointDelete(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.KeepFiles, "keep-files", false, "only remove it from the list; leave its files")
	return cmd
}

func runSavepointDelete(ctx context.Context, d *deps, opts *savepointDeleteOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.savepoints.DeleteSavepoint(ctx, connect.NewRequest(&cepv1.DeleteSavepointRequest{Id: opts.ID, KeepFiles: opts.KeepFiles}))
	if err != nil {
		return err
	}
	sp := res.Msg.GetSavepoint()
	deleted := len(res.Msg.GetDeletedFiles())
	if !opts.KeepFiles && uint32(deleted) < sp.GetShardCount() {
		fmt.Fprintf(d.stderr, "cepctl: warning: %d of the savepoint's %d files were found at %s and deleted; the others were not there (written on other machines?)\n",
			deleted, sp.GetShardCount(), sp.GetLocation())
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	files := fmt.Sprintf("%s deleted", plural(deleted, "file"))
	if opts.KeepFiles {
		files = "files kept"
	}
	_, err = fmt.Fprintf(d.stdout, "deleted savepoint %s (%s)\n", sp.GetId(), files)
	return err
}
