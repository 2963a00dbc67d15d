package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The NATS credential flags go together as the nats CLI's do, and a
// password comes from a file or the environment, never a flag value.
func TestPublishNATSCredentialFlags(t *testing.T) {
	url := publishAPI(t, "logins", "e.user", "nats://127.0.0.1:1")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cepctl(t, url, "publish", "-s", "logins", "--nats-creds", "x.creds", "--nats-user", "u").mustFail(t, "give either --nats-creds or --nats-user, not both")
	cepctl(t, url, "publish", "-s", "logins", "--nats-password-file", pw).mustFail(t, "--nats-password-file needs --nats-user")
	cepctl(t, url, "publish", "-s", "logins", "--nats-user", "u", "--nats-password-file", filepath.Join(t.TempDir(), "missing")).mustFail(t, "--nats-password-file:")
	cepctl(t, url, "publish", "-s", "logins", "--nats-password", "s3cret").mustFail(t, "unknown flag: --nats-password")

	var got natsAuth
	d := &deps{getenv: func(k string) string { return map[string]string{"NATS_PASSWORD": "from-env"}[k] }}
	got = natsAuth{User: "u", PasswordFile: pw}
	if err := got.resolve(d); err != nil || got.Password != "s3cret" {
		t.Errorf("password file: %q, %v", got.Password, err)
	}
	got = natsAuth{User: "u"}
	if err := got.resolve(d); err != nil || got.Password != "from-env" {
		t.Errorf("NATS_PASSWORD: %q, %v", got.Password, err)
	}
}
