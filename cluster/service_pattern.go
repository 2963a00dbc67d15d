package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/explain"
	"github.com/cepcluster/cep/nfa/sql"
	"github.com/cepcluster/cep/shard"
)

// compiled validates a spec or query and returns the pattern.
func compiled(spec string, format cepv1.SpecFormat, name string) (*nfa.Pattern, cepv1.SpecFormat, error) {
	isSQL := format == cepv1.SpecFormat_SPEC_FORMAT_SQL || (format == cepv1.SpecFormat_SPEC_FORMAT_UNSPECIFIED && nfa.IsSQL([]byte(spec)))
	var p *nfa.Pattern
	var err error
	if isSQL {
		if name == "" {
			return nil, 0, fmt.Errorf("%w: a MATCH_RECOGNIZE query needs a name", api.ErrInvalidArgument)
		}
		p, err = nfa.CompileSQL(spec, name)
		format = cepv1.SpecFormat_SPEC_FORMAT_SQL
	} else {
		p, err = nfa.CompileNamed([]byte(spec), name)
		format = cepv1.SpecFormat_SPEC_FORMAT_SPEC
	}
	if err != nil {
		return nil, format, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	if len(p.Sources()) == 0 {
		return nil, format, fmt.Errorf("%w: pattern %q names no source (set source: NAME)", api.ErrInvalidArgument, p.Name())
	}
	return p, format, nil
}

// checkedSpec is compiled with the checks a new document gets beyond what
// a shard compiles (nfa.Pattern.CheckStageRefs): for validate, deploy,
// update and explain, not for patterns already in the log or a savepoint.
func checkedSpec(spec string, format cepv1.SpecFormat, name string) (*nfa.Pattern, cepv1.SpecFormat, error) {
	p, f, err := compiled(spec, format, name)
	if err != nil {
		return nil, f, err
	}
	if err := p.CheckStageRefs(); err != nil {
		return nil, f, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	if err := nfa.CheckYAMLKeys([]byte(spec)); err != nil {
		return nil, f, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	return p, f, nil
}

// patternMaxStateBytes is the bound on bytes held per shard a deployment
// of the stored pattern gets: its document's maxStateBytes, else the
// cluster's.
func patternMaxStateBytes(spec, format string, clusterMax int64) int64 {
	if format != "sql" {
		if s, err := nfa.ParseSpec([]byte(spec)); err == nil && s.MaxStateBytes != nil && *s.MaxStateBytes > 0 {
			return min(*s.MaxStateBytes, clusterMax)
		}
	}
	return clusterMax
}

// patternMaxKeys is the bound on keys per shard a deployment of the
// stored pattern gets: its document's maxKeys, else the cluster's.
func patternMaxKeys(spec, format string, clusterMax int) int {
	if format != "sql" {
		if s, err := nfa.ParseSpec([]byte(spec)); err == nil && s.MaxKeys != nil && *s.MaxKeys > 0 {
			return min(*s.MaxKeys, clusterMax)
		}
	}
	return clusterMax
}

// specError is a refused spec's error, with the position it points to:
// the SQL parser's, or where the document writes the stage and field.
func specError(spec string, err error) *cepv1.SpecError {
	out := &cepv1.SpecError{Message: api.Detail(err)}
	var pe *nfa.PatternError
	if errors.As(err, &pe) {
		out.Stage, out.Field = pe.Stage, pe.Field
		l, c := nfa.SpecPosition([]byte(spec), pe.Stage, pe.Field)
		out.Line, out.Column = uint32(l), uint32(c)
	}
	var se *sql.Error
	if errors.As(err, &se) {
		out.Line, out.Column = uint32(se.Pos.Line), uint32(se.Pos.Col)
	}
	return out
}

// outputOptions are a deploy's or update's bound on partial matches per key
// (nil: the default; 0: none) and record types to publish (empty: all).
type outputOptions struct {
	maxPartialMatches *uint64
	records           []cepv1.RecordType
	fromStart         bool // a deploy's from_start
}

// maxBound is the largest bound on partial matches per key a deploy may set.
const maxBound = 1_000_000_000

var recordNames = map[cepv1.RecordType]string{
	cepv1.RecordType_RECORD_TYPE_MATCH:   "match",
	cepv1.RecordType_RECORD_TYPE_TIMEOUT: "timeout",
	cepv1.RecordType_RECORD_TYPE_LATE:    "late",
}

// meta returns the options as meta.Pattern holds them.
func (o outputOptions) meta() (maxPM int64, records []string, err error) {
	switch b := o.maxPartialMatches; {
	case b == nil:
	case *b == 0:
		maxPM = -1
	case *b > maxBound:
		return 0, nil, fmt.Errorf("%w: max_partial_matches %d is over %d (0 sets no bound)", api.ErrInvalidArgument, *b, maxBound)
	default:
		maxPM = int64(*b)
	}
	for _, rt := range o.records {
		name, ok := recordNames[rt]
		if !ok {
			return 0, nil, fmt.Errorf("%w: records: %v is not a record type (match, timeout or late)", api.ErrInvalidArgument, rt)
		}
		if !slices.Contains(records, name) {
			records = append(records, name)
		}
	}
	if len(records) == len(recordNames) {
		records = nil // all of them
	}
	slices.Sort(records)
	return maxPM, records, nil
}

// patternBound is the pattern's bound on partial matches per key as the API gives
// it: nil for the default, 0 for none.
func patternBound(p *meta.Pattern) *uint64 {
	var b uint64
	switch {
	case p.MaxPartialMatches == 0:
		return nil
	case p.MaxPartialMatches > 0:
		b = uint64(p.MaxPartialMatches)
	}
	return &b
}

// patternRecordTypes lists the record types the pattern publishes.
func patternRecordTypes(p *meta.Pattern) []cepv1.RecordType {
	var out []cepv1.RecordType
	for _, rt := range []cepv1.RecordType{cepv1.RecordType_RECORD_TYPE_MATCH, cepv1.RecordType_RECORD_TYPE_TIMEOUT, cepv1.RecordType_RECORD_TYPE_LATE} {
		if len(p.Records) == 0 || slices.Contains(p.Records, recordNames[rt]) {
			out = append(out, rt)
		}
	}
	return out
}

func toPattern(p *meta.Pattern) *cepv1.Pattern {
	f := cepv1.SpecFormat_SPEC_FORMAT_SPEC
	if p.Format == "sql" {
		f = cepv1.SpecFormat_SPEC_FORMAT_SQL
	}
	st := cepv1.PatternState_PATTERN_STATE_ACTIVE
	if p.Deleted {
		st = cepv1.PatternState_PATTERN_STATE_DELETING
	}
	bound := uint64(nfa.DefaultMaxPartialMatches)
	if b := patternBound(p); b != nil {
		bound = *b
	}
	return &cepv1.Pattern{Name: p.Name, Version: p.Version, Spec: p.Spec, Format: f, Sources: p.Sources,
		OutputSubject: p.OutputSubject, CreatedIndex: p.CreatedIndex, UpdatedIndex: p.UpdatedIndex, State: st,
		Reads: p.ReadsOf(), MaxPartialMatches: bound, Records: patternRecordTypes(p), FromStart: p.FromStart}
}

// checkOutputSubject checks where a pattern publishes: a literal subject
// under the output stream's root, or its records would go to a subject
// no stream keeps (or to the server's own, $JS.API...) and vanish.
func checkOutputSubject(subject string) error {
	if err := keygroup.CheckSubjectBounds(subject); err != nil {
		return fmt.Errorf("%w: field output_subject: %v", api.ErrInvalidArgument, err)
	}
	if !strings.HasPrefix(subject, keygroup.OutputSubjectRoot) {
		return fmt.Errorf("%w: output subject %q must start with %q (the output stream's subjects)", api.ErrInvalidArgument, subject, keygroup.OutputSubjectRoot)
	}
	if err := validSubject(subject); err != nil || strings.ContainsAny(subject, "*>") {
		return fmt.Errorf("%w: output subject %q: want NATS tokens without wildcards", api.ErrInvalidArgument, subject)
	}
	return nil
}

// checkPatternMeta checks a pattern's metadata as a deploy, an update and
// a restore propose it, p being its spec compiled under its name
// (compiled): the name, sources and reads agree with the spec, the output
// subject, bound, record types, format and policy are ones a deploy sets.
func checkPatternMeta(pm *meta.Pattern, p *nfa.Pattern) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: pattern %q: %s", api.ErrInvalidArgument, pm.Name, fmt.Sprintf(format, a...))
	}
	switch {
	case pm.Name != p.Name():
		return bad("its spec is named %q", p.Name())
	case !slices.Equal(pm.Sources, p.Sources()):
		return bad("sources %v, its spec reads %v", pm.Sources, p.Sources())
	case len(pm.Reads) != 0 && len(pm.Reads) != len(pm.Sources):
		return bad("reads %v for sources %v", pm.Reads, pm.Sources)
	case pm.Format != "spec" && pm.Format != "sql":
		return bad("format %q (spec or sql)", pm.Format)
	case pm.MaxPartialMatches < -1 || pm.MaxPartialMatches > maxBound:
		return bad("max partial matches %d (-1 to %d)", pm.MaxPartialMatches, maxBound)
	case pm.Policy > uint8(shard.PolicyMigrate):
		return bad("update policy %d", pm.Policy)
	}
	for i, r := range pm.Reads {
		if src := pm.Sources[i]; r != src && !strings.HasPrefix(r, src+".k") {
			return bad("reads %q for source %q: neither it nor a source re-keying it", r, src)
		}
	}
	for _, rt := range pm.Records {
		if !slices.Contains(slices.Collect(maps.Values(recordNames)), rt) {
			return bad("record type %q (match, timeout or late)", rt)
		}
	}
	return checkOutputSubject(pm.OutputSubject)
}

// checkPattern compiles a pattern's spec under its name and checks its
// metadata as a deploy does (checkPatternMeta): for metadata that did not
// come through a deploy, a savepoint's.
func checkPattern(pm *meta.Pattern) error {
	format := cepv1.SpecFormat_SPEC_FORMAT_SPEC
	if pm.Format == "sql" {
		format = cepv1.SpecFormat_SPEC_FORMAT_SQL
	}
	p, _, err := compiled(pm.Spec, format, pm.Name)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", pm.Name, err)
	}
	return checkPatternMeta(pm, p)
}

type patternBackend struct{ s *Service }

// checkFields checks the fields a new document reads against those its
// sources declare (nfa.CheckSourceFields), for validate, deploy and
// update.
func (b patternBackend) checkFields(p *nfa.Pattern, spec string) error {
	md := b.s.n.Meta()
	decl := map[string]nfa.SourceFields{}
	for _, n := range p.Sources() {
		if s := md.Sources[n]; s != nil && s.Schema != nil {
			decl[n] = s.Schema
		}
	}
	if err := nfa.CheckSourceFields(p, spec, decl); err != nil {
		return fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	return nil
}

func (b patternBackend) Validate(ctx context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
	release, err := b.s.compileTurn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	p, f, err := checkedSpec(r.Spec, r.Format, r.Name)
	if err == nil {
		err = b.checkFields(p, r.Spec)
	}
	if err != nil {
		doc := r.Spec // the SQL parser's errors carry their own position
		if f == cepv1.SpecFormat_SPEC_FORMAT_SQL {
			doc = ""
		}
		return &cepv1.ValidatePatternResponse{Valid: false, Format: f, Error: specError(doc, err)}, nil
	}
	var stages []string
	for _, st := range p.Spec().Stages {
		stages = append(stages, st.Name)
	}
	return &cepv1.ValidatePatternResponse{Valid: true, Format: f, Name: p.Name(), Stages: stages, EventTime: p.EventTime(), Sources: p.Sources(), Warnings: p.Warnings()}, nil
}

// derivedReads returns what the pattern reads for each of its sources —
// the source itself when it is partitioned by the pattern's key, else the
// derived source re-keying it (created here when missing) — or nil when it
// reads them all directly.
func (b patternBackend) derivedReads(ctx context.Context, p *nfa.Pattern) ([]string, error) {
	md := b.s.n.Meta()
	var reads []string
	for i, src := range p.Sources() {
		sm := md.Sources[src]
		if sm == nil || sm.Origin != "" || (!sm.Unpartitioned && sm.Key != "" && sm.Key == p.KeyExpr()) {
			continue // unknown (refused by the metadata), derived, or keyed alike
		}
		if reads == nil {
			reads = p.Sources()
		}
		projected := ""
		if p.Projected() {
			projected = p.Name()
		}
		d := keygroup.DerivedSourceName(src, p.KeyExpr(), projected)
		reads[i] = d
		if md.Sources[d] != nil {
			continue
		}
		// the re-keyed copy keeps no more than its origin does
		var limits meta.SourceLimits
		if o := md.Sources[src]; o != nil {
			limits = o.Limits
		}
		stream, err := EnsureSourceStream(ctx, b.s.n.JetStream(), d, b.s.n.keyGroups())
		if err == nil {
			err = setStreamLimits(ctx, b.s.n.JetStream(), stream, limits)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: create the stream re-keying %s: %v", api.ErrUnavailable, src, err)
		}
		created, err := streamCreated(ctx, b.s.n.JetStream(), stream)
		if err != nil {
			return nil, fmt.Errorf("%w: the stream re-keying %s: %v", api.ErrUnavailable, src, err)
		}
		_, err = b.s.n.Propose(ctx, meta.PutSource{Source: &meta.Source{
			Name: d, Stream: stream, Subjects: []string{keygroup.SourceWildcard(d)}, Key: p.KeyExpr(), Origin: src, Managed: true, StreamCreated: created, Limits: limits}})
		if err != nil && !errors.Is(err, meta.ErrExists) {
			return nil, mapErr(err)
		}
	}
	return reads, nil
}

// put deploys or updates a pattern and returns it with its warnings
// (nfa.Pattern.Warnings).
func (b patternBackend) put(ctx context.Context, requestID, spec string, format cepv1.SpecFormat, name, subject string, create bool, policy cepv1.UpdatePolicy, opts outputOptions) (*cepv1.Pattern, []string, error) {
	fromStart := create && opts.fromStart
	p, f, err := checkedSpec(spec, format, name)
	if err == nil {
		err = b.checkFields(p, spec)
	}
	if err == nil {
		err = checkRequestID(requestID)
	}
	if err != nil {
		return nil, nil, err
	}
	if res, done, err := b.s.n.requestDone(requestID); done {
		// a retry: answered as the first time, nothing created again
		if err != nil {
			return nil, nil, err
		}
		return toPattern(res.(*meta.Pattern)), p.Warnings(), nil
	}
	if old := b.s.n.Meta().Patterns[p.Name()]; !create && old != nil && !old.Deleted {
		// what an update leaves out stays as it is
		if subject == "" {
			subject = old.OutputSubject
		}
		if opts.maxPartialMatches == nil {
			opts.maxPartialMatches = patternBound(old)
		}
		if len(opts.records) == 0 {
			opts.records = patternRecordTypes(old)
		}
		fromStart = old.FromStart
	}
	maxPM, records, err := opts.meta()
	if err != nil {
		return nil, nil, err
	}
	if mk := p.Spec().MaxKeys; mk != nil && *mk > b.s.n.cfg.MaxKeys {
		return nil, nil, fmt.Errorf("%w: pattern %q: field \"maxKeys\": maxKeys is %d, over this cluster's bound on keys per pattern and shard, cepnode --max-keys = %d (see docs/limits.md)", api.ErrInvalidArgument, p.Name(), *mk, b.s.n.cfg.MaxKeys)
	}
	if mb := p.Spec().MaxStateBytes; mb != nil && *mb > b.s.n.cfg.MaxStateBytes {
		return nil, nil, fmt.Errorf("%w: pattern %q: field \"maxStateBytes\": maxStateBytes is %d, over this cluster's bound on bytes held per pattern and shard, cepnode --max-state-bytes = %d (see docs/limits.md)", api.ErrInvalidArgument, p.Name(), *mb, b.s.n.cfg.MaxStateBytes)
	}
	if subject == "" {
		subject = outputSubject(p.Name())
	}
	if err := checkOutputSubject(subject); err != nil {
		return nil, nil, err // before derivedReads creates anything
	}
	// every event is read by the shard that owns its source key's group; a
	// pattern keyed otherwise (or on a source without a declared key) reads
	// the source re-keyed by its own key: a derived source
	reads, err := b.derivedReads(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	pm := &meta.Pattern{Name: p.Name(), Spec: spec, Format: "spec", Sources: p.Sources(), Reads: reads, OutputSubject: subject,
		MaxPartialMatches: maxPM, Records: records, FromStart: fromStart}
	if f == cepv1.SpecFormat_SPEC_FORMAT_SQL {
		pm.Format = "sql"
	}
	switch policy {
	case cepv1.UpdatePolicy_UPDATE_POLICY_RESET:
		pm.Policy = uint8(shard.PolicyReset)
	case cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE:
		pm.Policy = uint8(shard.PolicyMigrate)
	default:
		pm.Policy = uint8(shard.PolicyDrain)
	}
	if err := checkPatternMeta(pm, p); err != nil {
		return nil, nil, err
	}
	res, err := b.s.n.proposeRequest(ctx, requestID, meta.PutPattern{Create: create, Pattern: pm})
	if err != nil {
		return nil, nil, mapErr(err)
	}
	return toPattern(res.(*meta.Pattern)), p.Warnings(), nil
}

func (b patternBackend) Deploy(ctx context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Patterns, cepv1connect.PatternServiceClient.DeployPattern); done {
		return res, err
	}
	p, warnings, err := b.put(ctx, r.RequestId, r.Spec, r.Format, r.Name, r.OutputSubject, true, 0, outputOptions{r.MaxPartialMatches, r.Records, r.FromStart})
	if err != nil {
		return nil, err
	}
	return &cepv1.DeployPatternResponse{Pattern: p, Warnings: warnings, PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) Update(ctx context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Patterns, cepv1connect.PatternServiceClient.UpdatePattern); done {
		return res, err
	}
	p, warnings, err := b.put(ctx, r.RequestId, r.Spec, r.Format, r.Name, r.OutputSubject, false, r.Policy, outputOptions{maxPartialMatches: r.MaxPartialMatches, records: r.Records})
	if err != nil {
		return nil, err
	}
	return &cepv1.UpdatePatternResponse{Pattern: p, Warnings: warnings, PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) Delete(ctx context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Patterns, cepv1connect.PatternServiceClient.DeletePattern); done {
		return res, err
	}
	res, err := b.s.n.proposeRequest(ctx, r.RequestId, meta.DeletePattern{Name: r.Name})
	if err != nil {
		return nil, mapErr(err)
	}
	p := res.(*meta.Pattern)
	return &cepv1.DeletePatternResponse{Pattern: toPattern(p), PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) List(ctx context.Context, r *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Patterns, cepv1connect.PatternServiceClient.ListPatterns); done {
		return res, err
	}
	m, err := b.s.n.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	out := &cepv1.ListPatternsResponse{}
	for _, name := range m.PatternNames() {
		out.Patterns = append(out.Patterns, toPattern(m.Patterns[name]))
	}
	return out, nil
}

func (b patternBackend) Get(ctx context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Patterns, cepv1connect.PatternServiceClient.GetPattern); done {
		return res, err
	}
	m, err := b.s.n.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	p := m.Patterns[r.Name]
	if p == nil || p.Deleted {
		return nil, fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Name)
	}
	return &cepv1.GetPatternResponse{Pattern: toPattern(p), PendingShards: b.s.n.notApplied(ctx, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

// Explain draws the automaton of a deployed pattern, as its shards run
// it, or of a spec given in the request, as a deploy would compile it.
func (b patternBackend) Explain(ctx context.Context, r *cepv1.ExplainPatternRequest) (*cepv1.ExplainPatternResponse, error) {
	var p *nfa.Pattern
	var version uint64
	if r.Spec != "" {
		release, err := b.s.compileTurn(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		if p, _, err = checkedSpec(r.Spec, r.Format, r.Name); err != nil {
			return nil, err
		}
	} else {
		pm := b.s.n.Meta().Patterns[r.Name]
		if pm == nil || pm.Deleted {
			return nil, fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Name)
		}
		format := cepv1.SpecFormat_SPEC_FORMAT_SPEC
		if pm.Format == "sql" {
			format = cepv1.SpecFormat_SPEC_FORMAT_SQL
		}
		var err error
		if p, _, err = compiled(pm.Spec, format, pm.Name); err != nil {
			// it compiled when it was deployed: only a changed compiler
			// refuses it now (and the shards skip it alike)
			return nil, fmt.Errorf("%w: pattern %q version %d no longer compiles: %s", api.ErrFailedPrecondition, pm.Name, pm.Version,
				api.Detail(err))
		}
		version = pm.Version
	}
	x := explain.Pattern(p)
	return &cepv1.ExplainPatternResponse{Name: p.Name(), Version: version, Text: x.Text, Dot: x.Dot, Svg: x.SVG, Warnings: p.Warnings()}, nil
}
