package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPlanMillionCells: a plan of 10^6 cells (--max-cells raised) runs in a
// real bmx process under `ulimit -v 2000000` (2 GB of address space, which
// the plan held whole used to exhaust at about 2 KB a cell) and prints
// every cell, the last one numbered 1000000.
func TestPlanMillionCells(t *testing.T) {
	t.Parallel()
	cfgPath := writeMillionConfig(t, t.TempDir(), `"srv", "--port", "{port}"`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `ulimit -v 2000000 && exec "$0" "$@"`, self, "plan", "-c", cfgPath, "--max-cells", "1000000")
	cmd.Env = append(os.Environ(), underLimitEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The output (about 80 MB) is read as it comes, not kept.
	sc := bufio.NewScanner(out)
	var first, lastCell, lastExcluded string
	cells, excluded := 0, 0
	// Lines are looked at as bytes: a string for each of 3 million lines
	// cost the test a second of CPU.
	var last []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case first == "":
			first = string(line)
		case bytes.HasPrefix(line, []byte("   argv: ")):
			cells++
		case bytes.HasPrefix(line, []byte("excluded: ")):
			excluded++
			lastExcluded = string(line)
		case len(line) > 0 && line[0] != ' ':
			last = append(last[:0], line...)
		}
	}
	lastCell = string(last)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bmx plan: %v\n%s", err, tail(stderr.String(), 2000))
	}
	if want := "big: 999000 cells, 1000 excluded ({port} is a free port chosen when each cell starts)"; first != want {
		t.Errorf("first line %q, want %q", first, want)
	}
	if cells != 999000 || excluded != 1000 {
		t.Errorf("%d cells and %d excluded printed, want 999000 and 1000", cells, excluded)
	}
	if lastCell != "999000. a0=v9,a1=v9,a2=v8,a3=v9,a4=v9,a5=v9" || lastExcluded != "excluded: a0=v9,a1=v9,a2=v9,a3=v9,a4=v9,a5=v9" {
		t.Errorf("last cell %q, last excluded %q", lastCell, lastExcluded)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		t.Logf("peak RSS of bmx plan: %.1f MB", float64(ru.Maxrss)/1024)
	}
}

// underLimitEnv is the environment of bmx run under `ulimit -v 2000000`:
// this test binary as bmx, as a user runs it. bmx links glibc through net's
// resolver, and glibc reserves 64 MB of address space for each thread that
// mallocs, up to 8 a CPU: a bmx with a few more threads than usual, on a
// loaded machine, reached the limit by those reservations alone (VmPeak
// 1.96 GB of the 2.0 GB, resident 34 MB). These tests set
// MALLOC_ARENA_MAX=2 then; bmx now holds malloc to two arenas itself
// (arenas_cgo_linux.go), so the limit catches memory bmx holds, not address
// space glibc reserves.
var underLimitEnv = []string{asBMX + "=1"}

// writeMillionConfig writes big.toml into dir: six axes of ten values, one
// exclude of 1000 combinations, so 999000 cells; server.command is command
// (TOML array items). It returns the file's path.
func writeMillionConfig(t *testing.T, dir, command string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name = \"big\"\n[server]\ncommand = [%s]\n", command)
	for i := range 6 {
		fmt.Fprintf(&b, "[[axis]]\nname = \"a%d\"\nflag = \"--a%d\"\nvalues = [\"v0\", \"v1\", \"v2\", \"v3\", \"v4\", \"v5\", \"v6\", \"v7\", \"v8\", \"v9\"]\n", i, i)
	}
	b.WriteString("[[exclude]]\na0 = \"v9\"\na1 = \"v9\"\na2 = \"v9\"\n")
	cfgPath := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ends is s's first and last n bytes: a Go runtime's fatal error names its
// cause at the top of a long goroutine dump.
func ends(s string, n int) string {
	if len(s) > 2*n {
		return s[:n] + "\n[...]\n" + s[len(s)-n:]
	}
	return s
}
