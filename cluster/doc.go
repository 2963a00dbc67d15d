// Package cluster runs a node of the CEP cluster.
//
// Its Raft groups reach their peers through
// [github.com/cepcluster/cep/cluster/transport], which also holds the TLS
// material.
package cluster
