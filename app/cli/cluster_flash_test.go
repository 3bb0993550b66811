package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

var (
	cpFixtureOnce sync.Once
	cpFixture     *imagetest.Fixture
)

// clusterFactory serves two different Talos images: the control plane's
// (its schematic has Newt) and the workers' (talosFactory's image).
func clusterFactory(t *testing.T) (srv *factorytest.Server, cp, worker *imagetest.Fixture) {
	t.Helper()
	_, worker = talosFactory(t)
	cpFixtureOnce.Do(func() { cpFixture = imagetest.NewTalos(t, imageSize, 12, 1<<20) })
	if cpFixture == nil {
		t.Fatal("control plane image fixture failed")
	}
	if bytes.Equal(cpFixture.Raw, worker.Raw) {
		t.Fatal("the two images are the same")
	}
	srv = factorytest.New(t)
	for _, p := range factory.BuiltinProfiles() {
		fx := worker
		if p.Name == "controlplane" {
			fx = cpFixture
		}
		srv.AddImage(cpOrWorkerID(p.Name), p.Version(), "metal-arm64.raw.zst", fx.Zstd(t))
	}
	return srv, cpFixture, worker
}

func cpOrWorkerID(role string) string {
	if role == "controlplane" {
		return cpID
	}
	return workerID
}

// The whole cluster in one run, on loop devices (root): cp-1 from the
// control plane's image, worker-1 and worker-2 from the workers', each
// image downloaded once; each card is its own image byte for byte outside
// META and boots as its node (nodetest reads it as Talos does), no worker
// card holds the Newt image. A card too small for its image fails alone:
// its node's error line (text and JSON) and the per-node summary say so.
func TestFlashClusterLoopDevices(t *testing.T) {
	srv, cpFx, wFx := clusterFactory(t)
	dir := t.TempDir()
	inv := testkit.Inventory{Configs: true}.Write(t, dir)
	cache := filepath.Join(dir, "cache")
	cp := imagetest.LoopDevice(t, cpFx.Size+(1<<20), false)
	w1 := imagetest.LoopDevice(t, wFx.Size+(1<<20), false)
	w2 := imagetest.LoopDevice(t, wFx.Size+(1<<20), false)
	small := imagetest.LoopDevice(t, 2<<20, false)
	args := func(w2dev string, json bool) []string {
		a := []string{"--flash", "--inventory", inv, "--hostname", "cp-1", "--hostname", "worker-1", "--hostname", "worker-2",
			"--device", cp, "--device", w1, "--device", w2dev,
			"--allow-loop", "--yes", "--factory", srv.URL, "--cache-dir", cache}
		if json {
			a = append(a, "--json")
		}
		return a
	}

	// worker-2's card is too small: it fails, the others are written.
	code, stdout, stderr := cliRun(t, args(small, true)...)
	if code == contract.ExitOK || code == contract.ExitUsage {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	if got, want := srv.BytesServed(), int64(len(cpFx.Zstd(t))+len(wFx.Zstd(t))); got != want {
		t.Fatalf("served %d bytes, want each image once: %d", got, want)
	}
	checkNodeCard(t, cp, cpFx, "cp-1", "127.0.0.21/8", "controlplane", cpID)
	checkNodeCard(t, w1, wFx, "worker-1", "127.0.0.22/8", "worker", workerID)
	results, failed := map[string]string{}, map[string]string{}
	for _, ev := range jsonEvents(t, stdout) {
		switch {
		case ev["event"] == "result":
			results[ev["device"].(string)] = ev["node"].(string) + " " + ev["schematic"].(string)
		case ev["event"] == "error" && ev["device"] != nil:
			failed[ev["device"].(string)] = ev["node"].(string) + " " + ev["address"].(string)
		}
	}
	if results[cp] != "cp-1 "+cpID || results[w1] != "worker-1 "+workerID || len(results) != 2 {
		t.Fatalf("results %v", results)
	}
	if failed[small] != "worker-2 127.0.0.23/8" || len(failed) != 1 {
		t.Fatalf("card errors %v", failed)
	}
	summary := "nodes: cp-1 ready (" + cp + "), worker-1 ready (" + w1 + "), worker-2 FAILED (" + small + ")"
	for _, want := range []string{"worker-2 (" + small + "): FAILED: ", summary, "Card ready: cp-1, 127.0.0.21/8", "Card ready: worker-1, 127.0.0.22/8"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %q in\n%s", want, stderr)
		}
	}

	// Again with worker-2's own card, from the cache: no download.
	code, _, stderr = cliRun(t, args(w2, false)...)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, want := srv.BytesServed(), int64(len(cpFx.Zstd(t))+len(wFx.Zstd(t))); got != want {
		t.Fatalf("served %d bytes in all, want only the first run's %d", got, want)
	}
	checkNodeCard(t, cp, cpFx, "cp-1", "127.0.0.21/8", "controlplane", cpID)
	checkNodeCard(t, w1, wFx, "worker-1", "127.0.0.22/8", "worker", workerID)
	checkNodeCard(t, w2, wFx, "worker-2", "127.0.0.23/8", "worker", workerID)
	for _, w := range []string{w1, w2} {
		if booted, _ := nodetest.ReadCardAtBoot(w); booted.Record.Schematic == cpID {
			t.Fatalf("%s: a worker's card holds the control plane's (Newt) image", w)
		}
	}
	if want := "nodes: cp-1 ready (" + cp + "), worker-1 ready (" + w1 + "), worker-2 ready (" + w2 + ")"; !strings.Contains(stderr, want) {
		t.Fatalf("no %q in\n%s", want, stderr)
	}
}

// Through one elevated child (one password prompt): the parent decodes
// both images and sends them on the child's stdin at once; each card is
// its image with its node. An image that fails in the parent (corrupt
// data) fails its own cards only, with the parent's words for it.
func TestFlashClusterElevated(t *testing.T) {
	_, cpFx, wFx := clusterFactory(t)
	dir := t.TempDir()
	cpImg, wImg := filepath.Join(dir, "cp.raw.zst"), filepath.Join(dir, "worker.raw.zst")
	if err := os.WriteFile(cpImg, cpFx.Zstd(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wImg, wFx.Zstd(t), 0o600); err != nil {
		t.Fatal(err)
	}
	invPath := testkit.Inventory{Configs: true}.Write(t, dir)
	inv, err := inventory.Load(invPath, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cpIm, wIm := plan.FromFile(cpImg), plan.FromFile(wImg)
	var metas []*plan.CardMeta
	for i := range 3 { // cp-1, worker-1, worker-2
		n := inv.Nodes[i]
		m, err := plan.NodeCardMeta(n, []*plan.Image{cpIm, wIm, wIm}[i])
		if err != nil {
			t.Fatal(err)
		}
		metas = append(metas, m)
	}
	devs := []string{filepath.Join(dir, "cp.img"), filepath.Join(dir, "w1.img"), filepath.Join(dir, "w2.img")}
	var childArgs []string
	job := plan.Job{
		Image: cpIm, Images: []*plan.Image{cpIm, wIm, wIm}, Devices: devs, Meta: metas,
		NeedsElevation: func(string) bool { return true },
		Elevate:        realChild(&childArgs),
	}
	out, err := plan.Flash(context.Background(), job)
	if err != nil || !out.Elevated {
		t.Fatalf("%+v, %v", out, err)
	}
	for i, want := range []string{devs[0] + "=0", devs[1] + "=1", devs[2] + "=1"} {
		if j := slices.Index(childArgs, want); j < 1 || childArgs[j-1] != "--card-image" {
			t.Fatalf("card %d: child args %q", i, childArgs)
		}
	}
	checkNodeCard(t, devs[0], cpFx, "cp-1", "127.0.0.21/8", "", "")
	checkNodeCard(t, devs[1], wFx, "worker-1", "127.0.0.22/8", "", "")
	checkNodeCard(t, devs[2], wFx, "worker-2", "127.0.0.23/8", "", "")
	if out.Cards[0].SHA256 != cpFx.SHA256 || out.Cards[1].SHA256 != wFx.SHA256 {
		t.Fatalf("cards %+v", out.Cards)
	}

	// The workers' image corrupt halfway: their cards fail, cp-1's is written.
	z := bytes.Clone(wFx.Zstd(t))
	z[len(z)/2] ^= 0x55
	if err := os.WriteFile(wImg, z, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		os.Remove(d)
	}
	out, err = plan.Flash(context.Background(), job)
	var ce *plan.CardsError
	if !errors.As(err, &ce) || len(ce.Failed) != 2 || out == nil {
		t.Fatalf("%+v, %v", out, err)
	}
	for _, c := range out.Cards[1:] {
		if !errors.Is(c.Err, imaging.ErrCorruptImage) || c.OK() {
			t.Fatalf("worker card %s: %v", c.Target, c.Err)
		}
	}
	if !out.Cards[0].OK() {
		t.Fatalf("cp-1's card: %v", out.Cards[0].Err)
	}
	checkNodeCard(t, devs[0], cpFx, "cp-1", "127.0.0.21/8", "", "")
}
