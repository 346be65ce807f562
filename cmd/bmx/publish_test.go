package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/cmd/bmx/internal/termstatus"
	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// writeRun makes a run directory with the given verdicts and versions, as
// this bmx records them.
func writeRun(t *testing.T, dir string, verdicts map[string]classify.Verdict, versions map[string]string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	run := &record.Run{Name: filepath.Base(dir), BMXVersion: "test", Started: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		Axes: []record.AxisValues{{Name: "moe", Values: []string{"cutlass", "trtllm", "cutedsl"}}},
		Host: record.Host{Hostname: "gpu", GPU: "NVIDIA RTX PRO 6000", Driver: "580.159.04", CUDA: "13.0", Versions: versions}}
	if err := record.WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	store, err := record.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, moe := range []string{"cutlass", "trtllm", "cutedsl"} {
		v, ok := verdicts[moe]
		if !ok {
			continue
		}
		// Judged, as far as the record says, by this bmx's classifier: a
		// record of another would be judged again from its (here absent)
		// evidence.
		r := record.Result{Cell: matrix.Cell{ID: "moe=" + moe, Values: []matrix.AxisValue{{Axis: "moe", Value: moe}}}, Verdict: v, Reason: "because",
			Classifier: classify.Fingerprint()}
		if v == classify.Crash {
			r.Signature = "CUDA error: no kernel image is available for execution on the device"
		}
		store.Append(r)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	writeRun(t, before, map[string]classify.Verdict{"cutlass": classify.Correct, "trtllm": classify.Crash, "cutedsl": classify.Garbage},
		map[string]string{"torch": "2.12.0.dev20260307", "flashinfer-python": "0.6.4"})
	writeRun(t, after, map[string]classify.Verdict{"cutlass": classify.Garbage, "trtllm": classify.Correct},
		map[string]string{"torch": "2.12.0.dev20260310", "flashinfer-python": "0.6.5"})
	code, stdout, _ := bmx(t, "diff", before, after)
	if code != ExitFailed {
		t.Errorf("a regression must exit 1, got %d", code)
	}
	for _, want := range []string{"1 regression, 1 fix, 1 removed", "moe=cutlass", "regression", "torch", "2.12.0.dev20260307", "2.12.0.dev20260310", "0.6.4", "0.6.5"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = bmx(t, "diff", before, after, "--format", "json", "--fail-on", "new")
	var d reports.Diff
	if code != ExitOK || json.Unmarshal([]byte(stdout), &d) != nil || len(d.Flips) != 3 || len(d.Host) != 2 {
		t.Errorf("exit %d json %+v", code, d)
	}
	if code, stdout, _ := bmx(t, "diff", before, before, "--format", "md"); code != ExitOK || !strings.Contains(stdout, "no flips; 3 cells unchanged") {
		t.Errorf("same run: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := bmx(t, "diff", before, filepath.Join(dir, "nope")); code != ExitUsage || !strings.Contains(stderr, "not a bmx run directory") {
		t.Errorf("missing run: exit %d %s", code, stderr)
	}
	if code, _, _ := bmx(t, "diff", before, after, "--fail-on", "worse"); code != ExitUsage {
		t.Errorf("bad --fail-on: exit %d", code)
	}
}

func TestReportCommand(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code, _, stderr := bmx(t, "sweep", "--out", out, "-q", "--only", "fp4_gemm=flashinfer_trtllm"); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	dir := runDir(t, out)
	for _, f := range reports.Formats {
		path := filepath.Join(out, "report."+f)
		code, _, stderr := bmx(t, "report", dir, "--format", f, "-o", path)
		if code != ExitOK {
			t.Fatalf("%s: exit %d %s", f, code, stderr)
		}
		id := "moe_runner=flashinfer_trtllm,fp4_gemm=flashinfer_trtllm"
		if f == "md" {
			id = `moe\_runner=flashinfer\_trtllm,fp4\_gemm=flashinfer\_trtllm`
		}
		if b := mustRead(t, path); !strings.Contains(string(b), id) && f != "table" && f != "known" {
			t.Errorf("%s report lacks the cells", f)
		}
	}
	// known lists the failures no [[known]] entry covers: the FP4 GEMM
	// crashes, not the trtllm MoE crash the built-in config knows.
	if b := string(mustRead(t, filepath.Join(out, "report.known"))); !strings.Contains(b, `match = { moe_runner = "flashinfer_cutlass", fp4_gemm = "flashinfer_trtllm" }`) ||
		strings.Contains(b, `match = { moe_runner = "flashinfer_trtllm"`) {
		t.Errorf("known:\n%s", b)
	}
	// The 3 cells --only names, and the reference they are judged against.
	if code, stdout, _ := bmx(t, "report", dir, "--rejudge"); code != ExitOK || !strings.Contains(stdout, "4 cells: 1 correct, 3 crash") {
		t.Errorf("rejudge: exit %d\n%s", code, stdout)
	}
	if code, _, _ := bmx(t, "report", dir, "--format", "pdf"); code != ExitUsage {
		t.Errorf("bad format: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("a sweep writes report.html: %v", err)
	}
}

// TestGitHubStepSummary: in a GitHub Actions job (GITHUB_STEP_SUMMARY set)
// a sweep adds its table to the job's summary. bmx runs as a process of its
// own, with that environment. Its two cells (twoCells, one probe) make
// the grid of moe_runner by fp4_gemm the summary holds.
func TestGitHubStepSummary(t *testing.T) {
	t.Parallel()
	summary := filepath.Join(t.TempDir(), "summary.md")
	cfg := twoCellsIn(t, t.TempDir(), "summary", oneProbe)
	if code, _, stderr := runBMXEnv(t, []string{"GITHUB_STEP_SUMMARY=" + summary}, "sweep", "-c", cfg, "--out", t.TempDir(), "-q"); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	s := string(mustRead(t, summary))
	if !strings.Contains(s, "| moe\\_runner \\\\ fp4\\_gemm |") || strings.Contains(s, "## Cells") {
		t.Errorf("summary:\n%s", s)
	}
}

func TestNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	if termstatus.ColorOK(os.Stdout) {
		t.Error("NO_COLOR set but colour on")
	}
}
