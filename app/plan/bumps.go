package plan

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

// What the user bumps by hand beside the installers (outdated): the
// Kubernetes version each machine config pins, against the Talos release's
// supported range, and the versions of the extensions that need an
// ExtensionServiceConfig (Newt) the factory has for that release.

// KubernetesCheck is one config's Kubernetes version against a Talos release.
type KubernetesCheck struct {
	File string
	node.KubeVersion
	Talos     string
	Range     *node.KubeRange // nil: no table for that Talos release
	Supported bool
}

// maxConfigFiles bounds the walk of a GitOps tree.
const maxConfigFiles = 500

// CheckKubernetes reads the machine configs under dir (YAML files with a
// v1alpha1 document; hidden folders skipped) and compares the Kubernetes
// version each pins (its kubelet's, see node.KubernetesVersions) with what
// Talos talos supports.
func CheckKubernetes(dir, talos string) ([]KubernetesCheck, error) {
	rng, ok := node.KubernetesRange(talos)
	var out []KubernetesCheck
	seen := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := strings.ToLower(filepath.Ext(path))
		if (ext != ".yaml" && ext != ".yml") || !d.Type().IsRegular() {
			return nil
		}
		if seen++; seen > maxConfigFiles {
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil || info.Size() > node.MaxConfigSize {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		vs := node.KubernetesVersions(data)
		if len(vs) == 0 {
			return nil
		}
		c := KubernetesCheck{File: path, KubeVersion: vs[0], Talos: talos}
		if ok {
			c.Range, c.Supported = &rng, rng.Supports(vs[0].Version)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// ExtensionVersion is an extension's version the factory has for a Talos release.
type ExtensionVersion struct {
	Name    string // siderolabs/newt
	Version string // its image tag ("" when the factory does not offer it)
	Talos   string
}

// ServiceExtensionVersions asks the factory which versions of the named
// extensions it has for Talos talos ("" Version: not offered).
func ServiceExtensionVersions(ctx context.Context, c *factory.Client, talos string, names []string) ([]ExtensionVersion, error) {
	if len(names) == 0 {
		return nil, nil
	}
	offered, err := c.Extensions(ctx, talos)
	if err != nil {
		return nil, err
	}
	var out []ExtensionVersion
	for _, n := range names {
		ev := ExtensionVersion{Name: n, Talos: talos}
		for _, o := range offered {
			if o.Name == n {
				if i := strings.LastIndex(o.Ref, ":"); i > strings.LastIndex(o.Ref, "/") {
					ev.Version = o.Ref[i+1:]
				}
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

// BumpTarget is the Talos release the installers go to: the highest
// update target, else the highest current version.
func BumpTarget(ups []factory.Update) string {
	best := ""
	for _, u := range ups {
		for _, v := range []string{u.Target, u.Current} {
			if v == "" {
				continue
			}
			if best == "" || newer(v, best) {
				best = v
			}
			break
		}
	}
	return best
}

func newer(a, b string) bool {
	va, ea := semver.ParseTolerant(a)
	vb, eb := semver.ParseTolerant(b)
	return ea == nil && (eb != nil || va.GT(vb))
}

// ConfiguredExtensions are the extensions needing an ExtensionServiceConfig
// that the updates' schematics hold, sorted.
func ConfiguredExtensions(ups []factory.Update) []string {
	var out []string
	for _, u := range ups {
		for _, e := range u.Extensions {
			for _, se := range node.ServiceExtensions() {
				if se.Extension == e.Name && !slices.Contains(out, e.Name) {
					out = append(out, e.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
