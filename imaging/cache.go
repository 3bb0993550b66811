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
// always complete and passed the xz container check; downloads in progress
// live in <name>.partial with their HTTP validators in <name>.partial.json.
type Cache struct {
	Dir string

	// Download tuning; zero values mean the Default* constants.
	// Retries < 0 disables retries.
	Retries     int
	RetryDelay  time.Duration // first backoff, doubled per retry (max 30 s)
	IdleTimeout time.Duration // a body read idle this long counts as a stall
}

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
	if strings.Contains(last, partialSuffix) {
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

// checkXZFile runs CheckXZ on a file: structure, CRC32s of headers, index
// and footers, block headers, and that all sizes add up to the file size.
// It costs a few small reads per block (milliseconds for a Talos image),
// not a decode; block data checks (CRC64/SHA-256) happen during the flash,
// which deletes the entry if they fail.
func checkXZFile(path string) (*XZInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return CheckXZ(f, st.Size())
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
	if st, err := os.Stat(final); err == nil {
		if _, err := checkXZFile(final); err == nil {
			newMeter(progress, StageDownload, st.Size(), false).update(st.Size(), true)
			return final, nil
		}
		if err := os.Remove(final); err != nil {
			return "", fmt.Errorf("remove damaged cache entry: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	partial, metaPath := final+partialSuffix, final+metaSuffix
	f := newFetcher(c, httpClient, url)
	if m, ok := loadMeta(metaPath); ok && m.URL == url {
		f.etag, f.modified, f.total = m.ETag, m.LastModified, m.Size
	} else {
		_ = os.Remove(partial)
	}
	meter := newMeter(progress, StageDownload, f.total, false)
	defer meter.keepAlive()()
	for attempt := 0; ; attempt++ {
		err = downloadOnce(ctx, f, partial, metaPath, meter)
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
	if _, err := checkXZFile(partial); err != nil {
		_ = os.Remove(partial)
		_ = os.Remove(metaPath)
		return "", fmt.Errorf("downloaded %s: %w", url, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	_ = os.Remove(metaPath)
	syncDir(filepath.Dir(final))
	return final, nil
}

// downloadOnce makes one request and appends what it gets to partial.
func downloadOnce(ctx context.Context, f *fetcher, partial, metaPath string, meter *meter) error {
	var off int64
	if st, err := os.Stat(partial); err == nil {
		off = st.Size()
	}
	if off > 0 && f.total == off {
		return nil // complete from an earlier attempt; the xz check decides
	}
	if f.total >= 0 && off > f.total {
		off = 0
	}
	resp, err := f.get(ctx, off)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	meter.setTotal(resp.total)
	if resp.done {
		return nil
	}
	if resp.start == 0 {
		// New content (or first request): save its validators for resuming.
		if err := saveMeta(metaPath, partialMeta{URL: f.url, ETag: f.etag, LastModified: f.modified, Size: f.total}); err != nil {
			return permanent(err)
		}
	}
	out, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return permanent(fmt.Errorf("image cache: %w", err))
	}
	defer out.Close()
	if err := out.Truncate(resp.start); err != nil {
		return permanent(fmt.Errorf("image cache: %w", err))
	}
	if _, err := out.Seek(resp.start, io.SeekStart); err != nil {
		return permanent(fmt.Errorf("image cache: %w", err))
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
			if _, werr := out.Write(buf[:n]); werr != nil {
				return permanent(fmt.Errorf("image cache: %w", werr))
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
		return permanent(fmt.Errorf("image cache: %w", err))
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
	data, err := os.ReadFile(path)
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
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	return os.Rename(tmp, path)
}

// syncDir makes a rename durable; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
