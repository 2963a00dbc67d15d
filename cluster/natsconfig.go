package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/keygroup"
)

// The NATS accounts of a cluster with a secret. The nodes and every stream
// live in the node account; publishers live in an account of their own
// that imports the node account's subjects as a service. A publish with a
// reply subject thus reaches a source's stream with its reply rewritten
// to a one-time _R_ subject, and JetStream's pub-ack goes back into the
// publisher account alone: a reply naming cep.out.<pattern> or a
// savepoint's $O.<bucket>.M.<part> cannot make JetStream write there,
// which it did while both users shared one account (NATS checks a
// publish's subject against the permissions, never its reply).
const (
	NATSNodeAccount      = "CEP"
	NATSPublisherAccount = "CEP_PUBLISH"
	// NATSSubscriberAccount holds the subscriber user: it imports the
	// output and dead-letter subjects as streams and nothing else, so its
	// users cannot see a source's events or the node account's traffic
	// whatever their permissions say.
	NATSSubscriberAccount = "CEP_SUBSCRIBE"
)

// SubscriberSubjects are what the subscriber user may read: the
// patterns' output and the dead letters.
var SubscriberSubjects = []string{keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">"}

// subscriberPermissions let a consumer subscribe to the output and
// dead-letter subjects and do nothing else: no publish at all (not even
// a reply: it serves no requests).
func subscriberPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(SubscriberSubjects)},
	}
}

// PublisherLimits bound what the publisher user may hold on the server,
// whose memory is the node's own for the embedded one: connections of the
// publisher account, subscriptions per connection (a publisher needs one,
// for its acks; each costs about a kilobyte), and the bytes of a message.
type PublisherLimits struct {
	MaxConnections   int
	MaxSubscriptions int
	MaxPayload       int
}

// DefaultPublisherLimits are the embedded server's and `cepnode
// nats-config`'s: at most 256 × 100 subscriptions (a few tens of
// megabytes) and events of 1 MiB, NATS's own default payload.
var DefaultPublisherLimits = PublisherLimits{MaxConnections: 256, MaxSubscriptions: 100, MaxPayload: 1 << 20}

// publisherPermissions let a producer publish events and receive the
// JetStream acks of its publishes (on _INBOX.>, where nats clients take
// replies), and nothing else: never the output or dead-letter subjects
// (forged matches), the shards' clock reports (forged event time),
// NATS's and JetStream's own subjects ($JS.API: stream and consumer
// management; $JS.ACK: acking the node's deliveries), the inboxes
// (forged replies) nor the one-time reply subjects of other publishers'
// acks (_R_). Any other subject may be published to, since sources may
// read subjects of the operator's choice (cepctl source create
// --subjects); a subject no stream stores goes nowhere, as the publisher
// can subscribe to nothing but _INBOX.>. It needs no response
// permission: it serves no requests. Publishers share the user, so one
// may see the acks (stream and sequence, not the events) of another.
// The subjects of derived sources are the cluster's too: a shard writes
// the re-keyed events there; the embedded server maps them into
// deniedSubjectRoot (guardDerivedSources).
func publisherPermissions() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{">"},
			Deny: []string{
				keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">", ClockSubjectRoot + ">",
				"$JS.>", "$JSC.>", "$KV.>", "$O.>", "$SYS.>", "$NRG.>", "$MQTT.>",
				"_INBOX.>", nodeInboxPrefix + ".>", "_R_.>", deniedSubjectRoot + ".>",
			},
		},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}

// natsUsers are the users for the cluster secret sec: the node's (in
// NATSNodeAccount), the publisher's (in NATSPublisherAccount) and the
// subscriber's (in NATSSubscriberAccount).
func natsUsers(sec secret.Secret) []*server.User {
	return []*server.User{
		{Username: NATSNodeUser, Password: hashed(sec.Token(secret.NATSNode))},
		{Username: NATSPublisherUser, Password: hashed(sec.Token(secret.NATSPublic)), Permissions: publisherPermissions()},
		{Username: NATSSubscriberUser, Password: hashed(sec.Token(secret.NATSReader)), Permissions: subscriberPermissions()},
	}
}

// hashed is a password as bcrypt, which nats-server checks a client's
// against: the configuration (the embedded server's, or the one printed
// for an operator's server) then holds no usable password, and the server
// no longer warns of plaintext ones at every start. The passwords are
// 256-bit keys derived from the cluster secret, so bcrypt's cost adds
// nothing against guessing them: the lowest keeps the check of a
// connection at about a millisecond. (The embedded server is never
// reloaded, which would check every client again: guardDerivedSources.)
func hashed(password string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return password // longer than bcrypt takes (72 bytes): never for a derived key
	}
	return string(h)
}

// natsAccounts is the accounts block of a nats-server configuration: the
// node account with JetStream and the node user, exporting its subjects
// as a service; the publisher account without JetStream, with the
// publisher user, importing them, and lim.
func natsAccounts(sec secret.Secret, lim PublisherLimits) string {
	var b strings.Builder
	users := natsUsers(sec)
	b.WriteString("accounts {\n")
	fmt.Fprintf(&b, "  %s: {\n    jetstream: enabled\n    users: [\n", NATSNodeAccount)
	writeUser(&b, users[0])
	b.WriteString("    ]\n")
	// a service: the importer's replies are rewritten, and answered
	// within its own account
	b.WriteString("    exports: [\n      { service: \">\" }\n")
	for _, subj := range SubscriberSubjects {
		fmt.Fprintf(&b, "      { stream: %s }\n", strconv.Quote(subj))
	}
	b.WriteString("    ]\n  }\n")
	fmt.Fprintf(&b, "  %s: {\n    jetstream: disabled\n    users: [\n", NATSPublisherAccount)
	writeUser(&b, users[1])
	b.WriteString("    ]\n")
	fmt.Fprintf(&b, "    imports: [\n      { service: { account: %s, subject: \">\" } }\n    ]\n", NATSNodeAccount)
	fmt.Fprintf(&b, "    limits: {\n      max_connections: %d\n      max_subscriptions: %d\n      max_payload: %d\n    }\n",
		lim.MaxConnections, lim.MaxSubscriptions, lim.MaxPayload)
	b.WriteString("  }\n")
	fmt.Fprintf(&b, "  %s: {\n    jetstream: disabled\n    users: [\n", NATSSubscriberAccount)
	writeUser(&b, users[2])
	b.WriteString("    ]\n    imports: [\n")
	for _, subj := range SubscriberSubjects {
		fmt.Fprintf(&b, "      { stream: { account: %s, subject: %s } }\n", NATSNodeAccount, strconv.Quote(subj))
	}
	// the same bounds as the publisher's: readers are as many and need
	// as few subscriptions
	fmt.Fprintf(&b, "    ]\n    limits: {\n      max_connections: %d\n      max_subscriptions: %d\n    }\n",
		lim.MaxConnections, lim.MaxSubscriptions)
	b.WriteString("  }\n}\n")
	return b.String()
}

func writeUser(b *strings.Builder, u *server.User) {
	fmt.Fprintf(b, "      {\n        user: %s\n        password: %s\n", strconv.Quote(u.Username), strconv.Quote(u.Password))
	if p := u.Permissions; p != nil {
		b.WriteString("        permissions: {\n")
		writeSubjectPermission(b, "publish", p.Publish)
		writeSubjectPermission(b, "subscribe", p.Subscribe)
		b.WriteString("        }\n")
	}
	b.WriteString("      }\n")
}

// setNATSAccounts gives opts (the embedded server's) the accounts and
// users of NATSServerConfig, parsed from the same text.
func setNATSAccounts(opts *server.Options, sec secret.Secret, lim PublisherLimits) error {
	var parsed server.Options
	if err := parsed.ProcessConfigString(natsAccounts(sec, lim)); err != nil {
		return fmt.Errorf("accounts: %w", err)
	}
	opts.Accounts, opts.Users = parsed.Accounts, parsed.Users
	return nil
}

// moveGlobalStore moves the JetStream store of an embedded server that
// kept its streams in NATS's global account (its users had no account of
// their own before) into the node account's, so that a node keeps its
// sources, records and savepoints across the change. Nothing to do for a
// server without a secret (still the global account), a new store, or one
// moved already.
func moveGlobalStore(dir string, sec secret.Secret) error {
	if sec.IsZero() {
		return nil
	}
	from := filepath.Join(dir, server.JetStreamStoreDir, "$G")
	to := filepath.Join(dir, server.JetStreamStoreDir, NATSNodeAccount)
	if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(to); err == nil {
		return nil // both: the node account's is the one in use
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("moving the JetStream store of the global account to account %s: %w", NATSNodeAccount, err)
	}
	return nil
}

// NATSServerConfig is a nats-server configuration file with JetStream
// (stored in storeDir), the HTTP monitor on httpPort (0: none), and the
// accounts and users a node's embedded server has for the cluster secret
// sec (natsAccounts), with lim for the publisher, for an external NATS
// that the cluster's nodes reach as cep-node with no credentials file and
// publishers as cep-publisher (ClusterService.GetPublishAccess hands out
// its password). One source of the accounts, so the external server
// confines publishers exactly as the embedded one does; only the subjects
// of derived sources, which the embedded server learns as they are
// created, are not denied to publishers there.
func NATSServerConfig(sec secret.Secret, storeDir string, httpPort int, lim PublisherLimits) string {
	var b strings.Builder
	b.WriteString("# nats-server configuration for a CEP cluster (cepnode nats-config): its\n# users' passwords are bcrypt hashes of keys derived from the cluster secret.\n")
	b.WriteString("port: 4222\n")
	if httpPort > 0 {
		fmt.Fprintf(&b, "http_port: %d\n", httpPort)
	}
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", strconv.Quote(storeDir))
	b.WriteString(natsAccounts(sec, lim))
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
	fmt.Fprintf(b, "          %s: {\n", name)
	if len(p.Allow) > 0 {
		fmt.Fprintf(b, "            allow: %s\n", list(p.Allow))
	}
	if len(p.Deny) > 0 {
		fmt.Fprintf(b, "            deny: %s\n", list(p.Deny))
	}
	b.WriteString("          }\n")
}
