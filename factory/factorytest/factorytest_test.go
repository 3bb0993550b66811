package factorytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}

	return b
}

func get(t *testing.T, s *Server, path string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()

	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}

	for k, v := range hdr {
		req.Header.Set(k, v)
	}

	resp, err := s.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()

	body, err := io.ReadAll(resp.Body)

	return resp, body, err
}

func TestSchematicRoundTrip(t *testing.T) {
	s := New(t)
	yaml := "overlay:\n  image: siderolabs/sbc-raspberrypi\n  name: rpi_generic\ncustomization: {}\n"

	resp, err := s.Client().Post(s.URL+"/schematics", "application/yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}

	// The real factory's own test pins this ID for the rpi_generic overlay.
	const want = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	if resp.StatusCode != http.StatusCreated || out.ID != want {
		t.Fatalf("POST /schematics = %d %q, want 201 %q", resp.StatusCode, out.ID, want)
	}

	r, body, err := get(t, s, "/schematics/"+want, nil)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("GET schematic: %v %v", r, err)
	}

	sc, err := schematic.Unmarshal(body)
	if err != nil || sc.Overlay.Name != "rpi_generic" {
		t.Fatalf("stored schematic %q: %v", body, err)
	}

	resp2, err := s.Client().Post(s.URL+"/schematics", "application/yaml", strings.NewReader("bogus: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()

	if resp2.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid schematic: status %d, want 400", resp2.StatusCode)
	}

	if got := len(s.RequestsTo("/schematics")); got != 2 {
		t.Fatalf("request log has %d POSTs, want 2", got)
	}

	s.DisableSchematicLookup()

	r, body, _ = get(t, s, "/schematics/"+want, nil)
	if r.StatusCode != 404 || !strings.Contains(string(body), "404 page not found") {
		t.Fatalf("lookup disabled: %d %q", r.StatusCode, body)
	}
}

// The direct path is what the real factory serves: the whole file, its
// length, type and name, no validator, Range ignored.
func TestImageDirectPathIgnoresRange(t *testing.T) {
	s := New(t)
	data := testData(100_000)
	s.AddImage("abc", "v1.14.5", "metal-arm64.raw.xz", data)
	path := ImagePath("abc", "v1.14.5", "metal-arm64.raw.xz")

	r, body, err := get(t, s, path, nil)
	if err != nil || r.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("full GET: err=%v len=%d headers=%v", err, len(body), r.Header)
	}

	for _, h := range []string{"ETag", "Last-Modified", "Accept-Ranges"} {
		if v := r.Header.Get(h); v != "" {
			t.Fatalf("direct path sent %s: %q", h, v)
		}
	}

	if r.Header.Get("Content-Disposition") != `attachment; filename="metal-arm64.raw.xz"` || r.Header.Get("Content-Type") != "application/x-xz" {
		t.Fatalf("headers %v", r.Header)
	}

	r, body, err = get(t, s, path, map[string]string{"Range": "bytes=1000-"})
	if err != nil || r.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("range GET on the direct path: %v status=%d len=%d, want 200 with the whole file", err, r.StatusCode, len(body))
	}

	if got, want := s.BytesServed(), int64(2*len(data)); got != want {
		t.Fatalf("BytesServed = %d, want %d", got, want)
	}

	req, _ := http.NewRequest(http.MethodHead, s.URL+path, nil)

	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if resp.ContentLength != int64(len(data)) || s.BytesServed() != int64(2*len(data)) {
		t.Fatalf("HEAD: length %d, served %d", resp.ContentLength, s.BytesServed())
	}
}

// With object storage, GET redirects to a URL that honours Range and
// carries validators; HEAD is not redirected.
func TestImageObjectStorageRange(t *testing.T) {
	s := New(t)
	s.SetObjectStorage(true)
	data := testData(100_000)
	s.AddImage("abc", "v1.14.5", "metal-arm64.raw.xz", data)
	path := ImagePath("abc", "v1.14.5", "metal-arm64.raw.xz")

	r, body, err := get(t, s, path, nil)
	if err != nil || !bytes.Equal(body, data) || r.Header.Get("ETag") == "" || r.Header.Get("Last-Modified") == "" {
		t.Fatalf("full GET: err=%v len=%d headers=%v", err, len(body), r.Header)
	}

	if r.Request.URL.Path != StoragePrefix+path {
		t.Fatalf("GET ended at %s, want the storage URL", r.Request.URL)
	}

	etag := r.Header.Get("ETag")

	r, body, err = get(t, s, path, map[string]string{"Range": "bytes=1000-", "If-Range": etag})
	if err != nil || r.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[1000:]) {
		t.Fatalf("range GET: %v status=%d len=%d", err, r.StatusCode, len(body))
	}

	if cr := r.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes 1000-%d/%d", len(data)-1, len(data)) {
		t.Fatalf("Content-Range %q", cr)
	}

	req, _ := http.NewRequest(http.MethodHead, s.URL+path, nil)
	req.Header.Set("Range", "bytes=5-")

	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != path || resp.ContentLength != int64(len(data)) {
		t.Fatalf("HEAD: %d at %s, length %d", resp.StatusCode, resp.Request.URL, resp.ContentLength)
	}
}

// The first GET of an image waits for the build before any header; a
// request during the build joins it instead of starting another.
func TestImageBuildDelaysHeaders(t *testing.T) {
	s := New(t)
	s.SetBuildDelay(300 * time.Millisecond)
	s.AddImage("abc", "v1.14.5", "metal-arm64.raw.xz", testData(1000))
	path := ImagePath("abc", "v1.14.5", "metal-arm64.raw.xz")

	start := time.Now()
	done := make(chan time.Duration, 2)

	for range 2 {
		go func() {
			resp, err := s.Client().Get(s.URL + path)
			if err == nil {
				resp.Body.Close()
			}
			done <- time.Since(start)
		}()
	}

	for range 2 {
		if d := <-done; d < 300*time.Millisecond {
			t.Fatalf("headers after %v, before the 300 ms build", d)
		}
	}

	// Built once: a later GET does not wait again (an hour would time out).
	s.SetBuildDelay(time.Hour)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)

	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("GET of a built image: %v", err)
	}
	resp.Body.Close()
}

// Error shapes by factory release: plain text, unknown version 404 from
// v1.1.0 and 500 before; the schematic lookup route from v0.9.0.
func TestErrorShapesByFactoryVersion(t *testing.T) {
	s := New(t)
	path := ImagePath("abc", "v9.9.9", "metal-arm64.raw.xz")

	r, body, _ := get(t, s, path, nil)
	if r.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != "version v9.9.9 is not available" {
		t.Fatalf("v1.5 unknown version: %d %q", r.StatusCode, body)
	}

	r, body, _ = get(t, s, "/version/v9.9.9/extensions/official", nil)
	if r.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "is not available") {
		t.Fatalf("v1.5 unknown version extensions: %d %q", r.StatusCode, body)
	}

	s.SetFactoryVersion("v0.8.4")

	r, body, _ = get(t, s, path, nil)
	if r.StatusCode != http.StatusInternalServerError || strings.TrimSpace(string(body)) != "internal server error" {
		t.Fatalf("v0.8.4 unknown version: %d %q", r.StatusCode, body)
	}

	r, body, _ = get(t, s, "/schematics/"+strings.Repeat("0", 64), nil)
	if r.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "404 page not found") {
		t.Fatalf("v0.8.4 schematic lookup: %d %q", r.StatusCode, body)
	}

	resp, err := s.Client().Post(s.URL+"/schematics", "application/yaml", strings.NewReader("customization: {}\n"))
	if err != nil {
		t.Fatal(err)
	}

	var reply map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()

	if _, ok := reply["schematic"]; ok || reply["id"] == "" {
		t.Fatalf("v0.8.4 POST reply %v, want only an id", reply)
	}
}

func TestFaults(t *testing.T) {
	s := New(t)
	data := testData(300_000)
	s.AddImage("abc", "v1.14.5", "metal-arm64.raw.xz", data)
	path := ImagePath("abc", "v1.14.5", "metal-arm64.raw.xz")

	t.Run("reset", func(t *testing.T) {
		s.ResetAfter(path, 50_000)

		_, body, err := get(t, s, path, nil)
		if err == nil || len(body) != 50_000 {
			t.Fatalf("reset: err=%v len=%d, want error after 50000 bytes", err, len(body))
		}

		// Times: 1, so the next request succeeds.
		if _, body, err := get(t, s, path, nil); err != nil || !bytes.Equal(body, data) {
			t.Fatalf("after reset: %v", err)
		}
	})

	t.Run("short", func(t *testing.T) {
		s.Inject(path, Fault{Kind: FaultShortBody, After: 1234, Times: 1})

		r, body, err := get(t, s, path, nil)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != 1234 || r.ContentLength != int64(len(data)) {
			t.Fatalf("short body: err=%v len=%d", err, len(body))
		}
	})

	t.Run("stall", func(t *testing.T) {
		s.StallAfter(path, 10_000)

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()

		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)

		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()

		start := time.Now()
		body, err := io.ReadAll(resp.Body)

		if !errors.Is(err, context.DeadlineExceeded) || len(body) != 10_000 || time.Since(start) > 5*time.Second {
			t.Fatalf("stall: err=%v len=%d", err, len(body))
		}
	})

	t.Run("corrupt", func(t *testing.T) {
		s.Inject(path, Fault{Kind: FaultCorrupt, After: 100, Times: 1})

		_, body, err := get(t, s, path, nil)
		if err != nil || len(body) != len(data) || !bytes.Equal(body[:100], data[:100]) || body[100] != data[100]^0xff {
			t.Fatalf("corrupt: err=%v len=%d", err, len(body))
		}
	})

	t.Run("content", func(t *testing.T) {
		other := []byte("something else entirely")
		s.Inject(path, Fault{Kind: FaultContent, Data: other, Times: 1})

		r, body, err := get(t, s, path, nil)
		if err != nil || !bytes.Equal(body, other) || r.ContentLength != int64(len(other)) {
			t.Fatalf("content: err=%v body=%q", err, body)
		}
	})

	t.Run("status", func(t *testing.T) {
		s.Inject(path, Fault{Kind: FaultStatus, Status: 503, Body: "busy building", Times: 1})

		r, body, err := get(t, s, path, nil)
		if err != nil || r.StatusCode != 503 || !strings.Contains(string(body), "busy building") {
			t.Fatalf("status: %v %d %q", err, r.StatusCode, body)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		s.AddImage("def", "v1.14.5", "metal-arm64.raw.xz", []byte("redirected"))
		s.Inject(path, Fault{Kind: FaultRedirect, Location: ImagePath("def", "v1.14.5", "metal-arm64.raw.xz"), Times: 1})

		_, body, err := get(t, s, path, nil)
		if err != nil || string(body) != "redirected" {
			t.Fatalf("redirect: %v %q", err, body)
		}
	})
}

func TestMetaRoutes(t *testing.T) {
	s := New(t)

	var versions []string

	_, body, _ := get(t, s, "/versions", nil)
	if err := json.Unmarshal(body, &versions); err != nil || len(versions) != len(DefaultVersions) {
		t.Fatalf("versions %q: %v", body, err)
	}

	r, body, _ := get(t, s, "/version/v1.14.5/extensions/official", nil)
	if r.StatusCode != 200 || !strings.Contains(string(body), `"siderolabs/newt"`) {
		t.Fatalf("extensions: %d %q", r.StatusCode, body)
	}

	r, body, _ = get(t, s, "/version/v1.14.5/overlays/official", nil)
	if r.StatusCode != 200 || !strings.Contains(string(body), `"rpi_generic"`) {
		t.Fatalf("overlays: %d %q", r.StatusCode, body)
	}

	if r, _, _ := get(t, s, "/version/v9.9.9/extensions/official", nil); r.StatusCode != 404 {
		t.Fatalf("unknown version: %d", r.StatusCode)
	}
}

func TestCloseEndsStalledDownload(t *testing.T) {
	s := NewServer()
	s.AddImage("abc", "v1", "f", testData(50_000))
	s.StallAfter(ImagePath("abc", "v1", "f"), 1000)

	resp, err := s.Client().Get(s.ImageURL("abc", "v1", "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	done := make(chan error, 1)

	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()

	closed := make(chan struct{})

	go func() { s.Close(); close(closed) }()

	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a stalled response")
	}

	if err := <-done; err == nil {
		t.Fatal("stalled download ended without error")
	}
}

// The overlays route lists what the overlays bundle of each Talos release
// has: nothing before 1.7, rpi_generic from then on, rpi_5 from v1.12.3.
// The fake's own table agrees with the boards of the factory package (two
// readings of upstream: siderolabs/overlays for the fake, Talos's SBC table
// for the library).
func TestOverlaysByVersion(t *testing.T) {
	s := New(t)
	s.SetVersions("v1.6.7", "v1.7.0", "v1.12.2", "v1.12.3", "v1.13.0-alpha.1", "v1.14.5")

	for v, want := range map[string]string{
		"v1.6.7": "", "v1.7.0": "rpi_generic", "v1.12.2": "rpi_generic",
		"v1.12.3": "rpi_generic,rpi_5", "v1.13.0-alpha.1": "rpi_generic,rpi_5", "v1.14.5": "rpi_generic,rpi_5",
	} {
		r, body, err := get(t, s, "/version/"+v+"/overlays/official", nil)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", v, r, err)
		}

		var list []struct{ Name, Image string }
		if err := json.Unmarshal(body, &list); err != nil || (want == "" && string(bytes.TrimSpace(body)) != "[]") {
			t.Fatalf("%s: %q %v", v, body, err)
		}

		var names []string
		for _, o := range list {
			if o.Image != RPiOverlayImage {
				t.Errorf("%s: %+v", v, o)
			}
			names = append(names, o.Name)
		}

		if strings.Join(names, ",") != want {
			t.Errorf("%s: overlays %v, want %s", v, names, want)
		}
	}

	// Each board's overlay from its minimum on, and not the patch release
	// before it.
	offers := func(version, overlay string) bool {
		t.Helper()
		s.SetVersions(version)
		_, body, err := get(t, s, "/version/"+version+"/overlays/official", nil)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(body), `"name":"`+overlay+`"`)
	}

	for _, b := range factory.Boards() {
		o := b.Overlay()
		min := b.MinTalosVersion()
		if min == "" {
			min = OverlaysMinVersion
		} else {
			prev := semver.MustParse(strings.TrimPrefix(min, "v"))
			prev.Patch--
			if offers("v"+prev.String(), o.Name) {
				t.Errorf("board %s: the fake offers %s at v%s, before the board's minimum %s", b, o.Name, prev, min)
			}
		}
		if o.Image != RPiOverlayImage || !offers(min, o.Name) {
			t.Errorf("board %s: the fake does not offer %s (%s) at %s", b, o.Name, o.Image, min)
		}
	}
}

// The boot files go into the EFI partition of a Talos-like image, the
// rest of the image untouched; a partition past FAT16's cluster count gets
// FAT32 (WithBootFiles falls back to it: a 384 MiB image's EFI).
func TestWithBootFiles(t *testing.T) {
	if _, err := FATImage(40<<20, OverlayBootFiles("rpi_5"), false); err == nil {
		t.Fatal("FAT16 with 80000 clusters")
	}
	if fs, err := FATImage(40<<20, OverlayBootFiles("rpi_5"), true); err != nil || string(fs[82:87]) != "FAT32" {
		t.Fatalf("FAT32 of 40 MiB: %v", err)
	}
	for _, size := range []int64{8 << 20} {
		raw, err := imagetest.TalosRaw(size, 1)
		if err != nil {
			t.Fatal(err)
		}
		img, err := WithBootFiles(raw, OverlayBootFiles("rpi_5"))
		if err != nil {
			t.Fatalf("%d MiB: %v", size>>20, err)
		}
		tab, err := gpt.Read(bytes.NewReader(img), size)
		if err != nil {
			t.Fatal(err)
		}
		efi, _ := tab.Find("EFI")
		if !bytes.Equal(img[:efi.Offset], raw[:efi.Offset]) || !bytes.Equal(img[efi.Offset+efi.Size:], raw[efi.Offset+efi.Size:]) {
			t.Fatalf("%d MiB: bytes outside the EFI partition changed", size>>20)
		}
		if img[efi.Offset+510] != 0x55 || img[efi.Offset+511] != 0xAA || bytes.Equal(img[efi.Offset:efi.Offset+efi.Size], raw[efi.Offset:efi.Offset+efi.Size]) {
			t.Fatalf("%d MiB: no FAT in the EFI partition", size>>20)
		}
	}
	if OverlayBootFiles("rpi_generic")["start4.elf"] == nil || OverlayBootFiles("rpi_5")["start4.elf"] != nil || OverlayBootFiles("other") != nil {
		t.Fatal("boot files per overlay")
	}
}
