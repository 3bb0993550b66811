// Command fakefactory runs a fake Talos Image Factory on loopback, so a
// download, the flash and the app can be tried without the internet:
//
//	go run ./factory/factorytest/fakefactory --listen 127.0.0.1:8088
//	./talosflash-cli flash --role worker --device /tmp/card.img --factory http://127.0.0.1:8088 --yes
//
// It serves a generated disk-shaped image (protective MBR, GPT, partitions:
// imaging/imagetest; from 8 MiB on with a Talos-sized META, so flash
// --inventory works on it) as metal-<arch>.raw.xz and .raw.zst for every built-in
// role and every profile of --profiles, at each profile's Talos version, and
// answers the schematic, version and extension routes as factory/factorytest
// does. Only loopback addresses are accepted. Ctrl-C stops it.
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

func main() {
	srv, err := start(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakefactory:", err)
		os.Exit(2)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	srv.Close()
}

// start parses args, generates the image and starts the server; it prints
// what it serves to out.
func start(args []string, out io.Writer) (*factorytest.Server, error) {
	fs := flag.NewFlagSet("fakefactory", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", "127.0.0.1:8088", "loopback IP:port to listen on")
	profilesFile := fs.String("profiles", "", "YAML file with custom profiles to serve too (as given to talosflash --profiles)")
	size := fs.String("size", "32MiB", "raw size of the served image (a real one is 1246 MiB)")
	buildDelay := fs.Duration("build-delay", 0, "how long the first download of each image waits, as the real factory builds it (e.g. 3s)")
	seed := fs.Int64("seed", 1, "the image's content: the same seed, the same bytes")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	n, err := humanize.ParseBytes(*size)
	if err != nil || n < imagetest.MinSize || n > 2<<30 {
		return nil, fmt.Errorf("--size %q: want a size from 1MiB to 2GiB, e.g. 64MiB", *size)
	}
	profiles := factory.BuiltinProfiles()
	if *profilesFile != "" {
		custom, err := factory.LoadProfiles(*profilesFile)
		if err != nil {
			return nil, fmt.Errorf("--profiles: %w", err)
		}
		profiles = factory.MergeProfiles(profiles, custom)
	}
	type served struct{ name, id, version, arch string }
	var list []served
	versions := slices.Clone(factorytest.DefaultVersions)
	for _, p := range profiles {
		id, err := p.SchematicID()
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", p.Name, err)
		}
		list = append(list, served{p.Name, id, p.Version(), p.Architecture()})
		if !slices.Contains(versions, p.Version()) {
			versions = append(versions, p.Version())
		}
	}

	// Listen first: a large image takes a while to make, and a flash
	// started meanwhile waits for it (as for the real factory's build)
	// instead of being refused.
	srv, err := factorytest.Listen(*listen) // refuses a non-loopback address
	if err != nil {
		return nil, err
	}
	release := srv.HoldImages()
	defer release() // also on failure: nothing waits for an image that never comes
	srv.SetVersions(versions...)
	srv.SetBuildDelay(*buildDelay)
	fmt.Fprintf(out, "fake Image Factory at %s (loopback only; Ctrl-C stops it): preparing a %s image (.raw.xz, .raw.zst) …; downloads wait until it is ready\n",
		srv.URL, humanize.IBytes(n))
	began := time.Now()
	raw, err := servedImage(int64(n), *seed)
	if err != nil {
		srv.Close()
		return nil, err
	}
	xz, err := imagetest.XZBytes(raw, 1<<20) // 1 MiB blocks, as the factory's xz -0 -T0
	if err != nil {
		srv.Close()
		return nil, err
	}
	zst, err := imagetest.ZstdBytes(raw)
	if err != nil {
		srv.Close()
		return nil, err
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(raw))
	for _, s := range list {
		srv.AddImage(s.id, s.version, "metal-"+s.arch+".raw.xz", xz)
		srv.AddImage(s.id, s.version, "metal-"+s.arch+".raw.zst", zst)
	}
	release()
	fmt.Fprintf(out, "ready (%s): image: %s raw (%s as .raw.xz), sha256 %s, for:\n", time.Since(began).Round(100*time.Millisecond), humanize.IBytes(n), humanize.IBytes(uint64(len(xz))), sum)
	for _, s := range list {
		fmt.Fprintf(out, "  %-14s Talos %s %s, schematic %s\n", s.name, s.version, s.arch, s.id)
	}
	role := list[0].name
	for _, s := range list {
		if s.name == "worker" {
			role = s.name
		}
	}
	fmt.Fprintf(out, "try: ./talosflash-cli flash --role %s --device /tmp/card.img --factory %s --yes\n", role, srv.URL)
	fmt.Fprintf(out, "     ./talosflash --factory %s%s\n", srv.URL, profilesHint(*profilesFile))
	return srv, nil
}

// servedImage is the image every route serves: from 8 MiB on, one laid out
// like a Talos metal image (a 1 MiB blank META), so `flash --inventory` can
// write a node's META onto the card and `fakenode --card` boot from it;
// smaller, the plain disk-shaped image (its META is too small for that).
func servedImage(size, seed int64) ([]byte, error) {
	if size >= 8<<20 {
		return imagetest.TalosRaw(size, seed)
	}
	return imagetest.Raw(size, seed)
}

func profilesHint(file string) string {
	if file == "" {
		return ""
	}
	if strings.ContainsAny(file, " '\"") {
		return " --profiles '" + file + "'"
	}
	return " --profiles " + file
}
