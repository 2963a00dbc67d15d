#!/usr/bin/env bash
# Runs the engine benchmarks of nfa/bench_test.go and prints the throughput
# ratios they exist for, from the median events/s of each sub-benchmark:
#   StrictNext            engine / reference (separate runs, and paired: the
#   FollowedByOneOrMore   engine / reference  median of the paired runs' ratio
#                                              metric, the two sides alternating
#                                              every 4,096 events)
#   CORE                  len=L / len=3   (the engine at len=3 is CORE's reference)
#   COREMatchesOnly       len=L / len=3 of CORE with timeouts counted, not
#                         reported (a deployment publishing matches only)
#   COREWindow            w=400 / w=100
#   COREModel             len=9 / len=3 of the naive model CORE is verified
#                         against (what keeping every partial match costs),
#                         and of the model that also builds every record
#                         (records/: what the output itself costs)
#   QueryVsSpec           query / spec (paired)
# benchstat (go install golang.org/x/perf/cmd/benchstat@latest) is used when
# installed. Environment: BENCH (default .), BENCH_COUNT (5), BENCHTIME
# (unset: go's default), BENCH_OUT (bench.txt).
set -euo pipefail

cd "$(dirname "$0")/.."

out=${BENCH_OUT:-bench.txt}
args=(-run '^$' -bench "${BENCH:-.}" -benchmem -count "${BENCH_COUNT:-5}")
if [[ -n ${BENCHTIME:-} ]]; then
	args+=(-benchtime "$BENCHTIME")
fi

go test "${args[@]}" ./nfa/ | tee "$out"

benchstat=$(command -v benchstat || true)
if [[ -z $benchstat && -x "$(go env GOPATH)/bin/benchstat" ]]; then
	benchstat="$(go env GOPATH)/bin/benchstat"
fi
if [[ -n $benchstat ]]; then
	echo
	"$benchstat" "$out"
else
	echo
	echo "benchstat not installed (go install golang.org/x/perf/cmd/benchstat@latest); skipping it"
fi

echo
awk '
function median(name,    n, i, j, v, a) {
	n = cnt[name]
	if (n == 0) return -1
	for (i = 1; i <= n; i++) a[i] = val[name, i]
	for (i = 2; i <= n; i++) {          # insertion sort: mawk has no asort
		v = a[i]
		for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
		a[j + 1] = v
	}
	if (n % 2) return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}
function ratio(label, num, den,    a, b) {
	a = median(num); b = median(den)
	if (a < 0 || b <= 0) return
	printf "%-34s %14.0f / %14.0f events/s = %8.4f\n", label, a, b, a / b
}
function paired(label, name,    r) {
	r = median(name)
	if (r < 0) return
	printf "%-34s median ratio of %d paired runs  = %8.4f\n", label, cnt[name], r
}
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)           # drop the GOMAXPROCS suffix
	for (i = 3; i <= NF; i++) {
		if ($i == "events/s" || $i == "ratio") {
			cnt[name]++
			val[name, cnt[name]] = $(i - 1)
		}
	}
}
END {
	print "ratios of median events/s:"
	ratio("StrictNext engine/reference", "BenchmarkStrictNext/engine", "BenchmarkStrictNext/reference")
	ratio("FollowedByOneOrMore engine/ref", "BenchmarkFollowedByOneOrMore/engine", "BenchmarkFollowedByOneOrMore/reference")
	paired("StrictNext paired", "BenchmarkStrictNext/paired")
	paired("FollowedByOneOrMore paired", "BenchmarkFollowedByOneOrMore/paired")
	paired("QueryVsSpec query/spec paired", "BenchmarkQueryVsSpec/paired")
	for (l = 5; l <= 9; l += 2)
		ratio("CORE len=" l "/len=3", "BenchmarkCORE/len=" l, "BenchmarkCORE/len=3")
	for (l = 5; l <= 9; l += 2)
		ratio("COREMatchesOnly len=" l "/len=3", "BenchmarkCOREMatchesOnly/len=" l, "BenchmarkCOREMatchesOnly/len=3")
	ratio("COREWindow w=400/w=100", "BenchmarkCOREWindow/w=400", "BenchmarkCOREWindow/w=100")
	ratio("COREModel len=9/len=3 (naive model)", "BenchmarkCOREModel/len=9", "BenchmarkCOREModel/len=3")
	ratio("COREModel records len=9/len=3", "BenchmarkCOREModel/records/len=9", "BenchmarkCOREModel/records/len=3")
}
' "$out"
