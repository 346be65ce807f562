package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/reports"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// TestGateKnownCrashTurnsGarbage is issue 37's nightly on the built-in host:
// a [[known]] entry excuses the crash it expects, so the cell answering
// garbage instead (silent wrong output) is news: --fail-on
// unexpected,xpass,regression exits 1 naming it as changed, the terminal
// table, report.md, report.json, report.html and the JUnit XML say so, and
// report --format known proposes no entry to silence it.
func TestGateKnownCrashTurnsGarbage(t *testing.T) {
	t.Parallel()
	const garbage = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn"
	cfg := fastBuiltin(t, t.TempDir(), "known", `
[[known]]
match = { moe_runner = "flashinfer_cutedsl", fp4_gemm = "flashinfer_cudnn" }
verdict = "crash"
issue = "https://example.org/issues/9"
`)
	only := []string{"-c", cfg, "--only", "moe_runner=flashinfer_cutedsl", "--only", "fp4_gemm=flashinfer_cudnn"}
	baseOut := t.TempDir()
	if code, _, stderr := bmx(t, append([]string{"sweep", "--out", baseOut, "-q"}, only...)...); code != 0 {
		t.Fatalf("baseline: exit %d\n%s", code, stderr)
	}
	base := runDir(t, baseOut)

	newOut := t.TempDir()
	junit := filepath.Join(t.TempDir(), "junit.xml")
	code, stdout, stderr := runBMX(t, append([]string{"sweep", "--out", newOut, "-q", "--fail-on", "unexpected,xpass,regression", "--baseline", base, "--junit", junit}, only...)...)
	if code != ExitFailed {
		t.Fatalf("a known crash that answers garbage: exit %d, want 1\n%s", code, stderr)
	}
	gate := gateMessage(t, stderr)
	if !strings.Contains(gate, garbage+": unexpected garbage (changed: a [[known]] entry expects crash, https://example.org/issues/9); cause: say-ok:") ||
		!strings.Contains(gate, "cells by kind: 1 unexpected\n") {
		t.Errorf("the gate must name the changed known issue:\n%s", gate)
	}
	if !strings.Contains(linesWith(stdout, "cutedsl,cudnn"), "CHANGED") {
		t.Errorf("the terminal table does not mark the cell CHANGED:\n%s", stdout)
	}
	after := runDir(t, newOut)
	for file, want := range map[string]string{
		"report.md":   "CHANGED (known crash, garbage now) https://example.org/issues/9",
		"report.json": `"CHANGED (known crash, garbage now) https://example.org/issues/9"`,
		"report.html": `<span class="k k-unexpected">changed</span>`,
	} {
		data, err := os.ReadFile(filepath.Join(after, file))
		if err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q (%v)", file, want, err)
		}
	}
	if md, _ := os.ReadFile(filepath.Join(after, "report.md")); !strings.Contains(string(md), "Nothing new since the baseline sim-sm120: its 1 unexpected failure(s) had the same verdicts there.") {
		t.Errorf("report.md's news does not count the changed cell as the gate does (unexpected, nothing new since the baseline):\n%.800s", md)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites junitSuitesForTest
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Fatal(err)
	}
	for _, c := range suites.Suites[0].Cases {
		if strings.Contains(c.Name, garbage) && (c.Failure == nil || c.Failure.Type != "changed" ||
			!strings.Contains(c.Failure.Text, "fails the gate --fail-on unexpected,xpass,regression: unexpected garbage (changed")) {
			t.Errorf("JUnit: the changed known issue is not a failure saying why: %+v %+v", c.Failure, c.Skipped)
		}
	}
	code, known, stderr := bmx(t, "report", after, "--format", "known")
	if code != 0 || strings.Contains(known, "[[known]]\n") || !strings.Contains(known, "# CHANGED: "+garbage+" is garbage now") {
		t.Errorf("report --format known: exit %d, must propose no entry over the changed cell:\n%s%s", code, known, stderr)
	}
}

// TestGateSummaryBoundedCLI: a sweep whose every cell fails prints, off a
// terminal, the counts and the first reports.GateListMax cells whole, then
// how many more and where every one of them is. Its 25 cells run on 4
// slots: the gate reads the results, whatever order they came in.
func TestGateSummaryBoundedCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	simProfile(t, dir, "before", `[[rule]]
when = {}
behaviour = "crash"
error = "RuntimeError: every kernel of this build is broken on this host, whichever backend the flags pick, so the line is long"
`)
	cfg := profileConfig(t, dir, "broken", "", []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl", "triton", "auto"}},
		{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "auto"}},
	}, "")
	out := t.TempDir()
	code, _, stderr := runBMX(t, "sweep", "-c", cfg, "--out", out, "-q", "--keep-going", "--slots", "4", "--fail-on", "crash")
	if code != ExitFailed {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	gate := gateMessage(t, stderr)
	lines := strings.Split(strings.TrimSuffix(gate, "\n"), "\n")
	if len(lines) != 2+reports.GateListMax+1 || lines[0] != "bmx: --fail-on crash: 25 of 25 cells failed the gate" {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2+reports.GateListMax+1, gate)
	}
	if !strings.HasSuffix(lines[2], "crash; cause: RuntimeError: every kernel of this build is broken on this host, whichever backend the flags pick, so the line is long") {
		t.Errorf("a cell's line is not whole: %q", lines[2])
	}
	want := "bmx:   … and 5 more cells: see " + filepath.Join(runDir(t, out), "report.md") + " (every cell, its verdict and known status)"
	if lines[len(lines)-1] != want {
		t.Errorf("last line\n got %q\nwant %q", lines[len(lines)-1], want)
	}
}

// fastBuiltin writes dir/name.toml, the built-in config of the simulated
// SM120 host (bmx sweep with no -c) followed by tail, its sim run on the
// SM120 profile's faster clock (as matrixtest.SM120: the same verdicts per
// backend, a start-up of 50 ms, not 700), and returns its path.
func fastBuiltin(t *testing.T, dir, name, tail string) string {
	t.Helper()
	path, err := writeFastBuiltin(dir, name, tail)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// writeFastBuiltin is fastBuiltin's work, for the scripts' fastbuiltin too:
// dir/name.toml and its profile dir/sm120.toml.
func writeFastBuiltin(dir, name, tail string) (string, error) {
	root := testenv.Root()
	builtin, err := os.ReadFile(filepath.Join(root, "internal", "matrix", "builtin", "sim-sm120.toml"))
	if err != nil {
		return "", err
	}
	prof, err := os.ReadFile(filepath.Join(root, "internal", "launcher", "sim", "profiles", "sm120.toml"))
	if err != nil {
		return "", err
	}
	fastProf := bytes.Replace(prof, []byte(`startup = "700ms"`), []byte(`startup = "50ms"`), 1)
	profPath := filepath.Join(dir, "sm120.toml")
	fast := bytes.Replace(builtin, []byte(`"--watchdog-timeout", "30"]`), []byte(`"--watchdog-timeout", "30", "--sim-profile", `+strconv.Quote(profPath)+`]`), 1)
	switch {
	case bytes.Equal(fastProf, prof):
		return "", errors.New(`the sm120 profile no longer says startup = "700ms"`)
	case bytes.Equal(fast, builtin):
		return "", errors.New(`the built-in config's server command no longer ends "--watchdog-timeout", "30"]`)
	}
	if err := os.WriteFile(profPath, fastProf, 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".toml")
	return path, os.WriteFile(path, append(fast, tail...), 0o644)
}
