package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/bmx-dev/bmx/internal/record"
)

// largeRun is the size of results.jsonl past which reading a run sets
// a soft memory limit (largeRunMemory): a run of thousands of cells.
const largeRun = 128 << 20

// largeRunMemory is the soft memory limit of a command that reads a large
// run whole. The garbage collector lets the heap grow to twice what is
// live before it collects: `bmx report --format json` of 10,000 cells
// (570 MB of results, 460 MB live) peaked at 950 MB of memory without it,
// 760 MB with it, for half a second more.
const largeRunMemory = 768 << 20

// limitLargeRunMemory sets largeRunMemory before the run in dir is read,
// when it is large and no limit is set already (GOMEMLIMIT, or bmx's own):
// a live heap past it is collected more often, never refused.
func limitLargeRunMemory(dir string) {
	fi, err := os.Stat(filepath.Join(dir, record.ResultsFile))
	if err != nil || fi.Size() < largeRun {
		return
	}
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(largeRunMemory)
	}
}
