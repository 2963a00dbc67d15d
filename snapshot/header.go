package snapshot

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Kind says what a file is for.
type Kind string

const (
	// KindRaftSnapshot is a shard's Raft snapshot: the state of one shard's
	// key-group range at a log index.
	KindRaftSnapshot Kind = "raft-snapshot"
	// KindSavepoint is part of a cluster savepoint, written on request and
	// kept until deleted; it can be restored into any shard layout.
	KindSavepoint Kind = "savepoint"
)

// Header is the self-describing part of a file, stored as JSON right after
// the preamble. Everything in it is an input of the writer: in particular
// CreatedIndex and LoggedTimeMs come from the Raft log, never from a clock,
// so that every replica writing a snapshot at the same index writes the same
// bytes.
//
// Readers ignore JSON fields they do not know, so fields may be added without
// a new major version.
type Header struct {
	// ID names the snapshot or savepoint; non-empty, at most 255 bytes of
	// UTF-8 without control characters.
	ID        string `json:"id"`
	Kind      Kind   `json:"kind"`
	ClusterID string `json:"clusterId,omitempty"`
	// KeyGroups is K, the cluster's fixed key-group count, 1..MaxKeyGroups.
	KeyGroups int `json:"keyGroups"`
	// FirstKeyGroup and LastKeyGroup bound the key groups the file covers,
	// inclusive: 0 <= First <= Last < KeyGroups. A key group inside the range
	// without a section was empty.
	FirstKeyGroup int `json:"firstKeyGroup"`
	LastKeyGroup  int `json:"lastKeyGroup"`
	// CreatedIndex is the Raft log index the state reflects (for a savepoint,
	// the index of the logged savepoint marker in the shard's group).
	CreatedIndex uint64 `json:"createdIndex"`
	// LoggedTimeMs is the logged time of that entry, in Unix milliseconds.
	LoggedTimeMs int64 `json:"loggedTimeMs"`
	// Shards is the cluster's shard count when the file was written.
	Shards   int       `json:"shards"`
	Patterns []Pattern `json:"patterns,omitempty"`
	Sources  []Source  `json:"sources,omitempty"`
	// Metadata is free-form; JSON encodes its keys sorted, so it does not
	// make the bytes depend on map order.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Pattern is a deployed pattern as the header records it.
type Pattern struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Format  string `json:"format,omitempty"` // e.g. "yaml", "json", "sql"
	Spec    string `json:"spec"`
}

// Source is an input as the header records it.
type Source struct {
	Name     string   `json:"name"`
	Stream   string   `json:"stream"`
	Subjects []string `json:"subjects,omitempty"`
	// StreamCreated is when JetStream created Stream, in Unix nanoseconds
	// (its StreamInfo.Created). With Stream it identifies the stream the
	// file's positions of the source count in: a stream deleted and created
	// again, or another cluster's of the same name, numbers its messages
	// anew and has another creation time. 0: not known (files written
	// before it was recorded).
	StreamCreated int64 `json:"streamCreated,omitempty"`
}

// StreamIdentity names a stream as Source identifies it: "NAME created
// <RFC 3339 time>", or "NAME (creation not recorded)".
func StreamIdentity(stream string, created int64) string {
	if created == 0 {
		return stream + " (creation not recorded)"
	}
	return stream + " created " + time.Unix(0, created).UTC().Format(time.RFC3339Nano)
}

// SameStream reports whether a stream recorded as (stream, created) is
// known to be the one now named cur and created curCreated; known is false
// when a creation time is missing and only the names could be compared.
func SameStream(stream string, created int64, cur string, curCreated int64) (same, known bool) {
	if stream != cur {
		return false, true
	}
	if created == 0 || curCreated == 0 {
		return true, false
	}
	return created == curCreated, true
}

// HeaderError reports an invalid header field.
type HeaderError struct {
	Field string
	Err   error
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("snapshot: header field %q: %v", e.Field, e.Err)
}

// Unwrap returns the reason.
func (e *HeaderError) Unwrap() error { return e.Err }

func herr(field, format string, args ...any) error {
	return &HeaderError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Validate checks the header's fields. NewWriter and NewReader call it.
func (h *Header) Validate() error {
	if h.ID == "" {
		return herr("id", "empty")
	}
	if len(h.ID) > 255 || !utf8.ValidString(h.ID) {
		return herr("id", "longer than 255 bytes or not UTF-8")
	}
	for _, r := range h.ID {
		if r < 0x20 || r == 0x7f {
			return herr("id", "control character")
		}
	}
	switch h.Kind {
	case KindRaftSnapshot, KindSavepoint:
	default:
		return herr("kind", "%q is neither %q nor %q", h.Kind, KindRaftSnapshot, KindSavepoint)
	}
	if h.KeyGroups < 1 || h.KeyGroups > MaxKeyGroups {
		return herr("keyGroups", "%d not in [1, %d]", h.KeyGroups, MaxKeyGroups)
	}
	if h.FirstKeyGroup < 0 || h.FirstKeyGroup > h.LastKeyGroup || h.LastKeyGroup >= h.KeyGroups {
		return herr("firstKeyGroup", "range [%d, %d] not within [0, %d)", h.FirstKeyGroup, h.LastKeyGroup, h.KeyGroups)
	}
	if h.Shards < 0 || h.Shards > h.KeyGroups {
		return herr("shards", "%d not in [0, %d]", h.Shards, h.KeyGroups)
	}
	for i, p := range h.Patterns {
		if p.Name == "" {
			return herr(fmt.Sprintf("patterns[%d].name", i), "empty")
		}
	}
	for i, s := range h.Sources {
		if s.Name == "" {
			return herr(fmt.Sprintf("sources[%d].name", i), "empty")
		}
		if s.StreamCreated < 0 {
			return herr(fmt.Sprintf("sources[%d].streamCreated", i), "%d is before 1970", s.StreamCreated)
		}
	}
	return nil
}

// Covers reports whether key group kg lies in the header's range.
func (h *Header) Covers(kg int) bool { return kg >= h.FirstKeyGroup && kg <= h.LastKeyGroup }

// clone returns a deep copy, so that a Reader's header cannot be changed
// through the value it hands out.
func (h Header) clone() Header {
	c := h
	c.Patterns = append([]Pattern(nil), h.Patterns...)
	c.Sources = make([]Source, len(h.Sources))
	for i, s := range h.Sources {
		s.Subjects = append([]string(nil), s.Subjects...)
		c.Sources[i] = s
	}
	if h.Sources == nil {
		c.Sources = nil
	}
	if h.Metadata != nil {
		c.Metadata = make(map[string]string, len(h.Metadata))
		for k, v := range h.Metadata {
			c.Metadata[k] = v
		}
	}
	return c
}
