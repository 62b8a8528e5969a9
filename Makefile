# Sutra worker. `make demo` runs the main job; `make test` runs the suite.
GO        ?= go
BIN       := bin/worker
PKGS      := ./...
# A short fuzz run of each parser target in CI.
FUZZTIME  ?= 10s

.PHONY: build test demo bench lint services fuzz clean

build:
	$(GO) build -o $(BIN) ./cmd/worker

services:
	@scripts/services.sh

test: services
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(MAKE) fuzz

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

demo: services build
	$(GO) run ./cmd/demo

# The throughput benchmark (BENCHMARKS.md): about 2.5 minutes. Pass flags with
# BENCHFLAGS, e.g. make bench BENCHFLAGS='-lanes 16 -relays 5000'.
bench: services
	$(GO) run ./bench/load $(BENCHFLAGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
