// Package printable makes untrusted text safe to show: what a node reports,
// what a card or an image holds (partition names, META values), what an
// inventory names. Terminals, tables and the app's labels show its output;
// JSON carries the data as it is.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounded escapes control and format characters of s (as Go's \x1b,
// \u202e) and cuts it to at most max bytes (max <= 0: no bound), marking a
// cut with "…". Escaped are C0 controls (NUL, ESC, CR, LF, tab), DEL, C1
// controls, bidi overrides and isolates and every other invisible format
// character (Unicode Cf), line and paragraph separators, private-use
// characters, and invalid UTF-8 bytes.
func Bounded(s string, max int) string {
	if max <= 0 {
		max = int(^uint(0) >> 1)
	}
	var b strings.Builder
	for i, r := range s {
		var piece string
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			piece = fmt.Sprintf(`\x%02x`, s[i]) // an invalid byte
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			piece = fmt.Sprintf(`\x%02x`, r)
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co):
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = string(r)
		}
		if b.Len()+len(piece) > max {
			b.WriteString("…")
			break
		}
		b.WriteString(piece)
	}
	return b.String()
}

// String is Bounded without a bound.
func String(s string) string { return Bounded(s, 0) }

// Is reports whether s shows as itself (String(s) == s).
func Is(s string) bool { return String(s) == s }

// Lines is String of each line of s, the newlines kept: for a text of
// several lines (a label, a report) that quotes untrusted text.
func Lines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = String(l)
	}
	return strings.Join(lines, "\n")
}
