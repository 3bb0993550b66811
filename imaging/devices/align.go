package devices

import "unsafe"

// alignedBuffer returns n zeroed bytes whose address is a multiple of align
// (a power of two): unbuffered raw-device I/O needs sector-aligned memory.
func alignedBuffer(n, align int) []byte {
	b := make([]byte, n+align)
	off := int(addrOf(b) & uintptr(align-1))
	if off != 0 {
		off = align - off
	}
	return b[off : off+n : off+n]
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
