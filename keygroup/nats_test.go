package keygroup_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

// The embedded NATS servers and connections the tests start must be gone
// when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// partitionKeys are subject tokens of many shapes: ASCII, digits only,
// punctuation NATS allows in a token, long, and multi-byte UTF-8.
func partitionKeys() []string {
	keys := []string{
		"a", "b", "acc-1", "acc-2", "user-42", "order:9001", "0", "00", "-",
		"ключ", "顧客-7", "emoji-🙂", "x_y|z", "a,b", "#hash", "$dollar",
		strings.Repeat("long", 40), "A", "Acc-1", "%41", "key=value&x=1",
	}
	rng := rand.New(rand.NewPCG(7, 11))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:=+,;!@#%^&()[]{}~'\"/\\|"
	for range 200 {
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	return keys
}

// NATS stores "src.<key>" of a stream partitioned by PartitionDestination
// as "src.<block>", the block of OfToken(key, K), and BlockOfSubject reads
// it back.
func TestKeyGroupAgreesWithNATSPartition(t *testing.T) {
	_, js := testutil.JetStream(t, testutil.StartNATS(t, testutil.NATSOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := partitionKeys()
	for _, k := range []int{256, 7, 1000} { // 256: the default K
		name := fmt.Sprintf("SRC%d", k)
		prefix := fmt.Sprintf("src%d", k)
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:     name,
			Subjects: []string{prefix + ".*"},
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source:      prefix + ".*",
				Destination: keygroup.PartitionDestination(prefix, k),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range keys {
			if _, err := js.Publish(ctx, prefix+"."+key, []byte(key)); err != nil {
				t.Fatalf("publish %q: %v", key, err)
			}
		}
		for i, key := range keys {
			msg, err := st.GetMsg(ctx, uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			toks := strings.Split(msg.Subject, ".")
			if len(toks) != 2 || string(msg.Data) != key {
				t.Fatalf("message %d: subject %q for key %q", i+1, msg.Subject, key)
			}
			block, err := strconv.Atoi(toks[1])
			if err != nil {
				t.Fatalf("subject %q: block token is not a number", msg.Subject)
			}
			kg := keygroup.OfToken(key, k)
			if got := keygroup.Partition(key, keygroup.Blocks(k)); got != block {
				t.Errorf("K=%d key %q: NATS block %d, Partition(key, B) %d", k, key, block, got)
			}
			if keygroup.BlockOf(kg, k) != block {
				t.Errorf("K=%d key %q: NATS block %d, key group %d is in block %d", k, key, block, kg, keygroup.BlockOf(kg, k))
			}
			if got, ok := keygroup.BlockOfSubject(msg.Subject, k); !ok || got != block {
				t.Errorf("K=%d: BlockOfSubject(%q) = %d, %v; want %d", k, msg.Subject, got, ok, block)
			}
		}
	}
}

// With several wildcards, partition(K,1,2) hashes the selected tokens
// concatenated in argument order with no separator; DESIGN.md records it.
func TestNATSPartitionOfSeveralTokens(t *testing.T) {
	_, js := testutil.JetStream(t, testutil.StartNATS(t, testutil.NATSOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const k = 64
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "MULTI",
		Subjects: []string{"m.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      "m.*.*",
			Destination: fmt.Sprintf("m.{{partition(%d,2,1)}}.{{wildcard(1)}}.{{wildcard(2)}}", k),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{{"tenant-a", "acc-1"}, {"tenant-b", "acc-1"}, {"x", "yz"}, {"xy", "z"}, {"ключ", "9"}}
	for _, p := range pairs {
		if _, err := js.Publish(ctx, "m."+p[0]+"."+p[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range pairs {
		msg, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := strconv.Atoi(strings.Split(msg.Subject, ".")[1])
		if want := keygroup.Partition(p[1]+p[0], k); got != want {
			t.Errorf("%v: NATS partition %d, Partition(token2+token1) %d (subject %q)", p, got, want, msg.Subject)
		}
	}
}
