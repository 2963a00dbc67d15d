// Package console serves the web console: a single page, built from the
// TypeScript sources in web/ into dist/ (`make console`, committed, so a
// machine with Go alone builds and serves it) and embedded in the binary.
// The page speaks the node's own Connect API from the browser, with the
// bearer token a person signs in with, so it can do nothing the token's
// role may not; the handler here only serves the files and says which
// role a token has, so the page offers no more than that role may do.
//
// Every answer carries a Content-Security-Policy that lets the page load
// and call nothing but the node itself (no inline script or style, no
// frames), plus X-Content-Type-Options: nosniff.
package console
