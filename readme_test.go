//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// tryItMarker precedes the README block this test runs.
const tryItMarker = "<!-- try-it: readme_test.go runs these commands"

// tryItCommands returns the commands of the README's "try it" block, one per
// line (comments dropped, continuation lines joined).
func tryItCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(readme, []byte(tryItMarker))
	if !ok {
		t.Fatalf("README.md has no %q block", tryItMarker)
	}
	_, block, ok := bytes.Cut(after, []byte("```sh\n"))
	if !ok {
		t.Fatal("no ```sh block after the try-it marker")
	}
	block, _, ok = bytes.Cut(block, []byte("```"))
	if !ok {
		t.Fatal("the try-it block is not closed")
	}
	var cmds []string
	pending := ""
	for _, line := range strings.Split(string(block), "\n") {
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			pending += cont + " "
			continue
		}
		if line = pending + line; line != "" {
			cmds = append(cmds, line)
		}
		pending = ""
	}
	return cmds
}

// The README's "try it without hardware" walkthrough runs as written: the
// fake Image Factory, then the CLI downloading from it and flashing a file
// target, with the names `make build` and `make build-cli` produce. The
// port and /tmp/ are swapped for a free loopback port and a temporary
// directory; the app's line is left to the real-window tests.
func TestREADMETryItRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fake factory (-short)")
	}
	// What `make build` and `make build-cli` would run (-n: nothing runs).
	plan, err := exec.Command("make", "-n", "-B", "build", "build-cli").Output()
	if err != nil {
		t.Fatalf("make -n: %v", err)
	}
	var outputs []string
	for _, line := range strings.Split(string(plan), "\n") {
		if f := strings.Fields(line); slices.Contains(f, "build") && slices.Contains(f, "-o") {
			outputs = append(outputs, filepath.Clean(f[slices.Index(f, "-o")+1]))
		}
	}
	if !slices.Equal(outputs, []string{"talosflash", "talosflash-cli", "talosflash-cli"}) {
		t.Fatalf("make build build-cli writes %q: the README's ./talosflash and ./talosflash-cli would not be what the builds make", outputs)
	}

	dir := t.TempDir()
	// ./talosflash-cli is this test binary run as talosflash (TestMain).
	cli := filepath.Join(dir, "talosflash-cli")
	script := fmt.Sprintf("#!/bin/sh\nTALOSFLASH_TEST_RUN_MAIN=1 exec %q \"$@\"\n", os.Args[0])
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := testkit.ClosedAddr(t) // the fake factory's, free now
	home := filepath.Join(dir, "home")
	env := append(baseEnv(), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	// A fresh HOME, but go run keeps this machine's module and build caches.
	goenv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Skipf("go env: %v (the walkthrough needs the go command)", err)
	}
	if v := strings.Fields(string(goenv)); len(v) == 3 {
		env = append(env, "GOPATH="+v[0], "GOMODCACHE="+v[1], "GOCACHE="+v[2], "GOPROXY=off")
	}
	tmp := filepath.Join(dir, "tmp") + "/"
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	rewrite := func(cmd string) string {
		cmd = strings.ReplaceAll(cmd, "127.0.0.1:8088", addr)
		cmd = strings.ReplaceAll(cmd, "/tmp/", tmp)
		return strings.ReplaceAll(cmd, "./talosflash-cli ", cli+" ")
	}

	served := regexp.MustCompile(`sha256 ([0-9a-f]{64})`)
	var sum, lastOut string
	ran := map[string]bool{}
	for _, c := range tryItCommands(t) {
		switch {
		case strings.HasPrefix(c, "make "):
			ran["make"] = true
			continue // this test builds ./talosflash-cli itself
		case strings.HasPrefix(c, "./talosflash ") || c == "./talosflash":
			ran["app"] = true
			continue // the app: app/gui/e2e and gui_test.go run the real window
		case c == "kill %1":
			continue // t.Cleanup stops it
		}
		if !strings.HasPrefix(c, "go run ./factory/factorytest/fakefactory ") && !strings.HasPrefix(c, "./talosflash-cli ") {
			t.Fatalf("README try-it line %q: not a command this test knows how to run", c)
		}
		if bg, ok := strings.CutSuffix(c, "&"); ok {
			sum = startFakeFactory(t, rewrite(strings.TrimSpace(bg)), env, served)
			ran["factory"] = true
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", rewrite(c))
		cmd.Env, cmd.Dir, cmd.Stdin = env, ".", strings.NewReader("")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("README try-it line %q: %v\n%s%s", c, err, out, stderr.Bytes())
		}
		lastOut = string(out)
		ran["cli"] = true
	}
	if !ran["make"] || !ran["factory"] || !ran["cli"] || !ran["app"] {
		t.Fatalf("the try-it block lacks a step: %v", ran)
	}
	// The last line: the flash's result event, the fake's image on the card.
	ev, ok := contract.Decode([]byte(lastOut))
	if !ok || ev.Result == nil || ev.Result.SHA256 != sum || !ev.Result.Verified {
		t.Fatalf("last output %q: want the result event of the served image (sha256 %s)", lastOut, sum)
	}
	if got := imagetest.FileSHA256(t, ev.Result.Device, ev.Result.Bytes); got != sum || !strings.HasPrefix(ev.Result.Device, tmp) {
		t.Fatalf("%s holds sha256 %s, want %s", ev.Result.Device, got, sum)
	}
}

// startFakeFactory runs cmd until the test ends and returns the image's
// sha256 once it says it is listening.
func startFakeFactory(t *testing.T, cmd string, env []string, served *regexp.Regexp) string {
	t.Helper()
	if !strings.Contains(cmd, "--listen 127.") {
		t.Fatalf("%q: the fake factory must listen on a loopback address", cmd)
	}
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Env, c.Dir = env, "."
	c.Stderr = os.Stderr
	// Its own process group: `go run` does not pass the interrupt on to the
	// program it built, so the whole group is stopped.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.WaitDelay = 10 * time.Second
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sum := ""
		for sc.Scan() {
			if m := served.FindStringSubmatch(sc.Text()); m != nil && sum == "" {
				sum = m[1]
			}
			if strings.HasPrefix(sc.Text(), "try: ") {
				found <- sum
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(found)
	}()
	select {
	case sum, ok := <-found:
		if !ok || sum == "" {
			t.Fatalf("%q ended without serving", cmd)
		}
		return sum
	case <-time.After(3 * time.Minute): // go run compiles first
		t.Fatalf("%q did not start in 3 minutes", cmd)
	}
	return ""
}
