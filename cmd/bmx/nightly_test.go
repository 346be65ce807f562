package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestNightlyGates is a nightly job's loop on the simulated host: a baseline
// run, then a run gated on what is new. The built-in config knows the trtllm
// MoE crash (XFAIL); the CuTe DSL MoE garbage is unexpected. The built-in
// config on its profile's faster clock (fastBuiltin).
func TestNightlyGates(t *testing.T) {
	t.Parallel()
	only := []string{"-c", fastBuiltin(t, t.TempDir(), "sim-sm120", ""), "--only", "fp4_gemm=flashinfer_cudnn", "-q"}
	baseOut := t.TempDir()
	if code, _, stderr := bmx(t, append([]string{"sweep", "--out", baseOut}, only...)...); code != 0 {
		t.Fatalf("baseline: exit %d\n%s", code, stderr)
	}
	base := runDir(t, baseOut)

	newOut := t.TempDir()
	junitFile := filepath.Join(t.TempDir(), "junit.xml")
	code, _, stderr := bmx(t, append([]string{"sweep", "--out", newOut, "--fail-on", "unexpected,xpass,regression", "--baseline", base, "--junit", junitFile}, only...)...)
	if code != ExitFailed {
		t.Fatalf("--fail-on unexpected: exit %d, want 1\n%s", code, stderr)
	}
	last := gateMessage(t, stderr)
	if !strings.Contains(last, "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn: unexpected garbage") ||
		strings.Contains(last, "flashinfer_trtllm") || !strings.Contains(last, "\nbmx:   cells by kind: 1 unexpected\n") {
		t.Errorf("the gate must name the new failure only (no known crash, no regression against an equal baseline):\n%s", last)
	}
	// report.md says what the gate says: nothing new since the baseline.
	if md, err := os.ReadFile(filepath.Join(runDir(t, newOut), "report.md")); err != nil ||
		!strings.Contains(string(md), "Nothing new since the baseline sim-sm120: its 1 unexpected failure(s) had the same verdicts there.") {
		t.Errorf("report.md's news disagrees with the gate (%v):\n%.600s", err, md)
	}
	if code, _, stderr := bmx(t, "sweep", "--fail-on", "regression"); code != ExitUsage || !strings.Contains(stderr, "--baseline") {
		t.Errorf("regression without a baseline: exit %d: %s", code, stderr)
	}
	checkSweepJUnit(t, junitFile)

	code, junit, stderr := bmx(t, "report", runDir(t, newOut), "--format", "junit")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var suites junitSuitesForTest
	if err := xml.Unmarshal([]byte(junit), &suites); err != nil {
		t.Fatalf("JUnit does not parse: %v", err)
	}
	for _, c := range suites.Suites[0].Cases {
		known := strings.Contains(c.Name, "moe_runner=flashinfer_trtllm")
		if known != (c.Skipped != nil) || known && !strings.Contains(c.Skipped.Message, "known issue") {
			t.Errorf("%s: skipped %+v (a known crash is skipped with the issue, nothing else is)", c.Name, c.Skipped)
		}
	}
}

type junitSuitesForTest struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Type    string `xml:"type,attr"`
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestNightlyUpgrade is bmx report and diff, in-process, on the recorded
// runs of a team's nightly job before and after an upgrade (internal/reports
// records them from real sweeps of the simulated host, testdata/nightly):
// after the upgrade, the known trtllm crash is still there, a known crash
// (cutlass x cutlass) is fixed (XPASS), and a cell that worked (cutedsl x
// cudnn) crashes now. report --format junit skips the known crash with its
// issue and fails the XPASS and the new crash; diff calls the new crash a
// regression and exits 1. What the gate, the news, the JUnit against the
// baseline, the diff and the [[known]] entries say of these runs is
// internal/reports' TestNightlyUpgrade; sweep --fail-on against a baseline
// with --junit as a process is TestNightlyGates.
func TestNightlyUpgrade(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyRecorded(t, filepath.Join("..", "..", "internal", "reports", "testdata", "nightly"), dir)
	base, after := filepath.Join(dir, "base"), filepath.Join(dir, "after")

	code, junit, stderr := bmx(t, "report", after, "--format", "junit")
	if code != ExitOK {
		t.Fatalf("report --format junit: exit %d\n%s", code, stderr)
	}
	var suites junitSuitesForTest
	if err := xml.Unmarshal([]byte(junit), &suites); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, junit)
	}
	seen := map[string]string{}
	for _, c := range suites.Suites[0].Cases {
		switch {
		case c.Skipped != nil:
			seen[c.Name] = "skipped: " + c.Skipped.Message
		case c.Failure != nil:
			seen[c.Name] = "failure: " + c.Failure.Type
		default:
			seen[c.Name] = "passed"
		}
	}
	for cell, want := range map[string]string{
		"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn":    "skipped: ",
		"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cutlass":  "skipped: ",
		"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass": "failure: ",
		"moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn":   "failure: crash",
		"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn":   "passed",
		"moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutlass": "passed",
	} {
		got := ""
		for name, v := range seen {
			if strings.Contains(name, cell) {
				got = v
			}
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("JUnit %s: %q, want %q...", cell, got, want)
		}
		if strings.Contains(cell, "trtllm") && !strings.Contains(got, "flashinfer/issues/2555") {
			t.Errorf("JUnit %s: the skip does not carry the issue: %q", cell, got)
		}
	}
	if code, out, stderr := bmx(t, "diff", base, after, "--fail-on", "regression"); code != ExitFailed ||
		!strings.Contains(out, "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn") {
		t.Errorf("diff: exit %d, want 1 naming the new crash\n%s%s", code, out, stderr)
	}
	checkDiffXPass(t, base, after)
	checkKnownBaseline(t, base, after)
}

// checkKnownBaseline: report --format known proposes an entry for the new
// crash, but against the baseline, where the cell was correct, it
// proposes none: a regression is to be fixed, not excused.
func checkKnownBaseline(t *testing.T, base, after string) {
	t.Helper()
	const entry = `match = { moe_runner = "flashinfer_cutedsl", fp4_gemm = "flashinfer_cudnn" }`
	if code, out, stderr := bmx(t, "report", after, "--format", "known"); code != 0 || !strings.Contains(out, entry) {
		t.Errorf("report --format known: exit %d, want an entry for the new crash:\n%s%s", code, out, stderr)
	}
	code, out, stderr := bmx(t, "report", after, "--format", "known", "--baseline", base)
	if code != 0 || strings.Contains(out, entry) || strings.Contains(out, "moe_runner = \"flashinfer_cutedsl\" }") ||
		!strings.Contains(out, "# REGRESSION: moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn was correct in the baseline") {
		t.Errorf("report --format known --baseline: exit %d, must propose no entry over the regression:\n%s%s", code, out, stderr)
	}
	if code, _, stderr := bmx(t, "report", after, "--format", "md", "--baseline", base); code != ExitUsage || !strings.Contains(stderr, "--baseline") {
		t.Errorf("report --format md --baseline: exit %d, want 2: %s", code, stderr)
	}
}

// checkSweepJUnit reads the JUnit XML sweep --junit wrote, gated against
// an equal baseline on unexpected failures: the new garbage is a failure
// that says it tripped the gate, the known trtllm crash is skipped with
// its issue. (The JUnit of a regression against the baseline is
// internal/reports' TestNightlyUpgrade.)
func checkSweepJUnit(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("sweep --junit wrote nothing: %v", err)
	}
	var suites junitSuitesForTest
	if err := xml.Unmarshal(data, &suites); err != nil || len(suites.Suites) != 1 {
		t.Fatalf("sweep --junit: not JUnit XML: %v\n%s", err, data)
	}
	found := 0
	for _, c := range suites.Suites[0].Cases {
		switch {
		case strings.Contains(c.Name, "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn"):
			found++
			if c.Failure == nil || c.Failure.Type != "garbage" || !strings.Contains(c.Failure.Text, "fails the gate --fail-on unexpected,xpass,regression: unexpected garbage") {
				t.Errorf("the new garbage: %+v, want a failure saying it tripped the gate", c.Failure)
			}
		case strings.Contains(c.Name, "moe_runner=flashinfer_trtllm"):
			found++
			if c.Skipped == nil || c.Failure != nil || !strings.Contains(c.Skipped.Message, "known issue") {
				t.Errorf("%s: the known crash is skipped: %+v %+v", c.Name, c.Skipped, c.Failure)
			}
		}
	}
	if found != 2 {
		t.Errorf("sweep --junit has %d of the 2 cells checked:\n%s", found, data)
	}
}

// checkDiffXPass runs bmx diff: --fail-on takes the
// words sweep --fail-on takes, and the known crash the upgrade fixed is an
// XPASS, not a plain fix.
func checkDiffXPass(t *testing.T, base, after string) {
	t.Helper()
	const fixed = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass"
	code, out, stderr := bmx(t, "diff", base, after, "--fail-on", "xpass")
	if code != ExitFailed {
		t.Fatalf("diff --fail-on xpass: exit %d, want 1\n%s%s", code, out, stderr)
	}
	gate := gateMessage(t, stderr)
	if !strings.Contains(gate, "bmx: --fail-on xpass: 1 of 6 cells failed the gate\n") || !strings.Contains(gate, fixed+": xpass (a known issue now passes: ") {
		t.Errorf("diff --fail-on xpass names the fixed known crash:\n%s", gate)
	}
	if !regexp.MustCompile(regexp.QuoteMeta(fixed)+`\s*\|\s*fix \(xpass\)\s*\|\s*crash\s*\|\s*correct`).MatchString(out) || !strings.Contains(out, "1 xpass (known issues that pass now)") {
		t.Errorf("the diff calls the fixed known crash a plain fix:\n%s", out)
	}
	// The same words as sweep: a verdict and unexpected judge NEW.
	if code, _, stderr := bmx(t, "diff", base, after, "--fail-on", "unexpected,crash"); code != ExitFailed ||
		!strings.Contains(stderr, "cells by kind: 1 unexpected, 3 crash") {
		t.Errorf("diff --fail-on unexpected,crash: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := bmx(t, "diff", base, after, "--fail-on", "garbage"); code != ExitOK || stderr != "" {
		t.Errorf("diff --fail-on garbage, no garbage cell: exit %d\n%s", code, stderr)
	}
}

// TestPerfRegressionGate is bmx diff --fail-on perf-regression, in-process,
// on the recorded runs of three backends of the simulated host before and
// after an upgrade that makes one of them four times slower per token
// (internal/reports records them from real sweeps, testdata/perfgate):
// exit 1, the gate naming the slowed cell; and sweep's perf-regression
// without a baseline is a usage error. What the table, the gate, the JUnit
// and the diffs say of these runs is internal/reports'
// TestPerfRegressionGate.
func TestPerfRegressionGate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "internal", "reports", "testdata", "perfgate"))); err != nil {
		t.Fatal(err)
	}
	base, after := filepath.Join(dir, "base"), filepath.Join(dir, "after")
	if code, _, stderr := bmx(t, "sweep", "--fail-on", "perf-regression"); code != ExitUsage || !strings.Contains(stderr, "--baseline") {
		t.Errorf("perf-regression without a baseline: exit %d: %s", code, stderr)
	}
	code, out, stderr := bmx(t, "diff", base, after, "--fail-on", "perf-regression")
	if code != ExitFailed {
		t.Fatalf("diff --fail-on perf-regression: exit %d, want 1\n%s%s", code, out, stderr)
	}
	if gate := gateMessage(t, stderr); !strings.Contains(gate, "fp4_gemm=flashinfer_cutlass: perf-regression (tok/s per request at concurrency") {
		t.Errorf("diff's gate must name the slowed cell by its tokens/s:\n%s", stderr)
	}
	if !strings.Contains(out, "perf-regression") || !strings.Contains(out, "fp4_gemm=flashinfer_cutlass") {
		t.Errorf("the diff does not report the slowed cell:\n%s", out)
	}
}

// gateMessage is the failed gate's message at the end of a sweep's or a
// diff's stderr; off a terminal (a CI log) none of its lines is cut.
func gateMessage(t *testing.T, stderr string) string {
	t.Helper()
	i := strings.LastIndex(stderr, "bmx: --fail-on ")
	if i < 0 {
		t.Fatalf("no gate message:\n%s", stderr)
	}
	for _, l := range strings.Split(strings.TrimSuffix(stderr[i:], "\n"), "\n") {
		if strings.HasSuffix(l, "…") {
			t.Errorf("a gate line cut off a terminal:\n%s", l)
		}
	}
	return stderr[i:]
}

// simProfile writes dir/name.toml, a simulated-host profile of the SM120
// box with 50 ms start-ups: body's tables, then a last rule that every other
// combination works.
func simProfile(t *testing.T, dir, name, body string) {
	t.Helper()
	matrixtest.Profile{Name: name, Startup: "50ms", Body: body}.Write(t, filepath.Join(dir, name+".toml"))
}

// profileConfig writes dir/name.toml, a matrix of the simulated server run
// with the profile its var profile names ("before" unless --var says
// otherwise), and returns its path; head and tail are written first and
// last.
func profileConfig(t *testing.T, dir, name, head string, axes []matrixtest.Axis, tail string) string {
	t.Helper()
	return matrixtest.Config{Name: name, Head: head, Vars: map[string]string{"profile": "before"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/{profile}.toml"}, ReadyTimeout: "30s"},
		Axes:   axes, Tail: tail,
	}.Write(t, filepath.Join(dir, name+".toml"))
}
