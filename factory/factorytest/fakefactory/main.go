// Command fakefactory runs a fake Talos Image Factory on loopback, so a
// download, the flash and the app can be tried without the internet:
//
//	go run ./factory/factorytest/fakefactory --listen 127.0.0.1:8088
//	./talosflash-cli flash --role worker --device /tmp/card.img --create-file --factory http://127.0.0.1:8088 --yes
//	./talosflash gui --factory http://127.0.0.1:8088 --allow-loop
//
// It serves a generated disk-shaped image (protective MBR, GPT, partitions:
// imaging/imagetest; from 8 MiB on with a Talos-sized META, so flash
// --inventory works on it, and in its EFI partition the boot files of the
// board's overlay, so `talosflash card` tells a Pi 5's card from a Pi
// 4's) as metal-<arch>.raw.xz and .raw.zst for every
// built-in role on every board (factory.Boards: four role x board
// schematics) and every profile of --profiles (an any-board profile on
// each board), each at every Talos version of --versions (by default the
// default release and the one before it, so a cluster flashed one release
// behind can be upgraded to the next) and at the profile's own version,
// from its board's minimum on. It answers the schematic, version,
// extension and overlay routes as factory/factorytest does. Only loopback
// addresses are accepted. Ctrl-C stops it.
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

	"github.com/blang/semver/v4"
	"github.com/dustin/go-humanize"
	"github.com/siderolabs/image-factory/pkg/schematic"

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
	versionList := fs.String("versions", strings.Join(defaultServedVersions(), ","),
		"Talos versions every profile is served at, comma-separated (besides its own); the default is the default release and the one before it")
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
	atVersions, err := parseVersions(*versionList)
	if err != nil {
		return nil, err
	}
	profiles := factory.BuiltinProfiles()
	if *profilesFile != "" {
		custom, err := factory.LoadProfiles(*profilesFile)
		if err != nil {
			return nil, fmt.Errorf("--profiles: %w", err)
		}
		profiles = factory.MergeProfiles(profiles, custom)
	}
	list, err := servedImages(profiles, atVersions)
	if err != nil {
		return nil, err
	}
	versions := slices.Clone(factorytest.DefaultVersions)
	for _, s := range list {
		versions = append(versions, s.versions...)
	}
	versions = sortVersions(versions)

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
	images, err := makeImages(list, int64(n), *seed)
	if err != nil {
		srv.Close()
		return nil, err
	}
	for _, s := range list {
		// Known to the factory, as the schematic of an image it serves is
		// (GET /schematics/<id>, the installer registry).
		if _, err := srv.AddSchematic(s.schematic); err != nil {
			srv.Close()
			return nil, err
		}
		im := images[bootKey(s, int64(n))]
		for _, v := range s.versions {
			srv.AddImage(s.id, v, "metal-"+s.arch+".raw.xz", im.xz)
			srv.AddImage(s.id, v, "metal-"+s.arch+".raw.zst", im.zst)
		}
	}
	release()
	first := images[bootKey(list[0], int64(n))]
	what := fmt.Sprintf("image: %s raw (%s as .raw.xz), sha256 %s", humanize.IBytes(n), humanize.IBytes(uint64(len(first.xz))), first.sum)
	if len(images) > 1 || bootKey(list[0], int64(n)) != "" {
		var sums []string
		for _, s := range list {
			if k := bootKey(s, int64(n)); !slices.Contains(sums, k) {
				sums = append(sums, k)
			}
		}
		for i, k := range sums {
			name := k
			if k == "" {
				name = "no board's"
			}
			sums[i] = name + " sha256 " + images[k].sum
		}
		what = fmt.Sprintf("images: %s raw (%s as .raw.xz), each with its overlay's boot files in the EFI partition: %s;", humanize.IBytes(n), humanize.IBytes(uint64(len(first.xz))), strings.Join(sums, ", "))
	}
	fmt.Fprintf(out, "ready (%s): %s for:\n", time.Since(began).Round(100*time.Millisecond), what)
	for _, s := range list {
		board := s.board.String()
		if board == "" {
			board = "-"
		}
		fmt.Fprintf(out, "  %-14s %-5s %s, schematic %s, Talos %s\n", s.name, board, s.arch, s.id, strings.Join(s.versions, ", "))
	}
	fmt.Fprintf(out, "try: %s\n", cliHint(list, srv.URL, *profilesFile))
	fmt.Fprintf(out, "     %s\n", appHint(srv.URL, *profilesFile))
	return srv, nil
}

// served is one image the fake serves: a profile built for its board, at
// the Talos versions listed.
type served struct {
	name      string
	board     factory.Board
	schematic *schematic.Schematic
	id, arch  string
	versions  []string
}

// servedImages lists each profile on each of its boards
// (factory.ExpandBoards) with the versions it is served at: --versions and
// its own, those below its board's minimum left out.
func servedImages(profiles []factory.Profile, versions []string) ([]served, error) {
	var list []served
	for _, p := range factory.ExpandBoards(profiles) {
		id, err := p.SchematicID()
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", p.Name, err)
		}
		var vs []string
		for _, v := range append(slices.Clone(versions), p.Version()) {
			at := p
			at.TalosVersion = v
			if at.CheckBoardVersion() == nil {
				vs = append(vs, v)
			}
		}
		list = append(list, served{name: p.Name, board: p.TargetBoard(), schematic: p.Schematic(), id: id, arch: p.Architecture(), versions: sortVersions(vs)})
	}
	return list, nil
}

// defaultServedVersions is the default release and the one before it
// (v1.14.4, v1.14.5 for v1.14.5): a cluster flashed at the first can be
// upgraded to the second.
func defaultServedVersions() []string {
	v := semver.MustParse(strings.TrimPrefix(factory.DefaultTalosVersion, "v"))
	if v.Patch == 0 {
		return []string{factory.DefaultTalosVersion}
	}
	prev := v
	prev.Patch--
	return []string{"v" + prev.String(), factory.DefaultTalosVersion}
}

// parseVersions reads --versions: Talos versions such as v1.14.4.
func parseVersions(list string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if err := factory.ValidateVersion(v); err != nil {
			return nil, fmt.Errorf("--versions: %w", err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--versions %q: name at least one Talos version, e.g. %s", list, factory.DefaultTalosVersion)
	}
	return sortVersions(out), nil
}

// sortVersions sorts Talos versions oldest first, once each.
func sortVersions(vs []string) []string {
	out := slices.Clone(vs)
	slices.SortFunc(out, func(a, b string) int {
		va, ea := semver.ParseTolerant(a)
		vb, eb := semver.ParseTolerant(b)
		if ea != nil || eb != nil {
			return strings.Compare(a, b)
		}
		return va.Compare(vb)
	})
	return slices.Compact(out)
}

// cliHint is a flash of the worker role (else the first image served)
// into a new file: a command that runs as written (with the profiles
// served: a profiles file may replace the built-in worker).
func cliHint(list []served, url, profilesFile string) string {
	role := list[0].name
	for _, s := range list {
		if s.name == factory.RoleWorker {
			role = s.name
		}
	}
	return fmt.Sprintf("./talosflash-cli flash --role %s --device /tmp/card.img --create-file --factory %s%s --yes", role, url, profilesHint(profilesFile))
}

// appHint starts the desktop app on this factory, loop devices selectable
// (the app's flags: gui.go in the repository's root).
func appHint(url, profilesFile string) string {
	return "./talosflash gui --factory " + url + " --allow-loop" + profilesHint(profilesFile)
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

// payload is one image served, compressed both ways.
type payload struct {
	xz, zst []byte
	sum     string // hex SHA-256 of the raw image
}

// bootKey is the overlay whose boot files the image served for s carries
// ("" none: another overlay, or an image too small for Talos's layout).
func bootKey(s served, size int64) string {
	o := s.schematic.Overlay
	if size < 8<<20 || o.Image != factory.RPiOverlayImage || factorytest.OverlayBootFiles(o.Name) == nil {
		return ""
	}
	return o.Name
}

// makeImages makes the images served: the generated image (servedImage)
// and, per Raspberry Pi overlay served, the same image with that
// overlay's boot files in its EFI partition (factorytest.OverlayBootFiles),
// so `talosflash card` reads a card's board back from its files as on a
// real card.
func makeImages(list []served, size, seed int64) (map[string]*payload, error) {
	raw, err := servedImage(size, seed)
	if err != nil {
		return nil, err
	}
	out := map[string]*payload{}
	for _, s := range list {
		key := bootKey(s, size)
		if out[key] != nil {
			continue
		}
		img := raw
		if key != "" {
			if img, err = factorytest.WithBootFiles(raw, factorytest.OverlayBootFiles(key)); err != nil {
				return nil, err
			}
		}
		xz, err := imagetest.XZBytes(img, 1<<20) // 1 MiB blocks, as the factory's xz -0 -T0
		if err != nil {
			return nil, err
		}
		zst, err := imagetest.ZstdBytes(img)
		if err != nil {
			return nil, err
		}
		out[key] = &payload{xz: xz, zst: zst, sum: fmt.Sprintf("%x", sha256.Sum256(img))}
	}
	return out, nil
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
