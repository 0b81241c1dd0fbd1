# rewind's build, test and measurement entry points. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     ?= bin/rewind
PREFIX  ?= /usr/local
FUZZTIME ?= 10s

.PHONY: all demo build install test e2e race fmt-check vet tidy-check update-golden fuzz bench bench-quick bench-large soak clean

all: build

## demo: build a crashed pipeline in a temporary directory and resume it
demo: build
	$(BIN) demo

## build: a static binary in bin/rewind, version stamped
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/rewind

## install: build and copy to $(PREFIX)/bin
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/rewind

## test: formatting, vet, module tidiness, then every test (script tests included)
test: fmt-check vet tidy-check
	$(GO) test -count=1 -timeout 15m ./...

## e2e: render report pages in headless Chromium and check what the browser laid out
## (lanes, bars, labels, markers, arms) and a screenshot. Installs Debian's chromium
## when it is missing (as root, or with sudo).
e2e:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo=sudo; \
	  else echo "make e2e: chromium is missing, and installing it needs root or sudo" >&2; exit 1; fi; \
	  echo "make e2e: installing chromium (apt-get)"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null || exit 1; \
	fi
	REWIND_E2E=1 $(GO) test -count=1 -timeout 5m -run '^TestReportChromium$$' -v ./cmd/rewind

## race: every test under the race detector (about 3 minutes on 2 cores; needs cgo)
race:
	$(GO) test -race -count=1 -timeout 30m ./...

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

tidy-check:
	$(GO) mod tidy -diff

## update-golden: rewrite the golden sections of the script tests
update-golden:
	REWIND_UPDATE=1 $(GO) test -count=1 ./cmd/rewind -run TestScripts

## fuzz: run every fuzz target for $(FUZZTIME) each
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: every workload beside its baselines (medians of REWIND_BENCH_RUNS interleaved
## rounds, default 7, and ratios; nothing asserted), then issue 10's goal table with a
## verdict per row. REWIND_BENCH_ONLY=w1-checkpoint,... picks workloads.
## (It exits with the test's status, not grep's: a workload that fails fails the target.)
bench:
	@rc=$$(mktemp); \
	{ REWIND_BENCH=1 $(GO) test -count=1 -timeout 0 -run TestBench -v ./cmd/rewind-bench; echo $$? >$$rc; } \
	  | grep --line-buffered -v -e '^=== RUN' -e '^--- ' -e '^PASS' -e '^ok '; \
	s=$$(cat $$rc); rm -f $$rc; exit $$s

## bench-quick: 20,000 files instead of 100,000 and 3 rounds (the 100k rows say so)
bench-quick:
	REWIND_BENCH_SCALE=quick REWIND_BENCH_RUNS=3 $(MAKE) bench

## bench-large: 1,000,000 files (the 1M row and the 20k rows), 7 rounds
bench-large:
	REWIND_BENCH_SCALE=large $(MAKE) bench

## soak: the crash and concurrency tests with many rounds
soak:
	REWIND_SOAK=1 $(GO) test -count=1 -timeout 0 ./...

clean:
	rm -rf bin
