package keygroup

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeyToken(t *testing.T) {
	for _, tc := range []struct{ key, token string }{
		{"", "%"},
		{"user-42", "user-42"},
		{"A_z-09", "A_z-09"},
		{"a.b", "a%2Eb"},
		{"*", "%2A"},
		{">", "%3E"},
		{"a b", "a%20b"},
		{"100%", "100%25"},
		{"café", "caf%C3%A9"},
		{"日", "%E6%97%A5"},
		{"tab\there", "tab%09here"},
		{"$SYS", "%24SYS"},
		{"\x00\xff", "%00%FF"}, // not UTF-8: bytes are encoded one by one
		{"%", "%25"},
	} {
		if got := KeyToken(tc.key); got != tc.token {
			t.Errorf("KeyToken(%q) = %q, want %q", tc.key, got, tc.token)
		}
		if got := string(AppendKeyToken([]byte("x."), tc.key)); got != "x."+tc.token {
			t.Errorf("AppendKeyToken(%q) = %q", tc.key, got)
		}
		back, err := ParseToken(tc.token)
		if err != nil || back != tc.key {
			t.Errorf("ParseToken(%q) = %q, %v; want %q", tc.token, back, err, tc.key)
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, tok := range []string{
		"", "a.b", "a b", "*", ">", "%%", "%2", "%G0", "%2e", "ab%", "%41", "%5F", "%2D", "é",
	} {
		if k, err := ParseToken(tok); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) = %q, %v; want ErrBadToken", tok, k, err)
		}
	}
}

// validToken is the NATS rule for one literal subject token.
func validToken(tok string) bool {
	if tok == "" || tok == "*" || tok == ">" {
		return false
	}
	for _, r := range tok {
		if r == '.' || r <= ' ' || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func FuzzKeyToken(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "café", "%25", "\xff", "*>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		tok := KeyToken(key)
		if !validToken(tok) {
			t.Fatalf("KeyToken(%q) = %q is not a valid NATS token", key, tok)
		}
		if strings.Trim(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-%") != "" {
			t.Fatalf("KeyToken(%q) = %q has a byte outside [A-Za-z0-9_%%-]", key, tok)
		}
		back, err := ParseToken(tok)
		if err != nil || back != key {
			t.Fatalf("ParseToken(KeyToken(%q)) = %q, %v", key, back, err)
		}
		// Canonical: a token that parses is the encoding of its key.
		if k, err := ParseToken(key); err == nil && KeyToken(k) != key {
			t.Fatalf("ParseToken(%q) = %q, but KeyToken of that is %q", key, k, KeyToken(k))
		}
	})
}

func BenchmarkKeyToken(b *testing.B) {
	var buf []byte
	for b.Loop() {
		buf = AppendKeyToken(buf[:0], "user.42@example.com")
	}
}
