package keygroup

import (
	"fmt"
	"strings"
)

// The bound on a subject the cluster builds from data or a request (a
// key's token, a source's or dead-letter subject, an output subject, a
// tail's filter). A NATS server closes a connection that sends a control
// line over its max_control_line (4,096 bytes by default, the subject,
// reply inbox and sizes together), and the client does not reconnect a
// connection the server closed: one subject too long cuts a node off NATS
// for good. The bounds leave room for the rest of the line (a reply inbox,
// a JetStream API prefix, a stream and consumer name).
const (
	// MaxSubjectBytes bounds a whole subject.
	MaxSubjectBytes = 1024
	// MaxTokenBytes bounds one token of it: a key's token (KeyToken) in a
	// derived source's subject, one token of a source's subjects.
	MaxTokenBytes = 255
)

// CheckSubjectBounds reports a subject longer than MaxSubjectBytes or
// with a token longer than MaxTokenBytes, naming the bound; it checks
// nothing else.
func CheckSubjectBounds(subject string) error {
	if len(subject) > MaxSubjectBytes {
		return fmt.Errorf("%.40q… is %d bytes, over the bound MaxSubjectBytes = %d (see docs/limits.md)", subject, len(subject), MaxSubjectBytes)
	}
	for tok := range strings.SplitSeq(subject, ".") {
		if len(tok) > MaxTokenBytes {
			return fmt.Errorf("token %.40q… is %d bytes, over the bound MaxTokenBytes = %d (see docs/limits.md)", tok, len(tok), MaxTokenBytes)
		}
	}
	return nil
}

// CheckKeyToken reports a key whose token (KeyToken) is longer than
// MaxTokenBytes: it cannot be a subject token the cluster publishes on.
func CheckKeyToken(key string) error {
	if n := TokenLen(key); n > MaxTokenBytes {
		return fmt.Errorf("the key %.40q… takes %d bytes as a subject token, over the bound MaxTokenBytes = %d (see docs/limits.md)", key, n, MaxTokenBytes)
	}
	return nil
}

// TokenLen is len(KeyToken(key)), without building the token.
func TokenLen(key string) int {
	if key == "" {
		return len(EmptyKey)
	}
	n := len(key)
	for i := 0; i < len(key); i++ {
		if !plain(key[i]) {
			n += 2
		}
	}
	return n
}
