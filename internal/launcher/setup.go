package launcher

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
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
	// Cause is one of classify's Setup* causes, or SetupSame; Line the log
	// line that shows it; Log the cell's log file.
	Cause, Line, Log string
	// Cells, above 1, is how many cells crashed the same way (SetupSame);
	// Cell is then the first of them.
	Cells int
}

// SetupSame is the cause of a SetupError when nothing in the log names the
// setup but the first cells all crashed the same way before their servers
// were ready, across the values of every axis (sameStart).
const SetupSame = "every cell so far crashed the same way before its server was ready, whatever its axis values"

func (e *SetupError) Error() string {
	which := "the first cell"
	switch {
	case e.Cells > 1:
		which = fmt.Sprintf("the first %d cells", e.Cells)
	case e.Reference:
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

// exitOnly reports whether r's signature is no error line of its log, only
// how its process ended ("exit code 1", "killed by SIGSEGV"): that many
// servers fail so says nothing of why.
func exitOnly(r record.Result) bool {
	if r.Signature == "" {
		return true
	}
	rest, ok := strings.CutPrefix(r.Signature, "exit code ")
	if _, err := strconv.Atoi(rest); ok && err == nil {
		return true
	}
	sig, ok := strings.CutPrefix(r.Signature, "killed by ")
	return ok && !strings.ContainsAny(sig, " :")
}

// sameStartMin is how many cells must have crashed the same way at start,
// at least, before sameStart calls the setup broken.
const sameStartMin = 3

// sameStart is the SetupError of a sweep whose cells so far (in the order
// they ended) all crashed before their servers were ready, with one
// signature that names none of their axis values, and that between them
// have two values or more of every axis, and that signature is an error line
// of their logs, not only an exit status: no axis value explains a failure
// they all share, so every cell would fail so, each after its own start
// (a broken sim profile, a driver the server cannot use, a setup that
// classify.Setup does not recognise). nil while any of that is not so.
func sameStart(results []record.Result) error {
	if len(results) < sameStartMin {
		return nil
	}
	first := results[0]
	seen := map[string]map[string]bool{}
	for _, r := range results {
		if r.Verdict != classify.Crash || r.Timings.ReadyMS > 0 || len(r.Observations) > 0 || r.Signature != first.Signature || exitOnly(r) {
			return nil
		}
		for _, av := range r.Cell.Values {
			if len(av.Value) >= 3 && strings.Contains(r.Signature, av.Value) {
				return nil
			}
			if seen[av.Axis] == nil {
				seen[av.Axis] = map[string]bool{}
			}
			seen[av.Axis][av.Value] = true
		}
	}
	if len(seen) == 0 {
		return nil
	}
	for _, vals := range seen {
		if len(vals) < 2 {
			return nil
		}
	}
	line := first.Signature
	if rs := []rune(line); len(rs) > setupLineMax {
		line = string(rs[:setupLineMax]) + "…"
	}
	return &SetupError{Cell: first.Cell.ID, Cells: len(results), Cause: SetupSame, Line: line, Log: first.LogPath}
}
