# clusterctl — build, test, lint. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GOLANGCI_LINT_VERSION := v2.15.0
TOOLS := $(CURDIR)/bin/tools
FUZZTIME ?= 5m

.PHONY: help build test unit lint fmt fuzz up clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/clusterctl (static, -trimpath, version and commit injected)
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/clusterctl ./cmd/clusterctl
	@bin/clusterctl version

up: build ## the main job on this machine: build, then validate the example inventories
	bin/clusterctl inventory validate -i inventory/examples/hosts.yaml
	bin/clusterctl inventory validate -i inventory/examples/kubespray/hosts.yaml
	bin/clusterctl inventory validate -i inventory/examples/kubespray/inventory.ini

test: ## everything CI runs: formatting, vet, unit tests with -race
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted" >&2; exit 1; fi
	go vet ./...
	go test -race -count=1 ./...

unit: ## unit tests only, quickly
	go test ./...

lint: ## golangci-lint (pinned, installed into bin/tools on first use)
	@[ -x $(TOOLS)/golangci-lint ] || GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(TOOLS)/golangci-lint run ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

fuzz: ## fuzz the inventory loaders for $(FUZZTIME)
	go test ./inventory -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean: ## remove built binaries and test caches
	rm -rf bin
	go clean -testcache
