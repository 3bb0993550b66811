//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/cli"
	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The documentation's command lines are checked here: every line of a code
// block in README.md and docs/*.md that starts with one of docPrograms (or
// `$ ` and one of them) is parsed by the real flag sets of the command it
// names, so a line that would answer "unknown command" or "unknown flag"
// fails; the blocks marked `<!-- readme-test: run NAME -->` are run as
// written, offline, in a network namespace of their own (loopback only),
// and must stop what they start.

// docPrograms are the programs whose lines are checked.
var docPrograms = []string{"talosflash", "./talosflash", "./talosflash-cli", "./fakefactory", "./fakenode"}

// docLine is one logical line of a code block: continuation lines joined.
type docLine struct {
	file string
	line int // its first physical line
	text string
}

func (l docLine) where() string { return fmt.Sprintf("%s:%d", l.file, l.line) }

// docBlock is one fenced code block.
type docBlock struct {
	file, info string
	line       int    // the opening fence's line
	run        string // NAME of a `<!-- readme-test: run NAME -->` above it
	continues  string // FILE:NAME of the block it continues (`continues FILE:NAME`)
	lines      []docLine
}

var runMarker = regexp.MustCompile(`^<!-- readme-test: run (\S+)(?: continues (\S+))? -->$`)

// parseDoc returns the code blocks of a markdown text.
func parseDoc(file string, text []byte) []docBlock {
	var (
		blocks  []docBlock
		cur     *docBlock
		fence   string
		prev    string // the last non-blank line outside a block
		pending *docLine
	)
	for i, raw := range strings.Split(string(text), "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(raw)
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				b := docBlock{file: file, line: n, info: strings.TrimSpace(strings.TrimLeft(trimmed, "`~"))}
				if m := runMarker.FindStringSubmatch(prev); m != nil {
					b.run, b.continues = m[1], m[2]
				}
				cur = &b
			} else if trimmed != "" {
				prev = trimmed
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			if pending != nil {
				cur.lines = append(cur.lines, *pending)
				pending = nil
			}
			blocks = append(blocks, *cur)
			cur, prev = nil, ""
			continue
		}
		if pending == nil {
			pending = &docLine{file: file, line: n}
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(raw, " \t"), `\`); ok && !strings.HasPrefix(trimmed, "#") {
			pending.text += body + " "
			continue
		}
		pending.text += raw
		pending.text = strings.TrimSpace(pending.text)
		cur.lines = append(cur.lines, *pending)
		pending = nil
	}
	return blocks
}

// docBlocks are the code blocks of README.md and docs/*.md.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, f := range append([]string{"README.md"}, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, parseDoc(f, text)...)
	}
	return blocks
}

// dataBlock: a block of data or code, not of shell lines.
func dataBlock(info string) bool {
	switch strings.Fields(info + " x")[0] {
	case "yaml", "yml", "json", "go", "diff":
		return true
	}
	return false
}

// shellWords splits a shell command line into its words up to the first
// comment or operator (|, &, ;, <, >): quotes are removed, $'...' escapes
// kept as written, $(...) kept as one word.
func shellWords(s string) []string {
	var (
		words []string
		w     strings.Builder
		in    bool // a word has started
	)
	end := func() {
		if in {
			words = append(words, w.String())
		}
		w.Reset()
		in = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '#' && !in:
			return words
		case strings.IndexByte("|&;<>", c) >= 0:
			if c == '>' && in && strings.Trim(w.String(), "0123456789") == "" {
				in = false // 2>file: the 2 is the redirection's
			}
			end()
			return words
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				j++
			}
			w.WriteString(s[i+1 : min(j, len(s))])
			i = j
			in = true
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			w.WriteString(s[i:min(j+1, len(s))])
			i = j
			in = true
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			i++
			in = true
		default:
			w.WriteByte(c)
			in = true
		}
	}
	end()
	return words
}

// docCommand returns the program and arguments of a documented command
// line, or ok false when the line runs none of docPrograms.
func docCommand(text string) (prog string, args []string, ok bool) {
	text = strings.TrimSpace(text)
	text = strings.TrimPrefix(text, "$ ")
	words := shellWords(text)
	if len(words) > 0 && words[0] == "sudo" {
		words = words[1:]
	}
	if len(words) == 0 || !slices.Contains(docPrograms, words[0]) {
		return "", nil, false
	}
	return words[0], words[1:], true
}

// checkDocCommand parses a documented command line with the flag sets of
// the command it names, as the program would, without running it; a nil
// error is a line the program takes.
func checkDocCommand(fakes *fakeBinaries, prog string, args []string) error {
	switch prog {
	case "./fakefactory", "./fakenode":
		return fakes.check(prog, args)
	}
	if opensApp(args) {
		if prog == "./talosflash-cli" {
			return errors.New("opens the app, which talosflash-cli (built with -tags nogui) does not have: it would say so and exit 2")
		}
		if len(args) > 0 && args[0] == "gui" {
			args = args[1:]
		}
		if _, err := parseAppArgs(args); err != nil && !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("the app: talosflash: %v", err)
		}
		return nil
	}
	if args[0] == "flash" {
		return errors.New("write `--flash` for the flash, as `talosflash flash -h` does")
	}
	return probeCLI(args)
}

// probeCLI parses args with the CLI's own flag sets: cli.Main with `-h`
// after them stops at the help, which every command asks for right after
// parsing its flags, before it reads or sends anything; a second -h stays
// help where the first was taken as a trailing flag's value.
func probeCLI(args []string) error {
	var stdout, stderr bytes.Buffer
	code := cli.Main(append(slices.Clone(args), "-h", "-h"), cli.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	if code != contract.ExitOK || !strings.Contains(stdout.String(), "Usage:") {
		return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	// A flag at the end that needs a value took the first -h as its value:
	// its usage row names a value (--node IP; a bool flag names none).
	last := args[len(args)-1]
	if name := strings.TrimLeft(last, "-"); strings.HasPrefix(last, "-") && name != "" && !strings.Contains(name, "=") && name != "h" && name != "help" {
		row := regexp.MustCompile(`(?m)^  (?:-\S, )?--` + regexp.QuoteMeta(name) + ` \S|^  -` + regexp.QuoteMeta(name) + `, --\S+ \S`)
		if row.MatchString(stdout.String()) {
			return fmt.Errorf("%s needs a value", last)
		}
	}
	return nil
}

// fakeBinaries builds the fake factory and fake node once, for their lines.
type fakeBinaries struct {
	once sync.Once
	dir  string
	err  error
}

func (f *fakeBinaries) check(prog string, args []string) error {
	f.once.Do(func() {
		f.dir, f.err = os.MkdirTemp("", "talosflash-readme-fakes-")
		if f.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", f.dir+"/", "./factory/factorytest/fakefactory", "./node/nodetest/fakenode").CombinedOutput()
		if err != nil {
			f.err = fmt.Errorf("go build the fakes: %v\n%s", err, out)
		}
	})
	if f.err != nil {
		return f.err
	}
	// -h after the line's flags: both parse everything first and stop
	// there, before they listen (fakenode calls it an error, fakefactory
	// prints its usage).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(f.dir, strings.TrimPrefix(prog, "./")), append(slices.Clone(args), "-h", "-h")...)
	out, _ := cmd.CombinedOutput()
	for _, bad := range []string{"not defined", "invalid value", "invalid boolean", "needs an argument"} {
		if strings.Contains(string(out), bad) {
			return fmt.Errorf("%s", firstLine(string(out), bad))
		}
	}
	if !strings.Contains(string(out), "help requested") && !strings.Contains(string(out), "Usage of") {
		return fmt.Errorf("did not stop at -h: %s", out)
	}
	return nil
}

func (f *fakeBinaries) cleanup() {
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}

// firstLine is the first line of s that holds sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return s
}

// Every documented command line parses with the real flag sets, and the
// checker fails the lines a reader would get "unknown command" or
// "unknown flag" for (one build of the fakes for both).
func TestReadmeCommandLines(t *testing.T) {
	fakes := &fakeBinaries{}
	defer fakes.cleanup()
	t.Run("docs", func(t *testing.T) { checkDocsCommandLines(t, fakes) })
	t.Run("planted", func(t *testing.T) { checkPlantedCommandLines(t, fakes) })
}

// checkDocsCommandLines: every documented command line parses.
func checkDocsCommandLines(t *testing.T, fakes *fakeBinaries) {
	checked := map[string]int{}
	for _, b := range docBlocks(t) {
		if dataBlock(b.info) {
			continue
		}
		for _, l := range b.lines {
			prog, args, ok := docCommand(l.text)
			if !ok {
				continue
			}
			checked[prog]++
			if err := checkDocCommand(fakes, prog, args); err != nil {
				t.Errorf("%s: %s\n\t%s", l.where(), err, l.text)
			}
		}
	}
	t.Logf("checked: %v", checked)
	// The README and docs/TRY.md lines of each program are there to check.
	for _, p := range docPrograms {
		if checked[p] == 0 {
			t.Errorf("no line of %s found: the extraction is broken", p)
		}
	}
}

// checkPlantedCommandLines: planted lines a reader would get "unknown
// command" or "unknown flag" for fail the checker, and the forms the docs
// use pass.
func checkPlantedCommandLines(t *testing.T, fakes *fakeBinaries) {
	bad := []struct{ line, want string }{
		{"talosflash aply --node 127.0.0.1 --file worker.yaml", `unknown command "aply"`},
		{"talosflash apply --nod 127.0.0.1 --file worker.yaml", "unknown flag --nod"},
		{"$ ./talosflash-cli --flash --rol worker --device card.img", "unknown flag --rol"},
		{"./talosflash-cli --factory http://127.0.0.1:8088 --allow-loop", "does not have"},
		{"./talosflash --factory http://127.0.0.1:8088 --alow-loop", "unknown flag --alow-loop"},
		{"talosflash gui --allow-loop devices", `unknown command "devices"`},
		{"talosflash flash --role worker --device /dev/sdb", "write `--flash`"},
		{"talosflash apply --node 127.0.0.1 --file", "--file needs a value"},
		{"talosflash status --inventory talosflash.yaml -n", "-n needs a value"},
		{"talosflash inventory int", "unknown subcommand"},
		{"talosflash --version --json extra", "unexpected argument"},
		{"talosflash --flash --role worker --device /dev/sdb --timeout 5x", "--timeout"},
		{"./fakefactory --lisen 127.0.0.1:8088 &", "not defined"},
		{"./fakenode --listn 127.0.0.2:50000", "not defined"},
	}
	good := []string{
		"./talosflash --factory http://127.0.0.1:8088 --allow-loop   # the app (issue 39)",
		"talosflash",
		"talosflash gui --inventory talosflash.yaml",
		"sudo talosflash --flash --force-raw --image x.raw --device /dev/sdb",
		"talosflash --role worker --device /dev/sdb --flash",
		"talosflash kubeconfig --node 127.0.0.1 --talosconfig t kubeconfig",
		"talosflash outdated talos/ --write",
		"talosflash card worker-1.img --json | jq .",
		"talosflash inventory check talosflash.yaml --json",
		"talosflash help flash",
		"talosflash --help",
		"talosflash patch --node 127.0.0.1 --talosconfig t --replace-document ExtensionServiceConfig/newt newt.yaml --dry-run",
		"talosflash upgrade --inventory talosflash.yaml --talosconfig t --dry-run",
		"./talosflash-cli --flash --role worker --device card.img --create-file --yes --json 2>/dev/null | tail -1",
		"./fakefactory --listen 127.0.0.1:8088 --size 64MiB --build-delay 3s &",
		"./fakenode --listen 127.0.0.2:50000 --talos v1.14.5 --image controlplane --listen 127.0.0.3:50000 --image worker &",
	}
	var doc strings.Builder
	doc.WriteString("# planted\n\n```sh\n")
	for _, b := range bad {
		doc.WriteString(b.line + "\n")
	}
	for _, g := range good {
		doc.WriteString(g + "\n")
	}
	doc.WriteString("```\n")
	blocks := parseDoc("planted.md", []byte(doc.String()))
	if len(blocks) != 1 || len(blocks[0].lines) != len(bad)+len(good) {
		t.Fatalf("parsed %d blocks: %+v", len(blocks), blocks)
	}
	for i, l := range blocks[0].lines {
		prog, args, ok := docCommand(l.text)
		if !ok {
			t.Errorf("%q: not recognised as a command line", l.text)
			continue
		}
		err := checkDocCommand(fakes, prog, args)
		if i < len(bad) {
			if err == nil || !strings.Contains(err.Error(), bad[i].want) {
				t.Errorf("%q: got %v, want an error with %q", l.text, err, bad[i].want)
			}
		} else if err != nil {
			t.Errorf("%q: %v", l.text, err)
		}
	}
}

func TestReadmeShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		`a --b 'c d' "e $f" # g`:          {"a", "--b", "c d", "e $f"},
		`x --hostname $'evil\e[2J' | y`:   {"x", "--hostname", `$evil\e[2J`},
		`T=$(mktemp -d) && cd $T`:         {"T=$(mktemp -d)"},
		`go build -o $T/ . 2>/dev/null`:   {"go", "build", "-o", "$T/", "."},
		`./fakenode --card a.img,b.img &`: {"./fakenode", "--card", "a.img,b.img"},
	} {
		if got := shellWords(in); !slices.Equal(got, want) {
			t.Errorf("shellWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// Offline lines are run, not only parsed: the test binary as talosflash,
// in a network namespace without any interface up, so nothing can leave.
func TestReadmeOfflineLinesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documented offline commands (-short)")
	}
	isolate := netnsPrefix(t)
	ran := 0
	for _, b := range docBlocks(t) {
		if dataBlock(b.info) {
			continue
		}
		for _, l := range b.lines {
			prog, args, ok := docCommand(l.text)
			if !ok || prog == "./fakefactory" || prog == "./fakenode" || opensApp(args) || !offlineCommand(args) {
				continue
			}
			dir := t.TempDir()
			cmd := exec.Command(isolate[0], append(isolate[1:], append([]string{os.Args[0]}, args...)...)...)
			cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1", "HOME="+dir, "XDG_CACHE_HOME="+filepath.Join(dir, ".cache"))
			cmd.Dir, cmd.Stdin = dir, strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: %s: %v\n%s", l.where(), l.text, err, out)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no offline line ran")
	}
	t.Logf("%d offline lines ran", ran)
}

// offlineCommand: a CLI command line that needs no network, node, card or
// file of the reader's to succeed (checked offline: schematic without
// --register computes the ID locally).
func offlineCommand(args []string) bool {
	has := func(flags ...string) bool {
		for _, a := range args {
			for _, f := range flags {
				if a == f || strings.HasPrefix(a, f+"=") {
					return true
				}
			}
		}
		return false
	}
	switch args[0] {
	case "version", "help", "--help", "-h":
		return true
	case "profiles":
		return !has("--profiles")
	case "schematic":
		return !has("--register", "--installer-file", "--profiles")
	}
	return false
}

// netnsPrefix is the command that runs a program in a new network
// namespace (only a loopback interface, down until the caller sets it
// up): unshare -n as root, else unshare -rn in a user namespace. It skips
// the test where neither works.
func netnsPrefix(t *testing.T) []string {
	t.Helper()
	for _, p := range [][]string{{"unshare", "-n"}, {"unshare", "-rn"}} {
		if exec.Command(p[0], append(p[1:], "true")...).Run() == nil {
			return p
		}
	}
	t.Skip("no network namespace (unshare -n / -rn refused): the documented lines run only where nothing can leave this machine")
	return nil
}

// The Makefile's outputs are the names the docs use: `make build` writes
// ./talosflash and ./talosflash-cli, `make build-cli` ./talosflash-cli.
func TestReadmeBinaryNamesAreTheMakefiles(t *testing.T) {
	plan, err := exec.Command("make", "-n", "-B", "build", "build-cli").Output()
	if err != nil {
		t.Fatalf("make -n: %v", err)
	}
	var outputs []string
	for _, line := range strings.Split(string(plan), "\n") {
		if f := strings.Fields(line); slices.Contains(f, "build") && slices.Contains(f, "-o") {
			outputs = append(outputs, filepath.Clean(f[slices.Index(f, "-o")+1]))
		}
	}
	if !slices.Equal(outputs, []string{"talosflash", "talosflash-cli", "talosflash-cli"}) {
		t.Fatalf("make build build-cli writes %q: the docs' ./talosflash and ./talosflash-cli would not be what the builds make", outputs)
	}
}

// runSession is run blocks run in one shell, in order, as a reader types
// them into one terminal; covers names the pages' sessions whose outcome
// it shows.
type runSession struct {
	covers []string
	blocks []docBlock
}

// runSessions: the run blocks of each page, in order, make one session,
// named by the page. A block that continues another page's block (`run
// NAME continues FILE:BLOCK`) makes the session FILE:NAME: that block
// without its last lines that stop (kill ...), then this one; when this
// one ends with the same stop, it covers the other block's session too
// (run once, not twice: the README's walkthrough takes half a minute).
func runSessions(t *testing.T, blocks []docBlock) []runSession {
	t.Helper()
	byName := map[string]docBlock{}
	var sessions []runSession
	page := map[string]int{}
	for _, b := range blocks {
		if b.run == "" {
			continue
		}
		key := b.file + ":" + b.run
		if _, dup := byName[key]; dup {
			t.Fatalf("%s: run block %q twice", b.file, b.run)
		}
		byName[key] = b
		if b.continues != "" {
			continue
		}
		i, ok := page[b.file]
		if !ok {
			i = len(sessions)
			page[b.file] = i
			sessions = append(sessions, runSession{covers: []string{b.file}})
		}
		sessions[i].blocks = append(sessions[i].blocks, b)
	}
	for _, b := range blocks {
		if b.continues == "" {
			continue
		}
		base, ok := byName[b.continues]
		if !ok {
			t.Fatalf("%s:%d: continues %s, which is no run block", b.file, b.line, b.continues)
		}
		stop := 0
		for stop < len(base.lines) && strings.HasPrefix(base.lines[len(base.lines)-1-stop].text, "kill ") {
			stop++
		}
		kept := base
		kept.lines = base.lines[:len(base.lines)-stop]
		s := runSession{covers: []string{b.file + ":" + b.run}, blocks: []docBlock{kept, b}}
		if n := len(b.lines); stop > 0 && n >= stop && slices.EqualFunc(base.lines[len(base.lines)-stop:], b.lines[n-stop:], func(x, y docLine) bool {
			return strings.TrimSpace(stripComment(x.text)) == strings.TrimSpace(stripComment(y.text))
		}) {
			if i, ok := page[base.file]; ok && len(sessions[i].blocks) == 1 {
				s.covers = append(sessions[i].covers, s.covers...)
				sessions[i] = s
				continue
			}
		}
		sessions = append(sessions, s)
	}
	return sessions
}

// wantExit is the exit code a line's comment announces, "(exit 7)", else 0.
var wantExit = regexp.MustCompile(`#.*\(exit (\d+)\)`)

// sessionScript is the bash script that runs a session's lines as written,
// checking each line's exit code; a background line (ending in &) must say
// it is ready ("try: ", as both fakes do) before the next line runs; after
// `kill %N` the killed jobs are waited for (an interactive shell reaps
// them between two commands: the next & gets their job number again); at
// the end nothing may be left running or listening: the page's own stop
// stops what it started.
func sessionScript(s runSession, rt string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `set -o pipefail
__rt=%s
__fail() { echo "readme-test: $*" >&2; for __l in "$__rt"/bg*.log; do [ -f "$__l" ] && { echo "--- $__l" >&2; cat "$__l" >&2; }; done; exit 90; }
__await() { # LOG PID WHERE
  for __i in $(seq 1 1800); do
    grep -q 'try: ' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || __fail "$3: the background line ended before it was ready"
    sleep 0.1
  done
  __fail "$3: the background line was not ready within 180 s"
}
`, shq(rt))
	bg := 0
	for _, blk := range s.blocks {
		for _, l := range blk.lines {
			text := strings.TrimSpace(l.text)
			words := shellWords(text)
			if len(words) == 0 {
				continue
			}
			if prog, args, ok := docCommand(text); ok && prog != "./fakefactory" && prog != "./fakenode" && opensApp(args) {
				fmt.Fprintf(&b, ": %s\n", shq(l.where()+": the app, parse-checked only"))
				continue
			}
			if words[0] == "make" {
				return "", fmt.Errorf("%s: %q: a run block builds with go build into its scratch directory, not make (the test does not write into the repository)", l.where(), text)
			}
			fmt.Fprintf(&b, "echo %s >&2\n", shq("+ "+l.where()+": "+text))
			code := strings.TrimSpace(stripComment(text))
			if cmd, ok := strings.CutSuffix(code, "&"); ok && !strings.HasSuffix(code, "&&") {
				bg++
				log := fmt.Sprintf(`"$__rt/bg%d.log"`, bg)
				fmt.Fprintf(&b, "%s > %s 2>&1 &\n__await %s $! %s\n", strings.TrimSpace(cmd), log, log, shq(l.where()))
				continue
			}
			want := 0
			if m := wantExit.FindStringSubmatch(text); m != nil {
				want, _ = strconv.Atoi(m[1])
			}
			fmt.Fprintf(&b, "%s\n__rc=$?; [ $__rc -eq %d ] || __fail %s\"$__rc\"\n", code, want, shq(fmt.Sprintf("%s: %s: want exit %d, got ", l.where(), code, want)))
			if words[0] == "kill" {
				fmt.Fprintf(&b, "wait %s 2>/dev/null\n", strings.Join(words[1:], " "))
			}
		}
	}
	b.WriteString(`for __i in $(seq 1 100); do [ -z "$(jobs -rp)" ] && break; sleep 0.1; done
[ -z "$(jobs -rp)" ] || __fail "still running after the page's own stop: $(jobs -r)"
for __a in $(cat "$__rt"/bg*.log 2>/dev/null | grep -oE '(Factory at http://|node )127\.[0-9.]+:[0-9]+' | grep -oE '127\.[0-9.]+:[0-9]+' | sort -u); do
  if (exec 3<>"/dev/tcp/${__a%:*}/${__a##*:}") 2>/dev/null; then __fail "something still listens on $__a after the page's own stop"; fi
done
for __l in "$__rt"/bg*.log; do [ -f "$__l" ] && cat "$__l"; done
exit 0
`)
	return b.String(), nil
}

// shq quotes s for the shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// stripComment drops a trailing `# comment` (outside quotes).
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// runScript runs a session's script from the repository's root in a
// network namespace of its own with its loopback up (nothing reaches
// another machine, and its fixed ports meet no other test's), with a
// fresh HOME and TMPDIR; it returns the combined output.
func runScript(t *testing.T, isolate []string, script string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "session.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(baseEnv(), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "TMPDIR="+tmp, "GOPROXY=off", "GOTOOLCHAIN=local")
	// A fresh HOME, but go build keeps this machine's module and build caches.
	if goenv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output(); err == nil {
		if v := strings.Fields(string(goenv)); len(v) == 3 {
			env = append(env, "GOPATH="+v[0], "GOMODCACHE="+v[1], "GOCACHE="+v[2])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := append(slices.Clone(isolate[1:]), "bash", "-c", `ip link set lo up && exec bash "$0"`, path)
	cmd := exec.CommandContext(ctx, isolate[0], args...)
	cmd.Env, cmd.Dir, cmd.Stdin = env, ".", strings.NewReader("")
	// Its own process group, all of it stopped at the end (a job the
	// session failed to stop included).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("did not end within 8 minutes: %w", ctx.Err())
	}
	return out.String(), err
}

// The run blocks run as written, each page's in one shell, and their
// outcome is the one the page describes.
func TestReadmeRunBlocksRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and the fakes, runs the documented sessions (-short)")
	}
	isolate := netnsPrefix(t)
	sessions := runSessions(t, docBlocks(t))
	checks := map[string]func(t *testing.T, out string){
		"README.md":        checkWalkthrough,
		"docs/TRY.md":      checkTry,
		"docs/TRY.md:day2": checkDay2,
	}
	for _, s := range sessions {
		var run []func(*testing.T, string)
		for _, c := range s.covers {
			check, ok := checks[c]
			if !ok {
				t.Fatalf("session %s: no check of its outcome in this test", c)
			}
			delete(checks, c)
			run = append(run, check)
		}
		name := strings.Join(s.covers, "+")
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			// Each in a network namespace of its own: the same ports,
			// no conflict; mostly waiting (the fakes, the follow).
			t.Parallel()
			script, err := sessionScript(s, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			out, err := runScript(t, isolate, script)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, check := range run {
				check(t, out)
			}
		})
	}
	for name := range checks {
		t.Errorf("no run session %s in the docs", name)
	}
}

// containsAll fails t for each want not in out.
func containsAll(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// The README's walkthrough: three cards, three nodes booted from them, each
// applied, etcd bootstrapped, the kubeconfig written, status read.
func checkWalkthrough(t *testing.T, out string) {
	containsAll(t, out,
		"Card ready: cp-1, 127.0.0.20/24", "Card ready: worker-2, 127.0.0.22/24",
		"Node: worker-1, 127.0.0.21/24",
		"cp-1: applied talos/controlplane.yaml", "worker-1: applied talos/worker.yaml", "worker-2: applied talos/worker.yaml",
		"cp-1: bootstrapped etcd",
		"wrote a new kubeconfig kubeconfig",
		"worker-1: NotReady: no CNI yet")
}

// docs/TRY.md: the flash's JSON result is the served image, verified; the
// fake nodes answer the scan, the incident is blocked; bootstrap and
// upgrade work on configured nodes.
func checkTry(t *testing.T, out string) {
	served := regexp.MustCompile(`sha256 ([0-9a-f]{64})`).FindStringSubmatch(out)
	var result *contract.Event
	for _, line := range strings.Split(out, "\n") {
		if ev, ok := contract.Decode([]byte(line)); ok && ev.Result != nil {
			result = &ev
		}
	}
	if served == nil || result == nil || result.Result.SHA256 != served[1] || !result.Result.Verified {
		t.Fatalf("want the flash's result event with the served image's sha256 %v, got %+v\n%s", served, result, out)
	}
	if got := imagetest.FileSHA256(t, result.Result.Device, result.Result.Bytes); got != served[1] {
		t.Errorf("%s holds sha256 %s, want %s", result.Result.Device, got, served[1])
	}
	containsAll(t, out, "127.0.0.2:50000", "127.0.0.4:50000", "ExtensionServiceConfig", "bootstrapped etcd", "v1.14.4 -> v1.14.5")
}

// docs/TRY.md's day 2: the appending patch is flagged and not sent, the
// replacement passes the node's dry run; once the CNI is in, the rolling
// upgrade takes the cluster from v1.14.4 to v1.14.5, control plane first,
// each node drained (CoreDNS evicted) and back Ready (issue 38).
func checkDay2(t *testing.T, out string) {
	containsAll(t, out, "grows from 3 to 6", "CNI installed",
		"cp-1: upgraded: runs v1.14.5", "worker-1: upgraded: runs v1.14.5", "worker-2: upgraded: runs v1.14.5",
		"evicted kube-system/coredns-")
	if i, j := strings.Index(out, "cp-1: upgraded"), strings.Index(out, "worker-1: upgraded"); i < 0 || j < i {
		t.Errorf("the control plane is not upgraded first:\n%s", out)
	}
	last := out[max(strings.LastIndex(out, "talosflash-cli status "), 0):]
	if n := strings.Count(last, "running, ready · Talos v1.14.5"); n != 3 {
		t.Errorf("the last status shows %d nodes running v1.14.5, ready:\n%s", n, last)
	}
}

// The harness fails a session that leaves its server on its port: `go run`
// in the background, `kill %1` stops go run and not the program it built
// (the README before issue 39).
func TestReadmeRunHarnessCatchesAServerLeftRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run (-short)")
	}
	t.Parallel()
	isolate := netnsPrefix(t)
	doc := "<!-- readme-test: run leftover -->\n```sh\n" +
		"go run ./factory/factorytest/fakefactory --listen 127.0.0.1:8088 --size 1MiB &\n" +
		"kill %1\n```\n"
	sessions := runSessions(t, parseDoc("planted.md", []byte(doc)))
	if len(sessions) != 1 {
		t.Fatalf("sessions: %+v", sessions)
	}
	script, err := sessionScript(sessions[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := runScript(t, isolate, script)
	if err == nil || !strings.Contains(out, "still listens on 127.0.0.1:8088") {
		t.Fatalf("want the harness to fail on the factory left on its port, got %v:\n%s", err, out)
	}
}

// Every relative link of README.md and docs/*.md reaches a file, and its
// #anchor a heading there (GitHub's anchors): moving a section moves its
// links.
func TestReadmeLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	headingsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		text, err := os.ReadFile(path)
		if err == nil {
			for _, b := range outsideCode(string(text)) {
				if h, ok := strings.CutPrefix(b.text, "#"); ok {
					a[githubAnchor(strings.TrimLeft(h, "#"))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range append([]string{"README.md"}, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range outsideCode(string(text)) {
			for _, m := range link.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				if path == "" {
					path = f
				} else {
					path = filepath.Join(filepath.Dir(f), path)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: %v", f, l.line, target, err)
					continue
				}
				if anchor != "" && !headingsOf(path)[anchor] {
					t.Errorf("%s:%d: link %s: no heading with that anchor in %s", f, l.line, target, path)
				}
			}
		}
	}
}

// outsideCode returns the lines of a markdown text outside code blocks.
func outsideCode(text string) []docLine {
	var out []docLine
	in := false
	for i, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			in = !in
			continue
		}
		if !in {
			out = append(out, docLine{line: i + 1, text: l})
		}
	}
	return out
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, punctuation but hyphens and underscores dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
