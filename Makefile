# fusebox — build, run, test, bench.
# Two commands on a fresh machine: `make run` and `make test`.

GO        ?= go
BIN       := bin/fusebox
PKGS      := ./...
# -race on every package: they all run goroutines.
TESTFLAGS ?= -race -count=1 -timeout 12m

.PHONY: all build run demo test tools pg-tools test-short bench chaos fuzz lint fmt tidy clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/node

# One node on loopback with embedded defaults (data under ./data).
run: build
	./$(BIN) serve $(ARGS)

# A 3-node cluster on loopback, two destinations (one goes down for 30 s) and
# a steady workload, with a live view; Ctrl-C tears it all down.
# ARGS="--duration 90s" for an unattended run.
demo: build
	$(GO) run ./tools/demo --bin $(BIN) $(ARGS)

test: tools pg-tools lint
	$(GO) test $(TESTFLAGS) $(PKGS)

# Tools the tests need beyond Go: promtool (alert rules) and Chromium (the
# status page's browser test).
tools:
	@sh deploy/install-tools.sh
	@sh ui/install-chromium.sh

# PostgreSQL's server binaries for the postgres task store's tests
# (internal/pgtest starts throwaway servers as a non-root user).
pg-tools:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		{ echo "installing postgresql (the task store tests start throwaway servers)"; \
		  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

test-short:
	$(GO) test -short -count=1 $(PKGS)

# Every benchmark beside its baseline, one table, written to docs/benchmarks.md.
# BENCH_QUICK=1 for the short profile.
bench:
	$(GO) run ./tools/benchreport

# A longer randomized chaos schedule against real processes. The seed is
# printed; SEED=<seed> replays it exactly. SECURE=1 runs the cluster with TLS,
# encrypted gossip and named tokens. STORE=postgres keeps tasks in a throwaway
# PostgreSQL, which the schedule also crashes and starts again. DEST=1 adds
# outages of the task destination (503s, or answers past the timeout); DEST=2
# also 400s, which end the tasks called then failed with that answer. OPS=1
# adds operator steps: leadership transfers, shard moves and closes.
chaos: build $(if $(filter postgres,$(STORE)),pg-tools)
	SEED=$(SEED) FUSEBOX_CHAOS=1 FUSEBOX_CHAOS_SECURE=$(SECURE) FUSEBOX_CHAOS_STORE=$(STORE) FUSEBOX_CHAOS_DEST=$(DEST) FUSEBOX_CHAOS_OPS=$(OPS) FUSEBOX_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -v -run TestChaosRandom ./test/e2e/

# Every fuzz target for FUZZTIME each (make test runs only their seed corpora).
# FUZZMINTIME bounds the minimization of each new input: with seeds of tens of
# KB (a 500-task submit), go's default (60s) spent whole short runs minimizing,
# reporting 0 execs/s.
FUZZTIME ?= 30s
FUZZMINTIME ?= 2s
FUZZ_TARGETS := \
	./cluster:FuzzDecodeHint \
	./cluster:FuzzDecodeFleetReport \
	./cluster:FuzzDecodeMeta \
	./dynconfig:FuzzValidate \
	./shardmap:FuzzShardOf \
	./raftstore/state:FuzzRestoreSnapshot \
	./internal/authtoken:FuzzParse \
	./api:FuzzCheckJSONText \
	./api:FuzzHandOverRequest \
	./api:FuzzDelegateRequest \
	./dynconfig:FuzzAddressPattern \
	./transport:FuzzRedactURL \
	./raftstore:FuzzReadSnapshotFile \
	./dynconfig:FuzzParseFile \
	./ui:FuzzPeerHistory \
	./raftstore/state:FuzzDecodeTaskCommandsBin \
	./raftstore/state:FuzzDecodeCompleteTasksMulti \
	./api:FuzzImportTask \
	./tasks:FuzzNew \
	./taskstore/pgstore:FuzzParseNotifyPayload \
	./transport:FuzzBreakerDestination \
	./transport:FuzzParseRetryAfter \
	./raftstore/state:FuzzApplyImportTasks \
	./taskstore/pgstore:FuzzPoolConfig \
	./transport:FuzzDecodeRequest \
	./transport:FuzzEncodeRequest \
	./internal/fastjson:FuzzUnmarshal \
	./internal/fastjson:FuzzValid \
	./internal/fastjson:FuzzMarshal \
	./transport:FuzzMemberTarget \
	./transport:FuzzPlainMediaType \
	./transport:FuzzSchemeHost \
	./transport:FuzzValidateURL

# A failing input is written under <pkg>/testdata/fuzz/ and fails the sweep
# at its end; tools/fuzz.sh explains the one failure that is not a finding.
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINTIME=$(FUZZMINTIME) sh tools/fuzz.sh $(FUZZ_TARGETS)

# gofmt, go vet, staticcheck and deadcode (functions no program or test
# reaches), all clean. The two analysers are installed at pinned versions
# into bin/tools on first use.
STATICCHECK_VERSION := v0.8.2
DEADCODE_VERSION    := v0.52.0
LINT_BIN            := $(CURDIR)/bin/tools
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@test -x $(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION) || { GOBIN=$(LINT_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && mv $(LINT_BIN)/staticcheck $(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION); }
	@test -x $(LINT_BIN)/deadcode-$(DEADCODE_VERSION) || { GOBIN=$(LINT_BIN) $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION) && mv $(LINT_BIN)/deadcode $(LINT_BIN)/deadcode-$(DEADCODE_VERSION); }
	$(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION) $(PKGS)
	@out=$$($(LINT_BIN)/deadcode-$(DEADCODE_VERSION) -test $(PKGS)); \
	if [ -n "$$out" ]; then echo "deadcode: unreachable functions:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin data
