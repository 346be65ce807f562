package torchgpu

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestH100FaultGroups: the live H100 sweep of moe-faults.toml (three MoE
// runners x a fault injected in the router every runner shares: none,
// the combine's weights halved, expert 0 dropped), judged again with each
// group's cell as the reference in turn. The cells form three groups of
// three, each explained by its fault value: bmx cannot tell, every cell
// is correct* (unconfirmed), and no healthy cell (fault=none) is condemned,
// whichever group holds the reference.
func TestH100FaultGroups(t *testing.T) {
	for _, fault := range []string{"none", "halve-combine", "drop-expert"} {
		t.Run("reference fault="+fault, func(t *testing.T) {
			rep, err := record.Load(filepath.Join("h100-issue36", "faults"))
			if err != nil {
				t.Fatal(err)
			}
			rep.Run.Reference = "moe=naive,fault=" + fault
			rep.Rejudge()
			a := rep.Agreement
			if a == nil || a.Status != classify.Undecided || len(a.Groups) != 3 {
				t.Fatalf("agreement %+v, want cannot tell between three groups", a)
			}
			for _, g := range a.Groups {
				if g.Size != 3 || len(g.Shares) != 1 || g.Shares["fault"] == "" {
					t.Errorf("group %+v: want three cells sharing a fault value", g)
				}
			}
			if len(rep.Results) != 9 {
				t.Fatalf("%d cells, want 9", len(rep.Results))
			}
			for _, r := range rep.Results {
				if r.Verdict != classify.Correct || !r.ShapeOnly || !strings.HasPrefix(r.Reason, "unconfirmed") {
					t.Errorf("%s: %s (shape only %v): %s", r.Cell.ID, r.Verdict, r.ShapeOnly, r.Reason)
				}
			}
		})
	}
}

// TestH100TeacherForced: the live H100 sweep of moe.toml's naive and
// triton cells, each scored on the reference's own 288 tokens (the
// torch server's vLLM request shape). With the floor recalibrated on it
// (classify.DegradedKL), every dense cell is correct and every fp8 GEMM
// degraded, each compared over all 288 tokens, where the shared greedy
// prefix (cut at token 2 by a tie in most cells) once let an fp8 cell
// read correct.
func TestH100TeacherForced(t *testing.T) {
	rep, err := record.Load(filepath.Join("h100-issue36", "calib"))
	if err != nil {
		t.Fatal(err)
	}
	rep.Rejudge()
	checked := 0
	for _, r := range rep.Results {
		want := map[string]classify.Verdict{"gemm=dense": classify.Correct, "gemm=fp8": classify.Degraded}
		id := r.Cell.ID
		if id == rep.Run.Reference || !strings.Contains(id, "renorm=on") || strings.Contains(id, "gemm=fp4") {
			continue
		}
		var v classify.Verdict
		for k, w := range want {
			if strings.Contains(id, k) {
				v = w
			}
		}
		checked++
		if r.Verdict != v {
			t.Errorf("%s: %s (%s), want %s", id, r.Verdict, r.Reason, v)
		}
		if n := r.Numerics; n == nil || n.Forced != len(n.Probes) || n.Compared != 288 {
			t.Errorf("%s: numerics %+v, want every probe teacher-forced over 288 tokens", id, n)
		}
	}
	if checked != 9 {
		t.Errorf("%d cells checked, want 9 (5 dense, 4 fp8)", checked)
	}
}
