package contract

import (
	"bufio"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exitTable is the Markdown table of the exit codes under heading in the
// file at path: its rows, as written.
func exitTable(t *testing.T, path, heading string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			return rows
		case in && strings.HasPrefix(line, "|"):
			rows = append(rows, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s: no %q", path, heading)
	}
	return rows
}

// exitConsts are the Exit* constants of contract.go, by name.
func exitConsts(t *testing.T) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "contract.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: nil, Error: func(error) {}}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	_, _ = conf.Check("contract", fset, []*ast.File{f}, info) // imports unresolved: the constants need none
	out := map[string]int{}
	for id, obj := range info.Defs {
		if c, ok := obj.(*types.Const); ok && strings.HasPrefix(id.Name, "Exit") && c.Parent() == c.Pkg().Scope() {
			v, _ := constant.Int64Val(c.Val())
			out[id.Name] = int(v)
		}
	}
	return out
}

// One table of the exit codes: ExitCodes lists every Exit* constant once,
// in order, with its value; docs/JSON.md and the README show exactly that
// table, row for row.
func TestExitCodesOneTable(t *testing.T) {
	consts := exitConsts(t)
	if len(consts) == 0 {
		t.Fatal("no Exit* constants found in contract.go")
	}
	want := []string{"| code | name | meaning |", "|---|---|---|"}
	seen := map[string]bool{}
	for i, c := range ExitCodes {
		v, ok := consts[c.Name]
		switch {
		case !ok:
			t.Errorf("ExitCodes row %s: no such constant", c.Name)
		case v != c.Code:
			t.Errorf("ExitCodes row %s: code %d, the constant is %d", c.Name, c.Code, v)
		case seen[c.Name]:
			t.Errorf("ExitCodes: %s twice", c.Name)
		case i > 0 && c.Code <= ExitCodes[i-1].Code:
			t.Errorf("ExitCodes: %s out of order", c.Name)
		case c.Word == "" || c.Meaning == "":
			t.Errorf("ExitCodes row %s: no word or meaning", c.Name)
		}
		seen[c.Name] = true
		want = append(want, "| "+strconv.Itoa(c.Code)+" | `"+c.Name+"` | "+c.Meaning+" |")
	}
	for name := range consts {
		if !seen[name] {
			t.Errorf("%s is not in ExitCodes", name)
		}
	}
	for _, doc := range []struct{ path, heading string }{
		{"../../docs/JSON.md", "## Exit codes"},
	} {
		got := exitTable(t, doc.path, doc.heading)
		if !slices.Equal(got, want) {
			t.Errorf("%s's exit-code table is not contract.ExitCodes; want exactly:\n%s\ngot:\n%s", doc.path, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	}
	if s := ExitSummary(); !strings.HasPrefix(s, "0 ok, 1 internal, 2 usage, 3 network") || !strings.HasSuffix(s, "130 interrupted") {
		t.Errorf("ExitSummary %q", s)
	}
}
