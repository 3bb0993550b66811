package factory

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/talosflash/talosflash/internal/userfile"
)

// What WriteUpdates did with each file.
const (
	OutcomeWritten    = "written"
	OutcomeUnchanged  = "unchanged"   // nothing to write in it
	OutcomeRefused    = "refused"     // it is not rewritten (read-only, hard links, another owner); see the reason
	OutcomeFailed     = "failed"      // writing its new version failed; see the reason
	OutcomeNotWritten = "not-written" // another file was refused or failed: left as it was
	OutcomeRestored   = "restored"    // it was replaced, then put back when a later file failed
	OutcomeBlocked    = "blocked"     // nothing else to write in it, and its update is blocked (Update.Blocked; see the reason)
)

// FileResult is what WriteUpdates did with one file.
type FileResult struct {
	File    string
	Outcome string
	Reason  string
}

// ErrFileRefused marks a file WriteUpdates will not rewrite.
var ErrFileRefused = errors.New("not rewritten")

// ErrBlocked marks updates that must not be written (BlockedError).
var ErrBlocked = errors.New("blocked")

// BlockedError lists the updates a write leaves out because they are
// blocked (Update.Blocked: an extension would be lost, or could not be
// compared): the write did not do what was asked, whatever else it wrote.
type BlockedError struct{ Updates []Update }

func (e *BlockedError) Error() string {
	where := make([]string, len(e.Updates))
	for i, u := range e.Updates {
		where[i] = fmt.Sprintf("%s:%d (%s)", u.Use.File, u.Use.Line, u.Blocked)
	}
	return fmt.Sprintf("%d reference(s) blocked, not written: %s", len(e.Updates), strings.Join(where, "; "))
}

func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Blocked is a *BlockedError for the updates that have a target and are
// blocked, nil when none is.
func Blocked(updates []Update) error {
	var out []Update
	for _, u := range updates {
		if u.Target != "" && u.Blocked != "" {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &BlockedError{Updates: out}
}

// WriteError is WriteUpdates' failure: the file that stopped it, why, and
// whether every file is as it was.
type WriteError struct {
	File string
	Err  error
	// Unrestored lists files that stay changed because putting them back
	// failed too (with where their old content is kept); empty: nothing
	// was changed.
	Unrestored []string
}

func (e *WriteError) Error() string {
	if len(e.Unrestored) == 0 {
		return fmt.Sprintf("%s: %v; nothing was changed: every file is as it was", e.File, e.Err)
	}
	return fmt.Sprintf("%s: %v; these files could not be put back: %v", e.File, e.Err, e.Unrestored)
}

func (e *WriteError) Unwrap() error { return e.Err }

// pendingFile is one file WriteUpdates rewrites.
type pendingFile struct {
	path     string
	old, new []byte
	info     os.FileInfo
	meta     fileMeta
	f        *os.File // the original, open and locked until the end
	tmp      string   // its new version, written and synced beside it
	backup   string   // a hard link to the original while the new one replaces it
	replaced bool
}

// WriteUpdates rewrites the files that have an applicable update, all or
// nothing: every new version is written and synced beside its file first
// (same owner, group and mode, setgid included), then each replaces its file
// by a rename, and a failure at any step leaves every file as it was (a
// replaced file is put back). A read-only file, a file with hard links (a
// rename would split them) and, unless run as root, a file of another owner
// are refused, and then nothing is written. Each file is locked (flock)
// while it is rewritten and checked to be unchanged since it was read.
// The results list every file (with a reason where one is due); the error
// is a *WriteError.
func WriteUpdates(updates []Update) ([]FileResult, error) {
	var names []string
	byName := map[string][]Update{}
	for _, u := range updates {
		if _, ok := byName[u.Use.File]; !ok {
			names = append(names, u.Use.File)
		}
		byName[u.Use.File] = append(byName[u.Use.File], u)
	}
	// One file under several names (a bind mount, "dir/./f") is rewritten
	// once, under its first name; the others get its outcome.
	files, byFile, sameAs := sameFiles(names, byName)
	results, err := writeFiles(files, byFile)
	if len(sameAs) == 0 {
		return results, err
	}
	byPath := map[string]FileResult{}
	for _, r := range results {
		byPath[r.File] = r
	}
	all := make([]FileResult, 0, len(names))
	for _, n := range names {
		if first, ok := sameAs[n]; ok {
			r := byPath[first]
			r.File = n
			if r.Reason == "" {
				r.Reason = "the same file as " + first
			} else {
				r.Reason = "the same file as " + first + "; " + r.Reason
			}
			all = append(all, r)
			continue
		}
		all = append(all, byPath[n])
	}
	return all, err
}

// sameFiles groups names by the file they reach (following symlinks): the
// first name of each file, the updates of all its names, and each other
// name's first name.
func sameFiles(names []string, byName map[string][]Update) ([]string, map[string][]Update, map[string]string) {
	var files []string
	byFile := map[string][]Update{}
	sameAs := map[string]string{}
	infos := map[string]os.FileInfo{}
	for _, n := range names {
		st, err := os.Stat(n)
		first := ""
		for _, f := range files {
			if err == nil && infos[f] != nil && os.SameFile(infos[f], st) {
				first = f
				break
			}
		}
		if first != "" {
			sameAs[n] = first
			byFile[first] = append(byFile[first], byName[n]...)
			continue
		}
		if err == nil {
			infos[n] = st
		}
		files = append(files, n)
		byFile[n] = byName[n]
	}
	return files, byFile, sameAs
}

// writeFiles is WriteUpdates over distinct files.
func writeFiles(files []string, byFile map[string][]Update) ([]FileResult, error) {
	results := make([]FileResult, len(files))
	var todo []*pendingFile
	index := map[*pendingFile]int{}
	defer func() {
		for _, p := range todo {
			p.cleanup()
		}
	}()
	// stop records why file i stopped the run, marks every other file still
	// to be written as not written, and puts back the replaced ones.
	stop := func(i int, outcome string, err error) ([]FileResult, error) {
		results[i].Outcome, results[i].Reason = outcome, err.Error()
		werr := &WriteError{File: files[i], Err: err}
		for _, p := range todo {
			j := index[p]
			if j == i {
				continue
			}
			if p.replaced {
				if rerr := p.restore(); rerr != nil {
					results[j].Outcome, results[j].Reason = OutcomeWritten, "could not be put back: "+rerr.Error()
					werr.Unrestored = append(werr.Unrestored, p.path+" ("+rerr.Error()+")")
					continue
				}
				results[j].Outcome, results[j].Reason = OutcomeRestored, "put back as it was: "+files[i]+" failed"
				continue
			}
			results[j].Outcome, results[j].Reason = OutcomeNotWritten, "left as it was: "+files[i]+" was "+outcome
		}
		return results, werr
	}

	// 1. Read each file, decide, and check it may be rewritten (every file,
	// so that every refusal is reported).
	first := -1
	var firstErr error
	for i, f := range files {
		results[i] = FileResult{File: f, Outcome: OutcomeUnchanged}
		p, err := prepare(f, byFile[f])
		switch {
		case err != nil:
			results[i].Outcome, results[i].Reason = OutcomeFailed, err.Error()
			if errors.Is(err, ErrFileRefused) {
				results[i].Outcome = OutcomeRefused
			}
			if first < 0 {
				first, firstErr = i, err
			}
		case p != nil:
			index[p] = i
			todo = append(todo, p)
			results[i].Outcome = OutcomeNotWritten // until written
		default:
			for _, u := range byFile[f] {
				if u.Target != "" && u.Blocked != "" {
					results[i].Outcome, results[i].Reason = OutcomeBlocked, u.Blocked
					break
				}
			}
		}
	}
	if first >= 0 {
		werr := &WriteError{File: files[first], Err: firstErr}
		for _, p := range todo {
			results[index[p]].Reason = "left as it was: " + files[first] + " was " + results[first].Outcome
		}
		return results, werr
	}
	// 2. Write and sync every new version beside its file.
	for _, p := range todo {
		if err := p.stage(); err != nil {
			outcome := OutcomeFailed
			if errors.Is(err, ErrFileRefused) {
				outcome = OutcomeRefused
			}
			return stop(index[p], outcome, err)
		}
	}
	// 3. Replace the files, keeping a way back to each original.
	for _, p := range todo {
		if err := p.replace(); err != nil {
			outcome := OutcomeFailed
			if errors.Is(err, ErrFileRefused) {
				outcome = OutcomeRefused // it changed since it was read
			}
			return stop(index[p], outcome, err)
		}
	}
	dirs := map[string]bool{}
	for _, p := range todo {
		results[index[p]].Outcome = OutcomeWritten
		dirs[filepath.Dir(p.path)] = true
	}
	for d := range dirs {
		syncDir(d) // the renames are durable before the backups go
	}
	return results, nil
}

// prepare reads path and returns what to write, or nil if nothing changes.
func prepare(name string, ups []Update) (*pendingFile, error) {
	// A symlink stays a link: its target is rewritten.
	path, err := filepath.EvalSymlinks(name)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	data, err := userfile.Read(path, MaxScannedFile)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	nd := Rewrite(data, ups)
	if bytes.Equal(nd, data) {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	p := &pendingFile{path: path, old: data, new: nd, f: f}
	if p.info, err = f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat: %w", err)
	}
	p.meta = metaOf(p.info)
	if err := p.check(); err != nil {
		f.Close()
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another program holds its lock (%v)", ErrFileRefused, err)
	}
	return p, nil
}

// check refuses what a rewrite by rename would silently change.
func (p *pendingFile) check() error {
	if !p.info.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrFileRefused)
	}
	if p.info.Mode().Perm()&0o200 == 0 {
		return fmt.Errorf("%w: the file is read-only (mode %04o); make it writable to update it", ErrFileRefused, p.info.Mode().Perm())
	}
	if p.meta.nlink > 1 {
		return fmt.Errorf("%w: the file has %d hard links; a rewrite would split them (the other names would keep the old reference): update it by hand or remove the other links", ErrFileRefused, p.meta.nlink)
	}
	if p.meta.known && os.Geteuid() != 0 && p.meta.uid != uint32(os.Geteuid()) {
		return fmt.Errorf("%w: the file belongs to uid %d; a rewrite would make it yours", ErrFileRefused, p.meta.uid)
	}
	return nil
}

// stage writes the new version beside the file, with its owner, group and mode.
func (p *pendingFile) stage() error {
	tmp, err := os.CreateTemp(filepath.Dir(p.path), "."+filepath.Base(p.path)+".talosflash-*")
	if err != nil {
		return fmt.Errorf("new version: %w", err)
	}
	p.tmp = tmp.Name()
	fail := func(what string, err error) error {
		tmp.Close()
		return fmt.Errorf("new version (%s): %w", what, err)
	}
	if _, err := tmp.Write(p.new); err != nil {
		return fail("write", err)
	}
	if err := chownLike(tmp, p.meta); err != nil {
		return fail("owner", fmt.Errorf("%w: cannot keep its owner and group %d:%d: %w", ErrFileRefused, p.meta.uid, p.meta.gid, err))
	}
	// After the chown, which clears setuid/setgid.
	if err := tmp.Chmod(p.info.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)); err != nil {
		return fail("mode", err)
	}
	if err := tmp.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("new version (close): %w", err)
	}
	return nil
}

// replace renames the new version over the file, after checking the file
// is still what was read, and keeps a hard link to the original until the
// run ends (or an in-memory copy where hard links are not possible).
func (p *pendingFile) replace() error {
	cur := make([]byte, len(p.old)+1)
	n, err := p.f.ReadAt(cur, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("re-read: %w", err)
	}
	st, serr := os.Lstat(p.path)
	if !bytes.Equal(cur[:n], p.old) || serr != nil || !os.SameFile(st, p.info) {
		return fmt.Errorf("%w: the file changed while it was being updated", ErrFileRefused)
	}
	for range 10 {
		name := filepath.Join(filepath.Dir(p.path), "."+filepath.Base(p.path)+".talosflash-old-"+randomSuffix())
		err = os.Link(p.path, name)
		if err == nil {
			p.backup = name
			break
		}
		if !errors.Is(err, os.ErrExist) {
			break // no hard links here: the old content is in memory
		}
	}
	if err := renameFile(p.tmp, p.path); err != nil {
		return fmt.Errorf("replace: %w", err)
	}
	p.tmp, p.replaced = "", true
	return nil
}

// restore puts the original back.
func (p *pendingFile) restore() error {
	if p.backup != "" {
		if err := renameFile(p.backup, p.path); err != nil {
			kept := p.backup
			p.backup = "" // the only copy of the original: cleanup must not remove it
			return fmt.Errorf("%w (the old content is in %s)", err, kept)
		}
		p.backup, p.replaced = "", false
		return nil
	}
	back := *p
	back.new = p.old
	if err := back.stage(); err != nil {
		return err
	}
	if err := renameFile(back.tmp, p.path); err != nil {
		// The old content was only in memory: keep this copy of it.
		return fmt.Errorf("%w (the old content is in %s)", err, back.tmp)
	}
	p.replaced = false
	return nil
}

// cleanup removes what the run left beside the file and unlocks it.
func (p *pendingFile) cleanup() {
	if p.tmp != "" {
		os.Remove(p.tmp)
	}
	if p.backup != "" {
		os.Remove(p.backup)
	}
	p.f.Close() // drops the lock
}

// renameFile is os.Rename; a test makes one fail.
var renameFile = os.Rename

func randomSuffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
