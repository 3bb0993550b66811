package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// elevatedJob is a job for the worker image (workerImage) whose write
// step "needs root" and runs script as the child (standIn, after it read
// the image); args records what the child was told.
func elevatedJob(t *testing.T, srv *factorytest.Server, cache *imaging.Cache, script string, args *[]string) (Job, *[]string) {
	fx := workerImage(t)
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if err != nil {
		t.Fatal(err)
	}
	var status []string
	return Job{
		Image: im, Devices: []string{"/dev/sdz"}, Cache: cache, Factory: c,
		NeedsElevation: func(p string) bool { return p == "/dev/sdz" },
		Elevate: func(a []string) (*exec.Cmd, error) {
			*args = a
			return standIn(fx, script), nil
		},
		Status: func(m string) { status = append(status, m) },
	}, &status
}

func TestFlashElevatedThenCorruptDropsCacheEntry(t *testing.T) {
	srv := workerFactory(t)
	fx := workerImage(t)
	id, _ := profile(t, "worker").SchematicID()
	cache := &imaging.Cache{Dir: t.TempDir()}

	var args []string
	var progress []imaging.Progress
	ok := `echo '{"event":"progress","stage":"write","done":5,"total":10,"rate":1,"eta_seconds":5,"compressed":true}'
echo '{"event":"info","message":"unmounted /media/card before writing"}'
echo '{"event":"result","device":"/dev/sdz","bytes":@BYTES@,"sha256":"@SHA@","verified":true,"verify_mode":"O_DIRECT"}'`
	job, status := elevatedJob(t, srv, cache, ok, &args)
	job.Progress = func(p imaging.Progress) { progress = append(progress, p) }
	out, err := Flash(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	key := job.Image.CacheKey()
	cached, _ := cache.Path(key)
	// Not cached yet: the parent decodes the download as it arrives and
	// sends it on the child's stdin; the child is given no path to read.
	if want := (elevate.Args{Devices: []string{"/dev/sdz"}}).List(); !slices.Equal(args, want) {
		t.Fatalf("child args %q, want %q", args, want)
	}
	if got := srv.Schematics(); len(got) != 1 || got[0] != id {
		t.Fatalf("registered %v before downloading, want %s", got, id)
	}
	if data, err := os.ReadFile(cached); err != nil || !bytes.Equal(data, fx.XZ) {
		t.Fatal("cache entry is not the served image")
	}
	// The download (ours) and the child's write run at once: both relayed.
	var sawDownload, sawWrite bool
	for _, p := range progress {
		sawDownload = sawDownload || p.Stage == imaging.StageDownload && p.Done == int64(len(fx.XZ))
		sawWrite = sawWrite || p.Stage == imaging.StageWrite && p.Done == 5 && p.Compressed
	}
	if !sawDownload || !sawWrite {
		t.Fatalf("progress %+v", progress)
	}
	if !slices.Contains(*status, "unmounted /media/card before writing") {
		t.Fatalf("child's info not relayed: %q", *status)
	}
	if !out.Elevated || out.CachePath != cached || out.Cards[0].Bytes != int64(len(fx.Raw)) || out.Cards[0].SHA256 != fx.SHA256 || !out.Cards[0].Verified || out.Cards[0].VerifyMode != "O_DIRECT" {
		t.Fatalf("outcome %+v", out)
	}

	// Second card: cached, so no factory call at all; the child finds the
	// image corrupt and the parent (which owns the cache) drops it.
	before := len(srv.Requests())
	corrupt := fmt.Sprintf(`echo '{"event":"error","code":%d,"message":"xz: corrupt block"}'; exit %d`, contract.ExitImage, contract.ExitImage)
	job, status = elevatedJob(t, srv, cache, corrupt, &args)
	_, err = Flash(context.Background(), job)
	if !errors.Is(err, imaging.ErrCorruptImage) || err.Error() != "xz: corrupt block" {
		t.Fatalf("err %v", err)
	}
	if n := len(srv.Requests()) - before; n != 0 {
		t.Fatalf("%d factory requests for a cached image", n)
	}
	if _, err := os.Stat(cached); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt cache entry kept: %v", err)
	}
	if !slices.Contains(*status, "using the cached image") {
		t.Fatalf("status %q", *status)
	}
}

// In process: a file target, the cached image, no factory needed the
// second time.
func TestFlashInProcessUsesCacheOffline(t *testing.T) {
	srv := factorytest.New(t)
	fx := imagetest.New(t, 1<<20, 4, 1<<20)
	id, _ := profile(t, "worker").SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	dir := t.TempDir()
	cache := &imaging.Cache{Dir: filepath.Join(dir, "cache")}
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, card := range []string{"a.img", "b.img"} {
		if i == 1 {
			srv.Close()
		}
		target := filepath.Join(dir, card)
		out, err := Flash(context.Background(), Job{Image: im, Devices: []string{target}, Cache: cache, Factory: c,
			Safety: devices.Options{CreateFile: true}})
		if err != nil {
			t.Fatalf("%s: %v", card, err)
		}
		if out.Cards[0].SHA256 != fx.SHA256 || !out.Cards[0].Verified || out.Elevated || !strings.HasPrefix(out.CachePath, cache.Dir) {
			t.Fatalf("%s: outcome %+v", card, out)
		}
		if got := imagetest.FileSHA256(t, target, int64(len(fx.Raw))); got != fx.SHA256 {
			t.Fatalf("%s holds %s", card, got)
		}
	}
}

// A damaged cache entry is not "cached": the schematic is registered again
// before Fetch replaces the entry (the factory may have forgotten it).
func TestFlashDamagedCacheEntryRegistersFirst(t *testing.T) {
	srv := factorytest.New(t)
	fx := imagetest.New(t, 1<<20, 5, 1<<20)
	id, _ := profile(t, "worker").SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	dir := t.TempDir()
	cache := &imaging.Cache{Dir: filepath.Join(dir, "cache")}
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := cache.Path(im.CacheKey())
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, fx.XZ[:len(fx.XZ)/2], 0o644); err != nil { // truncated: no index
		t.Fatal(err)
	}
	target := filepath.Join(dir, "card.img")
	out, err := Flash(context.Background(), Job{Image: im, Devices: []string{target}, Cache: cache, Factory: c, Safety: devices.Options{CreateFile: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Schematics(); len(got) != 1 || got[0] != id || out.Cards[0].SHA256 != fx.SHA256 {
		t.Fatalf("registered %v, flashed %s", got, out.Cards[0].SHA256)
	}
}

// The child is told no path to read: the image comes on its stdin, the
// decoded image as the parent (the user's process) reads it; a relative
// device path reaches it absolute (pkexec starts it in root's home).
func TestFlashElevatedImageComesOnStdin(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fx := workerImage(t)
	if err := os.WriteFile("disk.raw.xz", fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	wire := filepath.Join(dir, "stdin")
	job := Job{
		Image: FromFile("disk.raw.xz"), Devices: []string{"card.img"},
		NeedsElevation: func(string) bool { return true },
		Elevate: func(a []string) (*exec.Cmd, error) {
			args = a
			return exec.Command("sh", "-c", fmt.Sprintf(`head -c %d >%s
echo '{"event":"result","device":"x","bytes":%d,"sha256":"%s","verified":true}'`, elevate.StreamLength(int64(len(fx.Raw))), wire, len(fx.Raw), fx.SHA256)), nil
		},
	}
	out, err := Flash(context.Background(), job)
	if err != nil || !out.Cards[0].OK() {
		t.Fatalf("%+v %v", out, err)
	}
	want := (elevate.Args{Devices: []string{filepath.Join(dir, "card.img")}}).List()
	if !slices.Equal(args, want) {
		t.Fatalf("child args %q, want %q", args, want)
	}
	for _, a := range args {
		if strings.Contains(a, "disk.raw") {
			t.Fatalf("the child is told the image's path: %q", args)
		}
	}
	f, err := os.Open(wire)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := io.ReadAll(elevate.ReceiveImages(ctx, f, cancel, 1)[0])
	if err != nil || !bytes.Equal(got, fx.Raw) {
		t.Fatalf("the child's stdin carried %d bytes (%v), want the decoded image", len(got), err)
	}
}

// A card counts only when the child names exactly the bytes sent: another
// hash (a stream damaged on the way) or another size fails it as a verify
// mismatch, and a result for an image not wholly sent as incomplete.
func TestFlashElevatedResultMustBeWhatWasSent(t *testing.T) {
	srv := workerFactory(t)
	fx := workerImage(t)
	for name, script := range map[string]string{
		"other sha256": `echo '{"event":"result","device":"/dev/sdz","bytes":@BYTES@,"sha256":"0000","verified":true}'`,
		"other size":   `echo '{"event":"result","device":"/dev/sdz","bytes":4096,"sha256":"@SHA@","verified":true}'`,
	} {
		var args []string
		job, _ := elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, script, &args)
		out, err := Flash(context.Background(), job)
		if out == nil || !errors.Is(err, imaging.ErrVerifyMismatch) || out.Cards[0].OK() {
			t.Errorf("%s: %+v %v", name, out, err)
		}
	}
	// A child that answers without reading: the parent never sent it all.
	job, _ := elevatedJob(t, srv, &imaging.Cache{Dir: t.TempDir()}, "", new([]string))
	job.Elevate = func([]string) (*exec.Cmd, error) {
		return exec.Command("sh", "-c", fmt.Sprintf(`echo '{"event":"result","device":"/dev/sdz","bytes":%d,"sha256":"%s","verified":true}'`, len(fx.Raw), fx.SHA256)), nil
	}
	out, err := Flash(context.Background(), job)
	if out == nil || !errors.Is(err, imaging.ErrIncomplete) || out.Cards[0].OK() {
		t.Errorf("unread: %+v %v", out, err)
	}
}

// The image failing here (a corrupt download, decoded by the parent) is
// the job's failure: the child's stdin closes, the child stops, and the
// cache entry is dropped.
func TestFlashElevatedImageFailsInTheParent(t *testing.T) {
	srv := factorytest.New(t)
	fx := workerImage(t)
	id, _ := profile(t, "worker").SchematicID()
	bad := bytes.Clone(fx.XZ)
	bad[len(bad)/2] ^= 0xff
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", bad)
	cache := &imaging.Cache{Dir: t.TempDir()}
	var args []string
	job, _ := elevatedJob(t, srv, cache, "", &args)
	job.Elevate = func([]string) (*exec.Cmd, error) {
		// Reads to its stdin's end, as the real child stops on it.
		return exec.Command("sh", "-c", `cat >/dev/null; echo '{"event":"error","code":130,"message":"flash interrupted"}'; exit 130`), nil
	}
	out, err := Flash(context.Background(), job)
	if out != nil || !errors.Is(err, imaging.ErrCorruptImage) {
		t.Fatalf("%+v %v, want the image's corruption as the job's failure", out, err)
	}
	if cache.Has(job.Image.CacheKey()) {
		t.Fatal("the corrupt image stayed in the cache")
	}
}

// --no-cache through the elevated child: the download streams through
// the parent into the child; nothing stays in the cache.
func TestFlashElevatedNoCacheKeepsNothing(t *testing.T) {
	srv := workerFactory(t)
	id, _ := profile(t, "worker").SchematicID()
	cache := &imaging.Cache{Dir: t.TempDir()}
	var args []string
	ok := `echo '{"event":"result","device":"/dev/sdz","bytes":@BYTES@,"sha256":"@SHA@","verified":true}'`
	job, _ := elevatedJob(t, srv, cache, ok, &args)
	job.NoCache = true
	out, err := Flash(context.Background(), job)
	if err != nil || !out.Cards[0].OK() {
		t.Fatal(out, err)
	}
	if len(srv.RequestsTo(factorytest.ImagePath(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz"))) == 0 {
		t.Fatal("the image was not downloaded")
	}
	if cache.Has(job.Image.CacheKey()) || out.CachePath != "" {
		t.Fatalf("--no-cache left the image in the cache (CachePath %q)", out.CachePath)
	}
}

// Without pkexec the error suggests the command a person runs as root,
// not the child protocol (which ends at once without a stdin and prints JSON).
func TestFlashElevatedManualCommandIsForPeople(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(img, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := Job{
		Image: FromFile(img), Devices: []string{"/dev/sdz"}, Safety: devices.Options{AllowLoop: true},
		NeedsElevation: func(string) bool { return true },
		Elevate: func(a []string) (*exec.Cmd, error) {
			return nil, &devices.ElevationError{Command: devices.ShellJoin(append([]string{"sudo", "/usr/bin/talosflash"}, a...)), Reason: "no pkexec"}
		},
	}
	_, err := Flash(context.Background(), job)
	var ee *devices.ElevationError
	if !errors.As(err, &ee) {
		t.Fatalf("err %v, want ElevationError", err)
	}
	for _, internal := range []string{"--elevated", "--json", "--yes"} {
		if strings.Contains(ee.Command, internal) {
			t.Errorf("suggested command %q has %s", ee.Command, internal)
		}
	}
	for _, want := range []string{"sudo ", "--flash", "--image " + img, "--device /dev/sdz", "--allow-loop"} {
		if !strings.Contains(ee.Command, want) {
			t.Errorf("suggested command %q lacks %q", ee.Command, want)
		}
	}
}
