package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The built-in roles' schematic IDs.
var (
	cpID, _     = factory.BuiltinProfiles()[0].SchematicID()
	workerID, _ = factory.BuiltinProfiles()[1].SchematicID()
)

var (
	talosFixtureOnce sync.Once
	talosFixture     *imagetest.Fixture
)

// talosFactory serves an image with a Talos partition table (a blank META
// a node can be written into) for both built-in roles.
func talosFactory(t *testing.T) (*factorytest.Server, *imagetest.Fixture) {
	t.Helper()
	talosFixtureOnce.Do(func() { talosFixture = imagetest.NewTalos(t, imageSize, 11, 1<<20) })
	if talosFixture == nil {
		t.Fatal("Talos image fixture failed")
	}
	srv := factorytest.New(t)
	for _, p := range factory.BuiltinProfiles() {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", talosFixture.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", talosFixture.Zstd(t))
	}
	return srv, talosFixture
}

// checkNodeCard checks that card holds the image byte for byte outside its
// META partition, and in META (read as Talos boots it, nodetest's own ADV
// reader) the node's address and hostname and talosflash's record.
func checkNodeCard(t *testing.T, card string, fx *imagetest.Fixture, hostname, addr, profile, schematic string) {
	t.Helper()
	booted, err := nodetest.ReadCardAtBoot(card)
	if err != nil {
		t.Fatalf("%s: %v", card, err)
	}
	if booted.Hostname != hostname || booted.Address != netip.MustParsePrefix(addr) || booted.Link != "end0" ||
		booted.Gateway != netip.MustParseAddr("127.0.0.1") || booted.METACopy != 1 {
		t.Fatalf("%s boots as %+v, want %s at %s", card, booted, hostname, addr)
	}
	if booted.Record == nil || booted.Record.Hostname != hostname || booted.Record.Profile != profile || booted.Record.Schematic != schematic {
		t.Fatalf("%s: talosflash record %+v", card, booted.Record)
	}
	f, err := os.Open(card)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, fx.Size)
	if _, err := io.ReadFull(f, got); err != nil {
		t.Fatal(err)
	}
	tab, err := gpt.Read(bytes.NewReader(fx.Raw), fx.Size)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := tab.Find("META")
	if !bytes.Equal(got[:m.Offset], fx.Raw[:m.Offset]) || !bytes.Equal(got[m.Offset+m.Size:], fx.Raw[m.Offset+m.Size:]) {
		t.Fatalf("%s: outside META the card differs from the image", card)
	}
	if bytes.Equal(got[m.Offset:m.Offset+m.Size], fx.Raw[m.Offset:m.Offset+m.Size]) {
		t.Fatalf("%s: META unchanged", card)
	}
}

// Two workers from one download: each card is the image plus its node's
// META, said so on the terminal and in --json.
func TestFlashInventoryNodes(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	cards := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")}
	code, stdout, stderr := cliRun(t, "--flash", "--inventory", inv, "--hostname", "worker-1", "--hostname", "worker-2",
		"--device", cards[0], "--device", cards[1], "--yes", "--create-file", "--json", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	if srv.BytesServed() != int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes, want one download of %d", srv.BytesServed(), len(fx.XZ))
	}
	checkNodeCard(t, cards[0], fx, "worker-1", "127.0.0.22/8", "worker", workerID)
	checkNodeCard(t, cards[1], fx, "worker-2", "127.0.0.23/8", "worker", workerID)
	results := map[string]string{}
	for _, ev := range jsonEvents(t, stdout) {
		if ev["event"] == "result" {
			results[ev["device"].(string)] = ev["node"].(string) + " " + ev["address"].(string)
		}
	}
	if results[cards[0]] != "worker-1 127.0.0.22/8" || results[cards[1]] != "worker-2 127.0.0.23/8" {
		t.Fatalf("results %v", results)
	}
	all := stderr // the human lines
	for _, want := range []string{"Card ready: worker-1, 127.0.0.22/8 (label it worker-1)", "Card ready: worker-2, 127.0.0.23/8 (label it worker-2)", "apply --inventory"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in %s", want, all)
		}
	}

	// The terminal says it too; from the cache, the control plane's card.
	cp := filepath.Join(dir, "cp.img")
	code, _, stderr = cliRun(t, "--flash", "--inventory", inv, "--hostname", "cp-1", "--device", cp, "--yes", "--create-file", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitOK || !strings.Contains(stderr, "Card ready: cp-1, 127.0.0.21/8 (label it cp-1)") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkNodeCard(t, cp, fx, "cp-1", "127.0.0.21/8", "controlplane", cpID)
	if booted, _ := nodetest.ReadCardAtBoot(cp); booted.Record.Schematic != cpID {
		t.Fatalf("cp-1's card records schematic %s, want the control plane's %s", booted.Record.Schematic, cpID)
	}

	// `card` reports the node and the image from the record.
	code, out, stderr := cliRun(t, "card", cp)
	if code != contract.ExitOK || !strings.Contains(out, "cp-1") || !strings.Contains(out, cpID) {
		t.Fatalf("card: exit %d: %s %s", code, out, stderr)
	}
}

// Without an inventory a Talos image card is exactly the image.
func TestFlashWithoutInventoryStaysTheImage(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--device", card, "--yes", "--create-file", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitOK || strings.Contains(stderr, "Card ready") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := imagetest.FileSHA256(t, card, fx.Size); got != fx.SHA256 {
		t.Fatalf("card %s, image %s", got, fx.SHA256)
	}
}

// An image without a META partition is refused before the card is touched.
func TestFlashInventoryRefusesImageWithoutMETA(t *testing.T) {
	srv, _ := fakeFactory(t) // Raw's data: a GPT without META
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	card := filepath.Join(dir, "card.img")
	before := bytes.Repeat([]byte("untouched"), 1000)
	if err := os.WriteFile(card, before, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "--flash", "--inventory", inv, "--hostname", "worker-1", "--device", card, "--yes", "--create-file", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"))
	if code != contract.ExitImage || !strings.Contains(stderr, "cannot carry the node's network config") || !strings.Contains(stderr, "no card was touched") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(card); !bytes.Equal(after, before) {
		t.Fatal("the card was touched")
	}
}

func TestFlashInventoryUsage(t *testing.T) {
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--hostname", "worker-1", "--device", a}, contract.ExitUsage, "--hostname needs --inventory"},
		{[]string{"--inventory", inv, "--device", a}, contract.ExitUsage, "name each card's node with --hostname"},
		{[]string{"--inventory", inv, "--hostname", "worker-1", "--device", a, "--device", b}, contract.ExitUsage, "1 --hostname for 2 --device"},
		{[]string{"--inventory", inv, "--hostname", "worker-9", "--device", a}, contract.ExitUsage, "did you mean worker-1"},
		{[]string{"--inventory", inv, "--hostname", "worker-1", "--hostname", "worker-1", "--device", a, "--device", b}, contract.ExitUsage, "named twice"},
		{[]string{"--inventory", inv, "--hostname", "cp-1", "--hostname", "worker-1", "--role", "worker", "--device", a, "--device", b}, contract.ExitUsage, "but the role worker is one image: leave it out and each node gets its own image"},
		{[]string{"--inventory", inv, "--hostname", "worker-1", "--role", "controlplane", "--device", a}, contract.ExitUsage, "is the controlplane image (schematic 29a2fae6a7f0…); the inventory says worker-1 is a worker"},
		{[]string{"--inventory", filepath.Join(dir, "missing.yaml"), "--hostname", "worker-1", "--device", a}, contract.ExitUsage, "inventory init"},
	} {
		args := append([]string{"--flash", "--yes", "--create-file", "--factory", "http://127.0.0.1:1"}, c.args...)
		code, _, stderr := cliRun(t, args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", c.args, code, c.code, c.want, stderr)
		}
		if _, err := os.Stat(a); err == nil {
			t.Fatalf("%v: a card was written", c.args)
		}
	}
}

// Through the elevated child: the parent passes the node's values (never
// the inventory's path), the child writes them after the verify and
// reports the node; the parent's plan.Card carries it. A child that did
// not write the node fails the card.
func TestFlashInventoryElevatedRoundTrip(t *testing.T) {
	_, fx := talosFactory(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	invPath := testkit.Inventory{Configs: true}.Write(t, dir)
	inv, err := inventory.Load(invPath, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w1 := inv.Nodes[1]
	w2 := inv.Nodes[2]
	im := plan.FromFile(img)
	m1, err := plan.NodeCardMeta(w1, im)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := plan.NodeCardMeta(w2, im)
	devs := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")}
	var childArgs []string
	job := plan.Job{
		Image: im, Devices: devs, Meta: []*plan.CardMeta{m1, m2},
		NeedsElevation: func(string) bool { return true },
		Elevate:        realChild(&childArgs),
	}
	res, err := plan.Flash(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(childArgs, " "), invPath) || !strings.Contains(strings.Join(childArgs, " "), "--node-meta") {
		t.Fatalf("child args %q", childArgs)
	}
	for i, c := range res.Cards {
		if c.Err != nil || job.CardMeta(i).Node != []string{"worker-1", "worker-2"}[i] {
			t.Fatalf("card %d: %+v", i, c)
		}
	}
	// A local file of unknown content: no schematic known, and no profile
	// claimed (the record says what was written, not what was expected).
	checkNodeCard(t, devs[0], fx, "worker-1", "127.0.0.22/8", "", "")
	checkNodeCard(t, devs[1], fx, "worker-2", "127.0.0.23/8", "", "")

	// A child that wrote only the image (its output without node fields).
	plain := filepath.Join(dir, "plain.out")
	code, out, _ := childRun(t, elevate.Args{Devices: devs}, img)
	if code != contract.ExitOK {
		t.Fatal(code)
	}
	if err := os.WriteFile(plain, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	job.Elevate = func([]string) (*exec.Cmd, error) { // reads the image it is sent, then says what that child said
		return exec.Command("sh", "-c", fmt.Sprintf("head -c %d >/dev/null; cat %s", elevate.StreamLength(fx.Size), plain)), nil
	}
	res, err = plan.Flash(context.Background(), job)
	if err == nil || res == nil || res.Cards[0].Err == nil || !strings.Contains(res.Cards[0].Err.Error(), "not written onto the card") {
		t.Fatalf("plain child accepted: %+v %v", res, err)
	}
}

// Three loop devices (root): each boots as its node.
func TestFlashInventoryLoopDevices(t *testing.T) {
	srv, fx := talosFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	args := []string{"--flash", "--inventory", inv, "--hostname", "worker-1", "--hostname", "worker-2", "--allow-loop", "--yes", "--format", "zst", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
	var loops []string
	for range 2 {
		l := imagetest.LoopDevice(t, fx.Size+(1<<20), false)
		loops = append(loops, l)
		args = append(args, "--device", l)
	}
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkNodeCard(t, loops[0], fx, "worker-1", "127.0.0.22/8", "worker", workerID)
	checkNodeCard(t, loops[1], fx, "worker-2", "127.0.0.23/8", "worker", workerID)
}
