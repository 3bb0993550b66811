package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// Every built-in role and every profile of --profiles downloads, at its own
// Talos version and architecture, as the disk-shaped image it announces.
func TestServesRolesAndProfiles(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB", "--profiles", "../../testdata/profiles/good.yaml"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	want, _ := imagetest.RawSHA256(2<<20, 1)
	if !strings.Contains(out.String(), "sha256 "+want) || !strings.Contains(out.String(), "try: ./talosflash-cli flash --role worker") {
		t.Fatalf("output:\n%s", out.String())
	}
	custom, err := factory.LoadProfiles("../../testdata/profiles/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := factory.NewClient(srv.URL, nil)
	for _, p := range factory.MergeProfiles(factory.BuiltinProfiles(), custom) {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		url := c.ImageURL(id, p.Version(), p.Architecture())
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s (%s): %s", p.Name, url, resp.Status)
		}
		zr, err := xz.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(zr, 4<<20)); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Fatalf("%s: image sha256 %s, want %s", p.Name, got, want)
		}
	}
}

// Only loopback: anything else is refused before a socket is opened.
func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.168.1.10:8088", "localhost:8088", "[::]:0", "8088"} {
		var out bytes.Buffer
		if srv, err := start([]string{"--listen", addr, "--size", "1MiB"}, &out); err == nil {
			srv.Close()
			t.Errorf("--listen %s accepted", addr)
		} else if !strings.Contains(err.Error(), addr) {
			t.Errorf("--listen %s: %v", addr, err)
		}
	}
}
