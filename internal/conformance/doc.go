// Package conformance loads the Flink-derived conformance cases
// (testdata/conformance; the format is described in FORMAT.md there) and
// judges a run's output records against them with the same comparison as
// check.py. The engine's tests use it in process and the cepctl tests use
// it on the binary's output.
package conformance
