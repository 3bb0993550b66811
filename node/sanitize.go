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
	// A YAML "key: value" line of a config diff. Keys are schema names,
	// never secret; the value is what may be.
	yamlKeyLine = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_\-]{0,63}:)(\s+)(\S.*)$`)
	secretKey   = regexp.MustCompile(`(?i)^(?:ca|crt|cert|key|.*(?:token|secret|password|passwd|authkey|key))$`)
	// A public container image reference (registry/path:tag@digest), as in
	// machine.install.image or kubelet.image: shown so the user can check it.
	imageKey = regexp.MustCompile(`(?i)^(?:image|.*image)$`)
	// A URL without userinfo, query or fragment (cluster endpoints).
	plainURL = regexp.MustCompile(`^[a-z][a-z0-9+.\-]*://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._\-/]*)?$`)
	imageRef = regexp.MustCompile(`^[a-z0-9][a-z0-9.\-]*(?::[0-9]{1,5})?(?:/[a-z0-9][a-z0-9._\-]*)+(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`)
	crlf     = strings.NewReplacer("\r", " ", "\n", " ", "\t", " ")
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
// a dry run's config diff), keeping the line structure and indentation.
// It follows the YAML documents of a diff: inside an ExtensionServiceConfig
// every value but its name and mount paths is dropped (environment values,
// configFiles content: extension credentials), every block scalar's content
// is dropped (one line per run), and `NAME=value` items keep only the name.
func sanitizeLines(msg string) string {
	msg = pemBlock.ReplaceAllString(msg, redacted)
	if _, ok := unknownKeys(msg); ok {
		return decodeCause(msg) // the dump of unknown keys spans lines and holds values
	}
	const maxLines = 1000
	lines := strings.Split(msg, "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], "…")
	}
	var (
		out        = make([]string, 0, len(lines))
		inESC      bool // inside an ExtensionServiceConfig document
		blockCol   = -1 // column of the key whose block scalar is running, -1: none
		lastMarker string
	)
	for _, l := range lines {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t+-@"))]
		body := l[len(indent):]
		col := len(indent) // prefix, spaces and "- " up to the key or value
		if blockCol >= 0 && (spaceCol(l) > blockCol || body == "") && !isDocBoundary(l) {
			// A block shows as one line (one per +/- run of a changed block).
			if p := diffPrefix(l) + "|"; p != lastMarker && body != "" {
				out = append(out, diffPrefix(l)+strings.Repeat(" ", max(spaceCol(l)-len(diffPrefix(l)), 0))+redacted)
				lastMarker = p
			}
			continue
		}
		blockCol, lastMarker = -1, ""
		switch {
		case isDocBoundary(l):
			inESC = false
			out = append(out, sanitize(l))
			continue
		case col <= 1 && strings.TrimSpace(body) == "kind: ExtensionServiceConfig":
			inESC = true
		}
		if m := yamlKeyLine.FindStringSubmatch(body); m != nil && blockIndicator.MatchString(strings.TrimSpace(m[3])) {
			blockCol = col // "key: |": its content is indented past the key
			out = append(out, indent+m[1]+m[2]+m[3])
			continue
		}
		if blockIndicator.MatchString(strings.TrimSpace(body)) {
			blockCol = spaceCol(l) // "- |": its content is indented past the dash
			out = append(out, indent+strings.TrimSpace(body))
			continue
		}
		out = append(out, printable(indent+sanitizeLine(body, inESC), maxDiffLine))
	}
	return strings.Join(out, "\n")
}

var (
	blockIndicator = regexp.MustCompile(`^[|>][-+0-9]*$`)
	envItem        = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.\-]*=)`)
	bareKey        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_\-]{0,63}:$`)
	absPath        = regexp.MustCompile(`^/[A-Za-z0-9._\-/]*$`)
	// The keys of an ExtensionServiceConfig whose values are shown.
	escPlainKey = regexp.MustCompile(`^(?:apiVersion|kind|name|mountPath)$`)
)

// maxDiffLine bounds one line of a diff (a long image reference fits).
const maxDiffLine = 512

// isDocBoundary reports whether a (diff) line is a YAML document separator.
func isDocBoundary(l string) bool {
	return strings.TrimLeft(l, "+- ") == "" && strings.Contains(l, "---")
}

// spaceCol is the column of a (diff) line's first character after its
// +/-/space diff marker and indentation spaces: where a key or a sequence
// dash starts.
func spaceCol(l string) int {
	i := 0
	if l != "" && (l[0] == '+' || l[0] == '-') {
		i = 1
	}
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	return i
}

// diffPrefix is a diff line's +/- marker ("" for context or plain lines).
func diffPrefix(l string) string {
	if l != "" && (l[0] == '+' || l[0] == '-') {
		return l[:1]
	}
	return ""
}

// sanitizeLine is sanitize for one line of a config diff: a YAML key stays
// (a long camelCase key is not key material), the value of a secret-named
// key is dropped whole, a public image reference under an image key, a URL
// without userinfo or query and an absolute path are kept, an environment
// entry keeps its name only, and any other value goes through sanitize.
// Inside an ExtensionServiceConfig (esc) only plain keys keep their value.
func sanitizeLine(l string, esc bool) string {
	if m := envItem.FindStringSubmatch(l); m != nil {
		return m[1] + redacted
	}
	m := yamlKeyLine.FindStringSubmatch(l)
	if m == nil {
		if bareKey.MatchString(l) {
			return l // "configFiles:", a mapping or list follows
		}
		if esc && strings.TrimSpace(l) != "" {
			return redacted
		}
		return sanitize(l)
	}
	key, sep, val := m[1], m[2], m[3]
	name := strings.TrimSuffix(key, ":")
	switch {
	case secretKey.MatchString(name), esc && !escPlainKey.MatchString(name):
		return key + sep + redacted
	case imageKey.MatchString(name) && imageRef.MatchString(val), plainURL.MatchString(val), absPath.MatchString(val):
		return key + sep + val
	}
	return key + sep + sanitize(val)
}
