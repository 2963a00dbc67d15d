package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// cepctlBin is the cepctl binary TestMain builds, for the tests that run it
// as a process.
var cepctlBin string

// TestMain builds the binary, runs the tests and then fails if any of them
// left a goroutine behind (HTTP connections, NATS clients and servers, the
// progress ticker).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withBinary{m})
}

// withBinary wraps testing.M so that the binary is built before the tests
// and removed after them, inside goleak's Run.
type withBinary struct{ m *testing.M }

func (w withBinary) Run() int {
	dir, err := os.MkdirTemp("", "cepctl-test")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cepctlBin = filepath.Join(dir, "cepctl")
	if out, err := exec.Command("go", "build", "-o", cepctlBin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	return w.m.Run()
}
