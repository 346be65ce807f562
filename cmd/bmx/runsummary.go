package main

import (
	"os"
	"path/filepath"

	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

// writeRunFiles writes what a sweep leaves beside its results when it
// ends: the report files (reports.WriteFiles) and, for a run of up to
// largeRun of results, the summary history and publish read it through
// (record.LoadSummary), so the first of them reads it in bytes a cell. A
// larger run's summary is made by its first reader instead: reading the
// run again here would double what the end of a sweep of many thousand
// cells holds. A summary that cannot be made is no failure of the sweep.
func writeRunFiles(dir string, rep *record.Report) error {
	if err := reports.WriteFiles(dir, rep); err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(dir, record.ResultsFile)); err == nil && fi.Size() < largeRun {
		_, _ = record.LoadSummary(dir)
	}
	return nil
}
