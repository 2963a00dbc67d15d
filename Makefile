# Code generation for the API (see api/doc.go). Tools are pinned in
# scripts/tools.sh and installed into ./bin, which is searched first.
SHELL := /usr/bin/env bash
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: tools generate checkgenerate lint build breaking release-protos console checkconsole

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

.PHONY: chaos
# chaos runs the whole fault suite (test/integration/faults_test.go) with
# three seeds per fault; as root, with ip, nft and tc, each node and NATS
# in a network namespace of its own (else on loopback, without the
# network faults). About half an hour on a 2-core machine.
chaos:
	CEP_FAULTS=all CEP_FAULT_SEEDS=$${CEP_FAULT_SEEDS:-3} go test ./test/integration -run 'TestFaults$$' -count=1 -v -timeout 120m

.PHONY: soak
# soak runs random faults of the fault suite against a cluster under steady
# load for DURATION (default 1h), checking every record after each round,
# and fails on memory, goroutines, open files, disk or JetStream consumers
# growing past the bounds in test/integration/soak_test.go. CI runs 3m.
DURATION ?= 1h
soak:
	CEP_SOAK=$(DURATION) go test ./test/integration -run 'TestSoak$$' -count=1 -v -timeout 6h

# build builds cepnode and cepctl into ./bin, stamped with VERSION (default:
# git describe) so that --version and cepctl version say which release runs.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/cepcluster/cep/internal/version.Version=$(VERSION)
build:
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/cepnode ./cmd/cepnode
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/cepctl ./cmd/cepctl

# PROTO_RELEASE is a buf image of the protos as last released, which the
# API must stay compatible with: committed, so the check runs offline on a
# fresh clone. No release has been tagged yet; it holds the protos as they
# were before JSON records (Record.record).
PROTO_RELEASE := api/proto/release/cep-v1.binpb

# breaking fails on a change to the protos that breaks clients of the
# release (buf.yaml's breaking rules: FILE).
breaking: tools
	buf breaking --against $(PROTO_RELEASE)

# release-protos records the current protos as the release to stay
# compatible with (run when tagging a release, and commit the image).
release-protos: tools
	buf build -o $(PROTO_RELEASE)

# console rebuilds the web console (console/dist, embedded in cepnode)
# from console/web: its npm packages as package-lock.json pins them, its
# API client generated from api/proto, then the bundle. Needs Node and npm.
console: tools
	cd console/web && npm ci --no-audit --no-fund
	buf generate --template buf.gen.console.yaml
	cd console/web && npx tsc --noEmit -p . && node build.mjs

# checkconsole fails when the committed console differs from what its
# sources build (stale or hand-edited).
checkconsole: console
	@git diff --exit-code -- console/dist console/web/src/gen || { echo "console/dist is stale: run make console and commit the result"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- console/dist console/web/src/gen); \
	if [ -n "$$untracked" ]; then echo "untracked generated files:"; echo "$$untracked"; exit 1; fi
