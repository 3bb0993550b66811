package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/client"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// Issue 41 on the user's cluster (three fakes booted from flashed cards):
// the rolling upgrade saves etcd beside the inventory before cp-1 moves
// (the dry run says where, and saves nothing); worker-1's new version
// fails to boot and Talos brings it back on v1.14.5: the rollout says
// "worker-1 rolled back to v1.14.5: its upgrade failed (...)", uncordons
// it and stops, worker-2 untouched. Then cp-1 is lost: a new card is
// flashed for it, its config applied, and bootstrap --recover-from brings
// the cluster's etcd back from that snapshot (docs/RECOVERY.md). No
// secret of the PKI, the configs or etcd on any output.
func TestUserStoryUndo(t *testing.T) {
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
	cp, w1, w2 := c.fakes["cp-1"].Node(), c.fakes["worker-1"].Node(), c.fakes["worker-2"].Node()
	api := cp.KubeAPI()
	cp.EtcdPut("/registry/secrets/default/newt", etcdSecret)
	run := func(args ...string) (int, string, string) {
		code, stdout, stderr := cliRun(t, args...)
		outputs = append(outputs, stdout, stderr)
		return code, stdout, stderr
	}
	// A snapshot by hand, from the inventory's control plane.
	backup := filepath.Join(c.dir, "backup.db")
	code, stdout, stderr := run("etcd", "snapshot", backup, "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc)
	if code != contract.ExitOK || !strings.Contains(stdout, "etcd snapshot of cp-1 saved to "+backup) || cp.EtcdSnapshots() != 1 {
		t.Fatalf("etcd snapshot --inventory: exit %d\n%s%s", code, stdout, stderr)
	}
	args := []string{"upgrade", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--to", to, "--factory", c.srv.URL,
		"--timeout", "30s", "--interval", "50ms", "--drain-timeout", "10s"}

	code, stdout, stderr = run(append(args, "--dry-run")...)
	if code != contract.ExitOK || !strings.Contains(stdout, "cp-1: would save an etcd snapshot of cp-1 to "+c.dir+string(filepath.Separator)+"etcd-") || cp.EtcdSnapshots() != 1 {
		t.Fatalf("dry run: exit %d, %d snapshots\n%s%s", code, cp.EtcdSnapshots(), stdout, stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(c.dir, "etcd-*")); len(m) != 0 {
		t.Fatalf("the dry run saved %v", m)
	}

	w1.FailUpgradedBoot(`service "kubelet": failed to start: the new kernel lacks a module`)
	code, stdout, stderr = run(append(args, "--json")...)
	if code != contract.ExitApply {
		t.Fatalf("upgrade: exit %d, want %d\n%s\n%s", code, contract.ExitApply, stdout, stderr)
	}
	evs := jsonEvents(t, stdout)
	snap := lastEvent(evs, contract.TypeEtcdSnapshot)
	if snap == nil || snap["taken"] != true || snap["hostname"] != "cp-1" || filepath.Dir(snap["path"].(string)) != c.dir {
		t.Fatalf("etcd_snapshot line %v\n%s", snap, stdout)
	}
	docRowHas(t, "| `etcd snapshot --json` |", snap)
	path := snap["path"].(string)
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the snapshot beside the inventory: %v", err)
	}
	var steps []string
	for _, ev := range evs {
		if ev["event"] == contract.TypeRolloutNode {
			steps = append(steps, ev["hostname"].(string)+" "+ev["step"].(string))
			if ev["hostname"] == "worker-1" && ev["cordoned"] != false {
				t.Errorf("worker-1 left cordoned: %v", ev)
			}
		}
	}
	if strings.Join(steps, ", ") != "cp-1 upgraded, worker-1 rolled-back, worker-2 untouched" {
		t.Fatalf("steps %q", steps)
	}
	for _, want := range []string{
		"worker-1 rolled back to v1.14.5: its upgrade failed (v1.14.6 did not boot, and Talos booted its previous installation again",
		"worker-1 (worker): rolled back to v1.14.5", "uncordoned",
		"worker-2 (worker): untouched: nothing was sent",
		"etcd snapshot of cp-1 saved to " + path,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the rollout does not say %q:\n%s", want, stderr)
		}
	}
	wkID, _ := factory.BuiltinProfiles()[1].SchematicID()
	if w1.RunningVersion() != nodetest.DefaultVersion || w1.RunningSchematicID() != wkID || w1.Reverts() != 1 || api.Unschedulable("worker-1") ||
		cp.RunningVersion() != to || len(w2.Pulled())+w2.Reboots() != 0 {
		t.Fatalf("worker-1 %s (%s), %d reverts, cordoned %v; cp-1 %s; worker-2 pulls %v", w1.RunningVersion(), w1.RunningSchematicID(), w1.Reverts(),
			api.Unschedulable("worker-1"), cp.RunningVersion(), w2.Pulled())
	}

	// cp-1's card dies: a new card flashed for it, its config applied,
	// etcd recovered from the snapshot.
	wantRev, wantKeys := cp.EtcdRevision()
	c.fakes["cp-1"].Close()
	card := filepath.Join(c.dir, "cp-1-new.img")
	if code, _, stderr := run("--flash", "--inventory", c.inv, "--hostname", "cp-1", "--device", card, "--create-file", "--yes", "--format", "xz",
		"--factory", c.srv.URL, "--cache-dir", filepath.Join(c.dir, "cache")); code != contract.ExitOK {
		t.Fatalf("flash: exit %d: %s", code, stderr)
	}
	fresh := nodetest.Start(t, nodetest.Options{Card: card, Addr: "127.0.0.1:" + c.port, Schematic: builtinSchematic(t, "controlplane"), BootConfig: true})
	if code, stdout, stderr := run("apply", "--inventory", c.inv, "--hostname", "cp-1", "--port", c.port, "--talosconfig", c.tc, "--wait", "30s", "--interval", "50ms"); code != contract.ExitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = run("bootstrap", "--node", fresh.Addr(), "--talosconfig", c.tc, "--recover-from", path, "--json")
	if code != contract.ExitOK {
		t.Fatalf("recover: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var line map[string]any
	if err := json.Unmarshal(answer(t, stdout, contract.TypeBootstrap), &line); err != nil {
		t.Fatal(err)
	}
	n := fresh.Node()
	if v, ok := n.EtcdGet("/registry/secrets/default/newt"); !ok || v != etcdSecret || line["etcd_healthy"] != true {
		t.Fatalf("recovered: %v %v; line %v", v, ok, line)
	}
	if rev, keys := n.EtcdRevision(); rev != wantRev || keys != wantKeys {
		t.Fatalf("recovered revision %d, %d keys; the snapshot's %d, %d", rev, keys, wantRev, wantKeys)
	}
	assertNoFragments(t, append(c.secrets, "S3cr3tInEtcd42"), outputs...)
	assertNoPEM(t, outputs...)
}
