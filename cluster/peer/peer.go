// Package peer is how one node calls another's API: the changes a node
// forwards to the metadata leader and what nodes ask each other (their
// shards' replicas, their health, a savepoint's part, their metadata
// progress). The public API's answers are read here only: what
// node-to-node decisions take comes back as plan.Report or this package's
// types (ReplicaReport, ShardRollout, State), except Shards, whose answer
// a node passes on as its own API's.
package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/plan"
)

// SavepointPartPath is the internal endpoint through which the metadata
// leader has a node holding a shard's replica write that shard's part.
const SavepointPartPath = "/internal/v1/savepoint-part"

// Client calls the API of one other node of the cluster. The zero Client
// stands for no node (a caller's "none"); make one with New.
type Client struct {
	hc   *http.Client
	addr string // the node's API address, as the metadata has it
	base string // its base URL
	opts []connect.ClientOption
	// auth is the Authorization header of the calls outside Connect
	auth string
}

// New returns the client of the node serving the API at addr under the
// base URL base, calling through hc and presenting credential (none when
// empty) on every call but the health probe.
func New(hc *http.Client, addr, base, credential string) Client {
	c := Client{hc: hc, addr: addr, base: base}
	if credential != "" {
		c.opts = []connect.ClientOption{api.WithClientToken(credential)}
		c.auth = "Bearer " + credential
	}
	return c
}

// Patterns is the node's PatternService.
func (c Client) Patterns() cepv1connect.PatternServiceClient {
	return cepv1connect.NewPatternServiceClient(c.hc, c.base, c.opts...)
}

// Sources is the node's SourceService.
func (c Client) Sources() cepv1connect.SourceServiceClient {
	return cepv1connect.NewSourceServiceClient(c.hc, c.base, c.opts...)
}

// Cluster is the node's ClusterService.
func (c Client) Cluster() cepv1connect.ClusterServiceClient {
	return cepv1connect.NewClusterServiceClient(c.hc, c.base, c.opts...)
}

// Savepoints is the node's SavepointService.
func (c Client) Savepoints() cepv1connect.SavepointServiceClient {
	return cepv1connect.NewSavepointServiceClient(c.hc, c.base, c.opts...)
}

// Shards asks the node about its shard replicas (ListShards), waiting a
// second at most. Its answer is the public API's: for a caller that
// passes it on as its own API's answer; decisions take Reports, Replica
// or Rollouts.
func (c Client) Shards(ctx context.Context) ([]*cepv1.Shard, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := c.Cluster().ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.Shards, nil
}

// Reports asks the node about its replicas as Shards does, and returns
// them as the cluster's decisions take them (plan.Report). (Its wire is
// ListShards, which every node of every version serves.)
func (c Client) Reports(ctx context.Context) ([]plan.Report, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	return ReportsOf(shards), nil
}

// ReportsOf is a node's list of shards as reports.
func ReportsOf(shards []*cepv1.Shard) []plan.Report {
	out := make([]plan.Report, 0, len(shards))
	for _, sh := range shards {
		r := plan.Report{Group: uint64(sh.Id), Leader: sh.LeaderNodeId, Quarantined: sh.Quarantined != ""}
		for _, rep := range sh.Replicas {
			r.Servers = append(r.Servers, plan.Server{ID: rep.NodeId, Voter: rep.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER})
		}
		out = append(out, r)
	}
	return out
}

// Applied asks the node how far its replica of shard id has applied the
// log.
func (c Client) Applied(ctx context.Context, id uint64) (uint64, error) {
	rep, err := c.Replica(ctx, id)
	return rep.Applied, err
}

// ReplicaReport is what a node says of its replica of a shard: how far it
// has applied the log and how long its node has not reached NATS.
type ReplicaReport struct {
	ID              string
	Voter           bool
	Applied         uint64
	NATSUnreachable time.Duration
}

// Plan is what the hand-over rule (plan.HandOverTarget) is told of the
// replica.
func (r ReplicaReport) Plan() plan.Replica {
	return plan.Replica{ID: r.ID, Voter: r.Voter, Applied: r.Applied, NATSReachable: r.NATSUnreachable == 0}
}

// Replica asks the node about its replica of shard id: how far it has
// applied the log and whether the node reaches NATS (ID and Voter are not
// filled in: the caller knows them from the shard's configuration).
func (c Client) Replica(ctx context.Context, id uint64) (ReplicaReport, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return ReplicaReport{}, err
	}
	for _, sh := range shards {
		if uint64(sh.Id) == id {
			return ReplicaReport{Applied: sh.LastAppliedIndex, NATSUnreachable: time.Duration(sh.NatsUnreachableMs) * time.Millisecond}, nil
		}
	}
	return ReplicaReport{}, fmt.Errorf("node at %s has no replica of shard %d", c.addr, id)
}

// ShardRollout is what a node says of its replica of a shard that tells
// whether a change has reached it: the pattern versions it runs and the
// savepoint restore its state came from.
type ShardRollout struct {
	Shard     uint64
	Running   []PatternVersion // as the node lists them
	RestoreID string
}

// PatternVersion is a pattern a replica runs, at its version.
type PatternVersion struct {
	Name    string
	Version uint64
}

// Rollouts asks the node about its replicas as Shards does, and returns
// what a change's rollout reads of them.
func (c Client) Rollouts(ctx context.Context) ([]ShardRollout, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ShardRollout, 0, len(shards))
	for _, sh := range shards {
		r := ShardRollout{Shard: uint64(sh.Id), RestoreID: sh.RestoreId}
		for _, pv := range sh.Running {
			r.Running = append(r.Running, PatternVersion{Name: pv.Name, Version: pv.Version})
		}
		out = append(out, r)
	}
	return out, nil
}

// State is what a node's health probe says of it. The zero State is Dead:
// a node not heard from does not count as serving.
type State int

const (
	Dead    State = iota // does not answer
	Suspect              // answers, but not that it serves
	Alive                // answers that it serves
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	}
	return "dead"
}

// Probe asks the node's /healthz whether it serves, waiting half a second
// at most.
func (c Client) Probe(ctx context.Context) State {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return Dead
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return Dead
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Suspect
	}
	return Alive
}

// SavepointPart has the node write its replica's part of a savepoint
// (body: the part's request as JSON) and returns its answer, the shard's
// source positions as JSON; when the node answers otherwise, the error is
// what it said.
func (c Client) SavepointPart(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+SavepointPartPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	return b, nil
}
