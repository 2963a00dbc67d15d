package main

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/size"
)

type sourceCreateOptions struct {
	globalOptions
	Name     string
	Subjects []string
	Key      string
	Stream   string
	// retention limits of the stream the cluster creates; 0: none
	MaxAge   time.Duration
	MaxBytes sizeValue
	MaxMsgs  int64
	// Schema is the file declaring the events' fields
	Schema string
	fields []*cepv1.SourceField
	// Strict: events that do not fit the schema are dead-lettered
	Strict bool
}

// sizeValue is a byte-count flag: "512M", "10GiB" (see package size).
type sizeValue int64

func (v *sizeValue) String() string {
	if *v == 0 {
		return "0"
	}
	return size.Format(int64(*v))
}

func (v *sizeValue) Set(s string) error {
	n, err := size.Parse(s)
	*v = sizeValue(n)
	return err
}

func (*sizeValue) Type() string { return "size" }

func newSourceCreateCmd(d *deps, runF func(*sourceCreateOptions) error) *cobra.Command {
	opts := &sourceCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Register a source",
		Long: `Register a source. --key is the CEL expression over the event (e) giving
its partition key, which publishers put in the subject as NAME.<key token>
(see cepctl publish). Without --stream and --subjects the cluster creates a
JetStream stream for NAME.<key token>, stored by key-group block, and patterns
keyed like the source read it directly. With --subjects the cluster creates a
stream for those subjects; with --stream the source reads that existing
stream (only the --subjects given, if any). Such sources are not stored by
block: every pattern reads them re-keyed by its own key (one shard forwards
each event into a derived source, listed by cepctl source list).

--max-age, --max-bytes and --max-msgs bound what the stream the cluster
creates keeps: past a limit its oldest events are removed, read or not (a
pattern that falls further behind than that loses them, and says so in the
log). Without them the stream keeps every event. Derived sources keep the
same limits; an existing --stream keeps its own.

--schema FILE declares the fields the events have, as YAML lines of
field: type (string, number, integer, boolean, object, array, null, any;
a trailing ? for an optional field; nested maps for an object's fields)
or as a JSON Schema object ("properties", "type", "required"): cepctl
source infer-schema writes one from a sample. Patterns reading the source
are then checked against it when validated or deployed, a misspelt field
refused with the closest declared one. With --strict (which needs --schema)
an event that does not fit it (a required field missing, a value of another
type) is dead-lettered with the field and the reason (cepctl tail
--dead-letters) instead of reaching the patterns.`,
		Example: `  cepctl source create logins --key e.user
  cepctl source create clicks --subjects 'web.clicks.*'
  cepctl source create metrics --key e.host --max-age 72h --max-bytes 50G
  cepctl source create bank --key e.account --schema bank.schema.yaml
  cepctl source create payments --key e.account --schema payments.schema.yaml --strict
  cepctl source create eu-orders --stream ORDERS --subjects 'shop.orders.eu.>' --key e.customer.id`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Name = g, args[0]
			switch {
			case opts.MaxAge < 0 || opts.MaxAge > 0 && opts.MaxAge < time.Second:
				return fmt.Errorf("--max-age %v: at least 1s (or 0, no limit)", opts.MaxAge)
			case opts.MaxMsgs < 0:
				return fmt.Errorf("--max-msgs %d: positive (or 0, no limit)", opts.MaxMsgs)
			case opts.Stream != "" && (opts.MaxAge > 0 || opts.MaxBytes > 0 || opts.MaxMsgs > 0):
				return fmt.Errorf("--max-age, --max-bytes and --max-msgs bound a stream the cluster creates, not --stream %s (set its limits with nats stream edit)", opts.Stream)
			case opts.Strict && opts.Schema == "":
				return fmt.Errorf("--strict checks events against the fields --schema FILE declares: give --schema too")
			}
			if opts.Schema != "" {
				s, err := readSchemaFile(d, opts.Schema)
				if err != nil {
					return err
				}
				opts.fields = toSchemaFields(s)
			}
			if runF != nil {
				return runF(opts)
			}
			return runSourceCreate(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Subjects, "subjects", nil, "subjects to read, comma-separated or repeated; NATS wildcards allowed (default: the cluster's, NAME.<key token>)")
	cmd.Flags().StringVar(&opts.Key, "key", "", "CEL expression for the partition key, e.g. e.user.id (default: the publisher's subject token)")
	cmd.Flags().StringVar(&opts.Stream, "stream", "", "existing JetStream stream to read (default: the cluster creates one)")
	cmd.Flags().DurationVar(&opts.MaxAge, "max-age", 0, "remove events older than this from the stream, e.g. 72h (default: keep them)")
	cmd.Flags().Var(&opts.MaxBytes, "max-bytes", "remove the oldest events once the stream holds more, e.g. 50G (K, M, G, T: powers of 1024; default: no limit)")
	cmd.Flags().StringVar(&opts.Schema, "schema", "", "file declaring the events' fields (field: type lines, or a JSON Schema; see cepctl source infer-schema)")
	cmd.Flags().BoolVar(&opts.Strict, "strict", false, "dead-letter the events that do not fit --schema, with the reason, instead of passing them to patterns")
	cmd.Flags().Int64Var(&opts.MaxMsgs, "max-msgs", 0, "remove the oldest events once the stream holds more events than this (default: no limit)")
	return cmd
}

func runSourceCreate(ctx context.Context, d *deps, opts *sourceCreateOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.sources.CreateSource(ctx, connect.NewRequest(&cepv1.CreateSourceRequest{
		Name: opts.Name, Subjects: opts.Subjects, Stream: opts.Stream, Key: opts.Key, Limits: opts.limits(),
		Fields: opts.fields, Strict: opts.Strict,
	}))
	if err != nil {
		return err
	}
	s := res.Msg.GetSource()
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, s)
	}
	_, err = fmt.Fprintf(d.stdout, "created source %s (stream %s, subjects %s, key %s)\n",
		s.GetName(), orDash(s.GetStream()), joinOrDash(s.GetSubjects()), orDash(s.GetKey()))
	return err
}

// limits is the request's SourceLimits, nil without any.
func (o *sourceCreateOptions) limits() *cepv1.SourceLimits {
	if o.MaxAge == 0 && o.MaxBytes == 0 && o.MaxMsgs == 0 {
		return nil
	}
	l := &cepv1.SourceLimits{MaxBytes: int64(o.MaxBytes), MaxMsgs: o.MaxMsgs}
	if o.MaxAge > 0 {
		l.MaxAge = durationpb.New(o.MaxAge)
	}
	return l
}
