# rewind's build, test and measurement entry points. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     ?= bin/rewind
PREFIX  ?= /usr/local
FUZZTIME ?= 10s

DIST    ?= dist
# The platforms `make dist` builds for, as GOOS/GOARCH.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: all demo build install man dist test e2e race fmt-check vet tidy-check update-golden fuzz bench bench-quick bench-large soak clean

all: build

## demo: build a crashed pipeline in a temporary directory and resume it
demo: build
	$(BIN) demo

## build: a static binary in bin/rewind, version stamped
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/rewind

## install: build and copy to $(PREFIX)/bin, with the man page
install: build man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/rewind
	install -m 0644 bin/rewind.1 $(DESTDIR)$(PREFIX)/share/man/man1/rewind.1

## man: the man page bin/rewind.1, from the command table (read it: man -l bin/rewind.1)
man: build
	mkdir -p bin && $(BIN) __man > bin/rewind.1.tmp && mv bin/rewind.1.tmp bin/rewind.1

## dist: static binaries for $(PLATFORMS) in $(DIST)/, version stamped, with the
## man page and SHA256SUMS
dist: man
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/rewind-$(VERSION)-$$os-$$arch; \
	  echo "build $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/rewind; \
	done
	cp bin/rewind.1 $(DIST)/rewind.1
	cd $(DIST) && if command -v sha256sum >/dev/null; then sha256sum rewind-* rewind.1; else shasum -a 256 rewind-* rewind.1; fi > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

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
	rm -rf bin $(DIST)
