package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/record"
)

// TestOlderClassifier: a run whose degraded cell an older bmx (one that
// recorded no classifier) judged correct. bmx report says the run was
// judged by another classifier and what --rejudge would change; bmx diff
// re-judges that side, says so, and finds no flip where the verdicts
// recorded would show a regression.
func TestOlderClassifier(t *testing.T) {
	t.Parallel()
	const degraded = "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl"
	dir := t.TempDir()
	if code, _, stderr := bmx(t, "sweep", "-q", "--out", dir, "--only", degraded); code != ExitOK && code != ExitFailed {
		t.Fatalf("sweep: exit %d\n%s", code, stderr)
	}
	fresh := runDir(t, dir)
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

	_, _, stderr := runBMX(t, "report", fresh)
	if strings.Contains(stderr, "classifier") {
		t.Errorf("report of a run this bmx judged: %s", stderr)
	}
	code, _, stderr := runBMX(t, "report", old)
	if code != ExitOK || !strings.Contains(stderr, "bmx: note: "+old+": 2 cells were judged by another classifier (unrecorded: an older bmx) than this bmx's (") ||
		!strings.Contains(stderr, "--rejudge would change 1 verdict:\nbmx:   "+degraded+": correct -> degraded\n") {
		t.Errorf("report: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runBMX(t, "diff", old, fresh)
	if code != ExitOK || !strings.Contains(stderr, old+": 2 cells were judged by another classifier") ||
		!strings.Contains(stderr, "re-judged by this bmx's, which changed 1 verdict:") || strings.Contains(stderr, fresh+":") || strings.Contains(stdout, "regression") {
		t.Errorf("diff: exit %d\n%s\n%s", code, stdout, stderr)
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
