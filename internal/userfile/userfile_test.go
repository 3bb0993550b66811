package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 11), 0o600); err != nil {
		t.Fatal(err)
	}

	data, err := Read(ok, 10)
	if err != nil || string(data) != "hello" {
		t.Fatalf("Read(ok) = %q, %v", data, err)
	}

	var tl *TooLargeError
	if _, err := Read(big, 10); !errors.As(err, &tl) || tl.Max != 10 {
		t.Fatalf("Read(big) = %v, want TooLargeError", err)
	}

	notRegular := map[string]string{dir: "a directory"}
	addSpecialFiles(t, dir, notRegular)
	for name, want := range notRegular {
		done := make(chan error, 1)
		go func() { _, err := Read(name, 10); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
				t.Errorf("Read(%s) = %v, want ErrNotRegular (%s)", name, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) blocked", name)
		}
	}

	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Read(missing) = %v, want ErrNotExist", err)
	}
}
