package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// yardstickRunsDir holds the recorded sweeps of the built-in simulated host
// that TestYardstickRecorded reads (the reference and the CuTe DSL pair
// only): v5 at sim_version 5, v6 at 6, v6-baseline at 6 with --baseline
// v5's run, one run directory in each (yardstickRecord makes them with
// -update). reports/across' TestYardstickHistory and cmd/bmx's
// TestYardstickAcrossRuns read them too.
var yardstickRunsDir = filepath.Join("testdata", "yardstick")

// cutedslPair is the built-in host's CuTe DSL pair: from sim_version 5 its
// numerics drift from the reference's (degraded against it), with every
// expectation met; at 6 the reference crashes.
const cutedslPair = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"

// yardstickRecord sweeps the built-in simulated host's reference and CuTe
// DSL pair at sim_version 5, at 6, and at 6 with --baseline the first
// run, through a real bmx, and records the runs under yardstickRunsDir.
func yardstickRecord(t *testing.T) {
	t.Helper()
	bmx := matrixtest.BuildBMX(t)
	out := t.TempDir()
	sweep := func(version string, extra ...string) string {
		args := append([]string{"-q", "--var", "sim_version=" + version, "--out", out,
			"--only", "moe_runner=flashinfer_cutedsl", "--only", "fp4_gemm=flashinfer_cutedsl"}, extra...)
		run, _ := matrixtest.SweepRun(t, bmx, out, args...)
		return run
	}
	v5 := sweep("5")
	v6 := sweep("6")
	v6b := sweep("6", "--baseline", v5)
	for name, run := range map[string]string{"v5": v5, "v6": v6, "v6-baseline": v6b} {
		dir := filepath.Join(yardstickRunsDir, name)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := matrixtest.RecordRun(run, filepath.Join(dir, filepath.Base(run))); err != nil {
			t.Fatal(err)
		}
	}
}

// yardstickRun reads the recorded run name ("v5", "v6", "v6-baseline") as
// bmx's readers do: each cell as this bmx judges it (JudgeCurrent).
func yardstickRun(t *testing.T, name string) *record.Report {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(yardstickRunsDir, name, "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("%d recorded runs under %s, want 1 (go test ./internal/reports -run TestYardstickRecorded -update makes them)", len(runs), filepath.Join(yardstickRunsDir, name))
	}
	rep, err := record.Load(filepath.Dir(runs[0]))
	if err != nil {
		t.Fatal(err)
	}
	rep.JudgeCurrent(true)
	return rep
}

// TestYardstickRecorded is the built-in host from sim_version 5 to 6,
// recorded: at 5 the reference passes and the CuTe DSL pair is degraded
// against it; at 6 the reference crashes and nothing of the run can judge
// the pair, which alone is correct. The diff says the yardstick was lost
// for it (no fix, and degraded against the base's yardstick); the sweep of
// 6 with --baseline judges it against 5's yardstick (degraded again) and
// says so in every format and when read again. cmd/bmx's
// TestYardstickAcrossRuns runs bmx diff and report on these runs as
// processes (the exit codes of --fail-on); go test ./internal/reports -run
// TestYardstickRecorded -update sweeps them again.
func TestYardstickRecorded(t *testing.T) {
	t.Parallel()
	if *update {
		yardstickRecord(t)
	}
	v5, v6, v6b := yardstickRun(t, "v5"), yardstickRun(t, "v6"), yardstickRun(t, "v6-baseline")
	if c := v5.Result(cutedslPair); c == nil || c.Verdict != classify.Degraded {
		t.Fatalf("sim_version 5: the CuTe DSL pair is %+v, want degraded", c)
	}
	if a := v5.Agreement; a == nil || a.Status != classify.RefUnconfirmed {
		t.Fatalf("sim_version 5: agreement %+v, want the reference unconfirmed (it passes, nothing vouches)", a)
	}
	if c := v6.Result(cutedslPair); c == nil || c.Verdict != classify.Correct {
		t.Fatalf("sim_version 6 alone: the CuTe DSL pair is %+v, want correct (no yardstick)", c)
	}
	if a := v6.Agreement; a == nil || a.Status != classify.NoYardstick || a.Baseline != "" {
		t.Fatalf("sim_version 6 alone: agreement %+v, want split, no baseline", a)
	}
	var b bytes.Buffer
	if err := TableWith(&b, v6, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "changed after the agreement") {
		t.Errorf("sim_version 6 alone: no verdict should change after the agreement:\n%s", b.String())
	}
	base := filepath.Base(v5.Dir)

	t.Run("diff", func(t *testing.T) {
		d := Compare(v5, v6)
		var b bytes.Buffer
		if err := DiffTable(&b, d); err != nil {
			t.Fatal(err)
		}
		table := b.String()
		line := firstLineWith(table, cutedslPair)
		if !strings.Contains(line, "yardstick lost") || strings.Contains(line, "| fix") {
			t.Errorf("diff's line of the CuTe DSL pair: %q, want yardstick lost, not fix\n%s", line, table)
		}
		for _, want := range []string{"1 yardstick-lost", "its cells are judged against baseline " + base, "correct on its own, degraded against baseline"} {
			if !strings.Contains(table, want) {
				t.Errorf("diff does not say %q:\n%s", want, table)
			}
		}
		if strings.Contains(table, " fix") {
			t.Errorf("diff counts a fix:\n%s", table)
		}
		// --fail-on fix does not trip on a lost yardstick; --fail-on
		// yardstick-lost does.
		for words, trips := range map[string]bool{"fix": false, "yardstick-lost": true} {
			g, err := Gate(v6, []string{words}, v5)
			if err != nil || g.Failed() != trips {
				t.Errorf("--fail-on %s: tripped %v (%v), want %v", words, g != nil && g.Failed(), err, trips)
			}
		}
		b.Reset()
		if err := DiffJSON(&b, d); err != nil {
			t.Fatal(err)
		}
		var dj Diff
		if err := json.Unmarshal(b.Bytes(), &dj); err != nil {
			t.Fatal(err)
		}
		var got *Flip
		for i := range dj.Flips {
			if dj.Flips[i].Cell == cutedslPair {
				got = &dj.Flips[i]
			}
		}
		if got == nil || got.Kind != YardstickLost || got.Base != classify.Degraded || got.New != classify.Degraded || got.Alone != classify.Correct || got.Note == "" {
			t.Errorf("diff's JSON flip of the CuTe DSL pair: %+v, want yardstick-lost, degraded -> degraded against the base's yardstick, correct alone", got)
		}
		b.Reset()
		if err := DiffMarkdown(&b, d); err != nil || !strings.Contains(b.String(), "| **yardstick lost** | degraded | degraded (correct alone) |") {
			t.Errorf("diff in markdown (%v): want the pair's flip yardstick lost:\n%s", err, b.String())
		}
	})

	t.Run("baseline", func(t *testing.T) {
		name := "baseline " + base + ":moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"
		c, a := v6b.Result(cutedslPair), v6b.Agreement
		if c == nil || c.Verdict != classify.Degraded || c.Alone != classify.Correct || !strings.Contains(c.Reason, name) {
			t.Errorf("the CuTe DSL pair is %+v; want degraded against %s, correct alone", c, name)
		}
		if a == nil || a.Baseline != name || a.Yardstick != name || !strings.Contains(a.Note, "judged against the yardstick of the baseline run "+base) {
			t.Errorf("agreement %+v, want judged against %s", a, name)
		}
		var b bytes.Buffer
		if err := TableWith(&b, v6b, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"so cells are judged against the yardstick of the baseline run " + base,
			"1 verdict changed after the agreement among cells", cutedslPair + " correct -> degraded"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("the table does not say %q:\n%s", want, b.String())
			}
		}
		for _, format := range []string{"md", "html", "json"} {
			b.Reset()
			if err := Render(format, &b, v6b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "judged against the yardstick of the baseline run "+base) {
				t.Errorf("report.%s does not say the cells were judged against the baseline's yardstick", format)
			}
		}
		// Against the base, the pair is what it was: no flip to count.
		d := Compare(v5, v6b)
		b.Reset()
		if err := DiffTable(&b, d); err != nil {
			t.Fatal(err)
		}
		if g, err := Gate(v6b, []string{"fix"}, v5); err != nil || g.Failed() || strings.Contains(firstLineWith(b.String(), cutedslPair), "| fix") {
			t.Errorf("diff v5 v6 --baseline: gate %+v (%v), the pair %q", g, err, firstLineWith(b.String(), cutedslPair))
		}
	})
}

// firstLineWith is the first line of s that holds sub ("" for none).
func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
