# Every target is one line you can also run by hand. The repository is a Go
# workspace (go.work): the core module at the root and nested modules for
# heavier dependencies; PKGS covers all of them.
PKGS := $(shell go list -m -f '{{.Dir}}/...')
MODS := $(shell go list -m -f '{{.Dir}}')
FUZZTIME ?= 30s

.PHONY: test pins test-arm64 lint tidy bench herd scale benchmarks fuzz profile profile-baseline profile-check scrypt-generate-check scrypt-bench apiserver test-apiserver module-check

# tools/apiserver builds etcd and kube-apiserver for the tests against a
# real API server. It is outside go.work (its k8s.io/kubernetes would drag
# the workspace's client-go along), so it is built, and checked for
# tidiness, with GOWORK=off; `make test` and `make tidy` leave it alone.
APISERVER_BIN := $(CURDIR)/tools/apiserver/bin

# -vet=all runs every go vet check inside the -race build: a separate
# `go vet` would compile client-go and the rest a second time without
# -race (measured: twice the CPU time of the whole kube module's tests).
# The last line runs the scrypt package's pure-Go code, which the one
# before only reaches on other architectures, and the Verifier over it
# (one lane: every batch a single hash). tools/testprogress (its own
# module, outside go.work, tested first) prints a line as each package
# starts and ends, names what still runs after 30 s of silence, shows
# each failure's output, and exits with go test's status; without it,
# drop it and -json from the lines.
TESTPROGRESS := tools/testprogress/bin/testprogress
test: tidy pins
	cd tools/testprogress && GOWORK=off go mod tidy -diff && GOWORK=off go test -count=1 . && GOWORK=off go build -o bin/testprogress .
	$(TESTPROGRESS) go test -json -race -vet=all -count=1 $(PKGS)
	$(TESTPROGRESS) go test -json -race -count=1 -tags purego ./scrypt/ ./verify/...

# The core module's tests built for linux/arm64, k3s's most common other
# platform (pure-Go scrypt, one lane), run under qemu-user: `apt-get
# install qemu-user-static`. No -race: the race detector does not run
# under qemu-user. Tests that need what the emulator lacks skip, saying so.
test-arm64:
	GOARCH=arm64 go test -count=1 -exec qemu-aarch64-static ./...

# A module outside the repository requires the library modules (the core,
# kube, prom) through a module proxy made of this tree, with GOWORK=off,
# builds and runs, and passes the checks of `pins`; the commands are built
# the same way (tools/modcheck, its own module outside go.work).
module-check:
	cd tools/modcheck && GOWORK=off go mod tidy -diff && GOWORK=off go run . -repo ../..

# Against k3s's go.mod (tools/modcheck/testdata/k3s-469d009f.go.mod):
# requiring the core, kube and prom raises none of k3s's requirements, and
# each module of the workspace, on its own, selects no version above what
# k3s builds of x/crypto, x/sys, client-go, client_golang and golang-lru.
pins:
	cd tools/modcheck && GOWORK=off go run . -repo ../.. -pins

lint: tidy
	go vet $(PKGS)

tidy:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: the files above need formatting'; exit 1; }
	@for m in $(MODS); do (cd $$m && go mod tidy -diff) || { echo "go mod tidy: $$m is not tidy"; exit 1; }; done

bench:
	go test -run='^$$' -bench=. -benchmem ./verify/ ./cache/ && go test -run='^$$' -bench=. -benchtime=1x ./bench/

herd:
	go run ./cmd/bench -json bench/results/herd/default.json -plot bench/results/herd/default.svg | tee bench/results/herd/default.txt

# The scale table of BENCHMARKS.md ("Scale: the servers alone"): nodepass
# and k3s-latest, SCALE_RUNS rounds of four herds (320 nodes at logN 15;
# 320, 1000 and 3000 at logN 12), agents and servers split (the default
# where the machine allows), SCALE_AGENT agents, SCALE_MODE mode. Each run
# writes SCALE_DIR/AGENT-MODE-NODES-LOGN-ROUND.json, .txt (the table) and
# .log (progress, CPUs, load average); then the medians of every run in
# SCALE_DIR (table.md) and two plots of the k3s agents' split runs, over
# the batched and the x/crypto bound. SCALE_AGENT=backoff and
# SCALE_MODE=inproc add their rows to the table.
SCALE_DIR ?= bench/results/scale
SCALE_RUNS ?= 3
SCALE_AGENT ?= jitter-5-10s
SCALE_MODE ?= http
scale:
	mkdir -p $(SCALE_DIR) && go build -o cmd/bench/bench ./cmd/bench
	for i in $$(seq $(SCALE_RUNS)); do for h in 320:15 320:12 1000:12 3000:12; do f=$(SCALE_DIR)/$(SCALE_AGENT)-$(SCALE_MODE)-$${h%:*}-$${h#*:}-$$i; \
	  cmd/bench/bench -models nodepass,k3s-latest -nodes $${h%:*} -logn $${h#*:} -agent $(SCALE_AGENT) -mode $(SCALE_MODE) -deadline 3m -json $$f.json > $$f.txt 2> $$f.log || exit 1; done; done
	go run ./cmd/bench scale-table '$(SCALE_DIR)/*.json' | tee $(SCALE_DIR)/table.md
	go run ./cmd/bench scale-plot -bound batch -o $(SCALE_DIR)/scale-batch.svg 'split=$(SCALE_DIR)/jitter-5-10s-http-*.json'
	go run ./cmd/bench scale-plot -bound xcrypto -o $(SCALE_DIR)/scale-xcrypto.svg 'split=$(SCALE_DIR)/jitter-5-10s-http-*.json'

benchmarks:
	go test -run='^$$' -bench=. -count=10 -timeout=60m ./bench/ | tee bench/results/herd-bench.txt

fuzz:
	go test -run='^$$' -fuzz='^FuzzParseHash$$' -fuzztime=$(FUZZTIME) ./verify/
	go test -run='^$$' -fuzz='^FuzzVerifier$$' -fuzztime=$(FUZZTIME) ./verify/
	go test -run='^$$' -fuzz='^FuzzHeaders$$' -fuzztime=$(FUZZTIME) ./httpauth/
	go test -run='^$$' -fuzz='^FuzzKey$$' -fuzztime=$(FUZZTIME) ./scrypt/

# The scrypt assembly and stubs must be what their avo generator, the
# module scrypt/_asm (outside go.work), makes of them; avo comes from the
# module proxy.
scrypt-generate-check:
	cd scrypt/_asm && GOWORK=off go mod tidy -diff
	go generate ./scrypt/
	git diff --exit-code -- scrypt/blockmix_amd64.s scrypt/blockmix_amd64_stubs.go

# x/crypto against this scrypt package and the package's BlockMix codes
# against each other, with the memory floor beside them: SCRYPT_COUNT
# rounds of every benchmark, one round after the other so that the
# machine's noise hits every implementation alike, then benchstat (from
# golang.org/x/perf, through the proxy), into SCRYPT_OUT (untracked: the
# committed results are under bench/results/).
SCRYPT_COUNT ?= 6
SCRYPT_OUT ?= scrypt-bench.out
BENCHSTAT ?= go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
scrypt-bench:
	mkdir -p $(SCRYPT_OUT) && go test -c -o $(SCRYPT_OUT)/scrypt.test ./scrypt/
	for i in $$(seq $(SCRYPT_COUNT)); do $(SCRYPT_OUT)/scrypt.test -test.run='^$$' -test.bench='^Benchmark(Key|Batch|Throughput|Code|MemoryFloor)$$' -test.benchmem || exit 1; done | tee $(SCRYPT_OUT)/bench.txt
	{ $(BENCHSTAT) -filter '.name:(Key OR Batch OR Throughput)' -col /impl $(SCRYPT_OUT)/bench.txt && \
	  $(BENCHSTAT) -filter '.name:Code' -col /code $(SCRYPT_OUT)/bench.txt && \
	  $(BENCHSTAT) -filter '.name:MemoryFloor' $(SCRYPT_OUT)/bench.txt; } | tee $(SCRYPT_OUT)/benchstat.txt

apiserver:
	@cd tools/apiserver && GOWORK=off go mod tidy -diff || { echo 'go mod tidy: tools/apiserver is not tidy'; exit 1; }
	cd tools/apiserver && GOWORK=off go build -o bin/etcd ./etcd && GOWORK=off go build -o bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

# The TestAPIServer* tests skip without NODEPASS_APISERVER_BIN; this target
# builds the binaries and runs them (kube, the example server).
test-apiserver: apiserver
	NODEPASS_APISERVER_BIN=$(APISERVER_BIN) go test -race -count=1 -timeout=20m -run='^TestAPIServer' -v ./kube/... ./examples/server/

profile:
	go run ./cmd/bench -cpuprofile-dir profiles -json profiles/herd.json

# The CI check's scenario: enough nodes for 150 samples or more.
PROFILE_CI := -nodes 1000 -logn 13 -mode inproc -models nodepass

profile-baseline:
	go run ./cmd/bench $(PROFILE_CI) -cpuprofile-dir profiles/ci -json profiles/ci/herd.json

profile-check:
	dir=$$(mktemp -d) && go run ./cmd/bench $(PROFILE_CI) -cpuprofile-dir $$dir -json $$dir/herd.json > $$dir/run.txt && \
	  go run ./cmd/profile check profiles/ci $$dir
