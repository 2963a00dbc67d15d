package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"
)

// The methods and headers browsers must be let use for the Connect, gRPC
// and gRPC-Web protocols, and the response headers and trailers their
// clients read (the lists connectrpc.com/cors keeps), with Authorization
// for the API's bearer tokens.
var (
	corsMethods = []string{http.MethodGet, http.MethodPost}
	corsHeaders = []string{
		"Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms",
		"Connect-Accept-Encoding", "Connect-Content-Encoding", "Accept-Encoding", "Content-Encoding",
		"Grpc-Timeout", "X-Grpc-Web", "X-User-Agent", "Authorization",
	}
	corsExposed = []string{
		"Content-Encoding", "Connect-Content-Encoding", "Grpc-Encoding", "Grpc-Accept-Encoding",
		"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin",
	}
)

// CORSMaxAge is how long, in seconds, a browser may keep a preflight's
// answer.
const CORSMaxAge = 2 * 60 * 60

// CORS lets browser pages of the origins call h: it answers their
// preflight requests (before any token is checked: a preflight carries
// none) and adds the CORS headers to their calls. Requests of other
// origins get no CORS headers, so browsers keep their pages from reading
// the answers. Without origins h is returned as it is: no origin is
// allowed. The calls still need their tokens; no cookies are involved.
// An origin is scheme://host[:port], or "*" for any; one "*" may stand
// for the first labels of the host (https://*.example.com: its
// subdomains). CheckOrigins validates them.
func CORS(origins []string, h http.Handler) http.Handler {
	if len(origins) == 0 {
		return h // rs/cors would allow every origin
	}
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: corsMethods,
		AllowedHeaders: corsHeaders,
		ExposedHeaders: corsExposed,
		MaxAge:         CORSMaxAge,
	}).Handler(h)
}

// CheckOrigins reports the first origin that is not "*" nor
// scheme://host[:port] (http or https, with at most one "*", as the
// host's first labels).
func CheckOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		if strings.Count(o, "*") > 1 {
			return fmt.Errorf("origin %q: more than one *", o)
		}
		// A * elsewhere than as the whole first label would match more
		// than subdomains: https://*example.com matches
		// https://evilexample.com.
		if i := strings.Index(o, "*"); i >= 0 && !strings.HasPrefix(o[i:], "*.") || i > 0 && !strings.HasSuffix(o[:i], "://") {
			return fmt.Errorf("origin %q: a * stands only for the first labels of the host, as in https://*.example.com", o)
		}
		u, err := url.Parse(strings.Replace(o, "*", "x", 1))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("origin %q: not scheme://host[:port] (http or https)", o)
		}
	}
	return nil
}
