package elevate

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

// Exit codes of `talosflash` (the CLI's scripting interface, documented in
// the README). The elevated child exits with them and reports them in its
// "error" line; the CLI uses the same constants.
const (
	ExitOK          = 0
	ExitFailure     = 1  // unexpected internal failure
	ExitUsage       = 2  // bad flags, unknown role/profile, bad input file
	ExitNetwork     = 3  // Image Factory or node unreachable, HTTP errors
	ExitVerify      = 4  // read-back hash differs from the image
	ExitDevice      = 5  // target refused by the safety rules
	ExitWrite       = 6  // I/O error while writing (card removed, EIO)
	ExitConfig      = 7  // machine config invalid or fails the incident checks
	ExitApply       = 8  // the node refused the config
	ExitImage       = 9  // the image is corrupt or not an image at all
	ExitStorage     = 10 // the image cache or its file system can't be used; the message names the path
	ExitInterrupted = 130
)

// Args is what the elevated child is told: write the already downloaded
// image Image to Device. The child gets everything through its arguments
// (pkexec clears the environment).
type Args struct {
	Image, Device string
	// Devices are several cards for one child (Device is then ignored):
	// one --device each.
	Devices           []string
	NoVerify          bool
	ForceNonRemovable bool
	AllowLoop         bool
	ForceRaw          bool
	// Meta, per device in order, is the node META to write after the
	// verify (app/plan's encoded CardMeta; "" for none): the values, never
	// the inventory's path.
	Meta []string
}

// List is the child's command line after the program name.
func (a Args) List() []string {
	args := []string{"--flash", "--elevated", "--image", a.Image}
	devs := a.Devices
	if len(devs) == 0 {
		devs = []string{a.Device}
	}
	for _, d := range devs {
		args = append(args, "--device", d)
	}
	for i, m := range a.Meta {
		if m != "" && i < len(devs) {
			args = append(args, "--node-meta", devs[i]+"="+m)
		}
	}
	args = append(args, "--yes", "--json")
	if a.NoVerify {
		args = append(args, "--no-verify")
	}
	if a.ForceNonRemovable {
		args = append(args, "--force-non-removable")
	}
	if a.AllowLoop {
		args = append(args, "--allow-loop")
	}
	if a.ForceRaw {
		args = append(args, "--force-raw")
	}
	return args
}

// Human is the same write as a command for a person to run as root: the
// public flags only, without the child protocol (--elevated, --json, --yes),
// so it asks for confirmation and draws its progress.
func (a Args) Human() []string {
	var args []string
	for _, f := range a.List() {
		switch f {
		case "--elevated", "--json", "--yes":
			continue
		}
		args = append(args, f)
	}
	return args
}

// Event types: the "event" field of every JSON line.
const (
	TypeProgress = "progress"
	TypeInfo     = "info"
	TypeWarning  = "warning"
	TypeResult   = "result"
	TypeError    = "error"
)

// ProgressEvent is imaging.Progress on the wire.
type ProgressEvent struct {
	Event      string `json:"event"` // "progress"
	Stage      string `json:"stage"`
	Done       int64  `json:"done"`
	Total      int64  `json:"total"`
	Rate       int64  `json:"rate"` // bytes per second
	ETASeconds int64  `json:"eta_seconds"`
	Compressed bool   `json:"compressed,omitempty"`
	// Device names the card of a write/verify/done report when several
	// cards are flashed at once (absent otherwise).
	Device string `json:"device,omitempty"`
}

// NewProgressEvent converts p (rate and ETA rounded down to whole units).
func NewProgressEvent(p imaging.Progress) ProgressEvent {
	return ProgressEvent{Event: TypeProgress, Stage: string(p.Stage), Done: p.Done, Total: p.Total,
		Rate: int64(p.Rate), ETASeconds: int64(p.ETA.Seconds()), Compressed: p.Compressed, Device: p.Target}
}

// Progress is the event as the pipeline reported it.
func (e ProgressEvent) Progress() imaging.Progress {
	return imaging.Progress{Stage: imaging.Stage(e.Stage), Done: e.Done, Total: e.Total,
		Rate: float64(e.Rate), ETA: time.Duration(e.ETASeconds) * time.Second, Compressed: e.Compressed, Target: e.Device}
}

// MessageEvent is a line for the user: "info" or "warning".
type MessageEvent struct {
	Event   string `json:"event"`
	Message string `json:"message"`
}

// ResultEvent is a finished flash: one per card written (Device).
type ResultEvent struct {
	Event      string `json:"event"` // "result"
	Device     string `json:"device"`
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"`
	Verified   bool   `json:"verified"`
	VerifyMode string `json:"verify_mode,omitempty"`
	Schematic  string `json:"schematic,omitempty"`
	Version    string `json:"version,omitempty"`
	// Node and Address: the node written onto the card (flash --inventory).
	Node    string `json:"node,omitempty"`
	Address string `json:"address,omitempty"`
}

// ErrorEvent is a failure with the exit code the process ends with, or,
// with Device set, one card's failure when several are flashed (the others
// go on; the process's own "error" line, without a device, comes last).
type ErrorEvent struct {
	Event   string `json:"event"` // "error"
	Code    int    `json:"code"`
	Message string `json:"message"`
	Device  string `json:"device,omitempty"`
}

// Event is one decoded line: Type says which field is set.
type Event struct {
	Type     string
	Progress *ProgressEvent
	Message  *MessageEvent // info, warning
	Result   *ResultEvent
	Error    *ErrorEvent
}

// Decode parses one JSON line; ok is false for anything that is not one of
// the events above (e.g. a stray log line).
func Decode(line []byte) (ev Event, ok bool) {
	var head struct {
		Event string `json:"event"`
	}
	if json.Unmarshal(line, &head) != nil {
		return Event{}, false
	}
	ev.Type = head.Event
	var dst any
	switch head.Event {
	case TypeProgress:
		ev.Progress = &ProgressEvent{}
		dst = ev.Progress
	case TypeInfo, TypeWarning:
		ev.Message = &MessageEvent{}
		dst = ev.Message
	case TypeResult:
		ev.Result = &ResultEvent{}
		dst = ev.Result
	case TypeError:
		ev.Error = &ErrorEvent{}
		dst = ev.Error
	default:
		return Event{}, false
	}
	if json.Unmarshal(line, dst) != nil {
		return Event{}, false
	}
	return ev, true
}

// Writer writes the events as JSON lines (the child's stdout, and the CLI's
// --json output for scripts). Safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{enc: json.NewEncoder(w)} }

func (w *Writer) write(v any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(v) // a closed stdout must not fail the flash
}

// Progress writes a progress line.
func (w *Writer) Progress(p imaging.Progress) { w.write(NewProgressEvent(p)) }

// Info writes an info line.
func (w *Writer) Info(format string, args ...any) {
	w.write(MessageEvent{Event: TypeInfo, Message: fmt.Sprintf(format, args...)})
}

// Warning writes a warning line.
func (w *Writer) Warning(msg string) { w.write(MessageEvent{Event: TypeWarning, Message: msg}) }

// Result writes the result line (its Event field is set here).
func (w *Writer) Result(r ResultEvent) {
	r.Event = TypeResult
	w.write(r)
}

// Error writes the error line.
func (w *Writer) Error(code int, msg string) {
	w.write(ErrorEvent{Event: TypeError, Code: code, Message: msg})
}

// CardError writes one card's error line (several cards at once).
func (w *Writer) CardError(device string, code int, msg string) {
	w.write(ErrorEvent{Event: TypeError, Code: code, Message: msg, Device: device})
}
