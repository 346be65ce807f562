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

// builtinSweep sweeps the built-in simulated host at a sim_version, the
// reference and the CuTe DSL pair only, through real bmx and sim-server
// processes, with extra arguments (--baseline); it returns the run
// directory and stdout.
func builtinSweep(t *testing.T, version string, extra ...string) (dir, stdout string) {
	t.Helper()
	out := t.TempDir()
	args := append([]string{"sweep", "--var", "sim_version=" + version, "--out", out,
		"--only", "moe_runner=flashinfer_cutedsl", "--only", "fp4_gemm=flashinfer_cutedsl"}, extra...)
	code, stdout, stderr := runBMX(t, args...)
	if code != ExitOK {
		t.Fatalf("sweep sim_version=%s: exit %d\nstdout:\n%s\nstderr:\n%s", version, code, stdout, stderr)
	}
	return runDir(t, out), stdout
}

// readReportJSON reads a run's report.json: its cells by ID and agreement.
func readReportJSON(t *testing.T, path string) (map[string]record.Result, *classify.Agreement) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeReportJSON(t, data)
}

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

// TestYardstickAcrossRuns is the built-in host from sim_version 5 to 6:
// at 5 the reference passes and the CuTe DSL pair is degraded against it;
// at 6 the reference crashes and nothing of the run can judge the pair,
// which alone is correct. bmx diff says the yardstick was lost for it (no
// fix, and degraded against the base's yardstick); a sweep of 6 with
// --baseline judges it against 5's yardstick (degraded again) and says so
// in every format and when read again; bmx history does the same, and
// --fail-on fix does not trip on it.
func TestYardstickAcrossRuns(t *testing.T) {
	t.Parallel()
	run5, _ := builtinSweep(t, "5")
	cells5, a5 := readReportJSON(t, filepath.Join(run5, "report.json"))
	if c := cells5[cutedslPair]; c.Verdict != classify.Degraded {
		t.Fatalf("sim_version 5: the CuTe DSL pair is %s (%s), want degraded", c.Verdict, c.Reason)
	}
	if a5 == nil || a5.Status != classify.RefUnconfirmed {
		t.Fatalf("sim_version 5: agreement %+v, want the reference unconfirmed (it passes, nothing vouches)", a5)
	}
	run6, stdout6 := builtinSweep(t, "6")
	cells6, a6 := readReportJSON(t, filepath.Join(run6, "report.json"))
	if c := cells6[cutedslPair]; c.Verdict != classify.Correct {
		t.Fatalf("sim_version 6 alone: the CuTe DSL pair is %s (%s), want correct (no yardstick)", c.Verdict, c.Reason)
	}
	if a6 == nil || a6.Status != classify.NoYardstick || a6.Baseline != "" {
		t.Fatalf("sim_version 6 alone: agreement %+v, want split, no baseline", a6)
	}
	if strings.Contains(stdout6, "changed after the agreement") {
		t.Errorf("sim_version 6 alone: no verdict should change after the agreement:\n%s", stdout6)
	}

	t.Run("diff", func(t *testing.T) {
		code, stdout, stderr := runBMX(t, "diff", run5, run6, "--fail-on", "fix")
		if code != ExitOK {
			t.Errorf("diff --fail-on fix: exit %d, want 0 (a lost yardstick is no fix)\n%s\n%s", code, stdout, stderr)
		}
		line := lineWith(stdout, cutedslPair)
		if !strings.Contains(line, "yardstick lost") || strings.Contains(line, "| fix") {
			t.Errorf("diff's line of the CuTe DSL pair: %q, want yardstick lost, not fix\n%s", line, stdout)
		}
		for _, want := range []string{"1 yardstick-lost", "its cells are judged against baseline " + filepath.Base(run5), "correct on its own, degraded against baseline"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("diff does not say %q:\n%s", want, stdout)
			}
		}
		if strings.Contains(stdout, " fix") {
			t.Errorf("diff counts a fix:\n%s", stdout)
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
		if got == nil || got.Kind != reports.YardstickLost || got.Base != classify.Degraded || got.New != classify.Degraded || got.Alone != classify.Correct || got.Note == "" {
			t.Errorf("diff's JSON flip of the CuTe DSL pair: %+v, want yardstick-lost, degraded -> degraded against the base's yardstick, correct alone", got)
		}
		code, stdout, _ = runBMX(t, "diff", run5, run6, "--format", "md")
		if code != ExitFailed || !strings.Contains(stdout, "| **yardstick lost** | degraded | degraded (correct alone) |") {
			t.Errorf("diff --format md: exit %d, want the pair's flip yardstick lost:\n%s", code, stdout)
		}
	})

	t.Run("baseline", func(t *testing.T) {
		run6b, stdout := builtinSweep(t, "6", "--baseline", run5, "--fail-on", "fix")
		name := "baseline " + filepath.Base(run5) + ":moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
		check := func(from string, cells map[string]record.Result, a *classify.Agreement) {
			t.Helper()
			c := cells[cutedslPair]
			if c.Verdict != classify.Degraded || c.Alone != classify.Correct || !strings.Contains(c.Reason, name) {
				t.Errorf("%s: the CuTe DSL pair is %s (alone %q): %s; want degraded against %s, correct alone", from, c.Verdict, c.Alone, c.Reason, name)
			}
			if a == nil || a.Baseline != name || a.Yardstick != name || !strings.Contains(a.Note, "judged against the yardstick of the baseline run "+filepath.Base(run5)) {
				t.Errorf("%s: agreement %+v, want judged against %s", from, a, name)
			}
		}
		cells, a := readReportJSON(t, filepath.Join(run6b, "report.json"))
		check("report.json", cells, a)
		for _, want := range []string{"so cells are judged against the yardstick of the baseline run " + filepath.Base(run5),
			"1 verdict changed after the agreement among cells", cutedslPair + " correct -> degraded"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("the sweep's table does not say %q:\n%s", want, stdout)
			}
		}
		md, _ := os.ReadFile(filepath.Join(run6b, "report.md"))
		html, _ := os.ReadFile(filepath.Join(run6b, "report.html"))
		for f, text := range map[string]string{"report.md": string(md), "report.html": string(html)} {
			if !strings.Contains(text, "judged against the yardstick of the baseline run "+filepath.Base(run5)) {
				t.Errorf("%s does not say the cells were judged against the baseline's yardstick", f)
			}
		}
		// Read again, the run is judged alike: it recorded the yardstick.
		code, out, stderr := runBMX(t, "report", run6b, "--format", "json")
		if code != ExitOK {
			t.Fatalf("report: exit %d\n%s", code, stderr)
		}
		cells, a = decodeReportJSON(t, []byte(out))
		check("bmx report", cells, a)
		// Against the base, the pair is what it was: no flip to count.
		code, out, _ = runBMX(t, "diff", run5, run6b, "--fail-on", "fix")
		if code != ExitOK || strings.Contains(lineWith(out, cutedslPair), "| fix") {
			t.Errorf("diff RUN5 RUN6 --baseline: exit %d, the pair %q", code, lineWith(out, cutedslPair))
		}
	})

	t.Run("history", func(t *testing.T) {
		code, stdout, stderr := runBMX(t, "history", run5, run6, "--format", "json")
		if code != ExitOK {
			t.Fatalf("history: exit %d\n%s", code, stderr)
		}
		// One history per config and host: both runs are of one.
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
		if len(hs) != 1 {
			t.Fatalf("%d histories, want one (one config, one host)", len(hs))
		}
		h := hs[0]
		if len(h.Runs) != 2 || !strings.HasPrefix(h.Runs[1].Yardstick, "baseline "+filepath.Base(run5)) {
			t.Errorf("history's runs: %+v, want the second judged against the first's yardstick", h.Runs)
		}
		for _, c := range h.Cells {
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
