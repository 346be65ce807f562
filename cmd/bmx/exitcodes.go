package main

import (
	"errors"
	"fmt"
)

// Exit codes, the one place they are named; `bmx --help` lists them.
const (
	ExitOK          = 0   // done (failed cells are data, not a failure)
	ExitFailed      = 1   // the asked-for condition failed: --fail-on verdicts in sweep, a probe that is not correct
	ExitUsage       = 2   // bad usage or config
	ExitInfra       = 3   // infrastructure error: cannot write the run directory, another bmx holds it, ...
	ExitInterrupted = 130 // interrupted; cells finished so far are kept
)

const exitCodesHelp = `Exit status:
  0    done (failed cells are data, not a failure)
  1    the asked-for condition failed (--fail-on verdicts found; probe not correct)
  2    bad usage or config
  3    infrastructure error (cannot write the run directory, another bmx holds it, ...)
  130  interrupted (cells finished so far are kept)`

// exitError carries an exit code up to Main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func usageErrorf(format string, args ...any) error {
	return withCode(ExitUsage, fmt.Errorf(format, args...))
}

// errSilent marks an exit code whose reason was already printed.
var errSilent = errors.New("")
