package imagetest

import "github.com/klauspost/compress/zstd"

// ZstdBytes compresses raw as Image Factory's .raw.zst is shaped: one
// frame with the content size in its header and a checksum (the factory
// runs `zstd -T0 -18`; the fastest level keeps tests quick, the container
// is the same).
func ZstdBytes(raw []byte) ([]byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil), nil
}

// Zstd is the fixture's image as ZstdBytes, made on first use.
func (f *Fixture) Zstd(t TB) []byte {
	t.Helper()
	f.zstdOnce.Do(func() { f.zstd, f.zstdErr = ZstdBytes(f.Raw) })
	if f.zstdErr != nil {
		t.Fatalf("%v", f.zstdErr)
	}
	return f.zstd
}
