package main

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// completionTimeout bounds the API calls of a shell completion: a slow or
// unreachable server leaves the completion empty, not the shell waiting.
const completionTimeout = 2 * time.Second

// completer lists the names of one kind the server has, each with a short
// description.
type completer func(ctx context.Context, c *apiClients) ([]cobra.Completion, error)

// argCompletions says which commands complete their argument with which
// names; flagCompletions the same for flags.
var (
	argCompletions = map[string]completer{
		"cepctl pattern get":       patternNames,
		"cepctl pattern delete":    patternNames,
		"cepctl pattern inspect":   patternNames,
		"cepctl tail":              patternNames,
		"cepctl source get":        sourceNames,
		"cepctl source delete":     sourceNames,
		"cepctl node remove":       nodeNames,
		"cepctl savepoint delete":  savepointNames,
		"cepctl savepoint restore": savepointNames,
		"cepctl context use":       nil, // set in contextNames: no server call
		"cepctl context delete":    nil,
	}
	flagCompletions = map[string]map[string]completer{
		"cepctl tail":             {"source": sourceNames},
		"cepctl publish":          {"source": sourceNames},
		"cepctl pattern backtest": {"against": patternNames},
	}
)

// addCompletions gives the commands of root their dynamic completions of
// names from the server: patterns, sources, nodes, savepoints.
func addCompletions(d *deps, root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if f, ok := argCompletions[cmd.CommandPath()]; ok && cmd.ValidArgsFunction == nil {
			if f == nil {
				cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
					if len(args) > 0 {
						return nil, cobra.ShellCompDirectiveNoFileComp
					}
					return filterPrefix(contextNames(d, cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
				}
			} else {
				cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
					if len(args) > 0 || cmd.CommandPath() == "cepctl tail" && flagChanged(cmd, "dead-letters") {
						return nil, cobra.ShellCompDirectiveNoFileComp
					}
					return complete(d, cmd, f, toComplete)
				}
			}
		}
		for name, f := range flagCompletions[cmd.CommandPath()] {
			if cmd.Flags().Lookup(name) != nil {
				_ = cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
					return complete(d, cmd, f, toComplete)
				})
			}
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
	_ = root.RegisterFlagCompletionFunc("context", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return filterPrefix(contextNames(d, cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

// complete asks the server the command would talk to (its --server,
// --context, token...) for names; any error gives no completion, quietly.
func complete(d *deps, cmd *cobra.Command, f completer, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	g, err := resolveGlobals(d, cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	names, err := f(ctx, newClients(d, g))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func filterPrefix(names []cobra.Completion, prefix string) []cobra.Completion {
	out := names[:0:0]
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func patternNames(ctx context.Context, c *apiClients) ([]cobra.Completion, error) {
	res, err := c.patterns.ListPatterns(ctx, connect.NewRequest(&cepv1.ListPatternsRequest{}))
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, p := range res.Msg.GetPatterns() {
		out = append(out, cobra.CompletionWithDesc(p.GetName(), "pattern on "+strings.Join(p.GetSources(), ",")))
	}
	return out, nil
}

func sourceNames(ctx context.Context, c *apiClients) ([]cobra.Completion, error) {
	res, err := c.sources.ListSources(ctx, connect.NewRequest(&cepv1.ListSourcesRequest{}))
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, s := range res.Msg.GetSources() {
		out = append(out, cobra.CompletionWithDesc(s.GetName(), "source keyed by "+s.GetKey()))
	}
	return out, nil
}

func nodeNames(ctx context.Context, c *apiClients) ([]cobra.Completion, error) {
	res, err := c.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, n := range res.Msg.GetNodes() {
		out = append(out, cobra.CompletionWithDesc(n.GetId(), nodeState(n)+" at "+n.GetApiAddress()))
	}
	return out, nil
}

func savepointNames(ctx context.Context, c *apiClients) ([]cobra.Completion, error) {
	res, err := c.savepoints.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, s := range res.Msg.GetSavepoints() {
		out = append(out, cobra.CompletionWithDesc(s.GetId(), s.GetLocation()))
	}
	return out, nil
}
