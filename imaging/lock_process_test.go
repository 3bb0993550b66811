package imaging

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// TestHelperFlashProcess is not a test: TestTwoProcessesShareOneDownload
// runs the test binary again with it to get a second, separate process.
func TestHelperFlashProcess(t *testing.T) {
	url, dir, key, dst := os.Getenv("TF_HELPER_URL"), os.Getenv("TF_HELPER_CACHE"), os.Getenv("TF_HELPER_KEY"), os.Getenv("TF_HELPER_DST")
	if url == "" {
		t.Skip("helper process only")
	}
	c := &Cache{Dir: dir, Retries: 3, RetryDelay: time.Millisecond}
	res, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: url, Key: key, Cache: c}, Targets: []string{dst}, Verify: true})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("SHA256", res.SHA256)
}

// Two talosflash processes flashing the same image at the same time: one
// downloads while the other waits on the entry's lock, then reuses it;
// both cards are right and the image is downloaded once.
func TestTwoProcessesShareOneDownload(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	srv.SetBuildDelay(time.Second) // both processes are waiting on it
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	dsts := []string{filepath.Join(t.TempDir(), "a.img"), filepath.Join(t.TempDir(), "b.img")}
	for _, dst := range dsts {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFlashProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TF_HELPER_URL="+srv.ImageURL(testSchematic, testVersion, testFile),
			"TF_HELPER_CACHE="+c.Dir, "TF_HELPER_KEY="+CacheKey(testSchematic, testVersion, testFile), "TF_HELPER_DST="+dst)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[i].String(), "SHA256 "+img.SHA256) {
			t.Fatalf("process %d: %v: %s", i, err, outs[i].String())
		}
		if imagetest.FileSHA256(t, dsts[i], img.Size) != img.SHA256 {
			t.Fatalf("card %d differs", i)
		}
	}
	if n := len(srv.RequestsTo(path)); n != 1 || srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("%d requests, %d bytes: want one download shared by both processes", n, srv.BytesServed())
	}
}
