package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/node/nodetest"
)

// upgrade --dry-run runs the real run's checks (the installer on the
// factory's registry, the version's extensions) and says "would fail" with
// the real run's exit code where the real run fails; it said "would pull
// the installer ... reboot" before.
func TestUpgradeDryRunWouldFailAsTheRealRun(t *testing.T) {
	pki := newTestPKI(t)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	for _, c := range []struct {
		name, role, want string
		factory          func(t *testing.T) *factorytest.Server
	}{
		{"installer the factory lacks", "worker", "installer image not available", func(t *testing.T) *factorytest.Server {
			fac := factorytest.New(t) // the worker schematic is not registered
			fac.SetVersions("v1.14.5", "v1.14.6")
			return fac
		}},
		{"extension the version lacks", "controlplane", "siderolabs/newt not offered for v1.14.6", func(t *testing.T) *factorytest.Server {
			fac, _, _, _ := upgradeFactory(t)
			c := factory.NewClient(fac.URL, fac.Client())
			offered, err := c.Extensions(context.Background(), "v1.14.5")
			if err != nil {
				t.Fatal(err)
			}
			var without []factory.ExtensionInfo
			for _, x := range offered {
				if x.Name != "siderolabs/newt" {
					without = append(without, x)
				}
			}
			fac.SetExtensions("v1.14.6", without)
			return fac
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fac := c.factory(t)
			n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, c.role), Worker: c.role == "worker", Bootstrapped: c.role != "worker"})
			args := []string{"upgrade", "--node", n.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--timeout", "1m"}
			dryCode, dryOut, dryErr := cliRun(t, append(args, "--dry-run")...)
			if dryCode == contract.ExitOK || !strings.Contains(dryOut, "dry run: would fail: ") || !strings.Contains(dryOut, c.want) || strings.Contains(dryOut, "would pull") {
				t.Fatalf("dry run: exit %d\n%s%s", dryCode, dryOut, dryErr)
			}
			code, stdout, stderr := cliRun(t, args...)
			if code != dryCode || !strings.Contains(stderr, c.want) {
				t.Fatalf("real run: exit %d (dry run %d)\n%s%s", code, dryCode, stdout, stderr)
			}
			if len(n.Upgrades()) != 0 || len(n.Pulled()) != 0 || n.Reboots() != 0 {
				t.Fatal("sent to the node")
			}
			assertNoFragments(t, frags, dryOut, dryErr, stdout, stderr)
		})
	}
}
