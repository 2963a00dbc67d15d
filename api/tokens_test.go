package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	const file = `# the cluster's tokens
admin   a-0123456789

	operator	o-0123456789   
  # indented comment
reader r-0123456789
reader r-second
`
	tk, err := ParseTokens("tokens", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Role{
		"a-0123456789": RoleAdmin, "o-0123456789": RoleOperator, "r-0123456789": RoleReader, "r-second": RoleReader,
		"a-012345678": RoleNone, "": RoleNone, "admin": RoleNone, "a-0123456789 ": RoleNone,
	} {
		if got := tk.Role(token); got != want {
			t.Errorf("Role(%q) = %s, want %s", token, got, want)
		}
	}
	if tk.Users() != 4 || tk.AdminToken() != "a-0123456789" {
		t.Errorf("Users %d, AdminToken %q", tk.Users(), tk.AdminToken())
	}
}

// A bad line is refused with the file and line named, and never the token.
func TestParseTokensBadLines(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"admin\n", "f:1: want ROLE TOKEN, found 1 fields"},
		{"# x\nadmin tok-secret extra\n", "f:2: want ROLE TOKEN, found 3 fields"},
		{"root tok-secret\n", `f:1: unknown role "root" (want admin, operator or reader)`},
		{"node tok-secret\n", `f:1: unknown role "node"`},
		{"Admin tok-secret\n", `f:1: unknown role "Admin"`},
		{"reader tok-secret\n\nadmin tok-secret\n", "f:3: the token of line 1 again"},
		{"", "f: no token in it"},
		{"# only comments\n\n", "f: no token in it"},
		{"reader " + strings.Repeat("x", 70<<10) + "\n", "f:1: bufio.Scanner: token too long"},
	} {
		_, err := ParseTokens("f", strings.NewReader(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file[:min(len(tc.file), 40)], err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "tok-secret") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%q: the error shows the token: %v", tc.file, err)
		}
	}
}

func TestReadTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if _, err := ReadTokenFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("reader r\nbad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTokenFile(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: ") {
		t.Errorf("bad line: %v", err)
	}
}

func TestTokensAdd(t *testing.T) {
	var tk Tokens
	for _, tc := range []struct {
		role  Role
		token string
		ok    bool
	}{
		{RoleAdmin, "a", true}, {RoleNode, "n", true}, {RoleReader, "a", false}, {RoleReader, "", false},
		{RoleReader, "a b", false}, {RoleNone, "x", false}, {Role(9), "y", false},
	} {
		if err := tk.Add(tc.role, tc.token); (err == nil) != tc.ok {
			t.Errorf("Add(%s, %q): %v", tc.role, tc.token, err)
		}
	}
	if tk.Users() != 1 || tk.Role("n") != RoleNode {
		t.Errorf("Users %d, Role(n) %s", tk.Users(), tk.Role("n"))
	}
	c := tk.Clone()
	if err := c.Add(RoleReader, "r"); err != nil {
		t.Fatal(err)
	}
	if tk.Role("r") != RoleNone || c.Role("r") != RoleReader {
		t.Error("Clone shares its tokens")
	}
}
