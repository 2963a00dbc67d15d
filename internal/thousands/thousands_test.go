package thousands

import (
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestFormat(t *testing.T) {
	for v, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", -1000: "-1,000", 1234567: "1,234,567", -12: "-12"} {
		if got := Format(v); got != want {
			t.Errorf("Format(%d) = %q, want %q", v, got, want)
		}
	}
	// removing the separators gives the number back, and every group after
	// the first has three digits
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64().Draw(t, "v")
		s := Format(v)
		if back, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64); err != nil || back != v {
			t.Fatalf("%d: %q", v, s)
		}
		for i, g := range strings.Split(strings.TrimPrefix(s, "-"), ",") {
			if (i > 0 && len(g) != 3) || len(g) == 0 || len(g) > 3 {
				t.Fatalf("%d: %q", v, s)
			}
		}
	})
}
