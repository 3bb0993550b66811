package printable

import "testing"

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"worker-1", "worker-1"},
		{"Grüße", "Grüße"},
		{"\x1b[2J", `\x1b[2J`},
		{"a\x00b", `a\x00b`},
		{"a\r\nb\t", `a\x0d\x0ab\x09`},
		{"\u009b31m", `\x9b31m`},
		{"abc\u202efed", `abc\u202efed`},
		{"\u2066x\u2069", `\u2066x\u2069`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"\ufffd", "\ufffd"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Bounded("\x1b\x1b\x1b", 9); got != `\x1b\x1b…` {
		t.Errorf("Bounded = %q", got)
	}
	if !Is("worker-1") || Is("a\x1b") {
		t.Error("Is")
	}
}

func TestLines(t *testing.T) {
	if got := Lines("a\x1b\nb\u202e\r\n"); got != "a\\x1b\nb\\u202e\\x0d\n" {
		t.Errorf("Lines = %q", got)
	}
}
