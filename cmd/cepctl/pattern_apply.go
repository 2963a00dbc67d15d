package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternApplyOptions struct {
	globalOptions
	// File is the positional FILE; Paths are the -f files and directories.
	File          string
	Paths         []string
	Recursive     bool
	Prune         bool
	DryRun        bool
	Name          string
	OutputSubject string
	Policy        cepv1.UpdatePolicy
	FromStart     bool
	outputFlags
}

func newPatternApplyCmd(d *deps, runF func(*patternApplyOptions) error) *cobra.Command {
	opts := &patternApplyOptions{}
	var policy string
	cmd := &cobra.Command{
		Use:   "apply FILE | -f PATH... [-R] [--prune]",
		Short: "Deploy patterns, or update them where they differ",
		Long: `Make the cluster run the patterns of the files: deploy each when no pattern
of its name runs, update it (with --policy) when its spec or the settings
given here differ from the running version's, and leave it alone when they
are the same, so that applying the same files again changes nothing.
Settings not given keep their current values; those given apply to every
file.

-f takes a file or a directory, and may be repeated; a directory gives its
pattern files (.yaml, .yml, .json, .sql; hidden files, test files
NAME.test.yaml and others are skipped), and with -R those of its subdirectories too. The files are taken
in lexical order of their paths. Every file is read and validated before
anything changes: a file that is invalid or cannot be read, two files
naming the same pattern, or a directory without pattern files fails the
whole apply, a line per problem, and nothing is applied. A change the
cluster then refuses (a source it lacks, say) is reported, and the other
files are applied.

--prune then deletes the patterns running on the cluster that no file
names: the files are the whole of what should run, even a single FILE
given alone. Nothing is pruned when an apply failed.

--dry-run prints what would be done and changes nothing. With -f, --prune
or --dry-run, -o json or yaml prints a list of {name, file, action,
version}, action being deploy, update, unchanged or delete, and version the
one the pattern has, or would have, after it; apply FILE alone prints the
pattern.`,
		Example: `  cepctl pattern apply patterns/login-fail.yaml
  cepctl pattern apply -f patterns/ -R --prune --policy migrate
  cepctl pattern apply -f patterns/ -R --prune --dry-run`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parsePolicy(policy)
			if err != nil {
				return err
			}
			if len(args) == 0 && len(opts.Paths) == 0 {
				return errors.New("no pattern files: give FILE, or -f FILE|DIR")
			}
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Policy = g, p
			if len(args) == 1 {
				opts.File = args[0]
			}
			if err := opts.outputFlags.parse(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternApply(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringArrayVarP(&opts.Paths, "filename", "f", nil, "a pattern file, or a directory of them (repeatable; - reads standard input)")
	cmd.Flags().BoolVarP(&opts.Recursive, "recursive", "R", false, "take the pattern files of the directories' subdirectories too")
	cmd.Flags().BoolVar(&opts.Prune, "prune", false, "delete the running patterns that no file names")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would be done, and change nothing")
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name, with a single file (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&policy, "policy", "drain", "for an update, what happens to in-flight partial matches: drain, reset or migrate")
	cmd.Flags().StringVar(&opts.OutputSubject, "output-subject", "", "NATS subject for the pattern's records (default: the cluster's choice, or the current one)")
	cmd.Flags().BoolVar(&opts.FromStart, "from-start", false, "when it deploys, read the pattern's sources from the start of their streams (see pattern deploy)")
	opts.outputFlags.add(cmd, "the server's, or the current setting")
	return cmd
}

// Actions of an apply, as -o json and yaml name them.
const (
	actionDeploy    = "deploy"
	actionUpdate    = "update"
	actionUnchanged = "unchanged"
	actionDelete    = "delete"
)

// appliedPattern is one line of apply's -o json and yaml list.
type appliedPattern struct {
	Name    string `json:"name"`
	File    string `json:"file"`
	Action  string `json:"action"`
	Version uint64 `json:"version"`
}

func runPatternApply(ctx context.Context, d *deps, opts *patternApplyOptions) error {
	// apply FILE alone prints the pattern with -o json, and its one
	// error, as it always has
	list := opts.File == "" || len(opts.Paths) > 0 || opts.Prune || opts.DryRun
	table := opts.Output == "table"
	c := newClients(d, opts.globalOptions)
	files, err := loadPatternFiles(ctx, d, c, opts.paths(), opts.Recursive, opts.Name)
	if err != nil {
		if ps, ok := errors.AsType[problems](err); ok && list && !opts.DryRun {
			return append(ps, errors.New("nothing was applied"))
		}
		return err
	}
	var done []appliedPattern
	var failed problems
	for _, f := range files {
		a, err := opts.applyOne(ctx, d, c, f, list)
		if err != nil {
			if !list {
				return err
			}
			failed = append(failed, fmt.Errorf("%s: %w", displayName(f.path), err))
			continue
		}
		done = append(done, a)
	}
	if opts.Prune && len(failed) > 0 {
		failed = append(failed, errors.New("nothing was pruned, as an apply failed"))
	}
	if opts.Prune && len(failed) == 0 {
		deleted, err := opts.prune(ctx, d, c, files)
		done = append(done, deleted...)
		if err != nil {
			failed = append(failed, err)
		}
	}
	if list && !table {
		if done == nil {
			done = []appliedPattern{}
		}
		b, err := json.Marshal(done)
		if err != nil {
			return err
		}
		if err := writeStructured(d.stdout, opts.Output, b); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// paths are the files and directories given.
func (o *patternApplyOptions) paths() []string {
	if o.File == "" {
		return o.Paths
	}
	return append([]string{o.File}, o.Paths...)
}

// applyOne deploys, updates or leaves alone the pattern of f and prints
// what it did: a line in table mode, else the pattern, or with list
// nothing (the caller prints the list); warnings go to stderr.
func (o *patternApplyOptions) applyOne(ctx context.Context, d *deps, c *apiClients, f patternFile, list bool) (appliedPattern, error) {
	table := o.Output == "table"
	quiet := list && !table
	out := appliedPattern{Name: f.name, File: displayName(f.path)}
	cur, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: f.name}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		out.Action, out.Version = actionDeploy, 1
		if o.DryRun {
			return out, o.dryRunLine(d, table, "would deploy pattern %s from %s\n", f.name, out.File)
		}
		res, err := c.patterns.DeployPattern(ctx, connect.NewRequest(o.deployRequest(f.spec, o.OutputSubject, o.FromStart)))
		if err != nil {
			return out, err
		}
		out.Version = res.Msg.GetPattern().GetVersion()
		if quiet {
			writeWarnings(d.stderr, res.Msg.GetWarnings())
			writePending(d.stderr, res.Msg.GetPattern(), res.Msg.GetPendingShards())
			return out, nil
		}
		return out, writeDeployed(d, o.Output, res.Msg)
	}
	if err != nil {
		return out, err
	}
	p := cur.Msg.GetPattern()
	if o.sameAs(f.spec, p) {
		out.Action, out.Version = actionUnchanged, p.GetVersion()
		writePending(d.stderr, p, cur.Msg.GetPendingShards())
		switch {
		case quiet:
			return out, nil
		case !table:
			return out, writeProto(d.stdout, o.Output, p)
		}
		_, err := fmt.Fprintf(d.stdout, "pattern %s unchanged at version %d\n", p.GetName(), p.GetVersion())
		return out, err
	}
	out.Action, out.Version = actionUpdate, p.GetVersion()+1
	if o.DryRun {
		return out, o.dryRunLine(d, table, "would update pattern %s to version %d (policy %s) from %s\n",
			f.name, out.Version, enumName(o.Policy, "UPDATE_POLICY_"), out.File)
	}
	res, err := c.patterns.UpdatePattern(ctx, connect.NewRequest(o.updateRequest(f.spec, o.OutputSubject, o.Policy)))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return out, errors.New("the pattern was deleted while being applied; apply it again")
	}
	if err != nil {
		return out, err
	}
	out.Version = res.Msg.GetPattern().GetVersion()
	if quiet {
		writeWarnings(d.stderr, res.Msg.GetWarnings())
		writePending(d.stderr, res.Msg.GetPattern(), res.Msg.GetPendingShards())
		return out, nil
	}
	return out, writeUpdated(d, o.Output, o.Policy, res.Msg)
}

// dryRunLine prints a line of --dry-run in table mode.
func (o *patternApplyOptions) dryRunLine(d *deps, table bool, format string, args ...any) error {
	if !table {
		return nil
	}
	_, err := fmt.Fprintf(d.stdout, format, args...)
	return err
}

// prune deletes (or with --dry-run names) the running patterns that none
// of files names, and returns what it did; it stops at the first error.
func (o *patternApplyOptions) prune(ctx context.Context, d *deps, c *apiClients, files []patternFile) ([]appliedPattern, error) {
	stale, err := stalePatterns(ctx, c, files)
	if err != nil {
		return nil, err
	}
	table := o.Output == "table"
	var done []appliedPattern
	for _, p := range stale {
		a := appliedPattern{Name: p.GetName(), Action: actionDelete, Version: p.GetVersion()}
		if o.DryRun {
			done = append(done, a)
			if err := o.dryRunLine(d, table, "would delete pattern %s (version %d, not in the files)\n", p.GetName(), p.GetVersion()); err != nil {
				return done, err
			}
			continue
		}
		res, err := c.patterns.DeletePattern(ctx, connect.NewRequest(&cepv1.DeletePatternRequest{Name: p.GetName()}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			continue // deleted meanwhile, as wanted
		}
		if err != nil {
			return done, fmt.Errorf("delete pattern %s: %w", p.GetName(), err)
		}
		a.Version = res.Msg.GetPattern().GetVersion()
		done = append(done, a)
		if pending := res.Msg.GetPendingShards(); len(pending) > 0 {
			fmt.Fprintf(d.stderr, "cepctl: warning: pattern %s still runs on shard(s) %s; each stops it once it has a leader\n", p.GetName(), joinIDs(pending))
		}
		if table {
			if _, err := fmt.Fprintf(d.stdout, "deleted pattern %s (not in the files)\n", p.GetName()); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// stalePatterns are the patterns running on the cluster, not being
// deleted, that none of files names, by name.
func stalePatterns(ctx context.Context, c *apiClients, files []patternFile) ([]*cepv1.Pattern, error) {
	res, err := c.patterns.ListPatterns(ctx, connect.NewRequest(&cepv1.ListPatternsRequest{}))
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool, len(files))
	for _, f := range files {
		named[f.name] = true
	}
	var stale []*cepv1.Pattern
	for _, p := range res.Msg.GetPatterns() {
		if !named[p.GetName()] && p.GetState() != cepv1.PatternState_PATTERN_STATE_DELETING {
			stale = append(stale, p)
		}
	}
	return stale, nil
}

// sameAs reports whether the running pattern p already is what applying f
// with these options would make it.
func (o *patternApplyOptions) sameAs(f specFile, p *cepv1.Pattern) bool {
	return sameSettings(f, p, o.OutputSubject, o.outputFlags)
}

// sameSettings reports whether the running pattern p already is what
// applying f with these settings would make it.
func sameSettings(f specFile, p *cepv1.Pattern, subject string, out outputFlags) bool {
	wantRecords := normalRecords(out.Records)
	return f.spec == p.GetSpec() &&
		(subject == "" || subject == p.GetOutputSubject()) &&
		(out.MaxPartialMatches == nil || *out.MaxPartialMatches == p.GetMaxPartialMatches()) &&
		(len(wantRecords) == 0 || slices.Equal(wantRecords, p.GetRecords()))
}

// normalRecords is record types as the server lists them: sorted, each
// once.
func normalRecords(rs []cepv1.RecordType) []cepv1.RecordType {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	return slices.Compact(rs)
}

// patternFile is a pattern file read and validated.
type patternFile struct {
	path string
	spec specFile
	// name is the pattern's name, as the server validated it.
	name string
}

// displayName is how messages name path.
func displayName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// loadPatternFiles reads the pattern files of paths (see
// listPatternFiles) and has the server validate each. Every problem is
// reported (as problems): a file that cannot be read or is invalid, two
// naming the same pattern, a directory without pattern files, --name
// with several files.
func loadPatternFiles(ctx context.Context, d *deps, c *apiClients, paths []string, recursive bool, name string) ([]patternFile, error) {
	list, errs := listPatternFiles(paths, recursive)
	if name != "" && len(list) > 1 {
		return nil, fmt.Errorf("--name names one pattern, and the paths give %d files: each file names its own (a query by its file name)", len(list))
	}
	var files []patternFile
	byName := map[string]string{}
	for _, path := range list {
		f, err := readSpecFile(d, path, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := c.patterns.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: f.spec, Format: f.format, Name: f.name}))
		if err != nil {
			return nil, err
		}
		if !v.Msg.GetValid() {
			errs = append(errs, specError(path, v.Msg.GetError()))
			continue
		}
		n := v.Msg.GetName()
		if other, ok := byName[n]; ok {
			errs = append(errs, fmt.Errorf("%s: pattern %s is also in %s", displayName(path), n, displayName(other)))
			continue
		}
		byName[n] = path
		files = append(files, patternFile{path: path, spec: f, name: n})
	}
	if len(errs) > 0 {
		return nil, problems(errs)
	}
	return files, nil
}

// patternExts are the extensions of the files a directory gives.
var patternExts = []string{".yaml", ".yml", ".json", ".sql"}

// isTestFile: a pattern's test file (cepctl pattern test), NAME.test.yaml
// or .yml, kept beside its pattern; a directory does not give it.
func isTestFile(path string) bool {
	base := strings.ToLower(filepath.Base(path))
	return strings.HasSuffix(base, ".test.yaml") || strings.HasSuffix(base, ".test.yml")
}

// listPatternFiles lists the files paths give, in lexical order, each
// once: a file as itself ("-" for standard input), a directory its
// pattern files that are not hidden, and with recursive those of its
// subdirectories that are not hidden. A directory without any is a
// problem, so that --prune of an empty checkout deletes nothing.
func listPatternFiles(paths []string, recursive bool) ([]string, []error) {
	var files []string
	var errs []error
	for _, root := range paths {
		if root == "-" {
			files = append(files, root)
			continue
		}
		root = filepath.Clean(root)
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			files = append(files, root) // reading it says what is wrong
			continue
		}
		n := len(files)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path == root {
				return nil
			}
			hidden := strings.HasPrefix(e.Name(), ".")
			if e.IsDir() {
				if hidden || !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			if hidden || !slices.ContainsFunc(patternExts, func(ext string) bool { return strings.EqualFold(filepath.Ext(path), ext) }) || isTestFile(path) {
				return nil
			}
			// a link is followed to a file (a mounted ConfigMap's are)
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				return err
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("read patterns: %w", err))
			continue
		}
		if len(files) == n {
			hint := ""
			if !recursive {
				hint = " (-R takes those of its subdirectories)"
			}
			errs = append(errs, fmt.Errorf("%s: no pattern files (%s)%s", root, strings.Join(patternExts, ", "), hint))
		}
	}
	slices.Sort(files)
	return slices.Compact(files), errs
}
