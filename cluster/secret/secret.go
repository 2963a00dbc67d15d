// Package secret is a cluster's shared secret: what a node proves it
// belongs with when no certificate says so, and the root every other
// node-to-node key is derived from (the gossip key, the Raft handshake key,
// the node credential for peer API calls, the embedded NATS server's
// passwords). One secret, many purposes: a key learnt for one purpose (a
// NATS password read off a disk) gives nothing for another.
//
// The first node of a cluster creates the secret and keeps it in its data
// directory (File, mode 0600); nodes that join are given it (a file or an
// environment variable) and keep it too. A data directory whose stored
// secret differs from the one given belongs to another cluster.
package secret

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Size is a secret's length in bytes.
const Size = 32

// File is the name of the secret's file in a node's data directory.
const File = "cluster-secret"

// Purposes of Derive. Each names one use; a new use gets a new name.
const (
	Gossip     = "cep gossip key v1"      // memberlist's AES key
	Raft       = "cep raft handshake v1"  // HMAC key of the Raft mux handshake
	RaftStream = "cep raft stream v1"     // keys sealing a Raft stream after the handshake
	Member     = "cep member proof v1"    // a member's proof of its id and addresses, gossiped
	Node       = "cep node credential v1" // bearer credential of node-to-node API calls
	NATSNode   = "cep nats node v1"       // the embedded NATS server's password for the node itself
	NATSPublic = "cep nats publisher v1"  // the embedded NATS server's password for publishers
	NATSReader = "cep nats subscriber v1" // the embedded NATS server's password for readers of the output
	Savepoint  = "cep savepoint seal v1"  // HMAC key sealing savepoint parts
)

// Secret is a cluster secret. The zero value is no secret.
type Secret struct{ b [Size]byte }

// Generate returns a new random secret.
func Generate() Secret {
	var s Secret
	_, _ = rand.Read(s.b[:]) // crypto/rand.Read never fails (it panics, Go 1.24+)
	return s
}

// Parse reads a secret written by String: 64 hex digits, surrounding
// white space ignored.
func Parse(text string) (Secret, error) {
	var s Secret
	t := strings.TrimSpace(text)
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != Size {
		return s, fmt.Errorf("cluster secret: want %d hex digits, got %d characters", 2*Size, len(t))
	}
	copy(s.b[:], b)
	return s, nil
}

// String is the secret's text form (64 hex digits), as kept in File.
func (s Secret) String() string { return hex.EncodeToString(s.b[:]) }

// IsZero reports whether s is no secret.
func (s Secret) IsZero() bool { return s == Secret{} }

// Derive returns an n-byte key for purpose (one of the constants above),
// by HKDF-SHA256 from the secret. Equal secrets give equal keys.
func (s Secret) Derive(purpose string, n int) []byte {
	k, err := hkdf.Key(sha256.New, s.b[:], nil, purpose, n)
	if err != nil {
		panic("secret: " + err.Error()) // only for n beyond HKDF's limit: a programming error
	}
	return k
}

// Token is Derive(purpose, 32) as text (hex), for credentials that travel
// as strings: a bearer token, a NATS password.
func (s Secret) Token(purpose string) string { return hex.EncodeToString(s.Derive(purpose, 32)) }

// MAC is HMAC-SHA256 of parts (each length-prefixed, so that no two
// different part lists give the same input) under the key for purpose.
func (s Secret) MAC(purpose string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, s.Derive(purpose, 32))
	for _, p := range parts {
		var l [4]byte
		l[0], l[1], l[2], l[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		m.Write(l[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// ErrOtherCluster is returned by Keep when the data directory holds another secret.
var ErrOtherCluster = errors.New("the data directory belongs to a cluster with another secret")

// Load reads the secret kept in dir. ok is false when there is none.
func Load(dir string) (s Secret, ok bool, err error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	s, err = Parse(string(b))
	if err != nil {
		return s, false, fmt.Errorf("%s: %w", path, err)
	}
	return s, true, nil
}

// Keep makes s the secret kept in dir: it writes File (mode 0600) when dir
// holds none, and fails with ErrOtherCluster when it holds another one.
func Keep(dir string, s Secret) error {
	old, ok, err := Load(dir)
	if err != nil {
		return err
	}
	if ok {
		if !hmac.Equal(old.b[:], s.b[:]) {
			return fmt.Errorf("%s: %w", filepath.Join(dir, File), ErrOtherCluster)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, File+".tmp")
	if err := os.WriteFile(tmp, []byte(s.String()+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, File))
}

// ReadFile reads a secret from a file the operator gives (--cluster-secret-file).
func ReadFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, err
	}
	s, err := Parse(string(b))
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
