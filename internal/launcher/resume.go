package launcher

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

// resume refuses a changed config unless forced, recovers the finished
// results and leaves out their cells.
func (s *Session) resume() error {
	if s.secrets.Text(s.cfg.RedactedSource()) != s.prev.Config || !maps.Equal(s.secrets.Vars(s.cfg.Vars), s.prev.Vars) {
		if !s.opts.Force {
			return configErrorf("--resume %s: the config (%s) or its vars changed since the run started; resume anyway with --force, or start a new sweep", s.opts.Resume, s.cfg.Path)
		}
		s.notes = append(s.notes, "resumed with --force after the config changed")
	}
	prior, torn, err := record.RecoverResults(s.opts.Resume)
	if err != nil {
		return err
	}
	if torn {
		s.notes = append(s.notes, "the last line of results.jsonl was torn (bmx was killed while writing it); that cell runs again")
	}
	again := 0
	s.prior = slices.DeleteFunc(prior, func(r record.Result) bool {
		if ownFailure(r) {
			again++
			return true
		}
		return r.Verdict == classify.Skipped || s.opts.Confirm && r.Verdict == classify.Predicted
	})
	if again > 0 {
		what := fmt.Sprintf("%d cells an older bmx recorded as crashes of its own failure to start their servers (out of file descriptors, its supervisor) run again", again)
		if again == 1 {
			what = "1 cell an older bmx recorded as a crash of its own failure to start its server (out of file descriptors, its supervisor) runs again"
		}
		s.notes = append(s.notes, what)
	}
	done := map[string]bool{}
	for _, r := range s.prior {
		done[r.Cell.ID] = true
	}
	if len(done) > 0 {
		s.cells = s.cells.keep(func(i int) bool { return !done[s.cells.id(i)] })
	}
	return nil
}

// ownFailure says whether r is a crash an older bmx recorded for its own
// failure to start the server (see HarnessError, which a bmx now returns
// instead): no file descriptor left for its supervisor or the server's log,
// its supervisor gone before the server started, an argument no process
// can take. Such a result says nothing of the backend, so a resume runs
// the cell again. The record holds only the error's text, so it is read
// by that, as bmx wrote it.
func ownFailure(r record.Result) bool {
	if r.Verdict != classify.Crash || r.Exit == nil || r.Exit.Code != 127 {
		return false
	}
	for _, p := range r.Problems {
		what, ok := strings.CutPrefix(p, "start server: ")
		if !ok {
			continue
		}
		for _, own := range []string{"supervisor pipe: ", "start supervisor: ", "supervisor ended before the server started", "supervisor: bad spec", "open the server's log: ", "too many open files", ": invalid argument"} {
			if strings.Contains(what, own) {
				return true
			}
		}
	}
	return false
}
