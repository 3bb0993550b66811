//go:build !linux && !darwin

package imaging

func freeSpace(string) (int64, bool) { return 0, false }

func fileTargetFree(Target) (int64, bool) { return 0, false }
