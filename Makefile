# storectl — see README.md. `make demo` and `make test` are all a newcomer needs.
GO        ?= go
BIN       := bin/storectl
PKGS      := ./...
FUZZTIME  ?= 30s
# Minimising each new input without a limit stalled the file-based targets
# (14 runs in 45 s on FuzzQueueDirSegments); 10 tries each keeps them running.
FUZZMINIMIZE ?= 10x
DEMO      := demo
# make test pipes go test through testreport; pipefail keeps go's own exit code.
SHELL     := bash
.SHELLFLAGS := -o pipefail -c

.PHONY: all build test bench bench-go bench-cli fuzz demo lint fmt vet clean man install

all: build

VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/storectl

## man: one man page per command (cobra's doc generator) into $(GENDIR)/man
## install: binary, man pages and bash/zsh/fish completions under $(DESTDIR)$(PREFIX)
PREFIX    ?= /usr/local
DESTDIR   ?=
GENDIR    ?= bin/gen
BINDIR    := $(DESTDIR)$(PREFIX)/bin
MANDIR    := $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR   := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR    := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR   := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d

man: build
	@rm -rf $(GENDIR)/man
	$(BIN) gen-docs --man $(GENDIR)/man
	@echo "$$(ls $(GENDIR)/man | wc -l) man pages in $(GENDIR)/man (man -l $(GENDIR)/man/storectl.1)"

install: man
	@rm -rf $(GENDIR)/completions
	$(BIN) gen-docs --completions $(GENDIR)/completions
	install -d $(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	install -m 0755 $(BIN) $(BINDIR)/storectl
	install -m 0644 $(GENDIR)/man/*.1 $(MANDIR)/
	install -m 0644 $(GENDIR)/completions/storectl.bash $(BASHDIR)/storectl
	install -m 0644 $(GENDIR)/completions/_storectl $(ZSHDIR)/_storectl
	install -m 0644 $(GENDIR)/completions/storectl.fish $(FISHDIR)/storectl.fish

## test: vet + every unit, fixture, fuzz-seed and CLI script test (what CI runs).
## Prints one line per package, then every skipped test with its reason.
## STORECTL_REQUIRE_REAL=1 (set by .ci/run) makes a missing real broker a failure.
test:
	$(GO) vet $(PKGS)
	$(GO) build -o bin/testreport ./internal/cmd/testreport
	$(GO) test -count=1 -timeout 20m -json $(PKGS) | bin/testreport

## bench: Go benchmarks (MB/s via b.SetBytes) and the whole-process CLI benchmark vs cat
bench: bench-go bench-cli

bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem -timeout 60m $(PKGS)

# The script builds bin/storectl (and genstore) itself.
bench-cli:
	GO=$(GO) scripts/bench-cli.sh

## fuzz: run every fuzz target for $(FUZZTIME) each
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) $$pkg || exit 1; \
	  done; \
	done

## demo: build, unpack bundled sample stores into ./demo and run storectl on them
demo: build
	@rm -rf $(DEMO) && mkdir -p $(DEMO)/rocketmq $(DEMO)/rabbitmq
	@tar -C $(DEMO)/rocketmq -xzf testdata/rocketmq/rmq533-c-stale.tar.gz
	@tar -C $(DEMO)/rabbitmq -xzf testdata/rabbitmq/datasets/crash-mid-write-confirmed.tar.gz
	@echo "### RocketMQ 5.3.3 store: 13 stale records copied into a reused commitlog tail (rocketmq #10017)"
	@echo "\$$ storectl verify $(DEMO)/rocketmq/store"
	@$(BIN) verify --color always $(DEMO)/rocketmq/store; echo "(exit code $$?)"
	@echo
	@echo "\$$ storectl truncate $(DEMO)/rocketmq/store      # dry run: the plan, nothing written"
	@$(BIN) truncate --color always $(DEMO)/rocketmq/store; echo "(exit code $$?)"
	@echo
	@echo "### RabbitMQ 3.10.8 node killed mid-write: torn tail in the current .rdq file"
	@echo "\$$ storectl verify $(DEMO)/rabbitmq/rmqfix@localhost"
	@$(BIN) verify --color always $(DEMO)/rabbitmq/rmqfix@localhost; echo "(exit code $$?)"
	@echo
	@echo "Next: $(BIN) truncate --apply --yes $(DEMO)/rocketmq/store   (backup first; undo with storectl undo)"
	@echo "      $(BIN) verify -o jsonl $(DEMO)/rocketmq/store | tail -n1 | jq .exit_code"

vet:
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: fmt vet

clean:
	rm -rf bin $(DEMO)
