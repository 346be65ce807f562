package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// simOneAxis is a valid config of the simulated host with one cell;
// badinput's cases add to it or change it.
const simOneAxis = `engine = "sim"
[vars]
model = "m"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass"]
`

// TestBadInputOneLine: each bad input of issue 23's small ones, given to a
// real bmx process, is refused with exit 2 and one line that says what is
// wrong and where.
func TestBadInputOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.jsonl", "")
	corpus, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "corpus", "dev.jsonl"))
	if err != nil {
		t.Fatalf("the shared corpus: %v", err)
	}
	first, _, _ := strings.Cut(string(corpus), "\n")
	dups := write("dups.jsonl", first+"\n"+first+"\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the one line
	}{
		{"excludes remove every cell", []string{"plan", "-c", write("ex.toml", simOneAxis+"[[exclude]]\nmoe_runner = \"flashinfer_cutlass\"\n")},
			[]string{"ex.toml: the excludes remove every cell the axes span (1): nothing would run"}},
		{"excludes remove every cell, sweep", []string{"sweep", "--out", filepath.Join(dir, "runs"), "-c", filepath.Join(dir, "ex.toml")},
			[]string{"ex.toml: the excludes remove every cell"}},
		{"missing probe file", []string{"plan", "-c", write("pf.toml", simOneAxis+"[probes]\nfile = \"nope.toml\"\n")},
			[]string{"pf.toml:9: probes.file: read probe file: open ", "nope.toml: no such file or directory"}},
		{"unknown probe set", []string{"sweep", "--out", filepath.Join(dir, "runs"), "-c", write("ps.toml", simOneAxis+"[probes]\nset = \"nosuch\"\n")},
			[]string{"ps.toml:9: probes.set: unknown probe set \"nosuch\" (built-in sets: smoke)"}},
		{"classify an empty file", []string{"classify", "--cases", empty}, []string{"no cases in ", "empty.jsonl: it is empty"}},
		{"classify duplicate ids", []string{"classify", "--cases", dups}, []string{"case ids given more than once in ", "dups.jsonl"}},
		{"completion tcsh", []string{"completion", "tcsh"}, []string{`completion "tcsh": not a shell bmx writes completions for (shells: bash, fish, powershell, zsh)`}},
		{"axes of a missing executable", []string{"axes", "--", filepath.Join(dir, "no-such-server"), "--help"},
			[]string{"no-such-server: no such executable"}},
		{"axes of a program not on PATH", []string{"axes", "--", "bmx-no-such-program", "--help"}, []string{"bmx-no-such-program: no such executable"}},
		{"a misplaced key once", []string{"plan", "-c", write("mk.toml", simOneAxis+"reference = { moe_runner = \"flashinfer_cutlass\" }\n")},
			[]string{"mk.toml:8: axis.reference: unknown key (reference is a top-level key"}},
		{"control characters in the name", []string{"plan", "-c", write("cc.toml", "name = \"evil\\u001b[31mRED\\u001b]0;title\\u0007\"\n"+simOneAxis)},
			[]string{`cc.toml:1: name: "evil\x1b[31mRED\x1b]0;title\a" holds control characters`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runBMX(t, tc.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitUsage, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "bmx: ") {
				t.Fatalf("want one line, got:\n%s", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("%q lacks %q", lines[0], w)
				}
			}
			if strings.ContainsFunc(stdout+stderr, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' }) {
				t.Errorf("a control character reached the terminal: %q", stderr)
			}
		})
	}
	if code, stdout, _ := runBMX(t, "completion", "bash"); code != ExitOK || !strings.Contains(stdout, "bash completion") {
		t.Errorf("completion bash: exit %d", code)
	}
}

// TestRunFilesPrivateAndMergeOnce: a sweep's results.jsonl and logs are
// written 0600 as run.json is (the package's shared sweep, sweptRun, whose
// copy keeps its files' modes); merging that run with itself, by two names
// of its directory or with a copy of it, is refused (in this process:
// the refusal is Main's exit status and one line).
func TestRunFilesPrivateAndMergeOnce(t *testing.T) {
	t.Parallel()
	dir := sweptRun(t)
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no logs")
	}
	for _, f := range append([]string{filepath.Join(dir, "run.json"), filepath.Join(dir, "results.jsonl")}, logs...) {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(f), mode)
		}
	}
	cp := filepath.Join(t.TempDir(), "copy")
	if b, err := exec.Command("cp", "-r", dir, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, b)
	}
	for _, pair := range [][2]string{{dir, dir + "/"}, {dir, cp}} {
		merged := filepath.Join(t.TempDir(), "merged")
		code, _, stderr := bmx(t, "merge", pair[0], pair[1], "-o", merged)
		if code != ExitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "give each run once") {
			t.Errorf("merge %s %s: exit %d\n%s", pair[0], pair[1], code, stderr)
		}
		if _, err := os.Stat(merged); err == nil {
			t.Errorf("merge %s %s wrote %s", pair[0], pair[1], merged)
		}
	}
}

// TestRunDirRemovedMidSweep: when the run directory is removed while a
// real bmx sweeps into it, the sweep fails (exit 3) and its last words do
// not send the user to the directory that is gone.
func TestRunDirRemovedMidSweep(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "sweep", "-c", fastBuiltin(t, t.TempDir(), "sim-sm120", ""), "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The built-in host (on its faster clock) has 12 cells: after the
	// first is recorded, 11 are left to find the directory gone.
	var results string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(out, "*", "results.jsonl"))
		if info, err := os.Stat(strings.Join(m, "")); len(m) == 1 && err == nil && info.Size() > 0 {
			results = m[0]
			break
		}
	}
	if results == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no cell recorded\n%s", stderr.String())
	}
	// The sweep goes on writing while it is removed: like rm -rf racing a
	// new cell's log, RemoveAll can find the directory not empty; the run
	// directory is moved away first, so nothing new lands in it.
	gone := filepath.Dir(results) + ".gone"
	if err := os.Rename(filepath.Dir(results), gone); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitInfra {
		t.Errorf("exit %d, want %d", code, ExitInfra)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "nothing of this run is kept") || strings.Contains(last, "results so far are in") || strings.Contains(stderr.String(), "--resume") {
		t.Errorf("last line %q\n%s", last, stderr.String())
	}
}
