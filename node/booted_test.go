package node_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// Three Pis booted together are told apart by what they booted: the Newt
// image, the worker image, and a Talos <= 1.12 node without extension
// statuses; a configured node is listed as such.
func TestDiscoverMixedImages(t *testing.T) {
	port := testkit.FreePort(t, "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6")
	at := func(h string) string { return net.JoinHostPort(h, strconv.Itoa(port)) }
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.1"), Schematic: cpSchematic(), Hostname: "talos-aaa-111"})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.2"), Schematic: workerSchematic(), Hostname: "talos-bbb-222"})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.3"), Legacy: true, Hostname: "talos-ccc-333"})
	nodetest.Start(t, nodetest.Options{Addr: at("127.0.0.5"), Configured: true})

	nodes, err := node.Discover(context.Background(), node.DiscoverOptions{
		Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/29")}, Port: port, DialTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("found %d nodes: %+v", len(nodes), nodes)
	}
	cp, wk, old, conf := nodes[0], nodes[1], nodes[2], nodes[3]
	if cp.Booted == nil || cp.Booted.SchematicID != cpID || !slices.Equal(cp.Booted.Extensions, []string{"newt"}) ||
		cp.Booted.Overlay != "siderolabs/sbc-raspberrypi" || !cp.Booted.HasExtension("siderolabs/newt") || cp.TalosVersion != "v1.14.5" || cp.Arch != "arm64" {
		t.Errorf("newt node = %+v booted %+v", cp, cp.Booted)
	}
	if wk.Booted == nil || wk.Booted.SchematicID != workerID || len(wk.Booted.Extensions) != 0 || wk.Booted.HasExtension("siderolabs/newt") {
		t.Errorf("worker node = %+v booted %+v", wk, wk.Booted)
	}
	if old.Booted != nil || !old.Maintenance || old.Arch != "" || old.TalosVersion != nodetest.LegacyVersion || !strings.Contains(old.Note, "no extension statuses") {
		t.Errorf("1.12 node = %+v", old)
	}
	if old.Unified() || !cp.Unified() {
		t.Error("generations not told apart")
	}
	if !conf.Configured || conf.Booted != nil {
		t.Errorf("configured node = %+v", conf)
	}
	if got := cp.Booted.String(); !strings.Contains(got, "schematic "+cpID[:12]) || !strings.Contains(got, "extensions newt") {
		t.Errorf("summary %q", got)
	}
}

// The fake refuses what a real node refuses to an insecure client:
// sensitive resources and writes; extension statuses are readable.
func TestFakeNodeAccessPolicy(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Schematic: cpSchematic()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), client.WithEndpoints(srv.Addr())) //nolint:gosec // test of an insecure maintenance client
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck
	_, err = safe.StateGet[*config.MachineConfig](ctx, c.COSI, resource.NewMetadata(config.NamespaceName, config.MachineConfigType, config.ActiveID, resource.VersionUndefined))
	if grpcCode(err) != codes.PermissionDenied {
		t.Errorf("machine config read: %v, want PermissionDenied", err)
	}
	err = c.COSI.Create(ctx, runtime.NewExtensionStatus(runtime.NamespaceName, "99"))
	if grpcCode(err) != codes.PermissionDenied {
		t.Errorf("write: %v, want PermissionDenied", err)
	}
	list, err := safe.StateListAll[*runtime.ExtensionStatus](ctx, c.COSI)
	if err != nil || list.Len() != 2 {
		t.Fatalf("extension statuses: %v (%d)", err, list.Len())
	}
	if srv.SchematicID() != cpID {
		t.Errorf("fake schematic ID %s", srv.SchematicID())
	}
}

// grpcCode is the status code of a possibly wrapped gRPC error.
// (The COSI client flattens some errors to text: fall back to the code's name.)
func grpcCode(err error) codes.Code {
	if st, ok := status.FromError(err); ok || err == nil {
		return st.Code()
	}
	if strings.Contains(err.Error(), "code = PermissionDenied") {
		return codes.PermissionDenied
	}
	return codes.Unknown
}
