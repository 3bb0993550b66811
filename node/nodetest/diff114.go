package nodetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/textdiff"
	yaml "go.yaml.in/yaml/v4"

	"github.com/talosflash/talosflash/node/internal/talos114"
	"github.com/talosflash/talosflash/node/internal/yamldocs"
)

// A Talos 1.14 node's dry-run diff (v1alpha1_server.go generateDiff):
// configdiff.DiffConfigs(the running config container, the new one) =
// textdiff.Diff of each container's EncodeBytes with comments disabled
// (pkg/machinery/config/container/container.go encodeToBuf: the v1alpha1
// document first, then every other document in load order, "---\n"
// between; each document yaml.Marshal'ed by go.yaml.in/yaml/v4 from its
// Go type, encoder/encoder.go Encode), "No changes." when they are equal.
// A node in maintenance mode has an empty container: everything is added.
//
// Machinery v1.13 cannot decode the 46 kinds 1.14 added, so the fake
// encodes every document from its YAML tree the way the typed encoder
// writes it: comments dropped, null values dropped (omitempty), the keys of
// map-shaped fields (user data: labels, extraArgs, ...) sorted as yaml
// sorts a Go map, the rest in the document's order, 4-space indentation.
// That order is the Go field order for a document talosctl gen config
// wrote (the 1.14 encoder's own output); for keys a user added elsewhere a
// real node may list them at another place, never with other values. Every
// document of every kind is in the diff, so a change anywhere (say
// KubeletConfig extraArgs alone) is one.

// encode114 is container.EncodeBytes(CommentsDisabled) of an accepted
// config, as a 1.14 node writes it.
func encode114(data []byte) ([]byte, error) {
	var v1 []byte
	var docs [][]byte
	schema := talos114.Schema()
	for _, c := range yamldocs.Split(data) {
		var root yaml.Node
		if err := yaml.Unmarshal(data[c.Start:c.End], &root); err != nil {
			return nil, fmt.Errorf("document at line %d is not YAML", c.FirstLine)
		}
		if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
			continue // an empty document: the loader skips it
		}
		doc := root.Content[0]
		kind := ""
		for j := 0; j+1 < len(doc.Content); j += 2 {
			if doc.Content[j].Value == "kind" {
				kind = doc.Content[j+1].Value
			}
		}
		if kind == "" {
			kind = "v1alpha1"
		}
		normalize114(doc, schema[kind])
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", kind, err)
		}
		if kind == "v1alpha1" {
			v1 = b
			continue
		}
		docs = append(docs, b)
	}
	var buf bytes.Buffer
	if v1 != nil {
		buf.Write(v1)
	}
	for _, d := range docs {
		if buf.Len() > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(d)
	}
	return buf.Bytes(), nil
}

// normalize114 turns a parsed document into what the typed encoder would
// write (see above); key is its place in the 1.14 schema (nil: unknown).
func normalize114(n *yaml.Node, key *talos114.Key) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	switch n.Kind {
	case yaml.ScalarNode:
		// The encoder chooses the style: plain, quoted only where the
		// value would read as another type, literal for multi-line text.
		n.Style = 0
		if strings.Contains(n.Value, "\n") && n.Tag == "!!str" {
			n.Style = yaml.LiteralStyle
		}
	case yaml.SequenceNode:
		n.Style = 0
		var elem *talos114.Key
		if key != nil {
			elem = key.Elem
		}
		for _, c := range n.Content {
			normalize114(c, elem)
		}
	case yaml.MappingNode:
		n.Style = 0
		type pair struct{ k, v *yaml.Node }
		var pairs []pair
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue // a nil pointer, map or slice: omitted
			}
			var sub *talos114.Key
			switch {
			case key == nil:
			case key.Shape == talos114.ShapeMap:
				sub = key.Elem
			case key.Fields != nil:
				sub = key.Fields[k.Value]
			}
			normalize114(k, nil)
			normalize114(v, sub)
			pairs = append(pairs, pair{k, v})
		}
		if key != nil && key.Shape == talos114.ShapeMap {
			slices.SortStableFunc(pairs, func(a, b pair) int { return strings.Compare(a.k.Value, b.k.Value) })
		}
		n.Content = n.Content[:0]
		for _, p := range pairs {
			n.Content = append(n.Content, p.k, p.v)
		}
	}
}

// diff114 is generateDiff's text for a 1.14 node: old is the running
// config (nil in maintenance mode), cfg the one sent.
func diff114(old, cfg []byte) string {
	var a, b []byte
	var err error
	if old != nil {
		if a, err = encode114(old); err != nil {
			return "No changes."
		}
	}
	if b, err = encode114(cfg); err != nil {
		return "No changes."
	}
	d, err := textdiff.Diff(string(a), string(b))
	if err != nil || d == "" {
		return "No changes."
	}
	return d
}
