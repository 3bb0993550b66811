package gui

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// hostile is text a file, a node, the factory or a card may carry.
const hostile = "\x1b[2J\x1b[HNode: evil\u202e\x00"

// noRawControl fails if s holds a control character other than a
// newline, or a format character (bidi overrides).
func noRawControl(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf)) {
			t.Fatalf("%s holds %U: %q", what, r, s)
		}
	}
}

// An error that quotes what a file, a node or the factory said is shown
// escaped wherever the app shows errors (errorText: dialogs, the image's
// problem line, a card's result).
func TestErrorTextEscapes(t *testing.T) {
	got := errorText(errors.New("talosconfig: no context \"" + hostile + "\"\nline two"))
	noRawControl(t, "errorText", got)
	if !strings.Contains(got, `\x1b[2J`) || !strings.Contains(got, `\u202e`) || !strings.Contains(got, "\nline two") {
		t.Fatalf("errorText = %q", got)
	}
}

// The Image Factory (any server the user points the app at) answers the
// check of the chosen image with an error whose body holds escapes: the
// image step's problem line shows it escaped. It showed the body raw
// (factory.HTTPError quotes it as it came).
func TestFactoryErrorAnswerShownEscaped(t *testing.T) {
	h := newHarness(t, nil)
	h.factory.FailPath("/versions", http.StatusBadRequest, "bad version list "+hostile)
	h.onUI(func() { h.ui.image.version.SetText("v1.99.0") })
	h.waitFor("the factory's verdict", func() bool { return h.ui.image.problem.Visible() })
	h.onUI(func() {
		msg := h.ui.image.problem.Text
		noRawControl(t, "the problem line", msg)
		if !strings.Contains(msg, `bad version list \x1b[2J`) {
			t.Errorf("problem %q does not quote the answer escaped", msg)
		}
	})
}

// No error text reaches a label but through errString (escaped): every
// err.Error() of the app's sources is inside it, and every refusal's Msg
// inside a printable call. A label added later that shows an error raw
// fails here.
func TestGUIShowsErrorsOnlyEscaped(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			var allowed func(ast.Node) bool
			switch sel.Sel.Name {
			case "Error": // err.Error(): only errString's own
				call, ok := stack[len(stack)-2].(*ast.CallExpr)
				if !ok || call.Fun != sel || len(call.Args) > 0 {
					return true
				}
				allowed = func(a ast.Node) bool {
					fd, ok := a.(*ast.FuncDecl)
					return ok && fd.Name.Name == "errString"
				}
			case "Msg": // a refusal's message
				allowed = func(a ast.Node) bool {
					c, ok := a.(*ast.CallExpr)
					if !ok {
						return false
					}
					s, ok := c.Fun.(*ast.SelectorExpr)
					if !ok {
						return false
					}
					x, ok := s.X.(*ast.Ident)
					return ok && x.Name == "printable"
				}
			default:
				return true
			}
			for _, a := range stack {
				if allowed(a) {
					return true
				}
			}
			t.Errorf("%s: %s shown without errString/printable", fset.Position(sel.Pos()), sel.Sel.Name)
			return true
		})
	}
}
