# Every module of the workspace (go.work): the library, and the modules that hold drivers.
PKGS := ./... ./bench/... ./cmd/... ./integration/... ./otel/... ./pgnotify/... ./sqlmocktests/... ./examples/...

.DEFAULT_GOAL := help
.PHONY: help test test/short test/integration lint fmt-check vet bench

help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z\/-]+:.*## / { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# -count=1: the compile-fail test builds programs against the library's sources, which the test
# cache does not see; the live tests must run against the databases as they are now.
test: fmt-check vet ## gofmt check, go vet and go test -race on every module
	go test -race -count=1 -timeout 45m $(PKGS)

# -short: the integration package takes SQLite's cells only, whatever the environment says (no
# server, no container), and the command's install test is skipped. The examples' Example_invoices
# needs Postgres and cannot skip itself.
test/short: fmt-check ## the library's tests, sqlmocktests and SQLite's integration cells under -race, for a change in progress; about 11 minutes on a loaded 2-core machine
	go test -short -race -count=1 -timeout 15m ./... ./otel/... ./pgnotify/... ./sqlmocktests/...
	go test -short -race -count=1 -timeout 15m -skip '^Example_invoices$$' ./integration/...

test/integration: ## only the live tests, failing when a database is unreachable
	INBOX_REQUIRE_DATABASES=1 go test -race -count=1 ./integration/...

lint: fmt-check vet ## gofmt, go vet, and staticcheck when installed
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck $(PKGS); \
	else echo "staticcheck not installed: skipped"; fi

fmt-check: ## fail when a file is not gofmt-formatted
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

vet: ## go vet on every module
	go vet $(PKGS)

bench: ## throughput beside raw SQL loops, latency (also across processes), then the peers (River, gue, goqite) draining and publishing; about an hour
	go run ./bench/cmd/throughput -plot docs/benchmarks.svg
	go run ./bench/cmd/latency
	go run ./bench/cmd/peers
	go run ./bench/cmd/publish -rounds 5

.PHONY: scale
scale: ## many consumer processes and a table that grows, as docs/benchmarks.md quotes them (bench/cmd/scale); about 75 minutes
	go run ./bench/cmd/scale -own-postgres -db postgres -n 10000 -rounds 3 procs
	go run ./bench/cmd/scale -own-postgres -db postgres -forms rowlock,lease -batch 16 -rounds 3 drain
	go run ./bench/cmd/scale -own-postgres -db postgres -forms advisory -batch 16 -rounds 1 -drain-n 250000 drain
	go run ./bench/cmd/scale -own-postgres -db postgres -batch 1,16 -rounds 2 history queues
	go run ./bench/cmd/scale -own-postgres -db postgres -sustain-for 10m sustained
	go run ./bench/cmd/scale -db mariadb -n 10000 -rounds 3 procs
	go run ./bench/cmd/scale -db mariadb -forms rowlock,lease -batch 16 -rounds 1 drain
	go run ./bench/cmd/scale -db mariadb -forms advisory -batch 16 -rounds 1 -drain-n 100000 drain
	go run ./bench/cmd/scale -db mariadb -batch 1,16 -rounds 3 history queues

.PHONY: reliability
# Every run runs whatever the others' results; the target fails if any does. The long kill loop
# runs without -race: under the race detector the pure-Go SQLite driver drains a few rows a
# second, and the loop would measure the detector (CI's short loop runs with -race).
reliability: ## the reliability suite, the long crash matrix (100 SIGKILLs per cell and mode) and the long kill loop (sessions killed every 200 ms for 20 s), with their tables; about 25 minutes
	@status=0; \
	INBOX_REQUIRE_DATABASES=1 go test -race -count=1 -run '^(TestConformance|TestFaults.*|TestBadInput)$$' ./integration/ || status=1; \
	INBOX_REQUIRE_DATABASES=1 INBOX_RELIABILITY=long go test -race -count=1 -timeout 30m -v -run '^TestCrashMatrix$$' ./integration/ || status=1; \
	INBOX_REQUIRE_DATABASES=1 INBOX_RELIABILITY=long go test -count=1 -timeout 60m -v -run '^TestKillLoop$$' ./integration/ || status=1; \
	exit $$status
