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

// attachedLoops lists the attached loop devices (those sysfs names a
// backing file for) with their backing files, stat'ed.
func attachedLoops() []loopDevice {
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var loops []loopDevice
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		back := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		fi, err := os.Stat(back)
		if err != nil {
			continue // gone (deleted, or renamed since): nothing to name
		}
		loops = append(loops, loopDevice{name: filepath.Base(filepath.Dir(filepath.Dir(p))), backingPath: back, backing: fi})
	}
	return loops
}
