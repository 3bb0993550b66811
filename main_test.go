package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// The command line decides between the app and the CLI as the usage says:
// `talosflash [gui] [app flags]` is the app (issue 39: the README's
// `./talosflash --factory URL --allow-loop` answered `unknown command
// "--factory"`), a command or --flash anywhere is the CLI.
func TestMainOpensApp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		app  bool
	}{
		{nil, true},
		{[]string{"gui"}, true},
		{[]string{"gui", "--factory", "http://127.0.0.1:8088"}, true},
		{[]string{"--factory", "http://127.0.0.1:8088", "--allow-loop"}, true},
		{[]string{"--inventory=talosflash.yaml"}, true},
		{[]string{"-allow-loop"}, true},
		{[]string{"--inventroy", "talosflash.yaml"}, true}, // the app's parser names the typo
		{[]string{"flash", "--role", "worker"}, false},
		{[]string{"--flash", "--role", "worker", "--device", "/dev/sdb"}, false},
		{[]string{"--role", "worker", "--device", "/dev/sdb", "--flash"}, false},
		{[]string{"--device", "/dev/sdb", "-flash"}, false},
		{[]string{"apply", "--node", "127.0.0.1"}, false},
		{[]string{"--help"}, false},
		{[]string{"-h"}, false},
		{[]string{"--version"}, false},
		{[]string{"-version"}, false},
		{[]string{"help", "flash"}, false},
		{[]string{"-"}, false},
	} {
		if got := opensApp(tc.args); got != tc.app {
			t.Errorf("opensApp(%q) = %v, want %v", tc.args, got, tc.app)
		}
	}
}

// `talosflash --factory URL --allow-loop` starts the app: without a display
// it stops at the app's own one line (exit 2) after its flags parsed, not
// at the CLI's "unknown command".
func TestMainAppFlagsWithoutCommandStartTheApp(t *testing.T) {
	if !cli.HasApp {
		t.Skip("a -tags nogui build has no app (TestMainNoguiBuildSaysItHasNoApp)")
	}
	code, stdout, stderr := runBinary(t, []string{"HOME=" + t.TempDir()}, "--factory", "http://127.0.0.1:1", "--allow-loop")
	if code != 2 || !strings.Contains(stderr, "no display") || !strings.Contains(stderr, "graphical session") || strings.Contains(stderr, "unknown command") || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want the app's no-display line", code, stdout, stderr)
	}
	// A mistyped app flag is the app parser's, with its suggestion.
	code, _, stderr = runBinary(t, nil, "--factory", "http://127.0.0.1:1", "--alow-loop")
	if code != 2 || !strings.Contains(stderr, "unknown flag --alow-loop; did you mean --allow-loop?") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// --flash anywhere is still the CLI's flash.
	code, _, stderr = runBinary(t, nil, "--role", "worker", "--flash")
	if code != 2 || !strings.Contains(stderr, "--device is required") {
		t.Fatalf("--role worker --flash: exit %d, stderr %q", code, stderr)
	}
}

// The app's flags parse the same in every build.
func TestMainParseAppArgs(t *testing.T) {
	o, err := parseAppArgs([]string{"--factory", "http://127.0.0.1:8088", "--allow-loop", "--device", "/dev/loop7", "--device", "/dev/loop8", "--subnet", "127.0.0.131/32, 127.0.1.9/29", "--inventory", "t.yaml", "--profiles", "p.yaml"})
	if err != nil || o.factoryURL != "http://127.0.0.1:8088" || !o.allowLoop || strings.Join(o.devices, " ") != "/dev/loop7 /dev/loop8" ||
		fmt.Sprint(o.subnets) != "[127.0.0.131/32 127.0.1.8/29]" || o.inventory != "t.yaml" || o.profiles != "p.yaml" {
		t.Fatalf("%+v, %v", o, err)
	}
	for args, want := range map[string]string{
		"--subnet lan":         `gui: --subnet "lan": want a CIDR such as 192.168.1.0/24`,
		"--allow-loop devices": "unknown command \"devices\"; run `talosflash --help`",
		"--factory":            "gui: --factory needs a value (see: talosflash gui -h)",
	} {
		if _, err := parseAppArgs(strings.Fields(args)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if _, err := parseAppArgs([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// The CLI build (make build-cli: -tags nogui) has no app: the app's command
// line says so in one line, exit 2; what is not the app's flags either is
// the CLI's to name.
func TestMainNoguiBuildSaysItHasNoApp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "talosflash-cli")
	if out, err := exec.Command("go", "build", "-tags", "nogui", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nogui: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(baseEnv(), "HOME="+t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	const noApp = "talosflash: this build has no desktop app (built with -tags nogui); for the CLI run `talosflash --help`\n"
	for _, args := range [][]string{nil, {"gui"}, {"--factory", "http://127.0.0.1:1", "--allow-loop"}, {"gui", "-h"}} {
		if code, stderr := run(args...); code != 2 || stderr != noApp {
			t.Errorf("talosflash-cli %q: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, stderr := run("--role", "worker"); code != 2 || !strings.Contains(stderr, `unknown command "--role"`) {
		t.Errorf("talosflash-cli --role worker: exit %d, stderr %q", code, stderr)
	}
}
