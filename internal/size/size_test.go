package size

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512": 512, "2K": 2048, "512M": 512 << 20, "10G": 10 << 30, "10GB": 10 << 30, "10gib": 10 << 30, "10 GiB": 10 << 30,
		"3T": 3 << 40, "1P": 1 << 50, " 7 ": 7, "1.5G": 3 << 29, "1kB": 1000, "2 MB": 2 << 20, "1,024": 1024} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "-1G", "0", "0K", "9223372036854775807K", "9223372036854775808", "10X", "1e3", "ten"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, got)
		}
	}
}

// What Format writes, Parse reads back to the same count (for counts
// Format writes exactly).
func TestFormatParses(t *testing.T) {
	for _, n := range []int64{1, 1023, 1 << 10, 5 << 20, 10 << 30, 3 << 40} {
		got, err := Parse(Format(n))
		if err != nil || got != n {
			t.Errorf("Parse(Format(%d) = %q) = %d, %v", n, Format(n), got, err)
		}
	}
}
