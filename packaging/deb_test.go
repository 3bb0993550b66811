//go:build linux

package packaging

import (
	"debug/elf"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/xvfbtest"
)

// The files the .deb must hold, and what each must be.
var debFiles = []string{
	"usr/bin/talosflash",
	strings.TrimPrefix(devices.InstalledCLI, "/"),
	"usr/share/applications/io.github.talosflash.desktop",
	"usr/share/icons/hicolor/512x512/apps/io.github.talosflash.png",
	"usr/share/polkit-1/actions/io.github.talosflash.policy",
	"usr/share/doc/talosflash/README.md",
	"usr/share/doc/talosflash/JSON.md",
}

// extractDeb unpacks the .deb named by $env (make release-test sets
// TALOSFLASH_DEB and TALOSFLASH_DEB_ARM64) into a temporary root, as dpkg
// would install it, checks it is for arch, and returns the root.
func extractDeb(t *testing.T, env, arch string) string {
	t.Helper()
	deb := os.Getenv(env)
	if deb == "" {
		t.Skip(env + " is not set: `make release-test` builds the .deb and runs this test")
	}
	if !filepath.IsAbs(deb) {
		deb = filepath.Join("..", deb) // relative to the repository's root, as make sees it
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	info, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Architecture", "Depends").Output()
	if err != nil {
		t.Fatalf("dpkg-deb --field %s: %v", deb, err)
	}
	for _, want := range []string{"Package: talosflash", "Architecture: " + arch, "libgl1"} {
		if !strings.Contains(string(info), want) {
			t.Fatalf("%s control lacks %q:\n%s", deb, want, info)
		}
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x: %v\n%s", err, out)
	}
	for _, f := range debFiles {
		st, err := os.Stat(filepath.Join(root, f))
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v (size %v)", f, err, st)
		}
	}
	return root
}

// The installed binary's CLI runs, and the desktop file and polkit policy
// name what the package installs.
func TestDebInstallsCLIAndDesktopIntegration(t *testing.T) {
	root := extractDeb(t, "TALOSFLASH_DEB", "amd64")
	bin := filepath.Join(root, "usr/bin/talosflash")
	checkCLI(t, bin)

	desktop, err := os.ReadFile(filepath.Join(root, "usr/share/applications/io.github.talosflash.desktop"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nExec=talosflash gui\n", "\nIcon=io.github.talosflash\n", "\nType=Application\n"} {
		if !strings.Contains(string(desktop), want) {
			t.Errorf("desktop file lacks %q", strings.TrimSpace(want))
		}
	}
	if v, err := exec.LookPath("desktop-file-validate"); err == nil {
		if out, err := exec.Command(v, filepath.Join(root, "usr/share/applications/io.github.talosflash.desktop")).CombinedOutput(); err != nil {
			t.Errorf("desktop-file-validate: %v\n%s", err, out)
		}
	}

	policy, err := os.ReadFile(filepath.Join(root, "usr/share/polkit-1/actions/io.github.talosflash.policy"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		Actions []struct {
			ID       string `xml:"id,attr"`
			Defaults struct {
				Active string `xml:"allow_active"`
			} `xml:"defaults"`
			Annotate []struct {
				Key   string `xml:"key,attr"`
				Value string `xml:",chardata"`
			} `xml:"annotate"`
		} `xml:"action"`
	}
	if err := xml.Unmarshal(policy, &pc); err != nil {
		t.Fatalf("polkit policy: %v", err)
	}
	// pkexec picks the action whose exec.path is the program it runs: the
	// elevated write runs the packaged CLI, or re-runs /usr/bin/talosflash
	// (os.Executable) when that is not usable. Exactly those two.
	var paths []string
	for _, a := range pc.Actions {
		if len(a.Annotate) != 1 || a.Annotate[0].Key != "org.freedesktop.policykit.exec.path" || a.Defaults.Active != "auth_admin" {
			t.Fatalf("polkit action %+v", a)
		}
		paths = append(paths, a.Annotate[0].Value)
	}
	if want := []string{"/usr/bin/talosflash", devices.InstalledCLI}; !slices.Equal(paths, want) {
		t.Fatalf("polkit actions run %q, want %q", paths, want)
	}
}

// The package's CLI is the one the installed app's elevated write runs: at
// the path the app looks (devices.CLICandidates), static (no dynamic
// loader, so no Fyne/GL), the same version, and accepted by the app's own
// check (devices.UsableCLI) as dpkg installs it.
func TestDebElevatedWriteRunsThePackagedCLI(t *testing.T) {
	root := extractDeb(t, "TALOSFLASH_DEB", "amd64")
	if !slices.Contains(devices.CLICandidates("/usr/bin/talosflash"), devices.InstalledCLI) {
		t.Fatalf("the app at /usr/bin/talosflash does not look for %s: %q", devices.InstalledCLI, devices.CLICandidates("/usr/bin/talosflash"))
	}
	app := filepath.Join(root, "usr/bin/talosflash")
	cli := filepath.Join(root, devices.InstalledCLI)
	checkCLI(t, cli)
	f, err := elf.Open(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked: the root child must not load the app's libraries", devices.InstalledCLI)
		}
	}
	appVersion, err := exec.Command(app, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(appVersion)), "talosflash ")
	if err := devices.UsableCLI(app, version, cli); err != nil {
		t.Fatalf("the installed app would not run the packaged CLI: %v", err)
	}
}

// checkCLI runs the packaged binary's CLI (run: the binary, or an emulator
// and the binary).
func checkCLI(t *testing.T, run ...string) {
	t.Helper()
	out, err := exec.Command(run[0], append(run[1:], "version")...).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "talosflash ") || strings.Contains(string(out), "-dev") {
		t.Fatalf("talosflash version: %v: %q (want the release version)", err, out)
	}
	out, err = exec.Command(run[0], append(run[1:], "schematic", "--role", "worker", "--json")...).Output()
	if err != nil || !strings.Contains(string(out), `"event":"schematic"`) {
		t.Fatalf("talosflash schematic --json: %v: %s", err, out)
	}
}

// The installed app opens its window on a real X server.
func TestDebAppStartsUnderXvfb(t *testing.T) {
	root := extractDeb(t, "TALOSFLASH_DEB", "amd64")
	startsWindow(t, filepath.Join(root, "usr/bin/talosflash"))
}

// The arm64 package's binary, under qemu-user with Debian's arm64 libraries
// (what setup.sh --release installs to build it): its CLI runs and its app
// opens its window.
func TestDebArm64UnderQemu(t *testing.T) {
	root := extractDeb(t, "TALOSFLASH_DEB_ARM64", "arm64")
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("qemu-aarch64 not installed (apt-get install qemu-user)")
	}
	if _, err := os.Stat("/lib/ld-linux-aarch64.so.1"); err != nil {
		t.Skip("no arm64 libc (dpkg multiarch: scripts/setup.sh --release)")
	}
	bin := filepath.Join(root, "usr/bin/talosflash")
	checkCLI(t, qemu, bin)
	checkCLI(t, qemu, filepath.Join(root, devices.InstalledCLI))
	startsWindow(t, qemu, bin)
}

// startsWindow runs the app (run: the binary, or an emulator and the
// binary) on a private X server until its window is shown.
func startsWindow(t *testing.T, run ...string) {
	t.Helper()
	if _, err := exec.LookPath("xwininfo"); err != nil {
		t.Skip("xwininfo not installed")
	}
	display := xvfbtest.Start(t, "1024x768x24")
	cmd := exec.Command(run[0], append(run[1:], "gui", "--factory", "http://127.0.0.1:1")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "DISPLAY=" + display, "HOME=" + t.TempDir()}
	output, exited := xvfbtest.StartApp(t, cmd, display, "talosflash")
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	if out := output.String(); strings.Contains(out, "panic") {
		t.Fatalf("app output:\n%s", out)
	}
}
