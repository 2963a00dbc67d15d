// Package workload is the seeded workload that the fault suite
// (test/integration) and the shard's metamorphic test run: sessions of
// logins, failures and logouts per account, and the two patterns carried
// through every fault over them. One definition, so that a failure seen
// in one reproduces in the other.
package workload

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// lfl is logins, consecutive failures and a logout per account.
const lfl = `name: lfl
source: bank
key: e.account
time: e.ts
skip: skipPastLastEvent
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    contiguity: next
    where: e.type == "FAIL"
    oneOrMore: true
    consecutive: true
  - name: logout
    contiguity: next
    where: e.type == "LOGOUT"
`

// lflAny is a sequence of followedByAny stages with a window: the engine
// keeps its keys as trees per start event, encoded as the general step's
// state.
const lflAny = `name: lfl-any
source: bank
key: e.account
time: e.ts
within: 1500
skip: skipPastLastEvent
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    contiguity: followedByAny
    where: e.type == "FAIL"
  - name: logout
    contiguity: followedByAny
    where: e.type == "LOGOUT"
`

// LFL is the pattern lfl reading source.
func LFL(source string) []byte { return onSource(lfl, source) }

// LFLAny is the pattern lfl-any reading source.
func LFLAny(source string) []byte { return onSource(lflAny, source) }

func onSource(spec, source string) []byte {
	return []byte(strings.Replace(spec, "source: bank\n", "source: "+source+"\n", 1))
}

// Sessions draws n events in time order over 60 accounts, each cycling
// through sessions, and 25 users, then fillers with later times for many
// keys, so that every shard's watermark passes the events.
func Sessions(rng *rand.Rand, n int) []string {
	var lines []string
	ts := int64(1_000)
	for range n {
		ts += int64(1 + rng.IntN(3))
		a := rng.IntN(60)
		typ := []string{"LOGIN", "FAIL", "FAIL", "LOGOUT", "OK"}[rng.IntN(5)]
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","region":"r%d","user":"u-%d","type":%q,"kind":%q,"v":%d,"ts":%d}`,
			a, a%4, rng.IntN(25), typ, string(rune('A'+rng.IntN(4))), rng.IntN(100), ts))
	}
	for i := range 200 {
		lines = append(lines, fmt.Sprintf(`{"account":"filler-%d","region":"filler-%d","user":"filler-%d","type":"NOISE","kind":"N","v":0,"ts":%d}`, i, i, i, ts+1_000_000))
	}
	return lines
}
