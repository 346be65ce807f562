//go:build scalerun

package across

import (
	"os"
	"strconv"
	"testing"
)

// TestWriteScaleNights writes the nightly runs of writeNights into the
// directory BMX_SCALE_RUNS names (BMX_SCALE_NIGHTS nights of
// BMX_SCALE_CELLS cells, default 30 and 1,000), for timing `bmx history`
// and `bmx publish` on them by hand. It is built only with -tags scalerun:
//
//	BMX_SCALE_RUNS=DIR go test -tags scalerun ./internal/reports/across -run TestWriteScaleNights
func TestWriteScaleNights(t *testing.T) {
	dir := os.Getenv("BMX_SCALE_RUNS")
	if dir == "" {
		t.Fatal("set BMX_SCALE_RUNS to the directory to write the runs into")
	}
	n := nights{Rows: 10, Cols: 100, Nights: 30, Aborted: 9, SlowFrom: 15}
	if v, err := strconv.Atoi(os.Getenv("BMX_SCALE_NIGHTS")); err == nil {
		n.Nights = v
	}
	if v, err := strconv.Atoi(os.Getenv("BMX_SCALE_CELLS")); err == nil {
		n.Rows = v / n.Cols
	}
	writeNights(t, dir, n)
}
