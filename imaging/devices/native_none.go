//go:build !darwin && !windows

package devices

// Linux (and the unsupported systems) have no native listing: sysfs is read
// by List and Check themselves.

func (l *Lister) nativeList() ([]Disk, bool, error) { return nil, false, nil }

func (l *Lister) nativeCheck(string, int64, Options) (*Disk, bool, error) {
	return nil, false, nil
}
