package cluster

import (
	"context"
	"fmt"
	"net"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/secret"
)

// peerAt returns the client of the node serving the API at apiAddr. The
// credential one node presents to another is decided here only: the node
// credential, never a user's token. A change forwarded to the metadata
// leader carries it too: this node authorised the user's call against the
// user's role before it read the request (see api.Access.Node).
func (n *Node) peerAt(apiAddr string) peer.Client {
	return peer.New(n.peerHTTP, apiAddr, n.cfg.apiURL(apiAddr), n.cfg.nodeCredential())
}

// metaLeaderPeer returns the client of the metadata leader; here is true
// when this node leads.
func (n *Node) metaLeaderPeer() (p peer.Client, here bool, err error) {
	if n.IsMetaLeader() {
		return peer.Client{}, true, nil
	}
	if l, ok := n.peer(n.MetaLeader()); ok && l.APIAddr != "" {
		return n.peerAt(l.APIAddr), false, nil
	}
	return peer.Client{}, false, fmt.Errorf("%w: no metadata leader yet: the change was not applied; retry", api.ErrUnavailable)
}

// forwarded sends a change to the metadata leader when this node does not
// lead, as method of the leader's client (peer.Client.Patterns, say); done
// reports whether it was forwarded (or failed to be). The leader's error
// comes back as a Connect error with its code and message, which the API
// hands on as they are.
func forwarded[C, Req, Res any](n *Node, ctx context.Context, r *Req, client func(peer.Client) C, method func(C, context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (res *Res, done bool, err error) {
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
