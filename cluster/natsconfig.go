package cluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cepcluster/cep/cluster/secret"
)

// NATSServerConfig is a nats-server configuration file with JetStream
// (stored in storeDir), the HTTP monitor on httpPort (0: none), and the
// users a node's embedded server has for the cluster secret sec (its own
// and the publisher's, with the same permissions), for an external NATS
// that the cluster's nodes reach as cep-node with no credentials file and
// publishers as cep-publisher (ClusterService.GetPublishAccess hands out
// its password). One source of the users, so the external server confines
// publishers exactly as the embedded one does; only the subjects of
// derived sources, which the embedded server learns as they are created,
// are not denied to publishers there.
func NATSServerConfig(sec secret.Secret, storeDir string, httpPort int) string {
	var b strings.Builder
	b.WriteString("# nats-server configuration for a CEP cluster (cepnode nats-config): it holds\n# passwords derived from the cluster secret; keep it as secret as that.\n")
	b.WriteString("port: 4222\n")
	if httpPort > 0 {
		fmt.Fprintf(&b, "http_port: %d\n", httpPort)
	}
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", strconv.Quote(storeDir))
	b.WriteString("authorization {\n  users: [\n")
	for _, u := range natsUsers(sec) {
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: %s\n", strconv.Quote(u.Username), strconv.Quote(u.Password))
		if p := u.Permissions; p != nil {
			b.WriteString("      permissions: {\n")
			writeSubjectPermission(&b, "publish", p.Publish)
			writeSubjectPermission(&b, "subscribe", p.Subscribe)
			b.WriteString("      }\n")
		}
		b.WriteString("    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func writeSubjectPermission(b *strings.Builder, name string, p *server.SubjectPermission) {
	if p == nil {
		return
	}
	list := func(subjects []string) string {
		q := make([]string, len(subjects))
		for i, s := range subjects {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	fmt.Fprintf(b, "        %s: {\n", name)
	if len(p.Allow) > 0 {
		fmt.Fprintf(b, "          allow: %s\n", list(p.Allow))
	}
	if len(p.Deny) > 0 {
		fmt.Fprintf(b, "          deny: %s\n", list(p.Deny))
	}
	b.WriteString("        }\n")
}
