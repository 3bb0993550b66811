package cli

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
)

// checkFlags validates, by name, the flags commands share, right after
// parsing: a usage error (exit 2, with the fix) is found before any file,
// node or network is touched. The commands' own later checks stay as they
// are; this only moves the verdict first.
func checkFlags(fs *flag.FlagSet) error {
	cmd := fs.Name()
	value := func(name string) (string, bool) {
		f := fs.Lookup(name)
		if f == nil {
			return "", false
		}
		return f.Value.String(), true
	}
	if u, ok := value("factory"); ok {
		if err := checkFactoryURL(cmd, u); err != nil {
			return err
		}
	}
	if f := fs.Lookup("timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok && d <= 0 {
				return usageErrorf("%s: --timeout %s: want a positive duration such as 30s or 5m", cmd, d)
			}
		}
	}
	for _, name := range []string{"node", "n"} {
		v, _ := value(name)
		for _, ep := range strings.Split(v, ",") {
			if ep = strings.TrimSpace(ep); ep == "" {
				continue
			}
			if _, err := plan.ClusterAt(nil, ep); err != nil {
				return usageErrorf("%s: --node: %v: want an IP or IP:port such as 192.168.1.50", cmd, err)
			}
		}
	}
	if to, ok := value("to"); ok && to != "" {
		if err := checkTargetVersion(cmd, to); err != nil {
			return err
		}
	}
	if v, _ := value("version"); v != "" {
		if err := factory.ValidateVersion(v); err != nil {
			return usageErrorf("%s: --version: %v, e.g. %s", cmd, err, factory.DefaultTalosVersion)
		}
	}
	if f, ok := value("format"); ok && f != "zst" && f != "xz" {
		return usageErrorf("%s: --format %q: want zst or xz", cmd, f)
	}
	for _, name := range []string{"installer", "flashed-installer"} {
		if ref, _ := value(name); ref != "" {
			if _, err := factory.ParseInstallerRef(ref); err != nil {
				return usageErrorf("%s: --%s: %v", cmd, name, err)
			}
		}
	}
	// The profiles file is read whenever it is named: a broken one is
	// reported first, whatever the command would have used it for.
	profiles, _ := value("profiles")
	all, err := loadProfiles(profiles)
	if err != nil {
		return err
	}
	if role, ok := value("role"); ok && role != "" {
		if _, err := factory.FindProfile(all, role); err != nil {
			hint := "; custom ones come from --profiles FILE (see: talosflash profiles)"
			if profiles != "" {
				hint = " (see: talosflash profiles --profiles " + profiles + ")"
			}
			return usageErrorf("%s: --role: %v%s", cmd, err, hint)
		}
	}
	return nil
}

// checkFactoryURL accepts an http(s) base URL with a host.
func checkFactoryURL(cmd, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return usageErrorf("%s: --factory %q: want the Image Factory's base URL, such as %s (or http://127.0.0.1:8088 for the fake one)", cmd, raw, factory.DefaultBaseURL)
	}
	return nil
}

// checkTargetVersion checks --to: a Talos version ("v1.14.6", or "1.14.6"
// which upgrade prefixes), or for outdated also patch or latest.
func checkTargetVersion(cmd, to string) error {
	if cmd == "outdated" && (to == "patch" || to == "latest") {
		return nil
	}
	if _, err := plan.TalosVersion(to); err == nil {
		return nil
	}
	want := "a Talos version such as " + nextVersionExample() + " (see: talosflash outdated --to latest)"
	if cmd == "outdated" {
		want = "patch, latest or a Talos version such as " + nextVersionExample()
	}
	return usageErrorf("%s: --to %q: want %s", cmd, to, want)
}

// nextVersionExample is the default Talos version with its patch level
// raised, e.g. v1.14.6.
func nextVersionExample() string {
	v := factory.DefaultTalosVersion
	i := strings.LastIndex(v, ".")
	var patch int
	if _, err := fmt.Sscanf(v[i+1:], "%d", &patch); i < 0 || err != nil {
		return v
	}
	return fmt.Sprintf("%s.%d", v[:i], patch+1)
}
