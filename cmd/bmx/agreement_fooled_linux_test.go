package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// storyProbes are greedy probes without an expectation: only agreement
// among cells (or a reference) can vouch for their answers.
const storyProbes = `[[probe]]
name = "river"
prompt = "Write two sentences about the river."
max_tokens = 64
logprobs = true

[[probe]]
name = "forest"
prompt = "Write two sentences about the forest."
max_tokens = 64
logprobs = true
`

// fooledSweep is one sweep of a simulated grid through real bmx and
// sim-server processes: axes moe (moe_runner_backend) and fp4
// (fp4_gemm_backend) with the given values, and a third axis fault
// (attention_backend) when faults has values; behave gives each cell's
// sim behaviour and variant ("" for healthy). It returns report.json's
// cells and agreement, and the terminal's and report.md's text.
type fooledGrid struct {
	moe, fp4, faults []string
	reference        string // TOML inline table, "" for none
	behave           func(moe, fp4, fault string) (behaviour, variant string)
}

type fooledRun struct {
	cells     map[string]record.Result
	agreement *classify.Agreement
	stdout    string
	md, html  string
	dir       string
}

func (g fooledGrid) sweep(t *testing.T) fooledRun {
	t.Helper()
	dir := t.TempDir()
	var rules strings.Builder
	faults := g.faults
	if len(faults) == 0 {
		faults = []string{""}
	}
	for _, m := range g.moe {
		for _, f := range g.fp4 {
			for _, x := range faults {
				b, v := g.behave(m, f, x)
				if b == "" {
					continue
				}
				when := fmt.Sprintf("moe_runner_backend = %q, fp4_gemm_backend = %q", m, f)
				if x != "" {
					when += fmt.Sprintf(", attention_backend = %q", x)
				}
				fmt.Fprintf(&rules, "[[rule]]\nwhen = { %s }\nbehaviour = %q\nvariant = %q\nerror = \"RuntimeError: CUDA error: an illegal memory access was encountered\"\n\n", when, b, v)
			}
		}
	}
	matrixtest.Profile{Name: "fooled", Startup: "10ms", Body: rules.String()}.Write(t, filepath.Join(dir, "profile.toml"))
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), storyProbes)
	axes := []matrixtest.Axis{
		{Name: "moe", Flag: "--moe-runner-backend", Values: g.moe},
		{Name: "fp4", Flag: "--fp4-gemm-backend", Values: g.fp4},
	}
	if len(g.faults) > 0 {
		axes = append(axes, matrixtest.Axis{Name: "fault", Flag: "--attention-backend", Values: g.faults})
	}
	head := ""
	if g.reference != "" {
		head = "reference = " + g.reference
	}
	matrixtest.Config{Name: "fooled", Head: head,
		Server: matrixtest.Server{Command: matrixtest.Sim("--sim-profile", "{dir}/profile.toml"), ReadyTimeout: "30s"},
		Axes:   axes, Tail: "[probes]\nfile = \"probes.toml\"\n",
	}.Write(t, filepath.Join(dir, "fooled.toml"))
	out := filepath.Join(dir, "runs")
	code, stdout, stderr := runBMX(t, "sweep", "-c", filepath.Join(dir, "fooled.toml"), "--out", out, "--slots", "4")
	if code != ExitOK {
		t.Fatalf("sweep: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := fooledRun{stdout: stdout, dir: runDir(t, out)}
	run.cells, run.agreement = readReportJSON(t, filepath.Join(run.dir, "report.json"))
	if want := len(g.moe) * len(g.fp4) * len(faults); len(run.cells) != want {
		t.Fatalf("report.json has %d cells, want %d", len(run.cells), want)
	}
	md, _ := os.ReadFile(filepath.Join(run.dir, "report.md"))
	html, _ := os.ReadFile(filepath.Join(run.dir, "report.html"))
	run.md, run.html = string(md), string(html)
	return run
}

// Backend names the simulated server accepts (SGLang's choices), for the
// grids' axes: moeN[i] is MoE runner i, fp4N[i] FP4 GEMM i, faultN[i]
// fault value i (an attention backend, as the sim's third matched flag).
var (
	moeN   = []string{"triton", "flashinfer_cutlass", "deep_gemm", "cutlass", "marlin", "aiter"}
	fp4N   = []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "marlin"}
	faultN = []string{"triton", "torch_native", "flex_attention"}
)

// ref is a reference of a two-axis grid, as a TOML inline table.
func ref(moe, fp4 string) string { return fmt.Sprintf(`{ moe = %q, fp4 = %q }`, moe, fp4) }

// cellID is the ID of a two-axis grid's cell.
func cellID(moe, fp4 string) string { return "moe=" + moe + ",fp4=" + fp4 }

// TestAgreementInteractionBugSweep: a bug in every path but the
// reference's. On 4x4 and 5x5 grids the reference's row and column are
// healthy and every cell off both gives the same fluent wrong answer. The
// broken block outnumbers the healthy cells, but all its members avoid
// the reference's values: whether the reference is correct, not
// configured, or crashes, no healthy cell is condemned and no broken cell
// is correct.
func TestAgreementInteractionBugSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n   int
		ref string
	}{{4, "correct"}, {4, "none"}, {4, "crash"}, {5, "correct"}, {5, "crash"}} {
		t.Run(fmt.Sprintf("%dx%d/%s", tc.n, tc.n, tc.ref), func(t *testing.T) {
			t.Parallel()
			g := fooledGrid{moe: moeN[:tc.n], fp4: fp4N[:tc.n], reference: ref(moeN[0], fp4N[0]),
				behave: func(m, f, _ string) (string, string) {
					switch {
					case m == moeN[0] && f == fp4N[0] && tc.ref == "crash":
						return "crash", ""
					case m != moeN[0] && f != fp4N[0]:
						return "wrong", "shared-bug"
					}
					return "", ""
				}}
			if tc.ref == "none" {
				g.reference = ""
			}
			run := g.sweep(t)
			for id, c := range run.cells {
				healthy := strings.HasPrefix(id, "moe="+moeN[0]+",") || strings.HasSuffix(id, "fp4="+fp4N[0])
				switch {
				case id == cellID(moeN[0], fp4N[0]) && tc.ref == "crash":
					if c.Verdict != classify.Crash {
						t.Errorf("%s: %s, want crash", id, c.Verdict)
					}
				case healthy && (c.Verdict != classify.Correct || c.ShapeOnly):
					t.Errorf("healthy %s: %s (shape only %v): %s", id, c.Verdict, c.ShapeOnly, c.Reason)
				case !healthy && c.Verdict != classify.Wrong:
					t.Errorf("broken %s: %s: %s", id, c.Verdict, c.Reason)
				}
			}
			if run.agreement == nil || !strings.Contains(run.agreement.Note, "which explains its agreement") {
				t.Errorf("the agreement does not say why the larger group lost: %+v", run.agreement)
			}
		})
	}
}

// TestAgreementCannotTellSweep: three MoE runners and a fault of three
// values applied the same way in every runner give three groups of three
// identical answers, each explained by its fault value. Whichever group
// holds the reference, bmx cannot tell: every answering cell is correct*,
// none wrong, and the terminal, report.md, report.html and report.json
// say so and what would decide it.
func TestAgreementCannotTellSweep(t *testing.T) {
	t.Parallel()
	for _, fault := range faultN {
		t.Run("reference in fault="+fault, func(t *testing.T) {
			t.Parallel()
			g := fooledGrid{moe: moeN[:3], fp4: fp4N[:1], faults: faultN,
				reference: fmt.Sprintf(`{ moe = %q, fp4 = %q, fault = %q }`, moeN[0], fp4N[0], fault),
				behave: func(_, _, x string) (string, string) {
					if x == faultN[0] {
						return "", ""
					}
					return "wrong", x
				}}
			run := g.sweep(t)
			if run.agreement == nil || run.agreement.Status != classify.Undecided || len(run.agreement.Groups) != 3 {
				t.Fatalf("agreement %+v, want cannot tell between 3 groups", run.agreement)
			}
			for id, c := range run.cells {
				if c.Verdict != classify.Correct || !c.ShapeOnly || !strings.Contains(c.Reason, "unconfirmed") {
					t.Errorf("%s: %s (shape only %v): %s; want correct*, unconfirmed", id, c.Verdict, c.ShapeOnly, c.Reason)
				}
			}
			for name, text := range map[string]string{"terminal": run.stdout, "report.md": run.md, "report.html": run.html} {
				if !strings.Contains(text, "cannot tell") || !strings.Contains(text, "baseline") {
					t.Errorf("%s does not say bmx cannot tell and what would decide it", name)
				}
			}
		})
	}
}

// TestAgreementGuardSweep: a drifting reference whose healthy peers all
// share a value it lacks stays no yardstick, and the healthy cells are not
// condemned (degraded) against it.
func TestAgreementGuardSweep(t *testing.T) {
	t.Parallel()
	g := fooledGrid{moe: moeN[:2], fp4: fp4N[:2], reference: ref(moeN[1], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			switch {
			case m == moeN[1] && f == fp4N[0]:
				return "drift", ""
			case m == moeN[0] && f == fp4N[0]:
				return "crash", ""
			}
			return "", ""
		}}
	run := g.sweep(t)
	for _, id := range []string{cellID(moeN[0], fp4N[1]), cellID(moeN[1], fp4N[1])} {
		if c := run.cells[id]; c.Verdict != classify.Correct {
			t.Errorf("healthy %s: %s: %s", id, c.Verdict, c.Reason)
		}
	}
	if run.agreement == nil || run.agreement.Status != classify.Undecided {
		t.Errorf("agreement %+v, want cannot tell", run.agreement)
	}
	if !strings.Contains(run.stdout, "cannot tell") || !strings.Contains(run.md, "cannot tell") {
		t.Errorf("the terminal or report.md print no warning:\n%s", run.stdout)
	}
}

// TestAgreementWholeAnswersSweep: cells whose first sentence is right and
// which then run into fluent nonsense neither vouch for the reference nor
// pass; a healthy cell that parts from the others at the model's near tie
// agrees with them and is vouched for.
func TestAgreementWholeAnswersSweep(t *testing.T) {
	t.Parallel()
	g := fooledGrid{moe: moeN[:3], fp4: fp4N[:3], reference: ref(moeN[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			switch {
			case m == moeN[1] && f == fp4N[2], m == moeN[2] && f == fp4N[1]:
				return "derail", ""
			case m == moeN[2] && f == fp4N[2]:
				return "tie", ""
			}
			return "", ""
		}}
	run := g.sweep(t)
	for id, c := range run.cells {
		derails := id == cellID(moeN[1], fp4N[2]) || id == cellID(moeN[2], fp4N[1])
		if derails && c.Verdict == classify.Correct {
			t.Errorf("derailing %s: correct: %s", id, c.Reason)
		}
		if !derails && (c.Verdict != classify.Correct || c.ShapeOnly || len(c.VouchedBy) == 0) {
			t.Errorf("healthy %s: %s (shape only %v, vouched for by %v): %s", id, c.Verdict, c.ShapeOnly, c.VouchedBy, c.Reason)
		}
	}
	if a := run.agreement; a == nil || a.Status != classify.RefConfirmed || len(a.Group) != 7 {
		t.Errorf("agreement %+v, want the reference confirmed by the 7 healthy cells", a)
	}
	// Reading the run again, and judging it again, give the same verdicts.
	code, stdout, stderr := runBMX(t, "report", run.dir, "--rejudge", "--format", "json")
	if code != ExitOK {
		t.Fatalf("report --rejudge: exit %d: %s", code, stderr)
	}
	var rep struct {
		Cells []record.Result `json:"cells"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cells {
		if want := run.cells[c.Cell.ID]; c.Verdict != want.Verdict || c.ShapeOnly != want.ShapeOnly {
			t.Errorf("%s: rejudged %s (shape only %v), swept %s (%v)", c.Cell.ID, c.Verdict, c.ShapeOnly, want.Verdict, want.ShapeOnly)
		}
	}
}

// TestAgreementTieSweep: two groups of two agreeing cells, neither
// explained by its make-up, the reference in one of them: a tie, so bmx
// cannot tell, and condemns no cell.
func TestAgreementTieSweep(t *testing.T) {
	t.Parallel()
	g := fooledGrid{moe: moeN[:2], fp4: fp4N[:2], reference: ref(moeN[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			if (m == moeN[0]) != (f == fp4N[0]) {
				return "wrong", "the other pair"
			}
			return "", ""
		}}
	run := g.sweep(t)
	if a := run.agreement; a == nil || a.Status != classify.Undecided || len(a.Groups) != 2 {
		t.Fatalf("agreement %+v, want cannot tell between two groups", a)
	}
	for id, c := range run.cells {
		if c.Verdict != classify.Correct || !c.ShapeOnly {
			t.Errorf("%s: %s (shape only %v): %s; want correct*", id, c.Verdict, c.ShapeOnly, c.Reason)
		}
	}
}

// TestAgreementInteractionBug150: the interaction bug on 150 cells (15
// MoE runners x 5 FP4 GEMMs x 2 attention backends): the 38 cells on the
// reference's MoE runner or FP4 GEMM are healthy, the 112 others give one
// fluent wrong answer; the block never wins.
func TestAgreementInteractionBug150(t *testing.T) {
	t.Parallel()
	moe := []string{"triton", "flashinfer_cutlass", "deep_gemm", "cutlass", "marlin", "aiter", "triton_kernel", "flashinfer_trtllm",
		"experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_mxfp4", "flashinfer_cutedsl", "humming", "experimental_sgl_marlin", "hpc_ops"}
	g := fooledGrid{moe: moe, fp4: fp4N, faults: faultN[:2], reference: fmt.Sprintf(`{ moe = %q, fp4 = %q, fault = %q }`, moe[0], fp4N[0], faultN[0]),
		behave: func(m, f, _ string) (string, string) {
			if m != moe[0] && f != fp4N[0] {
				return "wrong", "shared-bug"
			}
			return "", ""
		}}
	run := g.sweep(t)
	healthy, broken := 0, 0
	for id, c := range run.cells {
		if strings.HasPrefix(id, "moe="+moe[0]+",") || strings.Contains(id, ",fp4="+fp4N[0]+",") {
			healthy++
			if c.Verdict != classify.Correct || c.ShapeOnly {
				t.Errorf("healthy %s: %s (shape only %v): %s", id, c.Verdict, c.ShapeOnly, c.Reason)
			}
			continue
		}
		broken++
		if c.Verdict != classify.Wrong {
			t.Errorf("broken %s: %s: %s", id, c.Verdict, c.Reason)
		}
	}
	if healthy != 38 || broken != 112 || run.agreement.Status != classify.RefConfirmed {
		t.Errorf("%d healthy, %d broken, agreement %s: %s", healthy, broken, run.agreement.Status, run.agreement.Note)
	}
}

// TestReportBoundedAtScale: a run of more than 50 cells (12 MoE runners x
// 5 FP4 GEMMs through real bmx and sim-server processes) prints a bounded
// per-cell table in the terminal, saying how many cells it left out and
// where every cell is; report.md lists all of them (issue 37, point 7).
func TestReportBoundedAtScale(t *testing.T) {
	t.Parallel()
	moe := []string{"triton", "flashinfer_cutlass", "deep_gemm", "cutlass", "marlin", "aiter", "triton_kernel", "flashinfer_trtllm",
		"experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_mxfp4", "flashinfer_cutedsl"}
	g := fooledGrid{moe: moe, fp4: fp4N, reference: ref(moe[0], fp4N[0]),
		behave: func(m, f, _ string) (string, string) {
			if f == fp4N[4] {
				return "crash", ""
			}
			return "", ""
		}}
	run := g.sweep(t)
	code, stdout, stderr := runBMX(t, "report", run.dir)
	if code != ExitOK {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "of 60 cells shown") || !strings.Contains(stdout, "every cell: report.md in the run directory") {
		t.Errorf("the terminal table does not say what it left out and where:\n%s", stdout)
	}
	// The bounds are the table's (20 cells, 3 a cause, the 20 fastest), not
	// the run's size: 10,000 cells print about as many (reports'
	// TestTableScale).
	if n := strings.Count(stdout, "\n"); n > 250 {
		t.Errorf("%d lines for 60 cells:\n%s", n, stdout)
	}
	if strings.Count(run.md, fp4N[0]) < len(moe) || !strings.Contains(run.md, "60 cells") {
		t.Errorf("report.md does not list every cell:\n%s", run.md)
	}
}
