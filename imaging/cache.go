package imaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// Cache stores downloaded images under Dir, one file per key
// (<Dir>/<factory>/<schematic>/<version>/<file>, see FactoryCacheKey). A
// file under its final name is always complete and passed the container
// check (checkImage); downloads in progress live in <name>.partial with
// their HTTP validators in <name>.partial.json. Nothing below Dir is
// reached through a symlink: every access walks down from Dir with
// O_NOFOLLOW directory descriptors (cacheDir), and a symlinked directory
// is refused (ErrCache), never followed or deleted through. Files are
// regular (anything else at our names is removed), 0600, directories 0700
// and ours. Processes sharing an entry take turns through a lock on
// <name>.lock: one downloads, the others wait and reuse its result.
type Cache struct {
	Dir string

	// Download tuning; zero values mean the Default* constants.
	// Retries < 0 disables retries.
	Retries      int
	RetryDelay   time.Duration // first backoff, doubled per retry (max 30 s)
	IdleTimeout  time.Duration // a body read idle this long counts as a stall
	BuildTimeout time.Duration // longest wait for headers (the factory builds first)
	MaxDownload  int64         // most bytes a download may take (DefaultMaxDownload)
}

// ErrCache is matched by failures of the cache directory itself (read-only,
// full, not a directory, a symlink where an entry should be): they are
// local, not the network's, and name the path.
var ErrCache = errors.New("image cache unusable")

// CacheError is a failure of the cache's file system at Path.
type CacheError struct {
	Path string
	Err  error
}

func (e *CacheError) Error() string { return "image cache " + e.Path + ": " + e.Err.Error() }
func (e *CacheError) Unwrap() error { return e.Err }

// Is makes a CacheError match ErrCache.
func (e *CacheError) Is(target error) bool { return target == ErrCache }

func cacheError(path string, err error) error { return &CacheError{Path: path, Err: err} }

// freeReserve is left free on the cache's file system by a download whose
// size is unknown.
const freeReserve = 64 << 20

// DefaultCache is the per-user cache: os.UserCacheDir()/talosflash/images.
func DefaultCache() (*Cache, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("locate cache directory: %w", err)
	}
	return &Cache{Dir: filepath.Join(dir, "talosflash", "images")}, nil
}

// DefaultFactoryURL is the public Image Factory, whose images are keyed
// under its plain host name.
const DefaultFactoryURL = "https://factory.talos.dev"

// CacheKey is the cache key of a file from the public Image Factory
// (FactoryCacheKey with DefaultFactoryURL).
func CacheKey(schematicID, version, file string) string {
	return FactoryCacheKey(DefaultFactoryURL, schematicID, version, file)
}

// FactoryCacheKey builds the cache key of an Image Factory file:
// <factory>/<schematic>/<version>/<file>. Images of different factories
// never share an entry: the factory segment is "factory.talos.dev" for the
// public factory, else the host (and port) of factoryURL with a short hash
// of its scheme, host, port and path prefix. factoryURL is the factory's
// base URL or the image URL itself; userinfo and query never enter the key.
func FactoryCacheKey(factoryURL, schematicID, version, file string) string {
	return factorySegment(factoryURL) + "/" + sanitizeSegment(schematicID) + "/" + sanitizeSegment(version) + "/" + sanitizeSegment(file)
}

func factorySegment(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		sum := sha256.Sum256([]byte(raw))
		return "factory-" + hex.EncodeToString(sum[:4])
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	// An image URL: the factory is what comes before /image/<id>/<version>/<file>.
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	if n := len(parts); n >= 4 && parts[n-4] == "image" {
		parts = parts[:n-4]
	}
	origin := scheme + "://" + host
	name := host
	if port != "" {
		origin += ":" + port
		name += "_" + port
	}
	if prefix := strings.Join(parts, "/"); prefix != "" {
		origin += "/" + prefix
	}
	if origin == DefaultFactoryURL {
		return "factory.talos.dev"
	}
	sum := sha256.Sum256([]byte(origin))
	return sanitizeSegment(name) + "-" + hex.EncodeToString(sum[:4])
}

// sanitizeSegment keeps [A-Za-z0-9._+-] and replaces anything else.
func sanitizeSegment(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '+'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

const (
	partialSuffix = ".partial"
	metaSuffix    = ".partial.json"
	lockSuffix    = ".lock"
	maxMetaSize   = 64 << 10
)

// Path returns where the entry for key lives (whether or not it exists).
// Keys are '/'-separated; each segment is sanitized, and keys that could
// leave Dir ("..", empty segments) or clash with temporary files are refused.
func (c *Cache) Path(key string) (string, error) {
	segs, err := c.segments(key)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.Dir, filepath.Join(segs...)), nil
}

func (c *Cache) segments(key string) ([]string, error) {
	if c == nil || c.Dir == "" {
		return nil, errors.New("image cache: no directory configured")
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		s = sanitizeSegment(s)
		if s == "" || s == "." || s == ".." {
			return nil, fmt.Errorf("image cache: invalid key %q", key)
		}
		segs[i] = s
	}
	last := segs[len(segs)-1]
	if strings.Contains(last, partialSuffix) || strings.HasSuffix(last, lockSuffix) {
		return nil, fmt.Errorf("image cache: invalid key %q", key)
	}
	if !filepath.IsLocal(filepath.Join(segs...)) {
		return nil, fmt.Errorf("image cache: invalid key %q", key)
	}
	return segs, nil
}

// entryDir opens the directory that holds key's files (see openCacheDir)
// and returns it with the entry's file name.
func (c *Cache) entryDir(key string, create bool) (*cacheDir, string, error) {
	segs, err := c.segments(key)
	if err != nil {
		return nil, "", err
	}
	d, err := openCacheDir(c.Dir, segs[:len(segs)-1], create)
	if err != nil {
		return nil, "", err
	}
	return d, segs[len(segs)-1], nil
}

// Remove deletes the entry for key and any partial download of it. A
// symlinked directory on the way is refused (ErrCache), nothing behind it
// is deleted.
func (c *Cache) Remove(key string) error {
	d, name, err := c.entryDir(key, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.close()
	var errs []error
	for _, f := range []string{name, name + partialSuffix, name + metaSuffix, name + metaSuffix + ".tmp"} {
		if err := d.remove(f); err != nil {
			errs = append(errs, cacheError(d.join(f), err))
		}
	}
	return errors.Join(errs...)
}

// errNotRegular is what cacheDir.open returns for a symlink, FIFO, device
// or directory where the cache keeps a file.
var errNotRegular = errors.New("not a regular file")

// openOwn opens one of the cache's own files in d; a symlink, FIFO or
// other non-regular file planted at its name is removed first (the name
// itself, in a directory reached without symlinks, never what it points to).
func openOwn(d *cacheDir, name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := d.open(name, flag, perm)
	if errors.Is(err, errNotRegular) {
		if rerr := d.remove(name); rerr != nil {
			return nil, cacheError(d.join(name), fmt.Errorf("%w, and it can't be removed: %w", errNotRegular, rerr))
		}
		f, err = d.open(name, flag, perm)
	}
	if err != nil {
		return nil, cacheError(d.join(name), err)
	}
	return f, nil
}

// lockEntry takes the entry's lock file, waiting (cancellably) while
// another process holds it; waiting is called once if it has to wait.
func lockEntry(ctx context.Context, d *cacheDir, name string, waiting func()) (*os.File, error) {
	lf, err := openOwn(d, name+lockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	told := false
	for {
		ok, err := tryLockFile(lf)
		if err != nil {
			lf.Close()
			return nil, err
		}
		if ok {
			return lf, nil
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			lf.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// setStage switches what the meter reports (the build wait, then the
// download) and, if done >= 0, reports it at once.
func (m *meter) setStage(s Stage, done int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	changed := m.stage != s
	m.stage = s
	m.mu.Unlock()
	if changed && done >= 0 {
		m.update(done, true)
	}
}

// Has reports whether the entry for key is complete and passes the same
// checks Fetch makes before it reuses one, without any network. Like Fetch,
// it removes a damaged entry. An unusable cache counts as no entry (see
// Lookup for the reason).
func (c *Cache) Has(key string) bool {
	ok, err := c.Lookup(key)
	return ok && err == nil
}

// Lookup is Has with the reason an entry can't be used: an error matching
// ErrCache for a symlinked or foreign directory on the way, or a damaged
// entry that can't be removed. A missing entry is (false, nil).
func (c *Cache) Lookup(key string) (bool, error) {
	d, name, err := c.entryDir(key, false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer d.close()
	f, err := openEntry(d, name)
	if f != nil {
		f.Close()
	}
	return f != nil, err
}

// Open opens the complete, checked entry for key for reading (no
// network); fs.ErrNotExist when there is none (a damaged one is removed).
// Unlike opening Fetch's path, nothing can be swapped in between.
func (c *Cache) Open(key string) (*os.File, error) {
	d, name, err := c.entryDir(key, false)
	if err != nil {
		return nil, err
	}
	defer d.close()
	f, err := openEntry(d, name)
	if err == nil && f == nil {
		err = &fs.PathError{Op: "open", Path: d.join(name), Err: fs.ErrNotExist}
	}
	return f, err
}

// openEntry opens name in d if it is a complete, checked entry (nil
// without error if absent); a damaged one, or a non-regular file in its
// place, is removed.
func openEntry(d *cacheDir, name string) (*os.File, error) {
	f, err := d.open(name, os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, errNotRegular):
	case err != nil:
		return nil, cacheError(d.join(name), err)
	default:
		cerr := checkImage(f)
		if cerr == nil {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				f.Close()
				return nil, cacheError(d.join(name), err)
			}
			return f, nil
		}
		f.Close()
	}
	if err := d.remove(name); err != nil {
		return nil, cacheError(d.join(name), fmt.Errorf("remove damaged cache entry: %w", err))
	}
	return nil, nil
}

// cachedEntry reports the size of name in d if it is a complete, checked
// entry (see openEntry).
func cachedEntry(d *cacheDir, name string) (int64, bool, error) {
	f, err := openEntry(d, name)
	if f == nil || err != nil {
		return 0, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, cacheError(d.join(name), err)
	}
	return st.Size(), true, nil
}

// partialMeta is saved beside a partial download so a later run can
// resume it with If-Range.
type partialMeta struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	Size         int64  `json:"size"`
}

// Fetch returns the path of a complete, checked copy of url in the cache,
// downloading (or resuming) it first if needed. progress receives
// StageDownload reports. A present entry that fails the xz container check
// is deleted and fetched again.
func (c *Cache) Fetch(ctx context.Context, httpClient *http.Client, url, key string, progress ProgressFunc) (string, error) {
	return c.fetch(ctx, httpClient, url, key, progress, nil)
}

// fetch is Fetch; g, when set, follows the partial download as it grows
// (fetchStream).
func (c *Cache) fetch(ctx context.Context, httpClient *http.Client, url, key string, progress ProgressFunc, g *growing) (string, error) {
	final, err := c.Path(key)
	if err != nil {
		return "", err
	}
	// Walks from Dir (creating what is missing) and refuses a symlinked
	// or foreign directory, on a hit as on a miss.
	d, name, err := c.entryDir(key, true)
	if err != nil {
		return "", err
	}
	defer d.close()
	// hit reports a complete, checked entry: looked for before the lock
	// and again once it is held (another process may have finished it).
	hit := func() (bool, error) {
		size, ok, err := cachedEntry(d, name)
		if err == nil && ok {
			newMeter(progress, StageDownload, size, false).update(size, true)
		}
		return ok, err
	}
	if ok, err := hit(); err != nil {
		return "", err
	} else if ok {
		return final, nil
	}
	// One process downloads an entry at a time; the others wait here, then
	// find it complete.
	lf, err := lockEntry(ctx, d, name, func() {
		if progress != nil {
			progress(Progress{Stage: StageDownload})
		}
	})
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if ok, err := hit(); err != nil {
		return "", err
	} else if ok {
		return final, nil
	}
	partial, metaName := name+partialSuffix, name+metaSuffix
	f := newFetcher(c, httpClient, url)
	if m, ok := loadMeta(d, metaName); ok && m.URL == url && (m.ETag != "" || m.LastModified != "") {
		f.etag, f.modified, f.total = m.ETag, m.LastModified, m.Size
	} else {
		// A partial without a validator can't be proven to continue: start over.
		_ = d.remove(partial)
		_ = d.remove(metaName)
	}
	if g != nil {
		// One inode from here to the rename: attempts append to it or
		// rewrite it in place.
		pf, err := openOwn(d, partial, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return "", err
		}
		g.attach(pf)
	}
	meter := newMeter(progress, StageDownload, f.total, false)
	// Late headers: the factory is building the image. Reported through the
	// meter (serialized; its keep-alive repeats it) until the body flows.
	f.building = func() { meter.setStage(StageBuild, 0) }
	defer meter.keepAlive()()
	for attempt := 0; ; attempt++ {
		err = downloadOnce(ctx, f, d, partial, metaName, meter, g)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("download %s: %w", url, ctx.Err())
		}
		if !retryable(err) || attempt >= f.retries {
			if attempt > 0 {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1)
			}
			return "", downloadFailed(err)
		}
		if err := f.backoff(ctx, attempt+1); err != nil {
			return "", fmt.Errorf("download %s: %w", url, err)
		}
	}
	if err := checkPartial(d, partial); err != nil {
		_ = d.remove(partial)
		_ = d.remove(metaName)
		return "", fmt.Errorf("downloaded %s: %w", url, err)
	}
	if err := d.rename(partial, name); err != nil {
		return "", cacheError(final, err)
	}
	_ = d.remove(metaName)
	d.sync()
	return final, nil
}

// checkPartial runs the container check on a finished download.
func checkPartial(d *cacheDir, partial string) error {
	pf, err := d.open(partial, os.O_RDONLY, 0)
	if err != nil {
		return cacheError(d.join(partial), err)
	}
	defer pf.Close()
	return checkImage(pf)
}

// downloadOnce makes one request and appends what it gets to partial. When
// the partial can't be resumed (errRestart) the request is made again from
// byte 0, once. An answer from byte 0 over bytes the partial already holds
// (a restart) is checked against them rather than written over them: the
// reader following the partial may have taken them (see restart).
func downloadOnce(ctx context.Context, f *fetcher, d *cacheDir, partial, metaName string, meter *meter, g *growing) error {
	out, err := openOwn(d, partial, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return permanent(err)
	}
	defer out.Close()
	st, err := out.Stat()
	if err != nil {
		return permanent(cacheError(d.join(partial), err))
	}
	have := st.Size() // bytes of an earlier attempt
	off := have
	if off > 0 && f.total == off {
		if g != nil {
			g.advance(off, off)
		}
		return nil // complete from an earlier attempt; the container check decides
	}
	if f.total >= 0 && off > f.total {
		off = 0 // larger than announced: not the file we saved it for
	}
	resp, err := f.get(ctx, off)
	if errors.Is(err, errRestart) {
		_ = d.remove(metaName)
		f.etag, f.modified, f.total = "", "", -1
		off = 0
		resp, err = f.get(ctx, 0)
	}
	meter.setStage(StageDownload, -1)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	meter.setTotal(resp.total)
	limit, byFree := f.max, false
	dir := d.path
	if free, ok := freeSpace(dir); ok {
		room := free + have - freeReserve
		if resp.total >= 0 && resp.total-max(resp.start, have) > free {
			return permanent(cacheError(dir, fmt.Errorf("%w: the download needs %d more bytes, the file system has %d free", ErrTooLarge, resp.total-max(resp.start, have), free)))
		}
		if room < limit {
			limit, byFree = max(room, 0), true
		}
	}
	if resp.start == 0 {
		// New content (or first request): save its validators for resuming.
		if err := saveMeta(d, metaName, partialMeta{URL: f.url, ETag: f.etag, LastModified: f.modified, Size: f.total}); err != nil {
			return permanent(err)
		}
	}
	pos := resp.start
	rs := &restart{out: out, g: g, total: resp.total, end: have}
	if pos >= have {
		if err := out.Truncate(pos); err != nil {
			return permanent(cacheError(d.join(partial), err))
		}
		rs.end = pos
		if g != nil {
			g.advance(pos, resp.total)
		}
	} else if g != nil {
		g.advance(have, resp.total) // the total may be news; the bytes stay
	}
	meter.update(pos, true)
	buf := make([]byte, 1<<20)
	var readErr error
	for {
		n, err := resp.body.Read(buf)
		if n > 0 {
			if resp.total >= 0 && pos+int64(n) > resp.total {
				return permanent(fmt.Errorf("download %s: server sent more than the announced %s", f.url, humanbytes.Exact(resp.total)))
			}
			if resp.total < 0 && pos+int64(n) > limit {
				// No Content-Length: never fill the disk. Nothing to resume.
				_ = out.Truncate(0)
				_ = d.remove(metaName)
				if byFree {
					return permanent(cacheError(dir, fmt.Errorf("%w: download %s announced no size and would fill the file system (stopped at %s, %s kept free)", ErrTooLarge, f.url, humanbytes.Exact(limit), humanbytes.Exact(freeReserve))))
				}
				return permanent(fmt.Errorf("download %s: no size announced and more than %s sent (the most a download may take): %w", f.url, humanbytes.Exact(limit), ErrTooLarge))
			}
			chunk := buf[:n]
			if pos < rs.end {
				same, cerr := rs.check(pos, chunk)
				if cerr != nil {
					return permanent(cacheError(d.join(partial), cerr))
				}
				pos += int64(same)
				chunk = chunk[same:]
			}
			if len(chunk) > 0 {
				if _, werr := out.WriteAt(chunk, pos); werr != nil {
					return permanent(cacheError(d.join(partial), werr))
				}
				pos += int64(len(chunk))
				rs.end = pos
			}
			meter.update(pos, false)
			if g != nil && pos >= rs.end {
				g.advance(pos, resp.total)
			}
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	if pos < rs.end {
		if readErr != nil {
			// Cut inside the re-sent prefix: beyond pos the partial holds
			// the earlier answer's bytes, unchecked. A resume from its end
			// would trust them: the next attempt starts from 0 and checks
			// again.
			_ = d.remove(metaName)
			f.etag, f.modified, f.total = "", "", -1
		} else if err := rs.cutAt(pos); err != nil {
			// The answer is shorter than what the partial holds.
			return permanent(cacheError(d.join(partial), err))
		}
	}
	// Keep what arrived even on error: the next attempt resumes from it.
	if err := out.Sync(); err != nil {
		return permanent(cacheError(d.join(partial), err))
	}
	meter.update(pos, true)
	if readErr != nil {
		return fmt.Errorf("download %s: %w after %s", f.url, readErr, humanbytes.Exact(pos))
	}
	if resp.total >= 0 && pos != resp.total {
		return fmt.Errorf("download %s: %w: got %s of %s", f.url, io.ErrUnexpectedEOF, humanbytes.Exact(pos), humanbytes.Exact(resp.total))
	}
	if resp.total < 0 {
		f.total = pos
	}
	return nil
}

// restart is an answer from byte 0 over a partial that already holds end
// bytes (a cut without validators, or content the server says changed).
// The partial's reader may have taken some of them: the answer's bytes are
// compared with the file's, and where they are the same nothing happens
// (the reader does not notice the restart). The first differing byte
// truncates the file there; if the reader had taken it, it fails as a
// splice (growing.advance): what a reader receives is a prefix of exactly
// one answer's body, or an error.
type restart struct {
	out   *os.File
	g     *growing
	total int64
	end   int64 // bytes of the file not yet passed or rewritten
	cmp   []byte
}

// check compares p, the answer's bytes at pos (< end), with the file's
// and returns how many of them are the same; at a difference the file is
// cut there.
func (r *restart) check(pos int64, p []byte) (int, error) {
	m := int(min(int64(len(p)), r.end-pos))
	if cap(r.cmp) < m {
		r.cmp = make([]byte, m)
	}
	had := r.cmp[:m]
	if _, err := r.out.ReadAt(had, pos); err != nil {
		return 0, fmt.Errorf("compare the restarted download with the partial: %w", err)
	}
	for i := range m {
		if had[i] != p[i] {
			return i, r.cutAt(pos + int64(i))
		}
	}
	return m, nil
}

// cutAt drops the file's bytes from at on: its reader is told first (a
// splice if it took them), then the file is truncated.
func (r *restart) cutAt(at int64) error {
	if r.g != nil {
		r.g.advance(at, r.total)
	}
	r.end = at
	return r.out.Truncate(at)
}

// loadMeta reads the sidecar of a partial download (bounded; a
// non-regular file there is removed, see openOwn).
func loadMeta(d *cacheDir, name string) (partialMeta, bool) {
	var m partialMeta
	f, err := openOwn(d, name, os.O_RDONLY, 0)
	if err != nil {
		return m, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMetaSize))
	if err != nil || json.Unmarshal(data, &m) != nil {
		return m, false
	}
	return m, true
}

func saveMeta(d *cacheDir, name string, m partialMeta) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := d.remove(tmp); err != nil { // a link planted there is removed, not followed
		return cacheError(d.join(tmp), err)
	}
	f, err := d.open(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return cacheError(d.join(tmp), err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cacheError(d.join(tmp), err)
	}
	if err := d.rename(tmp, name); err != nil {
		return cacheError(d.join(name), err)
	}
	return nil
}
