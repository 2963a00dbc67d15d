# Code generation for the API (see api/doc.go). Tools are pinned in
# scripts/tools.sh and installed into ./bin, which is searched first.
SHELL := /usr/bin/env bash
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: tools generate checkgenerate lint build breaking release-protos

# tools installs buf, protoc-gen-go and protoc-gen-connect-go into ./bin
# (skipped when the pinned versions are already there).
tools:
	bash scripts/tools.sh

# generate regenerates api/gen from api/proto.
generate: tools
	buf generate

# checkgenerate fails when api/gen differs from what the protos generate
# (stale or hand-edited code, or files not yet added to git).
checkgenerate: generate
	@git diff --exit-code -- api/gen || { echo "api/gen is stale: run make generate and commit the result"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api/gen); \
	if [ -n "$$untracked" ]; then echo "untracked generated files:"; echo "$$untracked"; exit 1; fi

# lint checks the protos' style and formatting (buf format -w fixes the latter).
lint: tools
	buf lint
	buf format --diff --exit-code

.PHONY: tools generate checkgenerate lint build breaking release-protos
