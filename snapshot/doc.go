// Package snapshot is the file format shared by a shard's Raft snapshots and
// by cluster savepoints, sectioned by key group (package keygroup numbers
// them), and the stores that keep such files in a directory or in a NATS
// JetStream object store.
//
// A file ("CEPS", version 1) is a header, one section per non-empty key
// group in ascending order, any number of named shard-level sections, an
// index and a footer. Every part carries a CRC-32C, and the footer carries
// one over the whole file. Because state is sectioned by key group, a
// savepoint taken under one shard layout restores into any other: a shard
// reads just the sections of its key-group range, from whichever files
// cover them (ForEachKeyGroup). The payload of a section is opaque here; the
// shard encodes and decodes it. DESIGN.md in this directory describes every
// byte and says why.
//
// # Writing
//
//	w, err := snapshot.NewWriter(out, snapshot.Header{
//		ID: "sp-42", Kind: snapshot.KindSavepoint, ClusterID: "c1",
//		KeyGroups: 256, FirstKeyGroup: 0, LastKeyGroup: 127, Shards: 2,
//		CreatedIndex: idx, LoggedTimeMs: loggedTime, // from the log, never the clock
//	})
//	w.Named("watermarks", wm)          // shard-level state, by name
//	for _, kg := range groups {        // ascending; empty groups may be skipped
//		w.KeyGroup(kg, state[kg])
//	}
//	err = w.Close()                     // index and footer; out stays open
//
// The bytes written depend only on the header and the calls, so replicas that
// snapshot the same log index write identical files.
//
// # Reading
//
//	r, err := snapshot.NewReader(f, size) // checks footer, header and index
//	for _, kg := range r.KeyGroups() {
//		p, err := r.KeyGroup(kg)          // one ReadAt; checks the section's CRC
//	}
//	err = r.Verify()                      // every section and the whole-file CRC
//
// Errors callers branch on are sentinels (ErrNotSnapshot, ErrVersion,
// ErrCorrupt, ErrTruncated, ErrNotFound, ...), tested with errors.Is; damage
// comes as a *CorruptError naming the section ("header", "index", "footer",
// "key group 7", `named section "watermarks"`, or "file").
//
// # Stores
//
// A Store (DirStore, ObjectStore; OpenStore picks one from a location such as
// "dir:///var/lib/cep/savepoints" or "nats://savepoints") commits a file
// atomically when its Sink is closed, and opens committed files for random
// access. Save and Load wrap a Writer and a Reader around a Store.
//
// # Threading
//
// A Writer and a Sink belong to one goroutine. A Reader is immutable after
// NewReader and safe for concurrent use (given an io.ReaderAt that is, as
// files are). Stores are safe for concurrent use; the only goroutine this
// package starts is the upload an ObjectStore Sink runs, which ends when the
// Sink is closed or aborted. Nothing here reads the clock for anything that
// lands in a file.
package snapshot
