package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
)

// A mistyped address is a usage error before any lookup (issue 39): digits
// and dots that are not an IPv4 address, or a dotted quad with a bad last
// part, were looked up as host names through the system's resolver (not
// on loopback), then failed as a network error. Every command that takes
// --node refuses it with exit 2 and "not an IP address or host name", and
// the resolver is never asked.
func TestMistypedAddressNeverReachesTheResolver(t *testing.T) {
	var asked atomic.Int32
	saved := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		asked.Add(1)
		return nil, errors.New("no resolver in this test")
	}}
	t.Cleanup(func() { net.DefaultResolver = saved })
	dir := t.TempDir()
	cfg := testkit.WriteFile(t, dir, "worker.yaml", string(testkit.Testdata(t, "worker.yaml")))
	tc := testkit.WriteFile(t, dir, "talosconfig", string(testkit.Testdata(t, "talos114/valid/talosconfig")))
	for _, typo := range []string{"127.0.3.3l", "127.0.3.310", "192.168.1.x1"} {
		for _, args := range [][]string{
			{"apply", "--node", typo, "--file", cfg},
			{"status", "--node", typo, "--talosconfig", tc},
			{"bootstrap", "--node", typo, "--talosconfig", tc},
			{"kubeconfig", "--node", typo, "--talosconfig", tc},
			{"patch", "--node", typo, "--talosconfig", tc, "--patch", "machine: {}"},
			{"upgrade", "--node", typo, "--talosconfig", tc, "--to", "v1.14.6"},
		} {
			code, stdout, stderr := cliRun(t, args...)
			if code != contract.ExitUsage || !strings.Contains(stderr+stdout, "not an IP address or host name") {
				t.Errorf("%v: exit %d, want %d saying it is no address:\n%s%s", args, code, contract.ExitUsage, stdout, stderr)
			}
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the resolver was asked %d times", n)
	}
}
