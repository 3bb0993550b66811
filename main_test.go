package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/cli"
)

// TestMain lets tests run this test binary as the talosflash binary: same
// packages, same package initialization (Fyne's included).
func TestMain(m *testing.M) {
	// The elevated children of these tests write image files (a seam of
	// the test binary only: no flag or variable of the real one sets it).
	cli.ElevatedFileTargets = true
	if os.Getenv("TALOSFLASH_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runBinary runs talosflash args with env (on top of a base environment
// without any locale or display variables) and returns exit code, stdout, stderr.
func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "LANG", name == "LANGUAGE", strings.HasPrefix(name, "LC_"),
			name == "DISPLAY", name == "WAYLAND_DISPLAY", name == "TALOSFLASH_TEST_RUN_MAIN":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Under C.UTF-8 (Debian's default) every command used to start with three
// "Fyne error: Error parsing user locale C" lines from Fyne's lang init.
func TestCLIHasNoFyneNoiseUnderAnyLocale(t *testing.T) {
	locales := [][]string{
		nil, // unset
		{"LANG="},
		{"LANG=C"}, {"LANG=C.UTF-8"}, {"LANG=C.utf8"}, {"LANG=POSIX"}, {"LANG=POSIX.UTF-8"},
		{"LANG=en_US.UTF-8"}, {"LANG=de_DE@euro"}, {"LANG=sr_RS.UTF-8@latin"},
		{"LC_ALL=C.UTF-8", "LANG=en_US.UTF-8"},
		{"LC_MESSAGES=C.UTF-8"},
		{"LANG=en_US.UTF-8", "LANGUAGE=C:de_DE@euro:en"},
		{"LANG=C.UTF-8", "LANGUAGE=fr"},
	}
	commands := [][]string{
		{"version"},
		{"--help"},
		{"profiles"},
		{"schematic", "--role", "worker"},
		{"flash", "-h"},
		{"devices", "--json"},
		{"apply"}, // usage error
		{"nodes", "--subnet", "127.0.0.1/32", "--timeout", "100ms"},
		{"gui", "-h"},
	}
	for _, loc := range locales {
		for _, args := range commands {
			_, stdout, stderr := runBinary(t, loc, args...)
			if strings.Contains(stderr, "Fyne") || strings.Contains(stdout, "Fyne") {
				t.Errorf("env %q, talosflash %s: Fyne noise:\n%s%s", loc, strings.Join(args, " "), stderr, stdout)
			}
		}
	}
}
