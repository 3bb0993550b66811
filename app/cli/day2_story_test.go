package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/image-factory/pkg/client"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// storyCluster is the user's cluster of the story tests: one control
// plane with Newt (its config has Newt's ExtensionServiceConfig) and two
// workers, each Pi a fake booted from a card flashed by the CLI, before
// any config.
type storyCluster struct {
	srv                *factorytest.Server
	dir, inv, tc, port string
	endpoint           string // the cluster's Kubernetes API
	fakes              map[string]*nodetest.Server
	cpCfg, workerCfg   []byte
	secrets            []string // the PKI's, the Newt secret's fragments
}

func newStoryCluster(t *testing.T) *storyCluster {
	t.Helper()
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	kport := strconv.Itoa(testkit.FreePort(t, "127.0.0.21"))
	endpoint := "https://127.0.0.21:" + kport // the cluster's API: cp-1's address, a port free here
	for _, name := range []string{"controlplane.yaml", "worker.yaml"} {
		p := filepath.Join(dir, "talos", name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("https://127.0.0.21:6443"), []byte(endpoint)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cpCfg, _ := os.ReadFile(filepath.Join(dir, "talos", "controlplane.yaml"))
	workerCfg, _ := os.ReadFile(filepath.Join(dir, "talos", "worker.yaml"))
	if !bytes.Contains(cpCfg, []byte("kind: ExtensionServiceConfig\nname: newt")) || bytes.Contains(cpCfg, []byte("KubeFlannelCNIConfig")) {
		t.Skip("the control plane fixture is not the user's (Newt configured, Flannel deleted)")
	}

	cards := map[string]string{}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if os.Geteuid() == 0 {
			cards[h] = imagetest.LoopDevice(t, fx.Size+(1<<20), false)
		} else {
			cards[h] = filepath.Join(dir, h+".img")
		}
	}
	for _, hosts := range [][]string{{"cp-1"}, {"worker-1", "worker-2"}} {
		args := []string{"--flash", "--inventory", inv, "--yes", "--allow-loop", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
		for _, h := range hosts {
			args = append(args, "--hostname", h, "--device", cards[h])
		}
		if code, _, stderr := cliRun(t, args...); code != contract.ExitOK {
			t.Fatalf("flash %v: exit %d: %s", hosts, code, stderr)
		}
	}
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	fakes := map[string]*nodetest.Server{}
	for h, role := range map[string]string{"cp-1": "controlplane", "worker-1": "worker", "worker-2": "worker"} {
		fakes[h] = nodetest.Start(t, nodetest.Options{Card: cards[h], Addr: "127.0.0.1:" + port, Schematic: builtinSchematic(t, role), BootConfig: true})
	}
	tcData, err := os.ReadFile("../../node/testdata/talos114/valid/talosconfig")
	if err != nil {
		t.Skip(err)
	}
	tc := filepath.Join(dir, "talosconfig")
	if err := os.WriteFile(tc, tcData, 0o600); err != nil {
		t.Fatal(err)
	}
	secrets, err := nodetest.SecretFragments(tcData)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]byte{cpCfg, workerCfg} {
		f, err := nodetest.ConfigSecretFragments(c)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, f...)
	}
	return &storyCluster{srv: srv, dir: dir, inv: inv, tc: tc, port: port, endpoint: endpoint, fakes: fakes, cpCfg: cpCfg, workerCfg: workerCfg, secrets: secrets}
}

// up applies the configs, bootstraps, merges the kubeconfig (HOME is a
// temporary one) and installs the CNI: every node running and Ready.
func (c *storyCluster) up(t *testing.T) []string {
	t.Helper()
	code, stdout, stderr := cliRun(t, "apply", "--inventory", c.inv, "--port", c.port, "--wait", "30s", "--talosconfig", c.tc, "--bootstrap", "--interval", "50ms")
	if code != contract.ExitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout, stderr)
	}
	api := c.fakes["cp-1"].Node().KubeAPI()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := api.WaitNodes(ctx, 3); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	code, stdout2, stderr2 := cliRun(t, "kubeconfig", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc)
	if code != contract.ExitOK {
		t.Fatalf("kubeconfig: exit %d\n%s\n%s", code, stdout2, stderr2)
	}
	home, _ := os.UserHomeDir()
	c.secrets = append(c.secrets, kubeconfigSecrets(t, filepath.Join(home, ".kube", "config"))...)
	api.InstallCNI()
	return []string{stdout, stderr, stdout2, stderr2}
}

const newtEnvPatch = `apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: newt
environment:
    - PANGOLIN_ENDPOINT=https://pangolin2.example.net
    - NEWT_ID=n3wt1d0000000043
    - NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp2
`

// Day 2 of the user's story, on the three configured fakes booted from
// flashed cards: the Newt environment patch is flagged as an append with
// the form that replaces it (and not sent without --append); deleting
// Newt's ExtensionServiceConfig alone is refused (the control plane runs
// Newt), replacing it in one apply is accepted: the node receives one
// config holding the new document and not the old environment, and Newt
// runs. No PKI or Newt secret fragment on any output.
func TestUserStoryPatchNewt(t *testing.T) {
	c := newStoryCluster(t)
	outputs := c.up(t)
	cp := c.fakes["cp-1"].Node()
	patchFile := testkit.WriteFile(t, c.dir, "newt-env.yaml", newtEnvPatch)
	run := func(args ...string) (int, string, string) {
		code, stdout, stderr := cliRun(t, append([]string{"patch", "--inventory", c.inv, "--hostname", "cp-1", "--port", c.port, "--talosconfig", c.tc}, args...)...)
		outputs = append(outputs, stdout, stderr)
		return code, stdout, stderr
	}
	applied := func() (dry, real int) {
		for _, r := range cp.ConfigApplies() {
			if r.DryRun {
				dry++
			} else {
				real++
			}
		}
		return
	}

	// The append, flagged with its replace form; --dry-run applies nothing.
	code, stdout, stderr := run("--patch", "@"+patchFile, "--dry-run")
	if code != contract.ExitOK {
		t.Fatalf("patch --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{
		"warning: ExtensionServiceConfig newt: environment grows from 3 to 6 items: a patch APPENDS to an existing list",
		"  replace the whole document instead: talosflash patch --replace-document ExtensionServiceConfig/newt FILE",
		"  $patch: delete\n",
		"  +    - PANGOLIN_ENDPOINT=<redacted>",
		"the node's dry run accepts it:",
		"cp-1: dry run: nothing was applied",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("patch --dry-run lacks %q:\n%s", w, stdout)
		}
	}
	if dry, real := applied(); dry != 1 || real != 0 {
		t.Fatalf("after --dry-run the node got %d dry runs and %d applies", dry, real)
	}
	// Not sent without --append.
	if code, stdout, stderr := run("--patch", "@"+patchFile); code != contract.ExitConfig || !strings.Contains(stderr, "not sent: the patch appends to ExtensionServiceConfig newt environment") {
		t.Fatalf("patch that appends: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if dry, real := applied(); dry != 1 || real != 0 {
		t.Fatalf("the appending patch reached the node: %d dry runs, %d applies", dry, real)
	}

	// Deleting Newt's document alone: refused, nothing sent.
	del := testkit.WriteFile(t, c.dir, "newt-delete.yaml", "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\n$patch: delete\n")
	code, stdout, stderr = run("--patch", "@"+del)
	if code != contract.ExitConfig || !strings.Contains(stderr, "refused, nothing was sent") || !strings.Contains(stderr, "--replace-document ExtensionServiceConfig/NAME FILE") ||
		!strings.Contains(stdout, "extension-config-missing") && !strings.Contains(stdout, "no ExtensionServiceConfig named \"newt\"") {
		t.Fatalf("delete alone: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if dry, real := applied(); dry != 1 || real != 0 {
		t.Fatalf("the delete reached the node: %d dry runs, %d applies", dry, real)
	}

	// The replacement in one apply: one config, the new document, not the old environment.
	newDoc := testkit.WriteFile(t, c.dir, "newt.yaml", newtEnvPatch)
	code, stdout, stderr = run("--replace-document", "ExtensionServiceConfig/newt", newDoc, "--json")
	if code != contract.ExitOK {
		t.Fatalf("replace: exit %d\n%s\n%s", code, stdout, stderr)
	}
	a := answerMap(t, stdout, "patch")
	docRowHas(t, "| `patch --json` |", a)
	if a["applied"] != true || a["changed"] != true || len(a["appends"].([]any)) != 0 || a["hostname"] != "cp-1" {
		t.Fatalf("patch --json: %v", a)
	}
	var reals [][]byte
	for _, r := range cp.ConfigApplies() {
		if !r.DryRun {
			reals = append(reals, r.Config)
		}
	}
	if len(reals) != 1 || !bytes.Contains(reals[0], []byte("NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp2")) || bytes.Contains(reals[0], []byte("pangolin.example.net")) ||
		bytes.Count(reals[0], []byte("kind: ExtensionServiceConfig")) != 1 || !bytes.Equal(cp.Config(), reals[0]) {
		t.Fatalf("the node received %d configs; the last:\n%s", len(reals), "(not shown: it holds the PKI)")
	}
	code, stdout, stderr = cliRun(t, "status", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc)
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitOK || !strings.Contains(stdout, "ext-newt Running") {
		t.Fatalf("status after the replacement: exit %d\n%s\n%s", code, stdout, stderr)
	}
	c.secrets = append(c.secrets, "N3wS3cr3tV4lu3Xq8Zp2", "pangolin2.example")
	assertNoFragments(t, c.secrets, outputs...)
	assertNoPEM(t, outputs...)
}

// The rolling upgrade of the user's cluster: --dry-run prints the plan in
// the documented order and sends nothing (counted by the fakes); the real
// run upgrades cp-1 (etcd gate, installer, drained: evictions seen by the
// fake API, rebooted, back Ready, uncordoned) before touching worker-1,
// whose installer fails (injected): it stops there, worker-2 untouched,
// and says each node's state.
func TestUserStoryRollingUpgrade(t *testing.T) {
	c := newStoryCluster(t)
	outputs := c.up(t)
	const to = "v1.14.6"
	c.srv.SetVersions(nodetest.DefaultVersion, to)
	var exts []client.ExtensionInfo
	for _, p := range factory.BuiltinProfiles() {
		for _, e := range p.Schematic().Customization.SystemExtensions.OfficialExtensions {
			exts = append(exts, client.ExtensionInfo{Name: e, Ref: "ghcr.io/" + e + ":v1.0.1", Digest: "sha256:" + strings.Repeat("a", 64)})
		}
		if _, err := c.srv.AddSchematic(p.Schematic()); err != nil {
			t.Fatal(err)
		}
	}
	c.srv.SetExtensions(to, exts)
	api := c.fakes["cp-1"].Node().KubeAPI()
	api.AddDeployment("default", "web", 3, 1)
	api.AddDaemonSet("kube-system", "kube-flannel")
	nodes := map[string]*nodetest.Node{}
	for h, f := range c.fakes {
		nodes[h] = f.Node()
	}
	base := len(api.Requests())
	args := []string{"upgrade", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--to", to, "--factory", c.srv.URL,
		"--timeout", "30s", "--interval", "50ms", "--drain-timeout", "10s"}

	code, stdout, stderr := cliRun(t, append(args, "--dry-run")...)
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitOK {
		t.Fatalf("upgrade --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	order := []string{"cp-1: would check etcd is healthy with every member, pull and run", "worker-1: would pull and run", "worker-2: would pull and run"}
	at := 0
	for _, w := range order {
		i := strings.Index(stdout[at:], w)
		if i < 0 {
			t.Fatalf("dry run lacks %q after byte %d:\n%s", w, at, stdout)
		}
		at += i
	}
	for h, n := range nodes {
		if len(n.Pulled()) != 0 || len(n.Upgrades()) != 0 || n.Reboots() != 0 {
			t.Fatalf("--dry-run sent to %s: pulls %v upgrades %v reboots %d", h, n.Pulled(), n.Upgrades(), n.Reboots())
		}
	}
	for _, r := range api.Requests()[base:] {
		if !strings.HasPrefix(r, "GET ") {
			t.Fatalf("--dry-run wrote to the Kubernetes API: %s", r)
		}
	}
	if len(api.Evictions()) != 0 {
		t.Fatalf("--dry-run evicted %v", api.Evictions())
	}

	nodes["worker-1"].SetUpgradeExitCode(1)
	code, stdout, stderr = cliRun(t, append(args, "--json")...)
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitApply {
		t.Fatalf("upgrade: exit %d, want %d\n%s\n%s", code, contract.ExitApply, stdout, stderr)
	}
	var lines []map[string]any
	for _, ev := range jsonEvents(t, stdout) {
		if ev["event"] == contract.TypeRolloutNode {
			lines = append(lines, ev)
		}
	}
	for _, l := range lines {
		docRowHas(t, "| `upgrade --inventory --json` |", l)
	}
	want := []struct{ host, step string }{{"cp-1", "upgraded"}, {"worker-1", "install"}, {"worker-2", "untouched"}}
	if len(lines) != len(want) {
		t.Fatalf("%d rollout_node lines:\n%s\n%s", len(lines), stdout, stderr)
	}
	for i, w := range want {
		if lines[i]["hostname"] != w.host || lines[i]["step"] != w.step {
			t.Errorf("line %d: %v, want %s %s", i, lines[i], w.host, w.step)
		}
	}
	// cp-1: upgraded with its role's installer, drained, back, uncordoned.
	cpID, _ := factory.BuiltinProfiles()[0].SchematicID()
	wantImage := factory.NewClient(c.srv.URL, nil).RegistryHost() + "/metal-installer/" + cpID + ":" + to
	if cp := nodes["cp-1"]; cp.RunningVersion() != to || cp.Reboots() != 1 || !slices.Equal(cp.Upgrades(), []string{wantImage}) {
		t.Fatalf("cp-1: %s, %d reboots, upgrades %v (want %s)", cp.RunningVersion(), cp.Reboots(), cp.Upgrades(), wantImage)
	}
	ev := api.Evictions()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "default/web-") || !strings.HasSuffix(ev[0], "@cp-1") {
		t.Fatalf("evictions %v, want cp-1's web pod", ev)
	}
	if !slices.Contains(api.PodsOn("cp-1"), "kube-system/kube-flannel-cp-1") || api.Unschedulable("cp-1") {
		t.Fatalf("cp-1 after: pods %v, cordoned %v", api.PodsOn("cp-1"), api.Unschedulable("cp-1"))
	}
	var patches []string
	for _, r := range api.Requests()[base:] {
		if strings.HasPrefix(r, "PATCH ") {
			patches = append(patches, strings.Split(r, "?")[0])
		}
	}
	if !slices.Equal(patches, []string{"PATCH /api/v1/nodes/cp-1", "PATCH /api/v1/nodes/cp-1"}) {
		t.Fatalf("node patches %v: want cp-1's cordon and uncordon only", patches)
	}
	// worker-1: its installer failed; not drained, not rebooted. worker-2: nothing.
	if w := nodes["worker-1"]; w.RunningVersion() != nodetest.DefaultVersion || w.Reboots() != 0 || len(w.Pulled()) != 1 || api.Unschedulable("worker-1") {
		t.Fatalf("worker-1: %s, %d reboots, pulls %v", w.RunningVersion(), w.Reboots(), w.Pulled())
	}
	if w := nodes["worker-2"]; len(w.Pulled()) != 0 || len(w.Upgrades()) != 0 || w.Reboots() != 0 {
		t.Fatalf("worker-2 was touched: pulls %v upgrades %v", w.Pulled(), w.Upgrades())
	}
	for _, s := range []string{
		"cp-1 (controlplane): upgraded: runs v1.14.6 with schematic",
		"worker-1 (worker): the installer ",
		"ran and failed: v1.14.6 is not installed and the node was not rebooted: it still runs v1.14.5",
		"worker-2 (worker): untouched: nothing was sent",
	} {
		if !strings.Contains(stderr, s) {
			t.Errorf("the stop does not say %q:\n%s", s, stderr)
		}
	}
	assertNoFragments(t, c.secrets, outputs...)
	assertNoPEM(t, outputs...)
}

// docRowHas: every top-level key of a JSON line is named in its docs/JSON.md row.
func docRowHas(t *testing.T, marker string, line map[string]any) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/JSON.md")
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, marker) {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("docs/JSON.md has no row %s", marker)
	}
	for k := range line {
		if k != "event" && k != "contract" && !strings.Contains(row, "`"+k+"`") {
			t.Errorf("docs/JSON.md's row %s lacks `%s`", marker, k)
		}
	}
}
