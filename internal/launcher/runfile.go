package launcher

// The run's record as a session keeps it: run.json, written before the
// first server and completed beside it, and the results store, which
// records nothing before run.json is complete.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// writeRunFirst completes run with the host's fingerprint and bmx's
// version and writes run.json in the background, once the first server has
// started (the CPU is its supervisor's and its own until then) or something
// waits for it (a result decided without a server: release lets it go on).
// The classifier is built then too. An interrupt does not cut the
// fingerprint short (nvidia-smi and the versions command are bounded by
// their own timeout): run.json records the host either way. The function
// returned waits for run.json and says how the write went; nothing may
// touch run before it has returned.
func (s *Session) writeRunFirst(ctx context.Context, dir string, run *record.Run, firstServer <-chan struct{}, release func()) func() error {
	go func() {
		<-firstServer
		classify.Warm()
		// encoding/json builds a type's encoder on its first use: the
		// first result's append would wait 1-2 ms for it.
		_, _ = json.Marshal(record.Result{})
	}()
	done := make(chan error, 1)
	go func() {
		<-firstServer
		run.BMXVersion = s.version()
		run.Host = Fingerprint(context.WithoutCancel(ctx), s.cfg, s.opts.Self)
		if err := s.writeRun(dir, run); err != nil {
			done <- fmt.Errorf("write run.json: %w", err)
			return
		}
		done <- nil
	}()
	return sync.OnceValue(func() error {
		release()
		return <-done
	})
}

// newRun is run.json for a run that starts now.
func (s *Session) newRun(started time.Time) *record.Run {
	cfg, plan := s.cfg, s.stream
	run := &record.Run{
		Name: cfg.Name, Simulated: cfg.Path == matrix.BuiltinName,
		ConfigPath: cfg.Path, Config: cfg.RedactedSource(), Vars: s.secrets.Vars(cfg.Vars), ProbeSet: s.probes.Name,
		Cells: s.total, Started: started,
		Only: s.only, Reference: plan.Reference, Known: cfg.Known,
		Order: cfg.Order, Prune: s.prune, Dedupe: s.dedupe(),
	}
	if abs, err := filepath.Abs(cfg.Path); err == nil && cfg.Path != matrix.BuiltinName {
		run.ConfigPath = abs
	}
	for _, sl := range s.slots {
		run.Slots = append(run.Slots, sl.GPUs)
	}
	for _, a := range cfg.Axes {
		av := record.AxisValues{Name: a.Name}
		for _, v := range a.Values {
			av.Values = append(av.Values, a.Shown(v.Name))
		}
		run.Axes = append(run.Axes, av)
	}
	run.Excluded = []matrix.Cell{}
	if n := plan.ExcludedLen(); n > record.MaxListedExcluded {
		run.ExcludedCount = n
		return run
	}
	for c := range plan.Excluded() {
		run.Excluded = append(run.Excluded, s.secrets.Cell(c))
	}
	return run
}

// writeRun writes run.json with the run's secrets cut out of all of it.
func (s *Session) writeRun(dir string, run *record.Run) error {
	return record.WriteRun(dir, matrix.RedactAll(s.secrets, run))
}

// RunDirGone reports whether the run directory dir, or its results store,
// is no longer there (removed under the sweep).
func RunDirGone(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, record.ResultsFile))
	return errors.Is(err, fs.ErrNotExist)
}

// checkedStore is the run's results store, checked before each append to be
// still the file at its path: after the run directory is removed, appends to
// the open file would succeed and vanish with it.
type checkedStore struct {
	*record.Store
	path string
	info os.FileInfo
	// runWritten waits for run.json to be written and says how that went:
	// no result is recorded before run.json is.
	runWritten func() error
}

func openStore(dir string, runWritten func() error) (*checkedStore, error) {
	store, err := record.OpenStore(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, record.ResultsFile)
	info, err := os.Stat(path)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open results: %w", err)
	}
	return &checkedStore{Store: store, path: path, info: info, runWritten: runWritten}, nil
}

// Append records r unless the store's file is gone.
func (c *checkedStore) Append(r record.Result) error {
	if err := c.runWritten(); err != nil {
		return err
	}
	if now, err := os.Stat(c.path); err != nil || !os.SameFile(c.info, now) {
		return fmt.Errorf("record %s: %w (%s was removed or replaced)", r.Cell.ID, ErrStoreLost, c.path)
	}
	return c.Store.Append(r)
}
