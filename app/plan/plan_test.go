package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
)

func profile(t *testing.T, name string) factory.Profile {
	t.Helper()
	p, err := factory.FindProfile(factory.BuiltinProfiles(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromProfileRegistersAndBuildsURL(t *testing.T) {
	srv := factorytest.New(t)
	c := factory.NewClient(srv.URL, nil)
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), true)
	if err != nil {
		t.Fatal(err)
	}
	const workerID = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	if im.SchematicID != workerID || im.URL != srv.URL+"/image/"+workerID+"/v1.14.5/metal-arm64.raw.xz" {
		t.Fatalf("image %+v", im)
	}
	if got := srv.Schematics(); len(got) != 1 || got[0] != workerID {
		t.Fatalf("factory has %v", got)
	}
	if im.CacheKey() != imaging.FactoryCacheKey(srv.URL, workerID, "v1.14.5", "metal-arm64.raw.xz") || !strings.HasPrefix(im.CacheKey(), "127.0.0.1_") {
		t.Fatalf("cache key %q", im.CacheKey())
	}
}

func TestRegisterRejectsUnknownExtensionBeforePosting(t *testing.T) {
	srv := factorytest.New(t)
	c := factory.NewClient(srv.URL, nil)
	p := profile(t, "worker")
	p.Extensions = []string{"siderolabs/newtt"}
	_, err := FromProfile(context.Background(), c, p, true)
	if !errors.Is(err, factory.ErrUnknownExtension) || !strings.Contains(err.Error(), "siderolabs/newt") {
		t.Fatalf("err = %v, want unknown extension with a suggestion", err)
	}
	if len(srv.Schematics()) != 0 {
		t.Fatal("an invalid profile was registered")
	}
}

func TestImageWarnings(t *testing.T) {
	c := factory.NewClient("http://127.0.0.1:1", nil)
	cp, _ := FromProfile(context.Background(), c, profile(t, "controlplane"), false)
	if w := ImageWarnings(cp); len(w) != 1 || !strings.Contains(w[0], `ExtensionServiceConfig named "newt"`) {
		t.Fatalf("controlplane warnings %q", w)
	}
	wk, _ := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if w := ImageWarnings(wk); len(w) != 0 {
		t.Fatalf("worker warnings %q, want none", w)
	}
	// The incident: a worker profile that carries Newt.
	p := profile(t, "worker")
	p.Extensions = []string{factory.NewtExtension}
	bad, _ := FromProfile(context.Background(), c, p, false)
	if w := ImageWarnings(bad); len(w) != 1 || !strings.Contains(w[0], "worker profile includes siderolabs/newt") {
		t.Fatalf("worker+newt warnings %q", w)
	}
}

func TestFromInstallerData(t *testing.T) {
	c := factory.NewClient("http://127.0.0.1:1", nil)
	id := strings.Repeat("ab", 32)
	im, err := FromInstallerData(c, "installer-worker.yaml", []byte("machine:\n  install:\n    image: factory.talos.dev/metal-installer/"+id+":v1.14.5\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if im.SchematicID != id || im.Version != "v1.14.5" || im.Schematic != nil || !strings.HasSuffix(im.URL, "/image/"+id+"/v1.14.5/metal-arm64.raw.xz") {
		t.Fatalf("image %+v", im)
	}
	if _, err := FromInstallerData(c, "x.yaml", []byte("machine: {}\n"), ""); err == nil {
		t.Fatal("a file without an installer image was accepted")
	}
}

// An installer reference for SecureBoot or another platform still flashes
// the metal image of its schematic, and says so.
func TestImageWarningsInstallerPlatform(t *testing.T) {
	c := factory.NewClient("http://127.0.0.1:1", nil)
	id := strings.Repeat("ab", 32)
	for ref, want := range map[string]string{
		"factory.talos.dev/metal-installer/" + id + ":v1.14.5":            "",
		"factory.talos.dev/installer/" + id + ":v1.14.5":                  "",
		"factory.talos.dev/metal-installer-secureboot/" + id + ":v1.14.5": "SecureBoot",
		"factory.talos.dev/aws-installer/" + id + ":v1.14.5":              "platform aws",
	} {
		r, err := factory.ParseInstallerRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		im := FromInstallerRef(c, r, "")
		if !strings.HasSuffix(im.URL, "/image/"+id+"/v1.14.5/metal-arm64.raw.xz") {
			t.Errorf("%s: URL %s, want the metal image", ref, im.URL)
		}
		w := ImageWarnings(im)
		switch {
		case want == "" && len(w) != 0:
			t.Errorf("%s: warnings %q, want none", ref, w)
		case want != "" && (len(w) != 1 || !strings.Contains(w[0], want)):
			t.Errorf("%s: warnings %q, want one naming %q", ref, w, want)
		}
	}
}

// UseFormat swaps the suffix, as often as it is called.
func TestUseFormatIdempotent(t *testing.T) {
	im := &Image{URL: "https://f/image/id/v1.14.5/metal-arm64.raw.xz"}
	for _, step := range []struct{ format, want string }{
		{"zst", "metal-arm64.raw.zst"}, {"zst", "metal-arm64.raw.zst"}, {"xz", "metal-arm64.raw.xz"}, {"", "metal-arm64.raw.xz"},
	} {
		im.UseFormat(step.format)
		if im.FileName() != step.want {
			t.Fatalf("after UseFormat(%q): %s, want %s", step.format, im.URL, step.want)
		}
	}
}
