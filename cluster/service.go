package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sql"
	"github.com/cepcluster/cep/shard"
)

// Service implements the API backends on a node. Reads are served from
// this node's replicas; changes go through the metadata leader, and a node
// that does not lead forwards them to the one that does.
type Service struct {
	n      *Node
	client *http.Client
}

// clientOpts are the options of the clients that forward changes to the
// metadata leader: they present this cluster's token.
func (s *Service) clientOpts() []connect.ClientOption {
	if s.n.cfg.APIToken == "" {
		return nil
	}
	return []connect.ClientOption{api.WithClientToken(s.n.cfg.APIToken)}
}

// NewService returns the API backends of a node.
func NewService(n *Node) *Service { return &Service{n: n, client: n.peerHTTP} }

// Backends returns the service as api.Backends.
func (s *Service) Backends() api.Backends {
	return api.Backends{
		Patterns:   patternBackend{s},
		Sources:    sourceBackend{s},
		Cluster:    clusterBackend{s},
		Matches:    matchBackend{s},
		Savepoints: savepointBackend{s},
	}
}

// mapErr turns cluster errors into the api sentinels. A refused metadata
// command is mapped by its kind and shown by its message, which names what
// was refused; a conflict keeps its kind's text too, which tells the
// client to retry.
func mapErr(err error) error {
	if me := (*meta.Error)(nil); errors.As(err, &me) {
		switch me.Kind {
		case meta.ErrExists:
			return fmt.Errorf("%w: %s", api.ErrAlreadyExists, me.Msg)
		case meta.ErrNotFound:
			return fmt.Errorf("%w: %s", api.ErrNotFound, me.Msg)
		case meta.ErrConflict:
			return fmt.Errorf("%w: %s", api.ErrFailedPrecondition, me.Error())
		case meta.ErrInvalid:
			return fmt.Errorf("%w: %s", api.ErrInvalidArgument, me.Msg)
		}
	}
	if errors.Is(err, errNotMetaLeader) {
		return fmt.Errorf("%w: no metadata leader yet (the cluster is electing one); retry", api.ErrUnavailable)
	}
	return err
}

// leaderClient returns an HTTP base URL of the metadata leader's API, or ""
// when this node leads.
func (s *Service) leaderURL() (string, error) {
	if s.n.IsMetaLeader() {
		return "", nil
	}
	if p, ok := s.n.peer(s.n.MetaLeader()); ok && p.APIAddr != "" {
		return s.n.apiURL(p.APIAddr), nil
	}
	return "", fmt.Errorf("%w: no metadata leader yet; retry", api.ErrUnavailable)
}

// forwarded sends a change to the metadata leader when this node does not
// lead; done reports whether it was forwarded (or failed to be).
func forwarded[Req, Res any](s *Service, ctx context.Context, r *Req, method func(base string) func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (res *Res, done bool, err error) {
	u, err := s.leaderURL()
	if err != nil {
		return nil, true, err
	}
	if u == "" {
		return nil, false, nil
	}
	out, err := method(u)(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, true, err
	}
	return out.Msg, true, nil
}

func (s *Service) patternClient(base string) cepv1connect.PatternServiceClient {
	return cepv1connect.NewPatternServiceClient(s.client, base, s.clientOpts()...)
}

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

func specError(err error) *cepv1.SpecError {
	out := &cepv1.SpecError{Message: strings.TrimPrefix(err.Error(), api.ErrInvalidArgument.Error()+": ")}
	var pe *nfa.PatternError
	if errors.As(err, &pe) {
		out.Stage, out.Field = pe.Stage, pe.Field
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

type patternBackend struct{ s *Service }

func (b patternBackend) Validate(ctx context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
	p, f, err := compiled(r.Spec, r.Format, r.Name)
	if err != nil {
		return &cepv1.ValidatePatternResponse{Valid: false, Format: f, Error: specError(err)}, nil
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
		stream, err := EnsureSourceStream(ctx, b.s.n.js, d, b.s.n.keyGroups())
		if err != nil {
			return nil, fmt.Errorf("%w: create the stream re-keying %s: %v", api.ErrUnavailable, src, err)
		}
		_, err = b.s.n.Propose(ctx, meta.PutSource{Source: &meta.Source{
			Name: d, Stream: stream, Subjects: []string{keygroup.SourceWildcard(d)}, Key: p.KeyExpr(), Origin: src, Managed: true}})
		if err != nil && !errors.Is(err, meta.ErrExists) {
			return nil, mapErr(err)
		}
	}
	return reads, nil
}

// put deploys or updates a pattern and returns it with its warnings
// (nfa.Pattern.Warnings).
func (b patternBackend) put(ctx context.Context, spec string, format cepv1.SpecFormat, name, subject string, create bool, policy cepv1.UpdatePolicy, opts outputOptions) (*cepv1.Pattern, []string, error) {
	fromStart := create && opts.fromStart
	p, f, err := compiled(spec, format, name)
	if err != nil {
		return nil, nil, err
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
	if subject == "" {
		subject = outputSubject(p.Name())
	}
	if !strings.HasPrefix(subject, keygroup.OutputSubjectRoot) {
		return nil, nil, fmt.Errorf("%w: output subject %q must start with %q (the output stream's subjects)", api.ErrInvalidArgument, subject, keygroup.OutputSubjectRoot)
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
	res, err := b.s.n.Propose(ctx, meta.PutPattern{Create: create, Pattern: pm})
	if err != nil {
		return nil, nil, mapErr(err)
	}
	return toPattern(res.(*meta.Pattern)), p.Warnings(), nil
}

func (b patternBackend) Deploy(ctx context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.DeployPatternRequest]) (*connect.Response[cepv1.DeployPatternResponse], error) {
		return b.s.patternClient(u).DeployPattern
	}); done {
		return res, err
	}
	p, warnings, err := b.put(ctx, r.Spec, r.Format, r.Name, r.OutputSubject, true, 0, outputOptions{r.MaxPartialMatches, r.Records, r.FromStart})
	if err != nil {
		return nil, err
	}
	return &cepv1.DeployPatternResponse{Pattern: p, Warnings: warnings, PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) Update(ctx context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.UpdatePatternRequest]) (*connect.Response[cepv1.UpdatePatternResponse], error) {
		return b.s.patternClient(u).UpdatePattern
	}); done {
		return res, err
	}
	p, warnings, err := b.put(ctx, r.Spec, r.Format, r.Name, r.OutputSubject, false, r.Policy, outputOptions{maxPartialMatches: r.MaxPartialMatches, records: r.Records})
	if err != nil {
		return nil, err
	}
	return &cepv1.UpdatePatternResponse{Pattern: p, Warnings: warnings, PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) Delete(ctx context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.DeletePatternRequest]) (*connect.Response[cepv1.DeletePatternResponse], error) {
		return b.s.patternClient(u).DeletePattern
	}); done {
		return res, err
	}
	res, err := b.s.n.Propose(ctx, meta.DeletePattern{Name: r.Name})
	if err != nil {
		return nil, mapErr(err)
	}
	p := res.(*meta.Pattern)
	return &cepv1.DeletePatternResponse{Pattern: toPattern(p), PendingShards: b.s.n.waitShards(ctx, b.s.n.cfg.DeployWait, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

func (b patternBackend) List(ctx context.Context, r *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
	m := b.s.n.Meta()
	out := &cepv1.ListPatternsResponse{}
	for _, name := range m.PatternNames() {
		out.Patterns = append(out.Patterns, toPattern(m.Patterns[name]))
	}
	return out, nil
}

func (b patternBackend) Get(ctx context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	p := b.s.n.Meta().Patterns[r.Name]
	if p == nil || p.Deleted {
		return nil, fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Name)
	}
	return &cepv1.GetPatternResponse{Pattern: toPattern(p), PendingShards: b.s.n.notApplied(ctx, b.s.n.patternApplied(p.Name, p.Version))}, nil
}

type sourceBackend struct{ s *Service }

func toSource(m *meta.Source, k int) *cepv1.Source {
	return &cepv1.Source{Name: m.Name, Stream: m.Stream, Subjects: m.Subjects, KeyGroups: uint32(k), Managed: m.Managed, CreatedIndex: m.CreatedIndex, Key: m.Key, Origin: m.Origin}
}

func (b sourceBackend) Create(ctx context.Context, r *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.CreateSourceRequest]) (*connect.Response[cepv1.CreateSourceResponse], error) {
		return cepv1connect.NewSourceServiceClient(b.s.client, u, b.s.clientOpts()...).CreateSource
	}); done {
		return res, err
	}
	if err := validSourceName(r.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrInvalidArgument, err)
	}
	for _, subj := range r.Subjects {
		if err := validSubject(subj); err != nil {
			return nil, fmt.Errorf("%w: subject %q: %v", api.ErrInvalidArgument, subj, err)
		}
	}
	if r.Key != "" {
		c, err := expr.NewCompiler()
		if err == nil {
			_, err = c.Value(r.Key)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: key: %v", api.ErrInvalidArgument, err)
		}
	}
	k := b.s.n.keyGroups()
	if m := b.s.n.Meta(); m.Sources[r.Name] != nil {
		return nil, fmt.Errorf("%w: source %q", api.ErrAlreadyExists, r.Name)
	}
	var sm *meta.Source
	switch {
	case r.Stream != "":
		// an existing stream, read whole or through the given subjects
		st, err := b.s.n.js.Stream(ctx, r.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w: stream %q (create it, or leave --stream out to let the cluster create one)", api.ErrNotFound, r.Stream)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %q: %v", api.ErrUnavailable, r.Stream, err)
		}
		have := st.CachedInfo().Config.Subjects
		sm = &meta.Source{Name: r.Name, Stream: r.Stream, Subjects: have, Key: r.Key, Unpartitioned: true}
		if len(r.Subjects) > 0 {
			for _, subj := range r.Subjects {
				if !coveredBy(subj, have) {
					return nil, fmt.Errorf("%w: stream %q (subjects %s) does not hold subject %q", api.ErrFailedPrecondition, r.Stream, strings.Join(have, " "), subj)
				}
			}
			sm.Subjects, sm.Filter = r.Subjects, r.Subjects
		}
	case len(r.Subjects) > 0:
		// the publishers' own subjects: a stream the cluster creates for
		// them, not stored by block
		name := keygroup.SourceStreamName(r.Name)
		_, err := b.s.n.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: r.Subjects, Storage: jetstream.FileStorage})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("%w: create stream %s for %s: %v", api.ErrFailedPrecondition, name, strings.Join(r.Subjects, " "), err)
		}
		sm = &meta.Source{Name: r.Name, Stream: name, Subjects: r.Subjects, Key: r.Key, Managed: true, Unpartitioned: true}
	default:
		stream, err := EnsureSourceStream(ctx, b.s.n.js, r.Name, k)
		if err != nil {
			return nil, fmt.Errorf("%w: create stream: %v", api.ErrUnavailable, err)
		}
		sm = &meta.Source{Name: r.Name, Stream: stream, Subjects: []string{keygroup.SourceWildcard(r.Name)}, Key: r.Key, Managed: true}
	}
	res, err := b.s.n.Propose(ctx, meta.PutSource{Source: sm})
	if err != nil {
		return nil, mapErr(err)
	}
	return &cepv1.CreateSourceResponse{Source: toSource(res.(*meta.Source), k)}, nil
}

func (b sourceBackend) List(ctx context.Context, r *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
	m := b.s.n.Meta()
	out := &cepv1.ListSourcesResponse{}
	for _, name := range m.SourceNames() {
		out.Sources = append(out.Sources, toSource(m.Sources[name], m.KeyGroups))
	}
	return out, nil
}

func (b sourceBackend) Get(ctx context.Context, r *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
	m := b.s.n.Meta()
	src := m.Sources[r.Name]
	if src == nil {
		return nil, fmt.Errorf("%w: source %q", api.ErrNotFound, r.Name)
	}
	return &cepv1.GetSourceResponse{Source: toSource(src, m.KeyGroups)}, nil
}

func (b sourceBackend) Delete(ctx context.Context, r *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.DeleteSourceRequest]) (*connect.Response[cepv1.DeleteSourceResponse], error) {
		return cepv1connect.NewSourceServiceClient(b.s.client, u, b.s.clientOpts()...).DeleteSource
	}); done {
		return res, err
	}
	res, err := b.s.n.Propose(ctx, meta.DeleteSource{Name: r.Name})
	if err != nil {
		return nil, mapErr(err)
	}
	out := &cepv1.DeleteSourceResponse{}
	for _, s := range res.([]meta.Source) {
		out.Sources = append(out.Sources, toSource(&s, b.s.n.keyGroups()))
		if !r.DeleteStream || !s.Managed {
			continue // an existing stream stays
		}
		err := b.s.n.js.DeleteStream(ctx, s.Stream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return nil, fmt.Errorf("%w: source %q is deleted, its stream %s is not: %v", api.ErrUnavailable, r.Name, s.Stream, err)
		default:
			out.DeletedStreams = append(out.DeletedStreams, s.Stream)
		}
	}
	slices.Sort(out.DeletedStreams)
	return out, nil
}

type clusterBackend struct{ s *Service }

// probe asks a peer's /healthz whether it serves.
func (s *Service) probe(ctx context.Context, addr string) cepv1.NodeState {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.n.apiURL(addr)+"/healthz", nil)
	if err != nil {
		return cepv1.NodeState_NODE_STATE_DEAD
	}
	res, err := s.client.Do(req)
	if err != nil {
		return cepv1.NodeState_NODE_STATE_DEAD
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return cepv1.NodeState_NODE_STATE_SUSPECT
	}
	return cepv1.NodeState_NODE_STATE_ALIVE
}

func (b clusterBackend) Status(ctx context.Context, r *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
	n := b.s.n
	m := n.Meta()
	leader := n.MetaLeader()
	out := &cepv1.GetStatusResponse{}
	peers := n.peers()
	// liveness: the gossip's and the member's /healthz, which answers at
	// once where the gossip takes seconds to notice a crash. Both say so:
	// alive, or dead; they disagree (a crash not yet noticed, a gossip
	// port blocked): suspect; only /healthz to go by (a member the gossip
	// has not seen): what it says.
	states := make([]cepv1.NodeState, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		st, seen := n.gossipState(p.ID)
		if p.ID == n.cfg.NodeID {
			states[i] = st
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = b.s.probe(ctx, p.APIAddr)
			if seen && states[i] != st {
				states[i] = cepv1.NodeState_NODE_STATE_SUSPECT
			}
		}()
	}
	wg.Wait()
	held := map[string]uint32{}
	for _, info := range m.Shards {
		for _, id := range info.Replicas {
			held[id]++
		}
	}
	sum := &cepv1.ClusterSummary{Nodes: uint32(len(peers))}
	for i, p := range peers {
		switch states[i] {
		case cepv1.NodeState_NODE_STATE_ALIVE:
			sum.Alive++
		case cepv1.NodeState_NODE_STATE_SUSPECT:
			sum.Suspect++
		default:
			sum.Dead++
		}
		nd := &cepv1.Node{Id: p.ID, Address: p.RaftAddr, ApiAddress: p.APIAddr, GossipAddress: p.GossipAddr, State: states[i],
			IsMetaLeader: p.ID == leader, Replicas: held[p.ID]}
		if x := m.Node(p.ID); x != nil {
			nd.Removing = x.Removing
		}
		out.Nodes = append(out.Nodes, nd)
	}
	commit, _ := strconv.ParseUint(n.meta.raft.Stats()["commit_index"], 10, 64)
	noLeader := 0
	for _, sh := range n.Shards() {
		if _, id := sh.Raft().LeaderWithID(); id == "" {
			noLeader++
		}
	}
	sum.MetaLeaderId, sum.MetaCommitIndex = leader, commit
	sum.KeyGroups, sum.Shards, sum.ShardsWithoutLeader = uint32(m.KeyGroups), uint32(len(m.Shards)), uint32(noLeader)
	sum.Patterns, sum.Sources, sum.NatsUrl = uint32(len(m.PatternNames())), uint32(len(m.Sources)), n.NATSURL()
	out.Summary = sum
	return out, nil
}

// gossipState is member id's state as this node's gossip sees it; ok is
// false for a member it has not seen.
func (n *Node) gossipState(id string) (cepv1.NodeState, bool) {
	if id == n.cfg.NodeID {
		return cepv1.NodeState_NODE_STATE_ALIVE, true
	}
	if n.gossip == nil {
		return 0, false
	}
	mb, ok := n.gossip.Member(id)
	if !ok {
		return 0, false
	}
	switch mb.State {
	case gossip.Alive:
		return cepv1.NodeState_NODE_STATE_ALIVE, true
	case gossip.Suspect:
		return cepv1.NodeState_NODE_STATE_SUSPECT, true
	}
	return cepv1.NodeState_NODE_STATE_DEAD, true
}

func (b clusterBackend) RemoveNode(ctx context.Context, r *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.RemoveNodeRequest]) (*connect.Response[cepv1.RemoveNodeResponse], error) {
		return cepv1connect.NewClusterServiceClient(b.s.client, u, b.s.clientOpts()...).RemoveNode
	}); done {
		return res, err
	}
	if r.NodeId == "" {
		return nil, fmt.Errorf("%w: node_id is required", api.ErrInvalidArgument)
	}
	res, err := b.s.n.Propose(ctx, meta.RemoveNode{Name: r.NodeId, Force: r.AllowFewerReplicas})
	if err != nil {
		return nil, mapErr(err)
	}
	nd := res.(*meta.Node)
	st, _ := b.s.n.gossipState(nd.ID)
	var held uint32
	for _, info := range b.s.n.Meta().Shards {
		if slices.Contains(info.Replicas, nd.ID) {
			held++
		}
	}
	return &cepv1.RemoveNodeResponse{Node: &cepv1.Node{Id: nd.ID, Address: nd.RaftAddr, ApiAddress: nd.APIAddr, GossipAddress: nd.GossipAddr,
		State: st, Removing: nd.Removing, IsMetaLeader: nd.ID == b.s.n.MetaLeader(), Replicas: held}}, nil
}

func (b clusterBackend) Shards(ctx context.Context, r *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
	if r.ClusterWide {
		return b.s.n.clusterShards(ctx)
	}
	out := &cepv1.ListShardsResponse{}
	for _, sh := range b.s.n.Shards() {
		first, last := sh.Range()
		_, leader := sh.Raft().LeaderWithID()
		stats := sh.Raft().Stats()
		commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
		s := &cepv1.Shard{Id: uint32(sh.ID()), KeyGroups: &cepv1.KeyGroupRange{First: uint32(first), Last: uint32(last)},
			LeaderNodeId: string(leader), CommitIndex: commit, LastAppliedIndex: sh.FSM().Index(), SnapshotIndex: sh.SnapshotIndex()}
		if f := sh.Raft().GetConfiguration(); f.Error() == nil {
			for _, srv := range f.Configuration().Servers {
				rep := &cepv1.Replica{NodeId: string(srv.ID), Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER}
				if srv.Suffrage != raft.Voter {
					rep.Suffrage = cepv1.Suffrage_SUFFRAGE_NONVOTER
				}
				if string(srv.ID) == b.s.n.cfg.NodeID {
					rep.AppliedIndex = s.LastAppliedIndex
				}
				s.Replicas = append(s.Replicas, rep)
			}
		}
		sh.FSM().View(func(st *shard.State, _ uint64) {
			for _, p := range st.Patterns() {
				s.Running = append(s.Running, &cepv1.PatternVersion{Name: p.Name, Version: p.Version})
				s.Patterns++
				s.PartialMatches += uint64(p.PartialMatches)
				s.BufferedEvents += uint64(p.BufferedEvents)
			}
			s.OutboxRecords = uint64(len(st.Outbox()))
			s.RestoreId = st.RestoreID()
		})
		out.Shards = append(out.Shards, s)
	}
	return out, nil
}

type matchBackend struct{ s *Service }

func (b matchBackend) Tail(ctx context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	p := b.s.n.Meta().Patterns[r.Pattern]
	if p == nil || p.Deleted {
		return fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Pattern)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{p.OutputSubject}, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch r.Start {
	case cepv1.TailStart_TAIL_START_ALL:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case cepv1.TailStart_TAIL_START_SEQUENCE:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = r.StartSequence
	}
	cons, err := b.s.n.js.OrderedConsumer(ctx, OutputStream, cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer it.Stop()
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		var head struct {
			Type, ID, Pattern, Key string
		}
		_ = json.Unmarshal(msg.Data(), &head)
		rec := &cepv1.Record{Type: head.Type, Id: head.ID, Pattern: head.Pattern, Key: head.Key, Json: msg.Data()}
		if md, err := msg.Metadata(); err == nil {
			rec.Sequence = md.Sequence.Stream
		}
		if err := send(rec); err != nil {
			return err
		}
	}
}

// validSubject checks a subject a source reads: NATS tokens, '*' and a
// final '>'.
func validSubject(s string) error {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return errors.New("empty, or holds white space")
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return errors.New("empty token")
		case t == ">" && i != len(toks)-1:
			return errors.New("'>' must be the last token")
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return fmt.Errorf("token %q mixes a wildcard with text", t)
		}
	}
	return nil
}

// coveredBy reports whether every subject matching subj matches one of the
// stream subjects have.
func coveredBy(subj string, have []string) bool {
	for _, h := range have {
		if subsetOf(strings.Split(subj, "."), strings.Split(h, ".")) {
			return true
		}
	}
	return false
}

func subsetOf(s, of []string) bool {
	for i, t := range of {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		if t != "*" && (s[i] == "*" || s[i] == ">" || s[i] != t) {
			return false
		}
		if t == "*" && s[i] == ">" {
			return false
		}
	}
	return len(s) == len(of)
}

// clusterShards lists every shard of the cluster as its leader reports it,
// asking every member (this one included) for its replicas in parallel; a
// shard without a leader any member knows of is listed from the shard map,
// with a replica that answered for it when there is one.
func (n *Node) clusterShards(ctx context.Context) (*cepv1.ListShardsResponse, error) {
	peers := n.peers()
	answers := make([][]*cepv1.Shard, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.ID == n.cfg.NodeID {
				res, _ := clusterBackend{NewService(n)}.Shards(ctx, &cepv1.ListShardsRequest{})
				answers[i] = res.GetShards()
				return
			}
			answers[i], _ = n.shardsAt(ctx, p.APIAddr) // unreachable: nothing
		}()
	}
	wg.Wait()
	best := map[uint32]*cepv1.Shard{}
	for i, p := range peers {
		for _, s := range answers[i] {
			if s.LeaderNodeId == p.ID || best[s.Id] == nil {
				best[s.Id] = s // the leader's own report wins
			}
		}
	}
	m := n.Meta()
	out := &cepv1.ListShardsResponse{}
	infos := slices.Clone(m.Shards)
	sort.Slice(infos, func(i, j int) bool { return infos[i].First < infos[j].First })
	for _, info := range infos {
		s := best[uint32(info.ID)]
		if s == nil {
			s = &cepv1.Shard{Id: uint32(info.ID), KeyGroups: &cepv1.KeyGroupRange{First: uint32(info.First), Last: uint32(info.Last)}}
			for _, id := range info.Replicas {
				s.Replicas = append(s.Replicas, &cepv1.Replica{NodeId: id, Suffrage: cepv1.Suffrage_SUFFRAGE_UNSPECIFIED})
			}
		}
		out.Shards = append(out.Shards, s)
	}
	return out, nil
}
