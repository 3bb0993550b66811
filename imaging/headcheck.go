package imaging

import (
	"bufio"
	"errors"
	"io"
)

// HeadSize is how much of the decoded image FlashOptions.CheckHead sees:
// the protective MBR and the primary GPT with its entries, for 512- and
// 4096-byte sectors, and a META store (512 KiB) that lies in the first
// 2 MiB, so that its contents too are checked before a card is touched.
const HeadSize = 2 << 20

// checkHead lets check look at the decoded stream's first HeadSize bytes
// and returns the stream to write (the same bytes, from the start).
func checkHead(stream io.Reader, check func([]byte, int64) error, size int64) (io.Reader, error) {
	if check == nil {
		return stream, nil
	}

	br := bufio.NewReaderSize(stream, HeadSize)

	head, err := br.Peek(HeadSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}

	if err := check(head, size); err != nil {
		return nil, err
	}

	return br, nil
}
