package node

import (
	"strings"
	"testing"
	"unicode"
)

// Whatever a node sends, what talosflash shows holds no control or format
// character (other than the line breaks of multi-line text) and is bounded.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"evil\x1b[2J\r\nrow", "v1.14.5\x1b[31m", "\u202eabc", "\xff\xfe", "a\x9bb", "cannot construct !!str `x` into y", "+  - A=b\n+ content: |\n+     x\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(what, out string, max int, newlines bool) {
			for _, r := range out {
				if (r == '\n' || r == '\t') && newlines { // line breaks and indentation of multi-line text
					continue
				}
				if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
					t.Fatalf("%s(%q) = %q holds %U", what, s, out, r)
				}
			}
			if len(out) > max {
				t.Fatalf("%s(%q) is %d bytes", what, s, len(out))
			}
		}
		check("printable", printable(s, maxHostname), maxHostname+len("…"), false)
		check("sanitize", sanitize(s), maxMessage+len("…"), false)
		lines := sanitizeLines(s)
		for _, l := range strings.Split(lines, "\n") {
			check("sanitizeLines", l, maxDiffLine+len("…"), true)
		}
	})
}
