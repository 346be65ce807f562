package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// simHelp is the simulated server's real --help, run as a process, and the
// options the project's parser reads from it.
func simHelp(t *testing.T) (self string, flags map[string]matrix.HelpFlag) {
	t.Helper()
	self, _ = os.Executable()
	out, err := exec.Command(self, "sim-server", "--help").CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Fatalf("sim-server --help: %v", err)
	}
	return self, matrix.ParseHelp(string(out))
}

// minimalServer is what a matrix config needs besides its axes.
const minimalServer = `[server]
command = ["{self}", "sim-server", "--model-path", "m", "--port", "{port}"]
`

// TestAxesTOML: the [[axis]] blocks bmx axes --toml prints from a real
// server's --help load with the project's config loader, each axis passing
// the flag's every choice.
func TestAxesTOML(t *testing.T) {
	t.Parallel()
	self, flags := simHelp(t)
	code, stdout, stderr := bmx(t, "axes", "--toml", "--", self, "sim-server", "--help")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	cfg, err := matrix.Parse("axes.toml", []byte(minimalServer+stdout), nil)
	if err != nil {
		t.Fatalf("the printed axes do not load: %v\n%s", err, stdout)
	}
	var names []string
	for _, a := range cfg.Axes {
		names = append(names, a.Name)
		f, ok := flags[a.Flag]
		if !ok || f.Names[0] != a.Flag {
			t.Errorf("axis %s: flag %q is not an option of sim-server --help", a.Name, a.Flag)
			continue
		}
		var values []string
		for _, v := range a.Values {
			values = append(values, v.Name)
		}
		if diff := cmp.Diff(f.Choices, values); diff != "" {
			t.Errorf("axis %s: values differ from --help's choices (-help +axis):\n%s", a.Name, diff)
		}
	}
	for _, want := range []string{"moe_runner", "fp4_gemm"} {
		if !slices.Contains(names, want) {
			t.Errorf("no axis %s among %v:\n%s", want, names, stdout)
		}
	}
	if !strings.HasPrefix(stdout, "# Axes from `") {
		t.Errorf("no comment saying where the axes come from:\n%s", stdout)
	}
	cfg.MaxCells = 1 << 20 // every choice of every flag: a big matrix
	if _, err := cfg.Expand(); err != nil {
		t.Errorf("the printed axes do not expand: %v", err)
	}
}

// TestAxesNamedFlags: --flag picks flags in the order named (with or without
// dashes); a flag the help lacks, or one without choices, is a usage error
// that names it.
func TestAxesNamedFlags(t *testing.T) {
	t.Parallel()
	self, _ := simHelp(t)
	code, stdout, stderr := bmx(t, "axes", "--toml", "--flag", "--fp4-gemm-backend", "--flag", "moe-runner-backend", "--", self, "sim-server", "--help")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	cfg, err := matrix.Parse("axes.toml", []byte(minimalServer+stdout), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var got []string
	for _, a := range cfg.Axes {
		got = append(got, a.Name+" "+a.Flag)
	}
	if want := []string{"fp4_gemm --fp4-gemm-backend", "moe_runner --moe-runner-backend"}; !slices.Equal(got, want) {
		t.Errorf("axes %q, want %q", got, want)
	}
	for _, tc := range []struct{ flag, want string }{
		{"--no-such-backend", "--flag --no-such-backend: " + self + " sim-server --help lists no such option"},
		{"--model-path", "--flag --model-path: " + self + " sim-server --help lists no choices for it"},
	} {
		code, stdout, stderr := bmx(t, "axes", "--flag", tc.flag, "--", self, "sim-server", "--help")
		if code != ExitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("--flag %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.flag, code, stdout, stderr, ExitUsage, tc.want)
		}
	}
}

func TestAxisName(t *testing.T) {
	t.Parallel()
	for flag, want := range map[string]string{
		"--moe-runner-backend": "moe_runner",
		"--fp4-gemm-backend":   "fp4_gemm",
		"--kv-cache-dtype":     "kv_cache_dtype",
		"--backend":            "backend",
		"-fa":                  "fa",
	} {
		if got := axisName(flag); got != want {
			t.Errorf("axisName(%q) = %q, want %q", flag, got, want)
		}
	}
}
