package keygroup

import (
	"errors"
	"fmt"
)

// EmptyKey is the token of the empty key.
const EmptyKey = "%"

// ErrBadToken is wrapped by the errors of ParseToken.
var ErrBadToken = errors.New("keygroup: bad token")

const upperHex = "0123456789ABCDEF"

// plain reports whether b stands for itself in a token.
func plain(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}

// KeyToken encodes key as one NATS subject token (see the package
// documentation). The result is never empty and contains only the bytes
// [A-Za-z0-9_%-].
func KeyToken(key string) string {
	if key == "" {
		return EmptyKey
	}
	n := 0
	for i := 0; i < len(key); i++ {
		if !plain(key[i]) {
			n++
		}
	}
	if n == 0 {
		return key
	}
	return string(AppendKeyToken(make([]byte, 0, len(key)+2*n), key))
}

// AppendKeyToken appends KeyToken(key) to b, for callers building subjects
// without allocating.
func AppendKeyToken(b []byte, key string) []byte {
	if key == "" {
		return append(b, EmptyKey...)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&0xF])
	}
	return b
}

// ParseToken returns the key that KeyToken encoded as token. It rejects any
// token KeyToken does not produce: an empty one, a byte other than
// [A-Za-z0-9_%-], a '%' not followed by two upper-case hexadecimal digits,
// or an escape of a byte that is kept as it is. The errors wrap ErrBadToken.
func ParseToken(token string) (string, error) {
	switch token {
	case "":
		return "", fmt.Errorf("%w: empty", ErrBadToken)
	case EmptyKey:
		return "", nil
	}
	b := make([]byte, 0, len(token))
	for i := 0; i < len(token); i++ {
		c := token[i]
		if plain(c) {
			b = append(b, c)
			continue
		}
		if c != '%' {
			return "", fmt.Errorf("%w: %q: byte %q at %d is neither kept nor escaped", ErrBadToken, token, c, i)
		}
		if i+2 >= len(token) {
			return "", fmt.Errorf("%w: %q: %% at %d needs two hex digits", ErrBadToken, token, i)
		}
		hi, ok1 := unhex(token[i+1])
		lo, ok2 := unhex(token[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: %q: %% at %d needs two upper-case hex digits", ErrBadToken, token, i)
		}
		v := hi<<4 | lo
		if plain(v) {
			return "", fmt.Errorf("%w: %q: %q is escaped at %d but is kept as it is", ErrBadToken, token, v, i)
		}
		b = append(b, v)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
