package imaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cache stores downloaded images under Dir, one file per key
// (<Dir>/<schematic>/<version>/<file>). A file under its final name is
// always complete and passed the container check (checkImageFile);
// downloads in progress live in <name>.partial with their HTTP validators
// in <name>.partial.json. Nothing in the cache is reached through a
// symlink; files are 0600 and directories 0700. Processes sharing an entry
// take turns through a lock on <name>.lock: one downloads, the others wait
// and reuse its result.
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

// CacheKey builds the cache key of an Image Factory file.
func CacheKey(schematicID, version, file string) string {
	return sanitizeSegment(schematicID) + "/" + sanitizeSegment(version) + "/" + sanitizeSegment(file)
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
	if c == nil || c.Dir == "" {
		return "", errors.New("image cache: no directory configured")
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		s = sanitizeSegment(s)
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("image cache: invalid key %q", key)
		}
		segs[i] = s
	}
	last := segs[len(segs)-1]
	if strings.Contains(last, partialSuffix) || strings.HasSuffix(last, lockSuffix) {
		return "", fmt.Errorf("image cache: invalid key %q", key)
	}
	rel := filepath.Join(segs...)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("image cache: invalid key %q", key)
	}
	return filepath.Join(c.Dir, rel), nil
}

// Remove deletes the entry for key and any partial download of it.
func (c *Cache) Remove(key string) error {
	p, err := c.Path(key)
	if err != nil {
		return err
	}
	return removeEntry(p)
}

func removeEntry(p string) error {
	var errs []error
	for _, f := range []string{p, p + partialSuffix, p + metaSuffix} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// mkdirs creates the directories from c.Dir down to dir (0700), refusing a
// symlink at any level below c.Dir: a link planted in the cache must not
// send a download elsewhere.
func (c *Cache) mkdirs(dir string) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return cacheError(c.Dir, err)
	}
	rel, err := filepath.Rel(c.Dir, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("image cache: %s is outside %s", dir, c.Dir)
	}
	cur := c.Dir
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(cur, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return cacheError(cur, err)
			}
			if fi, err = os.Lstat(cur); err != nil {
				return cacheError(cur, err)
			}
		} else if err != nil {
			return cacheError(cur, err)
		}
		if !fi.IsDir() {
			return cacheError(cur, errors.New("not a directory (a symlink?); refusing to use it"))
		}
	}
	return nil
}

// lock takes the entry's lock file, waiting (cancellably) while another
// process holds it; waiting is called once if it has to wait.
func lockEntry(ctx context.Context, final string, waiting func()) (*os.File, error) {
	removeSymlink(final + lockSuffix)
	lf, err := openNoFollow(final+lockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, cacheError(final+lockSuffix, err)
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

// removeSymlink deletes a symlink planted where the cache keeps a file of
// its own (the link, never its target); opens use O_NOFOLLOW anyway.
func removeSymlink(p string) {
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		_ = os.Remove(p)
	}
}

// Has reports whether the entry for key is complete and passes the same
// checks Fetch makes before it reuses one (no symlink, a valid container),
// without any network. Like Fetch, it removes a damaged entry.
func (c *Cache) Has(key string) bool {
	final, err := c.Path(key)
	if err != nil {
		return false
	}
	_, ok, err := cachedEntry(final)
	return err == nil && ok
}

// cachedEntry reports whether final is a complete, checked entry; a
// damaged one (or a symlink in its place) is removed.
func cachedEntry(final string) (int64, bool, error) {
	fi, err := os.Lstat(final)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, cacheError(final, err)
	}
	if fi.Mode().IsRegular() && checkImageFile(final) == nil {
		return fi.Size(), true, nil
	}
	if err := os.Remove(final); err != nil {
		return 0, false, fmt.Errorf("remove damaged cache entry %s: %w", final, err)
	}
	return 0, false, nil
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
	final, err := c.Path(key)
	if err != nil {
		return "", err
	}
	if size, ok, err := cachedEntry(final); err != nil {
		return "", err
	} else if ok {
		newMeter(progress, StageDownload, size, false).update(size, true)
		return final, nil
	}
	if err := c.mkdirs(filepath.Dir(final)); err != nil {
		return "", err
	}
	// One process downloads an entry at a time; the others wait here, then
	// find it complete.
	lf, err := lockEntry(ctx, final, func() {
		if progress != nil {
			progress(Progress{Stage: StageDownload})
		}
	})
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if size, ok, err := cachedEntry(final); err != nil {
		return "", err
	} else if ok {
		newMeter(progress, StageDownload, size, false).update(size, true)
		return final, nil
	}
	partial, metaPath := final+partialSuffix, final+metaSuffix
	f := newFetcher(c, httpClient, url)
	if m, ok := loadMeta(metaPath); ok && m.URL == url && (m.ETag != "" || m.LastModified != "") {
		f.etag, f.modified, f.total = m.ETag, m.LastModified, m.Size
	} else {
		// A partial without a validator can't be proven to continue: start over.
		_ = os.Remove(partial)
		_ = os.Remove(metaPath)
	}
	meter := newMeter(progress, StageDownload, f.total, false)
	// Late headers: the factory is building the image. Reported through the
	// meter (serialized; its keep-alive repeats it) until the body flows.
	f.building = func() { meter.setStage(StageBuild, 0) }
	defer meter.keepAlive()()
	for attempt := 0; ; attempt++ {
		err = downloadOnce(ctx, f, c.Dir, partial, metaPath, meter)
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
	if err := checkImageFile(partial); err != nil {
		_ = os.Remove(partial)
		_ = os.Remove(metaPath)
		return "", fmt.Errorf("downloaded %s: %w", url, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return "", cacheError(final, err)
	}
	_ = os.Remove(metaPath)
	syncDir(filepath.Dir(final))
	return final, nil
}

// downloadOnce makes one request and appends what it gets to partial. When
// the partial can't be resumed (errRestart) it is dropped and the request
// made again from byte 0, once.
func downloadOnce(ctx context.Context, f *fetcher, dir, partial, metaPath string, meter *meter) error {
	removeSymlink(partial)
	out, err := openNoFollow(partial, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return permanent(cacheError(partial, err))
	}
	defer out.Close()
	st, err := out.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return permanent(cacheError(partial, errors.New("not a regular file")))
	}
	off := st.Size()
	if off > 0 && f.total == off {
		return nil // complete from an earlier attempt; the container check decides
	}
	if f.total >= 0 && off > f.total {
		off = 0 // larger than announced: not the file we saved it for
	}
	resp, err := f.get(ctx, off)
	if errors.Is(err, errRestart) {
		_ = os.Remove(metaPath)
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
	if free, ok := freeSpace(dir); ok {
		room := free + off - freeReserve
		if resp.total >= 0 && resp.total-resp.start > free {
			return permanent(cacheError(dir, fmt.Errorf("%w: the download needs %d more bytes, the file system has %d free", ErrTooLarge, resp.total-resp.start, free)))
		}
		if room < limit {
			limit, byFree = max(room, 0), true
		}
	}
	if resp.start == 0 {
		// New content (or first request): save its validators for resuming.
		if err := saveMeta(metaPath, partialMeta{URL: f.url, ETag: f.etag, LastModified: f.modified, Size: f.total}); err != nil {
			return permanent(err)
		}
	}
	if err := out.Truncate(resp.start); err != nil {
		return permanent(cacheError(partial, err))
	}
	if _, err := out.Seek(resp.start, io.SeekStart); err != nil {
		return permanent(cacheError(partial, err))
	}
	pos := resp.start
	meter.update(pos, true)
	buf := make([]byte, 1<<20)
	var readErr error
	for {
		n, err := resp.body.Read(buf)
		if n > 0 {
			if resp.total >= 0 && pos+int64(n) > resp.total {
				return permanent(fmt.Errorf("download %s: server sent more than the announced %d bytes", f.url, resp.total))
			}
			if resp.total < 0 && pos+int64(n) > limit {
				// No Content-Length: never fill the disk. Nothing to resume.
				_ = out.Truncate(0)
				_ = os.Remove(metaPath)
				if byFree {
					return permanent(cacheError(dir, fmt.Errorf("%w: download %s announced no size and would fill the file system (stopped at %d bytes, %d kept free)", ErrTooLarge, f.url, limit, freeReserve)))
				}
				return permanent(fmt.Errorf("download %s: no size announced and more than %d bytes sent (the most a download may take): %w", f.url, limit, ErrTooLarge))
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				return permanent(cacheError(partial, werr))
			}
			pos += int64(n)
			meter.update(pos, false)
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	// Keep what arrived even on error: the next attempt resumes from it.
	if err := out.Sync(); err != nil {
		return permanent(cacheError(partial, err))
	}
	meter.update(pos, true)
	if readErr != nil {
		return fmt.Errorf("download %s: %w after %d bytes", f.url, readErr, pos)
	}
	if resp.total >= 0 && pos != resp.total {
		return fmt.Errorf("download %s: %w: got %d of %d bytes", f.url, io.ErrUnexpectedEOF, pos, resp.total)
	}
	if resp.total < 0 {
		f.total = pos
	}
	return nil
}

func loadMeta(path string) (partialMeta, bool) {
	var m partialMeta
	f, err := openNoFollow(path, os.O_RDONLY, 0)
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

func saveMeta(path string, m partialMeta) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a symlink planted there is removed, not followed
	f, err := openNoFollow(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return cacheError(tmp, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cacheError(tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return cacheError(path, err)
	}
	return nil
}

// syncDir makes a rename durable; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
