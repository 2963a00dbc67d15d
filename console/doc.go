// Package console serves the web console: a single page, built from the
// TypeScript sources in web/ into dist/ (`make console`, committed, so a
// machine with Go alone builds and serves it) and embedded in the binary.
// Every node mounts it at Prefix on its API address, "/" redirecting there.
//
// The page speaks the node's own Connect API from the browser
// (@connectrpc/connect-web, a client protoc-gen-es generates from
// api/proto into web/src/gen), with the bearer token a person signs in
// with, kept in the tab's sessionStorage only. So it can do nothing the
// token's role may not; RolePath tells it the role, so that it offers no
// more than that (no deploy, delete or savepoint creation for a reader).
//
// Its pages: the cluster (nodes, shards); the patterns, each with its
// automaton, live output and a key's inside (InspectKey); the sources
// with the latest dead letters (a Tail of dead letters, closed when the
// page is left); the savepoints (create, restore with its position
// choice); the pattern builder, a form that writes a MATCH_RECOGNIZE
// query, each line of which it knows the part of the form that wrote, so
// that a validation error at a line is shown on that part; a hand edit of
// the query that reads back into a form writing exactly that text
// (fromSQL) goes into the form, any other leaves it.
//
// The pattern list's counters are GetPatternStats' (every shard's leader's,
// summed), sampled at each poll for the sparkline of matches per second.
// What the API has no call for comes from the node's /metrics, named as
// this node's: the ingest lag, the node's version.
//
// The deploy page's editor validates with ValidatePattern and shows the
// error under the line and column its answer points to (a SQL parser's
// position, or where the document writes the stage and field named), and
// redraws the automaton with ExplainPattern as the text changes.
//
// Every answer carries a Content-Security-Policy that lets the page load
// and call nothing but the node itself (default-src 'self': no inline
// script or style, no other origin, no frames) and X-Content-Type-Options:
// nosniff. The automaton's SVG, which the server draws, is parsed and
// cut down to drawing elements and attributes before it goes into the
// page (no script, handler, style, link or outside reference), so it is
// real text a screen reader reads and the policy holds for it too.
//
// console_test.go checks the handler and the built files; browser_test.go
// drives Chromium against a cepnode process and checks what the pages
// show against the API's answers (skipped where no Chromium is installed).
package console
