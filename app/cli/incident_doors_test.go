package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The incident refused at the first door that can see it (issue 37): a
// profiles file that replaces the built-in worker with one that adds Newt,
// and worker-1's config without Newt's ExtensionServiceConfig. `inventory
// check`, `--flash --inventory` and `apply --inventory` all fail the
// checks (exit 7) naming the node's and the config's lines, the document
// to add and the profile to fix, never the Newt image as the fix; no card
// is written, no node is sent anything.
func TestIncidentRefusedAtEveryDoor(t *testing.T) {
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	kit.Write(t, dir)
	testkit.WriteFile(t, dir, "profiles.yaml", "profiles:\n  - name: worker\n    overlay: {image: siderolabs/sbc-raspberrypi, name: rpi_generic}\n    extensions: [siderolabs/newt]\n")
	inv := testkit.WriteFile(t, dir, "talosflash.yaml", "profiles: profiles.yaml\n"+kit.YAML())
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	w1 := nodetest.Start(t, nodetest.Options{Addr: ips[1] + ":" + strconv.Itoa(port), Hostname: "worker-1"})
	card := filepath.Join(dir, "worker-1.img")

	for _, args := range [][]string{
		{"inventory", "check", inv},
		{"--flash", "--inventory", inv, "--hostname", "worker-1", "--device", card, "--create-file", "--yes", "--factory", "http://127.0.0.1:1"},
		{"apply", "--inventory", inv, "--port", strconv.Itoa(port), "--wait", "2s"},
	} {
		code, stdout, stderr := cliRun(t, args...)
		out := stdout + stderr
		if code != contract.ExitConfig {
			t.Fatalf("%v: exit %d, want %d:\n%s", args, code, contract.ExitConfig, out)
		}
		for _, want := range []string{
			"talosflash.yaml:10: node worker-1: its image (profile worker) has siderolabs/newt",
			"talosflash.yaml:13) has none",
			"add an ExtensionServiceConfig document named newt to " + filepath.Join(dir, "talos", "worker.yaml"),
			"remove siderolabs/newt from profile worker in " + filepath.Join(dir, "profiles.yaml"),
			"node worker-2:",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: does not say %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "profile worker (without") || strings.Contains(out, "e.g. the worker profile") {
			t.Errorf("%v: the fix names the Newt image:\n%s", args, out)
		}
	}
	if _, err := os.Stat(card); err == nil {
		t.Fatal("a card was written")
	}
	if n := len(w1.Requests()); n != 0 {
		t.Fatalf("worker-1 got %d requests", n)
	}
}
