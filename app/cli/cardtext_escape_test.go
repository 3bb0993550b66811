package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/inventory"
)

// nulText holds a NUL, an ESC sequence and a bidi override.
const nulText = "w\x00rker\x1b[31m\u202e1"

// A card without META whose partition names are hostile: the partitions
// and the refusal that names them are shown escaped (the refusal escaped
// where it is made, imaging/meta), JSON carries the names as they are.
func TestCardEscapesPartitionNamesInItsNotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evil.img")
	if _, err := imagetest.WriteGPTDisk(path, 16<<20, []imagetest.Part{{Name: "EFI", Size: 1 << 20}, {Name: evilText, Size: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cliRun(t, "card", path)
	if code != contract.ExitImage {
		t.Fatalf("card: exit %d, want %d: %s%s", code, contract.ExitImage, stdout, stderr)
	}
	assertShownText(t, "card output", stdout+stderr)
	if !strings.Contains(stdout, `Note: no partition labelled META (partitions: "EFI", "\x1b[2J\x1b[HNode: evil\u202e")`) {
		t.Errorf("the note does not name the partitions escaped:\n%s", stdout)
	}
	_, jsonOut, _ := cliRun(t, "card", "--json", path)
	var out cardJSON
	if err := json.Unmarshal(answer(t, jsonOut, "card"), &out); err != nil {
		t.Fatal(err)
	}
	if out.Table == nil || len(out.Table.Partitions) != 2 || out.Table.Partitions[1].Name != evilText {
		t.Fatalf("JSON does not carry the name as it is: %+v", out.Table)
	}
	for _, p := range out.Problems {
		if strings.ContainsAny(p, "\x1b\u202e") {
			t.Errorf("a problem (a message) holds the raw name: %q", p)
		}
	}
}

// META strings with a NUL, ESC and a bidi override: escaped in text (the
// node's interface, talosflash's record), raw in JSON.
func TestCardEscapesNULInMETAStrings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "card.img")
	if _, err := imagetest.WriteGPTDisk(path, 16<<20, imagetest.TalosParts()); err != nil {
		t.Fatal(err)
	}
	network, _ := json.Marshal(map[string]any{ // JSON is YAML
		"hostnames": []map[string]string{{"hostname": "node1"}},
		"addresses": []map[string]string{{"address": "192.168.1.21/24", "linkName": nulText}},
	})
	record, _ := json.Marshal(map[string]string{"format": inventory.RecordFormat, "profile": nulText, "hostname": nulText})
	if _, err := meta.WriteTagsPath(path, []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: network}, {Key: inventory.RecordKey, Value: record}}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cliRun(t, "card", path)
	if code != contract.ExitOK {
		t.Fatalf("card: exit %d: %s%s", code, stdout, stderr)
	}
	assertShownText(t, "card output", stdout+stderr)
	if !strings.Contains(stdout, `w\x00rker\x1b[31m\u202e1`) {
		t.Errorf("output lacks the escaped string:\n%s", stdout)
	}
	_, jsonOut, _ := cliRun(t, "card", "--json", path)
	var out cardJSON
	if err := json.Unmarshal(answer(t, jsonOut, "card"), &out); err != nil {
		t.Fatal(err)
	}
	if out.Node == nil || out.Node.Interface != nulText || out.Record == nil || out.Record.Profile != nulText {
		t.Fatalf("JSON does not carry the data as it is: node %+v record %+v", out.Node, out.Record)
	}

}
