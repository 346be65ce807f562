package launcher

import (
	"fmt"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/record"
)

// SetupError stops a sweep whose first cell (the reference, when it runs
// first) crashed because the setup is broken, not a backend: the model cannot
// be found or loaded, the port was taken, the server executable or its own
// package is missing. Every other cell would fail the same way, each after
// its own model load. The cell's result is recorded and the reports are
// written as for any other run.
type SetupError struct {
	// Cell is the cell that failed; Reference says it is the reference.
	Cell      string
	Reference bool
	// Cause is one of classify's Setup* causes; Line the log line that
	// shows it; Log the cell's log file.
	Cause, Line, Log string
}

func (e *SetupError) Error() string {
	which := "the first cell"
	if e.Reference {
		which = "the reference cell"
	}
	return fmt.Sprintf("stopped after %s (%s): the setup is broken, not a backend: %s: %s (see %s); fix it or pass --keep-going",
		which, e.Cell, e.Cause, e.Line, e.Log)
}

// setupLineMax clips the quoted log line of a SetupError.
const setupLineMax = 300

// setupFailure is the SetupError of a result that crashed before its server
// was ready because of the setup; nil for any other result.
func setupFailure(r record.Result, reference bool) error {
	if r.Verdict != classify.Crash || r.Timings.ReadyMS > 0 || len(r.Observations) > 0 {
		return nil
	}
	cause, line := classify.Setup(r.Input(), r.Argv, r.Cell.Args)
	if cause == "" {
		return nil
	}
	if rs := []rune(line); len(rs) > setupLineMax {
		line = string(rs[:setupLineMax]) + "…"
	}
	return &SetupError{Cell: r.Cell.ID, Reference: reference, Cause: cause, Line: line, Log: r.LogPath}
}
