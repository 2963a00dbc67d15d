#!/usr/bin/env bash
# Runs the cluster benchmark (cmd/cepbench) with one node in process, then
# with three cepnode processes (which adds the failover measurement), and
# tees everything to cluster-bench.txt (CLUSTER_BENCH_OUT overrides it).
# Extra arguments go to both runs, e.g.:
#   scripts/cluster-bench.sh --events 200000
#   scripts/cluster-bench.sh --json
set -euo pipefail

cd "$(dirname "$0")/.."

out=${CLUSTER_BENCH_OUT:-cluster-bench.txt}
: >"$out"
status=0
for nodes in 1 3; do
	echo "### go run ./cmd/cepbench --nodes $nodes $*" | tee -a "$out"
	if ! go run ./cmd/cepbench --nodes "$nodes" "$@" 2>&1 | tee -a "$out"; then
		status=1
	fi
done
exit $status
