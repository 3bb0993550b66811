//go:build linux

package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/devices/udiskstest"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

const udisksCard = dbus.ObjectPath("/org/freedesktop/UDisks2/block_devices/card")

// udisksJob flashes a local image onto dev, which "needs root"; the
// elevated child, if it is started, reports a result for dev and is
// recorded in *child.
func udisksJob(t *testing.T, fx *imagetest.Fixture, img, dev string, u *devices.UDisks, child *bool) (Job, *[]string) {
	var status []string
	result := `echo '{"event":"result","device":"` + dev + `","bytes":@BYTES@,"sha256":"@SHA@","verified":true,"verify_mode":"O_DIRECT"}'`
	return Job{
		Image: &Image{Label: img, LocalPath: img}, Devices: []string{dev}, UDisks: u,
		NeedsElevation: func(string) bool { return true },
		Elevate: func([]string) (*exec.Cmd, error) {
			*child = true
			return standIn(fx, result), nil
		},
		Status: func(m string) { status = append(status, m) },
	}, &status
}

func writeImage(t *testing.T, fx *imagetest.Fixture) string {
	p := filepath.Join(t.TempDir(), "talos.raw.xz")
	if err := os.WriteFile(p, fx.XZ, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func flashCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The card is written and verified through the descriptor UDisks2 handed
// out (a loop device the fake daemon opened with the flags asked for), in
// this process: no elevated child.
func TestFlashThroughUDisks(t *testing.T) {
	fx := imagetest.New(t, 4<<20, 7, 1<<20)
	loop := imagetest.LoopDevice(t, 8<<20, false) // skips unless root
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	addr := udiskstest.Bus(t)
	fake := udiskstest.Start(t, addr, &udiskstest.Block{Object: udisksCard, Device: loop, Number: st.Rdev, Size: 8 << 20,
		Open: func(mode string, flags int32) (*os.File, *dbus.Error) {
			f, err := os.OpenFile(loop, os.O_RDWR|int(flags), 0)
			if err != nil {
				return nil, dbus.MakeFailedError(err)
			}
			return f, nil
		}})
	child := false
	job, status := udisksJob(t, fx, writeImage(t, fx), loop, &devices.UDisks{Address: addr}, &child)
	job.Safety = devices.Options{AllowLoop: true}
	job.Open = func(path string, _ int64) (imaging.Target, error) { // as root it could: it must not
		return nil, errors.New("opened " + path + " by path, not through the UDisks2 descriptor")
	}
	out, err := Flash(flashCtx(t), job)
	if err != nil {
		t.Fatalf("%v (status %q)", err, *status)
	}
	if child || out.Elevated || !out.UDisks {
		t.Fatalf("child %v, outcome %+v: want an in-process write through UDisks2", child, out)
	}
	if c := out.Cards[0]; c.SHA256 != fx.SHA256 || !c.Verified {
		t.Fatalf("card %+v, want verified %s", c, fx.SHA256)
	}
	if got := imagetest.FileSHA256(t, loop, int64(len(fx.Raw))); got != fx.SHA256 {
		t.Fatalf("the loop device holds %s, want the image %s", got, fx.SHA256)
	}
	calls := fake.Calls()
	if len(calls) != 2 || calls[0].Method != "OpenDevice" || calls[0].Mode != "rw" || calls[0].Flags != devices.UDisksOpenFlags ||
		calls[1].Method != "Rescan" {
		t.Fatalf("calls %+v, want OpenDevice, then Rescan (the new partition table) after the write", calls)
	}
	if !strings.Contains(strings.Join(*status, "\n"), "through UDisks2") {
		t.Fatalf("status %q does not say UDisks2 opened the card", *status)
	}
}

// UDisks2 refusing (polkit: NotAuthorized) or absent: the elevated child
// writes the card, after a status line that says why.
func TestFlashUDisksFallsBack(t *testing.T) {
	fx := imagetest.New(t, 1<<20, 8, 1<<20)
	img := writeImage(t, fx)
	lister, card, num := udiskstest.FakeCard(t, 64<<20)

	refusing := udiskstest.Bus(t)
	udiskstest.Start(t, refusing, &udiskstest.Block{Object: udisksCard, Device: "/dev/sdz", Number: num,
		Open: func(string, int32) (*os.File, *dbus.Error) { return nil, udiskstest.NotAuthorized() }})
	empty := udiskstest.Bus(t) // a system bus without UDisks2

	for _, tc := range []struct{ name, addr, want string }{
		{"refused", refusing, "UDisks2 refused: open " + card + ": Not authorized to perform operation (UDisks2.Error.NotAuthorized): asking for the administrator password (pkexec) instead"},
		{"absent", empty, "UDisks2 is not running: asking for the administrator password (pkexec) instead"},
		{"no bus", "unix:path=" + filepath.Join(t.TempDir(), "none"), "UDisks2 is not running: asking for the administrator password (pkexec) instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := false
			job, status := udisksJob(t, fx, img, card, &devices.UDisks{Address: tc.addr, Lister: lister}, &child)
			out, err := Flash(flashCtx(t), job)
			if err != nil || !child || !out.Elevated || out.UDisks {
				t.Fatalf("err %v, child %v, outcome %+v: want the elevated child", err, child, out)
			}
			i := slicesIndex(*status, tc.want)
			if i < 0 || i+1 >= len(*status) || !strings.Contains((*status)[i+1], "asking for permission") {
				t.Fatalf("status %q: want %q before the child's prompt", *status, tc.want)
			}
		})
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A dismissed prompt ends the flash without a second (pkexec) prompt; a
// descriptor that is not the checked card is refused before writing, and
// not retried through pkexec either.
func TestFlashUDisksStops(t *testing.T) {
	fx := imagetest.New(t, 1<<20, 9, 1<<20)
	img := writeImage(t, fx)
	lister, card, num := udiskstest.FakeCard(t, 64<<20)
	other := filepath.Join(t.TempDir(), "other.img")
	if err := os.WriteFile(other, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	dismissed := udiskstest.Bus(t)
	udiskstest.Start(t, dismissed, &udiskstest.Block{Object: udisksCard, Device: "/dev/sdz", Number: num,
		Open: func(string, int32) (*os.File, *dbus.Error) { return nil, udiskstest.Dismissed() }})
	foreign := udiskstest.Bus(t)
	udiskstest.Start(t, foreign, &udiskstest.Block{Object: udisksCard, Device: "/dev/sdz", Number: num,
		Open: func(string, int32) (*os.File, *dbus.Error) {
			f, err := os.OpenFile(other, os.O_RDWR, 0)
			if err != nil {
				return nil, dbus.MakeFailedError(err)
			}
			return f, nil
		}})
	for _, tc := range []struct {
		name, addr string
		ok         func(error) bool
	}{
		{"dismissed", dismissed, func(err error) bool { return errors.Is(err, devices.ErrUDisksDismissed) }},
		{"another descriptor", foreign, func(err error) bool {
			var ref *devices.RefusedError
			return errors.As(err, &ref) && strings.Contains(ref.Msg, "another device")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := false
			job, _ := udisksJob(t, fx, img, card, &devices.UDisks{Address: tc.addr, Lister: lister}, &child)
			out, err := Flash(flashCtx(t), job)
			if !tc.ok(err) || child || out != nil {
				t.Fatalf("err %v, child %v, outcome %+v", err, child, out)
			}
		})
	}
	if b, _ := os.ReadFile(other); !bytes.Equal(b, []byte("untouched")) {
		t.Fatalf("the foreign descriptor was written: %q", b)
	}
}

// --force-raw as a user goes through UDisks2 (the card opened for the
// user, the write in this process): the elevated child, which refuses it,
// is not needed. Issue 27 #2: it used to be refused before UDisks2 was
// tried.
func TestForceRawThroughUDisks(t *testing.T) {
	blob := make([]byte, 3<<20+512)
	for i := range blob {
		blob[i] = byte(i*31 + i>>9) // not a disk: no MBR signature, no GPT
	}
	img := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(img, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	loop := imagetest.LoopDevice(t, 8<<20, false) // skips unless root
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	addr := udiskstest.Bus(t)
	udiskstest.Start(t, addr, &udiskstest.Block{Object: udisksCard, Device: loop, Number: st.Rdev, Size: 8 << 20,
		Open: func(mode string, flags int32) (*os.File, *dbus.Error) {
			f, err := os.OpenFile(loop, os.O_RDWR|int(flags), 0)
			if err != nil {
				return nil, dbus.MakeFailedError(err)
			}
			return f, nil
		}})
	child := false
	job := Job{
		Image: FromFile(img), Devices: []string{loop}, ForceRaw: true, UDisks: &devices.UDisks{Address: addr},
		Safety:         devices.Options{AllowLoop: true},
		NeedsElevation: func(string) bool { return true },
		Elevate:        func([]string) (*exec.Cmd, error) { child = true; return exec.Command("false"), nil },
		Open: func(path string, _ int64) (imaging.Target, error) {
			return nil, errors.New("opened " + path + " by path, not through the UDisks2 descriptor")
		},
	}
	out, err := Flash(flashCtx(t), job)
	if err != nil || child || !out.UDisks || !out.Cards[0].Verified {
		t.Fatalf("%+v %v (child %v): want a write through UDisks2", out, err, child)
	}
	got := make([]byte, len(blob))
	f, err := os.Open(loop)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("the loop device does not hold the blob (%v)", err)
	}
}

// UDisks2 refusing or absent, --force-raw is refused before any child is
// started and before anything is written, saying why: the child refuses
// it (as root it would copy any bytes onto a disk).
func TestForceRawUDisksRefusedIsNotElevated(t *testing.T) {
	img := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(img, []byte("not a disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	lister, card, num := udiskstest.FakeCard(t, 64<<20)
	refusing := udiskstest.Bus(t)
	udiskstest.Start(t, refusing, &udiskstest.Block{Object: udisksCard, Device: "/dev/sdz", Number: num,
		Open: func(string, int32) (*os.File, *dbus.Error) { return nil, udiskstest.NotAuthorized() }})
	for name, tc := range map[string]struct{ addr, want string }{
		"refused": {refusing, "UDisks2 refused"},
		"absent":  {"unix:path=" + filepath.Join(t.TempDir(), "none"), "UDisks2 is not running"},
	} {
		child := false
		_, err := Flash(flashCtx(t), Job{
			Image: FromFile(img), Devices: []string{card}, ForceRaw: true,
			UDisks:         &devices.UDisks{Address: tc.addr, Lister: lister},
			NeedsElevation: func(string) bool { return true },
			Elevate:        func([]string) (*exec.Cmd, error) { child = true; return exec.Command("false"), nil },
		})
		if !errors.Is(err, ErrForceRawElevated) || !strings.Contains(err.Error(), tc.want) || child {
			t.Errorf("%s: err %v, child %v", name, err, child)
		}
		if b, _ := os.ReadFile(card); bytes.Contains(b, []byte("not a disk")) {
			t.Errorf("%s: the card was written", name)
		}
	}
}

// Two images through UDisks2: every card opened once, before any image is
// decoded (one polkit prompt for the run), each written from its own
// image in this process; no elevated child.
func TestFlashSeveralImagesThroughUDisks(t *testing.T) {
	fxA, fxB := imagetest.New(t, 3<<20, 31, 1<<20), imagetest.New(t, 4<<20, 32, 1<<20)
	var blocks []*udiskstest.Block
	var loops []string
	for i := range 3 {
		loop := imagetest.LoopDevice(t, 8<<20, false) // skips unless root
		var st unix.Stat_t
		if err := unix.Stat(loop, &st); err != nil {
			t.Fatal(err)
		}
		loops = append(loops, loop)
		blocks = append(blocks, &udiskstest.Block{Object: dbus.ObjectPath("/org/freedesktop/UDisks2/block_devices/card" + string(rune('a'+i))),
			Device: loop, Number: st.Rdev, Size: 8 << 20,
			Open: func(mode string, flags int32) (*os.File, *dbus.Error) {
				f, err := os.OpenFile(loop, os.O_RDWR|int(flags), 0)
				if err != nil {
					return nil, dbus.MakeFailedError(err)
				}
				return f, nil
			}})
	}
	addr := udiskstest.Bus(t)
	fake := udiskstest.Start(t, addr, blocks...)
	child := false
	a := &Image{Label: "a", LocalPath: writeImage(t, fxA)}
	b := &Image{Label: "b", LocalPath: writeImage(t, fxB)}
	job, status := udisksJob(t, fxA, a.LocalPath, loops[0], &devices.UDisks{Address: addr}, &child)
	job.Devices, job.Images = loops, []*Image{a, b, a}
	job.Safety = devices.Options{AllowLoop: true}
	job.Open = func(path string, _ int64) (imaging.Target, error) {
		return nil, errors.New("opened " + path + " by path, not through the UDisks2 descriptor")
	}
	out, err := Flash(flashCtx(t), job)
	if err != nil || child || !out.UDisks || out.Elevated {
		t.Fatalf("%+v, %v, child %v (status %q)", out, err, child, *status)
	}
	for i, fx := range []*imagetest.Fixture{fxA, fxB, fxA} {
		if c := out.Cards[i]; c.SHA256 != fx.SHA256 || !c.Verified || imagetest.FileSHA256(t, loops[i], fx.Size) != fx.SHA256 {
			t.Fatalf("card %s: %+v %v", loops[i], c, c.Err)
		}
	}
	opens := 0
	for i, c := range fake.Calls() {
		if c.Method == "OpenDevice" {
			if opens++; i != opens-1 {
				t.Fatalf("calls %+v: every card opened first", fake.Calls())
			}
		}
	}
	if opens != 3 {
		t.Fatalf("%d OpenDevice calls, want one a card", opens)
	}
}
