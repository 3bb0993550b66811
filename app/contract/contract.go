// Package contract is talosflash's public scripting interface, in one
// place: the exit codes and the JSON lines every `--json` command writes on
// stdout. docs/JSON.md documents it; Version says which revision a line
// follows. The elevated child speaks the same lines to its parent
// (app/elevate), and the desktop app exits with the same codes.
//
// Every line is one JSON object with an envelope: "event" (what the line
// is) and "contract" (Version). The event's own fields sit beside them, so
// `jq 'select(.event=="result") | .sha256'` works on any command's output.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/talosflash/talosflash/imaging"
)

// Version is the contract's revision, carried by every JSON line as
// "contract". It changes when a field is removed or changes meaning; new
// fields and new events keep it (consumers ignore what they don't know).
const Version = 1

// Exit codes of talosflash (the CLI, its elevated child and the desktop
// app); ExitCodes says what each means.
const (
	ExitOK          = 0
	ExitFailure     = 1  // unexpected internal failure
	ExitUsage       = 2  // bad flags, unknown role/profile, bad input file, a path that does not exist
	ExitNetwork     = 3  // Image Factory or node unreachable, HTTP errors
	ExitVerify      = 4  // read-back hash differs from the image
	ExitDevice      = 5  // target refused by the safety rules
	ExitWrite       = 6  // I/O error while writing (card removed, EIO)
	ExitConfig      = 7  // machine config or inventory invalid, or fails the checks
	ExitApply       = 8  // the node refused the config
	ExitImage       = 9  // the image is corrupt or not an image at all
	ExitStorage     = 10 // the image cache or its file system can't be used; the message names the path
	ExitInterrupted = 130
)

// ExitCode is one row of the exit-code table.
type ExitCode struct {
	Code int
	Name string // the constant's name
	// Word is the code in a word or two (the CLI's usage text).
	Word string
	// Meaning is when it is given, in Markdown: the table of docs/JSON.md
	// and the README's, which contract_test checks against this one.
	Meaning string
}

// ExitCodes is the one table of the exit codes, in order.
var ExitCodes = []ExitCode{
	{ExitOK, "ExitOK", "ok", "success"},
	{ExitFailure, "ExitFailure", "internal", "unexpected internal error (the desktop app: it failed to run)"},
	{ExitUsage, "ExitUsage", "usage", "bad usage or input: flags, unknown role, bad profile YAML, bad installer ref or version, " +
		"a missing file (config, profiles, inventory, talosconfig, the card or image `card` reads), a `--device` that does not exist " +
		"(or a bare name such as `sdb` that is both a file here and a disk under /dev: devices' reasons `not-found`, `ambiguous`); " +
		"the app started without a display. Found before any file, node or network is touched; the message says the fix"},
	{ExitNetwork, "ExitNetwork", "network", "Image Factory or node unreachable (also: no node answered in time), HTTP error, download failed"},
	{ExitVerify, "ExitVerify", "verify mismatch", "the card does not read back as the image"},
	{ExitDevice, "ExitDevice", "device refused", "device refused by the safety rules (system disk, mounted, swap on it or an active swap file, " +
		"non-removable, too small, read-only, in use: named twice, the image itself, the backing file of an attached loop device) " +
		"or administrator rights not granted"},
	{ExitWrite, "ExitWrite", "write I/O error", "write I/O error (card removed, EIO); the card is incomplete"},
	{ExitConfig, "ExitConfig", "config or inventory invalid", "a machine config or the inventory invalid, or failing the checks: " +
		"the incident checks, `inventory check`'s problems (also before any command that takes `--inventory`), " +
		"another node's card at a node's address; `outdated --write` blocked a reference (an extension would be lost, or could not be compared)"},
	{ExitApply, "ExitApply", "node refused", "the node refused the config, a bootstrap (already bootstrapped, not a control plane) or an upgrade request"},
	{ExitImage, "ExitImage", "image corrupt or not an image", "the image is corrupt or not an image talosflash writes " +
		"(bzip2, lzma, zip, qcow2, empty, not a disk); a corrupt cache entry is deleted, run again to re-download; " +
		"`card`: not a Talos image, or an interrupted flash"},
	{ExitStorage, "ExitStorage", "cache/storage unusable", "the image cache or a local file can't be used (read-only, full, no permission, " +
		"not a directory, a symlink in the way; `outdated --write` refused a file); the message names the path"},
	{ExitInterrupted, "ExitInterrupted", "interrupted", "interrupted (Ctrl-C); a partial download stays (resumable where the server allows it), " +
		"a card is reported incomplete. SIGTERM ends the same way with 143, SIGHUP with 129"},
}

// ExitSummary is the table in one line per few codes, for a usage text:
// "0 ok, 1 internal, 2 usage, ...".
func ExitSummary() string {
	parts := make([]string, len(ExitCodes))
	for i, c := range ExitCodes {
		parts[i] = fmt.Sprintf("%d %s", c.Code, c.Word)
	}
	return strings.Join(parts, ", ")
}

// Event types: the "event" field of every line.
const (
	// Streamed by flash (and the elevated child).
	TypeProgress = "progress"
	TypeInfo     = "info"
	TypeWarning  = "warning"
	TypeResult   = "result" // one card written
	// The last line of any command that fails.
	TypeError = "error"
	// One line each: the whole answer of a command. An object answer's
	// fields sit in the line itself; a list answer is the field named like
	// the event (e.g. {"event":"nodes","contract":1,"nodes":[...]}).
	TypeSchematic = "schematic" // schematic --json (object)
	TypeDevices   = "devices"   // devices --json (list)
	TypeNodes     = "nodes"     // nodes --json (list)
	TypeApply     = "apply"     // apply --json (object)
	TypeBootstrap = "bootstrap" // bootstrap --json (object)
	TypeUpgrade   = "upgrade"   // upgrade --json (list)
	TypeOutdated  = "outdated"  // outdated --json (list)
	TypeCard      = "card"      // card --json (object)
	TypeInventory = "inventory" // inventory check --json (object)
	// Streamed by apply --inventory --json: one line per node, in order.
	TypeApplyNode = "apply_node"
	// Streamed by status --json: one line per node, then (--watch) one per
	// node each time it changes.
	TypeNodeStatus = "node_status"
	// Streamed by apply --inventory --talosconfig --json: one line per
	// node when following it ends.
	TypeFollow = "follow"
	// Streamed by status --json when a kubeconfig reaches the cluster: one
	// line per read (with --watch, per change) with every Kubernetes node.
	TypeKubernetes = "kubernetes"
	// kubeconfig --json (object).
	TypeKubeconfig = "kubeconfig"
	// patch --json (object), one line per node patched.
	TypePatch = "patch"
	// Streamed by upgrade --inventory --json: one line per node when its
	// part of the rolling upgrade ends, then one per node not reached.
	TypeRolloutNode = "rollout_node"
	// outdated --json, before its answer: the Kubernetes versions of the
	// configs and the extensions' versions for the target Talos (object).
	TypeVersions = "versions"
	// version --json (object): talosflash's version.
	TypeVersion = "version"
	// profiles --json (list): the roles and custom profiles.
	TypeProfiles = "profiles"
	// etcd snapshot --json (object): the snapshot saved; upgrade
	// --inventory --json (and upgrade --node on a control plane) writes one
	// before the first control plane moves (taken, planned, or not).
	TypeEtcdSnapshot = "etcd_snapshot"
)

// Known reports whether t is an event type of this Version.
func Known(t string) bool {
	switch t {
	case TypeProgress, TypeInfo, TypeWarning, TypeResult, TypeError,
		TypeSchematic, TypeDevices, TypeNodes, TypeApply, TypeBootstrap, TypeUpgrade, TypeOutdated,
		TypeCard, TypeInventory, TypeApplyNode, TypeNodeStatus, TypeFollow, TypeKubernetes, TypeKubeconfig,
		TypePatch, TypeRolloutNode, TypeVersions, TypeVersion, TypeProfiles, TypeEtcdSnapshot:
		return true
	}
	return false
}

// Envelope is the head of every line.
type Envelope struct {
	Event    string `json:"event"`
	Contract int    `json:"contract"`
}

func envelope(t string) Envelope { return Envelope{Event: t, Contract: Version} }

// ProgressEvent is imaging.Progress on the wire.
type ProgressEvent struct {
	Envelope
	Stage      string `json:"stage"`
	Done       int64  `json:"done"`
	Total      int64  `json:"total"`
	Rate       int64  `json:"rate"` // bytes per second
	ETASeconds int64  `json:"eta_seconds"`
	Compressed bool   `json:"compressed,omitempty"`
	// Decoded: with compressed, the image's decoded bytes written so far.
	Decoded int64 `json:"decoded,omitempty"`
	// Device names the card of a write/verify/done report when several
	// cards are flashed at once (absent otherwise).
	Device string `json:"device,omitempty"`
	// Image names the image of a download/build report when several
	// images are flashed at once (flash --inventory with nodes of
	// different profiles; absent otherwise).
	Image string `json:"image,omitempty"`
}

// NewProgressEvent converts p (rate and ETA rounded down to whole units).
func NewProgressEvent(p imaging.Progress) ProgressEvent {
	return ProgressEvent{Envelope: envelope(TypeProgress), Stage: string(p.Stage), Done: p.Done, Total: p.Total,
		Rate: int64(p.Rate), ETASeconds: int64(p.ETA.Seconds()), Compressed: p.Compressed, Decoded: p.Decoded, Device: p.Target, Image: p.Image}
}

// Progress is the event as the pipeline reported it.
func (e ProgressEvent) Progress() imaging.Progress {
	return imaging.Progress{Stage: imaging.Stage(e.Stage), Done: e.Done, Total: e.Total,
		Rate: float64(e.Rate), ETA: time.Duration(e.ETASeconds) * time.Second, Compressed: e.Compressed, Decoded: e.Decoded, Target: e.Device, Image: e.Image}
}

// MessageEvent is a line for the user: "info" or "warning".
type MessageEvent struct {
	Envelope
	Message string `json:"message"`
}

// ResultEvent is a finished flash: one per card written (Device).
type ResultEvent struct {
	Envelope
	Device     string `json:"device"`
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"`
	Verified   bool   `json:"verified"`
	VerifyMode string `json:"verify_mode,omitempty"`
	// Written and Skipped: the image's bytes written to the card, and
	// those it already held (found by a direct read, which verified
	// them); together the image's Bytes.
	Written int64 `json:"written"`
	Skipped int64 `json:"skipped"`
	// Zeroed: zeros written over the card's first MiB before the image,
	// where it held other data (writes beside Written).
	Zeroed    int64  `json:"zeroed,omitempty"`
	Schematic string `json:"schematic,omitempty"`
	Version   string `json:"version,omitempty"` // the Talos version
	// Node and Address: the node written onto the card (flash --inventory).
	Node    string `json:"node,omitempty"`
	Address string `json:"address,omitempty"`
	// Notes: what the user should know about the card afterwards (what was
	// unmounted before writing, the device's warnings, the META step's).
	Notes []string `json:"notes,omitempty"`
}

// NewResultEvent is a written card's result as its "result" line (Device:
// c.Target). The image's Schematic and Version and the Node written onto
// the card are the caller's to add; c.Err is not part of it (a failed card
// is an "error" line with its device).
func NewResultEvent(c imaging.CardResult) ResultEvent {
	return ResultEvent{Envelope: envelope(TypeResult), Device: c.Target, Bytes: c.Bytes, SHA256: c.SHA256, Verified: c.Verified,
		VerifyMode: c.VerifyMode, Written: c.Written, Skipped: c.Skipped, Zeroed: c.Zeroed, Notes: c.Notes}
}

// Card is the line read back as the card's result (the elevated child's
// parent), NewResultEvent's inverse.
func (e ResultEvent) Card() imaging.CardResult {
	return imaging.CardResult{Target: e.Device, Bytes: e.Bytes, SHA256: e.SHA256, Verified: e.Verified,
		VerifyMode: e.VerifyMode, Written: e.Written, Skipped: e.Skipped, Zeroed: e.Zeroed, Notes: e.Notes}
}

// Finding is one incident-check finding (apply's "findings").
type Finding struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// ErrorEvent is a failure with the exit code the process ends with, or,
// with Device set, one card's failure when several are flashed (the others
// go on; the process's own "error" line, without a device, comes last).
type ErrorEvent struct {
	Envelope
	Code     int       `json:"code"`
	Message  string    `json:"message"`
	Device   string    `json:"device,omitempty"`
	Findings []Finding `json:"findings,omitempty"` // apply: the checks that blocked the config
	// Node and Address: the inventory node a failed card was for (flash
	// --inventory), as on its "result" line had it been written.
	Node    string `json:"node,omitempty"`
	Address string `json:"address,omitempty"`
}

// Event is one decoded line: Type says which field is set. Line is the
// line itself, for the one-line answers (Into decodes them).
type Event struct {
	Type     string
	Contract int // 0: a line from before the contract had a version
	Progress *ProgressEvent
	Message  *MessageEvent // info, warning
	Result   *ResultEvent
	Error    *ErrorEvent
	Line     json.RawMessage
}

// Into decodes the line into v (e.g. a command's answer).
func (e Event) Into(v any) error { return json.Unmarshal(e.Line, v) }

// Decode parses one JSON line. ok is false for anything that is not a JSON
// object with an "event" (e.g. a stray log line); an event of a type this
// version does not know decodes with only Type, Contract and Line set.
func Decode(line []byte) (ev Event, ok bool) {
	line = bytes.TrimSpace(line)
	var head Envelope
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &head) != nil || head.Event == "" {
		return Event{}, false
	}
	ev.Type, ev.Contract, ev.Line = head.Event, head.Contract, append(json.RawMessage(nil), line...)
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
		return ev, true
	}
	if json.Unmarshal(line, dst) != nil {
		return Event{}, false
	}
	return ev, true
}

// Writer writes the events as JSON lines (the CLI's --json output and the
// elevated child's stdout). Safe for concurrent use; write errors are
// dropped (a closed stdout must not fail a flash).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (w *Writer) writeLine(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.w.Write(append(b, '\n'))
}

func (w *Writer) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(ErrorEvent{Envelope: envelope(TypeError), Code: ExitFailure, Message: "encode JSON: " + err.Error()})
	}
	w.writeLine(b)
}

// Progress writes a progress line.
func (w *Writer) Progress(p imaging.Progress) { w.write(NewProgressEvent(p)) }

// Info writes an info line.
func (w *Writer) Info(format string, args ...any) {
	w.write(MessageEvent{Envelope: envelope(TypeInfo), Message: fmt.Sprintf(format, args...)})
}

// Warning writes a warning line.
func (w *Writer) Warning(msg string) {
	w.write(MessageEvent{Envelope: envelope(TypeWarning), Message: msg})
}

// Result writes a result line (its envelope is set here).
func (w *Writer) Result(r ResultEvent) {
	r.Envelope = envelope(TypeResult)
	w.write(r)
}

// Error writes the process's error line.
func (w *Writer) Error(code int, msg string) {
	w.write(ErrorEvent{Envelope: envelope(TypeError), Code: code, Message: msg})
}

// ErrorEvent writes e as an error line (its envelope is set here).
func (w *Writer) ErrorEvent(e ErrorEvent) {
	e.Envelope = envelope(TypeError)
	w.write(e)
}

// CardError writes one card's error line (several cards at once).
func (w *Writer) CardError(device string, code int, msg string) {
	w.write(ErrorEvent{Envelope: envelope(TypeError), Code: code, Message: msg, Device: device})
}

// Answer writes a command's whole answer v as one line of type event: an
// object's fields beside the envelope, a list (or any other value) as the
// field named like the event. v must not have "event" or "contract" fields.
func (w *Writer) Answer(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s JSON: %w", event, err)
	}
	head, _ := json.Marshal(envelope(event)) // {"event":"...","contract":N}
	head = head[:len(head)-1]                // open
	if len(b) > 0 && b[0] == '{' {
		if body := bytes.TrimSpace(b[1:]); len(body) > 0 && body[0] != '}' {
			head = append(head, ',')
		}
		w.writeLine(append(head, b[1:]...))
		return nil
	}
	key, _ := json.Marshal(event)
	head = append(append(append(head, ','), key...), ':')
	w.writeLine(append(append(head, b...), '}'))
	return nil
}

// WriteAnswer is NewWriter(out).Answer(event, v).
func WriteAnswer(out io.Writer, event string, v any) error {
	return NewWriter(out).Answer(event, v)
}
