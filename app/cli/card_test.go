package cli

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

// A card flashed and written for worker-1, carrying another key whose
// value must never be printed.
func writtenCard(t *testing.T) (string, string) {
	t.Helper()

	path := testkit.TalosCard(t, "card.img")

	secret := `{"keys":[{"static":{"passphrase":"c2VjcmV0LXBhc3NwaHJhc2UtZm9yLXRlc3Rz"}}]}`
	if _, err := meta.WriteTagPath(path, meta.StateEncryptionConfig, []byte(secret)); err != nil {
		t.Fatal(err)
	}

	n := inventory.Node{
		Hostname: "worker-1", Address: netip.MustParsePrefix("192.168.1.21/24"),
		Gateway: netip.MustParseAddr("192.168.1.1"), DNS: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, Interface: "end0",
	}
	if _, err := n.WriteCardPath(path); err != nil {
		t.Fatal(err)
	}

	return path, secret
}

func TestCardReadsNode(t *testing.T) {
	path, secret := writtenCard(t)

	code, stdout, stderr := cliRun(t, "card", path)
	if code != contract.ExitOK || stderr != "" {
		t.Fatalf("card: %d %q", code, stderr)
	}

	for _, want := range []string{
		"Partitions (GPT, primary and backup valid):",
		"  3  META",
		"Talos image: yes",
		"META: both copies valid; keys: 0x09 StateEncryptionConfig (",
		"0x0a MetalNetworkPlatformConfig (",
		"Node: worker-1, 192.168.1.21/24 via 192.168.1.1 on end0, DNS 192.168.1.1",
		"Label it: worker-1",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	_, jsonOut, _ := cliRun(t, "card", "--json", path)

	var out cardJSON
	if err := json.Unmarshal(answer(t, jsonOut, "card"), &out); err != nil {
		t.Fatal(err)
	}

	if !out.Talos || out.Node == nil || out.Node.Hostname != "worker-1" || out.Node.Address != "192.168.1.21/24" || out.META.Used != 1 || len(out.META.Keys) != 2 {
		t.Fatalf("json %+v", out)
	}

	for i := 0; i+12 <= len(secret); i++ {
		if strings.Contains(stdout+jsonOut, secret[i:i+12]) {
			t.Fatalf("a META value (%q) was printed", secret[i:i+12])
		}
	}
}

func TestCardBlankAndNotTalos(t *testing.T) {
	dir := t.TempDir()

	plain := testkit.TalosCard(t, "plain.img")

	code, stdout, _ := cliRun(t, "card", plain)
	if code != contract.ExitOK || !strings.Contains(stdout, "META: blank") || !strings.Contains(stdout, "Node: none written") {
		t.Fatalf("blank card: %d\n%s", code, stdout)
	}

	junk := filepath.Join(dir, "junk.img")
	if err := os.WriteFile(junk, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cliRun(t, "card", junk)
	if code != contract.ExitImage || !strings.Contains(stdout, "no GPT") || !strings.Contains(stderr, "does not hold a Talos image") {
		t.Fatalf("junk: %d\n%s\n%s", code, stdout, stderr)
	}

	if code, _, _ := cliRun(t, "card"); code != contract.ExitUsage {
		t.Fatalf("no argument: %d", code)
	}
}

// A card or image file that does not exist is the usage's mistake, exit 2
// as docs/JSON.md says (it was 5, a device refusal), with a line that says
// so, and the JSON error line carries that code.
func TestCardThatDoesNotExistIsUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexist.img")
	code, _, stderr := cliRun(t, "card", missing)
	if code != contract.ExitUsage || !strings.Contains(stderr, missing+" does not exist") || strings.Contains(stderr, "stat ") {
		t.Fatalf("exit %d, want %d: %s", code, contract.ExitUsage, stderr)
	}
	code, stdout, _ := cliRun(t, "card", "--json", missing)
	if ev := lastEvent(jsonEvents(t, stdout), "error"); code != contract.ExitUsage || ev == nil || ev["code"] != float64(contract.ExitUsage) {
		t.Fatalf("--json: exit %d: %s", code, stdout)
	}
}

// A real block device, read-only.
func TestCardLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}

	path, _ := writtenCard(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command("losetup", "-f", "--show", "-r", path).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}

	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })

	code, stdout, _ := cliRun(t, "card", dev)
	if code != contract.ExitOK || !strings.Contains(stdout, "Label it: worker-1") {
		t.Fatalf("card %s: %d\n%s", dev, code, stdout)
	}

	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("reading the card changed it")
	}
}

// A card flashed for worker-1, then re-flashed for another node and the
// write killed before it wrote the card's head (its first MiB still
// zeros): the backup GPT at the end and the META behind it are worker-1's.
// `card` says the flash was interrupted, never worker-1's label.
func TestCardInterruptedFlashIsIncomplete(t *testing.T) {
	path, _ := writtenCard(t)

	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cliRun(t, "card", path)
	if code != contract.ExitImage {
		t.Errorf("exit %d, want %d (contract.ExitImage)", code, contract.ExitImage)
	}
	if !strings.Contains(stdout, "incomplete: an interrupted flash; flash it again") || !strings.Contains(stderr, "incomplete: an interrupted flash; flash it again") {
		t.Errorf("does not say the flash was interrupted:\n%s\n%s", stdout, stderr)
	}
	for _, bad := range []string{"worker-1", "Talos image: yes", "Label it", "192.168.1.21"} {
		if strings.Contains(stdout+stderr, bad) {
			t.Errorf("reports %q from the earlier flash:\n%s%s", bad, stdout, stderr)
		}
	}

	code, jsonOut, _ := cliRun(t, "card", "--json", path)
	var out map[string]any
	if err := json.Unmarshal(answer(t, jsonOut, "card"), &out); err != nil {
		t.Fatal(err)
	}
	if code != contract.ExitImage || out["incomplete"] != true || out["talos_image"] != false || out["node"] != nil || out["meta"] != nil {
		t.Errorf("--json: exit %d, %v", code, out)
	}
}
