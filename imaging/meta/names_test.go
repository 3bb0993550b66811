package meta

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// evilName clears the screen, forges a line and reverses what follows.
const evilName = "\x1b[2J\x1b[HNode: evil\u202e"

// rawControl says whether s holds a control or bidi character as it is.
func rawControl(s string) bool {
	return strings.ContainsAny(s, "\x1b\x00\u202e\r\n")
}

// A card's partition names reach text (the refusals' messages) escaped,
// and quoted; the table (data) keeps them as they are. A NUL ends a GPT
// name (UTF-16 names are NUL-terminated): what follows it is not the name.
func TestPartitionNamesInMessagesAreEscaped(t *testing.T) {
	path, _ := testkit.Disk(t, "card.img", testkit.CardSize, []imagetest.Part{{Name: "EFI", Size: 1 << 20}, {Name: evilName, Size: 1 << 20}, {Name: "ab\x00\x1b[2J", Size: 1 << 20}})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()

	card, err := ReadStore(f, st.Size())
	if !errors.Is(err, ErrNoMETA) {
		t.Fatalf("err %v, want no META", err)
	}
	msg := err.Error()
	if rawControl(msg) || !strings.Contains(msg, `"\x1b[2J\x1b[HNode: evil\u202e"`) || !strings.Contains(msg, `"ab"`) {
		t.Fatalf("message %q: want the names escaped and quoted", msg)
	}
	if got := card.Table.Partitions[1].Name; got != evilName {
		t.Fatalf("the table's name %q, want it as the card has it", got)
	}
	if got := card.Table.Partitions[2].Name; got != "ab" {
		t.Fatalf("a NUL-terminated name read as %q", got)
	}
	if got := PartitionNames(card.Table); got != `"EFI", "\x1b[2J\x1b[HNode: evil\u202e", "ab"` {
		t.Fatalf("PartitionNames = %q", got)
	}
}

// A partition META overlaps is named escaped in the refusal too.
func TestOverlappingPartitionNameIsEscaped(t *testing.T) {
	l := imagetest.Layout{Name: "META over a hostile name", Entries: []imagetest.Entry{
		{Name: "META", First: 2048, Last: 4095}, {Name: evilName, First: 3000, Last: 6143}, {Name: "EPHEMERAL", First: 6144, Last: 16350},
	}, FirstUsable: 34, LastUsable: 16350}
	raw := layoutImage(t, l)
	tab, err := gpt.Read(readerAt(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckPlace(tab, int64(len(raw)))
	if !errors.Is(err, ErrPlace) || rawControl(err.Error()) || !strings.Contains(err.Error(), `\x1b[2J`) {
		t.Fatalf("err %q: want the overlap refused with the name escaped", err)
	}
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, errors.New("EOF")
	}
	n := copy(p, r[off:])
	if n < len(p) {
		return n, errors.New("short")
	}
	return n, nil
}
