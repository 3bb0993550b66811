package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

type kubeVersionJSON struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Field     string `json:"field"`
	Version   string `json:"version"`
	Supported *bool  `json:"supported"` // null: no table for that Talos release
	Range     string `json:"range,omitempty"`
	Source    string `json:"source,omitempty"`
}

type extensionVersionJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"` // "" when the factory does not offer it
}

type versionsJSON struct {
	Talos      string                 `json:"talos"`
	Kubernetes []kubeVersionJSON      `json:"kubernetes"`
	Extensions []extensionVersionJSON `json:"extensions"`
}

// versionReport is what the user bumps by hand beside the installers, for
// the Talos release the installers go to.
type versionReport struct {
	Talos      string
	Kubernetes []plan.KubernetesCheck  // each config's version against the release's range
	Extensions []plan.ExtensionVersion // those that need an ExtensionServiceConfig (Newt)
}

// reportVersions checks each config's Kubernetes version against its
// supported range and asks the factory for the version of each extension
// that needs an ExtensionServiceConfig, for the Talos release the
// installers go to (none: nothing to say), and shows them.
func reportVersions(ctx context.Context, env Env, dir string, ups []factory.Update, c *factory.Client, p outdatedPrinter) error {
	talos := plan.BumpTarget(ups)
	if talos == "" {
		return nil
	}
	checks, err := plan.CheckKubernetes(dir, talos)
	if err != nil {
		return withCode(contract.ExitUsage, fmt.Errorf("outdated: %w", err))
	}
	exts, err := plan.ServiceExtensionVersions(ctx, c, talos, plan.ConfiguredExtensions(ups))
	if err != nil {
		fmt.Fprintf(env.Stderr, "warning: the factory's extensions for %s: %v\n", talos, err)
	}
	return p.Versions(versionReport{Talos: talos, Kubernetes: checks, Extensions: exts})
}

// outdatedPrinter shows `outdated`: the version report, then the answer
// (each reference, what was or can be written).
type outdatedPrinter interface {
	answerPrinter
	Versions(r versionReport) error
}

func newOutdatedPrinter(jsonOut bool, env Env) outdatedPrinter {
	if jsonOut {
		return outdatedJSONPrinter{answerJSON{env}}
	}
	return outdatedText{answerText{env}}
}

// outdatedText prints the report for people, on stdout.
type outdatedText struct{ answerText }

func (p outdatedText) Versions(r versionReport) error {
	w := p.env.Stdout
	for _, k := range r.Kubernetes {
		where := fmt.Sprintf("%s:%d", filepath.Clean(k.File), k.Line)
		switch {
		case k.Range == nil:
			fmt.Fprintf(w, "%s  Kubernetes %s (%s): no support table for Talos %s here\n", where, k.Version, k.Field, r.Talos)
		case k.Supported:
			fmt.Fprintf(w, "%s  Kubernetes %s (%s): supported by Talos %s (%s)\n", where, k.Version, k.Field, r.Talos, k.Range)
		default:
			fmt.Fprintf(w, "%s  Kubernetes %s (%s): NOT supported by Talos %s (it supports %s): bump Kubernetes (%s) before or with Talos\n",
				where, k.Version, k.Field, r.Talos, k.Range, node.Talosctl("", "<control-plane-ip>", "upgrade-k8s", "--to", "<version>"))
		}
	}
	for _, e := range r.Extensions {
		if e.Version == "" {
			fmt.Fprintf(w, "%s: not offered by the factory for Talos %s\n", e.Name, r.Talos)
			continue
		}
		fmt.Fprintf(w, "%s for Talos %s on the factory: %s\n", e.Name, r.Talos, e.Version)
	}
	return nil
}

// outdatedJSONPrinter writes the report as the versions line, before the
// outdated line (docs/JSON.md).
type outdatedJSONPrinter struct{ answerJSON }

func (p outdatedJSONPrinter) Versions(r versionReport) error {
	v := versionsJSON{Talos: r.Talos, Kubernetes: []kubeVersionJSON{}, Extensions: []extensionVersionJSON{}}
	for _, k := range r.Kubernetes {
		j := kubeVersionJSON{File: k.File, Line: k.Line, Field: k.Field, Version: k.Version}
		if k.Range != nil {
			ok := k.Supported
			j.Supported, j.Range, j.Source = &ok, k.Range.String(), k.Range.Source
		}
		v.Kubernetes = append(v.Kubernetes, j)
	}
	for _, e := range r.Extensions {
		v.Extensions = append(v.Extensions, extensionVersionJSON{e.Name, e.Version})
	}
	return contract.WriteAnswer(p.env.Stdout, contract.TypeVersions, v)
}
