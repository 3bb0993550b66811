package cli

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// noControl fails if out holds a control character other than newline
// (the table's own line ends), or a format character.
func noControl(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf)) {
			t.Errorf("%s holds %U:\n%q", what, r, out)
			return
		}
	}
}

// A rogue device answering on port 50000 with terminal escapes and CR/LF in
// its hostname and version cannot clear the screen or forge a row.
func TestNodesAndApplyShowRogueNodePrintable(t *testing.T) {
	hosts := []string{"127.0.0.5"}
	port := testkit.FreePort(t, hosts...)
	addr := net.JoinHostPort("127.0.0.5", strconv.Itoa(port))
	evilHost := "evil\x1b[2J\x1b[31mPWNED\x1b[0m\r\nfake-row"
	srv := nodetest.Start(t, nodetest.Options{Addr: addr, Hostname: evilHost, TalosVersion: "v1.14.5\x1b[31m"})

	code, stdout, stderr := cliRun(t, "nodes", "--subnet", "127.0.0.5/32", "--port", strconv.Itoa(port), "--factory", "http://127.0.0.1:1")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	noControl(t, "nodes table", stdout)
	noControl(t, "nodes stderr", stderr)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `evil\x1b[2J`) || !strings.Contains(lines[1], "invalid") {
		t.Errorf("want the header and one row with the escaped hostname and an invalid version:\n%s", stdout)
	}

	code, stdout, stderr = cliRun(t, "nodes", "--subnet", "127.0.0.5/32", "--port", strconv.Itoa(port), "--json", "--factory", "http://127.0.0.1:1")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal(answer(t, stdout, "nodes"), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("nodes --json: %v: %s", err, stdout)
	}
	if h, _ := rows[0]["hostname"].(string); !strings.HasPrefix(h, `evil\x1b[2J`) || strings.ContainsAny(h, "\x1b\r\n") {
		t.Errorf("hostname %q", h)
	}
	if rows[0]["talos_version"] != nil || rows[0]["talos_version_invalid"] != `v1.14.5\x1b[31m` {
		t.Errorf("version %v / %v", rows[0]["talos_version"], rows[0]["talos_version_invalid"])
	}

	path, _ := testConfig(t, "worker.yaml")
	_, stdout, stderr = cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--dry-run", "--factory", "http://127.0.0.1:1")
	noControl(t, "apply stdout", stdout)
	noControl(t, "apply stderr", stderr)
	if !strings.Contains(stderr, `Talos invalid (v1.14.5\x1b[31m)`) {
		t.Errorf("apply does not call the version invalid:\n%s", stderr)
	}
}

// A node that does not say what it booted: unknown values are null in
// nodes --json, not empty strings.
func TestNodesJSONUnknownIsNull(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Legacy: true})
	code, stdout, stderr := cliRun(t, "nodes", "--subnet", "127.0.0.1/32", "--port", strconv.Itoa(srv.Port()), "--json", "--factory", "http://127.0.0.1:1")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal(answer(t, stdout, "nodes"), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("nodes --json: %v: %s", err, stdout)
	}
	for _, k := range []string{"arch", "booted", "matches"} {
		if v, ok := rows[0][k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null: %s", k, v, ok, stdout)
		}
	}
	if rows[0]["talos_version"] != "v1.12.6" {
		t.Errorf("talos_version = %v", rows[0]["talos_version"])
	}
}
