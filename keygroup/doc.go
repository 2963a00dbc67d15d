// Package keygroup is how the cluster partitions events by key.
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
// # Encoding
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
// The package is pure and safe for concurrent use.
package keygroup
