package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos112"
	"github.com/siderolabs/talos/pkg/machinery/compatibility/talos113"
	"gopkg.in/yaml.v3"
)

// KubeVersion is the Kubernetes version a config pins: the tag of a
// Kubernetes component's image (public fields, see redact.go).
type KubeVersion struct {
	Version string // e.g. v1.37.1
	Field   string // where: "KubeletConfig image", "machine.kubelet.image", ...
	Line    int
}

// KubernetesVersions lists the Kubernetes versions a machine config pins,
// kubelet first: Talos 1.14's KubeletConfig and KubeAPIServerConfig
// images, else v1alpha1 machine.kubelet.image and cluster.apiServer.image.
// A config that pins none runs its Talos' default Kubernetes.
func KubernetesVersions(config []byte) []KubeVersion {
	var out []KubeVersion
	dec := yaml.NewDecoder(bytes.NewReader(config))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if !errors.Is(err, io.EOF) {
				return out // the rest is not YAML: what was read stands
			}
			return out
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		var paths []struct{ field, path string }
		switch scalarAt(root, "kind") {
		case "":
			paths = append(paths, struct{ field, path string }{"machine.kubelet.image", "machine.kubelet.image"},
				struct{ field, path string }{"cluster.apiServer.image", "cluster.apiServer.image"})
		case "KubeletConfig":
			paths = append(paths, struct{ field, path string }{"KubeletConfig image", "image"})
		case "KubeAPIServerConfig":
			paths = append(paths, struct{ field, path string }{"KubeAPIServerConfig image", "image"})
		}
		for _, p := range paths {
			img, line := scalarLineAt(root, strings.Split(p.path, ".")...)
			if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") && i >= 0 {
				tag := strings.SplitN(img[i+1:], "@", 2)[0]
				if _, err := semver.ParseTolerant(tag); err == nil {
					out = append(out, KubeVersion{Version: tag, Field: p.field, Line: line})
				}
			}
		}
	}
}

// KubeRange is the Kubernetes versions a Talos release supports.
type KubeRange struct {
	Talos    string // major.minor, e.g. "1.14"
	Min, Max semver.Version
	Source   string
}

// String is "1.32.0 to 1.37.x".
func (r KubeRange) String() string {
	return fmt.Sprintf("%d.%d.0 to %d.%d.x", r.Min.Major, r.Min.Minor, r.Max.Major, r.Max.Minor)
}

// Supports reports whether Kubernetes v is in the range.
func (r KubeRange) Supports(v string) bool {
	sv, err := semver.ParseTolerant(v)
	if err != nil {
		return false
	}
	sv.Pre, sv.Build = nil, nil
	return sv.GE(r.Min) && sv.LE(r.Max)
}

// kubeRanges: Talos' own compatibility constants (MinimumKubernetesVersion,
// MaximumKubernetesVersion), from machinery where it has them, 1.14's from
// its source (the module proxy serves no machinery v1.14).
var kubeRanges = []KubeRange{
	{"1.12", talos112.MinimumKubernetesVersion, talos112.MaximumKubernetesVersion, "pkg/machinery/compatibility/talos112 (machinery v1.13.9)"},
	{"1.13", talos113.MinimumKubernetesVersion, talos113.MaximumKubernetesVersion, "pkg/machinery/compatibility/talos113 (machinery v1.13.9)"},
	{"1.14", semver.MustParse("1.32.0"), semver.MustParse("1.37.99"), "pkg/machinery/compatibility/talos114/talos114.go (siderolabs/talos v1.14.0-rc.1)"},
}

// KubernetesRange is the Kubernetes range Talos talosVersion supports
// (false: a release talosflash has no table for).
func KubernetesRange(talosVersion string) (KubeRange, bool) {
	v, err := semver.ParseTolerant(talosVersion)
	if err != nil {
		return KubeRange{}, false
	}
	mm := fmt.Sprintf("%d.%d", v.Major, v.Minor)
	for _, r := range kubeRanges {
		if r.Talos == mm {
			return r, true
		}
	}
	return KubeRange{}, false
}
