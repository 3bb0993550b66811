package plan

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
)

// Nobody at a node's address: one sentence that names the node, its
// address and the wait, with the last answer's reason (it read "no Talos
// node answered at the node's address node unreachable: cp-1 at ..." and
// "within 0s"); a network failure (exit 3) either way.
func TestWaitForNobodySaysWhoWhereHowLong(t *testing.T) {
	port := testkit.FreePort(t, "127.0.0.21")
	j := NodeApplyJob{Node: testMember(t, "cp-1", node.RoleUnknown, "", "127.0.0.21"), Port: port, Wait: 300 * time.Millisecond, Every: 50 * time.Millisecond}
	_, err := j.WaitFor(context.Background())
	ep := "127.0.0.21:" + strconv.Itoa(port)
	if !errors.Is(err, ErrNotThere) || !errors.Is(err, node.ErrNetwork) {
		t.Fatalf("err %v: want ErrNotThere and node.ErrNetwork", err)
	}
	msg := err.Error()
	want := "no Talos node answered at cp-1's address " + ep + " within 300 ms (last: cannot reach " + ep + ": connection refused"
	if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") || strings.Contains(msg, "node unreachable") || strings.Contains(msg, " 0s") || strings.Contains(msg, " 0 s") {
		t.Fatalf("%q\nwant it to start %q", msg, want)
	}
}
