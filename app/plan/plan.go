// Package plan decides what image to flash from what the user chose (a role
// or profile, an installer reference, an installer file, a local image), so
// the CLI and the GUI resolve choices the same way.
package plan

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
)

// Image is a resolved choice: which schematic, version and file to flash.
type Image struct {
	Label       string               // what the user picked, for messages: "role worker", an installer ref, a file
	Role        string               // profile name when picked by role/profile, else ""
	Schematic   *schematic.Schematic // nil when only the ID is known
	SchematicID string
	Version     string
	Arch        string
	URL         string // remote .raw.xz; "" for a local file
	LocalPath   string // local .raw.xz or .raw image
	Installer   factory.InstallerRef
}

// FromProfile builds the profile's schematic, computes its ID offline and,
// when register is set, checks the version, overlay and extensions exist on
// the factory (it would accept unknown names and fail only when building the
// image), registers the schematic and checks the factory agrees on the ID
// (the image URL only works for a registered schematic).
func FromProfile(ctx context.Context, c *factory.Client, p factory.Profile, register bool) (*Image, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("profile %s: %w", p.Name, err)
	}
	s := p.Schematic()
	id, err := factory.SchematicID(s)
	if err != nil {
		return nil, fmt.Errorf("profile %s: compute schematic ID: %w", p.Name, err)
	}
	if register {
		if err := c.ValidateProfile(ctx, p); err != nil {
			return nil, fmt.Errorf("profile %s: %w", p.Name, err)
		}
		if _, err := c.Register(ctx, s); err != nil {
			return nil, fmt.Errorf("register schematic for %s: %w", p.Name, err)
		}
	}
	return &Image{
		Label:       "role " + p.Name,
		Role:        p.Name,
		Schematic:   s,
		SchematicID: id,
		Version:     p.Version(),
		Arch:        p.Architecture(),
		URL:         c.ImageURL(id, p.Version(), p.Architecture()),
		Installer:   factory.NewInstallerRef(c.RegistryHost(), id, p.Version()),
	}, nil
}

// FromInstallerRef flashes the metal image of an existing installer
// reference. The image comes from the configured factory (c), whatever
// registry the reference names; the schematic is looked up when the factory
// can return it (older factories can't: then only the ID is known).
func FromInstallerRef(ctx context.Context, c *factory.Client, ref factory.InstallerRef, arch string) *Image {
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
	if s, err := c.Schematic(ctx, ref.SchematicID); err == nil {
		im.Schematic = s
	}
	return im
}

// FromInstallerFile reads a talos/installer-<role>.yaml. A schematic pasted
// in its comments is registered (so the factory can build the image) when
// register is set; a comment that disagrees with the image is an error.
func FromInstallerFile(ctx context.Context, c *factory.Client, file string, arch string, register bool) (*Image, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read installer file: %w", err)
	}
	inf, err := factory.ParseInstallerFile(data)
	if err != nil {
		return nil, fmt.Errorf("installer file %s: %w", file, err)
	}
	if inf.Schematic != nil && register {
		if _, err := c.Register(ctx, inf.Schematic); err != nil {
			return nil, fmt.Errorf("register schematic from %s: %w", file, err)
		}
	}
	im := FromInstallerRef(ctx, c, inf.Ref, arch)
	if im.Schematic == nil {
		im.Schematic = inf.Schematic
	}
	im.Label = fmt.Sprintf("%s (%s in %s)", inf.Ref, inf.Source, file)
	return im, nil
}

// FromFile flashes a local image file as is.
func FromFile(p string) *Image {
	return &Image{Label: p, LocalPath: p}
}

// FileName is the image's file name on the factory.
func (im *Image) FileName() string {
	if im.URL == "" {
		return path.Base(im.LocalPath)
	}
	return path.Base(im.URL)
}

// CacheKey is the image's key in the download cache.
func (im *Image) CacheKey() string {
	return imaging.CacheKey(im.SchematicID, im.Version, im.FileName())
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
