package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// nodeEvents are the apply_node lines of apply --inventory --json.
func nodeEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range jsonEvents(t, stdout) {
		if ev["contract"] != float64(1) {
			t.Fatalf("line without the contract envelope: %v", ev)
		}
		if ev["event"] == "apply_node" {
			out = append(out, ev)
		}
	}
	return out
}

// sentConfigs are the configs a fake node was sent (not dry runs).
func sentConfigs(s *nodetest.Server) [][]byte {
	var out [][]byte
	for _, r := range s.Requests() {
		if !r.DryRun {
			out = append(out, r.Config)
		}
	}
	return out
}

// From three blank cards to a cluster: an inventory of three nodes, their
// cards flashed through the CLI (loop devices as root, else files), a fake
// node booted from each card, one `apply --inventory --bootstrap` sends each
// node its config byte for byte; each comes up configured with its config's
// CA (nodetest's BootConfig) and the control plane is bootstrapped once
// with the talosconfig generated with the configs.
func TestInventoryEndToEnd(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	cache := filepath.Join(dir, "cache")

	cards := map[string]string{}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if os.Geteuid() == 0 {
			cards[h] = imagetest.LoopDevice(t, fx.Size+(1<<20), false) // detached in its cleanup
		} else {
			cards[h] = filepath.Join(dir, h+".img")
		}
	}
	flash := func(hosts ...string) {
		t.Helper()
		args := []string{"--flash", "--inventory", inv, "--yes", "--allow-loop", "--format", "xz", "--factory", srv.URL, "--cache-dir", cache}
		for _, h := range hosts {
			args = append(args, "--hostname", h, "--device", cards[h])
		}
		if code, _, stderr := cliRun(t, args...); code != contract.ExitOK {
			t.Fatalf("flash %v: exit %d: %s", hosts, code, stderr)
		}
	}
	flash("cp-1")                 // the control plane image
	flash("worker-1", "worker-2") // the worker image: one download, one decode for both cards
	if srv.BytesServed() != 2*int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes, want one download per image (%d each)", srv.BytesServed(), len(fx.XZ))
	}
	checkNodeCard(t, cards["cp-1"], fx, "cp-1", "127.0.0.21/8", "controlplane", cpID)
	checkNodeCard(t, cards["worker-1"], fx, "worker-1", "127.0.0.22/8", "worker", workerID)
	checkNodeCard(t, cards["worker-2"], fx, "worker-2", "127.0.0.23/8", "worker", workerID)

	// Each Pi boots from its card: at the card's address, with its name.
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	fakes := map[string]*nodetest.Server{}
	for h, role := range map[string]string{"cp-1": "controlplane", "worker-1": "worker", "worker-2": "worker"} {
		fakes[h] = nodetest.Start(t, nodetest.Options{Card: cards[h], Addr: "127.0.0.1:" + port, Schematic: builtinSchematic(t, role), BootConfig: true})
	}
	if a := fakes["worker-2"].Addr(); a != "127.0.0.23:"+port {
		t.Fatalf("worker-2 boots at %s", a)
	}
	tcFixture := testkit.Testdata(t, "talos114/valid/talosconfig") // generated with the configs
	tc := filepath.Join(dir, "talosconfig")
	if err := os.WriteFile(tc, tcFixture, 0o600); err != nil {
		t.Fatal(err)
	}
	secrets, err := nodetest.SecretFragments(tcFixture) // the cluster's PKI, also in the configs
	if err != nil {
		t.Fatal(err)
	}
	noSecrets := func(out string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatal("apply --inventory output holds a fragment of the cluster's secrets")
			}
		}
	}

	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "30s", "--json", "--bootstrap", "--talosconfig", tc, "--interval", "50ms")
	if code != contract.ExitOK {
		t.Fatalf("apply --inventory: exit %d: %s\n%s", code, stderr, stdout)
	}
	worker, _ := os.ReadFile(filepath.Join(dir, "talos", "worker.yaml"))
	cp, _ := os.ReadFile(filepath.Join(dir, "talos", "controlplane.yaml"))
	for h, want := range map[string][]byte{"cp-1": cp, "worker-1": worker, "worker-2": worker} {
		got := sentConfigs(fakes[h])
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Errorf("%s was sent %d configs, want exactly its own once", h, len(got))
		}
	}
	firstJSON := stdout
	evs := nodeEvents(t, stdout)
	if len(evs) != 3 {
		t.Fatalf("%d JSON lines, want one per node: %s", len(evs), stdout)
	}
	for i, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if evs[i]["hostname"] != h || evs[i]["status"] != "applied" || evs[i]["reported_hostname"] != h || evs[i]["address"] != "127.0.0."+strconv.Itoa(21+i)+"/8" {
			t.Errorf("node %d: %v", i, evs[i])
		}
	}
	noSecrets(stdout + stderr)
	cp1 := fakes["cp-1"].Node()
	if cp1 == nil || !cp1.Bootstrapped() || cp1.Bootstraps() != 1 {
		t.Fatalf("cp-1 configured %v, want bootstrapped with one call:\n%s", cp1 != nil, stderr)
	}
	var boot map[string]any // after the nodes' follow lines, before the control plane's second follow
	for _, ev := range jsonEvents(t, stdout) {
		if ev["event"] == "bootstrap" {
			boot = ev
		}
	}
	if boot == nil || boot["accepted"] != true {
		t.Fatalf("bootstrap line %v, want the bootstrap answer:\n%s", boot, stdout)
	}

	// Again: all three run with their configs now (mTLS): skipped; etcd
	// is bootstrapped already: nothing sent.
	code, stdout, stderr = cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "30s", "--bootstrap", "--talosconfig", tc, "--interval", "50ms")
	if code != contract.ExitOK || !strings.Contains(stderr, "etcd is bootstrapped already") {
		t.Fatalf("second run: exit %d: %s\n%s", code, stderr, stdout)
	}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if !strings.Contains(stdout, h+": already configured") || len(sentConfigs(fakes[h])) != 1 {
			t.Errorf("second run: %s not skipped as configured (%d configs sent):\n%s", h, len(sentConfigs(fakes[h])), stdout)
		}
	}
	noSecrets(stdout + stderr)
	if cp1.Bootstraps() != 1 {
		t.Fatalf("%d Bootstrap calls, want one", cp1.Bootstraps())
	}

	// The node's own warnings reach the user as apply --node shows them
	// (the 1.14 worker config has no installer.image: the node warns), in
	// text too: a worker-1 in maintenance again (a fresh card).
	const noImage = "installer.image is not set"
	if bytes.Contains(worker, []byte("kind: UnattendedInstallConfig")) && !bytes.Contains(worker, []byte("\n    image:")) {
		evs := nodeEvents(t, firstJSON)
		for i, h := range []string{"worker-1", "worker-2"} {
			ws, _ := evs[i+1]["warnings"].([]any)
			if len(ws) != 1 || !strings.Contains(ws[0].(string), noImage) {
				t.Errorf("%s: warnings %v, want the node's %q", h, evs[i+1]["warnings"], noImage)
			}
		}
		fakes["worker-1"].Close()
		nodetest.Start(t, nodetest.Options{Card: cards["worker-1"], Addr: "127.0.0.1:" + port, Schematic: builtinSchematic(t, "worker")})
		_, text, _ := cliRun(t, "apply", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--wait", "30s")
		if !strings.Contains(text, "  worker-1: the node warns: "+noImage) || strings.Contains(text, "warning: "+noImage) {
			t.Errorf("apply --inventory does not show the node's warning:\n%s", text)
		}
	}
}

// A card swapped between two Pis: at the control plane's address answers a
// node that booted the worker image and says it is worker-2. Blocked with a
// message naming both, nothing sent, exit 7; the other nodes go on.
func TestInventoryApplySwappedCard(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	swapped := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.21:" + port, Hostname: "worker-2", Schematic: builtinSchematic(t, "worker")})
	w1 := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.22:" + port, Hostname: "worker-1", Schematic: builtinSchematic(t, "worker")})
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--hostname", "cp-1", "--hostname", "worker-1", "--port", port, "--wait", "10s", "--json")
	if code != contract.ExitConfig {
		t.Fatalf("exit %d, want %d: %s", code, contract.ExitConfig, stderr)
	}
	for _, want := range []string{"cp-1's address", "booted the worker image", `"worker-2"`, "it is not cp-1", "Nothing was sent"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
	if n := len(sentConfigs(swapped)); n != 0 {
		t.Fatalf("the swapped node was sent %d configs", n)
	}
	if n := len(sentConfigs(w1)); n != 1 {
		t.Fatalf("worker-1 was sent %d configs, want 1", n)
	}
	evs := nodeEvents(t, stdout)
	if len(evs) != 2 || evs[0]["status"] != "failed" || evs[0]["reported_hostname"] != "worker-2" || evs[0]["booted"] != "worker" || evs[0]["code"] != float64(contract.ExitConfig) || evs[1]["status"] != "applied" {
		t.Fatalf("JSON %v", evs)
	}
	if all := jsonEvents(t, stdout); all[len(all)-1]["event"] != "error" || all[len(all)-1]["code"] != float64(contract.ExitConfig) {
		t.Fatalf("last line %v, want the run's error", all[len(all)-1])
	}

	// Only the hostname differs (the right image, another node's card).
	swapped.Close()
	other := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.21:" + port, Hostname: "talos-a1b-2c3", Schematic: builtinSchematic(t, "controlplane")})
	code, _, stderr = cliRun(t, "apply", "--inventory", inv, "--hostname", "cp-1", "--port", port, "--wait", "10s")
	if code != contract.ExitConfig || !strings.Contains(stderr, `says it is "talos-a1b-2c3"`) || len(sentConfigs(other)) != 0 {
		t.Fatalf("hostname mismatch: exit %d: %s", code, stderr)
	}

	// Nobody there: bounded wait, network exit code.
	other.Close()
	code, _, stderr = cliRun(t, "apply", "--inventory", inv, "--hostname", "cp-1", "--port", port, "--wait", "1s")
	if code != contract.ExitNetwork || !strings.Contains(stderr, "cp-1 · waiting at 127.0.0.21") || !strings.Contains(stderr, "no Talos node answered") {
		t.Fatalf("nobody: exit %d: %s", code, stderr)
	}
}

// Hostnames are compared ignoring case: a node named twice, in two cases,
// is one node, applied once.
func TestInventoryApplyHostnameOnceIgnoringCase(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	w1 := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.22:" + port, Hostname: "worker-1", Schematic: builtinSchematic(t, "worker")})
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--hostname", "worker-1", "--hostname", "WORKER-1", "--port", port, "--wait", "10s", "--json")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if evs := nodeEvents(t, stdout); len(evs) != 1 || evs[0]["status"] != "applied" {
		t.Fatalf("node events %v, want worker-1 applied once", evs)
	}
	if n := len(sentConfigs(w1)); n != 1 {
		t.Fatalf("worker-1 was sent %d configs, want 1", n)
	}
}

// An inventory node named by an FQDN (worker-1.lan): its card says
// worker-1.lan, and the node booted from it reports it as Talos splits it
// (hostname worker-1, domainname lan). apply --inventory takes it for that
// node; a node of another domain at the address is refused; a short
// inventory name matches any domain.
func TestInventoryApplyFQDN(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	b, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inv, bytes.Replace(b, []byte("hostname: worker-1\n"), []byte("hostname: worker-1.lan\n"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	var card string
	if os.Geteuid() == 0 {
		card = imagetest.LoopDevice(t, fx.Size+(1<<20), false)
	} else {
		card = filepath.Join(dir, "worker-1.img")
		if err := os.WriteFile(card, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := cliRun(t, "--flash", "--inventory", inv, "--yes", "--allow-loop", "--format", "xz", "--factory", srv.URL,
		"--cache-dir", filepath.Join(dir, "cache"), "--hostname", "worker-1.lan", "--device", card)
	if code != contract.ExitOK {
		t.Fatalf("flash: exit %d: %s", code, stderr)
	}
	checkNodeCard(t, card, fx, "worker-1.lan", "127.0.0.22/8", "worker", workerID)

	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	fake := nodetest.Start(t, nodetest.Options{Card: card, Addr: "127.0.0.1:" + port, Schematic: builtinSchematic(t, "worker")})
	n, err := node.Probe(t.Context(), fake.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if n.Hostname != "worker-1" || n.Domainname != "lan" {
		t.Fatalf("the node reports hostname %q domainname %q, want worker-1 and lan as Talos splits them", n.Hostname, n.Domainname)
	}
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--hostname", "worker-1.lan", "--port", port, "--wait", "30s")
	if code != contract.ExitOK || len(sentConfigs(fake)) != 1 {
		t.Fatalf("apply --inventory worker-1.lan: exit %d, %d configs sent: %s\n%s", code, len(sentConfigs(fake)), stderr, stdout)
	}

	// Another domain at the address: not that node.
	other := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.22:" + strconv.Itoa(testkit.FreePort(t, "127.0.0.22")), Hostname: "WORKER-1.home", Schematic: builtinSchematic(t, "worker")})
	_, p, _ := net.SplitHostPort(other.Addr())
	code, _, stderr = cliRun(t, "apply", "--inventory", inv, "--hostname", "worker-1.lan", "--port", p, "--wait", "10s")
	if code != contract.ExitConfig || !strings.Contains(stderr, `says it is "WORKER-1.home"`) || len(sentConfigs(other)) != 0 {
		t.Fatalf("another domain: exit %d: %s", code, stderr)
	}

	// A short inventory name (worker-2) and a node with a domain: the same
	// node, case-insensitively.
	w2 := nodetest.Start(t, nodetest.Options{Addr: "127.0.0.23:" + p, Hostname: "Worker-2.home", Schematic: builtinSchematic(t, "worker")})
	code, _, stderr = cliRun(t, "apply", "--inventory", inv, "--hostname", "worker-2", "--port", p, "--wait", "10s")
	if code != contract.ExitOK || len(sentConfigs(w2)) != 1 {
		t.Fatalf("short name: exit %d: %s", code, stderr)
	}
}

// What talosflash could not check in a config (the documents newer than
// its machinery) is said once per run, per config file, naming the nodes
// it went to: not once per node (two workers share worker.yaml), and not
// at all when every node is skipped (they all have a config).
func TestInventoryApplyConfigNotesOncePerRun(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	port := strconv.Itoa(testkit.FreePort(t, "127.0.0.21", "127.0.0.22", "127.0.0.23"))
	for i, h := range testkit.Hostnames {
		role := "worker"
		if i == 0 {
			role = "controlplane"
		}
		nodetest.Start(t, nodetest.Options{Addr: testkit.Inventory{}.IPs()[i] + ":" + port, Hostname: h, Schematic: builtinSchematic(t, role), BootConfig: true})
	}
	code, _, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "30s")
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	newer := regexp.MustCompile(`(?m)^note: (\S+) \(([^)]*)\): \d+ documents are newer than Talos machinery v1.13: not checked here; the node checks them in its dry run$`)
	got := newer.FindAllStringSubmatch(stderr, -1)
	if len(got) != 2 || !strings.HasSuffix(got[0][1], "talos/controlplane.yaml") || got[0][2] != "cp-1" || !strings.HasSuffix(got[1][1], "talos/worker.yaml") || got[1][2] != "worker-1, worker-2" {
		t.Fatalf("notes %q, want one per config naming its nodes:\n%s", got, stderr)
	}
	if n := strings.Count(stderr, "newer than Talos machinery"); n != 2 || strings.Contains(stderr, "KubeletConfig") {
		t.Fatalf("%d notes of unchecked documents, want 2 (one line per config, no list of kinds):\n%s", n, stderr)
	}
	if i, j := strings.Index(stderr, "note: "+dir), strings.LastIndex(stderr, "worker-2 · "); i < j {
		t.Fatalf("the notes come before the last node's turn:\n%s", stderr)
	}

	// Again: every node has its config now, each is skipped, no note.
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "30s")
	if code != contract.ExitOK || strings.Count(stdout+stderr, "skipped") != 3 || strings.Contains(stderr, "newer than Talos machinery") {
		t.Fatalf("second run: exit %d:\n%s%s", code, stdout, stderr)
	}
}
