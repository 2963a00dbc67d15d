#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 60s), one
# after the other, and fails if any finds an input that breaks it (the
# input is then written to the package's testdata/fuzz/<target>/ and
# becomes part of `go test ./...` once committed). `go test ./...` alone
# runs only the committed corpus.
#   scripts/fuzz.sh                 # all targets, 60 s each
#   FUZZTIME=5m scripts/fuzz.sh shard   # only the targets under ./shard/...
set -euo pipefail

cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-60s}
status=0
while IFS=: read -r file name; do
	dir=$(dirname "$file")
	echo "=== $dir $name ($fuzztime)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir/" 2>&1 | grep -v '^fuzz: elapsed'; then
		status=1
	fi
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' "${1:-.}" | sed 's|^\./||; s|:func |:|' | sort)
exit $status
