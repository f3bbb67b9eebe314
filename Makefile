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
K8S_VERSION ?= v1.37.2
# The version upgrade tests start from: one minor version below K8S_VERSION (test/lab/lab.go pins both).
K8S_UPGRADE_FROM ?= v1.36.3
# The version the multi-minor upgrade test (make test-long) starts from: two minor versions below K8S_VERSION.
K8S_MINORS_FROM ?= v1.35.4
# The other versions clusterctl accepts: the lab builds their kubeadm alone (test/lab/lab.go's KubeadmOnly).
K8S_KUBEADM_ONLY ?= v1.34.4 v1.35.4
# $(call build_kubeadm_only,REDIRECT): each of them, cached per version.
build_kubeadm_only = for v in $(K8S_KUBEADM_ONLY); do test/lab/build-k8s.sh --kubeadm $$v $(1) || exit 1; done

N ?= 3
CONTROL_PLANES ?= 1
LAB_DIR := $(CURDIR)/.lab
ARTIFACTS := $(or $(CLUSTERCTL_LAB_CACHE),$(HOME)/.cache/clusterctl-lab)/$(K8S_VERSION)
# lab.sh's host kind: nspawn hosts with the node layer, bare ones (BARE=1), or QEMU VMs (VM=1, always bare);
# SUBNETS=2: the hosts on two subnets joined by a router (nodes reach each other only through a gateway).
# IP=dual: hosts with an IPv4 and an IPv6 (ULA) address and a dual-stack cluster; IP=6: IPv6 only.
LAB_KIND := $(if $(VM),--vm,--layer $(if $(BARE),bare,node)) $(if $(SUBNETS),--subnets $(SUBNETS)) $(if $(IP),--ip $(IP))
# CNI=flannel: the cluster's pod network (cni.plugin; default bridge, which needs one L2 segment).
CLUSTER_CNI := $(if $(CNI),\n  cni:\n    plugin: $(CNI))
# Where `clusterctl artifacts pull` puts a version by default (make up BARE=1 pulls there).
PULLED := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/clusterctl/artifacts/$(K8S_VERSION)

.PHONY: help build release test test-long test-vm faults conformance conformance-dualstack netpol unit lint fmt fuzz up validate clean lab-deps lab-up lab-down lab-selftest artifacts bench bench-fanout bench-up bench-add-node bench-cis bench-addons bench-pull bench-rotate bench-rss bench-upgrade bench-noop bench-net bench-operations bench-kubeadm bench-hostops

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/clusterctl (static, -trimpath, version and commit injected)
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/clusterctl ./cmd/clusterctl
	@bin/clusterctl version

up: build lab-deps ## the main job: a cluster of N lab hosts (CONTROL_PLANES=1 + workers), air-gapped from the lab's artifacts (built on first use); SUBNETS=2 CNI=flannel: hosts on two routed subnets with flannel's VXLAN; IP=dual: a dual-stack cluster (IP=6: IPv6 only); BARE=1: hosts with nothing but sshd and systemd, artifacts pulled with `clusterctl artifacts pull` from the lab's mirror into the cache; VM=1: bare QEMU VMs (Debian 13, own kernel, emulated: slow, waits of 25 min); ADDONS="flannel local-path-provisioner metrics-server": those charts installed as add-ons (flannel's as the pod network), pulled from the lab's mirror (Helm repository and OCI registry) with the artifacts; kubeconfig in .lab/
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/lab.sh up --name lab --dir $(LAB_DIR) --hosts $(N) --control-planes $(CONTROL_PLANES) $(LAB_KIND)
ifeq ($(BARE)$(VM),)
	sed 's|^  name: lab$$|  name: lab\n  kubernetesVersion: $(K8S_VERSION)\n  artifacts: $(ARTIFACTS)$(CLUSTER_CNI)|' $(LAB_DIR)/hosts.yaml >$(LAB_DIR)/cluster.yaml
else
	CGO_ENABLED=0 go build -o bin/labmirror ./test/lab/cmd/labmirror
	bin/labmirror -artifacts $(ARTIFACTS) -- bin/clusterctl artifacts pull --kubernetes-version $(K8S_VERSION)
	sed 's|^  name: lab$$|  name: lab\n  kubernetesVersion: $(K8S_VERSION)$(CLUSTER_CNI)|' $(LAB_DIR)/hosts.yaml >$(LAB_DIR)/cluster.yaml
endif
ifneq ($(ADDONS),)
	CGO_ENABLED=0 go build -o bin/labmirror ./test/lab/cmd/labmirror
	bin/labmirror -artifacts $(ARTIFACTS) -addons "$$(test/lab/build-addons.sh)" -- test/lab/addons-up.sh $(LAB_DIR) "$(ADDONS)"
endif
	bin/clusterctl up -i $(LAB_DIR)/cluster.yaml $(if $(VM),--api-timeout 25m --node-timeout 25m)
	@echo "kubectl: $(ARTIFACTS)/bin/linux-amd64/kubectl --kubeconfig $(LAB_DIR)/.clusterctl/lab/admin.conf get nodes"
	@echo "what the hosts received: bin/clusterctl artifacts list --dir $(if $(ADDONS),$(LAB_DIR)/artifacts,$(if $(BARE)$(VM),$(PULLED),$(ARTIFACTS)))"
	@echo "remove the lab: make lab-down"

PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

release: ## static binaries for linux and darwin, amd64 and arm64, version stamped, with SHA256SUMS, in dist/
	rm -rf dist && mkdir -p dist
	for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags '$(LDFLAGS)' -o dist/clusterctl-$$os-$$arch ./cmd/clusterctl; \
	done
	cd dist && sha256sum clusterctl-* >SHA256SUMS && cat SHA256SUMS
	dist/clusterctl-linux-$$(go env GOARCH) version

validate: build ## validate the example inventories
	bin/clusterctl inventory validate -i inventory/examples/hosts.yaml
	bin/clusterctl inventory validate -i inventory/examples/kubespray/hosts.yaml
	bin/clusterctl inventory validate -i inventory/examples/kubespray/inventory.ini

# Packages make test runs without -race, beside the others: they drive lab hosts and a 1 GB artifacts pull
# from outside (the code they drive has its -race unit tests), and -race made the pull take 213 s, not 18 s.
NORACE_PKGS := ./test/e2e/ ./test/lab/mirror/

test: ## everything CI runs: formatting, then every tier this machine allows (unit, lab), with -race (but $(NORACE_PKGS)), and each fuzz target for a fixed number of executions; vet, golangci-lint, -race and fuzzing run one after another beside the lab tests, which start first (they are the longest part)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted" >&2; exit 1; fi
	@reason=$$(test/lab/check.sh); \
	if [ -z "$$reason" ]; then \
	  echo "make test: lab tier enabled: installing lab packages if missing, building the lab rootfs, Kubernetes $(K8S_VERSION) and $(K8S_UPGRADE_FROM) artifacts, kubeadm $(K8S_KUBEADM_ONLY), the $(K8S_VERSION) conformance suite, kube-bench and the lab's add-ons if not cached"; \
	  test/lab/deps.sh && test/lab/artifacts.sh $(K8S_VERSION) >/dev/null && test/lab/artifacts.sh $(K8S_UPGRADE_FROM) >/dev/null \
	    && $(call build_kubeadm_only,>/dev/null) \
	    && test/lab/conformance.sh $(K8S_VERSION) >/dev/null && test/lab/kube-bench.sh >/dev/null && test/lab/build-addons.sh >/dev/null; \
	else \
	  echo "make test: SKIPPING the lab tier (integration tests on real hosts): $$reason"; export CLUSTERCTL_LAB=off; \
	fi; \
	mkdir -p .lab; go test -count=1 -timeout 80m -v $(NORACE_PKGS) >.lab/test-lab.log 2>&1 & lab=$$!; \
	trap 'kill $$lab 2>/dev/null || true' EXIT; \
	vet=0; go vet ./... || vet=$$?; \
	lint=0; $(MAKE) --no-print-directory lint || lint=$$?; \
	race=0; go test -race -p 1 -count=1 -timeout 80m $$(go list ./... | grep -v -x $(foreach p,$(NORACE_PKGS),-e '.*/$(patsubst ./%/,%,$(p))')) || race=$$?; \
	fuzz=0; $(MAKE) --no-print-directory fuzz FUZZTIME=runs FUZZFLAGS=-parallel=1 || fuzz=$$?; \
	labrc=0; wait $$lab || labrc=$$?; \
	if [ $$labrc -ne 0 ] && ! grep -q '^--- FAIL' .lab/test-lab.log; then echo "make test: the end of the lab tests' output:"; tail -n 150 .lab/test-lab.log; fi; \
	test/lab/report.sh .lab/test-lab.log; \
	echo "make test: go vet exit $$vet, golangci-lint exit $$lint, -race run exit $$race, fuzzing exit $$fuzz, $(NORACE_PKGS)exit $$labrc"; \
	[ $$vet -eq 0 ] && [ $$lint -eq 0 ] && [ $$race -eq 0 ] && [ $$fuzz -eq 0 ] && [ $$labrc -eq 0 ]

test-long: ## the end-to-end cases too long for make test (root; ~85 min, and test-vm's; builds $(K8S_MINORS_FROM)'s artifacts the first time, ~25 min): certs rotate --ca with external etcd and on three stacked control-plane nodes, in place of make test's leaf rotations; an external etcd host removed and added back; a restore onto the external etcd hosts, and their cluster upgraded from $(K8S_UPGRADE_FROM); the networking part of the focused conformance run on flannel's chart (an add-on); the upgrade of three control-plane nodes: a second node's failing API server rolled back, then killed and resumed; $(K8S_MINORS_FROM) to $(K8S_VERSION) in one run; etcd restored onto three members, then onto the survivor of three; clusterctl reboot of three control-plane nodes and a worker under clients, and with a host powered off mid-reboot
	test/lab/deps.sh && test/lab/artifacts.sh $(K8S_VERSION) >/dev/null && test/lab/artifacts.sh $(K8S_UPGRADE_FROM) >/dev/null && test/lab/artifacts.sh $(K8S_MINORS_FROM) >/dev/null \
	  && test/lab/conformance.sh $(K8S_VERSION) >/dev/null && test/lab/build-addons.sh >/dev/null
	CLUSTERCTL_E2E_LONG=1 go test -count=1 -timeout 150m -v -run 'TestExternalEtcd$$|TestGrowAndShrink$$|TestUpgrade$$|TestUpgradeMinors$$|TestEtcdRestore$$|TestAddons$$' ./test/e2e/
	$(MAKE) --no-print-directory test-vm

test-vm: ## the VM tier (root; ~40 min): on one QEMU VM of Debian 13 (own kernel, cgroup v2, networkd, three host key types, pinned by its ED25519 fingerprint) with the inventory's defaults: preflight, up, a Pod reaching a Service by name, certs rotate, a reboot the cluster comes back from by itself, reset leaving nothing; each step timed
	test/lab/deps.sh --vm
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	CLUSTERCTL_E2E_VM=1 go test -count=1 -timeout 100m -v -run 'TestVM$$' ./test/e2e/

faults: ## the fault-injection suite on lab hosts (root; ~30 min): up with a worker's link cut during the push, add-node of a worker powered off while it joins, certs rotate and certs rotate --ca killed in each stage and resumed, --forks 1 against --forks 500, the upload faults make test runs too (full disk, sshd killed, link cut), and up/add-node/remove-node 20 times in one process with goroutines, open files and the hosts' SSH sessions counted
	CLUSTERCTL_E2E_FAULTS=1 go test -count=1 -timeout 30m -v -run 'TestFaults$$' ./test/e2e/
	CLUSTERCTL_E2E_FAULTS=1 go test -count=1 -timeout 40m -v -run 'TestNoLeaks$$' ./cmd/clusterctl/
	go test -count=1 -timeout 10m -v -run 'TestFaultsDuringPush$$' ./test/integration/

conformance: lab-deps ## Kubernetes' own [Conformance] tests (e2e.test built from the module proxy, their images packed offline) on a 1+2 cluster made by clusterctl up, parallel then serial; CONTROL_PLANES=3 for three control-plane nodes; CNI=flannel on flannel; IP=dual PROXY=nftables on a dual-stack cluster with kube-proxy's nftables mode; reports in .lab/conformance/ (root; ~60 min, ~90 with CONTROL_PLANES=3)
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	test/lab/conformance.sh $(K8S_VERSION) >/dev/null
	CLUSTERCTL_E2E_CONFORMANCE=full CLUSTERCTL_E2E_CNI=$(CNI) CLUSTERCTL_E2E_IP=$(IP) CLUSTERCTL_E2E_PROXY=$(PROXY) CONTROL_PLANES=$(CONTROL_PLANES) go test -count=1 -timeout 5h -v -run 'TestConformance$$' ./test/e2e/

conformance-dualstack: lab-deps ## Kubernetes' own [Feature:IPv6DualStack] tests (from the same e2e.test) on a dual-stack 1+2 cluster (PROXY=nftables for kube-proxy's nftables mode); reports in .lab/conformance/ (root)
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	test/lab/conformance.sh $(K8S_VERSION) >/dev/null
	CLUSTERCTL_E2E_CONFORMANCE=dualstack CLUSTERCTL_E2E_PROXY=$(PROXY) go test -count=1 -timeout 2h -v -run 'TestConformance$$' ./test/e2e/

netpol: lab-deps ## Kubernetes' own [Feature:NetworkPolicy] tests (from the same e2e.test) on a 1+2 cluster with cni.networkPolicy, on flannel (CNI=bridge for the bridge); reports in .lab/conformance/ (root)
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	test/lab/conformance.sh $(K8S_VERSION) >/dev/null
	CLUSTERCTL_E2E_CONFORMANCE=netpol CLUSTERCTL_E2E_CNI=$(or $(CNI),flannel) CONTROL_PLANES=$(CONTROL_PLANES) go test -count=1 -timeout 5h -v -run 'TestConformance$$' ./test/e2e/

unit: ## unit tests only, quickly (the lab tier off: as root, plain go test would start lab clusters under its 10-minute default timeout)
	CLUSTERCTL_LAB=off go test ./...

lint: ## golangci-lint (pinned, installed into bin/tools on first use)
	@[ -x $(TOOLS)/golangci-lint ] || GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(TOOLS)/golangci-lint run ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

# Each fuzz target: package, name, and the executions make test gives it (about 30-60 s each alone here). make
# test fuzzes by count: a -fuzztime in seconds races Go 1.26's fuzzing coordinator when its worker is starved of
# CPU (the lab tests run beside it), and the target fails "context deadline exceeded" with no failing input
# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline, starvation only makes it slower.
FUZZ_TARGETS := ./inventory:FuzzParse:300000 ./transport:FuzzSSHConfig:40000 ./transport:FuzzKnownHosts:20000 \
	./tasks/preflight:FuzzParseFacts:600000 ./tasks/artifacts:FuzzParse:300000 ./cmd/clusterctl:FuzzCommandLine:15000

fuzz: ## fuzz every parser of outside input, each for $(FUZZTIME) (make test: FUZZTIME=runs, a fixed number of executions each, one worker): inventories (YAML, INI), ssh_config, known_hosts, host facts, the artifacts manifest, the command line
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; runs=$${rest#*:}; \
	  time=$(FUZZTIME); [ "$$time" != runs ] || time=$${runs}x; \
	  echo "go test $$pkg -run '^$$' -fuzz '^$$name\$$' -fuzztime $$time $(FUZZFLAGS)"; \
	  go test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$time $(FUZZFLAGS); \
	done

lab-deps: ## install the Debian packages the lab needs (root; VM=1: QEMU too)
	test/lab/deps.sh $(if $(VM),--vm)

lab-up: lab-deps ## start N lab hosts (CONTROL_PLANES of them control-plane) into .lab/, building rootfs and artifacts once; SUBNETS=2: on two subnets joined by a router; IP=dual|6: IPv6 addresses beside the IPv4 ones, or alone; BARE=1: hosts without a runtime; VM=1: QEMU VMs of Debian 13 (bare; the image built once)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/lab.sh up --name lab --dir $(LAB_DIR) --hosts $(N) --control-planes $(CONTROL_PLANES) $(LAB_KIND)

lab-down: ## remove the lab's hosts, bridge, cgroups and sysctl changes
	test/lab/lab.sh down --name lab

lab-selftest: lab-deps ## boot 3 hosts and check systemd, SSH (root and sudo user), SFTP, units, containerd
	go test -count=1 -v -run 'TestSelftest|TestArtifactImagesRun' ./test/lab/

artifacts: lab-deps ## build the Kubernetes $(K8S_VERSION) and $(K8S_UPGRADE_FROM) artifacts directories and kubeadm $(K8S_KUBEADM_ONLY) (cached per version outside the repo)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/artifacts.sh $(K8S_UPGRADE_FROM)
	$(call build_kubeadm_only)

bench: ## Go benchmarks of every package (go test -bench), numbers printed
	go test -run '^$$' -bench . -benchmem ./...

bench-up: ## clusterctl up on lab hosts, 1+2 and 1+5 nodes: time to all Nodes Ready by phase, and a no-op re-run; BARE=1: hosts without a runtime; BASE=REV: each run followed by one of the code at REV; CNI="bridge flannel": each pod network in turn; IP="4 dual": single-stack, then dual-stack; SUBNETS=2: routed subnets (root; SIZES, RUNS)
	test/lab/artifacts.sh $(K8S_VERSION)
	LAYER=$(if $(BARE),bare,node) CNI="$(or $(CNI),bridge)" SUBNETS=$(or $(SUBNETS),1) IP="$(or $(IP),4)" test/bench/up.sh

bench-net: ## TCP throughput between Pods and between hosts of a 1+2 lab cluster, cp1 to w2: the bridge on one subnet, flannel's VXLAN across two (RUNS transfers of 1 GiB each, default 5); then kube-proxy's iptables and nftables modes: CONNS short connections through a ClusterIP (default 10000) and 1 GiB through it (root)
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	CLUSTERCTL_E2E_BENCH_NET=1 RUNS=$(RUNS) CONNS=$(CONNS) go test -count=1 -timeout 40m -v -run 'TestPodThroughput$$|TestServiceLatency$$' ./test/e2e/

bench-noop: ## no-op re-runs of clusterctl up on settled 1+2 and 1+5 lab clusters, by phase; BASE=REV: each beside a run of the code at REV; LOGIN=1: and one logging in to every host (--ssh-persist 0) (root; RUNS, SETTLE)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/noop.sh

bench-operations: ## status, diff, state pull and backup on settled 1+2 and 1+5 lab clusters: time of each run and the median (root; SIZES, RUNS, SETTLE; LOGIN=1: status and diff with --ssh-persist 0 too)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/operations.sh

bench-rotate: ## certs rotate (every leaf renewed), its no-op re-run, and certs rotate --ca on a 3+1 lab cluster: time by stage and control-plane node, peak RSS (root; SIZES="1+1 3+1")
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/rotate.sh

bench-addons: ## up on lab hosts (1+2) with and without two add-ons (local-path-provisioner from the mirror's Helm repository, metrics-server from its OCI registry), and a no-op re-run: wall time, the addons step, each add-on's install, peak RSS, the add-ons' pulled bytes (root; RUNS)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/build-addons.sh
	test/bench/addons.sh

bench-rss: ## every command once in a cluster's life on lab hosts (1+1, a worker added and removed): wall time and peak RSS under /usr/bin/time -v (root; CA=0 leaves certs rotate --ca out)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/rss.sh

bench-upgrade: ## clusterctl upgrade from $(K8S_UPGRADE_FROM) to $(K8S_VERSION) on 1+1 and 3+1 lab clusters: time per control-plane node and per kubelet, and a no-op re-run (root)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/artifacts.sh $(K8S_UPGRADE_FROM)
	K8S_UPGRADE_FROM=$(K8S_UPGRADE_FROM) test/bench/upgrade.sh

bench-cis: ## the CIS Kubernetes Benchmark v1.12 (kube-bench, built from the module proxy) on a 1+2 lab cluster with cluster.security.profile cis, then with the defaults: automated and manual checks passed and failed per section on the control-plane node and a worker, up's time and the API server's memory (root; PROFILES, RUNS)
	test/lab/artifacts.sh $(K8S_VERSION) >/dev/null
	test/bench/cis.sh

bench-pull: ## clusterctl artifacts pull of $(K8S_VERSION) for amd64 from the lab mirror: cold and warm (root)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/pull.sh

bench-add-node: ## add-node of one worker to running 1+1 and 1+5 lab clusters: time, bytes written, and the CPU of clusterctl and of each host (root)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/addnode.sh

bench-hostops: ## what a lab host spends on each kind of operation: an SSH login, a session, a process, the routes unit's restart, networkd's reload, an SFTP session (root; RUNS)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/bench/hostops.sh

bench-kubeadm: ## clusterctl up beside kubeadm init + parallel kubeadm join (scripted, test/bench/kubeadm.sh) on fresh lab hosts with the same artifacts, settings and pod network (flannel), alternating, until every Node is Ready and CoreDNS answers: the medians, their ratio and phases; PREPARED=1 (default) a third run, clusterctl on hosts prepared as kubeadm's; VERBOSE=1 KEEP=1: clusterctl with -vv, each remote command and upload timed in the kept up.err (root; SIZES="1+2 1+5", RUNS=5; ~60 min)
	test/lab/artifacts.sh $(K8S_VERSION)
	test/lab/build-k8s.sh --kubeadm $(K8S_VERSION)
	test/bench/kubeadm.sh

bench-fanout: ## one command on N=10,100,300 loopback sshd hosts: clusterctl vs a Go floor, Ansible and pssh (root; ~30 min)
	test/bench/fanout.sh

clean: ## remove built binaries and test caches
	rm -rf bin
	go clean -testcache
