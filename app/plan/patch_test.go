package plan

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// patch --inventory patches the inventory's node only: another node
// answering at its address (it says another hostname) is refused before
// its config is patched, nothing sent, as apply --inventory and the
// rolling upgrade refuse it.
func TestPatchRefusesAnotherNodeAtTheAddress(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	workerCfg, err := os.ReadFile("../../node/testdata/talos114/valid/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[1].Schematic(), Worker: true, Hostname: "worker-1", Config: workerCfg})
	tc := rolloutTalosconfig(t, pki)
	job := func(host string) PatchJob {
		return PatchJob{Node: testMember(t, host, node.RoleUnknown, "", n.Addr()), Talosconfig: tc, DryRun: true,
			Patches: [][]byte{[]byte("machine:\n    certSANs:\n        - cp.example.com\n")}, Wait: node.WaitOptions{Timeout: 5 * time.Second, CallTimeout: 5 * time.Second}}
	}
	_, err = Patch(context.Background(), job("cp-1"))
	if !errors.Is(err, node.ErrOtherNode) || !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), `says it is "worker-1", not cp-1`) {
		t.Fatalf("patch for cp-1 at worker-1: %v", err)
	}
	if len(n.ConfigApplies()) != 0 {
		t.Fatalf("sent %d configs", len(n.ConfigApplies()))
	}
	if out, err := Patch(context.Background(), job("WORKER-1")); err != nil || out.Verdict == nil || len(n.ConfigApplies()) != 1 {
		t.Fatalf("patch for worker-1: %v (%d sent)", err, len(n.ConfigApplies()))
	}
}

// Newt's document replaced by one that drops a variable Newt needs (a
// delete in disguise: the tunnel goes down) is refused like its delete,
// nothing sent; the whole environment goes through.
func TestPatchRefusesNewtConfigCut(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cpCfg, err := os.ReadFile("../../node/testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[0].Schematic(), Bootstrapped: true, Hostname: "cp-1", Config: cpCfg})
	tc := rolloutTalosconfig(t, pki)
	head := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n    - PANGOLIN_ENDPOINT=https://pangolin2.example.net\n"
	job := func(doc string) PatchJob {
		return PatchJob{Node: testMember(t, "cp-1", node.RoleControlPlane, "", n.Addr()), Talosconfig: tc, DryRun: true,
			Replace: []node.Replacement{{Kind: "ExtensionServiceConfig", Name: "newt", Document: []byte(doc)}},
			Wait:    node.WaitOptions{Timeout: 5 * time.Second, CallTimeout: 5 * time.Second}}
	}
	_, err = Patch(context.Background(), job(head))
	var ob *ObligationError
	if !errors.As(err, &ob) || !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), "does not set NEWT_ID, NEWT_SECRET") || strings.Contains(err.Error(), "pangolin2") {
		t.Fatalf("the cut environment: %v", err)
	}
	if len(n.ConfigApplies()) != 0 {
		t.Fatalf("sent %d configs", len(n.ConfigApplies()))
	}
	if _, err := Patch(context.Background(), job(head+"    - NEWT_ID=n3wt1d0000000043\n    - NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp2\n")); err != nil || len(n.ConfigApplies()) != 1 {
		t.Fatalf("the whole environment: %v (%d sent)", err, len(n.ConfigApplies()))
	}
}

// A patch that gives a node an ExtensionServiceConfig for an extension
// its image lacks (patch --inventory of Newt's document, reaching the
// workers too) says so for that node: the document (and the secrets in
// it) does nothing there.
func TestPatchSaysADocumentIsUnused(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	workerCfg, err := os.ReadFile("../../node/testdata/talos114/valid/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[1].Schematic(), Worker: true, Hostname: "worker-1", Config: workerCfg})
	doc := "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n    - PANGOLIN_ENDPOINT=https://p.example.net\n    - NEWT_ID=n3wt1d\n    - NEWT_SECRET=N3wS3cr3tQq\n"
	var seen []string
	out, err := Patch(context.Background(), PatchJob{Node: testMember(t, "worker-1", node.RoleWorker, "", n.Addr()), Talosconfig: rolloutTalosconfig(t, pki), DryRun: true,
		Replace: []node.Replacement{{Kind: "ExtensionServiceConfig", Name: "newt", Document: []byte(doc)}},
		Wait:    node.WaitOptions{Timeout: 5 * time.Second, CallTimeout: 5 * time.Second},
		Event: func(ev PatchEvent) {
			if ev.Kind == PatchEventFinding {
				seen = append(seen, ev.Finding.Code)
			}
		}})
	if err != nil || len(out.Findings) != 1 || out.Findings[0].Code != node.CodeExtensionConfigUnused || len(seen) != 1 || strings.Contains(out.Findings[0].Message, "N3wS3cr3tQq") {
		t.Fatalf("%v: findings %+v, events %v", err, out.Findings, seen)
	}
}
