package cli

import (
	"io"

	"github.com/talosflash/talosflash/app/contract"
)

// answerPrinter shows a command's one answer (devices, nodes, schematic,
// card, inventory check, kubeconfig, outdated, upgrade): its JSON line
// (docs/JSON.md) with --json, else its text. Chosen once by --json, as the
// jobs' printers are; the command's code never asks which it is.
type answerPrinter interface {
	// Answer writes v as the JSON line of type typ, or the text.
	Answer(typ string, v any, text func(w io.Writer) error) error
	// Human is where lines for people go beside the answer: stdout for
	// text, stderr when stdout is JSON.
	Human() io.Writer
}

func newAnswerPrinter(jsonOut bool, env Env) answerPrinter {
	if jsonOut {
		return answerJSON{env}
	}
	return answerText{env}
}

type answerText struct{ env Env }

func (p answerText) Answer(_ string, _ any, text func(w io.Writer) error) error {
	return text(p.env.Stdout)
}

func (p answerText) Human() io.Writer { return p.env.Stdout }

type answerJSON struct{ env Env }

func (p answerJSON) Answer(typ string, v any, _ func(w io.Writer) error) error {
	return contract.WriteAnswer(p.env.Stdout, typ, v)
}

func (p answerJSON) Human() io.Writer { return p.env.Stderr }

// noText is the text of an answer that has none beyond its human lines.
func noText(io.Writer) error { return nil }
