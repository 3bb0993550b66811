package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
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

// reportVersions says what the user bumps by hand beside the installers,
// for the Talos release the installers go to: each config's Kubernetes
// version against its supported range, and the factory's version of each
// extension that needs an ExtensionServiceConfig (Newt).
func reportVersions(ctx context.Context, env Env, dir string, ups []factory.Update, c *factory.Client, jsonOut bool) error {
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
	if jsonOut {
		v := versionsJSON{Talos: talos, Kubernetes: []kubeVersionJSON{}, Extensions: []extensionVersionJSON{}}
		for _, k := range checks {
			j := kubeVersionJSON{File: k.File, Line: k.Line, Field: k.Field, Version: k.Version}
			if k.Range != nil {
				ok := k.Supported
				j.Supported, j.Range, j.Source = &ok, k.Range.String(), k.Range.Source
			}
			v.Kubernetes = append(v.Kubernetes, j)
		}
		for _, e := range exts {
			v.Extensions = append(v.Extensions, extensionVersionJSON{e.Name, e.Version})
		}
		return contract.WriteAnswer(env.Stdout, contract.TypeVersions, v)
	}
	for _, k := range checks {
		where := fmt.Sprintf("%s:%d", filepath.Clean(k.File), k.Line)
		switch {
		case k.Range == nil:
			fmt.Fprintf(env.Stdout, "%s  Kubernetes %s (%s): no support table for Talos %s here\n", where, k.Version, k.Field, talos)
		case k.Supported:
			fmt.Fprintf(env.Stdout, "%s  Kubernetes %s (%s): supported by Talos %s (%s)\n", where, k.Version, k.Field, talos, k.Range)
		default:
			fmt.Fprintf(env.Stdout, "%s  Kubernetes %s (%s): NOT supported by Talos %s (it supports %s): bump Kubernetes (talosctl upgrade-k8s) before or with Talos\n",
				where, k.Version, k.Field, talos, k.Range)
		}
	}
	for _, e := range exts {
		if e.Version == "" {
			fmt.Fprintf(env.Stdout, "%s: not offered by the factory for Talos %s\n", e.Name, talos)
			continue
		}
		fmt.Fprintf(env.Stdout, "%s for Talos %s on the factory: %s\n", e.Name, talos, e.Version)
	}
	return nil
}
