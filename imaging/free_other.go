//go:build !linux && !darwin

package imaging

func freeSpace(string) (int64, bool) { return 0, false }

func fileTargetFree(Target) (int64, bool) { return 0, false }

// presizeFile: elsewhere a file target is not grown first (its zero
// chunks are written).
func presizeFile(Target, int64) {}

func isRegularFile(Target) bool { return false }
