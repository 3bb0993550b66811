package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

// evilText clears the screen, forges a line and reverses what follows.
const evilText = "\x1b[2J\x1b[HNode: evil\u202e"

// hostileCard is a Talos card whose every string a crafted card can set
// holds evilText: a partition name, and each string of the node's network
// config (META 0x0a) and of talosflash's record (META 0x0e).
func hostileCard(t *testing.T) string {
	t.Helper()

	path := testkit.TalosCard(t, "evil.img", imagetest.Part{Name: evilText, Size: 1 << 20})

	network, _ := json.Marshal(map[string]any{ // JSON is YAML
		"hostnames": []map[string]string{{"hostname": evilText, "domainname": evilText}},
		"addresses": []map[string]string{{"address": "192.168.1.21/24", "linkName": evilText}},
		"routes":    []map[string]string{{"gateway": "192.168.1.1"}},
		"resolvers": []map[string]any{{"dnsServers": []string{"192.168.1.1"}}},
	})
	record, _ := json.Marshal(map[string]string{"format": inventory.RecordFormat, "schematic": evilText, "talosVersion": evilText, "profile": evilText, "hostname": evilText})

	if _, err := meta.WriteTagsPath(path, []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: network}, {Key: inventory.RecordKey, Value: record}}); err != nil {
		t.Fatal(err)
	}

	return path
}

// assertShownText fails if s holds a control character other than newline
// and tab, or a bidi or other invisible format character.
func assertShownText(t *testing.T, what, s string) {
	t.Helper()

	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			t.Errorf("%s holds control character %U:\n%q", what, r, s)
			return
		case r >= 0x200b && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0xfeff || r == 0x2028 || r == 0x2029:
			t.Errorf("%s holds format character %U:\n%q", what, r, s)
			return
		}
	}
}

// Everything `card` prints that a card said is escaped: no forged line,
// no screen cleared; JSON carries the data as it is.
func TestCardEscapesWhatTheCardSays(t *testing.T) {
	path := hostileCard(t)

	code, stdout, stderr := cliRun(t, "card", path)
	if code != contract.ExitOK {
		t.Fatalf("card: %d %q\n%s", code, stderr, stdout)
	}

	assertShownText(t, "card output", stdout+stderr)

	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "Node: evil") {
			t.Errorf("a forged line: %q", line)
		}
	}

	for _, want := range []string{`\x1b[2J\x1b[HNode: evil\u202e`, "Label it: " + `\x1b[2J`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	_, jsonOut, _ := cliRun(t, "card", "--json", path)

	var out cardJSON
	if err := json.Unmarshal(answer(t, jsonOut, "card"), &out); err != nil {
		t.Fatal(err)
	}

	if out.Node == nil || out.Node.Interface != evilText || out.Record == nil || out.Record.Profile != evilText {
		t.Errorf("JSON does not carry the data as it is: %+v", out)
	}
}

// inventory check shows the file's values escaped, in its problems and in
// its table; so does any error a command ends with.
func TestInventoryCheckEscapesTheFilesValues(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	b, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}

	good := strings.Replace(string(b), "cluster: home", `cluster: "home\e[2J\u202e"`, 1)
	if err := os.WriteFile(inv, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cliRun(t, "inventory", "check", inv)
	if code != contract.ExitOK || !strings.Contains(stdout, `home\x1b[2J\u202e`) {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	assertShownText(t, "inventory check", stdout+stderr)

	bad := strings.Replace(good, "config: talos/worker.yaml", `config: "talos/\e[2J\nNode: evil\u202e.yaml"`, 1)
	if err := os.WriteFile(inv, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"inventory", "check", inv}, {"apply", "--inventory", inv, "--dry-run"}} {
		code, stdout, stderr = cliRun(t, args...)
		if code != contract.ExitConfig || !strings.Contains(stderr, `talos/\x1b[2J`) || !strings.Contains(stderr, `evil\u202e.yaml`) {
			t.Fatalf("%v: exit %d: %s%s", args, code, stdout, stderr)
		}
		assertShownText(t, args[0], stdout+stderr)
	}
}
