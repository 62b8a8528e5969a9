# Sutra worker. `make demo` runs the main job; `make test` runs the suite.
GO        ?= go
BIN       := bin/worker
PKGS      := ./...
# A short fuzz run of each parser target in CI.
FUZZTIME  ?= 10s

.PHONY: build console test test-upgrade test-ha demo bench bench-console bench-data bench-plans bench-camunda soak lint services fuzz clean check-deploy tools

# worker version: the release (a tag at HEAD, else the release RELEASES
# records for HEAD, else "devel") and the commit.
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null)
RELEASE   ?= $(or $(shell git describe --tags --exact-match 2>/dev/null),$(shell awk -v c="$(REVISION)" '$$2 == c { print $$1 }' RELEASES),devel)
LDFLAGS   := -X github.com/sutra-run/worker/internal/buildinfo.version=$(RELEASE) -X github.com/sutra-run/worker/internal/buildinfo.revision=$(REVISION)

build: console
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/worker

# The web console's bundle (console/web into console/dist, embedded in the
# worker): its pinned npm packages are installed on first use.
console:
	@scripts/console.sh

services:
	@scripts/services.sh

test: services
	$(GO) vet $(PKGS)
	@scripts/node-deps.sh
	@scripts/console.sh
	$(MAKE) check-deploy
	PROMTOOL="$$(scripts/promtool.sh)" CHROMIUM="$$(scripts/chromium.sh)" $(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(GO) -C tools vet ./... && $(GO) -C tools test -race -count=1 -timeout 20m ./...
	$(MAKE) fuzz

# The rolling upgrade from the previous release (RELEASES) to this tree,
# under load, with and without a contract migration (docs/operations.md,
# "Upgrading"; tools/upgrade). About 2 minutes, most of it building the
# previous release the first time.
test-upgrade: services
	$(GO) -C tools test -tags upgrade -count=1 -timeout 10m -v ./upgrade

# The HA chaos test (docs/operations.md, "High availability"): a 3-node
# RabbitMQ cluster and a pg_auto_failover formation (scripts/ha.sh, which
# installs pg_auto_failover on first use), three worker replicas, the node
# leading the relay queue and the PostgreSQL primary killed with SIGKILL.
# Prints the seconds with no commit and the p99 relay latency of each
# failover; about 3.5 minutes. The formation is removed afterwards unless
# SUTRA_HA_KEEP=1.
test-ha: services
	@scripts/ha.sh up
	@SUTRA_TEST_HA=1 $(GO) test -race -count=1 -timeout 15m -run '^TestHA' -v ./cmd/worker; rc=$$?; \
	  [ -n "$$SUTRA_HA_KEEP" ] || scripts/ha.sh down; exit $$rc

# The operations pack (deploy/, docker-compose.yml): the alert rules and their
# unit tests with promtool, and the Kubernetes manifests and the compose file
# against their schemas. promtool and the validator's npm packages are
# installed on first use (scripts/promtool.sh, scripts/validate-deploy.sh).
# deploy/deploy_test.go, in go test, checks them against the worker and lints
# a real scrape with promtool check metrics.
check-deploy:
	@promtool="$$(scripts/promtool.sh)" && \
	  "$$promtool" check rules deploy/prometheus/alerts.yml && \
	  "$$promtool" test rules deploy/prometheus/alerts_test.yml
	@scripts/validate-deploy.sh

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

demo: services build
	$(GO) run ./cmd/demo

# The throughput benchmark (BENCHMARKS.md): the fixed-rate latency runs add
# about 35 s and the batch ceiling about 45 s; 4.5 minutes in all on a quiet
# machine, up to 8 on a busy one. Pass flags with BENCHFLAGS, e.g.
# make bench BENCHFLAGS='-lanes 16 -relays 5000'.
bench: services tools
	bin/sutra-bench $(BENCHFLAGS)

# The web console's budgets (issue 40; docs/console.md, "Budgets"): a
# million instances (1% active) seeded into a scratch schema, then the
# instance list and instance pages drawn in headless Chromium, 10 loads
# each, and the bundle's gzipped size. About 2 minutes, most of it seeding.
bench-console: services console
	CHROMIUM="$$(scripts/chromium.sh)" $(GO) test -run '^$$' -bench BenchmarkTheConsole -benchtime 10x -timeout 20m ./console

# Cost as the data grows (BENCHMARKS.md): 16 lanes on the K instances alone,
# then on a million seeded instances, then on the same with 2 kB of variables
# each, then on a million of which 1% are active. Seeding is not timed but
# takes most of the 4 minutes or so. Ten million (1% active; about 15 minutes
# more, 6 GB of disk): make bench-data BENCHFLAGS='-data 10m'.
bench-data: services tools
	bin/sutra-bench -lanes 16 -data large,large-2k,1m -pgbench-clients '' -baseline=false -sync-claims=false \
	  -outbox-lanes 0 -task-lanes 0 -latency-loads '' $(BENCHFLAGS)

# The generic plan of every hot statement on the large data set, into
# tools/bench/plans (about a minute; review the diff).
bench-plans: services tools
	bin/sutra-bench -plans tools/bench/plans

# Camunda's own realistic benchmark (BENCHMARKS.md, "Camunda's realistic
# benchmark"): the worker binary driven through its Zeebe gateway by Camunda's
# Node SDK (tools/camundaload) at 1 then 2 root instances/s, 2 minutes each
# plus the drain. Camunda's files are not in this repository: it reads them
# from SUTRA_CAMUNDA_LOAD_FILES (default ../shared/camunda-load-tests) and
# exits 2 when they are missing. Pass flags with BENCHFLAGS, e.g.
# make bench-camunda BENCHFLAGS='-rates 1.5 -duration 5m'.
bench-camunda: services build tools
	@scripts/node-deps.sh
	bin/sutra-camundaload $(BENCHFLAGS)

# Sustained load (BENCHMARKS.md, "Soak"): the worker binary at its defaults
# drains a backlog first (its drain rate), then takes SOAK_RATE relays/s (3000,
# or a share of that drain rate: SOAK_RATE=25%) for SOAK_DURATION (20m) with
# autovacuum on; a report, the samples and a plot into SOAK_OUT (bin/soak).
# Exits 1 when a target is missed. Other knobs: `go -C tools doc ./soak` and
# tools/soak/main.go.
soak: services build tools
	bin/sutra-soak

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) -C tools vet ./...

# tools/ is a module of its own (tools/go.mod), so that gonum/plot and the
# benchmark's clients are not the worker's dependencies: its commands are
# built there and run from here, where their relative paths point.
tools:
	$(GO) -C tools build -o ../bin/sutra-bench ./bench/load
	$(GO) -C tools build -o ../bin/sutra-soak ./soak
	$(GO) -C tools build -o ../bin/sutra-camundaload ./camundaload

clean:
	rm -rf bin
