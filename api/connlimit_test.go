package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// dialFrom connects to addr from the loopback address local.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends a GET of /ok on c and returns the status line, or the error
// that ended the connection.
func get(c net.Conn, header string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: x\r\n%s\r\n", header); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// The API's listener holds at most so many connections, and so many of
// one host; one past a limit is closed at once while the others are
// served, and a place given back is taken again.
func TestLimitConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	go srv.Serve(LimitConns(ln, 3, 2))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	a1, a2 := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	for i, c := range []net.Conn{a1, a2} {
		if line, err := get(c, ""); err != nil || line != "HTTP/1.1 200 OK" {
			t.Fatalf("connection %d of host 1: %q, %v", i+1, line, err)
		}
	}
	if line, err := get(dialFrom(t, "127.0.0.1", addr), ""); err == nil {
		t.Fatalf("a third connection of one host (limit 2) was served: %q", line)
	}
	b1 := dialFrom(t, "127.0.0.2", addr)
	if line, err := get(b1, ""); err != nil || line != "HTTP/1.1 200 OK" {
		t.Fatalf("another host's first connection: %q, %v", line, err)
	}
	if line, err := get(dialFrom(t, "127.0.0.3", addr), ""); err == nil {
		t.Fatalf("a fourth connection in all (limit 3) was served: %q", line)
	}
	b1.Close()
	// the server sees the close when it reads the connection again
	deadline := time.Now().Add(10 * time.Second)
	for {
		line, err := get(dialFrom(t, "127.0.0.3", addr), "")
		if err == nil && line == "HTTP/1.1 200 OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a place given back is not taken again: %q, %v", line, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Headers of 128 KiB are refused without being held (they were taken up
// to 1 MiB: a thousand callers trickling such headers held gigabytes).
func TestMaxHeaderBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	line, err := get(dialFrom(t, "127.0.0.1", ln.Addr().String()), "X-Big: "+strings.Repeat("a", 128<<10)+"\r\n")
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 431") {
		t.Fatalf("headers of 128 KiB: %q, want 431", line)
	}
}
