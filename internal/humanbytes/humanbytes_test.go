package humanbytes

import "testing"

func TestExact(t *testing.T) {
	for n, want := range map[int64]string{
		0:         "0 bytes",
		1:         "1 byte",
		720:       "720 bytes",
		1024:      "1.0 KiB (1024 bytes)",
		113246208: "108 MiB (113246208 bytes)",
		469762047: "448 MiB (469762047 bytes)",
		1 << 40:   "1.0 TiB (1099511627776 bytes)",
	} {
		if got := Exact(n); got != want {
			t.Errorf("Exact(%d) = %q, want %q", n, got, want)
		}
	}
}
