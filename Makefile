GO      ?= go
BIN     := bin/storectl
PKGS    := ./...

.PHONY: all build test test-short bench fuzz demo lint fmt vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/storectl

test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: fmt vet

clean:
	rm -rf bin demo
