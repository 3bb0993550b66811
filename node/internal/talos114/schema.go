package talos114

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"
)

// schemaTable is the yaml key tree of every kind v1.14.0-rc.1 registers,
// generated from its pkg/machinery source by scripts/gen-talos114-schema.go
// (see the file's header for how to regenerate it).
//
//go:embed schema.txt
var schemaTable string

// Shape is what a key's value is: a scalar (a string or a type that
// encodes itself as one), a bool, a number, a struct (its keys are fields),
// a map (its keys are user data) or a list.
type Shape string

const (
	ShapeScalar Shape = "scalar"
	ShapeBool   Shape = "bool"
	ShapeNumber Shape = "number"
	ShapeStruct Shape = "struct"
	ShapeMap    Shape = "map"
	ShapeList   Shape = "list"
)

// Key is one place in a document's key tree.
type Key struct {
	Shape  Shape
	Fields map[string]*Key // ShapeStruct: its keys
	Elem   *Key            // ShapeMap: a value; ShapeList: an item
}

// SchemaStats are the table's size: kinds and key paths.
type SchemaStats struct{ Kinds, Paths int }

// Schema is the key tree of each document kind a Talos v1.14 node knows,
// by kind ("v1alpha1" for the main machine config). The trees are shared:
// do not change them.
func Schema() map[string]*Key { return parsedSchema().kinds }

// Stats counts the table.
func Stats() SchemaStats { return parsedSchema().stats }

type schema struct {
	kinds map[string]*Key
	stats SchemaStats
}

var parsedSchema = sync.OnceValue(func() schema {
	s, err := parseSchema(schemaTable)
	if err != nil {
		panic("talos114: schema.txt: " + err.Error()) // committed data: TestSchemaTable keeps it well-formed
	}
	return s
})

// parseSchema reads the table: "kind<TAB>path<TAB>shape" lines, sorted so
// that a path comes after its parent.
func parseSchema(text string) (schema, error) {
	s := schema{kinds: map[string]*Key{}}
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return s, fmt.Errorf("line %d: not kind<TAB>path<TAB>shape: %q", i+1, line)
		}
		kind, path, shape := parts[0], parts[1], Shape(parts[2])
		switch shape {
		case ShapeScalar, ShapeBool, ShapeNumber, ShapeStruct, ShapeMap, ShapeList:
		default:
			return s, fmt.Errorf("line %d: unknown shape %q", i+1, shape)
		}
		root := s.kinds[kind]
		if root == nil {
			root = &Key{Shape: ShapeStruct, Fields: map[string]*Key{}}
			s.kinds[kind] = root
			s.stats.Kinds++
		}
		parent, last, err := parentOf(root, path)
		if err != nil {
			return s, fmt.Errorf("line %d: %s %s: %w", i+1, kind, path, err)
		}
		n := &Key{Shape: shape}
		if shape == ShapeStruct {
			n.Fields = map[string]*Key{}
		}
		switch {
		case last == "[]" && parent.Shape == ShapeList && parent.Elem == nil,
			last == "*" && parent.Shape == ShapeMap && parent.Elem == nil:
			parent.Elem = n
		case last != "[]" && last != "*" && parent.Shape == ShapeStruct && parent.Fields[last] == nil:
			parent.Fields[last] = n
		default:
			return s, fmt.Errorf("line %d: %s %s: does not fit under its parent (%s)", i+1, kind, path, parent.Shape)
		}
		s.stats.Paths++
	}
	return s, nil
}

// parentOf walks path but its last step from root; last is that step: a
// key, "[]" or "*".
func parentOf(root *Key, path string) (parent *Key, last string, err error) {
	steps := splitPath(path)
	n := root
	for _, st := range steps[:len(steps)-1] {
		var next *Key
		switch st {
		case "[]", "*":
			next = n.Elem
		default:
			next = n.Fields[st]
		}
		if next == nil {
			return nil, "", fmt.Errorf("parent %q not listed before it", st)
		}
		n = next
	}
	return n, steps[len(steps)-1], nil
}

// splitPath splits "a.b[].*" into "a", "b", "[]", "*".
func splitPath(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, ".") {
		base := strings.TrimRight(seg, "[]")
		out = append(out, base)
		for range (len(seg) - len(base)) / 2 {
			out = append(out, "[]")
		}
	}
	return out
}
