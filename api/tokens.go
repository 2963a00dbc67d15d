package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Tokens are the bearer tokens a server accepts, each with its role. Only
// their hashes are kept (and the first admin token, for a node that must
// present one to its peers when the cluster has no secret); none is ever
// part of an error or a log line. The zero value has no token. A Tokens is
// not changed once a server uses it, so safe for concurrent use.
type Tokens struct {
	list  []tokenEntry
	admin string
}

type tokenEntry struct {
	hash [sha256.Size]byte // hashed so that comparison time does not depend on length
	role Role
	line int // where the file had it (0: not from a file)
}

// Add adds token with role r. An empty token, or one with spaces, or one
// already there, is refused.
func (t *Tokens) Add(r Role, token string) error {
	return t.add(r, token, 0)
}

func (t *Tokens) add(r Role, token string, line int) error {
	if token == "" {
		return errors.New("empty token")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return errors.New("token with white space")
	}
	if r == RoleNone || r > RoleNode {
		return fmt.Errorf("no such role (%d)", r)
	}
	h := sha256.Sum256([]byte(token))
	for _, e := range t.list {
		if e.hash == h {
			if e.line > 0 {
				return fmt.Errorf("the token of line %d again", e.line)
			}
			return errors.New("a token given twice")
		}
	}
	t.list = append(t.list, tokenEntry{hash: h, role: r, line: line})
	if r == RoleAdmin && t.admin == "" {
		t.admin = token
	}
	return nil
}

// Clone returns a copy of t to add to (a nil t: no tokens).
func (t *Tokens) Clone() *Tokens {
	c := &Tokens{}
	if t != nil {
		c.list = append(c.list, t.list...)
		c.admin = t.admin
	}
	return c
}

// Users is how many tokens of user roles (not RoleNode) t has. Without
// any, a server is open: Authorize lets every call through as RoleAdmin.
func (t *Tokens) Users() int {
	if t == nil {
		return 0
	}
	n := 0
	for _, e := range t.list {
		if e.role != RoleNode {
			n++
		}
	}
	return n
}

// AdminToken returns the first admin token added, or "".
func (t *Tokens) AdminToken() string {
	if t == nil {
		return ""
	}
	return t.admin
}

// Role returns the role of token, RoleNone when t does not have it. Every
// token is compared, each in constant time.
func (t *Tokens) Role(token string) Role {
	if t == nil {
		return RoleNone
	}
	h := sha256.Sum256([]byte(token))
	role := RoleNone
	for _, e := range t.list {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			role = e.role
		}
	}
	return role
}

// ReadTokenFile reads a token file (ParseTokens).
func ReadTokenFile(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	return ParseTokens(path, f)
}

// ParseTokens reads a token file, named name in errors: one token a line
// as "ROLE TOKEN", ROLE one of admin, operator and reader, TOKEN any
// printable text without white space (say 32 random bytes in hex:
// openssl rand -hex 32); blank lines and lines starting with # are
// skipped. An error names the file and line, never the token.
func ParseTokens(name string, r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want ROLE TOKEN, found %d fields", name, line, len(fields))
		}
		role, err := ParseRole(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if err := t.add(role, fields[1], line); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	if len(t.list) == 0 {
		return nil, fmt.Errorf("%s: no token in it", name)
	}
	return t, nil
}
