package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// natsAuth is how a command that talks to NATS itself authenticates, with
// the nats CLI's flags. The password is never a flag value (command lines
// are visible to every user of the host): it comes from
// --nats-password-file or NATS_PASSWORD.
type natsAuth struct {
	Creds        string // --nats-creds: a credentials file (JWT and NKey seed)
	User         string // --nats-user
	PasswordFile string // --nats-password-file
	Password     string // the password, read from PasswordFile or NATS_PASSWORD
	CA           string // --nats-ca: PEM CAs for a NATS server's TLS certificate
}

func (a *natsAuth) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.Creds, "nats-creds", "", "NATS credentials file (default: the publisher user the cluster gives for its embedded NATS)")
	f.StringVar(&a.User, "nats-user", "", "NATS user, its password from --nats-password-file or $NATS_PASSWORD")
	f.StringVar(&a.PasswordFile, "nats-password-file", "", "file holding the NATS user's password")
	f.StringVar(&a.CA, "nats-ca", "", "PEM file of CAs to trust for the NATS server's TLS certificate")
}

// fromContext fills in what the flags leave unset from the context in
// use (g): its NATS credentials unless a user is given, its CA; it returns
// url, or the context's NATS URL when the --nats flag is not given.
func (a *natsAuth) fromContext(cmd *cobra.Command, g globalOptions, url string) string {
	if !flagChanged(cmd, "nats-creds") && !flagChanged(cmd, "nats-user") && g.NATSCreds != "" {
		a.Creds = g.NATSCreds
	}
	if !flagChanged(cmd, "nats-ca") && g.NATSCA != "" {
		a.CA = g.NATSCA
	}
	if !flagChanged(cmd, "nats") && g.NATS != "" {
		return g.NATS
	}
	return url
}

// resolve reads the password and checks the flags go together.
func (a *natsAuth) resolve(d *deps) error {
	if a.PasswordFile != "" {
		b, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return fmt.Errorf("--nats-password-file: %w", err)
		}
		a.Password = strings.TrimRight(string(b), "\r\n")
	} else if d.getenv != nil {
		a.Password = d.getenv("NATS_PASSWORD")
	}
	switch {
	case a.Creds != "" && a.User != "":
		return errors.New("give either --nats-creds or --nats-user, not both")
	case a.PasswordFile != "" && a.User == "":
		return errors.New("--nats-password-file needs --nats-user")
	}
	return nil
}

// given tells whether the user said who to be on NATS.
func (a natsAuth) given() bool { return a.Creds != "" || a.User != "" }

func (a natsAuth) options() []nats.Option {
	var opts []nats.Option
	switch {
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.CA != "" {
		opts = append(opts, nats.RootCAs(a.CA))
	}
	return opts
}

// publishTarget returns the NATS URL to publish to and who to be there.
// Without credentials of the user's own it asks the cluster for publish
// access (the publisher user of its embedded NATS) and uses it at the
// cluster's NATS URLs (as reported, or one of them given with --nats). A
// cluster that does not serve GetPublishAccess, or a user with
// credentials, gets the URL from the cluster's status.
func publishTarget(ctx context.Context, c *apiClients, url string, auth natsAuth) (string, natsAuth, error) {
	if auth.given() {
		if url == "" {
			return statusNATSURL(ctx, c, auth)
		}
		return url, auth, nil
	}
	res, err := c.cluster.GetPublishAccess(ctx, connect.NewRequest(&cepv1.GetPublishAccessRequest{}))
	switch {
	case connect.CodeOf(err) == connect.CodeUnimplemented:
		if url == "" {
			return statusNATSURL(ctx, c, auth)
		}
		return url, auth, nil
	case connect.CodeOf(err) == connect.CodeFailedPrecondition && url != "":
		return url, auth, nil // an external NATS that may need no user
	case err != nil:
		return "", auth, err
	}
	urls := res.Msg.GetNatsUrls()
	if url != "" && !slices.Contains(urls, url) {
		return url, auth, nil // not the cluster's NATS: not its publisher user
	}
	auth.User, auth.Password = res.Msg.GetUser(), res.Msg.GetPassword()
	if url == "" {
		if len(urls) == 0 {
			return "", auth, errors.New("the cluster reports no NATS URL: give one with --nats URL")
		}
		url = strings.Join(urls, ",")
	}
	return url, auth, nil
}

func statusNATSURL(ctx context.Context, c *apiClients, auth natsAuth) (string, natsAuth, error) {
	st, err := c.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		return "", auth, err
	}
	url := st.Msg.GetSummary().GetNatsUrl()
	if url == "" {
		return "", auth, errors.New("the cluster reports no NATS URL: give one with --nats URL")
	}
	return url, auth, nil
}
