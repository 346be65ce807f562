package bisect

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// bisector is one bisect in its run directory.
type bisector struct {
	opts    Options
	dir     string
	rec     *record.Bisect
	run     *record.Run
	store   *record.Store
	lock    *record.Lock
	resumed bool
	// prior are the results recorded before this process, by cell ID in
	// the order they were recorded; used counts those a step has read.
	prior map[string][]record.Result
	used  map[string]int
	// results are every result of the bisect (read or run), in order.
	results []record.Result
	// base is the cell as the first value's config expands it, for
	// run.json.
	base matrix.Cell
	cfg  *matrix.Config
	// shown are the var's values as bmx writes them anywhere (stderr,
	// bisect.json, run.json, results, log file names, reports): the
	// values, or "<secret #i>" for each when the var is a secret.
	shown []string
}

// open checks the options, loads the config at the first value, finds the
// cell, and opens the run directory: the one --resume names, an unfinished
// bisect of the same in --out, or a new one.
func open(ctx context.Context, opts Options) (*bisector, error) {
	b := &bisector{prior: map[string][]record.Result{}, used: map[string]int{}}
	if opts.Resume != "" {
		prev, err := record.ReadBisect(opts.Resume)
		if err != nil {
			return nil, usageErrorf("--resume %s: not a bisect's run directory: %v", opts.Resume, err)
		}
		if err := secretAgain(opts, prev); err != nil {
			return nil, err
		}
		given, givenVars := opts.Values, opts.Vars
		opts = fromRecord(opts, prev)
		if prev.Secret {
			opts.Values = given
		}
		if err := secretVarsAgain(opts.Vars, givenVars, opts.Resume); err != nil {
			return nil, err
		}
		b.dir, b.resumed = opts.Resume, true
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	b.opts = opts
	b.shown = shownValues(opts.Along, opts.Values, false)
	cfg, cell, err := b.load(0)
	if err != nil {
		return nil, err
	}
	b.cfg, b.base = cfg, cell
	b.shown = shownValues(opts.Along, opts.Values, cfg.Secrets(nil).Text(opts.Values[0]) != opts.Values[0])
	if b.dir == "" {
		b.dir = findUnfinished(opts, configPath(cfg))
		b.resumed = b.dir != ""
	}
	if err := b.openDir(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// secretAgain checks --along on a resume: bisect.json keeps a secret
// var's values as stand-ins, so they are given again (as many, for the
// same var); any other var's come from bisect.json alone.
func secretAgain(opts Options, prev *record.Bisect) error {
	switch {
	case !prev.Secret && opts.Along != "":
		return usageErrorf("--resume takes the bisect's options from its bisect.json: leave out --cell, --along, -c, --var and --perf")
	case prev.Secret && opts.Along == "":
		return usageErrorf("--resume %s: the values of %s are secret, and bisect.json keeps only stand-ins: give them again, in the same order, with --along %s=...", opts.Resume, prev.Along, prev.Along)
	case prev.Secret && (opts.Along != prev.Along || len(opts.Values) != len(prev.Values)):
		return usageErrorf("--resume %s: --along gives %d values of %s; the bisect is along %d values of %s", opts.Resume, len(opts.Values), opts.Along, len(prev.Values), prev.Along)
	}
	return nil
}

// secretVarsAgain puts the secret vars given again (--var) in place of
// their stand-ins in vars, recorded by bisect.json; every one must be
// given, and only those.
func secretVarsAgain(vars, given map[string]string, dir string) error {
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if vars[k] != matrix.Redacted {
			return usageErrorf("--resume takes the bisect's options from its bisect.json: leave out --cell, --along, -c, --var and --perf (--var %s: it is not a secret var of the bisect)", k)
		}
		vars[k] = given[k]
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if vars[k] == matrix.Redacted {
			return usageErrorf("--resume %s: var %s is secret, and bisect.json does not keep it: give it again with --var %s=...", dir, k, k)
		}
	}
	return nil
}

// fromRecord are the options a recorded bisect was started with, with
// this process's own (executable, log, callbacks).
func fromRecord(o Options, prev *record.Bisect) Options {
	o.Config, o.Vars, o.Cell, o.Along, o.Values = prev.ConfigPath, prev.Vars, prev.CellValues, prev.Along, prev.Values
	if o.Config == matrix.BuiltinName {
		o.Config = ""
	}
	if o.Vars == nil {
		o.Vars = map[string]string{}
	}
	o.Perf = prev.Mode == record.BisectPerf
	return o
}

// configPath is how bisect.json names the config: absolute, or the
// built-in's name.
func configPath(cfg *matrix.Config) string {
	if cfg.Path == matrix.BuiltinName {
		return cfg.Path
	}
	if abs, err := filepath.Abs(cfg.Path); err == nil {
		return abs
	}
	return cfg.Path
}

// findUnfinished is the newest run directory in opts.Out of an unfinished
// bisect that asked for the same; "" when there is none.
func findUnfinished(opts Options, cfgPath string) string {
	entries, err := os.ReadDir(opts.Out)
	if err != nil {
		return ""
	}
	for _, e := range slices.Backward(entries) { // names start with the UTC time
		dir := filepath.Join(opts.Out, e.Name())
		if prev, err := record.ReadBisect(dir); err == nil && opts.same(prev, cfgPath) {
			return dir
		}
	}
	return ""
}

// shownValues are values as bmx writes them: each "<secret #i>" (its
// place in --along, from 1) when the var is a secret (its name says so,
// a value is key-shaped, or secret says the config passes it as one),
// else the values. A stand-in by place, not by a hash of the value: a
// short secret's hash is as good as the secret.
func shownValues(along string, values []string, secret bool) []string {
	if !secret && !matrix.SecretName(along) && !slices.ContainsFunc(values, matrix.SecretShape) {
		return values
	}
	out := make([]string, len(values))
	for i := range values {
		out[i] = fmt.Sprintf("<secret #%d>", i+1)
	}
	return out
}

// load reads the config with the var at its i-th value and finds the cell
// in it.
func (b *bisector) load(i int) (*matrix.Config, matrix.Cell, error) {
	vars := maps.Clone(b.opts.Vars)
	if vars == nil {
		vars = map[string]string{}
	}
	vars[b.opts.Along] = b.opts.Values[i]
	cfg, plan, err := launcher.LoadMatrix(b.opts.Config, vars, nil, 0)
	if err != nil {
		return nil, matrix.Cell{}, &UsageError{fmt.Errorf("--along %s: %w", b.label(i), err)}
	}
	cell, err := findCell(plan.Cells, b.opts.Cell)
	if err != nil {
		return nil, matrix.Cell{}, err
	}
	return cfg, cell, nil
}

// findCell is the cell whose values are exactly pairs.
func findCell(cells []matrix.Cell, pairs []string) (matrix.Cell, error) {
	want := map[string]string{}
	for _, p := range sortedPairs(pairs) {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || v == "" {
			return matrix.Cell{}, usageErrorf("--cell %q: want axis=value,...", p)
		}
		want[k] = v
	}
	if err := checkCellValues(cells, want, pairs); err != nil {
		return matrix.Cell{}, err
	}
	var ids []string
	for _, c := range cells {
		ids = append(ids, c.ID)
		if len(c.Values) != len(want) {
			continue
		}
		match := true
		for _, av := range c.Values {
			if want[av.Axis] != av.Value {
				match = false
			}
		}
		if match {
			return c, nil
		}
	}
	const named = 20
	more := ""
	if len(ids) > named {
		ids, more = ids[:named], fmt.Sprintf(" and %d more (bmx plan lists them)", len(ids)-named)
	}
	return matrix.Cell{}, usageErrorf("--cell %s: no cell of the matrix has exactly these values (one per axis); its cells: %s%s", strings.Join(pairs, ","), strings.Join(ids, " "), more)
}

// checkCellValues refuses a --cell that names an axis the matrix has not,
// or a value no cell has on its axis, listing the axis's values and the
// one meant where it is clear (a short name the grid shows, a typo).
func checkCellValues(cells []matrix.Cell, want map[string]string, pairs []string) error {
	values := map[string][]string{} // axis -> its values, in plan order
	var axes []string
	for _, c := range cells {
		for _, av := range c.Values {
			if _, ok := values[av.Axis]; !ok {
				axes = append(axes, av.Axis)
			}
			if !slices.Contains(values[av.Axis], av.Value) {
				values[av.Axis] = append(values[av.Axis], av.Value)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v := want[k]
		vals, ok := values[k]
		if !ok {
			return usageErrorf("--cell %s: no axis named %q (axes: %s)", strings.Join(pairs, ","), k, strings.Join(axes, ", "))
		}
		if !slices.Contains(vals, v) {
			return usageErrorf("--cell %s: axis %s has no value %q (values: %s)%s", strings.Join(pairs, ","), k, v, strings.Join(vals, ", "), matrix.SuggestValue(v, vals))
		}
	}
	return nil
}

// openDir creates the run directory, or takes the earlier one's lock and
// reads its recorded results; then writes run.json and bisect.json.
func (b *bisector) openDir(ctx context.Context) error {
	if b.resumed {
		// The lock first: it refuses a run holding links where bmx
		// writes, before a torn line is cut off results.jsonl.
		if err := b.takeLock(); err != nil {
			return err
		}
		results, _, err := record.RecoverResults(b.dir)
		if err != nil {
			return err
		}
		for _, r := range results {
			b.prior[r.Cell.ID] = append(b.prior[r.Cell.ID], r)
		}
		if n := server.KillMarked(server.MarkerPrefix(server.RunMarker(b.dir))); n > 0 {
			b.opts.Log.Printf("killed %d leftover processes of the earlier attempt", n)
		}
		b.opts.Log.Printf("resuming the bisect in %s: %d results recorded", b.dir, len(results))
	} else {
		dir, err := record.CreateRunDir(b.opts.Out, "bisect-"+b.cfg.Name, time.Now())
		if err != nil {
			return err
		}
		b.dir = dir
	}
	if err := b.takeLock(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	b.rec = &record.Bisect{Cell: b.base.ID, CellValues: b.opts.Cell, Along: b.opts.Along, Values: b.shown, Secret: b.secret(),
		Mode: b.opts.mode(), ConfigPath: configPath(b.cfg), Vars: b.cfg.Secrets(os.Environ()).Vars(b.opts.Vars), Steps: []record.BisectStep{}}
	b.run = b.newRun(ctx)
	if prev, err := record.ReadRun(b.dir); err == nil && b.resumed {
		b.run.Started, b.run.Resumed = prev.Started, prev.Resumed
	}
	if err := record.WriteRun(b.dir, b.run); err != nil {
		return fmt.Errorf("write run.json: %w", err)
	}
	if err := record.WriteBisect(b.dir, b.rec); err != nil {
		return fmt.Errorf("write %s: %w", record.BisectFile, err)
	}
	store, err := record.OpenStore(b.dir)
	if err != nil {
		return err
	}
	b.store = store
	return nil
}

// secret says whether the var's values are written as stand-ins.
func (b *bisector) secret() bool { return !slices.Equal(b.shown, b.opts.Values) }

// takeLock takes the run directory's lock, once.
func (b *bisector) takeLock() error {
	if b.lock != nil {
		return nil
	}
	lock, err := record.LockRunDir(b.dir)
	if err != nil {
		return err
	}
	b.lock = lock
	return nil
}

// newRun is run.json: the config at the first value, its axes narrowed to
// the cell's values, with the bisected var as one more axis.
func (b *bisector) newRun(ctx context.Context) *record.Run {
	cfg := b.cfg
	version := "unknown"
	if b.opts.Version != nil {
		version = b.opts.Version()
	}
	secrets := cfg.Secrets(os.Environ())
	run := &record.Run{Name: "bisect-" + cfg.Name, Simulated: cfg.Path == matrix.BuiltinName, BMXVersion: version,
		ConfigPath: configPath(cfg), Config: cfg.RedactedSource(), Vars: secrets.Vars(b.opts.Vars),
		Cells: len(b.opts.Values), Started: time.Now().UTC(), Excluded: []matrix.Cell{}, Known: cfg.Known,
		Reference: b.base.ID + "," + b.label(0),
		Host:      launcher.Fingerprint(ctx, cfg, b.opts.Self)}
	if probes, err := launcher.ProbeSet(cfg); err == nil {
		run.ProbeSet = probes.Name
	}
	for _, av := range b.base.Values {
		run.Axes = append(run.Axes, record.AxisValues{Name: av.Axis, Values: []string{av.Value}})
	}
	run.Axes = append(run.Axes, record.AxisValues{Name: b.opts.Along, Values: slices.Clone(b.shown)})
	run.Notes = []string{fmt.Sprintf("bisect of %s along %s (%d values) on the %s: see %s", b.base.ID, b.opts.Along, len(b.opts.Values), b.opts.mode(), record.BisectFile)}
	return matrix.RedactAll(secrets, run)
}

// close releases the store and the lock.
func (b *bisector) close() {
	if b.store != nil {
		b.store.Close()
	}
	if b.lock != nil {
		b.lock.Unlock()
	}
}
