// Package factorytest runs an in-process fake Talos Image Factory on
// 127.0.0.1 for tests. By default it behaves like the real one (image-factory
// v1.5; SetFactoryVersion picks an older release's routes and error shapes):
//
//   - image downloads answer 200 with Content-Length, Content-Type and
//     Content-Disposition, and no ETag, Last-Modified or Accept-Ranges; Range
//     is ignored. So a cut download can only restart from zero.
//   - the first GET of an image waits BuildDelay before any header ("the
//     factory builds the image"); requests during the build join it.
//   - SetObjectStorage(true) is the factory with an object-storage cache: GET
//     answers 302 to a presigned-like URL under /storage/ that honours Range
//     and carries ETag and Last-Modified; HEAD is never redirected.
//   - errors are plain text: unknown Talos version 404 "version X is not
//     available" (500 "internal server error" before v1.1.0).
//
// Hooks observe traffic and inject faults: resets, stalls, wrong sizes,
// corrupted bytes, error statuses and redirects.
package factorytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/client"
	"github.com/siderolabs/image-factory/pkg/schematic"
)

// Defaults served by a new Server.
var (
	DefaultVersions   = []string{"v1.13.0", "v1.14.4", "v1.14.5"}
	DefaultExtensions = []string{
		"siderolabs/newt",
		"siderolabs/iscsi-tools",
		"siderolabs/util-linux-tools",
		"siderolabs/tailscale",
		"siderolabs/qemu-guest-agent",
	}
)

// DefaultFactoryVersion is the image-factory release a new Server imitates.
const DefaultFactoryVersion = "v1.5.0"

// DefaultBuildDelay is how long the first GET of each image waits before
// its headers: short, but real clients must not treat it as a stall.
const DefaultBuildDelay = 50 * time.Millisecond

// StoragePrefix is the path prefix of object-storage URLs (SetObjectStorage).
const StoragePrefix = "/storage"

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte // request body (schematic YAML for POST /schematics)
}

// FaultKind selects what a Fault does.
type FaultKind int

// Fault kinds. "After" counts response body bytes of that one response
// (not the offset in the file, which differs for range requests).
const (
	// FaultStatus replies Status with Body instead of the normal response.
	FaultStatus FaultKind = iota + 1
	// FaultReset sends After body bytes, then resets the TCP connection.
	FaultReset
	// FaultStall sends After body bytes, then sends nothing more until the
	// request's context ends (client gives up or the server closes).
	FaultStall
	// FaultShortBody announces the full Content-Length, sends After bytes
	// and closes the connection cleanly (truncated body).
	FaultShortBody
	// FaultCorrupt serves the announced size but flips every byte from
	// After on (content differs from what ETag/size promise).
	FaultCorrupt
	// FaultContent serves Data (with its own length and ETag) in place of
	// the registered image, as if the file changed on the server.
	FaultContent
	// FaultRedirect replies with a redirect (Status, default 302) to Location.
	FaultRedirect
)

// Fault is an injected misbehaviour for one URL path.
type Fault struct {
	Kind     FaultKind
	After    int64
	Status   int
	Body     string
	Data     []byte
	Location string
	// Times is how many matching requests the fault applies to; 0 = all.
	Times int
}

type image struct {
	data    []byte
	etag    string
	modTime time.Time
}

type fault struct {
	Fault
	left int // remaining uses; <0 = unlimited
}

// Server is a fake Image Factory. All methods are safe for concurrent use.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string

	srv *httptest.Server

	mu                sync.Mutex
	schematics        map[string][]byte
	versions          []string
	extensions        map[string][]client.ExtensionInfo
	overlays          map[string][]client.OverlayInfo
	images            map[string]*image // key: /image/<id>/<version>/<file>
	faults            map[string][]*fault
	requests          []Request
	noSchematicLookup bool
	factoryVersion    string
	objectStorage     bool
	buildDelay        time.Duration
	builds            map[string]chan struct{} // closed when the image is "built"
	held              chan struct{}            // HoldImages: closed on release

	bytesServed atomic.Int64
}

// New starts a fake factory and stops it when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()

	s := NewServer()
	tb.Cleanup(s.Close)

	return s
}

// NewServer starts a fake factory outside a test (call Close).
func NewServer() *Server {
	// httptest listens on 127.0.0.1 (or ::1): loopback only.
	s := newServer()
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL
	return s
}

// Listen starts a fake factory on addr, a loopback IP and port (e.g.
// 127.0.0.1:8088, for a fixed URL to try the app with); any other address
// is refused, as the fake must never be reachable from the network.
func Listen(addr string) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("factorytest: listen address %q: want IP:port, e.g. 127.0.0.1:8088", addr)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("factorytest: listen address %q: only a loopback IP (127.0.0.0/8 or ::1) is accepted", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("factorytest: %w", err)
	}
	s := newServer()
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

func newServer() *Server {
	s := &Server{
		schematics: map[string][]byte{},
		extensions: map[string][]client.ExtensionInfo{},
		overlays:   map[string][]client.OverlayInfo{},
		images:     map[string]*image{},
		faults:     map[string][]*fault{},
		builds:     map[string]chan struct{}{},

		factoryVersion: DefaultFactoryVersion,
		buildDelay:     DefaultBuildDelay,
	}

	s.SetVersions(DefaultVersions...)

	return s
}

// Close shuts the server down, ending stalled responses.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Client returns an http.Client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetVersions replaces the Talos versions offered. Each version gets the
// default extension list and the Raspberry Pi overlays that release has
// (rpi_generic from 1.7, rpi_5 from v1.12.3: defaultOverlays) unless set
// otherwise.
func (s *Server) SetVersions(versions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.versions = slices.Clone(versions)

	for _, v := range versions {
		if _, ok := s.extensions[v]; !ok {
			s.extensions[v] = defaultExtensions(v)
		}

		if _, ok := s.overlays[v]; !ok {
			s.overlays[v] = defaultOverlays(v)
		}
	}
}

// SetExtensions replaces the official extensions offered for version.
func (s *Server) SetExtensions(version string, exts []client.ExtensionInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.extensions[version] = slices.Clone(exts)
}

// DisableSchematicLookup makes GET /schematics/<id> behave like
// image-factory v0.8.4, which has no such route (plain 404 page not found).
func (s *Server) DisableSchematicLookup() {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.noSchematicLookup = true
}

// SetFactoryVersion makes the server answer like that image-factory
// release (e.g. "v0.8.4"): GET /schematics/<id> from v0.9.0, the
// schematic in POST /schematics replies and /readyz from v1.3.0, 404 for an
// unknown Talos version from v1.1.0 (500 before).
func (s *Server) SetFactoryVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.factoryVersion = v
}

// SetObjectStorage switches image GETs to the object-storage mode: a 302 to
// StoragePrefix+path, which honours Range and sends ETag/Last-Modified.
func (s *Server) SetObjectStorage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.objectStorage = on
}

// SetBuildDelay sets how long the first GET of each image added afterwards
// (or not yet requested) waits before answering.
func (s *Server) SetBuildDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.buildDelay = d
}

// atLeast reports whether the imitated factory is release v or newer.
func (s *Server) atLeast(v string) bool {
	s.mu.Lock()
	cur := s.factoryVersion
	s.mu.Unlock()

	return versionLess(v, cur) || v == cur
}

// versionLess compares "vX.Y.Z" numerically.
func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}

	return false
}

func versionParts(v string) [3]int {
	var p [3]int

	_, _ = fmt.Sscanf(strings.TrimPrefix(v, "v"), "%d.%d.%d", &p[0], &p[1], &p[2])

	return p
}

// unknownVersion answers a request naming a Talos version the factory
// does not have, as the imitated release does.
func (s *Server) unknownVersion(w http.ResponseWriter, version string) {
	if s.atLeast("v1.1.0") {
		http.Error(w, fmt.Sprintf("version %s is not available", version), http.StatusNotFound)

		return
	}

	http.Error(w, "internal server error", http.StatusInternalServerError)
}

// AddSchematic stores a schematic as if it had been POSTed; returns its ID.
func (s *Server) AddSchematic(sc *schematic.Schematic) (string, error) {
	id, err := sc.ID()
	if err != nil {
		return "", err
	}

	data, err := sc.Marshal()
	if err != nil {
		return "", err
	}

	s.mu.Lock()
	s.schematics[id] = data
	s.mu.Unlock()

	return id, nil
}

// Schematics returns the IDs of stored schematics.
func (s *Server) Schematics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	ids := make([]string, 0, len(s.schematics))
	for id := range s.schematics {
		ids = append(ids, id)
	}

	slices.Sort(ids)

	return ids
}

// ImagePath is the URL path of an image file.
func ImagePath(id, version, file string) string {
	return "/image/" + id + "/" + version + "/" + file
}

// AddImage serves data at /image/<id>/<version>/<file>.
func (s *Server) AddImage(id, version, file string, data []byte) {
	sum := sha256.Sum256(data)

	s.mu.Lock()
	defer s.mu.Unlock()

	s.images[ImagePath(id, version, file)] = &image{
		data:    data,
		etag:    `"` + hex.EncodeToString(sum[:16]) + `"`,
		modTime: time.Now().UTC().Truncate(time.Second),
	}
}

// ImageURL is the absolute URL of an image file.
func (s *Server) ImageURL(id, version, file string) string {
	return s.URL + ImagePath(id, version, file)
}

// Inject adds a fault for requests to path (exact URL path, no query).
// Faults on one path are used in the order added.
func (s *Server) Inject(path string, f Fault) {
	left := f.Times
	if left == 0 {
		left = -1
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	s.faults[path] = append(s.faults[path], &fault{Fault: f, left: left})
}

// FailPath makes every request to path answer status with body.
func (s *Server) FailPath(path string, status int, body string) {
	s.Inject(path, Fault{Kind: FaultStatus, Status: status, Body: body})
}

// ResetAfter resets the connection of the next request to path after n body bytes.
func (s *Server) ResetAfter(path string, n int64) {
	s.Inject(path, Fault{Kind: FaultReset, After: n, Times: 1})
}

// StallAfter stalls the next request to path after n body bytes.
func (s *Server) StallAfter(path string, n int64) {
	s.Inject(path, Fault{Kind: FaultStall, After: n, Times: 1})
}

// Redirect sends requests for path to location (absolute URL or path).
func (s *Server) Redirect(path, location string, status int) {
	s.Inject(path, Fault{Kind: FaultRedirect, Location: location, Status: status})
}

// ClearFaults removes all injected faults.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.faults = map[string][]*fault{}
}

// BytesServed is the number of image body bytes written so far.
func (s *Server) BytesServed() int64 { return s.bytesServed.Load() }

// Requests returns a copy of the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()

	return slices.Clone(s.requests)
}

// RequestsTo returns logged requests whose path is path.
func (s *Server) RequestsTo(path string) []Request {
	var out []Request

	for _, r := range s.Requests() {
		if r.Path == path {
			out = append(out, r)
		}
	}

	return out
}

func (s *Server) takeFault(path string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()

	for _, f := range s.faults[path] {
		if f.left == 0 {
			continue
		}

		if f.left > 0 {
			f.left--
		}

		ff := f.Fault

		return &ff
	}

	return nil
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))

	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	storage := s.objectStorage
	s.mu.Unlock()

	if (strings.HasPrefix(r.URL.Path, "/image/") || strings.HasPrefix(r.URL.Path, StoragePrefix+"/image/")) && !s.waitHeld(r) {
		return
	}

	// Object storage: the bytes (and their faults) come from the storage URL.
	if rest, ok := strings.CutPrefix(r.URL.Path, StoragePrefix+"/image/"); ok && storage {
		f := s.takeFault("/image/" + rest)
		if f != nil && f.Kind == FaultStatus {
			http.Error(w, f.Body, f.Status)

			return
		}

		onlyMethods(w, r, func() { s.serveStorage(w, r, "/image/"+rest, f) }, http.MethodGet, http.MethodHead)

		return
	}

	if storage && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/image/") {
		if !s.waitBuild(r) {
			return
		}

		http.Redirect(w, r, StoragePrefix+r.URL.Path+"?X-Amz-Expires=3600", http.StatusFound)

		return
	}

	f := s.takeFault(r.URL.Path)

	switch {
	case f != nil && f.Kind == FaultStatus:
		http.Error(w, f.Body, f.Status)

		return
	case f != nil && f.Kind == FaultRedirect:
		status := f.Status
		if status == 0 {
			status = http.StatusFound
		}

		http.Redirect(w, r, f.Location, status)

		return
	}

	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")

	switch {
	case r.URL.Path == "/schematics":
		onlyMethods(w, r, func() { s.createSchematic(w, body) }, http.MethodPost)
	case len(parts) == 2 && parts[0] == "schematics" && s.atLeast("v0.9.0"):
		onlyMethods(w, r, func() { s.getSchematic(w, parts[1]) }, http.MethodGet)
	case r.URL.Path == "/healthz", r.URL.Path == "/readyz" && s.atLeast("v1.3.0"):
		_, _ = io.WriteString(w, "OK")
	case r.URL.Path == "/versions":
		onlyMethods(w, r, func() { s.listVersions(w) }, http.MethodGet)
	case len(parts) == 4 && parts[0] == "version" && parts[2] == "extensions" && parts[3] == "official":
		onlyMethods(w, r, func() { s.listExtensions(w, parts[1]) }, http.MethodGet)
	case len(parts) == 4 && parts[0] == "version" && parts[2] == "overlays" && parts[3] == "official":
		onlyMethods(w, r, func() { s.listOverlays(w, parts[1]) }, http.MethodGet)
	case len(parts) == 4 && parts[0] == "image":
		onlyMethods(w, r, func() { s.serveImage(w, r, f) }, http.MethodGet, http.MethodHead)
	case len(parts) == 5 && parts[0] == "v2" && parts[3] == "manifests": // registry.go
		onlyMethods(w, r, func() { s.serveManifest(w, r, parts) }, http.MethodGet, http.MethodHead)
	default:
		http.NotFound(w, r)
	}
}

func onlyMethods(w http.ResponseWriter, r *http.Request, h func(), methods ...string) {
	if !slices.Contains(methods, r.Method) {
		w.Header().Set("Allow", strings.Join(methods, ", "))
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)

		return
	}

	h()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) createSchematic(w http.ResponseWriter, body []byte) {
	sc, err := schematic.Unmarshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)

		return
	}

	id, err := s.AddSchematic(sc)
	if err != nil {
		http.Error(w, "internal server error", http.StatusInternalServerError)

		return
	}

	reply := map[string]string{"id": id}
	if s.atLeast("v1.3.0") {
		reply["schematic"] = string(body)
	}

	writeJSON(w, http.StatusCreated, reply)
}

func (s *Server) getSchematic(w http.ResponseWriter, id string) {
	s.mu.Lock()
	data, ok := s.schematics[id]
	disabled := s.noSchematicLookup
	s.mu.Unlock()

	switch {
	case disabled:
		http.Error(w, "404 page not found", http.StatusNotFound)
	case !ok:
		http.Error(w, fmt.Sprintf("schematic %q not found", id), http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(data)
	}
}

func (s *Server) listVersions(w http.ResponseWriter) {
	s.mu.Lock()
	v := slices.Clone(s.versions)
	s.mu.Unlock()

	writeJSON(w, http.StatusOK, v)
}

func (s *Server) knownVersion(v string) bool {
	return slices.Contains(s.versions, v) || slices.Contains(s.versions, "v"+v)
}

func (s *Server) listExtensions(w http.ResponseWriter, version string) {
	serveVersionList(s, w, version, s.extensions)
}

func (s *Server) listOverlays(w http.ResponseWriter, version string) {
	serveVersionList(s, w, version, s.overlays)
}

// serveVersionList answers a per-version list route: 404 for a version the
// factory does not know, else the list (never JSON null).
func serveVersionList[T any](s *Server, w http.ResponseWriter, version string, lists map[string][]T) {
	s.mu.Lock()
	list, ok := lists[version]
	known := s.knownVersion(version)
	s.mu.Unlock()

	if !known || !ok {
		s.unknownVersion(w, version)

		return
	}

	if list == nil {
		list = []T{}
	}

	writeJSON(w, http.StatusOK, list)
}

// lookupImage finds the image for path, answering the factory's error when
// there is none (unknown version or schematic).
func (s *Server) lookupImage(w http.ResponseWriter, path string, f *Fault) *image {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")

	s.mu.Lock()
	img := s.images[path]
	known := len(parts) == 4 && s.knownVersion(parts[2])
	s.mu.Unlock()

	if img == nil {
		if !known {
			s.unknownVersion(w, parts[min(2, len(parts)-1)])
		} else {
			http.Error(w, "schematic not found", http.StatusNotFound)
		}

		return nil
	}

	if f != nil && f.Kind == FaultContent {
		sum := sha256.Sum256(f.Data)
		img = &image{data: f.Data, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, modTime: img.modTime.Add(time.Second)}
	}

	return img
}

// HoldImages makes every image request wait, the other routes answering,
// until release is called: the images are still being made (fakefactory
// listens before it makes a large one), as the real factory builds an image
// before it sends any header.
func (s *Server) HoldImages() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held = ch
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// waitHeld waits for HoldImages' release; false when the client gave up.
func (s *Server) waitHeld(r *http.Request) bool {
	s.mu.Lock()
	ch := s.held
	s.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-r.Context().Done():
		return false
	}
}

// waitBuild holds the first GET of an image (and those joining it) for the
// build delay; false when the client gave up.
func (s *Server) waitBuild(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return true
	}

	s.mu.Lock()
	ch, ok := s.builds[r.URL.Path]

	if !ok {
		ch = make(chan struct{})
		s.builds[r.URL.Path] = ch

		time.AfterFunc(s.buildDelay, func() { close(ch) })
	}
	s.mu.Unlock()

	select {
	case <-ch:
		return true
	case <-r.Context().Done():
		return false
	}
}

func contentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".xz"):
		return "application/x-xz"
	case strings.HasSuffix(name, ".zst"):
		return "application/zstd"
	case strings.HasSuffix(name, ".gz"):
		return "application/gzip"
	}

	return "application/octet-stream"
}

// serveImage is the direct path: 200 with the whole file, Range ignored,
// no validators, after the build on first request.
func (s *Server) serveImage(w http.ResponseWriter, r *http.Request, f *Fault) {
	img := s.lookupImage(w, r.URL.Path, f)
	if img == nil || !s.waitBuild(r) {
		return
	}

	name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	w.Header().Set("Content-Type", contentType(name))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Header().Set("Content-Length", fmt.Sprint(len(img.data)))
	w.WriteHeader(http.StatusOK)

	if r.Method == http.MethodHead {
		return
	}

	fw := s.faultWriter(w, r, f)
	_, _ = fw.Write(img.data)
}

// serveStorage is the object-storage URL: Range, ETag and Last-Modified.
func (s *Server) serveStorage(w http.ResponseWriter, r *http.Request, path string, f *Fault) {
	img := s.lookupImage(w, path, f)
	if img == nil {
		return
	}

	w.Header().Set("ETag", img.etag)
	w.Header().Set("Content-Type", contentType(path))

	name := path[strings.LastIndex(path, "/")+1:]
	http.ServeContent(s.faultWriter(w, r, f), r, name, img.modTime, bytes.NewReader(img.data))
}

func (s *Server) faultWriter(w http.ResponseWriter, r *http.Request, f *Fault) *faultWriter {
	fw := &faultWriter{ResponseWriter: w, ctx: r, fault: f, counter: &s.bytesServed}
	if f != nil && f.Kind == FaultCorrupt {
		fw.corrupt = true
	}

	return fw
}

// faultWriter counts image bytes and applies byte-offset faults.
type faultWriter struct {
	http.ResponseWriter

	ctx     *http.Request
	fault   *Fault
	counter *atomic.Int64
	written int64
	corrupt bool
	dead    bool
}

// send writes p and counts it. The count goes up before the write: a client
// may read the last byte before the server's Write returns, and a test that
// checks BytesServed after its read must already see it.
func (fw *faultWriter) send(p []byte) (int, error) {
	fw.counter.Add(int64(len(p)))

	n, err := fw.ResponseWriter.Write(p)
	fw.written += int64(n)
	fw.counter.Add(int64(n - len(p)))

	return n, err
}

func (fw *faultWriter) Write(p []byte) (int, error) {
	if fw.dead {
		return 0, net.ErrClosed
	}

	f := fw.fault
	if f == nil || fw.corrupt || (f.Kind != FaultReset && f.Kind != FaultStall && f.Kind != FaultShortBody) {
		if fw.corrupt {
			p = corruptFrom(p, fw.written, f.After)
		}

		return fw.send(p)
	}

	allowed := f.After - fw.written
	if allowed >= int64(len(p)) {
		return fw.send(p)
	}

	n := 0
	if allowed > 0 {
		n, _ = fw.send(p[:allowed])
	}

	if fl, ok := fw.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}

	fw.dead = true

	switch f.Kind {
	case FaultStall:
		<-fw.ctx.Context().Done()
	case FaultReset, FaultShortBody:
		fw.hangUp(f.Kind == FaultReset)
	}

	return n, net.ErrClosed
}

// hangUp closes the connection under the response: with RST when reset is
// set (SO_LINGER 0), otherwise with a normal FIN.
func (fw *faultWriter) hangUp(reset bool) {
	hj, ok := fw.ResponseWriter.(http.Hijacker)
	if !ok {
		return // HTTP/2 has no hijacking; the handler's error ends the stream
	}

	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}

	_ = buf.Flush()

	if tcp, ok := conn.(*net.TCPConn); ok && reset {
		_ = tcp.SetLinger(0)
	}

	_ = conn.Close()
}

func corruptFrom(p []byte, offset, from int64) []byte {
	if offset+int64(len(p)) <= from {
		return p
	}

	out := slices.Clone(p)
	for i := range out {
		if offset+int64(i) >= from {
			out[i] ^= 0xff
		}
	}

	return out
}

func defaultExtensions(version string) []client.ExtensionInfo {
	out := make([]client.ExtensionInfo, 0, len(DefaultExtensions))
	for _, name := range DefaultExtensions {
		sum := sha256.Sum256([]byte(name + "@" + version))
		out = append(out, client.ExtensionInfo{
			Name:        name,
			Ref:         "ghcr.io/" + name + ":" + version,
			Digest:      "sha256:" + hex.EncodeToString(sum[:]),
			Author:      "Sidero Labs",
			Description: "fake " + name + " extension",
		})
	}

	return out
}

// Overlay table of the fake, per Talos version, as the real factory lists
// the overlays bundle of that release (siderolabs/overlays
// internal/overlays/overlays.yaml at the release's tag): none before
// Talos 1.7 (the first overlays release, v1.7.0-alpha.1), the Raspberry Pi
// rpi_generic from then on, rpi_5 from v1.12.3 (absent at the v1.12.2 tag,
// present at v1.12.3, with sbc-raspberrypi v0.1.8). The fake keeps its own
// table rather than the factory package's boards, so a test can check one
// against the other (fakefactory's main_test.go).
const (
	RPiOverlayImage     = "siderolabs/sbc-raspberrypi"
	OverlaysMinVersion  = "v1.7.0"
	RPi5OverlayMinTalos = "v1.12.3"
)

var (
	overlaysMin = semver.MustParse(strings.TrimPrefix(OverlaysMinVersion, "v"))
	rpi5Min     = semver.MustParse(strings.TrimPrefix(RPi5OverlayMinTalos, "v"))
)

// defaultOverlays is the official overlay list of a Talos version. A
// version that does not parse gets the newest list.
func defaultOverlays(version string) []client.OverlayInfo {
	names := []string{"rpi_generic", "rpi_5"}

	if v, err := semver.ParseTolerant(version); err == nil {
		switch {
		case v.LT(overlaysMin):
			names = nil
		case v.LT(rpi5Min):
			names = names[:1]
		}
	}

	out := []client.OverlayInfo{}

	for _, name := range names {
		sum := sha256.Sum256([]byte(name + "@" + version))
		out = append(out, client.OverlayInfo{
			Name:   name,
			Image:  RPiOverlayImage,
			Ref:    "ghcr.io/siderolabs/sbc-raspberrypi:v0.1.0",
			Digest: "sha256:" + hex.EncodeToString(sum[:]),
		})
	}

	return out
}
