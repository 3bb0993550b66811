// Package testkit is the test fixtures every package shares: files written
// into a test's directory (the project's node/testdata configs, a loopback
// inventory with its configs), META card images (a Talos-like GPT disk
// with a META partition) and loopback ports (free, or closed).
//
// It imports only the standard library and imaging/imagetest, so any
// package's own tests (inventory's and imaging/meta's included) can use it
// without an import cycle; what writes a node's META onto a card is the
// library under test (inventory.Node.WriteCardPath, meta.WriteTagsPath).
package testkit

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// Root is the module's directory (where go.mod is), found from this
// file's own path so tests of any package read the same testdata.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testkit: no source path (built with -trimpath?)")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("testkit: module root %s: %v", root, err)
	}
	return root
}

// TestdataPath is the path of a file under node/testdata ("worker.yaml",
// "talos114/valid/worker.yaml"): the machine configs of a test cluster.
func TestdataPath(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Root(t), "node", "testdata", filepath.FromSlash(name))
}

// Testdata is the content of TestdataPath(name).
func Testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(TestdataPath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteFile writes data at dir/name (parent directories made, 0600) and
// returns its path.
func WriteFile[D string | []byte](t testing.TB, dir, name string, data D) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteFiles writes files (name -> content) into a new t.TempDir() and
// returns it.
func WriteFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		WriteFile(t, dir, name, body)
	}
	return dir
}

// CardSize is the size of the card images TalosCard writes.
const CardSize = 16 << 20

// TalosCard writes a sparse Talos-like card image of CardSize bytes named
// name into a new t.TempDir(): a GPT with imagetest.TalosParts() (EFI,
// BOOT, a 1 MiB META with nothing in it yet, STATE), followed by parts.
// It returns the path.
func TalosCard(t testing.TB, name string, parts ...imagetest.Part) string {
	t.Helper()
	path, _ := Disk(t, name, CardSize, append(imagetest.TalosParts(), parts...))
	return path
}

// Disk writes a sparse GPT disk image of size bytes with parts named name
// into a new t.TempDir(), returning its path and each partition's offset.
func Disk(t testing.TB, name string, size int64, parts []imagetest.Part) (string, []int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	offs, err := imagetest.WriteGPTDisk(path, size, parts)
	if err != nil {
		t.Fatal(err)
	}
	return path, offs
}

// FreePort is a TCP port free now on every one of hosts (loopback IPs;
// none: 127.0.0.1), so fakes on several addresses share one port, as the
// nodes of an inventory do. It skips the test when the first host cannot
// be listened on (no such loopback address here).
func FreePort(t testing.TB, hosts ...string) int {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", hosts[0], err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		free := true
		for _, h := range hosts[1:] {
			l2, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				free = false
				break
			}
			l2.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// ClosedAddr is a 127.0.0.1 address nothing listens on now: a dial is
// refused (a factory that is down, a node still rebooting).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}
