package torchgpu

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/testenv"
	"github.com/bmx-dev/bmx/matrix"
)

// TestNVFP4 runs nvfp4_test.py: the FP4 format with the standard library
// (e2m1 and e4m3 rounding, packing, the two recipes' scales, the 128x4
// swizzle, the dequantiser, linear scales read as swizzled, the global
// scale dropped), and, where the interpreter has torch, moe_fp4.py's
// quantiser and dequant path byte for byte against it (skipped otherwise,
// with the reason in the log).
func TestNVFP4(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(python()); err != nil {
		testenv.Skip(t, "the FP4 format tests need %s: it is not installed", python())
	}
	cmd := exec.Command(python(), "nvfp4_test.py", "-v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nvfp4_test.py: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "skipped") {
			t.Log(l)
		}
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Errorf("nvfp4_test.py did not end with OK:\n%s", out)
	}
}

// TestMatrixFP4 checks moe-fp4.toml: three MoE runners x five FP4
// implementations in bfloat16 with the experts padded to 32, the knobs
// (linear scales, the global scale dropped, MXFP4) each on three runners,
// the alignment cells (pad 16 on the TMA kernel, pad 0), the unquantised
// reference first and a bfloat16 cell without FP4: 28 cells, each passing
// its values to the server's flags.
func TestMatrixFP4(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("moe-fp4.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "moe=naive,dtype=float32,fp4=none,recipe=nvfp4,scales=swizzled,global=applied,pad=0"
	if len(plan.Cells) != 28 || plan.Reference != ref || plan.Cells[0].ID != ref {
		t.Fatalf("%d cells, reference %q, first %q", len(plan.Cells), plan.Reference, plan.Cells[0].ID)
	}
	flags := map[string]string{"moe": "--moe-runner", "dtype": "--dtype", "fp4": "--fp4-gemm", "recipe": "--fp4-recipe",
		"scales": "--fp4-scale-layout", "global": "--fp4-global-scale", "pad": "--moe-pad"}
	cross := map[string]bool{}
	knobs := map[string]map[string]bool{"recipe=mxfp4": {}, "scales=linear": {}, "global=dropped": {}}
	for _, c := range plan.Cells {
		v := map[string]string{}
		for _, x := range c.Values {
			v[x.Axis] = x.Value
			i := slices.Index(c.Args, flags[x.Axis])
			if i < 0 || c.Args[i+1] != x.Value {
				t.Errorf("%s: args %v do not pass %s %s", c.ID, c.Args, flags[x.Axis], x.Value)
			}
		}
		plain := v["recipe"] == "nvfp4" && v["scales"] == "swizzled" && v["global"] == "applied"
		if plain && v["pad"] == "32" && v["fp4"] != "none" {
			cross[v["moe"]+"/"+v["fp4"]] = true
		}
		for k, runners := range knobs {
			if strings.Contains(c.ID, k) {
				runners[v["moe"]] = true
				if v["fp4"] == "none" || v["pad"] != "32" {
					t.Errorf("%s: a knob cell without FP4 or unpadded", c.ID)
				}
			}
		}
	}
	if len(cross) != 15 {
		t.Errorf("runner x fp4 cross: %d cells, want 3 x 5: %v", len(cross), cross)
	}
	for k, runners := range knobs {
		if len(runners) != 3 {
			t.Errorf("%s on %d runners, want 3", k, len(runners))
		}
	}
}
