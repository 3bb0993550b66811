package factory

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/blang/semver/v4"
	"io"
	"regexp"
	"strings"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"gopkg.in/yaml.v3"
)

// InstallerRef is an Image Factory installer image reference such as
// factory.talos.dev/metal-installer/<schematic id>:v1.14.5.
type InstallerRef struct {
	Registry    string // host[:port], e.g. factory.talos.dev
	Repository  string // installer, installer-secureboot, metal-installer, metal-installer-secureboot, ...
	SchematicID string // 64 lowercase hex digits
	Version     string // image tag, normally a Talos version such as v1.14.5
	Digest      string // optional "sha256:<hex>" pin
}

// NewInstallerRef returns the metal installer reference for a schematic on
// the factory served at registry (e.g. "factory.talos.dev").
func NewInstallerRef(registry, schematicID, version string) InstallerRef {
	return InstallerRef{Registry: registry, Repository: "metal-installer", SchematicID: schematicID, Version: version}
}

// String reassembles the reference.
func (r InstallerRef) String() string {
	s := r.Registry + "/" + r.Repository + "/" + r.SchematicID + ":" + r.Version
	if r.Digest != "" {
		s += "@" + r.Digest
	}

	return s
}

// SecureBoot reports whether the reference names a SecureBoot installer.
func (r InstallerRef) SecureBoot() bool {
	return strings.HasSuffix(r.Repository, "-secureboot")
}

// Platform returns the platform of a <platform>-installer repository, or ""
// for the legacy "installer" repositories.
func (r InstallerRef) Platform() string {
	p, _, ok := strings.Cut(r.Repository, "-installer")
	if !ok || strings.HasPrefix(r.Repository, "installer") {
		return ""
	}

	return p
}

var (
	registryRe   = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?$`)
	repositoryRe = regexp.MustCompile(`^(?:[a-z0-9]+-)?installer(?:-secureboot)?$`)
	schematicRe  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	tagRe        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	digestRe     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// anySchematicID finds a path element that is meant as a schematic ID.
	anySchematicID = regexp.MustCompile(`(?i)/[0-9a-f]{40,}(?::|$)`)
)

// ShortID shortens a schematic ID (or any hex digest) for display: its
// first 12 characters and an ellipsis.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

// IsSchematicID reports whether id has the shape of a schematic ID.
func IsSchematicID(id string) bool { return schematicRe.MatchString(id) }

// EmptySchematicID is the ID of the empty schematic (no overlay, no
// extensions). talosctl 1.14's default installer is
// factory.talos.dev/metal-installer/<EmptySchematicID>:<tag>
// (pkg/images/images.go): as generic as ghcr.io/siderolabs/installer.
const EmptySchematicID = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"

// IsGenericInstaller reports whether image is a stock installer without the
// Raspberry Pi overlay and without extensions: Sidero's
// ghcr.io/siderolabs/installer[-base][:tag] (or a mirror of it) or an Image
// Factory installer of the empty schematic.
func IsGenericInstaller(image string) bool {
	if ref, err := ParseInstallerRef(image); err == nil {
		return ref.SchematicID == EmptySchematicID
	}
	name := image
	if i := strings.IndexAny(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return strings.HasSuffix(name, "siderolabs/installer") || strings.HasSuffix(name, "siderolabs/installer-base") || name == "installer"
}

// ParseInstallerRef parses <registry>/<repository>/<schematic id>:<version>[@sha256:<hex>].
func ParseInstallerRef(ref string) (InstallerRef, error) {
	bad := func(format string, args ...any) (InstallerRef, error) {
		return InstallerRef{}, fmt.Errorf("installer image %q: %s", ref, fmt.Sprintf(format, args...))
	}

	if ref == "" {
		return InstallerRef{}, errors.New("installer image reference is empty")
	}

	if strings.ContainsAny(ref, " \t\r\n") {
		return bad("contains whitespace")
	}

	rest := ref

	var r InstallerRef

	if name, digest, ok := strings.Cut(rest, "@"); ok {
		if !digestRe.MatchString(digest) {
			return bad("digest %q must be sha256:<64 hex digits>", digest)
		}

		r.Digest = digest
		rest = name
	}

	if !anySchematicID.MatchString(rest) {
		return bad("has no schematic ID, so it is not an Image Factory installer (stock installers such as ghcr.io/siderolabs/installer lack the Raspberry Pi overlay and extensions)")
	}

	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return bad("expected <registry>/<installer repository>/<schematic id>:<version>, e.g. factory.talos.dev/metal-installer/<id>:%s", DefaultTalosVersion)
	}

	r.Registry, r.Repository = parts[0], parts[1]

	id, tag, ok := strings.Cut(parts[2], ":")
	if !ok || tag == "" {
		return bad("missing :<version> tag after the schematic ID")
	}

	r.SchematicID, r.Version = id, tag

	switch {
	case !registryRe.MatchString(r.Registry) || !(strings.ContainsAny(r.Registry, ".:") || r.Registry == "localhost"):
		return bad("%q is not a registry host", r.Registry)
	case !repositoryRe.MatchString(r.Repository):
		return bad("repository %q is not an Image Factory installer (installer, installer-secureboot, metal-installer, metal-installer-secureboot)", r.Repository)
	case !schematicRe.MatchString(r.SchematicID):
		return bad("schematic ID %q must be 64 lowercase hex digits", r.SchematicID)
	case !tagRe.MatchString(r.Version):
		return bad("version tag %q is not a valid image tag", r.Version)
	}

	return r, nil
}

// InstallerFile is what talosflash understood of a talos/installer-<role>.yaml.
type InstallerFile struct {
	Ref InstallerRef
	// Schematic was pasted into the file's comments (nil if absent).
	Schematic *schematic.Schematic
	// Source says where the reference was found, e.g.
	// "machine.install.image (document 1, line 4)".
	Source string
	Line   int // the reference's line in the file
}

// SchematicMismatchError reports that the schematic pasted into an installer
// file's comments does not produce the schematic ID of its installer image.
type SchematicMismatchError struct {
	RefID, CommentID string
	CommentLine      int
}

func (e *SchematicMismatchError) Error() string {
	return fmt.Sprintf("schematic in comments (line %d) has ID %s but the installer image uses %s: the image does not contain what the comment says",
		e.CommentLine, e.CommentID, e.RefID)
}

// ParseInstallerFile finds the installer image in a GitOps installer file.
// It understands, in any number of YAML documents:
//   - machine config (v1alpha1) or a patch of it: machine.install.image
//   - UnattendedInstallConfig (Talos v1.14+): installer.image
//
// A schematic pasted into the comments ("# overlay:" / "# customization:"
// lines) is parsed; if its ID differs from the reference's, both the file
// and a *SchematicMismatchError are returned.
func ParseInstallerFile(data []byte) (*InstallerFile, error) {
	type found struct {
		image, source string
		line          int
	}

	var refs []found

	dec := yaml.NewDecoder(bytes.NewReader(data))

	for docNum := 1; ; docNum++ {
		var doc yaml.Node

		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return nil, fmt.Errorf("installer file is not valid YAML: %w", err)
		}

		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}

		if root.Kind != yaml.MappingNode {
			continue // an empty document or a comment-only one
		}

		var (
			img   *yaml.Node
			field string
		)

		if kind := mappingValue(root, "kind"); kind != nil && kind.Value == "UnattendedInstallConfig" {
			img, field = lookupPath(root, "installer", "image"), "UnattendedInstallConfig installer.image"
		} else if kind == nil || kind.Value == "" {
			img, field = lookupPath(root, "machine", "install", "image"), "machine.install.image"
		}

		if img == nil || isNull(img) {
			continue
		}

		if img.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: %s must be a string", img.Line, field)
		}

		refs = append(refs, found{img.Value, fmt.Sprintf("%s (document %d, line %d)", field, docNum, img.Line), img.Line})
	}

	if len(refs) == 0 {
		return nil, errors.New("no installer image found: expected machine.install.image or an UnattendedInstallConfig with installer.image")
	}

	for _, f := range refs[1:] {
		if f.image != refs[0].image {
			return nil, fmt.Errorf("conflicting installer images: %q at %s and %q at %s", refs[0].image, refs[0].source, f.image, f.source)
		}
	}

	ref, err := ParseInstallerRef(refs[0].image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", refs[0].source, err)
	}

	out := &InstallerFile{Ref: ref, Source: refs[0].source, Line: refs[0].line}

	s, line, err := schematicFromComments(data)
	if err != nil {
		return nil, err
	}

	if s == nil {
		return out, nil
	}

	out.Schematic = s

	id, err := SchematicID(s)
	if err != nil {
		return nil, fmt.Errorf("schematic in comments (line %d): %w", line, err)
	}

	if id != ref.SchematicID {
		return out, &SchematicMismatchError{RefID: ref.SchematicID, CommentID: id, CommentLine: line}
	}

	return out, nil
}

func lookupPath(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}

		n = mappingValue(n, key)
	}

	return n
}

// schematicFromComments extracts the first schematic pasted as comment lines:
// a run of "#" lines whose first key is overlay: or customization:. The
// indentation after "#" of that first line is the block's left margin.
func schematicFromComments(data []byte) (*schematic.Schematic, int, error) {
	lines := strings.Split(string(data), "\n")

	for i := 0; i < len(lines); i++ {
		body, ok := commentBody(lines[i])
		if !ok {
			continue
		}

		trimmed := strings.TrimLeft(body, " ")
		if !isSchematicKeyLine(trimmed) {
			continue
		}

		margin := len(body) - len(trimmed)

		var block []string

		for j := i; j < len(lines); j++ {
			b, ok := commentBody(lines[j])
			if !ok {
				break
			}

			if strings.TrimSpace(b) == "" {
				block = append(block, "")

				continue
			}

			indent := len(b) - len(strings.TrimLeft(b, " "))
			if indent < margin {
				break
			}

			line := b[margin:]
			// Stop at free text after the schematic (e.g. "# schematic ID: ...").
			if indent == margin && !isSchematicKeyLine(line) {
				break
			}

			block = append(block, line)
		}

		s, err := schematic.Unmarshal([]byte(strings.Join(block, "\n") + "\n"))
		if err != nil {
			return nil, i + 1, fmt.Errorf("schematic in comments (line %d) is not valid: %v", i+1, err)
		}

		return s, i + 1, nil
	}

	return nil, 0, nil
}

// isSchematicKeyLine matches a top-level schematic key that opens a block
// ("overlay:", "customization: {}"), not prose such as "overlay: rpi".
func isSchematicKeyLine(line string) bool {
	for _, key := range []string{"overlay:", "customization:"} {
		if rest, ok := strings.CutPrefix(line, key); ok {
			rest = strings.TrimSpace(rest)

			return rest == "" || strings.HasPrefix(rest, "{")
		}
	}

	return false
}

// commentBody returns the text after "#" of a whole-line comment.
func commentBody(line string) (string, bool) {
	line = strings.TrimRight(line, "\r")

	t := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(t, "#") {
		return "", false
	}

	return strings.ReplaceAll(t[1:], "\t", "    "), true
}

// InstallerPatch renders a talos/installer-<role>.yaml for a profile: the
// machine config patch (talosctl gen config --config-patch-<role>) that sets
// its installer image, with the schematic pasted in comments so
// ParseInstallerFile can check the two agree. registry is the factory's
// registry host ("" -> factory.talos.dev).
//
// Which document depends on the profile's Talos version: before 1.14,
// machine.install.image. From 1.14, gen config writes an
// UnattendedInstallConfig and the node refuses .machine.install beside it
// (config/container/validate.go), so the patch is that document whole: a
// strategic merge of one holding only installer.image drops the generated
// provisioning, whose disk selector v1.14.0-rc.1 requires
// (config/types/runtime/unattended_install.go). The selector names the
// Pi's SD card; a Pi booted from its card is installed already and never
// uses it.
func InstallerPatch(p Profile, registry string) ([]byte, error) {
	if registry == "" {
		registry = NewClient(DefaultBaseURL, nil).RegistryHost()
	}

	s := p.Schematic()

	id, err := SchematicID(s)
	if err != nil {
		return nil, err
	}

	y, err := s.Marshal()
	if err != nil {
		return nil, err
	}

	ref := NewInstallerRef(registry, id, p.Version())

	var b strings.Builder

	fmt.Fprintf(&b, "# Installer for talosflash profile %q", p.Name)

	if p.Description != "" {
		fmt.Fprintf(&b, ": %s", strings.Join(strings.Fields(p.Description), " "))
	}

	fmt.Fprintf(&b, "\n# Schematic ID %s:\n#\n", id)

	for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
		b.WriteString("# " + line + "\n")
	}

	if unattendedInstall(p.Version()) {
		fmt.Fprintf(&b, "apiVersion: v1alpha1\nkind: UnattendedInstallConfig\ninstaller:\n  image: %s\n", ref)
		b.WriteString("provisioning:\n  diskSelector:\n    match: disk.dev_path == \"" + PiInstallDisk + "\" # required by Talos 1.14; unused on a Pi booted from its card\n")
	} else {
		fmt.Fprintf(&b, "machine:\n  install:\n    image: %s\n", ref)
	}

	return []byte(b.String()), nil
}

// PiInstallDisk is the Raspberry Pi's SD card as Talos names it.
const PiInstallDisk = "/dev/mmcblk0"

// unattendedInstall reports whether configs of Talos version v hold the
// installer in an UnattendedInstallConfig (Talos 1.14 and later; a version
// that does not parse is taken as the newest).
func unattendedInstall(v string) bool {
	sv, err := semver.ParseTolerant(v)
	if err != nil {
		return true
	}
	return sv.GTE(semver.Version{Major: 1, Minor: 14, Pre: []semver.PRVersion{{VersionStr: "alpha"}}})
}
