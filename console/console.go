package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/cepcluster/cep/api"
)

//go:embed dist
var dist embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// RolePath answers GET with the role of the request's bearer token as
// {"role":"reader"|"operator"|"admin"}, or "none" for a token the node
// does not know (or none): not an error, the page then asks for one.
// Without user tokens the API is open and every caller is an admin.
const RolePath = Prefix + "role"

// SecurityHeaders are set on every answer of the console: the page may
// load and call the node alone, with no inline script or style (the
// automaton's SVG, drawn by the server, is parsed and sanitized into the
// page, whose policy then holds for it too) and may not be framed.
var SecurityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
}

// Handler serves the console's files under Prefix, its role answer at
// RolePath, and redirects "/" to Prefix; tokens decides roles. Mount it at
// Prefix and at "GET /{$}" (the root alone: the rest of "/" is the API).
func Handler(tokens *api.Tokens) http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is there
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range SecurityHeaders {
			w.Header().Set(k, v)
		}
		switch {
		case r.URL.Path == "/" || r.URL.Path == strings.TrimSuffix(Prefix, "/"):
			http.Redirect(w, r, Prefix, http.StatusFound)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		case r.URL.Path == RolePath:
			serveRole(w, r, tokens)
		default:
			// the files change with the binary only: a browser asks again
			// after an upgrade rather than mixing versions
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		}
	})
}

func serveRole(w http.ResponseWriter, r *http.Request, tokens *api.Tokens) {
	w.Header().Set("Cache-Control", "no-store")
	role := api.RoleAdmin // no user token: the API is open
	if tokens != nil && tokens.Users() > 0 {
		role = api.RoleNone
		if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			role = tokens.Role(strings.TrimSpace(v[7:]))
		}
	}
	if role == api.RoleNode {
		role = api.RoleNone // the node credential is for members, not for people
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"role": role.String()})
}
