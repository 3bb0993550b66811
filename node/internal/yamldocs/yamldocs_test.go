package yamldocs

import (
	"bytes"
	"testing"
)

func TestSplitAndBlankKeepLines(t *testing.T) {
	data := []byte("a: 1\n--- # second\nkind: X\nb: |\n  ---not a separator\n---\nc: 3")
	cs := Split(data)
	if len(cs) != 3 {
		t.Fatalf("%d chunks: %+v", len(cs), cs)
	}
	if string(data[cs[1].Start:cs[1].End]) != "kind: X\nb: |\n  ---not a separator\n" || cs[1].FirstLine != 3 || cs[1].EndLine != 6 {
		t.Errorf("chunk 1 = %+v %q", cs[1], data[cs[1].Start:cs[1].End])
	}
	if !cs[2].Contains(7) || cs[2].Contains(6) {
		t.Errorf("chunk 2 lines %+v", cs[2])
	}
	out := Blank(data, cs[1:2])
	if len(out) != len(data) || bytes.Count(out, []byte("\n")) != bytes.Count(data, []byte("\n")) {
		t.Fatal("line structure changed")
	}
	if bytes.Contains(out, []byte("kind")) || !bytes.HasPrefix(out, []byte("a: 1\n--- # second\n")) || !bytes.HasSuffix(out, []byte("---\nc: 3")) {
		t.Errorf("blanked = %q", out)
	}
	if bytes.Contains(data, []byte("      ")) {
		t.Error("input modified")
	}
}
