package bisect

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// TestFindCell: --cell names one cell by its values; a short value the
// grid shows, a typo, an unknown axis or a combination the matrix lacks
// is a usage error in one line that says what is there, never the
// matrix's every cell.
func TestFindCell(t *testing.T) {
	var cells []matrix.Cell
	for _, moe := range []string{"flashinfer_cutlass", "triton"} {
		for i := range 30 {
			fp4 := fmt.Sprintf("gemm%02d", i)
			cells = append(cells, matrix.Cell{ID: "moe=" + moe + ",fp4=" + fp4,
				Values: []matrix.AxisValue{{Axis: "moe", Value: moe}, {Axis: "fp4", Value: fp4}}})
		}
	}
	c, err := findCell(cells, []string{"moe=triton", "fp4=gemm07"})
	if err != nil || c.ID != "moe=triton,fp4=gemm07" {
		t.Fatalf("%v, %v", c.ID, err)
	}
	for _, tc := range []struct {
		pairs []string
		want  string
	}{
		{[]string{"moe=cutlass", "fp4=gemm01"}, `axis moe has no value "cutlass" (values: flashinfer_cutlass, triton); did you mean flashinfer_cutlass?`},
		{[]string{"moe=triton", "fp4=gemm7"}, "did you mean gemm07?"},
		{[]string{"runner=triton"}, `no axis named "runner" (axes: moe, fp4)`},
		{[]string{"moe=triton"}, "and 40 more (bmx plan lists them)"},
	} {
		_, err := findCell(cells, tc.pairs)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v; want a usage error saying %q", tc.pairs, err, tc.want)
		}
	}
}
