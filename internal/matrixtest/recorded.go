package matrixtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// BuildBMX builds bmx into a temporary folder of t and returns its path:
// what a test's -update sweeps with to record runs again.
func BuildBMX(t testing.TB) string {
	t.Helper()
	bmx := filepath.Join(t.TempDir(), "bmx")
	if b, err := Build("github.com/bmx-dev/bmx/cmd/bmx", bmx); err != nil {
		t.Fatalf("building bmx: %v\n%s", err, b)
	}
	return bmx
}

// Build builds the main package pkg into the file out, through go run's
// cache of the programs it links (Go 1.24 on): a tree whose code has not
// changed since the last build links nothing, where go build links again
// each time (about 3 s of CPU for bmx). The program is what go run makes,
// without VCS stamping (bmx then asks git for its commit, as under go
// run) or DWARF. It returns go's output with its error.
func Build(pkg, out string) ([]byte, error) {
	// go run -exec runs "copy.sh PROGRAM": the script copies the program
	// go run built (or found in its cache) to out, and runs nothing.
	script := out + ".copy.sh"
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec cp \"$1\" \"$BMX_BUILD_OUT\"\n"), 0o700); err != nil {
		return nil, err
	}
	defer os.Remove(script)
	cmd := exec.Command("go", "run", "-exec", script, pkg)
	cmd.Env = append(os.Environ(), "BMX_BUILD_OUT="+out)
	b, err := cmd.CombinedOutput()
	if err == nil {
		if _, err = os.Stat(out); err != nil {
			err = fmt.Errorf("go run -exec made no %s: %w", out, err)
		}
	}
	return b, err
}

// SweepRun runs bmx sweep with args (which name --out out) and returns the
// one run directory it made under out and the sweep's stdout. A sweep that
// exits with other than 0 or 1 (some cell failed) fails t.
func SweepRun(t testing.TB, bmx, out string, args ...string) (dir, stdout string) {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(out, "*"))
	cmd := exec.Command(bmx, append([]string{"sweep"}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("bmx sweep %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, o.String(), e.String())
		}
	}
	after, _ := filepath.Glob(filepath.Join(out, "*"))
	var made []string
	for _, d := range after {
		if !slices.Contains(before, d) {
			made = append(made, d)
		}
	}
	if len(made) != 1 {
		t.Fatalf("bmx sweep %s: %d new run directories under %s, want 1", strings.Join(args, " "), len(made), out)
	}
	return made[0], o.String()
}

// LogKeep is how much of the end of each cell's log a recorded run keeps
// (from the first line that starts in it): readers show the tail its
// result line holds, not the log file.
const LogKeep = 1024

// RecordRun copies the run directory from into to, as a recorded run in
// testdata keeps it: without what a reader makes of it (report.*,
// summary.jsonl, summary-lent.jsonl, bmx.lock: record's SummaryFile,
// LentSummaryFile and LockFile, spelled out because record's own tests use
// this package) and with the last LogKeep bytes of each log.
func RecordRun(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		switch name := d.Name(); {
		case strings.HasPrefix(name, "report."), name == "summary.jsonl", name == "summary-lent.jsonl", name == "bmx.lock":
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "logs"+string(filepath.Separator)) && len(b) > LogKeep {
			b = b[len(b)-LogKeep:]
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				b = b[i+1:] // from a line's start
			}
		}
		return os.WriteFile(dst, b, 0o644)
	})
}
