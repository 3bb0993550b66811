package fynelocale

import (
	"maps"
	"os"
	"testing"
)

func TestSanitize(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want map[string]string
	}{
		{map[string]string{}, map[string]string{}},
		{map[string]string{"LANG": "C"}, map[string]string{}},
		{map[string]string{"LANG": "POSIX"}, map[string]string{"LANG": "C"}},
		{map[string]string{"LANG": "C.UTF-8"}, map[string]string{"LANG": "C"}},
		{map[string]string{"LANG": "C.utf8", "LANGUAGE": "fr"}, map[string]string{"LANG": "C"}},
		{map[string]string{"LANG": "POSIX.UTF-8"}, map[string]string{"LANG": "C"}},
		{map[string]string{"LANG": "en_US.UTF-8"}, map[string]string{}},
		{map[string]string{"LANG": "de_DE@euro"}, map[string]string{"LANG": "de_DE"}},
		{map[string]string{"LANG": "sr_RS.UTF-8@latin"}, map[string]string{"LANG": "sr_RS.UTF-8"}},
		{map[string]string{"LANG": "x"}, map[string]string{"LANG": "C"}},
		// The first non-empty of LC_ALL, LC_MESSAGES, LANG is the locale.
		{map[string]string{"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}, map[string]string{"LC_ALL": "C"}},
		{map[string]string{"LC_MESSAGES": "C.UTF-8", "LANG": "en_US.UTF-8"}, map[string]string{"LC_MESSAGES": "C"}},
		{map[string]string{"LC_ALL": "en_GB.UTF-8", "LANG": "C.UTF-8"}, map[string]string{}},
		// LANGUAGE is read when the locale is not C.
		{map[string]string{"LANG": "en_US.UTF-8", "LANGUAGE": "de_DE@euro:C:en"}, map[string]string{"LANGUAGE": "de_DE:en"}},
		{map[string]string{"LANGUAGE": "C"}, map[string]string{"LANGUAGE": ""}},
		{map[string]string{"LANG": "de_DE.UTF-8", "LANGUAGE": "de:en"}, map[string]string{}},
	}
	for _, c := range cases {
		got := Sanitize(func(k string) string { return c.env[k] })
		if !maps.Equal(got, c.want) {
			t.Errorf("Sanitize(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

func TestApplyAndRestore(t *testing.T) {
	t.Setenv("LC_ALL", "")
	t.Setenv("LC_MESSAGES", "")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LANGUAGE", "fr")
	clear(saved)
	apply()
	if got := os.Getenv("LANG"); got != "C" {
		t.Fatalf("LANG while Fyne starts = %q, want C", got)
	}
	Restore()
	if got := os.Getenv("LANG"); got != "C.UTF-8" {
		t.Fatalf("LANG after Restore = %q, want C.UTF-8", got)
	}
	if got := os.Getenv("LANGUAGE"); got != "fr" {
		t.Fatalf("LANGUAGE = %q, want fr (untouched)", got)
	}
}
