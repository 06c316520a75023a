# Every target is one line you can also run by hand. The repository is a Go
# workspace (go.work): the core module at the root and nested modules for
# heavier dependencies; PKGS covers all of them.
PKGS := $(shell go list -m -f '{{.Dir}}/...')
MODS := $(shell go list -m -f '{{.Dir}}')
FUZZTIME ?= 30s

.PHONY: test lint tidy bench herd benchmarks fuzz profile profile-check

# -vet=all runs every go vet check inside the -race build: a separate
# `go vet` would compile client-go and the rest a second time without
# -race (measured: twice the CPU time of the whole kube module's tests).
test: tidy
	go test -race -vet=all -count=1 $(PKGS)

lint: tidy
	go vet $(PKGS)

tidy:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: the files above need formatting'; exit 1; }
	@for m in $(MODS); do (cd $$m && go mod tidy -diff) || { echo "go mod tidy: $$m is not tidy"; exit 1; }; done

bench:
	go test -run='^$$' -bench=. -benchmem ./verify/ ./cache/ && go test -run='^$$' -bench=. -benchtime=1x ./bench/

herd:
	go run ./cmd/bench -json bench/results/herd.json -plot bench/results/herd.svg | tee bench/results/herd.txt

benchmarks:
	go test -run='^$$' -bench=. -count=10 -timeout=60m ./bench/ | tee bench/results/herd-bench.txt

fuzz:
	go test -run='^$$' -fuzz='^FuzzParseHash$$' -fuzztime=$(FUZZTIME) ./verify/
	go test -run='^$$' -fuzz='^FuzzVerifier$$' -fuzztime=$(FUZZTIME) ./verify/
	go test -run='^$$' -fuzz='^FuzzHeaders$$' -fuzztime=$(FUZZTIME) ./httpauth/

profile:
	go run ./cmd/bench -cpuprofile-dir profiles -json profiles/herd.json

profile-check:
	go run ./cmd/bench profile check -nodes 200 -logn 12 -mode inproc -models nodepass profiles/ci
