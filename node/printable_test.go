package node_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/siderolabs/talos/pkg/machinery/extensions"

	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// assertPrintable fails if s holds a control or format character (terminal
// escapes, CR/LF that forge rows, bidi overrides) or is longer than max bytes.
func assertPrintable(t *testing.T, what, s string, max int) {
	t.Helper()
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s holds %U: %.80q", what, r, s)
			return
		}
	}
	if len(s) > max {
		t.Errorf("%s is %d bytes (max %d): %.80q", what, len(s), max, s)
	}
}

// A rogue device on the LAN answering as a Talos node: every string it
// reports is made printable and bounded at the source, and a version that
// does not look like one is not taken as one.
func TestProbeCleansWhatTheNodeReports(t *testing.T) {
	evil := "evil\x1b[2J\x1b[31mPWNED\x1b[0m\r\nfake-row\u202e\x9b" + strings.Repeat("x", 5000)
	srv := nodetest.Start(t, nodetest.Options{
		Hostname:     evil,
		TalosVersion: "v1.14.5\x1b[31m",
		Arch:         "arm64\x1b]0;title\x07",
		ExtensionStatuses: []extensions.Metadata{
			{Name: "newt\x1b[2K\r\nrow", Version: "v1"},
			{Name: strings.Repeat("long", 1000), Version: "v1"},
			{Name: "schematic", Version: "not-an-id\x1b[1m", ExtraInfo: "overlay:\n  image: \"siderolabs/sbc\\e[31m\"\n  name: rpi_generic\n"},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	assertPrintable(t, "hostname", n.Hostname, 256)
	if !strings.HasPrefix(n.Hostname, `evil\x1b[2J`) {
		t.Errorf("hostname not shown escaped: %.80q", n.Hostname)
	}
	if n.TalosVersion != "" || !strings.Contains(n.Note, "invalid Talos version") || !strings.Contains(n.InvalidVersion, `v1.14.5\x1b[31m`) {
		t.Errorf("version %q invalid %q note %q", n.TalosVersion, n.InvalidVersion, n.Note)
	}
	if n.Arch != "" {
		t.Errorf("arch %q", n.Arch)
	}
	assertPrintable(t, "note", n.Note, 1024)
	assertPrintable(t, "invalid version", n.InvalidVersion, 256)
	if n.Booted == nil {
		t.Fatal("no booted")
	}
	if n.Booted.SchematicID != "" || !strings.Contains(n.Note, "invalid schematic ID") {
		t.Errorf("schematic ID %q accepted", n.Booted.SchematicID)
	}
	assertPrintable(t, "overlay", n.Booted.Overlay, 256)
	if len(n.Booted.Extensions) != 2 {
		t.Fatalf("extensions %.80q", n.Booted.Extensions)
	}
	for _, e := range n.Booted.Extensions {
		assertPrintable(t, "extension", e, 256)
	}
	assertPrintable(t, "booted", n.Booted.String(), 2048)
}

// A plain node keeps its values untouched.
func TestProbeKeepsPlainValues(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Hostname: "talos-pi-1.lan", TalosVersion: "v1.15.0-alpha.1-12-gabcdef0"})
	n, err := node.Probe(context.Background(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if n.FQDN() != "talos-pi-1.lan" || n.TalosVersion != "v1.15.0-alpha.1-12-gabcdef0" || n.Arch != "arm64" || n.InvalidVersion != "" {
		t.Errorf("node %+v", n)
	}
}
