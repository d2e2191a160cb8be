# evotune: build, test and run the tuner.
#
#   make tune         tune the mission shape on this machine's GPU (needs a GPU, nvcc)
#   make tune-replay  a search against the committed synthetic replay file (anywhere)
#   make bench-search evo, random and exhaustive compared on BENCH_REPLAY, with a PASS/FAIL line
#   make report       write ARCHIVE's report (report.md and SVG plots) into REPORT_OUT
#   make bench        time ARCHIVE's best beside the default and PyTorch SDPA (needs a GPU, nvcc, PyTorch)
#   make test         every test, including the fuzz seed corpora
#   make lint         gofmt and go vet
#   make fuzz         each fuzz target for FUZZTIME

GO           ?= go
BIN          ?= bin/evotune
SHAPE        ?= 1x8x512x64
BUDGET       ?= 8h
ARCHIVE      ?= evotune-archive
REPLAY       ?= runner/testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz
REPLAY_ARCHIVE ?= evotune-replay-archive
# The real H100 recording when there is one, else the synthetic file.
BENCH_REPLAY ?= $(or $(lastword $(sort $(wildcard runner/testdata/replay/h100-*.jsonl.gz))),runner/testdata/replay/synthetic-1x8x512x64-fp16.jsonl.gz)
REPORT_OUT   ?= evotune-report
BENCH_OUT    ?= results/bench-$(shell date -u +%Y%m%d)
TEST_TIMEOUT ?= 30m
FUZZTIME     ?= 2m

.PHONY: build test tune tune-replay bench-search report bench lint fuzz

build:
	CGO_ENABLED=1 $(GO) build -o $(BIN) ./cmd/evotune

test:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

tune: build
	$(BIN) tune --shape $(SHAPE) --budget $(BUDGET) --archive $(ARCHIVE)

tune-replay: build
	$(BIN) tune --replay $(REPLAY) --archive $(REPLAY_ARCHIVE) --budget 2h

# bench-search exits 0 whether the goal passes or not: the table is the evidence.
bench-search: build
	$(BIN) bench-search --replay $(BENCH_REPLAY)

report: build
	$(BIN) report --archive $(ARCHIVE) --out $(REPORT_OUT)

# bench needs a GPU: evotune bench says so and fails where there is none.
bench: build
	$(BIN) bench --archive $(ARCHIVE) --out $(BENCH_OUT)

lint:
	@files=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$files" ]; then echo "gofmt -l lists files that need formatting:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...

# fuzz finds every Fuzz target in the module's test files and runs each on
# its own for FUZZTIME (go test -fuzz takes one target of one package).
fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=./$$(dirname $${file#./}); \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz $$dir $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done
