// Command benchtool is the helper behind bench/run.sh (not shipped):
//
//	benchtool gen -size N -seed S FILE        write an imagetest raw image
//	benchtool compress -shape xz0|xz6|zst18 RAW OUT
//	                                          compress like Image Factory
//	benchtool decode [-workers N|-plain|-fork] FILE
//	                                          decode an .xz (xzpar, upstream
//	                                          or forked xz.NewReader) or a
//	                                          .zst (klauspost) to stdout
//	benchtool sha256 FILE                     hash a file (Go crypto/sha256)
//	benchtool write [-skip-zeros] -workers N XZ TARGET
//	                                          decode into TARGET, fsync; with
//	                                          -skip-zeros, seek over all-zero
//	                                          4 MiB chunks (files only)
//	benchtool gen -talos ...                  the same data, a Talos-like table
//	                                          with a blank META partition
//	benchtool oldcard RAW CARD                an older card of another node:
//	                                          other BOOT data, its META
//	benchtool diff4k CARD RAW                 bytes of RAW's 4 KiB blocks
//	                                          that differ on CARD
//	benchtool meta CARD RAW                   "image", or "stale" and what
//	                                          CARD's META partition holds
//	benchtool serve FILE.xz FILE.zst          the fake Image Factory on
//	                                          127.0.0.1 serving them for the
//	                                          built-in roles; prints its URL,
//	                                          runs until stdin closes
//	benchtool pair -n N -name NAME -a CMD -b CMD
//	                                          run two shell commands in turn
//	                                          (A B A B ..., after one warm-up
//	                                          each), print a table row: median
//	                                          wall time, peak RSS, ratio A/B
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/xzpar"
	forkxz "github.com/talosflash/talosflash/third_party/xz"
	"github.com/ulikunitz/xz"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtool gen|decode|sha256|write ...")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "gen":
		err = gen(args)
	case "decode":
		err = decode(args)
	case "sha256":
		err = hashFile(args)
	case "write":
		err = write(args)
	case "compress":
		err = compress(args)
	case "pair":
		err = pair(args)
	case "serve":
		err = serve(args)
	case "oldcard":
		err = oldCard(args)
	case "diff4k":
		err = diff4K(args)
	case "meta":
		err = metaState(args)
	case "inventory":
		err = writeInventory(args)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	size := fs.Int64("size", 1280<<20, "image size in bytes (multiple of 512)")
	seed := fs.Int64("seed", 1, "generator seed")
	talos := fs.Bool("talos", false, "a Talos-like table with a blank META (imagetest.TalosRaw)")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("gen: need an output file")
	}
	if *talos {
		return genTalos(fs.Arg(0), *size, *seed)
	}
	f, err := os.Create(fs.Arg(0))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 4<<20)
	if err := imagetest.WriteRaw(w, *size, *seed); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// decoder selects how an image file is decoded.
type decoder struct {
	workers     int  // xzpar workers
	plain, fork bool // single-threaded xz.NewReader: upstream v0.5.17 or the fork
}

// openImage opens an .xz file with xzpar (or a single-threaded
// xz.NewReader), or a .zst file with klauspost/compress/zstd.
func openImage(path string, d decoder) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader
	done := func() { f.Close() }
	switch {
	case strings.HasSuffix(path, ".zst"):
		zr, zerr := zstd.NewReader(f)
		r, err = zr, zerr
		if zerr == nil {
			done = func() { zr.Close(); f.Close() }
		}
	case d.plain:
		r, err = xz.NewReader(bufio.NewReaderSize(f, 1<<20))
	case d.fork:
		r, err = forkxz.NewReader(bufio.NewReaderSize(f, 1<<20))
	default:
		xr, xerr := xzpar.NewReader(f, d.workers)
		r, err = xr, xerr
		if xerr == nil {
			done = func() { xr.Close(); f.Close() }
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, done, nil
}

func decode(args []string) error {
	fs := flag.NewFlagSet("decode", flag.ExitOnError)
	var d decoder
	fs.IntVar(&d.workers, "workers", 2, "xzpar workers")
	fs.BoolVar(&d.plain, "plain", false, "use upstream ulikunitz/xz.NewReader (v0.5.17) instead of xzpar")
	fs.BoolVar(&d.fork, "fork", false, "use the patched fork's xz.NewReader (single-threaded) instead of xzpar")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("decode: need an .xz or .zst file")
	}
	r, done, err := openImage(fs.Arg(0), d)
	if err != nil {
		return err
	}
	defer done()
	_, err = io.Copy(os.Stdout, r)
	return err
}

func hashFile(args []string) error {
	if len(args) != 1 {
		return errors.New("sha256: need a file")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 4<<20)); err != nil {
		return err
	}
	fmt.Println(hex.EncodeToString(h.Sum(nil)))
	return nil
}

func write(args []string) error {
	fs := flag.NewFlagSet("write", flag.ExitOnError)
	workers := fs.Int("workers", 2, "xzpar workers")
	skip := fs.Bool("skip-zeros", false, "seek over all-zero chunks instead of writing them")
	fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("write: need an .xz file and a target")
	}
	r, done, err := openImage(fs.Arg(0), decoder{workers: *workers})
	if err != nil {
		return err
	}
	defer done()
	t, err := os.OpenFile(fs.Arg(1), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer t.Close()
	const chunk = 4 << 20
	buf := make([]byte, chunk)
	zero := make([]byte, chunk)
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if *skip && bytes.Equal(buf[:n], zero[:n]) {
				off += int64(n)
			} else {
				if _, err := t.WriteAt(buf[:n], off); err != nil {
					return err
				}
				off += int64(n)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := t.Truncate(off); err != nil { // the skipped tail must exist too
		return err
	}
	return t.Sync()
}

func compress(args []string) error {
	fs := flag.NewFlagSet("compress", flag.ExitOnError)
	name := fs.String("shape", "xz0", "xz0 (factory .raw.xz), zst18 (factory .raw.zst) or xz6")
	fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("compress: need a raw image and an output file")
	}
	var shape imagetest.Shape
	for _, s := range imagetest.FactoryShapes {
		if s.Name == *name {
			shape = s
		}
	}
	if shape.Name == "" {
		return fmt.Errorf("compress: unknown shape %q", *name)
	}
	in, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := fs.Arg(1) + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = shape.Compress(context.Background(), out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, fs.Arg(1))
}
