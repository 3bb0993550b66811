package talos114

import (
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

// The generated 1.14 configs load with every 1.14-only kind and the
// ResolverConfig's newer hostDNS left to the node, and v1.13's own checks
// pass on the rest.
func TestLoadGenerated(t *testing.T) {
	for _, name := range []string{"valid/controlplane.yaml", "valid/worker.yaml", "user/controlplane.yaml", "user/worker.yaml"} {
		t.Run(name, func(t *testing.T) {
			data := testkit.Testdata(t, "talos114/"+name)
			res, err := Load(data)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !res.Is114() || res.Provider == nil {
				t.Fatalf("Is114 %v, provider %v", res.Is114(), res.Provider != nil)
			}
			for _, d := range res.Docs {
				if want := NewerThanV113(d.Kind) || d.Kind == "ResolverConfig"; (d.Unchecked != "") != want {
					t.Errorf("document %d %s: unchecked %q, want unchecked %v", d.Index, d.Kind, d.Unchecked, want)
				}
			}
			w, errs := res.ValidateV113()
			if len(errs) > 0 {
				t.Errorf("v1.13 validation: %v (warnings %v)", errs, w)
			}
		})
	}
}

func TestLoadTypoStillRefused(t *testing.T) {
	_, err := Load([]byte("apiVersion: v1alpha1\nkind: ResolverConfig\nnameserverz: []\n"))
	if err == nil {
		t.Fatal("a typo in a kind v1.13 knows was accepted")
	}
	_, err = Load([]byte("apiVersion: v1alpha1\nkind: NoSuchConfig\nfoo: 1\n"))
	if err == nil {
		t.Fatal("an unregistered kind was accepted")
	}
	t.Log(err)
}
