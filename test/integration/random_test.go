package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/nfa"
)

// Random patterns of the shapes pattern-v1 allows (contiguities,
// quantifiers, optional and negated stages, groups with quantifiers,
// windows of both kinds on the pattern and on stages, per-loop windows,
// skip strategies, emitted fields, keys other than the source's), deployed side
// by side on one node over one stream of events with some disorder and
// late events: each pattern's records on NATS are exactly those the offline
// engine produces from the same events (ids aside). CEP_SEED picks another
// draw, CEP_RANDOM_PATTERNS another number of patterns.
func TestRandomPatternsEqualOffline(t *testing.T) {
	seed, count := uint64(20261130), 16
	if v := os.Getenv("CEP_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CEP_SEED=%q: want a number", v)
		}
		seed = s
	}
	if v := os.Getenv("CEP_RANDOM_PATTERNS"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			t.Fatalf("CEP_RANDOM_PATTERNS=%q: want a positive number", v)
		}
		count = c
	}
	t.Logf("seed %d, %d patterns", seed, count)
	r := rand.New(rand.NewPCG(seed, 7))

	specs := randomSpecs(r, "r", count, specShape{typeField: "type", window: [2]int{5, 45}})
	lines := randomEvents(r, 400)

	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 1})
	c := tc.deployOnBank(0, specs[0])
	for _, spec := range specs[1:] {
		tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec)})
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	producing := tc.compareEachWithOffline("r", specs, lines, fmt.Sprintf("(seed %d)", seed))
	if producing < count/2 {
		t.Fatalf("only %d of %d patterns produce records; the test would prove little", producing, count)
	}
}

// specShape says what random patterns look at: the event field holding a
// type A–D, and the range of their windows in ms for a pattern keyed by
// account, chosen so that a window holds a handful of a key's events
// (some have none unless always is set; without one, the patterns whose
// partial matches would double with each event are drawn again).
type specShape struct {
	typeField string
	window    [2]int
	always    bool
	// cadenceFree leaves out what makes records depend on how often the
	// watermark moves, in Flink as in the engine: a stage's own window
	// beside the whole match's (a timeout noticed after both passed
	// reports the stage's time), and a skip strategy with a negated stage
	// last (whether a partial match times out before the match waiting
	// on it prunes it). With several shards each moves its own watermark, less
	// often than the offline engine's, which moves with every event.
	cadenceFree bool
}

// randomSpecs draws n valid patterns named prefix0, prefix1, ….
func randomSpecs(r *rand.Rand, prefix string, n int, shape specShape) [][]byte {
	var specs [][]byte
	for len(specs) < n {
		spec := randomSpec(r, fmt.Sprintf("%s%d", prefix, len(specs)), shape)
		p, err := nfa.CompileBytes(spec)
		if err != nil {
			continue // an invalid combination: draw again
		}
		if slices.ContainsFunc(p.Warnings(), func(w string) bool { return strings.Contains(w, "can double") }) {
			// partial matches that double with each event of a key for
			// ever make every event slower than the test can wait (nfa's
			// tests of the bound cover them)
			continue
		}
		specs = append(specs, spec)
	}
	return specs
}

// randomSpec draws a valid-looking pattern-v1 document (some draws are
// invalid; randomSpecs compiles and draws again).
func randomSpec(r *rand.Rand, name string, shape specShape) []byte {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	typ := "e." + shape.typeField
	spec := map[string]any{"name": name, "source": "bank", "time": "e.ts"}
	spec["key"] = pick("e.account", "e.account", "e.region")
	if spec["key"] == "e.region" {
		// a region has many accounts' events: windows as long would hold
		// dozens of a key's events, and followedByAny or allowCombinations
		// would make 2^dozens partial matches of them
		shape.window = [2]int{max(1, shape.window[0]/16), max(2, shape.window[1]/16)}
	}
	if r.IntN(3) == 0 {
		spec["outOfOrderness"] = r.IntN(3)
	}
	if shape.always || r.IntN(4) > 0 {
		spec["within"] = shape.window[0] + r.IntN(shape.window[1]-shape.window[0])
		if r.IntN(4) == 0 {
			spec["withinType"] = "previousAndCurrent"
		}
	}
	spec["skip"] = pick("noSkip", "skipToNext", "skipPastLastEvent", "skipToFirst:s0", "skipToLast:s0")
	var stages []map[string]any
	for i := range 2 + r.IntN(3) {
		st := map[string]any{"name": fmt.Sprintf("s%d", i), "where": fmt.Sprintf("%s == %q", typ, pick("A", "B", "C"))}
		if r.IntN(6) == 0 {
			st["where"] = fmt.Sprintf("%s == %q && e.v > 40", typ, pick("A", "B", "C"))
		}
		if i > 0 && r.IntN(6) == 0 {
			st["where"] = fmt.Sprintf("%s == %q && e.v >= first(events(\"s0\")).v", typ, pick("A", "B", "C"))
		}
		if i > 0 {
			st["contiguity"] = pick("next", "followedBy", "followedBy", "followedByAny", "notNext", "notFollowedBy")
		}
		negative := st["contiguity"] == "notNext" || st["contiguity"] == "notFollowedBy"
		if !negative {
			switch r.IntN(6) {
			case 1:
				st["oneOrMore"] = true
			case 2:
				st["times"] = 2
			case 3:
				st["times"] = []int{1, 3}
			}
			_, looping := st["oneOrMore"]
			_, times := st["times"]
			if looping || times {
				switch r.IntN(4) {
				case 1:
					st["consecutive"] = true
				case 2:
					st["allowCombinations"] = true
				case 3:
					st["greedy"] = true
				}
				if looping && r.IntN(4) == 0 {
					st["until"] = typ + ` == "D"`
				}
			}
			if r.IntN(5) == 0 {
				st["optional"] = true
			}
			if (looping || times) && r.IntN(5) == 0 {
				st["window"] = shape.window[0] / 2
			}
		}
		if i > 0 && r.IntN(6) == 0 {
			st["within"] = shape.window[0] + r.IntN(shape.window[1]-shape.window[0])
			if r.IntN(2) == 0 {
				st["withinType"] = "previousAndCurrent"
			}
		}
		if i > 0 && !negative && r.IntN(6) == 0 {
			// a group of two stages, the quantifier on the group
			inner := []map[string]any{
				{"name": fmt.Sprintf("g%da", i), "where": fmt.Sprintf("%s == %q", typ, pick("A", "B", "C"))},
				{"name": fmt.Sprintf("g%db", i), "contiguity": pick("next", "followedBy"), "where": fmt.Sprintf("%s == %q", typ, pick("A", "B", "C"))},
			}
			delete(st, "where")
			delete(st, "until")
			delete(st, "window")
			st["group"] = inner
		}
		stages = append(stages, st)
	}
	if shape.cadenceFree {
		if _, ok := spec["within"]; ok {
			delete(spec, "withinType")
			for _, st := range stages {
				delete(st, "window")
				delete(st, "within")
				delete(st, "withinType")
			}
		}
		if c := stages[len(stages)-1]["contiguity"]; c == "notFollowedBy" || c == "notNext" {
			spec["skip"] = "noSkip"
		}
	}
	spec["stages"] = stages
	if r.IntN(3) == 0 {
		spec["emit"] = map[string]string{"n": "size(events(\"s0\"))", "v": "first(events(\"s0\")).v"}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return b
}

// randomEvents draws n events over five accounts in two regions, of types
// A–D, whose times mostly grow (by 0–3 ms) and sometimes step back by 1–3
// ms, so that some arrive out of order and some late.
func randomEvents(r *rand.Rand, n int) []string {
	var lines []string
	ts := 1000
	for i := range n {
		ts += r.IntN(4)
		evTs := ts
		if r.IntN(8) == 0 {
			evTs -= 1 + r.IntN(3)
		}
		acc := r.IntN(5)
		lines = append(lines, fmt.Sprintf(`{"id":%d,"account":"acc-%d","region":"r%d","type":%q,"v":%d,"ts":%d}`,
			i, acc, acc%2, string(rune('A'+r.IntN(4))), r.IntN(100), evTs))
	}
	return lines
}
