package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// A --replace-document whose Newt document lacks NEWT_SECRET is refused
// (nothing sent, exit 7) in words that fit what was given: the finding
// is an error, not a "warning:" (it refuses the change), and the advice
// is to complete the file given, not to use the --replace-document just
// used (issue 39).
func TestPatchReplaceRefusedSaysFixTheFile(t *testing.T) {
	pki := newTestPKI(t)
	tc, _ := talosconfigFile(t, pki, "os:admin")
	cfg, err := os.ReadFile("../../node/testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Hostname: "cp-1", Schematic: builtinSchematic(t, "controlplane"), Config: cfg, Bootstrapped: true})
	doc := testkit.WriteFile(t, t.TempDir(), "newt.yaml", "apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n    - PANGOLIN_ENDPOINT=https://pangolin2.example.net\n    - NEWT_ID=n3wt1d0000000043\n")
	code, stdout, stderr := cliRun(t, "patch", "--node", n.Addr(), "--talosconfig", tc, "--replace-document", "ExtensionServiceConfig/newt", doc)
	out := stdout + stderr
	if code != contract.ExitConfig || !strings.Contains(out, "refused, nothing was sent") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Contains(out, "warning: the ExtensionServiceConfig") || !strings.Contains(out, "error: the ExtensionServiceConfig \"newt\" does not set NEWT_SECRET") {
		t.Errorf("the refusing finding is not an error:\n%s", out)
	}
	if strings.Contains(out, "--replace-document") {
		t.Errorf("the refusal suggests the --replace-document just given:\n%s", out)
	}
	if !strings.Contains(stderr, "complete "+doc) {
		t.Errorf("the refusal does not say to fix %s:\n%s", doc, stderr)
	}
	for _, r := range n.ConfigApplies() {
		t.Fatalf("the node got an apply (dry run %v)", r.DryRun)
	}
}
