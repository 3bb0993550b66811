//go:build !nogui

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/app/gui"
	"github.com/talosflash/talosflash/internal/xvfbtest"
)

// `make run` without a display used to end in GLFW's panic and a stack trace.
func TestGUIWithoutDisplayPrintsOneLine(t *testing.T) {
	code, stdout, stderr := runBinary(t, []string{"LANG=C.UTF-8", "HOME=" + t.TempDir()})
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(stderr, "talosflash --help") || !strings.Contains(stderr, "make build-cli") {
		t.Errorf("stderr should be one line suggesting the CLI, got:\n%s", stderr)
	}
	if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") || stdout != "" {
		t.Errorf("stack trace or output:\n%s%s", stdout, stderr)
	}
}

func TestMissingDisplay(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if missingDisplay("linux", env(nil)) == "" {
		t.Error("linux without DISPLAY/WAYLAND_DISPLAY: want a reason")
	}
	for _, m := range []map[string]string{{"DISPLAY": ":0"}, {"WAYLAND_DISPLAY": "wayland-0"}} {
		if r := missingDisplay("linux", env(m)); r != "" {
			t.Errorf("linux %v: %q, want none", m, r)
		}
	}
	if r := missingDisplay("darwin", env(nil)); r != "" {
		t.Errorf("darwin needs no DISPLAY, got %q", r)
	}
}

// A display that cannot be opened panics inside GLFW: one line, exit 2.
// Other panics are bugs and keep their trace.
func TestGUIDisplayPanicIsOneLine(t *testing.T) {
	var stderr bytes.Buffer
	run := func(gui.Options) error { panic("NotInitialized: The GLFW library is not initialized") }
	code := runGUIWith(nil, &bytes.Buffer{}, &stderr, func(string) string { return ":99" }, run)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "talosflash --help") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("a non-display panic must propagate, got %v", r)
		}
	}()
	runGUIWith(nil, &bytes.Buffer{}, &stderr, func(string) string { return ":99" }, func(gui.Options) error { panic("boom") })
}

func TestGUIHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runGUIWith([]string{"-h"}, &stdout, &stderr, func(string) string { return "" }, nil)
	if code != 0 || !strings.Contains(stdout.String(), "--factory URL") || strings.Contains(stdout.String(), "elevated") {
		t.Fatalf("exit %d, usage:\n%s%s", code, stdout.String(), stderr.String())
	}
}

// A mistyped flag of the app is said as the CLI says one: with two
// dashes and the closest flag (it got neither: "-inventroy", no guess).
func TestGUIFlagTypoSuggests(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runGUIWith([]string{"--inventroy", "talosflash.yaml"}, &stdout, &stderr, func(string) string { return ":99" }, nil)
	want := "talosflash: gui: unknown flag --inventroy; did you mean --inventory? (see: talosflash gui -h)\n"
	if code != 2 || stderr.String() != want {
		t.Fatalf("exit %d, stderr %q, want %q", code, stderr.String(), want)
	}
}

// The app still starts (and says nothing) under C.UTF-8 on a real X server.
func TestGUIStartsUnderXvfb(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Xvfb")
	}
	if _, err := exec.LookPath("xwininfo"); err != nil {
		t.Skip("xwininfo not installed")
	}
	display := xvfbtest.Start(t, "1024x768x24")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "gui", "--factory", "http://127.0.0.1:1")
	cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1", "LANG=C.UTF-8", "DISPLAY="+display, "HOME="+t.TempDir())
	stderr, exited := xvfbtest.StartApp(t, cmd, display, "talosflash")
	cancel()
	<-exited
	if out := stderr.String(); strings.Contains(out, "Fyne") || strings.Contains(out, "panic") {
		t.Fatalf("app output:\n%s", out)
	}
}

// fynelocale must be initialized before Fyne's lang package reads the
// locale: Go's init order (import paths sorted, dependencies first) makes it
// so only while fynelocale imports nothing lang does not.
func TestFyneLocaleInitsBeforeFyneLang(t *testing.T) {
	_, _, stderr := runBinary(t, []string{"GODEBUG=inittrace=1"}, "version")
	ours := strings.Index(stderr, "init github.com/talosflash/talosflash/internal/fynelocale ")
	fyne := strings.Index(stderr, "init fyne.io/fyne/v2/lang ")
	if ours < 0 || fyne < 0 || ours > fyne {
		t.Fatalf("init order: fynelocale at %d, fyne.io/fyne/v2/lang at %d (want fynelocale first)", ours, fyne)
	}
}

// `talosflash gui --allow-loop --device D --device E` reaches the app's options.
func TestGUIAllowLoopAndDevice(t *testing.T) {
	var got gui.Options
	code := runGUIWith([]string{"--allow-loop", "--device", "/dev/loop7", "--device", "/dev/loop8", "--subnet", "127.0.0.131/32, 127.0.1.9/29"}, &bytes.Buffer{}, &bytes.Buffer{},
		func(string) string { return ":99" }, func(o gui.Options) error { got = o; return nil })
	// Version: the elevated write looks for the CLI of this build's version.
	if code != 0 || !got.AllowLoop || fmt.Sprint(got.Devices) != "[/dev/loop7 /dev/loop8]" || fmt.Sprint(got.Subnets) != "[127.0.0.131/32 127.0.1.8/29]" || got.Version != cli.Version {
		t.Fatalf("exit %d, options %+v", code, got)
	}
	var stderr bytes.Buffer
	if code := runGUIWith([]string{"--subnet", "lan"}, &bytes.Buffer{}, &stderr, func(string) string { return ":99" }, nil); code != 2 || !strings.Contains(stderr.String(), "CIDR") {
		t.Fatalf("bad --subnet: exit %d, %q", code, stderr.String())
	}
	var stdout bytes.Buffer
	runGUIWith([]string{"-h"}, &stdout, &bytes.Buffer{}, func(string) string { return "" }, nil)
	if !strings.Contains(stdout.String(), "--allow-loop") || !strings.Contains(stdout.String(), "--device D") || !strings.Contains(stdout.String(), "--subnet CIDR") {
		t.Fatalf("usage does not list the flags:\n%s", stdout.String())
	}
}

// An inventory the app cannot use exits as the CLI does (docs/JSON.md):
// its problems 7, a missing file 2, each said in one line.
func TestGUIInventoryExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	bad := filepath.Join(dir, "talosflash.yaml")
	if err := os.WriteFile(bad, []byte("nodes:\n  - hostname: w1\n    role: wroker\n    address: 192.168.1.21/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deps := func(o gui.Options) error { _, err := gui.DefaultDeps(o); return err } // no window
	for _, tc := range []struct {
		file string
		code int
		want string
	}{
		{bad, 7, "1 problem(s) (see talosflash inventory check " + bad + ")"},
		{filepath.Join(dir, "missing.yaml"), 2, "start one with: talosflash inventory init"},
	} {
		var stderr bytes.Buffer
		code := runGUIWith([]string{"--inventory", tc.file, "--factory", "http://127.0.0.1:1"}, &bytes.Buffer{}, &stderr, func(string) string { return ":99" }, deps)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q", tc.file, code, stderr.String())
		}
	}
}
