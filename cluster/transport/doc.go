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
// Each connection starts with the 4-byte magic "CEPR", a version byte (1) and
// the group id as a uvarint, written by Layer.Dial before it returns. The
// accepting side reads the header under a deadline in a goroutine of its own,
// so a slow or silent client delays no one, and closes connections with a bad
// header or for a group not registered here. Nothing is written back.
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
