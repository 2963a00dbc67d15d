// Package transport carries every Raft group of a node to its peers over one
// TCP port, and holds the TLS material that secures that port and the API.
//
// # Raft transport
//
// Every Raft group of a node talks to its peers over one TCP port. A Mux owns
// the listener and routes each incoming connection, by the group id in a
// short header, to that group's Layer, a raft.StreamLayer. NewTransport wraps
// a Layer in a raft.NetworkTransport:
//
//	ln, err := net.Listen("tcp", ":7000")
//	mux := transport.NewMux(ln, advertiseAddr, logger) // advertiseAddr: what peers dial
//	go mux.Serve()                                     // until mux.Close
//
//	layer, err := mux.Layer(groupID) // one per group
//	trans := transport.NewTransport(layer, logger)
//	r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
//	...
//	r.Shutdown().Error() // closes trans, which closes layer
//	mux.Close()          // after every group's raft: shutdown runs in reverse
//
// Every raft.ServerAddress is the address of a peer's Mux; the group id
// travels in the connection header, so the same address serves every group.
//
// Each connection starts with the 4-byte magic "CEPR", a version byte and
// the group id as a uvarint, written by Layer.Dial before it returns. With
// a cluster secret (Mux.UseSecret) the version is 3 and a mutual
// challenge-response follows (mux.go has the bytes): the dialer sends a
// random nonce, the address it dialled, its own, and the id of the node
// it means to reach when it knows it (Mux.ResolveID), the acceptor answers
// with its own nonce and an HMAC of both nonces, the group, the addresses
// and the id under the secret's Raft key, and the dialer answers with its
// HMAC; each side closes the connection when the other's proof is wrong,
// so the group's Layer sees no byte from a peer without the secret. The
// acceptor also closes it unless the address dialled is its own
// advertised address and the id, if given, its own (Mux.SetNodeID): a
// handshake relayed by whoever holds an address members dial (a stopped
// member's, a reused pod IP) to another member fails there, and so does
// a stream to a node that took a member's old address.
//
// Without TLS, what follows the header is sealed (stream.go): AES-256-GCM
// frames under keys of the secret and both nonces, one per direction, with
// a sequence number per frame, so that a frame tampered with, replayed,
// reordered or sent back is refused and the stream closed. It costs about
// a fifth of the loopback's throughput on 256 KiB writes
// (BenchmarkStreamThroughput; BENCHMARKS.md). With TLS (Mux.UseTLS) the
// header runs inside the TLS connection and its proofs cover what the TLS
// session exports, so a peer needs both a certificate of the CA and the
// secret, and TLS protects the stream.
//
// A Mux with a secret refuses versions 1 (no proof) and 2 (the exchange
// without the addresses); one without a secret (an insecure cluster)
// speaks and takes only version 1, which carries nothing but the group:
// anyone who reaches the port speaks Raft then.
//
// The accepting side reads the header under a deadline (5 s for all of it)
// in a goroutine of its own, so a slow or silent client delays no one, and
// closes connections with a bad header or proof or for a group not
// registered here, unanswered. At most 256 connections are in their
// handshake at once; beyond that a new one is closed at once. An
// established stream on which nothing is read or written for 5 minutes is
// closed by its next read or write failing (a deadline moved by every
// read and write, never later than one raft sets): Raft's heartbeats keep
// a live peer's streams far busier, and raft's transport redials a pooled
// connection the peer closed (the one RPC on it fails and is retried).
//
// A Layer owns the connections it hands out: closing it (raft's Shutdown does)
// closes them, so the transport's per-connection goroutines end even when the
// peer keeps its side open. Mux.Close closes the listener, every Layer and
// every connection still in its handshake, and waits for its goroutines.
//
// # TLS
//
// A TLS (LoadTLS) is a node's certificate and the CAs it trusts. Mux.UseTLS
// takes its PeerServer and Client configs for mutual TLS between peers; the
// node serves its API with APIServer and calls its peers' APIs with Client.
package transport
