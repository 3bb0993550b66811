// Command benchtool is the helper behind bench/run.sh (not shipped):
//
//	benchtool gen -size N -seed S FILE        write an imagetest raw image
//	benchtool decode [-workers N|-plain] FILE decode an .xz to stdout
//	benchtool sha256 FILE                     hash a file (Go crypto/sha256)
//	benchtool write [-skip-zeros] -workers N XZ TARGET
//	                                          decode into TARGET, fsync; with
//	                                          -skip-zeros, seek over all-zero
//	                                          4 MiB chunks (files only)
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/imaging/xzpar"
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
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("gen: need an output file")
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

// openXZ opens an .xz file with xzpar (workers > 0) or plain ulikunitz/xz.
func openXZ(path string, workers int, plain bool) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if plain {
		r, err := xz.NewReader(bufio.NewReaderSize(f, 1<<20))
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return r, func() { f.Close() }, nil
	}
	r, err := xzpar.NewReader(f, workers)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, func() { r.Close(); f.Close() }, nil
}

func decode(args []string) error {
	fs := flag.NewFlagSet("decode", flag.ExitOnError)
	workers := fs.Int("workers", 2, "xzpar workers")
	plain := fs.Bool("plain", false, "use ulikunitz/xz.NewReader instead of xzpar")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("decode: need an .xz file")
	}
	r, done, err := openXZ(fs.Arg(0), *workers, *plain)
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
	r, done, err := openXZ(fs.Arg(0), *workers, false)
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
