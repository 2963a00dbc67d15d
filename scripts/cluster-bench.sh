#!/usr/bin/env bash
# Runs the cluster benchmark (cmd/cepbench) with one node in process, then
# with three cepnode processes (which adds the failover measurement), each
# in --mode backlog (the reference consumer's conditions) and --mode live
# (publishing while the cluster works, latency at half the live rate), and
# tees everything to cluster-bench.txt (CLUSTER_BENCH_OUT overrides it).
# Extra arguments go to every run, e.g.:
#   scripts/cluster-bench.sh --events 200000
#   scripts/cluster-bench.sh --json
set -euo pipefail

cd "$(dirname "$0")/.."

out=${CLUSTER_BENCH_OUT:-cluster-bench.txt}
: >"$out"
status=0
for nodes in 1 3; do
	for mode in backlog live; do
		echo "### go run ./cmd/cepbench --nodes $nodes --mode $mode $*" | tee -a "$out"
		if ! go run ./cmd/cepbench --nodes "$nodes" --mode "$mode" "$@" 2>&1 | tee -a "$out"; then
			status=1
		fi
	done
done
exit $status
