package record

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileFunc: a streamed write replaces the file whole; a write that
// fails midway leaves the old file as it was and no temporary file behind.
func TestWriteFileFunc(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.log")
	if err := WriteFile(path, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("read log: broken")
	err := WriteFileFunc(path, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half of the new"); err != nil {
			return err
		}
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("err %v, want the writer's", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Errorf("after a failed write the file is %q, want the old one", got)
	}
	if err := WriteFileFunc(path, func(w io.Writer) error {
		for _, line := range []string{"a\n", "b\n"} {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a\nb\n" {
		t.Errorf("file %q, want the streamed lines", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the file alone (no temporary left)", len(entries))
	}
}
