package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bmx-dev/bmx/reports"
)

// ErrNotRun means a directory is not a bmx run directory.
var ErrNotRun = errors.New("not a bmx run directory")

// ReadRunDir reads a run directory's run.json after checking that dir is one:
// it exists, holds run.json and results.jsonl, and its run.json describes a
// run (a config and a start time), so that neither a resume nor a report
// ever takes another directory, or a stray run.json, for a run. The error
// wraps ErrNotRun and says what is missing.
func ReadRunDir(dir string) (*reports.Run, error) {
	notRun := func(why string, args ...any) error {
		return fmt.Errorf("%s is %w: %s", dir, ErrNotRun, fmt.Sprintf(why, args...))
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notRun("it does not exist")
	case err != nil:
		return nil, notRun("%v", err)
	case !st.IsDir():
		return nil, notRun("it is a file")
	}
	run, err := reports.ReadRun(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notRun("it has no %s (bmx sweep writes run.json, %s and logs/ into a run directory)", reports.RunFile, reports.ResultsFile)
	case err != nil:
		return nil, notRun("%s cannot be read: %v", reports.RunFile, err)
	case run.Config == "" || run.ConfigPath == "" || run.Started.IsZero():
		return nil, notRun("its %s does not describe a run (no config or start time)", reports.RunFile)
	}
	if _, err := os.Stat(filepath.Join(dir, reports.ResultsFile)); err != nil {
		return nil, notRun("it has no %s: %v", reports.ResultsFile, err)
	}
	return run, nil
}
