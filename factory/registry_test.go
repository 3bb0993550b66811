package factory

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/talosflash/talosflash/factory/factorytest"
)

func TestInstallerDigest(t *testing.T) {
	c, srv := newTestClient(t)
	ctx := context.Background()
	cp := BuiltinProfiles()[0]
	id, err := srv.AddSchematic(cp.Schematic())
	if err != nil {
		t.Fatal(err)
	}
	ref := NewInstallerRef(c.RegistryHost(), id, "v1.14.5")
	d, err := c.InstallerDigest(ctx, ref)
	if err != nil || d != factorytest.InstallerDigest("metal-installer", id, "v1.14.5") {
		t.Fatalf("digest %q, %v", d, err)
	}
	reqs := srv.RequestsTo("/v2/metal-installer/" + id + "/manifests/v1.14.5")
	if len(reqs) != 1 || reqs[0].Method != http.MethodHead || reqs[0].Header.Get("Accept") == "" {
		t.Fatalf("requests %+v", reqs)
	}
	if n := len(srv.RequestsTo("/registry/v2/metal-installer/" + id + "/manifests/" + d)); n != 0 {
		t.Fatalf("the redirect was followed (%d requests)", n)
	}

	for name, r := range map[string]InstallerRef{
		"unknown version":   NewInstallerRef(c.RegistryHost(), id, "v1.99.0"),
		"unknown schematic": NewInstallerRef(c.RegistryHost(), "0000000000000000000000000000000000000000000000000000000000000000", "v1.14.5"),
	} {
		if _, err := c.InstallerDigest(ctx, r); !errors.Is(err, ErrInstallerMissing) || !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
	other := NewInstallerRef("factory.talos.dev", id, "v1.14.5")
	if _, err := c.InstallerDigest(ctx, other); err == nil {
		t.Fatal("a ref of another registry was checked against this factory")
	}
}
