//go:build scalerun

package reports

import (
	"os"
	"testing"
)

// TestWriteScaleRun writes the 10,000-cell run of BenchmarkReport into the
// directory BMX_SCALE_RUN names, for timing `bmx report` on it by hand. It
// is built only with -tags scalerun, so the suite never skips it silently:
//
//	BMX_SCALE_RUN=DIR go test -tags scalerun ./internal/reports -run TestWriteScaleRun
func TestWriteScaleRun(t *testing.T) {
	dir := os.Getenv("BMX_SCALE_RUN")
	if dir == "" {
		t.Fatal("set BMX_SCALE_RUN to the directory to write the run into")
	}
	benchRun(t, dir, 100, 100, -1)
}
