package api

import (
	"net"
	"sync"
)

// Connection limits of the API's listener (LimitConns): each connection
// holds buffers for its headers (up to MaxHeaderBytes) and an HTTP/2
// connection its streams' state, so their number bounds the memory that
// callers without a token can make the node hold.
const (
	// MaxConns is the most connections the API holds at once.
	MaxConns = 4096
	// MaxConnsPerHost is the most it holds from one host, so that one
	// host cannot take every place.
	MaxConnsPerHost = 512
	// MaxHeaderBytes bounds a request's headers (HTTP/1.1) or header
	// list (HTTP/2); the API's calls send a few hundred bytes.
	MaxHeaderBytes = 64 << 10
)

// LimitConns returns ln holding at most max connections at once and at
// most perHost from one host: a connection past either is closed as soon
// as it is accepted (rather than left waiting in the kernel's queue,
// where it would hold a place of the callers behind it).
func LimitConns(ln net.Listener, max, perHost int) net.Listener {
	return &connLimiter{Listener: ln, max: max, perHost: perHost, byHost: map[string]int{}}
}

type connLimiter struct {
	net.Listener
	max, perHost int

	mu     sync.Mutex
	total  int
	byHost map[string]int
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if l.take(host) {
			return &limitedConn{Conn: c, release: func() { l.release(host) }}, nil
		}
		c.Close()
	}
}

func (l *connLimiter) take(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.byHost[host] >= l.perHost {
		return false
	}
	l.total++
	l.byHost[host]++
	return true
}

func (l *connLimiter) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byHost[host]--; l.byHost[host] == 0 {
		delete(l.byHost, host)
	}
}

// limitedConn gives its place back once, however often it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
