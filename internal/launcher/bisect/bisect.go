// Package bisect finds the first value of a var (a venv, an image tag, a
// wheel version, a commit: any ordered list of environments a config's
// command or env names) at which one cell goes bad, as git bisect finds a
// commit: it runs the cell at both ends, then halves the range between the
// last good and the first bad value, running only that cell, until the two
// are adjacent. A step is bad when its verdict (or crash signature) is not
// the good end's, or, in perf mode, when its speed dropped from the good
// end's by the perf gate's rule. A step that cannot be judged (inconclusive,
// flaky, an environment that does not start) is run once more, then
// skipped.
//
// Every visited result lands in one run directory (results.jsonl, logs/,
// run.json) with bisect.json beside it, so `bmx report` renders a bisect and
// an interrupted one resumes: the search is taken again from the start, and
// each step whose result is recorded is read, not run.
package bisect

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Options are a bisect's inputs.
type Options struct {
	// Config is the matrix file ("" = the built-in simulated host); Vars
	// the other vars it is loaded with.
	Config string
	Vars   map[string]string
	// Cell are the cell's axis=value pairs, one for every axis.
	Cell []string
	// Along is the var bisected over, Values its values in order: the
	// first good, the last bad.
	Along  string
	Values []string
	// Perf bisects on a performance drop instead of a verdict change.
	Perf bool
	// Out holds run directories; an unfinished bisect of the same cell,
	// var, values, mode and config there is resumed.
	Out string
	// Resume is a bisect's run directory to finish; its bisect.json gives
	// every option above.
	Resume string
	// Self is the bmx executable, for {self}; Version bmx's version.
	Self    string
	Version func() string
	Log     *log.Logger
	// PerfDrop says whether r is slower than good by the perf gate's rule,
	// and by which figure (launcher does not import reports, which owns
	// the rule).
	PerfDrop func(good, r record.Result) (why string, dropped bool)
	// WriteReports, when set, writes the run's reports at the end.
	WriteReports func(dir string, rep *record.Report) error

	// runCell runs a step's cell; nil is sw.RunCell, a real sweep of it.
	// The package's tests give recorded results of real sweeps through
	// it, so stepping is tested without starting servers.
	runCell func(ctx context.Context, sw *launcher.Sweep, cell matrix.Cell, attempt int) (record.Result, error)
}

// Outcome is a finished (or interrupted) bisect.
type Outcome struct {
	Dir    string
	Bisect *record.Bisect
	Report *record.Report
	// Resumed says the bisect went on from an earlier one's directory.
	Resumed bool
}

// ErrInterrupted is returned when ctx ends during a bisect: the steps
// finished until then are recorded and a resume goes on from them.
var ErrInterrupted = errors.New("bisect interrupted")

// ErrNoChange means the two ends are on the same side: nothing to bisect.
var ErrNoChange = errors.New("the ends do not differ")

// EndError is an end that cannot be judged even on a second run.
type EndError struct {
	Value string
	Why   string
}

func (e *EndError) Error() string {
	return fmt.Sprintf("the end %s cannot be judged twice (%s): pick another end", e.Value, e.Why)
}

// UsageError is a bisect asked for wrongly (a flag's value); its message
// names the flag.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// check refuses options that cannot be bisected.
func (o *Options) check() error {
	if o.Along == "" {
		return usageErrorf("--along: want var=v1,v2,... (the var's values, first good, last bad)")
	}
	if len(o.Values) < 2 {
		return usageErrorf("--along %s: want at least two values (a good end and a bad end), got %d", o.Along, len(o.Values))
	}
	seen := map[string]bool{}
	for _, v := range o.Values {
		if v == "" || seen[v] {
			return usageErrorf("--along %s: value %q is empty or given twice", o.Along, v)
		}
		seen[v] = true
	}
	if len(o.Cell) == 0 {
		return usageErrorf("--cell: want axis=value,... naming one cell")
	}
	if _, ok := o.Vars[o.Along]; ok {
		return usageErrorf("--var %s: it is the var --along bisects; leave it out", o.Along)
	}
	if o.PerfDrop == nil {
		o.PerfDrop = func(record.Result, record.Result) (string, bool) { return "", false }
	}
	if o.Log == nil {
		o.Log = log.New(discard{}, "", 0)
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// mode is the options' record.Bisect mode.
func (o *Options) mode() string {
	if o.Perf {
		return record.BisectPerf
	}
	return record.BisectVerdict
}

// same reports whether an unfinished bisect asked for what o asks for, so
// a new bisect goes on from it.
func (o *Options) same(b *record.Bisect, configPath string) bool {
	return !b.Done && b.ConfigPath == configPath && b.Along == o.Along && b.Mode == o.mode() &&
		slices.Equal(b.Values, o.Values) && slices.Equal(sortedPairs(b.CellValues), sortedPairs(o.Cell)) &&
		maps.Equal(b.Vars, o.Vars)
}

// sortedPairs are axis=value pairs in one order, for comparing.
func sortedPairs(pairs []string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, strings.Split(p, ",")...)
	}
	slices.Sort(out)
	return out
}

// Run bisects: it opens (or resumes) the run directory, checks the ends,
// halves until the first bad value is found, and writes bisect.json and the
// reports. The error is ErrInterrupted, ErrNoChange, an *EndError, a
// *UsageError or an infrastructure failure; the Outcome is set whenever
// the run directory was opened.
func Run(ctx context.Context, opts Options) (*Outcome, error) {
	b, err := open(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer b.close()
	err = b.search(ctx)
	return b.finish(err)
}
