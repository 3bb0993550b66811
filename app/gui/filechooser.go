package gui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// fileKind says which folder a chooser starts in: the last one used for
// that kind of file (kept in the app's preferences).
type fileKind string

const (
	kindConfig      fileKind = "config"      // machine configs, talosconfigs
	kindInstaller   fileKind = "installer"   // talos/installer-<role>.yaml
	kindLocalImage  fileKind = "local-image" // .raw.xz, .raw.zst, ...
	folderPrefKey            = "last-folder."
	fileChooserLock          = "a file chooser is open"
)

// chooseFile asks for one file: the desktop's own chooser through the XDG
// portal, else (no portal answers) the app's fallback dialog: a typed path
// with the last folder filled in, and "Browse…" for Fyne's dialog at the
// window's size. done runs on the UI goroutine with the file, never when the
// user cancels. Call on the UI goroutine.
func (ui *UI) chooseFile(kind fileKind, req FileRequest, done func(fyne.URI)) {
	if ui.choosing {
		return // one chooser at a time
	}
	ui.choosing = true
	// The folder used last in this window for this kind of file, else the
	// caller's (the inventory's, or the node's config's), else the one
	// used last in an earlier run, else the home folder.
	switch f := ui.folders[kind]; {
	case f != "":
		req.Folder = f
	case req.Folder == "" || !isDir(req.Folder):
		req.Folder = ui.lastFolder(kind)
	}
	req.Parent = parentWindow(ui.Window)
	prev := ui.modal // a dialog the chooser opens over (bootstrap): it gets Enter and Esc back
	finish := func(path string) {
		ui.choosing = false
		if prev != nil && ui.modal == nil {
			ui.track(prev)
		}
		if path == "" {
			return
		}
		ui.setLastFolder(kind, filepath.Dir(path))
		if ui.folders == nil {
			ui.folders = map[fileKind]string{}
		}
		ui.folders[kind] = filepath.Dir(path)
		done(storage.NewFileURI(path))
	}
	go func() {
		path, err := ui.deps.PortalOpenFile(ui.ctx, req)
		ui.do(func() {
			switch {
			case errors.Is(err, ErrNoPortal):
				ui.fallbackChooser(kind, req, finish)
			case err != nil:
				ui.choosing = false
				if ui.ctx.Err() == nil {
					ui.showError("The file chooser failed", err)
				}
			default:
				finish(path)
			}
		})
	}()
}

// parentWindow is the window's portal handle ("x11:XID"), "" where unknown
// (Wayland needs an exported surface handle, which Fyne does not offer).
func parentWindow(w fyne.Window) string {
	nw, ok := w.(driver.NativeWindow)
	if !ok {
		return ""
	}
	parent := ""
	nw.RunNative(func(ctx any) {
		if x, ok := ctx.(driver.X11WindowContext); ok && x.WindowHandle != 0 {
			parent = fmt.Sprintf("x11:%x", x.WindowHandle)
		}
	})
	return parent
}

func (ui *UI) lastFolder(kind fileKind) string {
	if dir := fyne.CurrentApp().Preferences().String(folderPrefKey + string(kind)); dir != "" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		return home
	}
	return ""
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func (ui *UI) setLastFolder(kind fileKind, dir string) {
	fyne.CurrentApp().Preferences().SetString(folderPrefKey+string(kind), dir)
}

// fileChooser is the fallback dialog: a path field (Enter opens it) with
// the last folder filled in, and "Browse…".
type fileChooser struct {
	modal  *modal
	path   *escEntry
	open   *keyButton
	browse *keyButton
	hint   *widget.Label
}

func (ui *UI) fallbackChooser(kind fileKind, req FileRequest, finish func(string)) {
	c := &fileChooser{}
	ui.chooser = c
	c.path = newEscEntry(ui)
	start := req.Folder
	if start != "" && !strings.HasSuffix(start, string(filepath.Separator)) {
		start += string(filepath.Separator)
	}
	c.path.SetText(start)
	c.path.CursorColumn = len([]rune(start))
	c.hint = wrapLabel("")
	c.hint.Hide()
	chosen := false
	accept := func(path string) bool {
		path = expandHome(strings.TrimSpace(path))
		st, err := os.Stat(path)
		switch {
		case path == "":
			return false
		case err != nil:
			c.hint.SetText(sentence(errString(err)))
		case st.IsDir():
			c.hint.SetText(path + " is a folder: type the file's name after it, or press Browse…")
		case !st.Mode().IsRegular():
			c.hint.SetText(path + " is not a regular file")
		default:
			chosen = true
			c.modal.dialog.Hide()
			finish(path)
			return true
		}
		c.hint.Importance = widget.DangerImportance
		c.hint.Show()
		return false
	}
	c.open = primaryButton(ui, orDefault(req.Accept, "Open"), theme.FolderOpenIcon(), nil)
	c.path.OnSubmitted = func(string) { accept(c.path.Text) }
	c.browse = newKeyButton(ui, "Browse…", theme.FolderIcon(), func() { ui.browseFiles(c, req, accept) })
	// Two short lines: one long wrapped line was cut at the dialog's
	// edge in the real window.
	what := "Type its path and press Enter (~ is your home folder), or press Browse…"
	if len(req.Exts) > 0 {
		what = req.FilterName + " (" + strings.Join(req.Exts, ", ") + ")\n" + what
	}
	content := container.NewVBox(wrapLabel(what), container.NewBorder(nil, nil, nil, c.browse, c.path), c.hint)
	c.modal = ui.showModal(orDefault(req.Title, "Open a file"), content, "Cancel", c.open, fyne.NewSize(720, 0))
	c.open.OnTapped = func() { accept(c.path.Text) } // replaces showModal's hide-then-act: a bad path keeps the dialog
	c.modal.dialog.SetOnClosed(func() {
		if ui.modal == c.modal {
			ui.modal = nil
		}
		if ui.chooser == c {
			ui.chooser = nil
		}
		if !chosen {
			finish("")
		}
	})
	ui.Window.Canvas().Focus(c.path)
}

// browseFiles shows Fyne's file dialog over the fallback, at the window's
// size, in the typed path's folder (else the last one).
func (ui *UI) browseFiles(c *fileChooser, req FileRequest, accept func(string) bool) {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		_ = r.Close()
		if p := r.URI().Path(); !accept(p) {
			c.path.SetText(p)
		}
	}, ui.Window)
	if len(req.Exts) > 0 {
		d.SetFilter(storage.NewExtensionFileFilter(req.Exts))
	}
	dir := expandHome(strings.TrimSpace(c.path.Text))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = req.Folder
	}
	if l, err := storage.ListerForURI(storage.NewFileURI(dir)); err == nil && dir != "" {
		d.SetLocation(l)
	}
	size := ui.Window.Canvas().Size()
	d.Resize(fyne.NewSize(max(size.Width-40, 600), max(size.Height-40, 440)))
	outer := c.modal
	ui.track(&modal{dialog: d, files: true})
	d.SetOnClosed(func() {
		if ui.modal == nil || ui.modal.dialog == d {
			ui.track(outer)
			ui.Window.Canvas().Focus(c.path)
		}
	})
	d.Show()
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// noPortal is a PortalOpenFile for tests and desktops without a portal.
func noPortal(context.Context, FileRequest) (string, error) { return "", ErrNoPortal }

// Fyne's file dialog logs "Fyne error: Getting favorite locations" (three
// lines through the standard logger) whenever one of the XDG folders it
// lists (Videos, Music, ...) does not exist: normal on a fresh or headless
// account, and nothing the user can act on. quietFyneLog drops exactly that
// message and passes everything else through.
type quietFyneLog struct {
	mu   sync.Mutex
	out  io.Writer
	skip int // lines of a dropped message still to drop
}

func (q *quietFyneLog) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case bytes.Contains(p, []byte("Fyne error:  Getting favorite locations")):
		q.skip = 2 // "  Cause: ..." and "  At: ..."
		return len(p), nil
	case q.skip > 0 && (bytes.Contains(p, []byte("  Cause:")) || bytes.Contains(p, []byte("  At:"))):
		q.skip--
		return len(p), nil
	}
	q.skip = 0
	return q.out.Write(p)
}

var quietOnce sync.Once

// quietFavoritesLog installs quietFyneLog on the standard logger (once).
func quietFavoritesLog() {
	quietOnce.Do(func() { log.SetOutput(&quietFyneLog{out: log.Writer()}) })
}
