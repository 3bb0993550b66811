package nodetest

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// journal is the machine events of one boot, as machined's runtime event
// stream keeps them (internal/app/machined/pkg/runtime/events.go and
// v1alpha1/v1alpha1_events.go): an in-memory ring of the last
// journalCapacity events, lost at a reboot, each with an xid, the type URL
// "talos/runtime/<proto full name>" and the actor ID of the API call that
// caused it ("" for the boot's own).
type journal struct {
	mu      sync.Mutex
	events  []journalEvent
	changed chan struct{} // closed and replaced at every publish
	ended   chan struct{} // closed when the boot ends
	done    bool
}

// journalEvent is one published event; at is the node's time since boot.
type journalEvent struct {
	id      string
	at      time.Duration
	actor   string
	payload proto.Message
}

const journalCapacity = 1000

func newJournal() *journal {
	return &journal{changed: make(chan struct{}), ended: make(chan struct{})}
}

// publish appends an event (dropped once the boot ended).
func (j *journal) publish(at time.Duration, actor string, payload proto.Message) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done {
		return
	}
	j.events = append(j.events, journalEvent{id: newXID(), at: at, actor: actor, payload: payload})
	if len(j.events) > journalCapacity {
		j.events = j.events[len(j.events)-journalCapacity:]
	}
	close(j.changed)
	j.changed = make(chan struct{})
}

// end closes the journal: watchers return.
func (j *journal) end() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.done {
		j.done = true
		close(j.ended)
	}
}

// since returns the events after index from (and the index to continue
// at), with the channel closed at the next publish.
func (j *journal) since(from int) ([]journalEvent, int, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if from > len(j.events) {
		from = len(j.events)
	}
	return append([]journalEvent(nil), j.events[from:]...), len(j.events), j.changed
}

// toMachineEvent is events.go ToMachineEvent: the payload as an Any
// whose type URL is "talos/runtime/<full name>" (empty for the hello).
func (e journalEvent) toMachineEvent() (*machine.Event, error) {
	data := &anypb.Any{}
	if e.payload != nil {
		b, err := proto.Marshal(e.payload)
		if err != nil {
			return nil, err
		}
		data = &anypb.Any{TypeUrl: "talos/runtime/" + string(e.payload.ProtoReflect().Descriptor().FullName()), Value: b}
	}
	return &machine.Event{Data: data, Id: e.id, ActorId: e.actor}, nil
}

// xid as github.com/rs/xid makes it (12 bytes: seconds, machine, pid,
// counter; base32hex, lower case, 20 characters): sortable by time, then
// by counter, which is what a TailId compares.
var (
	xidCounter atomic.Uint32
	xidMachine = func() [5]byte {
		var b [5]byte
		_, _ = rand.Read(b[:])
		return b
	}()
	xidEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)
)

func newXID() string {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], uint32(time.Now().Unix()))
	copy(b[4:9], xidMachine[:])
	c := xidCounter.Add(1)
	b[9], b[10], b[11] = byte(c>>16), byte(c>>8), byte(c)
	return strings.ToLower(xidEncoding.EncodeToString(b[:]))
}
