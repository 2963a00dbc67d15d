package meta

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Requested is a client's change (Entry, a command's Encode) sent with
// the request id its client chose: applied the first time the id is met,
// and answered with that first result, without applying anything, every
// later time — so a client retrying after a timeout or a leader change
// cannot apply its change twice. (A node of a release before this command
// rejects it as unknown: it is proposed only once every member runs this
// release, see cluster/requestid.go.)
type Requested struct {
	ID    string          `json:"requestId,omitempty"`
	Entry json.RawMessage `json:"entry,omitempty"`
}

func (Requested) Kind() string { return "requested" }

func init() { register((*Meta).applyRequested) }

// MaxRequests is how many request ids the metadata remembers: the oldest
// is forgotten (in log order, the same on every replica) when a newer one
// would be one too many.
const MaxRequests = 1024

// MaxRequestID is the longest request id, in bytes.
const MaxRequestID = 128

// Request is a request id the metadata remembers, with what its change
// returned.
type Request struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"` // where it was applied
	Kind  string `json:"kind"`  // the change's
	// Result is the change's object as JSON (a pattern without its
	// document, which the metadata holds already), or the refusal: Refused
	// names the kind of *Error (errorKinds), Error its message.
	Result  json.RawMessage `json:"result,omitempty"`
	Refused string          `json:"refused,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// NewRequested wraps c with request id id.
func NewRequested(id string, c Command) (Requested, error) {
	b, err := Encode(c)
	if err != nil {
		return Requested{}, err
	}
	return Requested{ID: id, Entry: b}, nil
}

// requestResults are the changes a request id may carry, with how their
// results decode: the clients' changes, not the cluster's own.
var requestResults = map[string]func(json.RawMessage) (any, error){
	PutPattern{}.Kind():       decodeResult[*Pattern],
	DeletePattern{}.Kind():    decodeResult[*Pattern],
	PutSource{}.Kind():        decodeResult[*Source],
	DeleteSource{}.Kind():     decodeResult[[]Source],
	AddSavepoint{}.Kind():     decodeResult[*Savepoint],
	DeleteSavepoint{}.Kind():  decodeResult[*Savepoint],
	RestoreSavepoint{}.Kind(): decodeResult[*Restore],
}

func decodeResult[T any](b json.RawMessage) (any, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// errorKinds name the kinds of *Error in a Request.
var errorKinds = map[string]error{
	"exists": ErrExists, "notFound": ErrNotFound, "conflict": ErrConflict,
	"invalid": ErrInvalid, "precondition": ErrPrecondition,
}

func (m *Meta) applyRequested(idx uint64, c Requested) (any, error) {
	if c.ID == "" || len(c.ID) > MaxRequestID {
		return nil, refused(ErrInvalid, "request id %q: 1 to %d bytes", c.ID, MaxRequestID)
	}
	inner, err := Decode(c.Entry)
	if err != nil {
		return nil, refused(ErrInvalid, "request %q: %v", c.ID, err)
	}
	if _, ok := requestResults[inner.Kind()]; !ok {
		return nil, refused(ErrInvalid, "request %q: a %s change takes no request id", c.ID, inner.Kind())
	}
	if r := m.Request(c.ID); r != nil {
		if r.Kind != inner.Kind() {
			return nil, refused(ErrInvalid, "request id %q was used for a %s change, not this %s", c.ID, r.Kind, inner.Kind())
		}
		return m.requestResult(r)
	}
	obj, err := m.Apply(idx, inner)
	r := Request{ID: c.ID, Index: idx, Kind: inner.Kind()}
	var e *Error
	switch {
	case errors.As(err, &e):
		for name, kind := range errorKinds {
			if e.Kind == kind {
				r.Refused = name
			}
		}
		r.Error = e.Msg
	case err != nil:
		r.Error = err.Error()
	default:
		if p, ok := obj.(*Pattern); ok {
			cp := *p
			cp.Spec = ""
			obj = &cp
		}
		if r.Result, err = json.Marshal(obj); err != nil {
			return nil, fmt.Errorf("cluster: the result of request %q: %w", c.ID, err)
		}
	}
	m.Requests = append(m.Requests, r)
	if len(m.Requests) > MaxRequests {
		m.Requests = append(m.Requests[:0:0], m.Requests[len(m.Requests)-MaxRequests:]...)
	}
	return m.requestResult(&m.Requests[len(m.Requests)-1])
}

// Request is the remembered request of id, nil if none.
func (m *Meta) Request(id string) *Request {
	for i := range m.Requests {
		if m.Requests[i].ID == id {
			return &m.Requests[i]
		}
	}
	return nil
}

// RequestResult is what the change of request r returned when it was
// applied: the object (a pattern with its document when the metadata
// still holds that version) or the refusal.
func (m *Meta) RequestResult(r *Request) (any, error) { return m.requestResult(r) }

func (m *Meta) requestResult(r *Request) (any, error) {
	if r.Error != "" {
		if kind, ok := errorKinds[r.Refused]; ok {
			return nil, &Error{Kind: kind, Msg: r.Error}
		}
		return nil, errors.New(r.Error)
	}
	obj, err := requestResults[r.Kind](r.Result)
	if err != nil {
		return nil, fmt.Errorf("cluster: the result of request %q does not decode: %w", r.ID, err)
	}
	if p, ok := obj.(*Pattern); ok && p != nil {
		if cur := m.Patterns[p.Name]; cur != nil && cur.Version == p.Version && cur.Deleted == p.Deleted {
			p.Spec = cur.Spec
		}
	}
	return obj, nil
}
