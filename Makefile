# The two commands the README starts with:
#   go run ./cmd/practicegw run      runs practicegw on its embedded default
#   make test                        runs the whole test suite

GO ?= go

.PHONY: test deps vet tidy build bench

# practicegw version prints VERSION: the repository's last tag and commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

build:
	$(GO) build -ldflags "-X github.com/practicegw/practicegw/cmd/internal/cli.version=$(VERSION)" -o practicegw ./cmd/practicegw

deps:
	./scripts/install-test-deps.sh

vet:
	$(GO) vet ./...

# go.mod and go.sum say exactly what the code imports: fails, printing the
# difference, when they do not.
tidy:
	$(GO) mod tidy -diff

# CI=true makes tests that need redis-server or chromium fail rather than
# skip when either is missing. Without the vendors' published descriptions
# (../shared/vendor-apis, or PRACTICEGW_VENDOR_APIS) the doubles check no
# request against them, which one line says first.
test: deps tidy vet
	@$(GO) run ./cmd/practicegw-vendors -unchecked
	CI=$${CI:-true} $(GO) test -count=1 -timeout 40m ./...

bench:
	./bench/gateway-vs-static.sh
