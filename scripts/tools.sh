#!/usr/bin/env bash
# Installs the code-generation tools, pinned, into ./bin (ignored by git).
# Idempotent: a tool whose installed binary already reports the pinned module
# version is skipped, so a second run takes well under a second.
#
#   scripts/tools.sh          # install what is missing or at the wrong version
#   BIN=/elsewhere scripts/tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${BIN:-$(pwd)/bin}"
mkdir -p "$BIN"

# package@version, one a line. Bump here; `make generate` uses these.
TOOLS=(
  "github.com/bufbuild/buf/cmd/buf@v1.75.0"
  "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"
  "connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1"
  "honnef.co/go/tools/cmd/staticcheck@v0.8.2"
)

# installed_version BIN_PATH prints the main module version embedded in a Go
# binary (empty when missing or unreadable).
installed_version() {
  [ -x "$1" ] || return 0
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

for spec in "${TOOLS[@]}"; do
  pkg="${spec%@*}"
  want="${spec##*@}"
  name="${pkg##*/}"
  have="$(installed_version "$BIN/$name")"
  if [ "$have" = "$want" ]; then
    echo "tools: $name $want already installed"
    continue
  fi
  echo "tools: installing $name $want${have:+ (replacing $have)}"
  GOBIN="$BIN" go install "$spec"
done
