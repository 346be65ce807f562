package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// agreementSweep sweeps a 2x2 simulated host whose cell moe_runner=b,
// fp4_gemm=y (triton, flashinfer_cutlass) behaves as broken says (the other three are healthy), with
// that cell as the configured reference, through real bmx and sim-server
// processes; it returns the sweep's report.json.
func agreementSweep(t *testing.T, broken string) (cells map[string]record.Result, agreement classify.Agreement, stdout string) {
	t.Helper()
	dir := t.TempDir()
	matrixtest.Profile{Name: "agree", Startup: "20ms", Body: `[[rule]]
when = { moe_runner_backend = "triton", fp4_gemm_backend = "flashinfer_cutlass" }
behaviour = "` + broken + `"
error = "RuntimeError: CUDA error: an illegal memory access was encountered"
`}.Write(t, filepath.Join(dir, "agree-profile.toml"))
	matrixtest.Config{Name: "agree", Head: `reference = { moe_runner = "triton", fp4_gemm = "flashinfer_cutlass" }`,
		Server: matrixtest.Server{
			Command:      []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}", "--sim-profile", "{dir}/agree-profile.toml"},
			ReadyTimeout: "30s",
		},
		Axes: []matrixtest.Axis{
			{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass", "triton"}},
			{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
		},
	}.Write(t, filepath.Join(dir, "agree.toml"))
	out := filepath.Join(dir, "runs")
	code, stdout, stderr := runBMX(t, "sweep", "-c", filepath.Join(dir, "agree.toml"), "--out", out)
	if code != ExitOK {
		t.Fatalf("sweep: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	cells, a := readReportJSON(t, filepath.Join(runDir(t, out), "report.json"))
	if a == nil {
		t.Fatalf("report.json has no agreement\n%s", stdout)
	}
	return cells, *a, stdout
}

// TestReferenceNeverTrustedBlindly: with a drifting, garbage or crashing
// cell configured as the reference, the three healthy cells (which share
// no axis value) agree with each other, are correct with positive
// evidence, and are what the cells are judged against; the broken
// reference is called what it is, and the report says the reference was
// not the yardstick.
func TestReferenceNeverTrustedBlindly(t *testing.T) {
	t.Parallel()
	const ref = "moe_runner=triton,fp4_gemm=flashinfer_cutlass"
	healthy := []string{"moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cutlass", "moe_runner=triton,fp4_gemm=flashinfer_cudnn"}
	for _, tc := range []struct {
		broken string
		want   classify.Verdict
		status classify.AgreementStatus
		says   string
	}{
		{"drift", classify.Degraded, classify.RefOutlier, "is the outlier"},
		{"garbage", classify.Garbage, classify.RefBroken, "failed, so it is no yardstick"},
		{"crash", classify.Crash, classify.RefBroken, "failed, so it is no yardstick"},
	} {
		t.Run(tc.broken, func(t *testing.T) {
			t.Parallel()
			cells, a, stdout := agreementSweep(t, tc.broken)
			if got := cells[ref]; got.Verdict != tc.want {
				t.Errorf("the %s reference: %s (%s), want %s", tc.broken, got.Verdict, got.Reason, tc.want)
			}
			for _, id := range healthy {
				c := cells[id]
				if c.Verdict != classify.Correct || c.ShapeOnly {
					t.Errorf("healthy %s: %s (shape only %v: %s), want correct with evidence", id, c.Verdict, c.ShapeOnly, c.Reason)
				}
				if len(c.VouchedBy) != 2 {
					t.Errorf("healthy %s: vouched for by %v, want the two other healthy cells", id, c.VouchedBy)
				}
			}
			if a.Status != tc.status || a.Yardstick == ref || a.Yardstick == "" || len(a.Group) != 3 {
				t.Errorf("agreement %+v: want status %s, a healthy yardstick, a group of 3", a, tc.status)
			}
			if len(a.Shared) != 0 {
				t.Errorf("the healthy cells share %v, want nothing", a.Shared)
			}
			if !strings.Contains(stdout, tc.says) {
				t.Errorf("the report does not say the reference %s:\n%s", tc.says, stdout)
			}
		})
	}
}
