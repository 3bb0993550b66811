// Package yamlwords says a YAML decoding error in the file's terms: the
// line, what was there and what was expected ("line 1: a string (`hello`)
// where a list is expected"), never the Go type it was decoded into
// (yaml.v3 names it: "cannot unmarshal !!str `hello` into []struct {
// Address string "yaml:\"address\"" ... }").
package yamlwords

import (
	"errors"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// typeErr is one line of a *yaml.TypeError (yaml.v3 decode.go d.terror).
var typeErr = regexp.MustCompile("^line ([0-9]+): cannot unmarshal !!([a-z]+)(?: `(.*)`)? into (.+)$")

// Explain returns err in the file's terms: a *yaml.TypeError line by line,
// any other error without yaml's "yaml: " prefix. nil stays nil.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	out := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		m := typeErr.FindStringSubmatch(e)
		if m == nil {
			out = append(out, e)
			continue
		}
		got := tagWords(m[2])
		if m[3] != "" {
			got += " (`" + m[3] + "`)"
		}
		out = append(out, "line "+m[1]+": "+got+" where "+goTypeWords(m[4])+" is expected")
	}
	return errors.New(strings.Join(out, "; "))
}

// tagWords names a YAML tag (without "!!").
func tagWords(tag string) string {
	switch tag {
	case "str", "binary":
		return "a string"
	case "int", "float":
		return "a number"
	case "bool":
		return "true or false"
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "null":
		return "nothing"
	case "timestamp":
		return "a time"
	}
	return "a value"
}

// goTypeWords names the kind of YAML a Go type takes.
func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "struct"):
		return "a mapping"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "another value"
}
