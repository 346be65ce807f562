// Package testenv finds what bmx's tests need from outside the repository
// (the shared folder with the real model, the evidence corpus and captured
// fixtures) and decides what a test does when a prerequisite is missing: it
// skips saying why on a developer's machine, and fails in CI, where a skip
// would hide a test that did not run.
//
// The shared folder is $BMX_SHARED, or ../shared beside the repository root
// when that is unset; a relative $BMX_SHARED is taken from the repository
// root, so one value works for every package's tests.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Var names the environment variable that points at the shared folder.
const Var = "BMX_SHARED"

// module is the module path whose go.mod marks the repository root.
const module = "github.com/bmx-dev/bmx"

// CI reports whether the tests run in CI: $CI set to anything but "",
// "false" or "0" (CI services set CI=true; .ci/run sets it too).
func CI() bool {
	switch os.Getenv("CI") {
	case "", "false", "0":
		return false
	}
	return true
}

// Skip skips t with the reason, or, in CI, fails it with the reason: a test
// CI is meant to run must not skip there.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (CI=%s: this test must run in CI, so a missing prerequisite fails it)", why, os.Getenv("CI"))
	}
	t.Skip(why)
}

// Shared returns the path of rel inside the shared folder (the folder
// itself when rel is empty). When it does not exist, the test skips (fails
// in CI) with a message that names the path looked at and $BMX_SHARED.
func Shared(t testing.TB, rel ...string) string {
	t.Helper()
	p := SharedPath(rel...)
	Need(t, p)
	return p
}

// Need skips t (fails it in CI) when path, a file of the shared folder, does
// not exist, saying where the shared folder was looked for and how to point
// at another.
func Need(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	Skip(t, "%s does not exist: %s; set %s to the folder that holds models/, corpus/ and fixtures/",
		path, sharedFrom(), Var)
}

// SharedPath is the path of rel inside the shared folder, whether or not it
// exists; for paths a test package keeps in variables.
func SharedPath(rel ...string) string {
	return filepath.Join(append([]string{sharedDir()}, rel...)...)
}

func sharedDir() string {
	if d := os.Getenv(Var); d != "" {
		if !filepath.IsAbs(d) {
			if root := Root(); root != "" {
				d = filepath.Join(root, d)
			}
		}
		return filepath.Clean(d)
	}
	root := Root()
	if root == "" {
		d, _ := filepath.Abs(filepath.Join("..", "shared"))
		return d
	}
	return filepath.Join(filepath.Dir(root), "shared")
}

// sharedFrom says how the shared folder was chosen, for skip messages.
func sharedFrom() string {
	if d := os.Getenv(Var); d != "" {
		return fmt.Sprintf("the shared folder is %s from %s=%s", sharedDir(), Var, d)
	}
	root := Root()
	if root == "" {
		root = "(not found)"
	}
	return fmt.Sprintf("the shared folder is %s (%s is unset: ../shared beside the repository root %s)", sharedDir(), Var, root)
}

// Root is the repository root: the nearest directory at or above the
// working directory (a test's package directory) whose go.mod declares
// bmx's module, else the one this file was compiled in; "" if neither.
func Root() string {
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if isRoot(d) {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if isRoot(d) {
			return d
		}
	}
	return ""
}

func isRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == module {
			return true
		}
	}
	return false
}

// ProcessStart is the median, in ms over n starts, of the time from the
// exec of the command cmd makes to the moment it prints on stdout (a
// UnixNano timestamp, from its main): a bench server's own process start,
// which benchmarks report apart from bmx's overhead.
func ProcessStart(tb testing.TB, n int, cmd func() *exec.Cmd) float64 {
	tb.Helper()
	var ms []float64
	for range n {
		c := cmd()
		t0 := time.Now()
		out, err := c.Output()
		if err != nil {
			tb.Fatal(err)
		}
		at, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		ms = append(ms, float64(at-t0.UnixNano())/1e6)
	}
	slices.Sort(ms)
	return ms[len(ms)/2]
}
