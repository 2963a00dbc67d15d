package api

import (
	"fmt"

	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// Role is what a bearer token may do. The user roles are ordered: each
// may do what the one before it may. RoleNode stands apart: it is the
// credential the members of a cluster present to each other, and may call
// only what the cluster's own calls need (Access.Node).
type Role uint8

const (
	RoleNone     Role = iota // no valid token
	RoleReader               // status, list, get, tail
	RoleOperator             // plus patterns, sources, savepoints
	RoleAdmin                // everything
	RoleNode                 // a member of the cluster (not for users)
)

func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	case RoleNode:
		return "node"
	}
	return "none"
}

// ParseRole reads a user role's name (admin, operator or reader).
func ParseRole(s string) (Role, error) {
	switch s {
	case "reader":
		return RoleReader, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want admin, operator or reader)", s)
}

// Access says who may call a procedure: users of role Least or above, and
// the cluster's members when Node is set. Least RoleNode (with Node) is
// the members alone, no user.
type Access struct {
	Least Role
	// Node: members call it for each other: the internal queries, and the
	// changes a node forwards to the metadata leader. A forwarded change
	// was authorised on the node the user called, against the user's role,
	// before it read the request (Authorize); the leader then trusts the
	// node credential alone. Forwarding the user's role in a header instead
	// would add nothing: whoever holds the node credential could claim any
	// role in it.
	Node bool
}

// procedures is the least role of every procedure of the API, in one
// place. A procedure missing here needs RoleAdmin (AccessOf); the tests
// check every procedure of the generated descriptors has an entry.
var procedures = map[string]Access{
	cepv1connect.PatternServiceValidatePatternProcedure: {Least: RoleReader},
	// reads of what changes make are the metadata leader's, forwarded
	// to it like changes (linearizable reads)
	cepv1connect.PatternServiceListPatternsProcedure:   {Least: RoleReader, Node: true},
	cepv1connect.PatternServiceGetPatternProcedure:     {Least: RoleReader, Node: true},
	cepv1connect.PatternServiceExplainPatternProcedure: {Least: RoleReader},
	cepv1connect.PatternServiceDeployPatternProcedure:  {Least: RoleOperator, Node: true},
	cepv1connect.PatternServiceUpdatePatternProcedure:  {Least: RoleOperator, Node: true},
	cepv1connect.PatternServiceDeletePatternProcedure:  {Least: RoleOperator, Node: true},

	// a node that does not lead the key's shard asks its leader
	cepv1connect.PatternServiceInspectKeyProcedure: {Least: RoleReader, Node: true},
	// a node asks the other shards' leaders for their counters
	cepv1connect.PatternServiceGetPatternStatsProcedure: {Least: RoleReader, Node: true},

	cepv1connect.SourceServiceListSourcesProcedure:  {Least: RoleReader, Node: true},
	cepv1connect.SourceServiceGetSourceProcedure:    {Least: RoleReader, Node: true},
	cepv1connect.SourceServiceCreateSourceProcedure: {Least: RoleOperator, Node: true},
	cepv1connect.SourceServiceDeleteSourceProcedure: {Least: RoleOperator, Node: true},
	// events may hold what a reader of the output is not to see
	cepv1connect.SourceServiceSampleSourceProcedure: {Least: RoleOperator},

	cepv1connect.SavepointServiceListSavepointsProcedure:   {Least: RoleReader, Node: true},
	cepv1connect.SavepointServiceCreateSavepointProcedure:  {Least: RoleOperator, Node: true},
	cepv1connect.SavepointServiceRestoreSavepointProcedure: {Least: RoleOperator, Node: true},
	cepv1connect.SavepointServiceDeleteSavepointProcedure:  {Least: RoleOperator, Node: true},

	cepv1connect.ClusterServiceGetStatusProcedure: {Least: RoleReader, Node: true}, // the metadata leader asks a member how far it has caught up
	// nodes ask each other for their shards (how far a replica applied)
	// the publisher's NATS password: whoever may deploy may feed sources
	cepv1connect.ClusterServiceGetPublishAccessProcedure: {Least: RoleOperator},
	// reading from NATS what Tail reads through the API
	cepv1connect.ClusterServiceGetSubscribeAccessProcedure: {Least: RoleReader},
	cepv1connect.ClusterServiceListShardsProcedure:         {Least: RoleReader, Node: true},
	// the cluster's shape is the admin's
	cepv1connect.ClusterServiceRemoveNodeProcedure: {Least: RoleAdmin, Node: true},
	cepv1connect.ClusterServiceSplitShardProcedure: {Least: RoleAdmin, Node: true},

	cepv1connect.MatchServiceTailProcedure: {Least: RoleReader},
}

// AccessOf returns who may call procedure ("/cep.v1.PatternService/
// DeployPattern"); known is false, and the access RoleAdmin alone, for a
// procedure the table does not list.
func AccessOf(procedure string) (a Access, known bool) {
	a, known = procedures[procedure]
	if !known {
		return Access{Least: RoleAdmin}, false
	}
	return a, true
}

// Allows reports whether role r may call what a guards.
func (a Access) Allows(r Role) bool {
	if r == RoleNode {
		return a.Node
	}
	return r != RoleNone && r >= a.Least && a.Least < RoleNode
}
