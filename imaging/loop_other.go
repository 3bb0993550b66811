//go:build !linux

package imaging

// loopBacking: loop devices are Linux's.
func loopBacking(string) string { return "" }

func attachedLoops() []loopDevice { return nil }
