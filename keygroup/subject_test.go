package keygroup_test

import (
	"testing"

	"github.com/cepcluster/cep/keygroup"
)

// Stream and subject names are what a running cluster's streams are called
// and what publishers and readers use: they never change.
func TestSubjectLayoutGolden(t *testing.T) {
	derived := keygroup.DerivedSourceName("tx", "e.account", "")
	for _, c := range []struct{ got, want string }{
		{keygroup.SourceStreamName("bank"), "CEP_SRC_BANK"},
		{keygroup.SourceStreamName("web-clicks"), "CEP_SRC_WEB_CLICKS"},
		{derived, "tx.k52564ac3"},
		{keygroup.DerivedSourceName("tx", "e.account", "pairs"), "tx.k4d67ae2b"},
		{keygroup.SourceStreamName(derived), "CEP_RK_TX_K52564AC3"},
		{keygroup.SourceStreamName("web-clicks.k00ff"), "CEP_RK_WEB_CLICKS_K00FF"},
		{keygroup.SourceWildcard("bank"), "bank.*"},
		{keygroup.PartitionDestination("bank", 256), "bank.{{partition(32,1)}}"},
		{keygroup.PartitionDestination("bank", 7), "bank.{{partition(1,1)}}"},
		{keygroup.OutputSubjectRoot, "cep.out."},
		{keygroup.DeadLetterRoot, "cep.deadletter."},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
