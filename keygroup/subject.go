package keygroup

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// SourceStreamName is the stream the cluster creates for a source.
func SourceStreamName(source string) string {
	if origin, key, derived := strings.Cut(source, "."); derived {
		// a derived source "<origin>.k<hash>" (source names have no dots)
		return "CEP_RK_" + strings.ToUpper(strings.ReplaceAll(origin, "-", "_")) + "_" + strings.ToUpper(key)
	}
	return "CEP_SRC_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(source))
}

// DerivedSourceName names the source that re-keys source by a pattern's key
// expression; a pattern whose input is projected (a MATCH_RECOGNIZE
// subquery) gets its own, since its key is computed after the projection.
func DerivedSourceName(source, keyExpr, projectedBy string) string {
	h := sha256.Sum256([]byte(keyExpr + "\x00" + projectedBy))
	return source + ".k" + hex.EncodeToString(h[:4])
}

// SourceWildcard is the subjects a source's events are published on,
// "<source>.*": one key token after the source's name. It is both the
// subjects of the stream the cluster creates for the source and the source
// of that stream's subject transform.
func SourceWildcard(source string) string { return source + ".*" }

// PartitionDestination is the destination of the subject transform of a
// source stream with subjects "<prefix>.*": "<prefix>.<block>".
func PartitionDestination(prefix string, k int) string {
	return prefix + ".{{partition(" + strconv.Itoa(Blocks(k)) + ",1)}}"
}

// BlockOfSubject returns the block of a subject stored under
// PartitionDestination: the number after the last '.'.
func BlockOfSubject(subject string, k int) (int, bool) {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 {
		return 0, false
	}
	b, err := strconv.Atoi(subject[i+1:])
	if err != nil || b < 0 || b >= Blocks(k) {
		return 0, false
	}
	return b, true
}

// BlockFilters lists the stored subjects a shard owning the key groups
// [first, last] reads: one per block it owns a part of, none at all (the
// whole stream) when the range is every key group. Under BlockRange a
// shard owns whole blocks; a range that splits a block (more shards than
// blocks) shares that block's subject with its neighbour, and each skips
// the other's events.
func BlockFilters(prefix string, first, last, k int) []string {
	if first == 0 && last == k-1 {
		return nil
	}
	var out []string
	for b := BlockOf(first, k); b <= BlockOf(last, k); b++ {
		out = append(out, prefix+"."+strconv.Itoa(b))
	}
	return out
}

// The subjects of the output stream, shared by the cluster that publishes
// on them and the tools that read them.
const (
	// OutputSubjectRoot prefixes every output subject: a pattern's records
	// go to OutputSubjectRoot + pattern unless it names another subject
	// under it.
	OutputSubjectRoot = "cep.out."
	// DeadLetterRoot prefixes the dead letters: a source's bad events go to
	// DeadLetterRoot + source, a record too large to publish to
	// DeadLetterRoot + "output." + the rest of its subject.
	DeadLetterRoot = "cep.deadletter."
)
