package plan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --force-raw never goes to the root child (which refuses it: as root it
// would copy any file onto a disk): the job fails before the child starts.
func TestForceRawIsNotElevated(t *testing.T) {
	img := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(img, []byte("not a disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	started := false
	_, err := Flash(context.Background(), Job{
		Image: FromFile(img), Devices: []string{"/dev/sdz"}, ForceRaw: true,
		NeedsElevation: func(string) bool { return true },
		Elevate: func(args []string) (*exec.Cmd, error) {
			started = true
			return exec.Command("true"), nil
		},
	})
	if err == nil || started || !strings.Contains(err.Error(), "--force-raw") {
		t.Fatalf("started %v, err %v: want a refusal before the child", started, err)
	}
}
