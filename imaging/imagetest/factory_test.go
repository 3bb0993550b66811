package imagetest

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The factory shapes produce what Image Factory serves: xz -0 in 1 MiB
// blocks with sizes (so xzpar can decode them in parallel), zstd as one
// frame; both decode back to the raw bytes.
func TestFactoryShapes(t *testing.T) {
	const size = 3<<20 + 512*7 // 4 blocks of at most 1 MiB
	raw, err := Raw(size, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range FactoryShapes {
		t.Run(s.Name, func(t *testing.T) {
			if !s.HaveTool() {
				t.Skipf("%s not installed", s.Cmd[0])
			}
			var z bytes.Buffer
			if err := s.Compress(context.Background(), &z, bytes.NewReader(raw)); err != nil {
				t.Fatal(err)
			}
			var got []byte
			switch s.Ext {
			case ".xz":
				got = runTool(t, z.Bytes(), "xz", "-dc")
				f := filepath.Join(t.TempDir(), "img.raw.xz") // xz -l needs a file
				if err := os.WriteFile(f, z.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				list := string(runTool(t, nil, "xz", "--robot", "-l", f))
				if s.Name == ShapeXZ0.Name && !strings.Contains(list, "\ntotals\t1\t4\t") {
					t.Errorf("xz -0 -T0 of %d bytes: want 1 stream of 4 blocks, xz -l says:\n%s", size, list)
				}
			case ".zst":
				zr, err := zstd.NewReader(bytes.NewReader(z.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				got, err = io.ReadAll(io.LimitReader(zr, size+1))
				zr.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("%s round trip: %d bytes, want the %d raw bytes", s.Name, len(got), len(raw))
			}
		})
	}
}

func runTool(t *testing.T, in []byte, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}
