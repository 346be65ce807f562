package record

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestOpenFileNoFollow: a link planted after CheckLinks looked (a race with
// whoever plants it) is still not written through: OpenFile refuses it
// with a *LinkError, and its target keeps its content.
func TestOpenFileNoFollow(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no O_NOFOLLOW: CheckLinks alone guards a run directory there")
	}
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "x.log")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(link, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	var le *LinkError
	if !errors.As(err, &le) || le.Path != link || le.Target != victim {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenFile of a link: %v, want a *LinkError naming it and its target", err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "precious" {
		t.Errorf("the target was written: %q", data)
	}
	if err := CheckLinks(dir); !errors.As(err, &le) {
		t.Errorf("CheckLinks: %v, want a *LinkError", err)
	}
	if _, err := LockRunDir(dir); !errors.As(err, &le) {
		t.Errorf("LockRunDir: %v, want a *LinkError", err)
	}
}
