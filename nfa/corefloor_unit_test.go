package nfa_test

import (
	"fmt"
	"testing"
)

// The CORE benchmark's input through the engine agrees with both models:
// the counts of coreRef, and the records of coreFloor (every timed-out
// partial match with its events, every match's key and times), also when
// timeouts are counted and not reported.
func TestCOREAgreesWithModels(t *testing.T) {
	lengths := []int{3, 5}
	if raceOn {
		lengths = lengths[:1]
	}
	for _, length := range lengths {
		t.Run(fmt.Sprintf("len=%d", length), func(t *testing.T) {
			p := mustCompile(t, coreSpec(length, 100))
			evs := coreInput(length)
			for _, report := range []bool{true, false} {
				if err := verifyCORE(p, evs, length, 100, report); err != nil {
					t.Fatal(err)
				}
			}
			if err := verifyCOREFloor(p, evs, length, 100); err != nil {
				t.Fatal(err)
			}
		})
	}
}
