package reports_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// agreementRun reads the recorded sweep of an agreement grid of
// internal/record's testdata (TestAgreementRecorded records them with
// -update and checks their verdicts), judged again by this bmx.
func agreementRun(t *testing.T, name string) *record.Report {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join("..", "record", "testdata", "agreement", name, "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("%d recorded runs of %s, want 1 (go test ./internal/record -run TestAgreementRecorded -update makes them)", len(runs), name)
	}
	rep, err := record.Load(filepath.Dir(runs[0]))
	if err != nil {
		t.Fatal(err)
	}
	rep.Rejudge()
	return rep
}

// rendered is the report in the terminal's table (as a sweep prints it, at
// the default width), report.md and report.html.
func rendered(t *testing.T, rep *record.Report) (table, md, html string) {
	t.Helper()
	var b bytes.Buffer
	if err := reports.TableWith(&b, rep, reports.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	table = b.String()
	for _, f := range []struct {
		format string
		to     *string
	}{{"md", &md}, {"html", &html}} {
		b.Reset()
		if err := reports.Render(f.format, &b, rep); err != nil {
			t.Fatalf("%s: %v", f.format, err)
		}
		*f.to = b.String()
	}
	return table, md, html
}

// TestAgreementRendered renders the recorded agreement grids and checks
// that each format says what the agreement found: that bmx cannot tell
// (and what would decide it), that the configured reference failed or is
// the outlier.
func TestAgreementRendered(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"triton", "torch_native", "flex_attention"} {
		t.Run("cannot-tell-"+fault, func(t *testing.T) {
			t.Parallel()
			table, md, html := rendered(t, agreementRun(t, "cannot-tell-"+fault))
			for name, text := range map[string]string{"the table": table, "report.md": md, "report.html": html} {
				if !strings.Contains(text, "cannot tell") || !strings.Contains(text, "baseline") {
					t.Errorf("%s does not say bmx cannot tell and what would decide it:\n%s", name, text)
				}
			}
		})
	}
	t.Run("guard", func(t *testing.T) {
		t.Parallel()
		table, md, _ := rendered(t, agreementRun(t, "guard"))
		if !strings.Contains(table, "cannot tell") || !strings.Contains(md, "cannot tell") {
			t.Errorf("the table or report.md print no warning:\n%s", table)
		}
	})
	for broken, says := range map[string]string{"drift": "is the outlier", "garbage": "failed, so it is no yardstick", "crash": "failed, so it is no yardstick"} {
		t.Run("reference-"+broken, func(t *testing.T) {
			t.Parallel()
			if table, _, _ := rendered(t, agreementRun(t, "reference-"+broken)); !strings.Contains(table, says) {
				t.Errorf("the table does not say the reference %s:\n%s", says, table)
			}
		})
	}
}

// TestReportBoundedAtScale: a run of more than 50 cells (the recorded
// sweep of 12 MoE runners x 5 FP4 GEMMs of the simulated host, the last
// GEMM crashing) prints a bounded per-cell table in the terminal, saying
// how many cells it left out and where every cell is; report.md lists all
// of them (issue 37, point 7).
func TestReportBoundedAtScale(t *testing.T) {
	t.Parallel()
	rep := agreementRun(t, "bounded-60")
	table, md, _ := rendered(t, rep)
	if !strings.Contains(table, "of 60 cells shown") || !strings.Contains(table, "every cell: report.md in the run directory") {
		t.Errorf("the terminal table does not say what it left out and where:\n%s", table)
	}
	// The bounds are the table's (20 cells, 3 a cause, the 20 fastest), not
	// the run's size: 10,000 cells print about as many (TestTableScale).
	if n := strings.Count(table, "\n"); n > 250 {
		t.Errorf("%d lines for 60 cells:\n%s", n, table)
	}
	if strings.Count(md, "flashinfer_cudnn") < 12 || !strings.Contains(md, "60 cells") {
		t.Errorf("report.md does not list every cell:\n%s", md)
	}
}
