package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// -o json prints 64-bit integers as numbers, exact even past 2^53, and
// enums by their short names, each field where protobuf JSON has it (in
// declaration order, every other value as protobuf JSON gives it).
func TestPlainJSON(t *testing.T) {
	sh := &cepv1.Shard{
		Id:             7,
		KeyGroups:      &cepv1.KeyGroupRange{First: 8, Last: 15},
		CommitIndex:    1<<63 + 1,
		PartialMatches: 17,
		Replicas: []*cepv1.Replica{
			{NodeId: "n1", Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER, AppliedIndex: 90},
			{NodeId: "n<2>&", Suffrage: cepv1.Suffrage_SUFFRAGE_NONVOTER},
		},
	}
	got, err := marshalJSON.Marshal(sh)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(sh)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"commitIndex":9223372036854775809`, `"partialMatches":17`, `"appliedIndex":90`,
		`"suffrage":"voter"`, `"suffrage":"nonvoter"`, `"nodeId":"n<2>&"`, `"keyGroups":{"first":8,"last":15}`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("no %s in %s", want, got)
		}
	}
	// the same keys, in the same order, as protobuf JSON
	if k, c := keysInOrder(t, got), keysInOrder(t, canonical); strings.Join(k, ",") != strings.Join(c, ",") {
		t.Errorf("keys %v, protobuf JSON's %v", k, c)
	}
	// and a value that is neither a 64-bit integer nor an enum is as
	// protobuf JSON has it
	var a, b map[string]any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(canonical, &b) != nil {
		t.Fatal("not JSON")
	}
	if a["id"] != b["id"] || a["leaderNodeId"] != b["leaderNodeId"] {
		t.Errorf("id %v %v, leader %v %v", a["id"], b["id"], a["leaderNodeId"], b["leaderNodeId"])
	}
	for _, tt := range []struct {
		v    string
		want string
	}{{cepv1.NodeState_NODE_STATE_ALIVE.String(), "alive"}, {cepv1.PatternState_PATTERN_STATE_DRAINING.String(), "draining"}} {
		ed := cepv1.NodeState(0).Descriptor()
		if strings.HasPrefix(tt.v, "PATTERN") {
			ed = cepv1.PatternState(0).Descriptor()
		}
		if got := shortEnum(ed, tt.v); got != tt.want {
			t.Errorf("shortEnum(%s) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// keysInOrder lists every object key of a JSON document in the order met.
func keysInOrder(t *testing.T, b []byte) []string {
	t.Helper()
	type level struct{ object, wantKey bool }
	d := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	var stack []level
	valueDone := func() { // a value ended: in an object, a key comes next
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return keys
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, level{object: true, wantKey: true})
			case '[':
				stack = append(stack, level{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				keys = append(keys, v)
				stack[n-1].wantKey = false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
