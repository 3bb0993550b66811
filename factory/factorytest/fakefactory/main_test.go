package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/meta"
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

// The default image takes a node's META, so the README's inventory
// walkthrough (flash --inventory against this fake) can write it: the
// decoded download passes the same head check flash --inventory runs.
func TestDefaultImageTakesMETA(t *testing.T) {
	var out bytes.Buffer
	srv, err := start([]string{"--listen", "127.0.0.1:0"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	id, err := factory.BuiltinProfiles()[0].SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	p := factory.BuiltinProfiles()[0]
	resp, err := http.Get(factory.NewClient(srv.URL, nil).ImageURL(id, p.Version(), p.Architecture()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	zr, err := xz.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 32<<20 {
		t.Fatalf("image is %d bytes, want the default 32 MiB", len(raw))
	}
	if _, err := meta.CheckHead(raw[:imaging.HeadSize], int64(len(raw))); err != nil {
		t.Fatalf("the served image cannot take a node's META: %v", err)
	}
	if want := fmt.Sprintf("sha256 %x", sha256.Sum256(raw)); !strings.Contains(out.String(), want) {
		t.Fatalf("output does not announce the served image's %s:\n%s", want, out.String())
	}
}

// outputHook is start's output, calling on with each line as it comes.
type outputHook struct {
	mu    sync.Mutex
	lines []string
	on    func(line string)
}

func (o *outputHook) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		o.mu.Lock()
		o.lines = append(o.lines, l)
		o.mu.Unlock()
		if o.on != nil {
			o.on(l)
		}
	}
	return len(p), nil
}

var loopbackURL = regexp.MustCompile(`http://127\.[0-9.]+:[0-9]+`)

// It listens before it makes the image and says so; a download asked for
// meanwhile waits for the image (as the real factory's first download
// waits for its build), and it says when it is ready. It used to print
// nothing and refuse connections while a large image was made.
func TestListensWhilePreparingAndSaysReady(t *testing.T) {
	p := factory.BuiltinProfiles()[1]
	id, err := p.SchematicID()
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		status int
		body   []byte
		err    error
	}
	download := make(chan got, 1)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	out := &outputHook{}
	out.on = func(line string) {
		if !strings.Contains(line, "preparing") {
			if strings.HasPrefix(line, "ready") {
				note("ready")
			}
			return
		}
		url := loopbackURL.FindString(line) // never anything but the fake's loopback address
		if url == "" {
			t.Errorf("no loopback URL in %q", line)
			return
		}
		resp, err := http.Get(url + "/versions")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/versions while preparing: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		go func() {
			resp, err := http.Get(factory.NewClient(url, nil).ImageURL(id, p.Version(), p.Architecture()))
			if err != nil {
				download <- got{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			note("downloaded")
			download <- got{resp.StatusCode, body, err}
		}()
	}
	srv, err := start([]string{"--listen", "127.0.0.1:0", "--size", "2MiB"}, out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.Contains(strings.Join(out.lines, "\n"), "preparing") {
		t.Fatalf("it never said it was preparing the image:\n%s", strings.Join(out.lines, "\n"))
	}
	var d got
	select {
	case d = <-download:
	case <-time.After(30 * time.Second):
		t.Fatal("the download asked for while preparing never ended")
	}
	if d.err != nil || d.status != http.StatusOK || len(d.body) == 0 {
		t.Fatalf("download: %d %v (%d bytes)", d.status, d.err, len(d.body))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "ready" || order[1] != "downloaded" {
		t.Fatalf("order %q: want ready, then the download\n%s", order, strings.Join(out.lines, "\n"))
	}
	if !strings.Contains(out.lines[0], "preparing a 2.0 MiB image") || !strings.Contains(out.lines[0], "downloads wait") {
		t.Fatalf("first line %q", out.lines[0])
	}
}
