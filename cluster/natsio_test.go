package cluster

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A taken client port fails the embedded server's start at once, with the
// bind error and the port, not after the readiness wait.
func TestEmbeddedNATSPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	began := time.Now()
	s, err := StartEmbeddedNATS(t.TempDir(), "127.0.0.1", port, nil)
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a taken port")
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("took %v", took)
	}
	var le *natsListenError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q (%T): want the port and the bind error", err, err)
	}
}
