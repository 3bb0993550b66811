package factory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/internal/userfile"
)

// MaxScannedFile bounds each file `outdated` reads; bigger files are skipped.
const MaxScannedFile = 1 << 20

var (
	// refInText finds Image Factory installer references anywhere in a file
	// (machine configs, patches, talhelper files, docs).
	refInText = regexp.MustCompile(`[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]{1,5})?/(?:[a-z0-9]+-)?installer(?:-secureboot)?/[0-9a-f]{64}:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(?:@sha256:[0-9a-f]{64})?`)
	// genericInText finds the stock installer, which has no overlay and no extensions.
	genericInText = regexp.MustCompile(`ghcr\.io/siderolabs/installer(?:-base)?:v[0-9][A-Za-z0-9_.-]*`)
)

// InstallerUse is one installer reference found in a file.
type InstallerUse struct {
	File string
	Line int
	Raw  string // the reference exactly as written
	Ref  InstallerRef
	// Schematic is the schematic pasted in the file's comments (installer
	// files written by talosflash carry it), nil if absent.
	Schematic *schematic.Schematic
}

// GenericUse is a stock installer reference (ghcr.io/siderolabs/installer, or
// the factory installer of the empty schematic, EmptySchematicID):
// upgrading with it drops the Raspberry Pi overlay and every extension.
type GenericUse struct {
	File string
	Line int
	Raw  string
}

// FindInstallerRefs walks dir for installer-*.yaml files and any other
// YAML/JSON/Markdown file holding an installer reference. Hidden
// directories are skipped; files larger than MaxScannedFile are skipped.
func FindInstallerRefs(dir string) ([]InstallerUse, []GenericUse, error) {
	var (
		uses    []InstallerUse
		generic []GenericUse
	)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(name) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link to a file is that file (outdated --write rewrites its
			// target); links to directories are not followed (no loops).
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		data, err := userfile.Read(path, MaxScannedFile)
		var tooLarge *userfile.TooLargeError
		if errors.As(err, &tooLarge) {
			return nil
		}
		if err != nil {
			return err
		}
		u, g := findInText(path, data)
		uses, generic = append(uses, u...), append(generic, g...)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	return uses, generic, nil
}

func scanned(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".md" || strings.HasPrefix(name, "installer-")
}

func findInText(path string, data []byte) ([]InstallerUse, []GenericUse) {
	var (
		uses    []InstallerUse
		generic []GenericUse
		pasted  *schematic.Schematic
	)
	if f, err := ParseInstallerFile(data); err == nil && f != nil {
		pasted = f.Schematic
	}
	for _, loc := range refInText.FindAllIndex(data, -1) {
		raw := string(data[loc[0]:loc[1]])
		if loc[1] < len(data) && isTagByte(data[loc[1]]) {
			continue // the tag goes on: not a reference this pattern understands
		}
		ref, err := ParseInstallerRef(raw)
		if err != nil {
			continue
		}
		if ref.SchematicID == EmptySchematicID { // talosctl 1.14's default: the generic installer
			if !inYAMLComment(path, data, loc[0]) {
				generic = append(generic, GenericUse{File: path, Line: 1 + bytes.Count(data[:loc[0]], []byte("\n")), Raw: raw})
			}
			continue
		}
		use := InstallerUse{File: path, Line: 1 + bytes.Count(data[:loc[0]], []byte("\n")), Raw: raw, Ref: ref}
		if pasted != nil {
			if id, err := SchematicID(pasted); err == nil && id == ref.SchematicID {
				use.Schematic = pasted
			}
		}
		uses = append(uses, use)
	}
	for _, loc := range genericInText.FindAllIndex(data, -1) {
		if !inYAMLComment(path, data, loc[0]) {
			generic = append(generic, GenericUse{File: path, Line: 1 + bytes.Count(data[:loc[0]], []byte("\n")), Raw: string(data[loc[0]:loc[1]])})
		}
	}
	return uses, generic
}

// inYAMLComment reports whether offset i of a YAML file lies in a comment
// (a # at the line's start or after a blank): talosctl gen config writes
// the stock installer into its example comments, which install nothing.
// Quoted strings holding " #" are not told apart: such a line is skipped.
func inYAMLComment(path string, data []byte, i int) bool {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".yaml" && ext != ".yml" {
		return false
	}
	line := data[bytes.LastIndexByte(data[:i], '\n')+1 : i]
	return bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) || bytes.Contains(line, []byte(" #")) || bytes.Contains(line, []byte("\t#"))
}

func isTagByte(b byte) bool {
	return b == '_' || b == '.' || b == '-' || b == '@' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// ExtensionChange is one extension of a schematic compared between the
// current and the target Talos version.
type ExtensionChange struct {
	Name     string // siderolabs/newt
	From, To string // the extension image tags the factory lists ("" if unknown)
	Missing  bool   // not offered for the target version: the upgrade would lose it
}

// Update is what can be updated for one installer reference.
type Update struct {
	Use     InstallerUse
	Current string // the reference's version
	Patch   string // newest stable release of the same minor, if newer ("" otherwise)
	Latest  string // newest stable release, if newer
	Target  string // the version --write would use ("" = nothing to do)
	NewRaw  string // the rewritten reference
	// Extensions compares the schematic's extensions for Current and Target
	// (nil when the schematic is unknown: see Note).
	Extensions []ExtensionChange
	Note       string // why something could not be checked
	Blocked    string // why Target must not be written (an extension is missing)
}

func (u *Update) addNote(n string) {
	if u.Note != "" {
		u.Note += "; "
	}
	u.Note += n
}

// Policy picks the target version: "patch" (newest of the same minor, the
// default), "latest", or an explicit vX.Y.Z.
type Policy string

// CheckUpdates compares every reference with the factory's versions and
// extension lists. Lists are fetched once per version.
func (c *Client) CheckUpdates(ctx context.Context, uses []InstallerUse, policy Policy) ([]Update, error) {
	if policy == "" {
		policy = "patch"
	}
	versions, err := c.Versions(ctx)
	if err != nil {
		return nil, err
	}
	stable := stableVersions(versions)
	extCache := map[string][]ExtensionInfo{}
	extsFor := func(v string) ([]ExtensionInfo, error) {
		if l, ok := extCache[v]; ok {
			return l, nil
		}
		l, err := c.Extensions(ctx, v)
		if err != nil {
			return nil, err
		}
		extCache[v] = l
		return l, nil
	}
	// The factory's answer per schematic ID, a failure included: a second
	// reference to a schematic the factory could not return is blocked too.
	type schematicAnswer struct {
		sch *schematic.Schematic
		err error
	}
	schCache := map[string]schematicAnswer{}

	var out []Update
	for _, u := range uses {
		up := Update{Use: u, Current: u.Ref.Version}
		cur, err := parseTag(u.Ref.Version)
		if err != nil {
			up.Note = "version tag is not vX.Y.Z: not compared"
			out = append(out, up)
			continue
		}
		for _, v := range stable {
			if v.sv.GT(cur) {
				up.Latest = v.tag
				if v.sv.Major == cur.Major && v.sv.Minor == cur.Minor {
					up.Patch = v.tag
				}
			}
		}
		switch policy {
		case "patch":
			up.Target = up.Patch
		case "latest":
			up.Target = up.Latest
		default:
			want, err := parseTag(string(policy))
			if err != nil {
				return nil, fmt.Errorf("--to %q: want patch, latest or vX.Y.Z", policy)
			}
			if !slices.Contains(versions, string(policy)) {
				return nil, fmt.Errorf("%w %s at %s", ErrUnknownVersion, policy, c.BaseURL())
			}
			if want.GT(cur) {
				up.Target = string(policy)
			}
		}
		if up.Target == "" {
			out = append(out, up)
			continue
		}
		if tv, err := parseTag(up.Target); err == nil && (tv.Major != cur.Major || tv.Minor > cur.Minor+1) {
			up.addNote(fmt.Sprintf("Talos is upgraded one minor release at a time: go through the newest v%d.%d first", cur.Major, cur.Minor+1))
		}

		sch := u.Schematic
		if sch == nil {
			a, ok := schCache[u.Ref.SchematicID]
			if !ok {
				a.sch, a.err = c.Schematic(ctx, u.Ref.SchematicID)
				if a.err == nil && a.sch == nil {
					a.err = errors.New("empty answer")
				}
				schCache[u.Ref.SchematicID] = a
			}
			if a.err != nil {
				// Without the extensions list the new version may drop one: never written.
				up.Blocked = "extensions not compared: the schematic is not in the file's comments and the factory did not return it (" + shortErr(a.err) + "); paste the schematic into the file's comments or check the factory"
			}
			sch = a.sch
		}
		if sch != nil {
			if err := c.compareExtensions(&up, sch, extsFor); err != nil {
				return nil, err
			}
		}
		next := u.Ref
		next.Version = up.Target
		if u.Ref.Digest != "" {
			// A digest pins the old image: ask for the new one.
			if d, err := c.InstallerDigest(ctx, next); err == nil && d != "" {
				next.Digest = d
			} else {
				next.Digest = ""
				up.addNote("the digest pin is dropped (the factory did not name the new digest)")
			}
		}
		up.NewRaw = next.String()
		out = append(out, up)
	}
	return out, nil
}

func (c *Client) compareExtensions(up *Update, sch *schematic.Schematic, extsFor func(string) ([]ExtensionInfo, error)) error {
	names := sch.Customization.SystemExtensions.OfficialExtensions
	if len(names) == 0 {
		up.Extensions = []ExtensionChange{}
		return nil
	}
	from, err := extsFor(up.Current)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	to, err := extsFor(up.Target)
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range names {
		ch := ExtensionChange{Name: n, From: extensionTag(from, n), To: extensionTag(to, n)}
		if !slices.ContainsFunc(to, func(e ExtensionInfo) bool { return e.Name == n }) {
			ch.Missing = true
			missing = append(missing, n)
		}
		up.Extensions = append(up.Extensions, ch)
	}
	if len(missing) > 0 {
		up.Blocked = fmt.Sprintf("%s not offered for %s: the node would lose %s", strings.Join(missing, ", "), up.Target, plural(len(missing), "it", "them"))
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// extensionTag is the tag of the extension's image ref
// ("ghcr.io/siderolabs/newt:1.4.0@sha256:..." -> "1.4.0").
func extensionTag(list []ExtensionInfo, name string) string {
	for _, e := range list {
		if e.Name != name {
			continue
		}
		ref, _, _ := strings.Cut(e.Ref, "@")
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			return ref[i+1:]
		}
		return ""
	}
	return ""
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

type versionTag struct {
	tag string
	sv  semver.Version
}

func parseTag(v string) (semver.Version, error) {
	if !strings.HasPrefix(v, "v") {
		return semver.Version{}, fmt.Errorf("%q: want vX.Y.Z", v)
	}
	return semver.Parse(v[1:])
}

// stableVersions are the releases (no pre-release tags), oldest first.
func stableVersions(versions []string) []versionTag {
	var out []versionTag
	for _, v := range versions {
		sv, err := parseTag(v)
		if err != nil || len(sv.Pre) > 0 {
			continue
		}
		out = append(out, versionTag{v, sv})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sv.LT(out[j].sv) })
	return out
}

// Rewrite returns data with every reference of updates (for this file)
// replaced by its new value; every other byte is kept, comments included.
// Blocked updates and updates without a target are left out.
func Rewrite(data []byte, updates []Update) []byte {
	repl := map[string]string{}
	for _, u := range updates {
		if u.Target != "" && u.Blocked == "" && u.NewRaw != "" {
			repl[u.Use.Raw] = u.NewRaw
		}
	}
	if len(repl) == 0 {
		return data
	}
	var out bytes.Buffer
	last := 0
	for _, loc := range refInText.FindAllIndex(data, -1) {
		if loc[1] < len(data) && isTagByte(data[loc[1]]) {
			continue
		}
		nw, ok := repl[string(data[loc[0]:loc[1]])]
		if !ok {
			continue
		}
		out.Write(data[last:loc[0]])
		out.WriteString(nw)
		last = loc[1]
	}
	out.Write(data[last:])
	return out.Bytes()
}
