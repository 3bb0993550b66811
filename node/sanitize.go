package node

import (
	"regexp"
	"strings"
)

// Machine configs carry the cluster PKI, tokens and extension credentials.
// Loader and server error messages may quote the offending value or line, so
// every message that leaves this package goes through sanitize first.

const redacted = "<redacted>"

var (
	urlUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]*@`)
	pemBlock    = regexp.MustCompile(`(?s)-----BEGIN[^-]*-----.*?(-----END[^-]*-----|$)`)
	quoted      = regexp.MustCompile("\"(?:[^\"\\\\\\n]|\\\\.)*\"|'[^'\\n]*'|`[^`\\n]*`")
	// The YAML decoder quotes a value of the wrong type after its tag
	// ("cannot construct !!str `hunter2x` into ...", "cannot unmarshal !!int
	// `1234` into ..."): always config content, however word-like.
	taggedValue    = regexp.MustCompile("(!![A-Za-z0-9_./:-]+\\s+)(?:\"(?:[^\"\\\\\\n]|\\\\.)*\"|'[^'\\n]*'|`[^`\\n]*`)")
	tokenRun       = regexp.MustCompile(`[A-Za-z0-9+/=_\-.:]{16,}`)
	safeQuoted     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,39}$`)
	multiErrHead   = regexp.MustCompile(`\d+ errors? occurred:\s*\*\s*`)
	multiErrBullet = regexp.MustCompile(`\n\s*\*\s+`)
	punctuation    = regexp.MustCompile(`^[^A-Za-z0-9]{1,3}$`) // e.g. "did not find expected ',' or ']'"
	plainWord      = regexp.MustCompile(`^[a-z][a-z.\-/_:]*$`)
	keyValue       = regexp.MustCompile(`(?i)((?:^|[^a-z])(?:key|token|secret|password|passwd|crt|cert|ca|authkey|bootstraptoken|secretboxencryptionsecret|aescbcencryptionsecret)\s*[:=]\s*)[^\s,;)\]}]+`)
	lineNumber     = regexp.MustCompile(`\bline (\d+)\b`)
	crlf           = strings.NewReplacer("\r", " ", "\n", " ", "\t", " ")
)

// sanitize removes anything from msg that could be config content: PEM
// blocks, quoted strings (except short plain identifiers such as a document
// kind), `key: value` fragments of secret-looking keys, and long
// base64/hex-like tokens. It also folds the message onto one line and caps
// its length.
func sanitize(msg string) string {
	msg = pemBlock.ReplaceAllString(msg, redacted)
	msg = urlUserinfo.ReplaceAllString(msg, "${1}"+redacted+"@") // https://user:password@host
	// go-multierror's "1 error occurred:\n\t* a\n\t* b" -> "a; b"
	msg = multiErrHead.ReplaceAllString(msg, "")
	msg = multiErrBullet.ReplaceAllString(msg, "; ")
	msg = taggedValue.ReplaceAllString(msg, "${1}`"+redacted+"`")
	msg = quoted.ReplaceAllStringFunc(msg, func(q string) string {
		inner := q[1 : len(q)-1]
		if inner == redacted || punctuation.MatchString(inner) || safeQuoted.MatchString(inner) && !looksRandom(inner) {
			return q
		}
		return `"` + redacted + `"`
	})
	msg = keyValue.ReplaceAllString(msg, "${1}"+redacted)
	msg = tokenRun.ReplaceAllStringFunc(msg, func(tok string) string {
		if plainWord.MatchString(tok) && len(tok) <= 64 {
			return tok // dotted paths, URLs' host parts, "ghcr.io/siderolabs/installer"
		}
		if !looksRandom(tok) && len(tok) <= 40 && !strings.ContainsAny(tok, "+/=") {
			return tok // e.g. ExtensionServiceConfig, v1alpha1.Config
		}
		return redacted
	})
	msg = crlf.Replace(msg)
	msg = strings.Join(strings.Fields(msg), " ")
	return printable(msg, maxMessage) // a node's message may hold terminal escapes
}

// looksRandom reports whether s looks like key material rather than a word:
// several digits, or many lower/upper case switches as in base64.
func looksRandom(s string) bool {
	digits, switches := 0, 0
	prevUpper, prevSet := false, false
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
			upper := r <= 'Z'
			if prevSet && upper != prevUpper {
				switches++
			}
			prevUpper, prevSet = upper, true
		}
	}
	return digits >= 4 || switches >= 8
}

// lineOf extracts the first "line N" reference of a loader error.
func lineOf(msg string) int {
	m := lineNumber.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n := 0
	for _, c := range m[1] {
		n = n*10 + int(c-'0')
		if n > 1<<30 {
			return 0
		}
	}
	return n
}

// sanitizeLines is sanitize for multi-line text (an apply's mode details,
// a dry run's config diff), keeping the line structure and indentation: the
// diff is redacted by its structure (see redactDiff).
func sanitizeLines(msg string) string {
	msg = pemBlock.ReplaceAllString(msg, redacted)
	// The dump of unknown keys spans lines and holds values; it is the
	// node's own text, never inside a diff (whose values may hold the words).
	if _, ok := unknownKeys(textBeforeDiff(msg)); ok {
		return decodeCause(msg)
	}
	return redactDiff(msg)
}

// textBeforeDiff is msg up to its config diff (all of it without one).
func textBeforeDiff(msg string) string {
	for _, mark := range []string{"Config diff:", "--- a\n", "@@ -", "\n+", "\n-"} {
		if i := strings.Index(msg, mark); i >= 0 {
			msg = msg[:i]
		}
	}
	return msg
}

var (
	blockIndicator = regexp.MustCompile(`^[|>][-+0-9]*$`)
	envItem        = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.\-]*=)`)
)

// maxDiffLine bounds one line of a diff (a long image reference fits).
const maxDiffLine = 512
