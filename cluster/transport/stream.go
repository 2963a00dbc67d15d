package transport

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Framing of a stream after the authenticated header when the Mux has no
// TLS: every write goes out as frames
//
//	length  4 bytes  big endian, the plaintext's (1 to frameMax)
//	sealed  length + 16 bytes  AES-256-GCM of the plaintext, the length
//	                 bytes as additional data, nonce = 4 zero bytes and
//	                 the frame's sequence number (8 bytes, big endian)
//
// Each direction has its own key and counts its own frames from 0, so a
// frame dropped, replayed, reordered, moved to another stream or sent
// back to its sender (reflected) fails to open, as does one whose bytes
// were changed. The keys are derived from the cluster secret and both
// nonces of the handshake (Mux.streamKeys): they are fresh for every
// stream and known to no one without the secret.
const (
	frameMax    = 64 << 10
	frameHeader = 4
	frameTag    = 16
)

// errFrameAuth: a frame that does not open under the stream's key.
var errFrameAuth = errors.New("transport: raft stream frame fails its authentication (tampered with, replayed, reordered or reflected); stream closed")

// sealedConn frames and seals what is written to the Conn under it, and
// opens and checks what is read from it. Until keys are set (after the
// handshake) it is unusable for Read and Write; the handshake talks to
// the Conn under it. Close, deadlines and addresses are the Conn's.
type sealedConn struct {
	net.Conn

	rmu   sync.Mutex
	br    *bufio.Reader // over Conn: a frame's header and body in one read
	rd    cipher.AEAD
	rseq  uint64
	rbuf  []byte
	plain []byte // opened, not yet read
	rerr  error  // sticky: a stream that failed once is over

	wmu  sync.Mutex
	wr   cipher.AEAD
	wseq uint64
	wbuf []byte
	werr error
}

// setKeys makes c seal with send and open with recv (32-byte keys).
func (c *sealedConn) setKeys(send, recv []byte) error {
	wr, err := newGCM(send)
	if err != nil {
		return err
	}
	rd, err := newGCM(recv)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	c.wr = wr
	c.wmu.Unlock()
	c.rmu.Lock()
	c.rd = rd
	c.br = bufio.NewReaderSize(c.Conn, frameHeader+frameMax+frameTag)
	c.rmu.Unlock()
	return nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func frameNonce(seq uint64) []byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

func (c *sealedConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.plain) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		if err := c.readFrame(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.plain)
	c.plain = c.plain[n:]
	return n, nil
}

// readFrame reads and opens the next frame into c.plain.
func (c *sealedConn) readFrame() error {
	if c.rd == nil {
		return errors.New("transport: raft stream read before its keys were set")
	}
	var hdr [frameHeader]byte
	if n, err := io.ReadFull(c.br, hdr[:]); err != nil {
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			return err // nothing consumed: the stream is intact
		}
		c.rerr = err // io.EOF at a frame boundary: the peer hung up
		return err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size == 0 || size > frameMax {
		c.rerr = fmt.Errorf("transport: raft stream frame of %d bytes (1 to %d); stream closed", size, frameMax)
		c.Conn.Close()
		return c.rerr
	}
	if cap(c.rbuf) < int(size)+frameTag {
		c.rbuf = make([]byte, int(size)+frameTag, frameMax+frameTag)
	}
	buf := c.rbuf[:int(size)+frameTag]
	if _, err := io.ReadFull(c.br, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		c.rerr = err
		return err
	}
	pt, err := c.rd.Open(buf[:0], frameNonce(c.rseq), buf, hdr[:])
	if err != nil {
		c.rerr = errFrameAuth
		c.Conn.Close()
		return c.rerr
	}
	c.rseq++
	c.plain = pt
	return nil
}

func (c *sealedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.wr == nil {
		return 0, errors.New("transport: raft stream written before its keys were set")
	}
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), frameMax)]
		if cap(c.wbuf) < frameHeader+len(chunk)+frameTag {
			c.wbuf = make([]byte, 0, frameHeader+frameMax+frameTag)
		}
		var hdr [frameHeader]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(chunk)))
		buf := c.wr.Seal(append(c.wbuf[:0], hdr[:]...), frameNonce(c.wseq), chunk, hdr[:])
		c.wseq++
		if _, err := c.Conn.Write(buf); err != nil {
			c.werr = err // a frame may be half written: the stream is over
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}
