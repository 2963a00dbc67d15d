package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cepcluster/cep/internal/clusterversion"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa/expr"
)

type sourceBackend struct{ s *Service }

func toSource(m *meta.Source, k int) *cepv1.Source {
	return &cepv1.Source{Name: m.Name, Stream: m.Stream, Subjects: m.Subjects, KeyGroups: uint32(k), Managed: m.Managed, CreatedIndex: m.CreatedIndex, Key: m.Key, Origin: m.Origin, Limits: toSourceLimits(m.Limits),
		Fields: toSourceFields(m.Schema), Strict: m.Strict}
}

func toSourceFields(s schema.Schema) []*cepv1.SourceField {
	var out []*cepv1.SourceField
	for _, f := range s {
		out = append(out, &cepv1.SourceField{Path: f.Path, Type: f.Type, Optional: f.Optional})
	}
	return out
}

// fromSourceFields is a request's declared fields as a schema (nil when
// none), checked.
func fromSourceFields(fs []*cepv1.SourceField) (schema.Schema, error) {
	var out []schema.Field
	for _, f := range fs {
		out = append(out, schema.Field{Path: f.GetPath(), Type: f.GetType(), Optional: f.GetOptional()})
	}
	return schema.FromFields(out)
}

func toSourceLimits(l meta.SourceLimits) *cepv1.SourceLimits {
	if l == (meta.SourceLimits{}) {
		return nil
	}
	out := &cepv1.SourceLimits{MaxBytes: l.MaxBytes, MaxMsgs: l.MaxMsgs}
	if l.MaxAge > 0 {
		out.MaxAge = durationpb.New(l.MaxAge)
	}
	return out
}

func fromSourceLimits(l *cepv1.SourceLimits) (meta.SourceLimits, error) {
	out := meta.SourceLimits{MaxBytes: l.GetMaxBytes(), MaxMsgs: l.GetMaxMsgs()}
	if d := l.GetMaxAge(); d != nil {
		if err := d.CheckValid(); err != nil {
			return out, err
		}
		out.MaxAge = d.AsDuration()
	}
	return out, out.Valid()
}

// setStreamLimits gives a stream the cluster created for a source the
// source's retention limits, when it does not have them already (a
// stream kept from a source deleted before, or created by the call
// before, which knows no limits). Without limits the stream is left as
// it is, so limits set with `nats stream edit` survive; with them, the
// source's win.
func setStreamLimits(ctx context.Context, js jetstream.JetStream, stream string, l meta.SourceLimits) error {
	if l == (meta.SourceLimits{}) {
		return nil
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	want := have
	applyLimits(&want, l)
	if want.MaxAge == have.MaxAge && want.MaxBytes == have.MaxBytes && want.MaxMsgs == have.MaxMsgs {
		return nil
	}
	_, err = js.UpdateStream(ctx, want)
	return err
}

// applyLimits sets cfg's limits to l's, a zero limit meaning none.
func applyLimits(cfg *jetstream.StreamConfig, l meta.SourceLimits) {
	cfg.MaxAge, cfg.MaxBytes, cfg.MaxMsgs = l.MaxAge, l.MaxBytes, l.MaxMsgs
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1 // JetStream's "unlimited"
	}
	if cfg.MaxMsgs == 0 {
		cfg.MaxMsgs = -1
	}
}

func (b sourceBackend) Create(ctx context.Context, r *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Sources, cepv1connect.SourceServiceClient.CreateSource); done {
		return res, err
	}
	if err := checkSource(&meta.Source{Name: r.Name, Stream: r.Stream, Subjects: r.Subjects, Key: r.Key}); err != nil {
		return nil, err
	}
	limits, err := fromSourceLimits(r.Limits)
	if err != nil {
		return nil, fmt.Errorf("%w: source %q: limits: %v", api.ErrInvalidArgument, r.Name, err)
	}
	if r.Stream != "" && limits != (meta.SourceLimits{}) {
		return nil, fmt.Errorf("%w: source %q: retention limits apply to a stream the cluster creates, not to the existing stream %q (set them with nats stream edit)", api.ErrInvalidArgument, r.Name, r.Stream)
	}
	sch, err := fromSourceFields(r.Fields)
	if err != nil {
		return nil, fmt.Errorf("%w: source %q: %v", api.ErrInvalidArgument, r.Name, err)
	}
	if r.Strict && len(sch) == 0 {
		return nil, fmt.Errorf("%w: source %q: strict needs the fields its events declare (cepctl source create --schema FILE)", api.ErrInvalidArgument, r.Name)
	}
	if r.Strict {
		if err := b.s.n.awaitVersion(ctx, clusterversion.Strict, 5*time.Second); err != nil {
			return nil, fmt.Errorf("%w: source %q is strict: %v", api.ErrFailedPrecondition, r.Name, err)
		}
	}
	if err := checkRequestID(r.RequestId); err != nil {
		return nil, err
	}
	k := b.s.n.keyGroups()
	if res, done, err := b.s.n.requestDone(r.RequestId); done {
		// a retry: answered as the first time, no stream created again
		if err != nil {
			return nil, err
		}
		return &cepv1.CreateSourceResponse{Source: toSource(res.(*meta.Source), k)}, nil
	}
	if m := b.s.n.Meta(); m.Sources[r.Name] != nil {
		return nil, fmt.Errorf("%w: source %q", api.ErrAlreadyExists, r.Name)
	}
	var sm *meta.Source
	switch {
	case r.Stream != "":
		// an existing stream, read whole or through the given subjects
		st, err := b.s.n.JetStream().Stream(ctx, r.Stream)
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
		cfg := jetstream.StreamConfig{Name: name, Subjects: r.Subjects, Storage: jetstream.FileStorage}
		applyLimits(&cfg, limits)
		_, err := b.s.n.JetStream().CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = setStreamLimits(ctx, b.s.n.JetStream(), name, limits)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: create stream %s for %s: %v", api.ErrFailedPrecondition, name, strings.Join(r.Subjects, " "), err)
		}
		sm = &meta.Source{Name: r.Name, Stream: name, Subjects: r.Subjects, Key: r.Key, Managed: true, Unpartitioned: true, Limits: limits}
	default:
		stream, err := EnsureSourceStream(ctx, b.s.n.JetStream(), r.Name, k)
		if err == nil {
			err = setStreamLimits(ctx, b.s.n.JetStream(), stream, limits)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: create stream: %v", api.ErrUnavailable, err)
		}
		sm = &meta.Source{Name: r.Name, Stream: stream, Subjects: []string{keygroup.SourceWildcard(r.Name)}, Key: r.Key, Managed: true, Limits: limits}
	}
	// the identity of the stream its positions will count in
	created, err := streamCreated(ctx, b.s.n.JetStream(), sm.Stream)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", api.ErrUnavailable, sm.Stream, err)
	}
	sm.StreamCreated = created
	sm.Schema, sm.Strict = sch, r.Strict
	res, err := b.s.n.proposeRequest(ctx, r.RequestId, meta.PutSource{Source: sm})
	if err != nil {
		return nil, mapErr(err)
	}
	return &cepv1.CreateSourceResponse{Source: toSource(res.(*meta.Source), k)}, nil
}

func (b sourceBackend) List(ctx context.Context, r *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Sources, cepv1connect.SourceServiceClient.ListSources); done {
		return res, err
	}
	m, err := b.s.n.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	out := &cepv1.ListSourcesResponse{}
	for _, name := range m.SourceNames() {
		out.Sources = append(out.Sources, toSource(m.Sources[name], m.KeyGroups))
	}
	return out, nil
}

func (b sourceBackend) Get(ctx context.Context, r *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Sources, cepv1connect.SourceServiceClient.GetSource); done {
		return res, err
	}
	m, err := b.s.n.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	src := m.Sources[r.Name]
	if src == nil {
		return nil, fmt.Errorf("%w: source %q", api.ErrNotFound, r.Name)
	}
	return &cepv1.GetSourceResponse{Source: toSource(src, m.KeyGroups)}, nil
}

func (b sourceBackend) Delete(ctx context.Context, r *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Sources, cepv1connect.SourceServiceClient.DeleteSource); done {
		return res, err
	}
	res, err := b.s.n.proposeRequest(ctx, r.RequestId, meta.DeleteSource{Name: r.Name})
	if err != nil {
		return nil, mapErr(err)
	}
	out := &cepv1.DeleteSourceResponse{}
	for _, s := range res.([]meta.Source) {
		out.Sources = append(out.Sources, toSource(&s, b.s.n.keyGroups()))
		if !r.DeleteStream || !s.Managed {
			continue // an existing stream stays
		}
		err := jsAgain(ctx, func() error { return b.s.n.JetStream().DeleteStream(ctx, s.Stream) })
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

// checkSource checks a source as a create and a restore propose it: its
// name (a derived source's is its origin's and the key's hash), stream
// name (empty: one the cluster names), subjects, filter and key
// expression. A source on a system subject ($JS.API.>, $SYS...) would have
// a stream take the server's own traffic.
func checkSource(s *meta.Source) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: source %q: %s", api.ErrInvalidArgument, s.Name, fmt.Sprintf(format, a...))
	}
	if s.Origin == "" {
		if err := validSourceName(s.Name); err != nil {
			return fmt.Errorf("%w: %v", api.ErrInvalidArgument, err)
		}
	} else {
		hash, ok := strings.CutPrefix(s.Name, s.Origin+".k")
		if err := validSourceName(s.Origin); err != nil || !ok || !derivedHashRE.MatchString(hash) {
			return bad("a derived source is named <origin>.k<8 hex digits>, of a valid origin")
		}
	}
	if s.Stream != "" && (len(s.Stream) > 255 || strings.ContainsAny(s.Stream, ".*>/\\ \t\r\n") || strings.HasPrefix(s.Stream, "$")) {
		return bad("stream name %q: no '.', '*', '>', '/', '\\', white space or leading '$'", s.Stream)
	}
	subjects := slices.Concat(s.Subjects, s.Filter)
	if len(subjects) == 0 && s.Stream == "" {
		subjects = []string{keygroup.SourceWildcard(s.Name)} // what a create gives it
	}
	for _, subj := range subjects {
		if err := keygroup.CheckSubjectBounds(subj); err != nil {
			return bad("field subjects: %v", err)
		}
		if err := validSubject(subj); err != nil {
			return bad("subject %q: %v", subj, err)
		}
		if first, _, _ := strings.Cut(subj, "."); strings.HasPrefix(first, "$") || first == "*" || first == ">" {
			return bad("subject %q would take the server's own subjects ($JS, $SYS, ...)", subj)
		}
		for _, own := range internalSubjects {
			if subjectsOverlap(subj, own) {
				return bad("subject %q overlaps %s, the cluster's own subjects", subj, own)
			}
		}
	}
	if s.Key != "" {
		c, err := expr.NewCompiler()
		if err == nil {
			_, err = c.Value(s.Key)
		}
		if err != nil {
			return fmt.Errorf("%w: key: %v", api.ErrInvalidArgument, err)
		}
	}
	return nil
}

var derivedHashRE = regexp.MustCompile(`^[0-9a-f]{8}$`)

// internalSubjects are subjects a source's stream must not take: the
// inboxes of the node's and the publishers' replies (a stream storing
// them would swallow the JetStream API's answers), and the cluster's
// output, dead-letter and clock subjects.
var internalSubjects = []string{"_INBOX.>", nodeInboxPrefix + ".>", "cep.>"}

// subjectsOverlap reports whether some subject matches both a and b
// (subjects with wildcards).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		if i == len(at) || i == len(bt) {
			return len(at) == len(bt)
		}
		if at[i] == ">" || bt[i] == ">" {
			return true
		}
		if at[i] != "*" && bt[i] != "*" && at[i] != bt[i] {
			return false
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

// maxSample bounds SampleSource's events, and maxSampleBytes their
// bytes: a thousand events of a megabyte would be an answer no client
// takes.
const (
	maxSample      = 1000
	maxSampleBytes = 4 << 20
)

// Sample returns the last events the source's stream stores, oldest
// first: what cepctl source infer-schema reads the fields of. A derived
// source's events are its origin's, re-keyed.
func (b sourceBackend) Sample(ctx context.Context, r *cepv1.SampleSourceRequest) (*cepv1.SampleSourceResponse, error) {
	limit := int(r.Limit)
	switch {
	case limit == 0:
		limit = 100
	case limit > maxSample:
		return nil, fmt.Errorf("%w: limit %d: at most %d", api.ErrInvalidArgument, limit, maxSample)
	}
	src := b.s.n.Meta().Sources[r.Name]
	if src == nil {
		return nil, fmt.Errorf("%w: source %q", api.ErrNotFound, r.Name)
	}
	st, err := b.s.n.JetStream().Stream(ctx, src.Stream)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %v", api.ErrUnavailable, src.Stream, err)
	}
	state := st.CachedInfo().State
	out := &cepv1.SampleSourceResponse{}
	size := 0
	// backwards from the last, skipping deleted messages, at most a few
	// times the limit of look-ups
	for seq, tries := state.LastSeq, 0; seq >= state.FirstSeq && seq > 0 && len(out.Events) < limit && tries < 4*limit; seq, tries = seq-1, tries+1 {
		msg, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %v", api.ErrUnavailable, src.Stream, err)
		}
		if len(src.Filter) > 0 && !slices.ContainsFunc(src.Filter, func(f string) bool { return coveredBy(msg.Subject, []string{f}) }) {
			continue
		}
		if size += len(msg.Data); size > maxSampleBytes && len(out.Events) > 0 {
			break
		}
		out.Events = append(out.Events, msg.Data)
	}
	slices.Reverse(out.Events)
	return out, nil
}
