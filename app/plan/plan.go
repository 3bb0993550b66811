// Package plan holds the policy both front ends share, so the CLI and the
// GUI decide everything the same way and only fill jobs in and render
// their events: the run's settings (LoadSettings: the inventory's
// defaults), the one image decision (ChooseImage), the cards and the root
// decision (CheckCards, Elevation), the flash job (Flash), the apply job
// (CheckApply, Send), every inventory node in turn (ApplyAll, Bootstrap),
// and the cluster's status (Watch, Follow, Kubeconfig). boundaries_test.go
// keeps the front ends off the steps it owns.
package plan

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/userfile"
)

// Image is a resolved choice: which schematic, version and file to flash.
type Image struct {
	Label       string               // what the user picked, for messages: "role worker", an installer ref, a file
	Profile     *factory.Profile     // the profile when picked by role/profile
	Schematic   *schematic.Schematic // nil when only the ID is known
	SchematicID string
	Version     string
	Arch        string
	URL         string // remote .raw.xz; "" for a local file
	LocalPath   string // local .raw.xz or .raw image
	Installer   factory.InstallerRef
}

// FromProfile builds the profile's schematic and computes its ID offline;
// with register it also registers it (see Register).
func FromProfile(ctx context.Context, c *factory.Client, p factory.Profile, register bool) (*Image, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("profile %s: %w", p.Name, err)
	}
	s := p.Schematic()
	id, err := factory.SchematicID(s)
	if err != nil {
		return nil, fmt.Errorf("profile %s: compute schematic ID: %w", p.Name, err)
	}
	im := &Image{
		Label:       "profile " + BoardLabel(p.Name, p.TargetBoard()),
		Profile:     &p,
		Schematic:   s,
		SchematicID: id,
		Version:     p.Version(),
		Arch:        p.Architecture(),
		URL:         c.ImageURL(id, p.Version(), p.Architecture()),
		Installer:   factory.NewInstallerRef(c.RegistryHost(), id, p.Version()),
	}
	if register {
		if err := im.Register(ctx, c); err != nil {
			return nil, err
		}
	}
	return im, nil
}

// ProfileName is the profile the image was built from ("" when it was
// picked otherwise: an installer, a file).
func (im *Image) ProfileName() string {
	if im.Profile == nil {
		return ""
	}
	return im.Profile.Name
}

// Board is the board the image is built for: its profile's, else its
// schematic's overlay's ("" unknown: a local file, an ID alone, an overlay
// of no board).
func (im *Image) Board() factory.Board {
	if im.Profile != nil {
		if b := im.Profile.TargetBoard(); b != "" {
			return b
		}
	}
	b, _ := factory.BoardOfSchematic(im.Schematic)
	return b
}

// Register makes the factory able to build the image: for a profile it
// first checks the version, overlay and extensions exist there (the factory
// accepts unknown names and fails only when building the image), then
// registers the schematic and checks the factory agrees on the ID. Without
// a known schematic there is nothing to register.
func (im *Image) Register(ctx context.Context, c *factory.Client) error {
	if im.Profile != nil {
		if err := c.ValidateProfile(ctx, *im.Profile); err != nil {
			return fmt.Errorf("profile %s: %w", im.Profile.Name, err)
		}
	}
	if im.Schematic == nil {
		return nil
	}
	if _, err := c.Register(ctx, im.Schematic); err != nil {
		return fmt.Errorf("register schematic for %s: %w", im.Label, err)
	}
	return nil
}

// FromInstallerRef flashes the metal image of an existing installer
// reference. The image comes from the configured factory (c), whatever
// registry the reference names. Offline: only the schematic ID is known
// (see LookupSchematic).
func FromInstallerRef(c *factory.Client, ref factory.InstallerRef, arch string) *Image {
	if arch == "" {
		arch = factory.DefaultArch
	}
	im := &Image{
		Label:       ref.String(),
		SchematicID: ref.SchematicID,
		Version:     ref.Version,
		Arch:        arch,
		URL:         c.ImageURL(ref.SchematicID, ref.Version, arch),
		Installer:   ref,
	}
	return im
}

// lookupTimeout bounds LookupSchematic: it only adds information, and a
// factory that accepts and never answers must not hold up a flash.
const lookupTimeout = 5 * time.Second

// LookupSchematic fills in the schematic from the factory when it is not
// known; older factories can't return stored schematics, an unreachable one
// is given lookupTimeout: neither is an error.
func (im *Image) LookupSchematic(ctx context.Context, c *factory.Client) {
	if im.Schematic != nil || im.SchematicID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	if s, err := c.Schematic(ctx, im.SchematicID); err == nil {
		im.Schematic = s
	}
}

// FromInstallerData reads the contents of a talos/installer-<role>.yaml
// named name. A schematic pasted in its comments comes along (Register
// registers it); a comment that disagrees with the image is an error.
func FromInstallerData(c *factory.Client, name string, data []byte, arch string) (*Image, error) {
	inf, err := factory.ParseInstallerFile(data)
	if err != nil {
		return nil, fmt.Errorf("installer file %s: %w", name, err)
	}
	im := FromInstallerRef(c, inf.Ref, arch)
	im.Schematic = inf.Schematic
	im.Label = fmt.Sprintf("%s (%s)", name, inf.Source)
	return im, nil
}

// MaxInstallerFile bounds an installer file: a few lines of YAML.
const MaxInstallerFile = 1 << 20

// FromInstallerFile is FromInstallerData for a file on disk (a regular
// file of at most MaxInstallerFile bytes).
func FromInstallerFile(c *factory.Client, file string, arch string) (*Image, error) {
	data, err := ReadInstallerFile(file)
	if err != nil {
		return nil, err
	}
	return FromInstallerData(c, file, data, arch)
}

// ReadInstallerFile reads an installer file the user named: a regular
// file of at most MaxInstallerFile bytes (a FIFO or a device is refused,
// never read endlessly).
func ReadInstallerFile(file string) ([]byte, error) {
	data, err := userfile.Read(file, MaxInstallerFile)
	if err != nil {
		return nil, fmt.Errorf("read installer file: %w", err)
	}
	return data, nil
}

// ReadInstaller is ReadInstallerFile for one that is no local file (r,
// called name): at most MaxInstallerFile bytes are read.
func ReadInstaller(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInstallerFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read installer file: %w", err)
	case len(data) > MaxInstallerFile:
		return nil, fmt.Errorf("read installer file: %w", &userfile.TooLargeError{Path: name, Max: MaxInstallerFile})
	}
	return data, nil
}

// FromFile flashes a local image file as is.
func FromFile(p string) *Image {
	return &Image{Label: p, LocalPath: p}
}

// UseFormat picks the factory's compression for the download: "zst" for
// .raw.zst, anything else .raw.xz (again and again: it only swaps the
// suffix). A local file is left alone.
func (im *Image) UseFormat(format string) {
	base := strings.TrimSuffix(strings.TrimSuffix(im.URL, ".raw.xz"), ".raw.zst")
	if im.URL == "" || base == im.URL {
		return
	}
	if format == "zst" {
		im.URL = base + ".raw.zst"
	} else {
		im.URL = base + ".raw.xz"
	}
}

// FileName is the image's file name on the factory.
func (im *Image) FileName() string {
	if im.URL == "" {
		return path.Base(im.LocalPath)
	}
	return path.Base(im.URL)
}

// CacheKey is the image's key in the download cache: the factory it comes
// from (im.URL's) is part of it, so another factory's image is never reused.
func (im *Image) CacheKey() string {
	return imaging.FactoryCacheKey(im.URL, im.SchematicID, im.Version, im.FileName())
}

// Source is the imaging source for this image.
func (im *Image) Source(cache *imaging.Cache, hc *http.Client, noCache bool) imaging.Source {
	if im.LocalPath != "" {
		return imaging.Source{Path: im.LocalPath}
	}
	return imaging.Source{URL: im.URL, Key: im.CacheKey(), Cache: cache, NoCache: noCache, HTTPClient: hc}
}

// Extensions lists the official extensions in the image's schematic (nil if
// the schematic is unknown).
func (im *Image) Extensions() []string {
	if im.Schematic == nil {
		return nil
	}
	return im.Schematic.Customization.SystemExtensions.OfficialExtensions
}
