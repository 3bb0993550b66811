package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/node/nodetest"
)

// A legacy node (no extension statuses), no --role, and a config whose
// installer is a known schematic: the check can only use the config's own
// installer, and apply says so instead of passing silently.
func TestApplyOnLegacyNodeSaysWhatItCheckedAgainst(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Legacy: true})
	path, _ := testConfig(t, "worker.yaml")
	code, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--dry-run", "--factory", "http://127.0.0.1:1")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"does not report what it booted", "config's own install image (ee21ef4a5ef8", "--role"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// A bad --node is a usage error (exit 2), and a password in it is never echoed.
func TestApplyBadNodeAddress(t *testing.T) {
	path, _ := testConfig(t, "worker.yaml")
	for _, ep := range []string{"127.0.0.6:notaport", "https://user:pw123secret@127.0.0.6", "user:pw123secret@127.0.0.6:50000", "127.0.0.6:99999", "bad\x1b[2Jhost"} {
		code, stdout, stderr := cliRun(t, "apply", "--node", ep, "--file", path, "--factory", "http://127.0.0.1:1")
		if code != contract.ExitUsage {
			t.Errorf("%q: exit %d, want %d: %s", ep, code, contract.ExitUsage, stderr)
		}
		if strings.Contains(stdout+stderr, "pw123secret") || strings.Contains(stderr, "\x1b") {
			t.Errorf("%q: output echoes it: %q", ep, stderr)
		}
	}
}

// apply --json blocked by the incident checks (a worker's card with the
// Newt image, as --role says): one JSON error object on stdout with the
// exit code and the findings.
func TestApplyJSONBlocked(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "controlplane")})
	path, _ := testConfig(t, "worker.yaml")
	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--role", "worker", "--json", "--factory", "http://127.0.0.1:1")
	if code != contract.ExitConfig {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Event    string `json:"event"`
		Code     int    `json:"code"`
		Message  string `json:"message"`
		Findings []struct {
			Severity, Code, Message, Fix string
		} `json:"findings"`
	}
	if err := json.Unmarshal(answer(t, stdout, "error"), &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v: %q", err, stdout)
	}
	if out.Event != "error" || out.Code != contract.ExitConfig || !strings.Contains(out.Message, "nothing was sent") {
		t.Errorf("error object %+v", out)
	}
	found := false
	for _, f := range out.Findings {
		found = found || f.Code == "extension-config-missing" && f.Severity == "error" && f.Fix != ""
	}
	if !found {
		t.Errorf("findings %+v", out.Findings)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the node received the config")
	}
}

// apply -h says the checks use what the node booted; --role is a fallback.
func TestApplyHelpDescribesChecks(t *testing.T) {
	_, stdout, _ := cliRun(t, "apply", "-h")
	if !strings.Contains(stdout, "what the node booted") || strings.Contains(stdout, "with --role also") {
		t.Errorf("apply -h:\n%s", stdout)
	}
}

// nodes and apply recognise images flashed with --cache-dir.
func TestNodesAndApplyCacheDir(t *testing.T) {
	custom := builtinSchematic(t, "worker")
	custom.Customization.ExtraKernelArgs = []string{"talosflash.test=1"}
	id, err := custom.ID()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, id, "v1.14.5"), 0o700); err != nil {
		t.Fatal(err)
	}
	srv := nodetest.Start(t, nodetest.Options{Schematic: custom})
	args := []string{"nodes", "--subnet", "127.0.0.1/32", "--port", strconv.Itoa(srv.Port()), "--json", "--factory", "http://127.0.0.1:1"}
	for _, withDir := range []bool{false, true} {
		a := args
		if withDir {
			a = append(a, "--cache-dir", dir)
		}
		code, stdout, stderr := cliRun(t, a...)
		if code != contract.ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rows []struct {
			Matches *struct{ Source string } `json:"matches"`
		}
		if err := json.Unmarshal(answer(t, stdout, "nodes"), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("%v: %s", err, stdout)
		}
		if got := rows[0].Matches != nil && rows[0].Matches.Source == "cache"; got != withDir {
			t.Errorf("--cache-dir %v: matches %+v", withDir, rows[0].Matches)
		}
	}
	path, _ := testConfig(t, "worker.yaml")
	_, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--dry-run", "--cache-dir", dir, "--factory", "http://127.0.0.1:1")
	if !strings.Contains(stderr, "booted flashed here") {
		t.Errorf("apply --cache-dir:\n%s", stderr)
	}
}
