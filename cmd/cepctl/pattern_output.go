package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// outputFlags are what deploy and update say of a pattern's output: its
// bound on partial matches per key and the record types it publishes.
type outputFlags struct {
	MaxPartialMatches *uint64 // nil: not given
	Records           []cepv1.RecordType

	bound   uint64
	records []string
}

var recordTypes = map[string]cepv1.RecordType{
	"match":   cepv1.RecordType_RECORD_TYPE_MATCH,
	"timeout": cepv1.RecordType_RECORD_TYPE_TIMEOUT,
	"late":    cepv1.RecordType_RECORD_TYPE_LATE,
}

// add defines the flags on cmd; what they say when not given (the
// server's default, or for an update the current setting) is absent.
func (o *outputFlags) add(cmd *cobra.Command, absent string) {
	cmd.Flags().Uint64Var(&o.bound, "max-partial-matches", 0, "the most partial matches one key keeps; when an event leaves more, the latest-starting are dropped and counted; 0: no bound (default: "+absent+")")
	cmd.Flags().StringSliceVar(&o.records, "records", nil, "the record types to publish, of match, timeout and late; the others are counted and dropped (default: "+absent+")")
}

// deployRequest is the request deploying f with these flags.
func (o *outputFlags) deployRequest(f specFile, subject string, fromStart bool) *cepv1.DeployPatternRequest {
	return &cepv1.DeployPatternRequest{Spec: f.spec, Format: f.format, Name: f.name, OutputSubject: subject,
		MaxPartialMatches: o.MaxPartialMatches, Records: o.Records, FromStart: fromStart}
}

// updateRequest is the request updating a pattern to f with these flags.
func (o *outputFlags) updateRequest(f specFile, subject string, policy cepv1.UpdatePolicy) *cepv1.UpdatePatternRequest {
	return &cepv1.UpdatePatternRequest{Spec: f.spec, Format: f.format, Name: f.name, Policy: policy, OutputSubject: subject,
		MaxPartialMatches: o.MaxPartialMatches, Records: o.Records}
}

// parse reads the flags given on cmd.
func (o *outputFlags) parse(cmd *cobra.Command) error {
	if cmd.Flags().Changed("max-partial-matches") {
		b := o.bound
		o.MaxPartialMatches = &b
	}
	for _, name := range o.records {
		rt, ok := recordTypes[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return fmt.Errorf("--records: unknown record type %q: use match, timeout or late", name)
		}
		o.Records = append(o.Records, rt)
	}
	if cmd.Flags().Changed("records") && len(o.Records) == 0 {
		return fmt.Errorf("--records: name at least one of match, timeout and late")
	}
	o.bound, o.records = 0, nil
	return nil
}
