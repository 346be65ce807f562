package main

import (
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestOlderClassifier: a run whose degraded cell an older bmx (one that
// recorded no classifier) judged correct (a recorded run, rewritten so). bmx report says the verdicts are
// stored ones of an older classifier and what --rejudge would change, on
// stderr and in report.md, report.html and report.json alike; bmx diff,
// history and publish re-judge it and say so in the same words, and diff
// finds no flip where the verdicts recorded would show a regression.
func TestOlderClassifier(t *testing.T) {
	t.Parallel()
	const degraded = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
	// The recorded sweep of the built-in host at sim_version 5 (internal/
	// reports' testdata/yardstick/v5: the reference and the degraded CuTe
	// DSL pair), judged by this bmx's classifier if it was recorded by
	// another (record.RejudgeRun, as the committed GPU runs are kept).
	runs, _ := filepath.Glob(filepath.Join("..", "..", "internal", "reports", "testdata", "yardstick", "v5", "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("%d recorded runs, want 1 (go test ./internal/reports -run TestYardstickRecorded -update makes it)", len(runs))
	}
	fresh := filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(runs[0])))
	if err := os.CopyFS(fresh, os.DirFS(filepath.Dir(runs[0]))); err != nil {
		t.Fatal(err)
	}
	if _, err := record.RejudgeRun(fresh, "TestOlderClassifier"); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old")
	if err := exec.Command("cp", "-r", fresh, old).Run(); err != nil {
		t.Fatal(err)
	}
	// As an older bmx recorded it: no classifier, the cell correct.
	path := filepath.Join(old, record.ResultsFile)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(mustReadFile(t, path))), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if _, ok := r["classifier"]; !ok {
			t.Fatalf("a result records no classifier: %s", l[:min(len(l), 200)])
		}
		delete(r, "classifier")
		if r["cell"].(map[string]any)["id"] == degraded {
			if r["verdict"] != "degraded" {
				t.Fatalf("%s is %v, want degraded", degraded, r["verdict"])
			}
			r["verdict"] = "correct"
		}
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, _, stderr := bmx(t, "report", fresh)
	if strings.Contains(stderr, "classifier") {
		t.Errorf("report of a run this bmx judged: %s", stderr)
	}
	fp := "(" + classify.Fingerprint() + ")"
	code, _, stderr := bmx(t, "report", old)
	if code != ExitOK || !strings.Contains(stderr, "bmx: note: "+old+": stored verdicts, judged by an older classifier (unrecorded): run bmx report --rejudge, which would change 1 verdict:\nbmx:   "+degraded+": correct -> degraded\n") {
		t.Errorf("report: exit %d\n%s", code, stderr)
	}
	rejudged := "judged by an older classifier (unrecorded); re-judged with this bmx's " + fp
	code, stdout, stderr := bmx(t, "diff", old, fresh)
	if code != ExitOK || !strings.Contains(stderr, "bmx: note: "+old+": "+rejudged+", which changed 1 verdict:") || strings.Contains(stderr, fresh+":") || strings.Contains(stdout, "regression") {
		t.Errorf("diff: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Every other reader says it alike: the report formats (stored, or
	// re-judged with --rejudge), history and publish (re-judged).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", old, "--format", "md"}, "stored verdicts, judged by an older classifier (unrecorded): run bmx report --rejudge"},
		{[]string{"report", old, "--format", "md", "--rejudge"}, rejudged},
		{[]string{"report", old, "--format", "json"}, `"judged": "stored verdicts, judged by an older classifier (unrecorded): run bmx report --rejudge"`},
		{[]string{"report", old, "--format", "html"}, "stored verdicts, judged by an older classifier (unrecorded): run bmx report --rejudge"},
		{[]string{"history", old, fresh}, rejudged},
		{[]string{"history", old, fresh, "--format", "json"}, `"judged": "` + rejudged},
		{[]string{"publish", old, "--out", filepath.Join(t.TempDir(), "site")}, rejudged},
	} {
		code, stdout, stderr := bmx(t, tc.args...)
		stdout = html.UnescapeString(stdout)
		if code != ExitOK || !strings.Contains(stdout, tc.want) {
			t.Errorf("%v: exit %d, want %q in its output\n%s\n%s", tc.args, code, tc.want, stdout, stderr)
		}
		if tc.args[0] != "report" && !strings.Contains(stderr, "bmx: note: "+old+": "+rejudged) {
			t.Errorf("%v: stderr does not say it re-judged:\n%s", tc.args, stderr)
		}
	}
	if _, stdout, _ := bmx(t, "history", old, fresh); strings.Count(stdout, "== ") != 1 || !strings.Contains(linesWith(stdout, degraded), "degraded") || strings.Contains(stdout, "FLAKY") {
		t.Errorf("history of a run re-judged and the same run: want one history, the cell degraded in both\n%s", stdout)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyRecorded copies the recorded runs under src (run directories, or
// folders of them) to dst and judges each copy again with this bmx's
// classifier (record.RejudgeRun, as TestOlderClassifier's run and the
// committed GPU runs are kept): a recorded run was judged by the
// classifier of its day, and every change of classify's code makes it an
// older one's, which bmx says on stderr. A change of classifier that
// judges a recorded cell differently fails the test here, naming the cells,
// rather than passing unseen: record the runs again with -update in the
// package that records them.
func copyRecorded(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dst, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "run.json" {
			return err
		}
		run := filepath.Dir(path)
		j, err := record.RejudgeRun(run, t.Name())
		if err != nil {
			return err
		}
		for _, c := range j.Changes {
			t.Errorf("%s (recorded in %s): this bmx's classifier judges %s %s, the recording's %s: record it again (-update)", c.Cell, src, c.Cell, c.To, c.From)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
