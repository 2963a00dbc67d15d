// Package size reads the byte counts of command-line flags ("512M",
// "10GiB", "1.5T") and writes them back for people.
package size

import (
	"fmt"
	"math"
	"strings"

	"github.com/dustin/go-humanize"
)

// Parse reads a positive byte count: a number with an optional unit.
// K, M, G, T and P, alone or with "B" after them, are powers of 1024 as
// in NATS's own limits (max_file_store, `nats stream add --max-bytes`)
// and the releases before; "KiB"... are too, and "kB" is 1000 only
// spelt with a lower-case k. Everything else is humanize.ParseBytes's.
func Parse(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if s != "" && !strings.HasPrefix(s, "-") {
		num := strings.TrimRight(s, "KMGTPBkmgtpbIi ")
		unit := strings.TrimSpace(s[len(num):])
		if u := strings.ToUpper(unit); len(u) > 0 && strings.ContainsRune("KMGTP", rune(u[0])) && unit[0] != 'k' && (len(u) == 1 || u[1:] == "B") {
			unit = u[:1] + "iB" // binary, whatever the case of b
		}
		s = num + unit
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > math.MaxInt64 || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is not a positive size in bytes (such as 512M or 10G)", v)
	}
	return int64(n), nil
}

// Format writes n in binary units, as "10 GiB".
func Format(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-n))
	}
	return humanize.IBytes(uint64(n))
}
