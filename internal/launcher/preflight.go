package launcher

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// Preflight checks, before any server starts or any GPU is touched, what
// would otherwise fail every cell: the server executable, the model and the
// other paths the server is told to load (matrix.MissingPaths), the profile
// of bmx's simulated server (SimProfileErrors), placeholders
// that cannot be filled, a command without {port}, and the output directory.
// It returns one error per problem.
func Preflight(cfg *matrix.Config, cells []matrix.Cell, slots []matrix.Slot, self, out string) []error {
	return preflight(cfg, slices.Values(cells), slots, self, out)
}

// preflight is Preflight of cells built one at a time as they are checked.
func preflight(cfg *matrix.Config, cells iter.Seq[matrix.Cell], slots []matrix.Slot, self, out string) []error {
	errs := cfg.MissingPathsIn(cells)
	errs = append(errs, SimProfileErrors(cfg, self)...)
	if !slices.ContainsFunc(cfg.Server.Command, func(s string) bool { return strings.Contains(s, "{port}") }) {
		errs = append(errs, fmt.Errorf("%s: server.command has no {port}: bmx gives every cell a free port and must pass it to the server", cfg.Path))
	}
	slot := ""
	if len(slots) > 0 {
		slot = slots[0].GPUs
	}
	checked := map[string]bool{}
	rt := matrix.Runtime{Self: self, Port: 1, GPUs: slot}
	same := sameCommand(cfg, rt)
	for cell := range cells {
		argv, env := cfg.Command(cell, rt)
		if left := matrix.Unresolved(argv, env); len(left) > 0 {
			msg := fmt.Sprintf("%s: cell %s: %s cannot be filled in", cfg.Path, cell.ID, strings.Join(left, ", "))
			if slices.Contains(left, "{gpus}") || slices.Contains(left, "{ngpus}") {
				msg += " ({gpus} and {ngpus} need [[slot]] entries or --slots with visible GPUs)"
			}
			errs = append(errs, fmt.Errorf("%s", msg))
			continue
		}
		if checked[argv[0]] {
			continue
		}
		checked[argv[0]] = true
		if _, err := exec.LookPath(argv[0]); err != nil {
			errs = append(errs, fmt.Errorf("server executable %q: %w", argv[0], unwrapExec(err)))
		}
		if same {
			break // every other cell checks the same
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		errs = append(errs, fmt.Errorf("output directory %s: %w", out, err))
	} else if f, err := os.CreateTemp(out, ".bmx-write-test-*"); errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// bmx's own lack (ulimit -n), not the directory's: see
		// server.HarnessError.
		errs = append(errs, &server.HarnessError{Err: fmt.Errorf("output directory %s: %w", out, err)})
	} else if err != nil {
		errs = append(errs, fmt.Errorf("output directory %s is not writable: %w", out, err))
	} else {
		f.Close()
		os.Remove(f.Name())
	}
	return errs
}

// sameCommand reports whether every cell's command line checks as any
// other's: server.command and server.env fill in whole under rt, and no
// string a cell adds (an axis value, its args and env, an include's) holds a
// "{", so no cell has a placeholder left and all run the same program.
// Preflight then checks one cell for all: rendering each of 10^6 cells
// took seconds before the first could start.
func sameCommand(cfg *matrix.Config, rt matrix.Runtime) bool {
	argv, env := cfg.Command(matrix.Cell{}, rt)
	if len(argv) == 0 || len(matrix.Unresolved(argv, env)) > 0 {
		return false
	}
	braces := func(ss ...[]string) bool {
		return slices.ContainsFunc(slices.Concat(ss...), func(s string) bool { return strings.Contains(s, "{") })
	}
	for _, a := range cfg.Axes {
		if braces([]string{a.Flag, a.Env}) {
			return false
		}
		for _, v := range a.Values {
			if braces([]string{v.Name}, v.Args, slices.Collect(maps.Keys(v.Env)), slices.Collect(maps.Values(v.Env))) {
				return false
			}
		}
	}
	for _, inc := range cfg.Include {
		if braces(slices.Collect(maps.Values(inc.Values)), inc.Args, slices.Collect(maps.Keys(inc.Env)), slices.Collect(maps.Values(inc.Env))) {
			return false
		}
	}
	return true
}

// unwrapExec drops exec's "exec: \"x\": " prefix, which the caller names.
func unwrapExec(err error) error {
	if ee, ok := err.(*exec.Error); ok {
		return ee.Err
	}
	return err
}

// ShapeOnly names the chat probes of set that can only be judged by the
// shape of their text (non-empty, not garbage): a sampled probe with no
// expect, and, when the sweep has no reference cell (reference ""), any chat
// probe with no expect, since there is no answer to compare it with. One
// line per probe, for `bmx plan` to warn about: such a probe cannot tell a
// wrong answer from a right one.
func ShapeOnly(set probe.Set, reference string) []string {
	var out []string
	for _, p := range set.Probes {
		if p.Kind != evidence.Chat || slices.ContainsFunc(p.Requests, func(r probe.Request) bool { return r.Expect != nil }) {
			continue
		}
		switch {
		case p.Temperature != nil && *p.Temperature > 0:
			out = append(out, fmt.Sprintf("probe %s is sampled (temperature %g) and has no expect: it is judged by the shape of its text only", p.Name, *p.Temperature))
		case reference == "":
			out = append(out, fmt.Sprintf("probe %s has no expect and the config no reference cell: it is judged by the shape of its text only", p.Name))
		}
	}
	return out
}
