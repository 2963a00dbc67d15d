package keygroup

import (
	"strings"
	"testing"
)

// TokenLen is the length of the token KeyToken builds, for keys of every
// kind of byte.
func TestTokenLenIsKeyTokenLen(t *testing.T) {
	for _, key := range []string{"", "a", "user-42", "a.b", "café", "*>. \t%", strings.Repeat("é", 300), "\x00\xff"} {
		if got, want := TokenLen(key), len(KeyToken(key)); got != want {
			t.Errorf("TokenLen(%q) = %d, len(KeyToken) = %d", key, got, want)
		}
	}
}

// A key's token is refused exactly past MaxTokenBytes, counting the
// escapes (a '.' takes three bytes), and the error names the bound.
func TestCheckKeyTokenAtTheBound(t *testing.T) {
	cases := []struct {
		key string
		ok  bool
	}{
		{strings.Repeat("k", MaxTokenBytes), true},
		{strings.Repeat("k", MaxTokenBytes+1), false},
		{strings.Repeat(".", MaxTokenBytes/3), true},
		{strings.Repeat(".", MaxTokenBytes/3+1), false},
		{strings.Repeat("k", 5000), false},
		{"", true},
	}
	for _, c := range cases {
		err := CheckKeyToken(c.key)
		if (err == nil) != c.ok {
			t.Errorf("key of %d bytes (token %d): err = %v, want ok = %v", len(c.key), TokenLen(c.key), err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "MaxTokenBytes = 255") {
			t.Errorf("error does not name the bound: %v", err)
		}
	}
}

// A subject is refused past MaxSubjectBytes in all, or with one token
// past MaxTokenBytes; the error names the bound broken.
func TestCheckSubjectBounds(t *testing.T) {
	tok := strings.Repeat("t", MaxTokenBytes)
	long := strings.TrimSuffix(strings.Repeat(tok+".", 4), ".") // 4*255+3 = 1023
	cases := []struct {
		subject, bound string
	}{
		{"cep.out.x", ""},
		{tok, ""},
		{long, ""},
		{long + ".a", "MaxSubjectBytes = 1024"},
		{"cep.out." + tok + "t", "MaxTokenBytes = 255"},
		{strings.Repeat("a", 5000), "MaxSubjectBytes"},
	}
	for _, c := range cases {
		err := CheckSubjectBounds(c.subject)
		switch {
		case c.bound == "" && err != nil:
			t.Errorf("subject of %d bytes refused: %v", len(c.subject), err)
		case c.bound != "" && (err == nil || !strings.Contains(err.Error(), c.bound)):
			t.Errorf("subject of %d bytes: err = %v, want one naming %s", len(c.subject), err, c.bound)
		}
	}
}
