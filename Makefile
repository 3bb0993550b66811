# talosflash: `make run` starts the app, `make test` runs every check.
# Both install what they need first (scripts/setup.sh, idempotent).
GO      ?= go
BIN     ?= talosflash
PKGS    := ./...
STAMP   := .setup.stamp

.PHONY: all setup build build-cli run test vet fmt-check lint fuzz bench package screenshots clean cross wine-test package-windows release release-test

all: build

$(STAMP): scripts/setup.sh go.mod go.sum
	./scripts/setup.sh
	@touch $(STAMP)

setup: $(STAMP)

# The app and, beside it, the cgo-free CLI that runs its elevated writes
# (about 60 MiB peak RSS for one card, far below the Fyne app: docs/PERFORMANCE.md), stamped with
# one version of this build: the app hands a write only to a CLI that
# prints the same (devices.UsableCLI), so a stale one is never used.
# The stamp: UTC time and 32 random bits (BSD date has no %N), digits only.
VERSION     := $(shell sed -n 's/^ *Version *= *"\(.*\)"/\1/p' FyneApp.toml)
DEV_VERSION := $(VERSION)-dev+$(shell date -u +%Y%m%d%H%M%S)$(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
DEV_LDFLAGS := -X github.com/talosflash/talosflash/app/cli.Version=$(DEV_VERSION)
CLI         := $(dir $(BIN))talosflash-cli
build: $(STAMP)
	$(GO) build -ldflags '$(DEV_LDFLAGS)' -o $(BIN) .
	CGO_ENABLED=0 $(GO) build -tags nogui -ldflags '$(DEV_LDFLAGS)' -o $(CLI) .

# Headless CLI only: static, no cgo, runs on servers without X11/GL libraries.
build-cli:
	CGO_ENABLED=0 $(GO) build -tags nogui -ldflags '$(DEV_LDFLAGS)' -o $(CLI) .

run: build
	./$(BIN) $(ARGS)

vet: $(STAMP)
	$(GO) vet $(PKGS)

# One formatting style for the module: gofmt's.
fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

# staticcheck 2025.1.1 (module version v0.6.1), fetched from the Go module proxy.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
lint: $(STAMP)
	$(GO) run $(STATICCHECK) $(PKGS)
	$(GO) run $(STATICCHECK) -tags demo ./app/gui/...

# Tests use loop devices when run as root (skipped with a message otherwise).
test: vet fmt-check lint cross wine-test
	$(GO) test -count=1 $(PKGS)
	cd third_party/xz && $(GO) vet ./... && $(GO) test -count=1 ./...  # patched xz fork: its own suite
	./scripts/fuzz.sh 5s

CROSS_STAMP := .setup-cross.stamp
$(CROSS_STAMP): scripts/setup.sh
	./scripts/setup.sh --cross
	@touch $(CROSS_STAMP)

# The CLI for macOS and Windows: built and vetted (cgo-free; the desktop app
# needs cgo, see package-windows). For Windows every package and every test
# file is vetted: the CLI's build (-tags nogui, no cgo) and, with Debian's
# mingw-w64 (setup.sh --cross), the desktop app's (cgo, Fyne: app/gui and
# the root package with their tests). POSIX-only test helpers (FIFOs,
# signals to oneself, mounts) are in *_unix_test.go files with a Windows
# stand-in that makes those tests skip. macOS vets all but app/gui, which
# needs a macOS C toolchain for Fyne.
CROSS_PKGS = $$($(GO) list -tags nogui ./... | grep -v /app/gui$$)
WIN_CC    ?= x86_64-w64-mingw32-gcc
cross: $(STAMP) $(CROSS_STAMP)
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags nogui -o /dev/null .
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet -tags nogui $(CROSS_PKGS)
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build -tags nogui -o /dev/null .
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) vet -tags nogui $(CROSS_PKGS)
	@if command -v $(WIN_CC) >/dev/null; then \
	  echo "GOOS=windows CGO_ENABLED=1 CC=$(WIN_CC) $(GO) vet ./..."; \
	  GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=$(WIN_CC) $(GO) vet ./...; \
	else \
	  echo "cross: $(WIN_CC) missing (setup.sh --cross could not install it): the desktop app's Windows vet (app/gui, the root package) is skipped" >&2; \
	fi

# The Windows unit tests of imaging/devices under Wine.
wine-test: $(STAMP) $(CROSS_STAMP)
	./scripts/wine-test.sh

# Windows desktop bundle: talosflash-windows-amd64.zip holding talosflash.exe
# (Fyne app + CLI, cgo with Debian's mingw-w64; icon and a manifest that
# asks for administrator rights at start, as writing a disk needs them).
package-windows: $(STAMP) $(CROSS_STAMP)
	./scripts/package-windows.sh

fuzz: $(STAMP)
	./scripts/fuzz.sh 60s

bench: build
	./bench/run.sh

# Linux desktop bundle (talosflash.tar.xz: binary, icon, .desktop file) via
# Fyne's packaging tool, fetched from the Go module proxy.
FYNE_TOOLS ?= fyne.io/tools/cmd/fyne@v1.7.4
package: $(STAMP)
	$(GO) run $(FYNE_TOOLS) package -os linux -release

# Release artifacts into dist/: .deb for amd64 and arm64 (app + CLI, desktop
# file, icon, polkit policy; nfpm from the Go module proxy), the static CLI
# for linux/darwin/windows on amd64 and arm64, SHA256SUMS (scripts/release.sh).
RELEASE_STAMP := .setup-release.stamp
$(RELEASE_STAMP): scripts/setup.sh
	./scripts/setup.sh --release
	@touch $(RELEASE_STAMP)

release: $(STAMP) $(RELEASE_STAMP)
	./scripts/release.sh

# Installs dist/'s .deb files into temporary roots (dpkg -x) and starts the
# app from each under Xvfb (its window must appear) and its CLI: the arm64
# one under qemu-user.
release-test: release
	TALOSFLASH_DEB=$$(ls $(CURDIR)/dist/talosflash_*_amd64.deb) TALOSFLASH_DEB_ARM64=$$(ls $(CURDIR)/dist/talosflash_*_arm64.deb) \
	  $(GO) test -count=1 -run TestDeb ./packaging/

screenshots: build
	./scripts/screenshots.sh

clean:
	rm -rf $(BIN) $(CLI) $(STAMP) $(CROSS_STAMP) $(RELEASE_STAMP) talosflash.exe talosflash-windows-amd64.zip dist
