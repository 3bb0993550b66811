package node

import (
	"fmt"
	"strings"
)

// ServiceExtensionOf is the ServiceExtension of an extension (an official
// name or an image reference, extensionName), if it waits for an
// ExtensionServiceConfig.
func ServiceExtensionOf(ext string) (ServiceExtension, bool) {
	name := extensionName(ext)
	for _, se := range serviceExtensions {
		if se.Extension == name {
			return se, true
		}
	}
	return ServiceExtension{}, false
}

// MissingServiceConfigs are the extensions of an image (exts) that wait
// for an ExtensionServiceConfig cfg lacks: each one keeps a node that
// boots the image with cfg in the booting stage until BootTimeout reboots
// it (the incident). The one rule, asked before any card (an inventory's
// profile against its config) and at apply (the booted image, InspectWith).
func MissingServiceConfigs(exts []string, cfg *Config) []ServiceExtension {
	var out []ServiceExtension
	for _, e := range exts {
		if se, ok := ServiceExtensionOf(e); ok && !cfg.HasExtensionService(se.ConfigName) {
			out = append(out, se)
		}
	}
	return out
}

// Document is the ExtensionServiceConfig se waits for, to paste into a
// config (values to fill in).
func (se ServiceExtension) Document() string {
	doc := fmt.Sprintf("---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: %s\n", se.ConfigName)
	if len(se.Env) > 0 {
		return doc + "environment:\n" + envLines(se.Env)
	}
	return doc + "# configFiles / environment: see the extension's README in siderolabs/extensions\n"
}

// EnvText is the variables se needs, for one line of text ("" unknown).
func (se ServiceExtension) EnvText() string { return strings.Join(se.Env, ", ") }
