package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
)

func TestCreateRunDir(t *testing.T) {
	out := t.TempDir()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	a, err := CreateRunDir(out, "sm120 nightly", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CreateRunDir(out, "sm120 nightly", now)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(a) != "20260310T120000Z-sm120_nightly" || filepath.Base(b) != "20260310T120000Z-sm120_nightly-2" {
		t.Errorf("dirs %s %s", a, b)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o500)
	if os.Geteuid() != 0 { // root writes anywhere
		if _, err := CreateRunDir(ro, "x", now); err == nil {
			t.Error("no error for a read-only output directory")
		}
	}
}

// TestLogNamesUnique: values that differ only in bytes awkward in file
// names give distinct, readable log names.
func TestLogNamesUnique(t *testing.T) {
	seen := map[string]string{}
	ids := []string{"a=p/q", "a=p_q", "a=p:q", "a=p q", "a=p%2Fq", "a=p%q", "a=..", "a=p\\q", "a=p~q",
		"a=x~attempt2", strings.Repeat("b", 300), strings.Repeat("b", 299) + "c", ""}
	for _, id := range ids {
		for attempt := 1; attempt <= 2; attempt++ {
			name := LogName(matrix.Cell{ID: id}, attempt)
			if other, dup := seen[name]; dup {
				t.Errorf("%q and %q share %s", id, other, name)
			}
			seen[name] = id
			if len(name) > 255 || strings.ContainsAny(name, "/\\: ") || strings.HasPrefix(name, ".") {
				t.Errorf("%q: %q is no safe file name", id, name)
			}
		}
	}
	for id, want := range map[string]string{"a=p/q": "a=p%2Fq.log", "a=p_q": "a=p_q.log", "a=p q": "a=p%20q.log", "a=p:q": "a=p%3Aq.log",
		"moe=flashinfer_cutlass,fp4=auto": "moe=flashinfer_cutlass,fp4=auto.log"} {
		if got := LogName(matrix.Cell{ID: id}, 1); got != want {
			t.Errorf("%q: %q, want %q", id, got, want)
		}
	}
}

// TestReadRunDir: one rule says what a run directory is, for a resume, a
// report, completion and a Slurm job's progress alike: a directory with
// run.json describing a run (a config and a start time) and results.jsonl.
// Anything else is refused with ErrNotRun and what is missing.
func TestReadRunDir(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, run *Run, results bool) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if run != nil {
			if err := WriteRun(dir, run); err != nil {
				t.Fatal(err)
			}
		}
		if results {
			if err := os.WriteFile(filepath.Join(dir, ResultsFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	run := &Run{Name: "m", ConfigPath: "m.toml", Config: "[server]\n", Started: time.Now()}
	file := filepath.Join(root, "notes.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		name, dir, why string
	}{
		{"a run", mk("run", run, true), ""},
		{"no such directory", filepath.Join(root, "nope"), "it does not exist"},
		{"a file", file, "it is a file"},
		{"a plain directory", mk("plain", nil, false), "it has no run.json"},
		{"a stray run.json", mk("stray", &Run{Name: "x"}, true), "its run.json does not describe a run"},
		{"no results.jsonl", mk("started", run, false), "it has no results.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadRunDir(tc.dir)
			if tc.why == "" {
				if err != nil || got == nil || got.Name != "m" || !IsRunDir(tc.dir) {
					t.Fatalf("a run directory: %v, IsRunDir %v", err, IsRunDir(tc.dir))
				}
				return
			}
			if !errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err %v, want ErrNotRun saying %q", err, tc.why)
			}
			if IsRunDir(tc.dir) {
				t.Error("IsRunDir says it is a run directory")
			}
		})
	}
}
