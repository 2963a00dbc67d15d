package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/cluster/secret"
)

// peerClient calls the API of another node of the cluster: the changes a
// node forwards to the metadata leader and what nodes ask each other
// (their shards, their health, a savepoint's part).
type peerClient struct {
	hc   *http.Client
	addr string // the node's API address, as the metadata has it
	base string // its base URL
	opts []connect.ClientOption
	// auth is the Authorization header of the calls outside Connect
	auth string
}

// peerAt returns the client of the node serving the API at apiAddr.
func (n *Node) peerAt(apiAddr string) peerClient {
	p := peerClient{hc: n.peerHTTP, addr: apiAddr, base: n.cfg.apiURL(apiAddr)}
	// The credential one node presents to another is decided here only:
	// the node credential, never a user's token. A change forwarded to
	// the metadata leader carries it too: this node authorised the user's
	// call against the user's role before it read the request (see
	// api.Access.Node).
	if tok := n.cfg.nodeCredential(); tok != "" {
		p.opts = []connect.ClientOption{api.WithClientToken(tok)}
		p.auth = "Bearer " + tok
	}
	return p
}

func (p peerClient) patterns() cepv1connect.PatternServiceClient {
	return cepv1connect.NewPatternServiceClient(p.hc, p.base, p.opts...)
}

func (p peerClient) sources() cepv1connect.SourceServiceClient {
	return cepv1connect.NewSourceServiceClient(p.hc, p.base, p.opts...)
}

func (p peerClient) cluster() cepv1connect.ClusterServiceClient {
	return cepv1connect.NewClusterServiceClient(p.hc, p.base, p.opts...)
}

func (p peerClient) savepoints() cepv1connect.SavepointServiceClient {
	return cepv1connect.NewSavepointServiceClient(p.hc, p.base, p.opts...)
}

// Shards asks the node about its shard replicas (ListShards), waiting a
// second at most.
func (p peerClient) Shards(ctx context.Context) ([]*cepv1.Shard, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := p.cluster().ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.Shards, nil
}

// Reports asks the node about its replicas as Shards does, and returns
// them as the cluster's decisions take them (plan.Report): the public
// API's answer is read here only. (Its wire is ListShards, which every
// node of every version serves.)
func (p peerClient) Reports(ctx context.Context) ([]plan.Report, error) {
	shards, err := p.Shards(ctx)
	if err != nil {
		return nil, err
	}
	return reportsOf(shards), nil
}

// reportsOf is a node's list of shards as reports.
func reportsOf(shards []*cepv1.Shard) []plan.Report {
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
func (p peerClient) Applied(ctx context.Context, id uint64) (uint64, error) {
	rep, err := p.Replica(ctx, id)
	return rep.applied, err
}

// Replica asks the node about its replica of shard id: how far it has
// applied the log and whether the node reaches NATS (id and voter are not
// filled in).
func (p peerClient) Replica(ctx context.Context, id uint64) (replicaReport, error) {
	shards, err := p.Shards(ctx)
	if err != nil {
		return replicaReport{}, err
	}
	for _, sh := range shards {
		if uint64(sh.Id) == id {
			return replicaReport{applied: sh.LastAppliedIndex, natsUnreachable: time.Duration(sh.NatsUnreachableMs) * time.Millisecond}, nil
		}
	}
	return replicaReport{}, fmt.Errorf("node at %s has no replica of shard %d", p.addr, id)
}

// Probe asks the node's /healthz whether it serves.
func (p peerClient) Probe(ctx context.Context) cepv1.NodeState {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/healthz", nil)
	if err != nil {
		return cepv1.NodeState_NODE_STATE_DEAD
	}
	res, err := p.hc.Do(req)
	if err != nil {
		return cepv1.NodeState_NODE_STATE_DEAD
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return cepv1.NodeState_NODE_STATE_SUSPECT
	}
	return cepv1.NodeState_NODE_STATE_ALIVE
}

// SavepointPart has the node write its replica's part of a savepoint
// (body: a savepointPart as JSON) and returns its answer, the shard's
// source positions as JSON; when the node answers otherwise, the error is
// what it said.
func (p peerClient) SavepointPart(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+savepointPartPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	res, err := p.hc.Do(req)
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

// metaLeaderPeer returns the client of the metadata leader; here is true
// when this node leads.
func (n *Node) metaLeaderPeer() (p peerClient, here bool, err error) {
	if n.IsMetaLeader() {
		return peerClient{}, true, nil
	}
	if l, ok := n.peer(n.MetaLeader()); ok && l.APIAddr != "" {
		return n.peerAt(l.APIAddr), false, nil
	}
	return peerClient{}, false, fmt.Errorf("%w: no metadata leader yet: the change was not applied; retry", api.ErrUnavailable)
}

// forwarded sends a change to the metadata leader when this node does not
// lead, as method of the leader's client (peerClient.patterns, say); done
// reports whether it was forwarded (or failed to be). The leader's error
// comes back as a Connect error with its code and message, which the API
// hands on as they are.
func forwarded[C, Req, Res any](n *Node, ctx context.Context, r *Req, client func(peerClient) C, method func(C, context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (res *Res, done bool, err error) {
	p, here, err := n.metaLeaderPeer()
	if err != nil {
		return nil, true, err
	}
	if here {
		return nil, false, nil
	}
	out, err := method(client(p), ctx, connect.NewRequest(r))
	if err != nil {
		return nil, true, err
	}
	return out.Msg, true, nil
}

// nodeCredential is the bearer token this node presents to the others,
// and accepts from them as api.RoleNode: derived from the cluster secret,
// so never a user's token. Without a secret (insecure) it is the admin
// token of the API, as all members were once given the same one.
func (c *Config) nodeCredential() string {
	if !c.Secret.IsZero() {
		return c.Secret.Token(secret.Node)
	}
	if c.APIToken != "" {
		return c.APIToken
	}
	return c.Tokens.AdminToken()
}

// apiTokens are the tokens the API accepts: the users' and, with a
// cluster secret, the node credential.
func (c *Config) apiTokens() *api.Tokens {
	t := c.Tokens.Clone()
	if c.APIToken != "" && t.Role(c.APIToken) == api.RoleNone {
		_ = t.Add(api.RoleAdmin, c.APIToken) // Validate refused what Add would
	}
	if !c.Secret.IsZero() {
		_ = t.Add(api.RoleNode, c.nodeCredential()) // derived: no user has it
	}
	return t
}

// partAccess is who may have this node write a savepoint's part: the
// other nodes alone; without a cluster secret, whoever holds the node
// credential then, an admin token.
func (n *Node) partAccess() api.Access {
	if n.cfg.Secret.IsZero() {
		return api.Access{Least: api.RoleAdmin}
	}
	return api.Access{Least: api.RoleNode, Node: true}
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
