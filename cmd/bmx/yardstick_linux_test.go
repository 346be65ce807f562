package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// cutedslPair is the built-in host's CuTe DSL pair: from sim_version 5 its
// numerics drift from the reference's (degraded against it), with every
// expectation met.
const cutedslPair = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"

// yardstickRuns copies internal/reports' recorded sweeps of the built-in
// host's reference and CuTe DSL pair (at sim_version 5, at 6, at 6 with
// --baseline the first; TestYardstickRecorded there makes them with
// -update) into a temporary folder (history writes summaries beside them)
// and returns their directories.
func yardstickRuns(t *testing.T) (run5, run6, run6b string) {
	t.Helper()
	dirs := map[string]string{}
	tmp := t.TempDir()
	for _, name := range []string{"v5", "v6", "v6-baseline"} {
		runs, _ := filepath.Glob(filepath.Join("..", "..", "internal", "reports", "testdata", "yardstick", name, "*", "run.json"))
		if len(runs) != 1 {
			t.Fatalf("%d recorded runs of %s, want 1 (go test ./internal/reports -run TestYardstickRecorded -update makes them)", len(runs), name)
		}
		dirs[name] = filepath.Join(tmp, name, filepath.Base(filepath.Dir(runs[0])))
		if err := os.CopyFS(dirs[name], os.DirFS(filepath.Dir(runs[0]))); err != nil {
			t.Fatal(err)
		}
	}
	return dirs["v5"], dirs["v6"], dirs["v6-baseline"]
}

// decodeReportJSON reads a report.json: its cells by ID and agreement.
func decodeReportJSON(t *testing.T, data []byte) (map[string]record.Result, *classify.Agreement) {
	t.Helper()
	var rep struct {
		Cells     []record.Result     `json:"cells"`
		Agreement *classify.Agreement `json:"agreement"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	cells := map[string]record.Result{}
	for _, c := range rep.Cells {
		cells[c.Cell.ID] = c
	}
	return cells, rep.Agreement
}

// TestYardstickAcrossRuns runs bmx diff, report and history (the first
// two diffs as processes, their exit status --fail-on's; the rest in this
// process) on the recorded runs of the built-in host from sim_version 5 (the CuTe
// DSL pair degraded against the reference) to 6 (the reference crashes;
// alone, the pair is correct): diff says the yardstick was lost for the
// pair, and its exit status is --fail-on's (fix: 0, yardstick-lost: 1); the
// run swept with --baseline is read again judged against 5's yardstick;
// history judges 6 against 5's yardstick. What each says in every format,
// and why, is internal/reports' TestYardstickRecorded and reports/across'
// TestYardstickHistory.
func TestYardstickAcrossRuns(t *testing.T) {
	t.Parallel()
	run5, run6, run6b := yardstickRuns(t)

	t.Run("diff", func(t *testing.T) {
		code, stdout, stderr := runBMX(t, "diff", run5, run6, "--fail-on", "fix")
		if code != ExitOK {
			t.Errorf("diff --fail-on fix: exit %d, want 0 (a lost yardstick is no fix)\n%s\n%s", code, stdout, stderr)
		}
		if line := lineWith(stdout, cutedslPair); !strings.Contains(line, "yardstick lost") || strings.Contains(line, "| fix") {
			t.Errorf("diff's line of the CuTe DSL pair: %q, want yardstick lost, not fix\n%s", line, stdout)
		}
		code, stdout, _ = runBMX(t, "diff", run5, run6, "--format", "json", "--fail-on", "yardstick-lost")
		if code != ExitFailed {
			t.Errorf("diff --fail-on yardstick-lost: exit %d, want %d", code, ExitFailed)
		}
		var d reports.Diff
		if err := json.Unmarshal([]byte(stdout), &d); err != nil {
			t.Fatal(err)
		}
		var got *reports.Flip
		for i := range d.Flips {
			if d.Flips[i].Cell == cutedslPair {
				got = &d.Flips[i]
			}
		}
		if got == nil || got.Kind != reports.YardstickLost {
			t.Errorf("diff's JSON flip of the CuTe DSL pair: %+v, want yardstick-lost", got)
		}
		code, stdout, _ = bmx(t, "diff", run5, run6, "--format", "md")
		if code != ExitFailed || !strings.Contains(stdout, "| **yardstick lost** | degraded | degraded (correct alone) |") {
			t.Errorf("diff --format md: exit %d, want the pair's flip yardstick lost:\n%s", code, stdout)
		}
	})

	t.Run("baseline", func(t *testing.T) {
		name := "baseline " + filepath.Base(run5) + ":moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
		// Read again, the run is judged alike: it recorded the yardstick.
		code, out, stderr := bmx(t, "report", run6b, "--format", "json")
		if code != ExitOK {
			t.Fatalf("report: exit %d\n%s", code, stderr)
		}
		cells, a := decodeReportJSON(t, []byte(out))
		if c := cells[cutedslPair]; c.Verdict != classify.Degraded || c.Alone != classify.Correct || !strings.Contains(c.Reason, name) {
			t.Errorf("the CuTe DSL pair is %s (alone %q): %s; want degraded against %s, correct alone", c.Verdict, c.Alone, c.Reason, name)
		}
		if a == nil || a.Baseline != name || a.Yardstick != name {
			t.Errorf("agreement %+v, want judged against %s", a, name)
		}
		// Against the base, the pair is what it was: no flip to count.
		code, out, _ = bmx(t, "diff", run5, run6b, "--fail-on", "fix")
		if code != ExitOK || strings.Contains(lineWith(out, cutedslPair), "| fix") {
			t.Errorf("diff RUN5 RUN6 --baseline: exit %d, the pair %q", code, lineWith(out, cutedslPair))
		}
	})

	t.Run("history", func(t *testing.T) {
		code, stdout, stderr := bmx(t, "history", run5, run6, "--format", "json")
		if code != ExitOK {
			t.Fatalf("history: exit %d\n%s", code, stderr)
		}
		var hs []struct {
			Runs []struct {
				Yardstick string `json:"yardstick"`
			} `json:"runs"`
			Cells []struct {
				Cell   string           `json:"cell"`
				Strip  string           `json:"strip"`
				Latest classify.Verdict `json:"latest"`
			} `json:"cells"`
		}
		if err := json.Unmarshal([]byte(stdout), &hs); err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || len(hs[0].Runs) != 2 || !strings.HasPrefix(hs[0].Runs[1].Yardstick, "baseline "+filepath.Base(run5)) {
			t.Fatalf("histories %+v, want one, its second run judged against the first's yardstick", hs)
		}
		for _, c := range hs[0].Cells {
			if c.Cell == cutedslPair && (c.Strip != "≈≈" || c.Latest != classify.Degraded) {
				t.Errorf("history of the CuTe DSL pair: %s, latest %s; want ≈≈, degraded", c.Strip, c.Latest)
			}
		}
	})
}

// lineWith is the first line of s that holds sub ("" for none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
