package main

import "syscall"

// childAttr makes a node process die with the benchmark, should the
// benchmark itself be killed before it can clean up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
