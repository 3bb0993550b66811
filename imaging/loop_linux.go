package imaging

import (
	"os"
	"path/filepath"
	"strings"
)

// loopBacking is the file behind a loop device target ("" when target is
// not a loop device): writing to /dev/loopN writes that file.
func loopBacking(target string) string {
	dev, err := filepath.EvalSymlinks(target)
	if err != nil {
		return ""
	}
	name := filepath.Base(dev)
	if !strings.HasPrefix(name, "loop") {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}
