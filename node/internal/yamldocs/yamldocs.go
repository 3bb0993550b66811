// Package yamldocs splits a multi-document YAML file into its documents by
// byte range, and blanks chosen documents while keeping every line number,
// so a loader that fails on a document kind it does not know can check the
// rest with errors that still point at the user's lines.
package yamldocs

import "bytes"

// Chunk is one document's byte range [Start, End) and its lines
// [FirstLine, EndLine), 1-based; the "---" separator is not part of it.
type Chunk struct {
	Start, End         int
	FirstLine, EndLine int
}

// Split cuts data at document separators: lines that start with "---"
// followed by nothing or blanks/comments. (Inside a block scalar a line at
// column 0 would end the scalar, so such a line is always a separator.)
func Split(data []byte) []Chunk {
	var out []Chunk
	start, startLine := 0, 1
	line := 1
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		if isSeparator(data[off:next]) {
			out = append(out, Chunk{Start: start, End: off, FirstLine: startLine, EndLine: line})
			start, startLine = next, line+1
		}
		off = next
		line++
	}
	return append(out, Chunk{Start: start, End: len(data), FirstLine: startLine, EndLine: line})
}

func isSeparator(l []byte) bool {
	if !bytes.HasPrefix(l, []byte("---")) {
		return false
	}
	rest := bytes.TrimRight(l[3:], "\r\n")
	t := bytes.TrimLeft(rest, " \t")
	return len(t) == 0 || (len(t) < len(rest) && t[0] == '#')
}

// Contains reports whether 1-based line falls in c.
func (c Chunk) Contains(line int) bool { return line >= c.FirstLine && line < c.EndLine }

// Blank returns a copy of data with the given chunks' content replaced by
// empty lines (same line count), leaving everything else byte for byte.
func Blank(data []byte, chunks []Chunk) []byte {
	out := append([]byte(nil), data...)
	for _, c := range chunks {
		for i := c.Start; i < c.End; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	return out
}
