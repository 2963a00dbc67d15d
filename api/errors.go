package api

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"
)

// Sentinel errors that backends wrap (fmt.Errorf("pattern %q: %w", name,
// ErrNotFound)) to choose the RPC status code a client sees. The wrapping
// text is the message the client gets, so it should say what was wrong in
// terms the client used.
var (
	// ErrNotFound: the named pattern, source, savepoint or stream does not exist.
	ErrNotFound = errors.New("api: not found")
	// ErrAlreadyExists: the name is taken.
	ErrAlreadyExists = errors.New("api: already exists")
	// ErrInvalidArgument: the request is wrong whatever the cluster's state
	// (a bad spec, name or target).
	ErrInvalidArgument = errors.New("api: invalid argument")
	// ErrFailedPrecondition: the request is well-formed but the cluster is not
	// in a state to carry it out (a pattern being deleted, mismatched key
	// group count); retrying as is will not help.
	ErrFailedPrecondition = errors.New("api: failed precondition")
	// ErrUnavailable: transient (no leader, a shard out of reach, shutting
	// down); the client may retry.
	ErrUnavailable = errors.New("api: unavailable")
	// ErrDataLoss: stored data the request names is damaged (a savepoint
	// file whose checksum does not match).
	ErrDataLoss = errors.New("api: data loss")
	// ErrResourceExhausted: a limit was reached (too many streams, a
	// client too slow to take what it asked for).
	ErrResourceExhausted = errors.New("api: resource exhausted")
)

// invalidArgument is implemented by typed validation errors (such as a
// backend's wrapper around a pattern's parse error) that want the
// InvalidArgument code without wrapping ErrInvalidArgument.
type invalidArgument interface {
	InvalidArgument() bool
}

// toConnectError maps a backend error to the error a handler returns. It is
// the only place where errors become RPC codes:
//
//	nil                                   → nil
//	a *connect.Error in the chain         → that error (for example a failed Send)
//	ErrNotFound                           → NotFound
//	ErrAlreadyExists                      → AlreadyExists
//	ErrInvalidArgument, InvalidArgument() → InvalidArgument
//	ErrFailedPrecondition                 → FailedPrecondition
//	ErrUnavailable                        → Unavailable
//	ErrDataLoss                           → DataLoss
//	ErrResourceExhausted                  → ResourceExhausted
//	context.Canceled                      → Canceled
//	context.DeadlineExceeded              → DeadlineExceeded
//	anything else                         → Internal
//
// Sentinels are checked before context errors, so a backend's own choice
// wins when an error wraps both. The message is err's text in every case.
func toConnectError(err error) error {
	if err == nil {
		return nil
	}
	if ce := new(connect.Error); errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(codeOf(err), err)
}

func codeOf(err error) connect.Code {
	switch {
	case errors.Is(err, ErrNotFound):
		return connect.CodeNotFound
	case errors.Is(err, ErrAlreadyExists):
		return connect.CodeAlreadyExists
	case errors.Is(err, ErrInvalidArgument):
		return connect.CodeInvalidArgument
	case errors.Is(err, ErrFailedPrecondition):
		return connect.CodeFailedPrecondition
	case errors.Is(err, ErrUnavailable):
		return connect.CodeUnavailable
	case errors.Is(err, ErrDataLoss):
		return connect.CodeDataLoss
	case errors.Is(err, ErrResourceExhausted):
		return connect.CodeResourceExhausted
	}
	if ia := invalidArgument(nil); errors.As(err, &ia) && ia.InvalidArgument() {
		return connect.CodeInvalidArgument
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	}
	return connect.CodeInternal
}

// Detail is err's text without the sentinel's words it starts with ("api:
// invalid argument: "), for a message given again under another code or
// as a field of its own: a client reads the code once, not twice.
func Detail(err error) string {
	msg := err.Error()
	for _, s := range []error{ErrNotFound, ErrAlreadyExists, ErrInvalidArgument, ErrFailedPrecondition, ErrUnavailable, ErrDataLoss, ErrResourceExhausted} {
		if p := s.Error() + ": "; errors.Is(err, s) && strings.HasPrefix(msg, p) {
			return msg[len(p):]
		}
	}
	return msg
}
