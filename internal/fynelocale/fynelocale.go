// Package fynelocale keeps Fyne's locale detection quiet. Fyne v2.7.1's
// lang package reads $LC_ALL, $LC_MESSAGES, $LANG and $LANGUAGE in its init
// (through github.com/jeandeaual/go-locale) and logs three "Fyne error: Error
// parsing user locale C" lines to stderr when a value is not a BCP 47 tag
// once its codeset is cut: C.UTF-8 (Debian's default), POSIX.UTF-8, or a
// modifier such as de_DE@euro or sr_RS@latin. Being in every binary that
// links the GUI, that noise came before the output of every CLI command.
//
// Imported for its side effect (main's blank import), this package's init
// rewrites those variables to what go-locale parses ("C" for the C/POSIX
// locales, no @modifier) before Fyne's init reads them. Go initializes, in
// import-path order, the first package whose imports are initialized: this
// one imports only os and strings, which Fyne's lang package also depends
// on, and its path sorts before golang.org/x/text, which lang imports; so it
// always runs first (keep it to those imports; the main package's tests
// check the order with GODEBUG=inittrace=1). Restore puts the user's values back (the CLI calls it
// first thing, so child processes see the real locale); the GUI keeps the
// rewritten values, since Fyne reads the locale again while it runs.
package fynelocale

import (
	"os"
	"strings"
)

// saved is what init changed: variable name -> original value.
var saved = map[string]string{}

func init() { apply() }

func apply() {
	for name, value := range Sanitize(os.Getenv) {
		saved[name] = os.Getenv(name)
		_ = os.Setenv(name, value)
	}
}

// Restore puts back the variables init rewrote.
func Restore() {
	for name, value := range saved {
		_ = os.Setenv(name, value)
	}
	clear(saved)
}

// Sanitize returns the locale variables to rewrite, and their new values,
// so that go-locale's parse of getenv's environment yields only well-formed
// tags. Like gettext (and go-locale), the first non-empty of LC_ALL,
// LC_MESSAGES and LANG is the locale; LANGUAGE is read only when that locale
// is not C.
func Sanitize(getenv func(string) string) map[string]string {
	out := map[string]string{}
	name, value := "", ""
	for _, n := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(n); v != "" {
			name, value = n, v
			break
		}
	}
	if value != "" {
		if fixed := fixLocale(value); fixed != value {
			out[name] = fixed
		}
		if fixLocale(value) == "C" {
			return out // go-locale then ignores LANGUAGE
		}
	}
	if langs := getenv("LANGUAGE"); langs != "" {
		var keep []string
		for _, l := range strings.Split(langs, ":") {
			if f := fixLocale(l); f != "C" && f != "" {
				keep = append(keep, f)
			}
		}
		if fixed := strings.Join(keep, ":"); fixed != langs {
			out["LANGUAGE"] = fixed // "" = unset for go-locale
		}
	}
	return out
}

// fixLocale maps one POSIX locale name (language[_territory][.codeset][@modifier])
// to a form go-locale turns into a valid tag: "C" for C, POSIX and names
// whose language is not 2 to 8 letters; otherwise the name without its
// modifier.
func fixLocale(v string) string {
	if i := strings.IndexByte(v, '@'); i >= 0 {
		v = v[:i]
	}
	lang, _, _ := strings.Cut(v, ".")
	lang, _, _ = strings.Cut(strings.ReplaceAll(lang, "-", "_"), "_")
	if lang == "C" || lang == "POSIX" || !isLetters(lang, 2, 8) {
		return "C"
	}
	return v
}

func isLetters(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
