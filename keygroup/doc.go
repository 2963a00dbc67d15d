// Package keygroup is how the cluster partitions events by key: the
// encoding of a key as a NATS subject token, the key-group hash of that
// token, the blocks and shard ranges of key groups, and the subjects a
// source's stream stores events under. Publishers, the NATS subject
// transform and the shards must all agree on these, and savepoints are
// sectioned by key group, so every value here is fixed for the life of a
// cluster. DESIGN.md in this directory says why each is what it is.
//
// # Key tokens
//
// Events of a source named S are published to the subject "S.<token>", where
// <token> is the event's partition key (the string the source's key
// expression gives, see expr.KeyString) encoded by [KeyToken]. The stream
// partitions by that token, and the cluster recovers the key from it with
// [ParseToken]; cepctl publish and every other publisher must encode keys the
// same way, or events of one key would land in different partitions.
//
// A NATS subject token must be non-empty and must not contain '.', '*' or
// '>' used as wildcards, whitespace or control characters. The encoding is a
// percent-encoding of the key's bytes:
//
//   - the bytes A-Z, a-z, 0-9, '_' and '-' are kept as they are;
//   - every other byte, including '.', '*', '>', '%', spaces, control
//     characters and each byte of a non-ASCII UTF-8 sequence, becomes "%XX",
//     two upper-case hexadecimal digits;
//   - the empty key becomes the token "%", which no non-empty key produces.
//
// So "user-42" stays "user-42", "a.b" becomes "a%2Eb" and "café" becomes
// "caf%C3%A9". The encoding is injective and [ParseToken] inverts it; it is
// canonical, so two publishers always agree on a key's token.
//
// # Key groups
//
// [Partition](token, K) is FNV-1a 32-bit of the token's bytes modulo K: the
// partition number a NATS subject transform {{partition(K,1)}} assigns.
// [OfToken] renumbers partitions so that a block of consecutive key groups
// shares one stored subject ([Blocks], [BlockOf], [BlockKeyGroups]). The
// key group of an event comes from one of two functions, by what is at
// hand:
//
//   - [OfKey] takes a key as the source's key expression gives it (the
//     shard's view: the key in the payload) and encodes it first;
//   - [OfToken] takes the subject token itself (what NATS hashed).
//
// [Range] and [ShardOf] split [0, K) into contiguous shard ranges the way
// Flink's KeyGroupRangeAssignment does; [BlockRange] is the layout a
// cluster starts with, on whole blocks while there are enough of them.
//
// # Subjects
//
// Publishers send a source's events to [SourceWildcard], "<source>.<token>".
// The stream the cluster creates for the source ([SourceStreamName]) stores
// them as "<source>.<block>" by the subject transform
// [PartitionDestination]; a shard reads the blocks it owns with
// [BlockFilters], and [BlockOfSubject] reads the block back from a stored
// subject. A source re-keyed by a pattern's key is a source of its own,
// named by [DerivedSourceName]. Records and dead letters go to subjects
// under [OutputSubjectRoot] and [DeadLetterRoot].
//
// The package is pure and safe for concurrent use.
package keygroup
