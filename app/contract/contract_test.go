package contract

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

func decodeAll(t *testing.T, out []byte) []Event {
	t.Helper()
	var got []Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		ev, ok := Decode(sc.Bytes())
		if !ok {
			t.Fatalf("line not decoded: %s", sc.Bytes())
		}
		if ev.Contract != Version || !Known(ev.Type) {
			t.Fatalf("line without the envelope of contract %d: %s", Version, sc.Bytes())
		}
		got = append(got, ev)
	}
	return got
}

// What the writer writes, the decoder reads back field for field.
func TestEventsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	prog := imaging.Progress{Stage: imaging.StageWrite, Done: 3 << 20, Total: 9 << 20, Rate: 5 << 20, ETA: 7 * time.Second, Compressed: true, Decoded: 11 << 20, Target: "/dev/sdy", Image: "profile worker"}
	res := ResultEvent{Device: "/dev/sdz", Bytes: 9 << 20, SHA256: "ab12", Verified: true, VerifyMode: "O_DIRECT", Written: 2 << 20, Skipped: 7 << 20, Zeroed: 1 << 20, Schematic: "ee21", Version: "v1.14.5", Node: "worker-1", Address: "192.168.1.21/24", Notes: []string{"unmounted /media/u/boot before writing"}}
	fail := ErrorEvent{Code: ExitConfig, Message: "blocked", Device: "/dev/sdy", Findings: []Finding{{"error", "C1", "bad", "fix it"}}, Node: "worker-2", Address: "192.168.1.22/24"}
	w.Progress(prog)
	w.Info("hello %d", 1)
	w.Warning("careful")
	w.Result(res)
	w.CardError("/dev/sdy", ExitVerify, "mismatch")
	w.ErrorEvent(fail)

	got := decodeAll(t, buf.Bytes())
	if len(got) != 6 {
		t.Fatalf("%d events from %q", len(got), buf.String())
	}
	if p := got[0].Progress.Progress(); p != prog {
		t.Errorf("progress %+v, want %+v", p, prog)
	}
	if m := *got[1].Message; m != (MessageEvent{envelope(TypeInfo), "hello 1"}) {
		t.Errorf("info %+v", m)
	}
	if m := *got[2].Message; m != (MessageEvent{envelope(TypeWarning), "careful"}) {
		t.Errorf("warning %+v", m)
	}
	res.Envelope = envelope(TypeResult)
	if r := *got[3].Result; !reflect.DeepEqual(r, res) {
		t.Errorf("result %+v, want %+v", r, res)
	}
	if e := *got[4].Error; !reflect.DeepEqual(e, ErrorEvent{Envelope: envelope(TypeError), Code: ExitVerify, Message: "mismatch", Device: "/dev/sdy"}) {
		t.Errorf("error %+v", e)
	}
	fail.Envelope = envelope(TypeError)
	if e := *got[5].Error; !reflect.DeepEqual(e, fail) {
		t.Errorf("error %+v, want %+v", e, fail)
	}
	// Every field of every event struct is set in this test: a new field
	// that is not carried fails here.
	for i, v := range []any{NewProgressEvent(prog), res, fail} {
		rv := reflect.ValueOf(v)
		for f := 0; f < rv.NumField(); f++ {
			if rv.Field(f).IsZero() {
				t.Errorf("event %d: field %s not exercised", i, rv.Type().Field(f).Name)
			}
		}
	}
}

// An answer keeps the command's own fields beside the envelope: an object's
// at the top, a list in the field named like the event.
func TestAnswer(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	type obj struct {
		Node string `json:"node"`
	}
	for _, a := range []struct {
		event string
		v     any
	}{{TypeBootstrap, obj{"127.0.0.1"}}, {TypeNodes, []obj{{"a"}, {"b"}}}, {TypeDevices, []obj{}}, {TypeApply, struct{}{}}} {
		if err := w.Answer(a.event, a.v); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"event":"bootstrap","contract":1,"node":"127.0.0.1"}
{"event":"nodes","contract":1,"nodes":[{"node":"a"},{"node":"b"}]}
{"event":"devices","contract":1,"devices":[]}
{"event":"apply","contract":1}
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	evs := decodeAll(t, buf.Bytes())
	var nodes struct {
		Nodes []obj `json:"nodes"`
	}
	if err := evs[1].Into(&nodes); err != nil || len(nodes.Nodes) != 2 || nodes.Nodes[1].Node != "b" {
		t.Fatalf("nodes %+v, %v", nodes, err)
	}
}

// Lines from before the contract had a version, and events this version
// does not know, still decode; what is not an event does not.
func TestDecodeTolerates(t *testing.T) {
	ev, ok := Decode([]byte(`{"event":"error","code":4,"message":"x"}`))
	if !ok || ev.Contract != 0 || ev.Error.Code != 4 {
		t.Fatalf("old line: %+v %v", ev, ok)
	}
	if ev, ok := Decode([]byte(`{"event":"future","contract":2}`)); !ok || ev.Type != "future" || Known(ev.Type) {
		t.Fatalf("unknown event: %+v %v", ev, ok)
	}
	for _, l := range []string{"a stray log line", `[1]`, `{"stage":"write"}`, `{"event":"progress","done":"x"}`, ""} {
		if _, ok := Decode([]byte(l)); ok {
			t.Errorf("%q decoded", l)
		}
	}
}

// A card's result goes out as its "result" line and comes back the same
// (the elevated child and its parent): every field of the card but its
// error (a failed card is an "error" line).
func TestCardResultRoundTrip(t *testing.T) {
	card := imaging.CardResult{Target: "/dev/sdz", Bytes: 9 << 20, SHA256: "ab12", Written: 2 << 20, Skipped: 7 << 20, Zeroed: 1 << 20,
		Verified: true, VerifyMode: "O_DIRECT", Notes: []string{"unmounted /media/u/boot before writing"}}
	rv := reflect.ValueOf(card)
	for f := 0; f < rv.NumField(); f++ {
		if name := rv.Type().Field(f).Name; rv.Field(f).IsZero() && name != "Err" {
			t.Fatalf("card field %s not exercised: a new field must be carried by the result line", name)
		}
	}
	var buf bytes.Buffer
	NewWriter(&buf).Result(NewResultEvent(card))
	got := decodeAll(t, buf.Bytes())
	if len(got) != 1 || got[0].Result == nil {
		t.Fatalf("decoded %+v from %q", got, buf.String())
	}
	if back := got[0].Result.Card(); !reflect.DeepEqual(back, card) {
		t.Fatalf("card %+v came back as %+v", card, back)
	}
}
