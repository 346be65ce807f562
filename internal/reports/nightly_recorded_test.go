package reports

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// nightlyRunsDir holds the recorded runs TestNightlyUpgrade reads: base,
// the nightly sweep before an upgrade, and after, the one after it swept
// against base (nightlyRuns makes them with -update).
var nightlyRunsDir = filepath.Join("testdata", "nightly")

// nightlyProfiles are the simulated host before and after the upgrade:
// the trtllm MoE runner crashes in both; before it, the cutlass x cutlass
// pair crashes too (a known issue the upgrade fixes); after it, cutedsl x
// cudnn, which worked, crashes.
var nightlyProfiles = map[string]string{
	"before": `[[rule]]
when = { moe_runner_backend = "flashinfer_cutlass", fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "crash"
error = "RuntimeError: CUTLASS FP4 GEMM: misaligned scale factors"
`,
	"after": `[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl", fp4_gemm_backend = "flashinfer_cudnn" }
behaviour = "crash"
error = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
`,
}

// nightlyRuns builds bmx, writes the config "nightly" (its two known
// crashes as [[known]] entries) and the profiles, and sweeps it as a
// nightly job does: before the upgrade, gated on unexpected failures
// (exit 0: every failure known), then after it, against that run as
// baseline (exit 1: the new crash). It records both run directories as
// out/base and out/after, replacing what was there (recordRunDir).
func nightlyRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	for name, rules := range nightlyProfiles {
		matrixtest.Profile{Name: name, Startup: "50ms", Body: `[resolve]
moe_runner_backend = "flashinfer_cutlass"
fp4_gemm_backend = "flashinfer_cudnn"
[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
behaviour = "crash"
error = "RuntimeError: trtllm-gen MoE kernels are SM100-only: no kernel image is available for SM120"
` + rules}.Write(t, filepath.Join(work, name+".toml"))
	}
	cfg := matrixtest.Config{Name: "nightly", Head: `reference = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cudnn" }`,
		Vars:   map[string]string{"profile": "before"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/{profile}.toml"}, ReadyTimeout: "30s"},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		},
		Tail: `[[known]]
match = { moe_runner = "flashinfer_trtllm" }
verdict = "crash"
issue = "https://github.com/flashinfer-ai/flashinfer/issues/2555"
[[known]]
match = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_cutlass" }
verdict = "crash"
issue = "https://github.com/sgl-project/sglang/issues/20001"
`}.Write(t, filepath.Join(work, "nightly.toml"))
	sweep := func(name string, code int, args ...string) string {
		t.Helper()
		runs := filepath.Join(work, name)
		cmd := exec.Command(bmx, append([]string{"sweep", "-c", cfg, "--out", runs, "-q", "--fail-on", "unexpected"}, args...)...)
		b, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != code {
			t.Fatalf("sweep %s: %v, want exit %d\n%s", name, err, code, b)
		}
		dirs, _ := filepath.Glob(filepath.Join(runs, "*"))
		if len(dirs) != 1 {
			t.Fatalf("%d run directories under %s, want 1", len(dirs), runs)
		}
		return dirs[0]
	}
	base := sweep("base", 0)
	after := sweep("after", 1, "--var", "profile=after", "--baseline", base)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	recordRunDir(t, base, filepath.Join(out, "base"))
	recordRunDir(t, after, filepath.Join(out, "after"))
}

// recordRunDir copies the run directory from into to, without the files a
// reader makes of it (reports, summary, the lock), each log cut to its
// last KiB from a line's start: the results carry the tail the verdicts
// were read from.
func recordRunDir(t *testing.T, from, to string) {
	t.Helper()
	if err := matrixtest.RecordRun(from, to); err != nil {
		t.Fatal(err)
	}
}

// junitRead is JUnit XML as the tests read it.
type junitRead struct {
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

// TestNightlyUpgrade is the nightly job of a team after an upgrade, on the
// recorded runs (testdata/nightly; go test ./internal/reports -run
// TestNightlyUpgrade -update sweeps them again): before the upgrade is the
// baseline; after it, the known trtllm crash is still there, a known crash
// (cutlass x cutlass) is fixed (XPASS), and a cell that worked (cutedsl x
// cudnn) crashes now. The gate on unexpected names that new crash and
// nothing else, and the news says so; JUnit skips the known crash with its
// issue and fails the XPASS and the new crash (against the baseline, as a
// regression); the diff calls the new crash a regression and the fixed
// known crash an xpass; the [[known]] entries proposed against the
// baseline leave out the regression.
func TestNightlyUpgrade(t *testing.T) {
	t.Parallel()
	if *update {
		nightlyRuns(t, nightlyRunsDir)
	}
	dir := t.TempDir()
	// A copy: loading a run may write beside it.
	if err := os.CopyFS(dir, os.DirFS(nightlyRunsDir)); err != nil {
		t.Fatal(err)
	}
	base, err := record.Load(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatalf("%v (go test ./internal/reports -run TestNightlyUpgrade -update makes the runs)", err)
	}
	after, err := record.Load(filepath.Join(dir, "after"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		newCrash = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cudnn"
		fixed    = "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass"
	)
	gateOf := func(words ...string) (*GateResult, string) {
		t.Helper()
		g, err := Gate(after, words, base)
		if err != nil {
			t.Fatal(err)
		}
		return g, strings.Join(g.Summary(SummaryOptions{}), "\n")
	}
	if g, _ := Gate(base, []string{GateUnexpected}, nil); g.Failed() {
		t.Errorf("the baseline (every failure known) fails the gate: %v", g.Lines())
	}
	g, gate := gateOf(GateUnexpected)
	if !g.Failed() || !strings.Contains(gate, newCrash) || strings.Contains(gate, "flashinfer_trtllm") || strings.Contains(gate, "fp4_gemm=flashinfer_cutlass") {
		t.Errorf("the gate must name the new crash only:\n%s", gate)
	}
	// The news (report.md's lead) counts, as the gate does, the one
	// failure new since the baseline.
	if news := NewsLineWith(after, base); !strings.Contains(news, "New: 1 unexpected failure(s) since the baseline nightly: "+newCrash+" (crash).") {
		t.Errorf("the news disagrees with the gate: %s", news)
	}
	var md bytes.Buffer
	if err := MarkdownWith(&md, after, base); err != nil || !strings.Contains(md.String(), "New: 1 unexpected failure(s) since the baseline nightly: moe\\_runner=flashinfer\\_cutedsl,fp4\\_gemm=flashinfer\\_cudnn (crash).") {
		t.Errorf("report.md's news disagrees with the gate (%v):\n%.600s", err, md.String())
	}

	// bmx report --format junit: no baseline.
	seen := map[string]string{}
	for _, c := range junitOf(t, func(w *bytes.Buffer) error { return JUnit(w, after) }).Suites[0].Cases {
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
		"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cudnn":   "skipped: ",
		"moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_cutlass": "skipped: ",
		fixed:    "failure: ",
		newCrash: "failure: crash",
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

	// sweep --junit against the baseline, gated on unexpected: the cell
	// that regressed is a failure of type regression that says it was
	// correct in the baseline; the known crash is still skipped.
	found := 0
	for _, c := range junitOf(t, func(w *bytes.Buffer) error { return JUnitGated(w, after, base, g) }).Suites[0].Cases {
		switch {
		case strings.Contains(c.Name, newCrash):
			found++
			if c.Failure == nil || c.Failure.Type != "regression" || !strings.Contains(c.Failure.Message, "regression: correct in the baseline") ||
				!strings.Contains(c.Failure.Message, "crash now") || !strings.Contains(c.Failure.Text, ": correct") {
				t.Errorf("the regressed cell: %+v, want a failure of type regression saying it was correct before", c.Failure)
			}
		case strings.Contains(c.Name, "moe_runner=flashinfer_trtllm"):
			found++
			if c.Skipped == nil || c.Failure != nil {
				t.Errorf("%s: the known crash, not a regression, is skipped: %+v %+v", c.Name, c.Skipped, c.Failure)
			}
		}
	}
	if found != 3 {
		t.Errorf("the gated JUnit has %d of the 3 cells checked", found)
	}

	// bmx diff BASE NEW: the new crash a regression, the fixed known crash
	// an xpass, and --fail-on takes the words sweep --fail-on takes.
	if g, gate := gateOf(Regression); !g.Failed() || !strings.Contains(gate, newCrash) {
		t.Errorf("diff --fail-on regression must fail naming the new crash:\n%s", gate)
	}
	var diff bytes.Buffer
	if err := DiffTable(&diff, Compare(base, after)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff.String(), newCrash) || !regexp.MustCompile(regexp.QuoteMeta(fixed)+`\s*\|\s*fix \(xpass\)\s*\|\s*crash\s*\|\s*correct`).MatchString(diff.String()) ||
		!strings.Contains(diff.String(), "1 xpass (known issues that pass now)") {
		t.Errorf("the diff does not call the new crash a regression and the fixed known crash an xpass:\n%s", &diff)
	}
	if g, gate := gateOf(GateXPass); !g.Failed() || !strings.Contains(gate, "--fail-on xpass: 1 of 6 cells failed the gate\n") || !strings.Contains(gate, fixed+": xpass (a known issue now passes: ") {
		t.Errorf("--fail-on xpass names the fixed known crash:\n%s", gate)
	}
	if g, gate := gateOf(GateUnexpected, "crash"); !g.Failed() || !strings.Contains(gate, "cells by kind: 1 unexpected, 3 crash") {
		t.Errorf("--fail-on unexpected,crash:\n%s", gate)
	}
	if g, gate := gateOf("garbage"); g.Failed() {
		t.Errorf("--fail-on garbage, no garbage cell:\n%s", gate)
	}

	// [[known]] entries: one for the new crash, but against the baseline,
	// where the cell was correct, none: a regression is to be fixed, not
	// excused.
	const entry = `match = { moe_runner = "flashinfer_cutedsl", fp4_gemm = "flashinfer_cudnn" }`
	var known bytes.Buffer
	if err := KnownTOML(&known, after); err != nil || !strings.Contains(known.String(), entry) {
		t.Errorf("KnownTOML (%v): want an entry for the new crash:\n%s", err, &known)
	}
	known.Reset()
	if err := KnownTOMLWith(&known, after, base); err != nil || strings.Contains(known.String(), entry) || strings.Contains(known.String(), "moe_runner = \"flashinfer_cutedsl\" }") ||
		!strings.Contains(known.String(), "# REGRESSION: "+newCrash+" was correct in the baseline") {
		t.Errorf("KnownTOMLWith the baseline (%v) must propose no entry over the regression:\n%s", err, &known)
	}
}

// junitOf parses the JUnit XML write writes.
func junitOf(t *testing.T, write func(*bytes.Buffer) error) junitRead {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	var s junitRead
	if err := xml.Unmarshal(b.Bytes(), &s); err != nil || len(s.Suites) != 1 {
		t.Fatalf("not JUnit XML of one suite: %v\n%s", err, &b)
	}
	return s
}
