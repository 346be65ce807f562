package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// headRevision is the commit this source tree is at, as git says.
func headRevision(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, "the version test needs git: it is not installed")
	}
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		testenv.Skip(t, "the version test needs the source tree to be a git checkout: git rev-parse: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionGoRun: go run stamps no VCS information, so bmx asks git in its
// source tree; the commit must be the tree's HEAD, not "dev" alone. The
// binary go run built (kept by go run -exec: one build for both checks)
// then runs from elsewhere: it still finds its source tree's commit while
// git and the tree are there, and prints plain "dev" when git is not.
func TestVersionGoRun(t *testing.T) {
	t.Parallel()
	before := headRevision(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bmx")
	keep := filepath.Join(tmp, "keep.sh")
	if err := os.WriteFile(keep, []byte("#!/bin/sh\ncp \"$1\" \"$BMX_TEST_KEEP\" && exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "-exec", keep, ".", "version")
	cmd.Env = append(os.Environ(), "BMX_TEST_KEEP="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run . version: %v\n%s", err, out)
	}
	// A commit made while go run builds moves HEAD: either is right.
	after := headRevision(t)
	withGit := regexp.MustCompile(`^bmx dev \((` + before + `|` + after + `)(\+dirty)?\)\n$`)
	if !withGit.Match(out) {
		t.Errorf("go run . version printed %q, want bmx dev (%s[+dirty])", out, after)
	}
	// The binary is one without VCS stamping, as -buildvcs=false builds.
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if strings.HasPrefix(s.Key, "vcs.") {
			t.Fatalf("go run stamped %s=%s", s.Key, s.Value)
		}
	}
	for _, tc := range []struct {
		name, path string
		want       *regexp.Regexp
	}{
		{"moved, git on PATH", os.Getenv("PATH"), withGit},
		{"moved, no git", tmp, regexp.MustCompile(`^bmx dev\n$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "version")
			cmd.Dir = tmp
			cmd.Env = append(os.Environ(), "PATH="+tc.path)
			out, err := cmd.CombinedOutput()
			if err != nil || !tc.want.Match(out) {
				t.Errorf("bmx version: %v, printed %q, want %s", err, out, tc.want)
			}
		})
	}
}

// TestVersionFrom: the build info's commit wins, then a module version (go
// install MODULE@VERSION), then git; git is asked only when the build info
// has neither.
func TestVersionFrom(t *testing.T) {
	t.Parallel()
	asked := 0
	git := func() (string, bool) { asked++; return "0123456789ab", true }
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203155702-dc90628fbb22+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "dc90628fbb22ecc66f7dca86db18c6f56117615a"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name, base string
		info       *debug.BuildInfo
		want       string
		asks       int
	}{
		{"go build in a checkout", "dev", stamped, "dev (dc90628fbb22+dirty)", 0},
		{"go install module@version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0", 0},
		{"release build", "v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0 (0123456789ab+dirty)", 1},
		{"go run", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev (0123456789ab+dirty)", 1},
		{"no build info", "dev", nil, "dev (0123456789ab+dirty)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = 0
			if got := versionFrom(tc.base, tc.info, git); got != tc.want || asked != tc.asks {
				t.Errorf("%q, git asked %d times; want %q, %d", got, asked, tc.want, tc.asks)
			}
		})
	}
}
