package plan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// failingTarget fails every write: a card pulled out at once.
type failingTarget struct{ *os.File }

func (failingTarget) Write([]byte) (int, error)          { return 0, syscall.EIO }
func (failingTarget) WriteAt([]byte, int64) (int, error) { return 0, syscall.EIO }

// Job.Devices in process: one download, every card its own result; the
// failing one is a CardsError that unwraps to its failure.
func TestFlashSeveralDevicesInProcess(t *testing.T) {
	srv := factorytest.New(t)
	fx := imagetest.New(t, 1<<20, 6, 1<<20)
	id, _ := profile(t, "worker").SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	dir := t.TempDir()
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if err != nil {
		t.Fatal(err)
	}
	devs := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "pulled.img"), filepath.Join(dir, "c.img")}
	var targets []string
	out, err := Flash(context.Background(), Job{Image: im, Devices: devs, Cache: &imaging.Cache{Dir: filepath.Join(dir, "cache")}, Factory: c,
		Open: func(path string, size int64) (imaging.Target, error) {
			t, err := imaging.OpenFile(path, size)
			if err == nil && filepath.Base(path) == "pulled.img" {
				return failingTarget{t.(*os.File)}, nil
			}
			return t, err
		},
		Progress: func(p imaging.Progress) {
			if p.Stage == imaging.StageDone {
				targets = append(targets, p.Target)
			}
		}})
	var ce *CardsError
	if !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Total != 3 || ce.Failed[0].Target != devs[1] || !errors.Is(err, imaging.ErrIncomplete) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("err %v, want one failed card (EIO)", err)
	}
	if out == nil || len(out.Cards) != 3 || out.Cards[0].SHA256 != fx.SHA256 {
		t.Fatalf("outcome %+v", out)
	}
	for _, i := range []int{0, 2} {
		if c := out.Cards[i]; c.Err != nil || !c.Verified || imagetest.FileSHA256(t, devs[i], int64(len(fx.Raw))) != fx.SHA256 {
			t.Fatalf("card %s: %+v %v", devs[i], c, c.Err)
		}
	}
	slices.Sort(targets)
	if !slices.Equal(targets, []string{devs[0], devs[2]}) {
		t.Fatalf("done reports for %q", targets)
	}
	if n := srv.BytesServed(); n != int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes, want one download of %d", n, len(fx.XZ))
	}
}

// workerImage is the worker's image of workerFactory (1 MiB).
func workerImage(t *testing.T) *imagetest.Fixture { return imagetest.New(t, 1<<20, 3, 1<<20) }

// workerFactory is a fake factory serving the worker's image (the elevated
// tests' children are scripts: only the download is real).
func workerFactory(t *testing.T) *factorytest.Server {
	srv := factorytest.New(t)
	fx := workerImage(t)
	id, _ := profile(t, "worker").SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	return srv
}

// Several devices that need root: one child for all of them, each card's
// result or error relayed.
func TestFlashSeveralDevicesElevated(t *testing.T) {
	srv := workerFactory(t)
	cache := &imaging.Cache{Dir: t.TempDir()}
	var args []string
	child := `echo '{"event":"progress","stage":"write","done":5,"total":10,"device":"/dev/sdy"}'
echo '{"event":"result","device":"/dev/sdy","bytes":@BYTES@,"sha256":"@SHA@","verified":true,"verify_mode":"O_DIRECT"}'
echo '{"event":"error","device":"/dev/sdz","code":6,"message":"write to target failed after 0 bytes: EIO"}'
echo '{"event":"error","code":6,"message":"1 of 2 cards failed"}'; exit 6`
	job, _ := elevatedJob(t, srv, cache, child, &args)
	job.Devices = []string{"/dev/sdy", "/dev/sdz"}
	var progress []imaging.Progress
	job.Progress = func(p imaging.Progress) { progress = append(progress, p) }
	out, err := Flash(context.Background(), job)
	if want := (elevate.Args{Devices: []string{"/dev/sdy", "/dev/sdz"}}).List(); !slices.Equal(args, want) {
		t.Fatalf("child args %q, want %q", args, want)
	}
	var ce *CardsError
	if !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Target != "/dev/sdz" || !errors.Is(err, imaging.ErrIncomplete) {
		t.Fatalf("err %v", err)
	}
	if out == nil || !out.Elevated || out.Cards[0].Err != nil || out.Cards[0].SHA256 != workerImage(t).SHA256 {
		t.Fatalf("outcome %+v", out)
	}
	if last := progress[len(progress)-1]; last.Target != "/dev/sdy" || last.Stage != imaging.StageWrite {
		t.Fatalf("progress %+v", progress)
	}
}

// One card through the child: its result counts whatever device path the
// child printed (it may resolve a symlink), as before several cards existed.
func TestFlashElevatedOneCardAnyDevicePath(t *testing.T) {
	srv := workerFactory(t)
	var args []string
	job, _ := elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, `echo '{"event":"result","device":"/dev/disk/by-id/usb-x","bytes":@BYTES@,"sha256":"@SHA@","verified":true}'`, &args)
	out, err := Flash(context.Background(), job)
	if err != nil || out.Cards[0].SHA256 != workerImage(t).SHA256 || len(out.Cards) != 1 || out.Cards[0].Target != "/dev/sdz" {
		t.Fatalf("%+v, %v", out, err)
	}
}

// One card is a list of one: the same Outcome.Cards as several, its
// failure a CardsError that reads as the card's own error (the CLI's
// message and exit code for one card are unchanged) and unwraps to it.
func TestFlashOneDeviceIsAListOfOne(t *testing.T) {
	fx := imagetest.New(t, 1<<20, 4, 1<<20)
	dir := t.TempDir()
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "pulled.img")
	out, err := Flash(context.Background(), Job{Image: FromFile(img), Devices: []string{dev},
		Open: func(path string, size int64) (imaging.Target, error) {
			t, err := imaging.OpenFile(path, size)
			if err != nil {
				return nil, err
			}
			return failingTarget{t.(*os.File)}, nil
		}})
	var ce *CardsError
	if !errors.As(err, &ce) || ce.Total != 1 || !errors.Is(err, syscall.EIO) || !errors.Is(err, imaging.ErrIncomplete) {
		t.Fatalf("err %v, want the card's EIO", err)
	}
	if out == nil || len(out.Cards) != 1 || out.Cards[0].Target != dev || out.Cards[0].OK() || err.Error() != out.Cards[0].Err.Error() {
		t.Fatalf("outcome %+v, err %q", out, err)
	}

	good := filepath.Join(dir, "card.img")
	out, err = Flash(context.Background(), Job{Image: FromFile(img), Devices: []string{good}, Safety: devices.Options{CreateFile: true}})
	if err != nil || len(out.Cards) != 1 || !out.Cards[0].OK() || !out.Cards[0].Verified || out.Cards[0].SHA256 != fx.SHA256 || imagetest.FileSHA256(t, good, int64(len(fx.Raw))) != fx.SHA256 {
		t.Fatalf("outcome %+v, %v", out, err)
	}
}

// Outcome.Notes names the card of each note only when there are several.
func TestOutcomeNotes(t *testing.T) {
	one := Outcome{Cards: []imaging.CardResult{{Target: "/dev/sdb", Notes: []string{"unmounted /media/u/boot before writing"}}}}
	if got := one.Notes(); !slices.Equal(got, []string{"unmounted /media/u/boot before writing"}) {
		t.Fatalf("one card: %q", got)
	}
	two := Outcome{Cards: []imaging.CardResult{{Target: "/dev/sdb", Notes: []string{"a"}}, {Target: "/dev/sdc"}, {Target: "/dev/sdd", Notes: []string{"b"}}}}
	if got := two.Notes(); !slices.Equal(got, []string{"/dev/sdb: a", "/dev/sdd: b"}) {
		t.Fatalf("several cards: %q", got)
	}
}

// Through the elevated child too, one card is a list of one: the child's
// error for the card (with its device) keeps the card in the Outcome, a
// CardsError that unwraps to the mapped error; a child that fails before
// any card (no device on its error) is the job's failure, no Outcome.
func TestFlashElevatedOneCardFailureIsItsCard(t *testing.T) {
	srv := workerFactory(t)
	var args []string
	job, _ := elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, `echo '{"event":"error","device":"/dev/disk/by-id/usb-x","code":4,"message":"verify: mismatch at offset 4096"}'
echo '{"event":"error","code":4,"message":"verify: mismatch at offset 4096"}'; exit 4`, &args)
	out, err := Flash(context.Background(), job)
	var ce *CardsError
	if !errors.As(err, &ce) || ce.Total != 1 || !errors.Is(err, imaging.ErrVerifyMismatch) {
		t.Fatalf("err %v (%T), want the card's verify mismatch as a CardsError", err, err)
	}
	if out == nil || len(out.Cards) != 1 || out.Cards[0].Target != "/dev/sdz" || out.Cards[0].OK() {
		t.Fatalf("outcome %+v", out)
	}

	job, _ = elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, `echo '{"event":"error","code":9,"message":"image is corrupt"}'; exit 9`, &args)
	out, err = Flash(context.Background(), job)
	if out != nil || !errors.Is(err, imaging.ErrCorruptImage) || errors.As(err, &ce) {
		t.Fatalf("outcome %+v, err %v: want the job's failure, no cards", out, err)
	}
}

// A child that dies after one card's result (killed, crashed) keeps that
// verified card; the other fails with the child's error.
func TestFlashElevatedChildDiesAfterOneResult(t *testing.T) {
	srv := workerFactory(t)
	var args []string
	job, _ := elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, `echo '{"event":"result","device":"/dev/sdy","bytes":@BYTES@,"sha256":"@SHA@","verified":true,"verify_mode":"O_DIRECT","notes":["unmounted /media/u/boot before writing"]}'; exit 1`, &args)
	job.Devices = []string{"/dev/sdy", "/dev/sdz"}
	job.NeedsElevation = func(string) bool { return true }
	out, err := Flash(context.Background(), job)
	var ce *CardsError
	if out == nil || !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Target != "/dev/sdz" {
		t.Fatalf("outcome %+v, err %v", out, err)
	}
	if c := out.Cards[0]; !c.OK() || c.SHA256 != workerImage(t).SHA256 || !c.Verified || !slices.Equal(c.Notes, []string{"unmounted /media/u/boot before writing"}) {
		t.Fatalf("the verified card %+v", c)
	}
}

// Two images in one job, in process: each downloaded once, each card
// written from its own image; a card that fails mid-write fails alone,
// and an image the factory does not have fails its own cards only. The
// downloads' progress names their image.
func TestFlashSeveralImagesInProcess(t *testing.T) {
	srv := factorytest.New(t)
	cpFx, wFx := imagetest.New(t, 2<<20, 21, 1<<20), imagetest.New(t, 3<<20, 22, 1<<20)
	cpID, _ := profile(t, "controlplane").SchematicID()
	wID, _ := profile(t, "worker").SchematicID()
	srv.AddImage(cpID, factory.DefaultTalosVersion, "metal-arm64.raw.xz", cpFx.XZ)
	srv.AddImage(wID, factory.DefaultTalosVersion, "metal-arm64.raw.xz", wFx.XZ)
	c := factory.NewClient(srv.URL, srv.Client())
	cpIm, err := FromProfile(context.Background(), c, profile(t, "controlplane"), false)
	if err != nil {
		t.Fatal(err)
	}
	wIm, _ := FromProfile(context.Background(), c, profile(t, "worker"), false)
	dir := t.TempDir()
	devs := []string{filepath.Join(dir, "cp.img"), filepath.Join(dir, "w1.img"), filepath.Join(dir, "pulled.img")}
	var mu sync.Mutex
	downloads := map[string]bool{}
	job := Job{Image: cpIm, Images: []*Image{cpIm, wIm, wIm}, Devices: devs, Cache: &imaging.Cache{Dir: filepath.Join(dir, "cache")}, Factory: c,
		Open: func(path string, size int64) (imaging.Target, error) {
			t, err := imaging.OpenFile(path, size)
			if err == nil && filepath.Base(path) == "pulled.img" {
				return failingTarget{t.(*os.File)}, nil
			}
			return t, err
		},
		Progress: func(p imaging.Progress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Stage == imaging.StageDownload {
				downloads[p.Image] = true
			}
		}}
	out, err := Flash(context.Background(), job)
	var ce *CardsError
	if !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Target != devs[2] || !errors.Is(err, syscall.EIO) {
		t.Fatalf("err %v, want the pulled card's EIO alone", err)
	}
	for i, fx := range []*imagetest.Fixture{cpFx, wFx} {
		if c := out.Cards[i]; !c.OK() || !c.Verified || c.SHA256 != fx.SHA256 || imagetest.FileSHA256(t, devs[i], fx.Size) != fx.SHA256 {
			t.Fatalf("card %s: %+v %v", devs[i], c, c.Err)
		}
	}
	if n, want := srv.BytesServed(), int64(len(cpFx.XZ)+len(wFx.XZ)); n != want {
		t.Fatalf("served %d bytes, want each image once (%d)", n, want)
	}
	if !downloads["profile controlplane"] || !downloads["profile worker"] || len(downloads) != 2 {
		t.Fatalf("downloads reported for %v", downloads)
	}
	cpEntry, _ := job.Cache.Path(cpIm.CacheKey())
	wEntry, _ := job.Cache.Path(wIm.CacheKey())
	if !slices.Equal(out.CachePaths, []string{cpEntry, wEntry, wEntry}) || out.CachePath != cpEntry {
		t.Fatalf("cache paths %q (%q)", out.CachePaths, out.CachePath)
	}

	// The workers' image missing from the factory: its cards fail, cp-1's
	// is written (from the cache now).
	wIm.Version = "v1.14.4"
	wIm.URL = c.ImageURL(wIm.SchematicID, wIm.Version, wIm.Arch)
	job.Devices = []string{filepath.Join(dir, "cp2.img"), filepath.Join(dir, "w2.img")}
	job.Images = []*Image{cpIm, wIm}
	job.Open = nil
	job.Safety = devices.Options{CreateFile: true}
	out, err = Flash(context.Background(), job)
	if !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Target != job.Devices[1] || out.Cards[0].SHA256 != cpFx.SHA256 {
		t.Fatalf("%+v, %v", out, err)
	}
	if _, err := os.Stat(job.Devices[1]); err == nil {
		t.Fatal("the card of the missing image was created")
	}
}
