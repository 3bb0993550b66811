package nodetest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// What a configured node streams about itself, as Talos v1.14.0-rc.1's
// MachineService serves it (internal/app/machined/internal/server/v1alpha1/
// v1alpha1_server.go):
//
//   - Events: first an empty "hello" event (sendEmptyEvent), then the
//     boot's events chosen by tail_events (n last, -1 all), tail_id (those
//     after it) or tail_seconds, filtered by with_actor_id, then every new
//     one until the client leaves or the boot ends;
//   - Logs: a Talos service's log ("system" namespace, or kubelet) with
//     tail_lines (>= 0: that many last lines) and follow; any other
//     namespace is a container the fake does not run ("container %q not
//     found"). machined's log holds the sequences' and the services'
//     "[talos]" lines; the other services' own output is not modelled (an
//     extension service waiting for its config has not started a process,
//     so its log is empty);
//   - Dmesg: the kernel log, "<facility>: <priority, %7s>: [<RFC3339Nano>]:
//     <message>", machined's "[talos]" lines as user warnings (go-kmsg
//     writes them to /dev/kmsg), with tail (only what comes next) and follow.

// Events is v1alpha1_server.go Events over the boot's journal.
func (n *Node) Events(req *machine.EventsRequest, srv grpc.ServerStreamingServer[machine.Event]) error {
	n.mu.Lock()
	b := n.boot
	now := n.sinceBootLocked()
	n.mu.Unlock()
	if b == nil {
		return status.Error(codes.Unavailable, "node is rebooting")
	}
	hello, err := journalEvent{id: newXID(), actor: req.GetWithActorId()}.toMachineEvent()
	if err != nil {
		return err
	}
	if err := srv.Send(hello); err != nil {
		return err
	}
	j := b.journal
	kept, next, more := j.since(0)
	var first []journalEvent
	switch {
	case req.GetTailId() != "":
		for i, e := range kept {
			if e.id > req.GetTailId() {
				first = kept[i:]
				break
			}
		}
	case req.GetTailSeconds() > 0:
		from := now - time.Duration(req.GetTailSeconds())*time.Second
		for i, e := range kept {
			if e.at >= from {
				first = kept[i:]
				break
			}
		}
	case req.GetTailEvents() < 0:
		first = kept
	case req.GetTailEvents() > 0:
		first = kept[max(0, len(kept)-int(req.GetTailEvents())):]
	}
	send := func(evs []journalEvent) error {
		for _, e := range evs {
			if a := req.GetWithActorId(); a != "" && e.actor != a {
				continue
			}
			m, err := e.toMachineEvent()
			if err != nil {
				return err
			}
			if err := srv.Send(m); err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(first); err != nil {
		return err
	}
	for {
		select {
		case <-srv.Context().Done():
			return srv.Context().Err()
		case <-j.ended:
			evs, _, _ := j.since(next)
			return send(evs)
		case <-n.stop:
			return nil
		case <-more:
		}
		var evs []journalEvent
		evs, next, more = j.since(next)
		if err := send(evs); err != nil {
			return err
		}
	}
}

// serviceLogIDs are the Talos services whose logs the node keeps.
func (n *Node) serviceLogIDsLocked() []string {
	ids := []string{"machined"}
	if n.boot != nil {
		for id := range n.boot.services {
			if id != "machined" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// Logs is v1alpha1_server.go Logs for Talos services.
func (n *Node) Logs(req *machine.LogsRequest, srv grpc.ServerStreamingServer[common.Data]) error {
	if req.GetNamespace() != "system" && req.GetId() != "kubelet" {
		return fmt.Errorf("container %q not found", req.GetId())
	}
	return n.streamLines(srv, req.GetFollow(), int(req.GetTailLines()), "\n", func(now time.Duration) []string {
		if req.GetId() != "machined" {
			return nil
		}
		var out []string
		for _, l := range n.logsLocked(now) {
			out = append(out, l.text)
		}
		return out
	})
}

// streamLines sends lines (tail: the last that many when >= 0), each with
// end, then with follow every new one until the client leaves or the boot
// ends. lines runs with n.mu held.
func (n *Node) streamLines(srv grpc.ServerStreamingServer[common.Data], follow bool, tail int, end string, lines func(now time.Duration) []string) error {
	read := func() ([]string, <-chan struct{}, <-chan struct{}) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.boot == nil {
			return nil, nil, nil
		}
		return lines(n.sinceBootLocked()), n.boot.logMore, n.boot.journal.ended
	}
	all, more, ended := read()
	from := 0
	if tail >= 0 {
		from = max(0, len(all)-tail)
	}
	for {
		for _, l := range all[from:] {
			if err := srv.Send(&common.Data{Bytes: []byte(l + end)}); err != nil {
				return err
			}
		}
		from = len(all)
		if !follow || more == nil {
			return nil
		}
		select {
		case <-srv.Context().Done():
			return srv.Context().Err()
		case <-ended:
			return nil
		case <-n.stop:
			return nil
		case <-more:
		}
		all, more, ended = read()
		from = min(from, len(all))
	}
}

// LogsContainers lists the logs the node keeps (the logging manager's
// RegisteredLogs: the Talos services).
func (n *Node) LogsContainers(context.Context, *emptypb.Empty) (*machine.LogsContainersResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := n.serviceLogIDsLocked()
	slices.Sort(ids)
	return &machine.LogsContainersResponse{Messages: []*machine.LogsContainer{{Ids: ids}}}, nil
}

// kernelBoot are the first kernel lines of a Raspberry Pi 4 boot.
var kernelBoot = []string{
	"Booting Linux on physical CPU 0x0000000000 [0x410fd083]",
	"Machine model: Raspberry Pi 4 Model B Rev 1.5",
	"Kernel command line: talos.platform=metal console=tty0 console=ttyAMA0,115200",
	"Memory: 7882952K/8245248K available",
	"Run /init as init process",
}

// Dmesg is v1alpha1_server.go Dmesg over the boot's kernel log.
func (n *Node) Dmesg(req *machine.DmesgRequest, srv grpc.ServerStreamingServer[common.Data]) error {
	tail := -1
	if req.GetTail() {
		tail = 0 // kmsg.FromTail: only what comes next
	}
	return n.streamLines(srv, req.GetFollow(), tail, "", func(now time.Duration) []string {
		base := n.bootedAtLocked()
		format := func(facility, priority string, at time.Duration, msg string) string {
			return fmt.Sprintf("%s: %7s: [%s]: %s", facility, priority, base.Add(at).UTC().Format(time.RFC3339Nano), msg)
		}
		out := make([]string, 0, len(kernelBoot))
		for i, l := range kernelBoot {
			out = append(out, format("kern", "info", time.Duration(i)*time.Millisecond, l))
		}
		for _, l := range n.logsLocked(now) {
			out = append(out, format("user", "warning", l.at, l.text))
		}
		return out
	})
}
