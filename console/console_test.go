package console_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/console"
)

func tokens(t *testing.T) *api.Tokens {
	t.Helper()
	tk, err := api.ParseTokens("tokens", strings.NewReader("admin A\noperator O\nreader R\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func get(t *testing.T, h http.Handler, method, path, token string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// Every answer, files, redirects and refusals alike, carries the headers
// that keep the page from loading or being framed by anything but the
// node; the root redirects to the console; only GET and HEAD are served.
func TestHandlerHeadersAndPaths(t *testing.T) {
	h := console.Handler(tokens(t))
	for _, c := range []struct {
		method, path string
		code         int
		location     string
	}{
		{"GET", "/", http.StatusFound, "/ui/"},
		{"GET", "/ui", http.StatusFound, "/ui/"},
		{"GET", "/ui/", http.StatusOK, ""},
		{"GET", "/ui/app.js", http.StatusOK, ""},
		{"HEAD", "/ui/app.css", http.StatusOK, ""},
		{"GET", "/ui/nothing.js", http.StatusNotFound, ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, ""},
		{"GET", "/ui/role", http.StatusOK, ""},
	} {
		res := get(t, h, c.method, c.path, "")
		if res.StatusCode != c.code || res.Header.Get("Location") != c.location {
			t.Errorf("%s %s: %d to %q, want %d to %q", c.method, c.path, res.StatusCode, res.Header.Get("Location"), c.code, c.location)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %q", c.method, c.path, csp, want)
			}
		}
		// nothing in the policy lets inline code or another origin in
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:", "data:"} {
			if strings.Contains(csp, bad) {
				t.Errorf("%s %s: CSP %q allows %s", c.method, c.path, csp, bad)
			}
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", c.method, c.path, got)
		}
	}
	if ct := get(t, h, "GET", "/ui/app.js", "").Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js served as %q", ct)
	}
}

// /ui/role says what api.Tokens says of the token, none for tokens it
// does not know (and the node credential), and calls everyone an admin on a
// node without user tokens, as the API's own check does.
func TestRoleFollowsTheTokens(t *testing.T) {
	tk := tokens(t)
	if err := tk.Add(api.RoleNode, "N"); err != nil {
		t.Fatal(err)
	}
	role := func(h http.Handler, token string) string {
		res := get(t, h, "GET", console.RolePath, token)
		if res.StatusCode != http.StatusOK {
			return res.Status
		}
		var b struct{ Role string }
		if err := json.NewDecoder(res.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return b.Role
	}
	h := console.Handler(tk)
	for token, want := range map[string]string{"A": "admin", "O": "operator", "R": "reader", "": "none", "X": "none", "N": "none"} {
		if got := role(h, token); got != want {
			t.Errorf("token %q: %s, want %s", token, got, want)
		}
		if got, want := role(h, token), tk.Role(token).String(); want != "node" && got != want {
			t.Errorf("token %q: %s, the API's check says %s", token, got, want)
		}
	}
	if got := role(console.Handler(nil), "anything"); got != "admin" {
		t.Errorf("open node: %s, want admin", got)
	}
}

// The built console is whole and self-contained: every file index.html
// names is there, no file refers to another origin for something to
// load, and the page's JavaScript stays within its budget.
func TestDistIsSelfContained(t *testing.T) {
	dist := os.DirFS("dist")
	index, err := fs.ReadFile(dist, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(index), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html names %d files: %s", len(refs), index)
	}
	for _, r := range refs {
		if strings.Contains(r[1], ":") || strings.HasPrefix(r[1], "//") {
			t.Errorf("index.html loads %q from elsewhere", r[1])
		} else if _, err := fs.Stat(dist, r[1]); err != nil {
			t.Errorf("index.html names %q: %v", r[1], err)
		}
	}
	if bytes.Contains(index, []byte("<script>")) || bytes.Contains(index, []byte("style=")) || bytes.Contains(index, []byte("<style")) {
		t.Error("index.html has inline script or style, which the CSP refuses")
	}
	css, err := fs.ReadFile(dist, "app.css")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`@import|url\(`).Find(css); m != nil {
		t.Errorf("app.css loads %q", m)
	}
	const budget = 300 << 10
	var js int
	fs.WalkDir(dist, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".js") {
			return err
		}
		b, _ := fs.ReadFile(dist, path)
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(b)
		w.Close()
		js += z.Len()
		return nil
	})
	if js == 0 || js > budget {
		t.Errorf("the page's JavaScript is %d bytes gzipped, budget %d", js, budget)
	}
	// the embedded files are the ones on disk
	res := get(t, console.Handler(nil), "GET", "/ui/index.html", "")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusMovedPermanently {
		res = get(t, console.Handler(nil), "GET", "/ui/", "")
		body, _ = io.ReadAll(res.Body)
	}
	if !bytes.Equal(body, index) {
		t.Errorf("/ui/ serves %q, dist/index.html is %q", body, index)
	}
}
