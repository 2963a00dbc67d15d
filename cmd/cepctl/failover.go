package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// failover is an http.RoundTripper for a command given several servers
// (--server a,b,c): a call whose connection to one could not be made —
// so nothing of it was sent — goes to the next, and the command stays
// with the first that answers. Any command then outlives a dead node, as
// a tail does. A call that reached a server is never sent again here
// (whether it was applied is for the retrier and the server to say), nor
// is one whose body cannot be read again (a stream: tail resumes on its
// own).
type failover struct {
	next    http.RoundTripper
	servers []string // base URLs, as the clients were made with servers[0]

	mu sync.Mutex
	at int // the server that answered last
}

func newFailover(next http.RoundTripper, servers []string) *failover {
	if next == nil {
		next = http.DefaultTransport
	}
	return &failover{next: next, servers: servers}
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	path, ok := strings.CutPrefix(req.URL.String(), f.servers[0])
	if !ok || req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return f.next.RoundTrip(req)
	}
	f.mu.Lock()
	start := f.at
	f.mu.Unlock()
	if start != 0 && req.Body != nil {
		req.Body.Close() // req itself is not sent: copies are
	}
	var err error
	for i := range f.servers {
		k := (start + i) % len(f.servers)
		r := req
		if i > 0 || k != 0 {
			if r = retarget(req, f.servers[k]+path); r == nil {
				return nil, fmt.Errorf("cepctl: the request to %s cannot be sent again", f.servers[k])
			}
		}
		res, rerr := f.next.RoundTrip(r)
		if rerr == nil {
			f.mu.Lock()
			f.at = k
			f.mu.Unlock()
			return res, nil
		}
		if !unreached(rerr) {
			return nil, rerr
		}
		err = rerr
	}
	return nil, err
}

// retarget is a copy of req sent to url, its body read again; nil when
// the body cannot be.
func retarget(req *http.Request, url string) *http.Request {
	r, err := http.NewRequestWithContext(req.Context(), req.Method, url, nil)
	if err != nil {
		return nil
	}
	r.Header = req.Header.Clone()
	if req.Body != nil && req.Body != http.NoBody {
		if r.Body, err = req.GetBody(); err != nil {
			return nil
		}
		r.GetBody, r.ContentLength = req.GetBody, req.ContentLength
	}
	return r
}

// unreached reports whether err says the connection to the server could
// not be made (so the request was not sent).
func unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
