//go:build linux

package xvfbtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An app whose X library could not open a display that answers is started
// once more, and the window it then shows counts; the log says so.
func TestStartAppStartsAgainWhenTheDisplayAnswered(t *testing.T) {
	for _, tool := range []string{"xwininfo", "xmessage"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	display := Start(t, "640x480x24")
	dir := t.TempDir()
	script := filepath.Join(dir, "app")
	// The first start fails as GLFW does when XOpenDisplay returns NULL; the
	// second shows a window titled "xvfbtest-app".
	body := "#!/bin/sh\nif [ ! -e " + dir + "/started ]; then touch " + dir + "/started; echo \"PlatformError: X11: Failed to open display $DISPLAY\"; exit 2; fi\nexec xmessage -title xvfbtest-app -display \"$DISPLAY\" hello\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DISPLAY=" + display}
	out, exited := StartApp(t, cmd, display, "xvfbtest-app")
	if strings.Contains(out.String(), "Failed to open display") {
		t.Fatalf("the output is the first start's, not the window's: %q", out.String())
	}
	if cmd.Process == nil {
		t.Fatal("the caller's command is not the started one")
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Any other early end fails the test with the app's output: checked on
// startApp, which StartApp fails with.
func TestStartAppReportsAnEarlyEnd(t *testing.T) {
	if _, err := exec.LookPath("xwininfo"); err != nil {
		t.Skip("xwininfo not installed")
	}
	display := Start(t, "640x480x24")
	out, _, err := startApp(exec.Command("sh", "-c", "echo broken; exit 3"), display, "never")
	if err == nil || !strings.Contains(err.Error(), "exited (exit status 3)") || out.String() != "broken\n" {
		t.Fatalf("err %v, output %q", err, out.String())
	}
	if got := xSockets(display); !strings.Contains(got, "@/tmp/.X11-unix/X"+strings.TrimPrefix(display, ":")) {
		t.Fatalf("xSockets(%s) lacks the abstract socket:\n%s", display, got)
	}
}
