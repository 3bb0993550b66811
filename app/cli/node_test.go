package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

func builtinSchematic(t *testing.T, role string) *schematic.Schematic {
	t.Helper()
	p, err := factory.FindProfile(factory.BuiltinProfiles(), role)
	if err != nil {
		t.Fatal(err)
	}
	return p.Schematic()
}

// testConfig copies node/testdata/name into a temp dir.
func testConfig(t *testing.T, name string) (path string, data []byte) {
	t.Helper()
	data = testkit.Testdata(t, name)
	path = filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// appliedConfigs are the non-dry-run configs a fake node received.
func appliedConfigs(srv *nodetest.Server) [][]byte {
	var out [][]byte
	for _, r := range srv.Requests() {
		if !r.DryRun {
			out = append(out, r.Config)
		}
	}
	return out
}

// The seed's case: worker.yaml sent to the node that booted the Newt image
// is blocked, whatever role the user passes, and the node receives nothing.
// Without --role worker it is a role mismatch (issue 37): the node booted
// the control plane's image and the config could not run there, so the
// refusal names the right file and no --force sends it; with --role worker
// (a worker's card, as the user says) the Newt finding blocks and --force
// is the explicit override.
func TestApplyBlocksWorkerConfigOnNewtImage(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "controlplane")})
	// talos114/*/worker.yaml: the incident with the real 1.14 files.
	for _, file := range []string{"worker.yaml", "worker-v114.yaml", "talos114/valid/worker.yaml", "talos114/user/worker.yaml"} {
		path, _ := testConfig(t, file)
		for _, extra := range [][]string{nil, {"--role", "worker"}, {"--role", "controlplane"}} {
			args := append([]string{"apply", "--node", srv.Addr(), "--file", path}, extra...)
			code, _, stderr := cliRun(t, args...)
			if code != contract.ExitConfig {
				t.Fatalf("%s %v: exit %d, want %d: %s", file, extra, code, contract.ExitConfig, stderr)
			}
			want := []string{"the node booted an image with siderolabs/newt", "ExtensionServiceConfig", "othing was sent", "booted controlplane"}
			if len(extra) == 0 || extra[1] == "controlplane" {
				want = append(want, "is a control plane (it booted the controlplane image)", "is a worker config", "apply the controlplane.yaml that talosctl gen config wrote")
			}
			for _, w := range want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s %v: stderr lacks %q:\n%s", file, extra, w, stderr)
				}
			}
			if len(extra) > 0 && extra[1] == "worker" && !strings.Contains(stderr, "you declared worker, but the node reports it booted profile controlplane") {
				t.Errorf("declared role not called out:\n%s", stderr)
			}
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the node received %d ApplyConfiguration calls, want none", n)
	}
	// --force does not turn a control plane into a worker.
	path, data := testConfig(t, "worker.yaml")
	if code, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--force"); code != contract.ExitConfig || len(srv.Requests()) != 0 {
		t.Fatalf("--force on a role mismatch: exit %d, %d requests: %s", code, len(srv.Requests()), stderr)
	}
	// --role worker --force is the explicit override of the Newt finding.
	if code, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--role", "worker", "--force"); code != contract.ExitOK {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	if got := appliedConfigs(srv); len(got) != 1 || !bytes.Equal(got[0], data) {
		t.Fatal("--force did not send the file byte for byte")
	}
}

// The three fixed setups pass, and the node gets the file byte for byte
// (after its own dry run).
func TestApplyFixedSetups(t *testing.T) {
	for _, tc := range []struct{ image, file string }{
		{"worker", "worker.yaml"},
		{"worker", "talos114/valid/worker.yaml"},
		{"worker", "talos114/user/worker.yaml"},
		{"controlplane", "talos114/valid/controlplane.yaml"},
		{"controlplane", "talos114/user/controlplane.yaml"},
		{"controlplane", "worker-newt-esc.yaml"},
		{"controlplane", "controlplane.yaml"},
	} {
		srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, tc.image)})
		path, data := testConfig(t, tc.file)
		code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path)
		if code != contract.ExitOK {
			t.Fatalf("%s on %s image: exit %d: %s", tc.file, tc.image, code, stderr)
		}
		if got := appliedConfigs(srv); len(got) != 1 || !bytes.Equal(got[0], data) {
			t.Fatalf("%s: the node did not receive the file byte for byte", tc.file)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || !reqs[0].DryRun {
			t.Errorf("%s: want the node's dry run before the apply, got %d requests", tc.file, len(reqs))
		}
		if !strings.Contains(stdout, "node answered no-reboot") || !strings.Contains(stderr, "node's dry run: ") {
			t.Errorf("%s: stdout %q stderr %q", tc.file, stdout, stderr)
		}
		// Said in one line, not as the list of kinds the node checks anyway.
		if strings.HasPrefix(tc.file, "talos114/") && (!regexp.MustCompile(`(?m)^note: \d+ documents are newer than Talos machinery v1.13: not checked here; the node checks them in its dry run$`).MatchString(stderr) ||
			strings.Contains(stderr, "KubeletConfig") || strings.Count(stderr, "newer than Talos machinery") != 1) {
			t.Errorf("newer kinds not reported in one line: %s", stderr)
		}
		// The verdict first: what happened and the next step, one line.
		if first, _, _ := strings.Cut(stdout, "\n"); !strings.HasPrefix(first, "applied "+path+" to "+srv.Addr()+": the node boots with it now, no reboot") {
			t.Errorf("%s: the first line is not the verdict: %q", tc.file, first)
		}
		// A control plane's config: the next step is the one bootstrap.
		if strings.HasPrefix(tc.file, "talos114/") {
			frags, err := nodetest.ConfigSecretFragments(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range frags {
				if strings.Contains(stdout+stderr, f) {
					t.Fatalf("%s: secret fragment %q in the output", tc.file, f)
				}
			}
			if strings.Contains(stderr, "falls back to the generic installer") || strings.Contains(stderr, "machine.install.image") {
				t.Errorf("%s: pre-1.14 installer advice: %s", tc.file, stderr)
			}
		}
		if bootstrap := strings.Contains(stdout, "; next, once per cluster: `talosflash bootstrap --node 127.0.0.1"); bootstrap != strings.HasSuffix(tc.file, "controlplane.yaml") {
			t.Errorf("%s: bootstrap hint %v: %s", tc.file, bootstrap, stdout)
		}
	}
}

// Without extension statuses (Talos <= 1.12) the declared role is the
// fallback, said so; a custom profile maps to no role, so `--role storage`
// (the README's custom worker profile) takes a worker config.
func TestApplyFallbackRoleAndCustomProfile(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Legacy: true})
	profiles := testkit.WriteFile(t, t.TempDir(), "profiles.yaml", `profiles:
  - name: storage
    description: Pi worker with iSCSI for Longhorn
    talosVersion: v1.14.5
    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}
    extensions: [siderolabs/iscsi-tools, siderolabs/util-linux-tools]
`)
	path, data := testConfig(t, "worker.yaml")
	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--role", "storage", "--profiles", profiles)
	if code != contract.ExitOK {
		t.Fatalf("--role storage: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "as you declared (fallback)") || !strings.Contains(stdout, "Talos <= 1.12 does not report it") {
		t.Errorf("stderr %q stdout %q", stderr, stdout)
	}
	if got := appliedConfigs(srv); len(got) != 1 || !bytes.Equal(got[0], data) || len(srv.Requests()) != 1 {
		t.Fatal("1.12 node: want exactly one apply (no dry run on <= 1.12), byte for byte")
	}
	// Fallback still blocks the incident: declared controlplane (Newt) + worker config.
	code, _, stderr = cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--role", "controlplane")
	if code != contract.ExitConfig || !strings.Contains(stderr, "fall back to the profile you declared (controlplane)") {
		t.Fatalf("fallback incident: exit %d: %s", code, stderr)
	}
}

// Modes per generation, and what the node says it did.
func TestApplyModesPerGeneration(t *testing.T) {
	newer := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "worker")})
	older := nodetest.Start(t, nodetest.Options{Legacy: true})
	path, _ := testConfig(t, "worker.yaml")

	code, stdout, stderr := cliRun(t, "apply", "--node", newer.Addr(), "--file", path, "--mode", "try")
	if code != contract.ExitOK || !strings.Contains(stderr, "without persisting it") || !strings.Contains(stdout, "node answered try") {
		t.Fatalf("try on 1.14: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = cliRun(t, "apply", "--node", newer.Addr(), "--file", path, "--mode", "staged")
	if code != contract.ExitOK || !strings.Contains(stdout, "node answered staged") || !strings.Contains(stdout, "Staged configuration") {
		t.Fatalf("staged on 1.14: exit %d %s", code, stdout)
	}
	code, stdout, _ = cliRun(t, "apply", "--node", newer.Addr(), "--file", path, "--mode", "reboot")
	if code != contract.ExitOK || !strings.Contains(stdout, "the node answered no-reboot (mode reboot requested)") {
		t.Fatalf("reboot on 1.14: exit %d %s", code, stdout)
	}
	before := len(older.Requests())
	code, _, stderr = cliRun(t, "apply", "--node", older.Addr(), "--file", path, "--mode", "staged")
	if code != contract.ExitUsage || !strings.Contains(stderr, "only accepts auto, reboot, try") || len(older.Requests()) != before {
		t.Fatalf("staged on 1.12: exit %d, %d requests: %s", code, len(older.Requests())-before, stderr)
	}
}

// --dry-run shows the node's summary and diff, secrets redacted.
func TestApplyDryRunShowsNodeDiff(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "worker")})
	path, _ := testConfig(t, "worker.yaml")
	code, stdout, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--dry-run")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"validated " + path + " on " + srv.Addr() + ": the node's dry run accepts it; nothing was applied", "Dry run summary:", "Config diff:", "+        hostname: worker-1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "fakeaa.fakeplaceholder00") || strings.Contains(stdout, "RkFLRS1QTEFDRUhPTERFUi1DTFVTVEVSLVNFQ1JFVA") {
		t.Error("the diff prints secrets")
	}
	if got := appliedConfigs(srv); len(got) != 0 {
		t.Error("dry run applied")
	}
}

// Ctrl-C while apply waits on a node ends the command with 130, promptly.
func TestApplyInterruptedWhileWaiting(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	gate := make(chan struct{}) // never opened: the node holds the call
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, "worker"), Gate: gate})
	path, _ := testConfig(t, "worker.yaml")
	go func() {
		for len(srv.Requests()) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		signalSelf(syscall.SIGINT)
	}()
	start := time.Now()
	code, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--timeout", "1m")
	if code != contract.ExitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, contract.ExitInterrupted, stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v to stop", d)
	}
	// Said plainly, with what was (not) sent: the gated call is the node's dry run.
	if !strings.Contains(stderr, "interrupted") || !strings.Contains(stderr, "nothing was applied") || strings.Contains(stderr, "context canceled") {
		t.Errorf("stderr: %s", stderr)
	}
}

// apply --file on a FIFO is refused at once instead of blocking.
func TestApplyFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := mkfifo(p); err != nil {
		t.Skip(err)
	}
	code, _, stderr := cliRun(t, "apply", "--node", "127.0.0.1:1", "--file", p)
	if code != contract.ExitUsage || !strings.Contains(stderr, "FIFO") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// nodes over 127.0.0.0/29 with mixed fake nodes: each row says what it booted.
func TestNodesTellsBootedImagesApart(t *testing.T) {
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}
	port := testkit.FreePort(t, hosts...)
	at := func(h string) string { return net.JoinHostPort(h, strconv.Itoa(port)) }
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.2"), Schematic: builtinSchematic(t, "controlplane")})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.3"), Schematic: builtinSchematic(t, "worker")})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.4"), Legacy: true})

	code, stdout, stderr := cliRun(t, "nodes", "--subnet", "127.0.0.0/29", "--port", strconv.Itoa(port), "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Address      string `json:"address"`
		TalosVersion string `json:"talos_version"`
		Arch         string `json:"arch"`
		Booted       *struct {
			SchematicID string   `json:"schematic_id"`
			Extensions  []string `json:"extensions"`
		} `json:"booted"`
		Matches struct{ Profile, Role, Source string } `json:"matches"`
		Factory *struct {
			SchematicID string `json:"schematic_id"`
			APIURL      string `json:"api_url"`
		} `json:"factory"`
	}
	if err := json.Unmarshal(answer(t, stdout, "nodes"), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("rows %v (%v): %s", rows, err, stdout)
	}
	cpID, _ := factory.SchematicID(builtinSchematic(t, "controlplane"))
	if rows[0].Booted == nil || rows[0].Booted.SchematicID != cpID || rows[0].Matches.Profile != "controlplane" || rows[0].Arch != "arm64" || len(rows[0].Booted.Extensions) != 1 {
		t.Errorf("row 0 %+v", rows[0])
	}
	if rows[1].Booted == nil || rows[1].Matches.Role != "worker" {
		t.Errorf("row 1 %+v", rows[1])
	}
	if rows[2].Booted != nil || rows[2].Matches.Profile != "" || rows[2].Factory != nil {
		t.Errorf("row 2 %+v", rows[2])
	}
	// Talos 1.14 says which factory built the image (ImageFactorySchematics).
	if f := rows[0].Factory; f == nil || f.SchematicID != cpID || f.APIURL != "https://factory.talos.dev" {
		t.Errorf("row 0 factory %+v", f)
	}
	code, stdout, _ = cliRun(t, "nodes", "--subnet", "127.0.0.0/29", "--port", strconv.Itoa(port))
	for _, want := range []string{"BOOTED", "FACTORY", "https://factory.talos.dev (Image Factory)", "controlplane", "newt", "worker", "unknown (no extension statuses)", "v1.14.5/arm64"} {
		if code != contract.ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// The generated 1.14 configs' dry run (its diff) and JSON output never show
// a fragment of their PKI or of the Newt secret.
func TestApplyDryRun114NoSecrets(t *testing.T) {
	for _, tc := range []struct{ image, file string }{
		{"controlplane", "talos114/valid/controlplane.yaml"},
		{"worker", "talos114/user/worker.yaml"},
	} {
		srv := nodetest.Start(t, nodetest.Options{Schematic: builtinSchematic(t, tc.image)})
		path, data := testConfig(t, tc.file)
		frags, err := nodetest.ConfigSecretFragments(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, extra := range [][]string{nil, {"--json"}} {
			args := append([]string{"apply", "--node", srv.Addr(), "--file", path, "--dry-run"}, extra...)
			code, stdout, stderr := cliRun(t, args...)
			if code != contract.ExitOK {
				t.Fatalf("%s %v: exit %d: %s", tc.file, extra, code, stderr)
			}
			if !strings.Contains(stdout+stderr, "Dry run") && !strings.Contains(stdout+stderr, "dry run") {
				t.Errorf("%s %v: no dry run shown: %s %s", tc.file, extra, stdout, stderr)
			}
			for _, f := range frags {
				if strings.Contains(stdout+stderr, f) {
					t.Fatalf("%s %v: secret fragment %q in the output", tc.file, extra, f)
				}
			}
		}
		for _, r := range srv.Requests() {
			if !r.DryRun {
				t.Errorf("%s: --dry-run applied", tc.file)
			}
		}
	}
}

// A range too large to scan is refused before the scan is announced (it
// printed "scanning 127.0.0.0/8…" first; nothing was sent either way).
func TestNodesTooLargeRangeRefusedFirst(t *testing.T) {
	code, _, stderr := cliRun(t, "nodes", "--subnet", "127.0.0.0/8")
	if code != contract.ExitUsage || strings.Contains(stderr, "scanning") || !strings.Contains(stderr, "too many hosts") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
