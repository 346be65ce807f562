package across

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bmx-dev/bmx/internal/benchmem"
	"github.com/bmx-dev/bmx/internal/record"
)

// The benchmarks below time what a team with nightly runs waits for
// (issue 40): `bmx history RUNS --format md` and `bmx publish RUNS --out
// SITE` over 30 nightly runs of a 1,000-cell config (writeNights: real sim
// lines, about 57 KB a cell, 1.6 GB in all), each run read through its
// summary (made once, before the timing, as a sweep leaves it). Run them
// with
//
//	go test ./internal/reports/across -run '^$' -bench 'History|Publish' -benchtime 3x
//
// BMX_SCALE_RUNS names a folder of runs to use instead (made with
// TestWriteScaleNights, -tags scalerun): 365 nights for the memory of a
// year. Besides ns/op each reports peak-heap-MiB (sampled every 2 ms).
// Target: 30 x 1,000 history at most 10 s, publish 15 s, each within 512
// MiB; 365 x 1,000 within 1 GiB. What a user sees is `bmx` itself:
// /usr/bin/time -v bmx history runs/* --format md.

// benchDirs are the runs the benchmarks read, their summaries made.
func benchDirs(b *testing.B) []string {
	b.Helper()
	var dirs []string
	if root := os.Getenv("BMX_SCALE_RUNS"); root != "" {
		dirs, _ = filepath.Glob(filepath.Join(root, "*"))
	} else {
		dirs = writeNights(b, b.TempDir(), nights{Rows: 10, Cols: 100, Nights: 30, Aborted: 9, SlowFrom: 15})
	}
	for _, d := range dirs {
		if _, err := record.LoadSummary(d); err != nil {
			b.Fatal(err)
		}
	}
	return dirs
}

func loadSums(b *testing.B, dirs []string) []*record.Summary {
	b.Helper()
	sums := make([]*record.Summary, len(dirs))
	for i, d := range dirs {
		s, err := record.LoadSummary(d)
		if err != nil {
			b.Fatal(err)
		}
		sums[i] = s
	}
	return sums
}

// BenchmarkHistory is `bmx history RUNS --format md`.
func BenchmarkHistory(b *testing.B) {
	dirs := benchDirs(b)
	var n int64
	peak := benchmem.HeapPeak(b, func() {
		hs, err := HistoriesOf(loadSums(b, dirs))
		if err != nil {
			b.Fatal(err)
		}
		cw := &benchmem.CountWriter{}
		if err := RenderHistories(cw, hs, "md"); err != nil {
			b.Fatal(err)
		}
		n = cw.N
	})
	b.ReportMetric(float64(n)/1e6, "out-MB")
	b.ReportMetric(peak, "peak-heap-MiB")
}

// BenchmarkPublish is `bmx publish RUNS --out SITE` into an empty folder.
func BenchmarkPublish(b *testing.B) {
	dirs := benchDirs(b)
	pages := 0
	peak := benchmem.HeapPeak(b, func() {
		out, err := os.MkdirTemp("", "bmx-bench-site")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(out)
		site, err := PublishOf(out, loadSums(b, dirs))
		if err != nil {
			b.Fatal(err)
		}
		pages = len(site.Pages)
	})
	b.ReportMetric(float64(pages), "pages")
	b.ReportMetric(peak, "peak-heap-MiB")
}
