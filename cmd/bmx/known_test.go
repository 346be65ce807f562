package main

import (
	"path/filepath"
	"testing"
)

// TestKnownFromRun: bmx report --format known on the first gated sweep of
// a team adopting --fail-on unexpected (the run internal/reports records
// from a real sweep of the simulated host, testdata/known) exits 0 and
// prints the [[known]] entries reports.KnownTOML writes, as its golden
// file holds them. How the entries are chosen, and that the config with
// them pasted passes the gate, is internal/reports' TestKnownFromRun on
// the same run; sweep --fail-on unexpected as a process is
// TestNightlyGates.
func TestKnownFromRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyRecorded(t, filepath.Join("..", "..", "internal", "reports", "testdata", "known"), dir)
	code, known, stderr := bmx(t, "report", dir, "--format", "known")
	if code != ExitOK || stderr != "" {
		t.Fatalf("report --format known: exit %d\n%s", code, stderr)
	}
	want := string(mustRead(t, filepath.Join("..", "..", "internal", "reports", "testdata", "TestKnownFromRun.golden")))
	if known != want {
		t.Errorf("report --format known:\n%s\nwant (internal/reports/testdata/TestKnownFromRun.golden):\n%s", known, want)
	}
}
