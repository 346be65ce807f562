//go:build linux

package launcher

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestSessionUsageStop: a first cell whose server refuses a fixed part of its
// command line (a mistyped flag, a file it names that is not there) stops
// the session as a broken setup after that one server start, quoting the
// server's error; a value of an axis the server refuses is that cell's
// crash, and the sweep goes on.
func TestSessionUsageStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fixed []string
		line  string
	}{
		{"fixed flag mistyped", []string{"--reasoning-parsr", "qwen3"}, "sglang serve: error: unrecognized arguments: --reasoning-parsr qwen3"},
		{"file missing", []string{"--sim-profile", "nope.toml"}, "sglang serve: error: argument --sim-profile: can't open 'nope.toml': [Errno 2] No such file or directory: 'nope.toml'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := simServer()
			srv.Command = inDir(append(matrixtest.Sim("--reasoning-parser", "qwen3"), tc.fixed...)...)
			s := newTestSession(t, writeConfig(t, matrixtest.Config{Name: "usage", Server: srv, Axes: sm120Axes()}))
			out, err := s.run(context.Background())
			var setup *SetupError
			if !errors.As(err, &setup) || out == nil {
				t.Fatalf("err %v, want a *SetupError\nlog:\n%s", err, s.log)
			}
			if setup.Cause != classify.SetupUsage || setup.Line != tc.line {
				t.Errorf("cause %q line %q, want %q %q", setup.Cause, setup.Line, classify.SetupUsage, tc.line)
			}
			logs, _ := filepath.Glob(filepath.Join(out.Dir, "logs", "*.log"))
			if n := len(readResults(t, out.Dir)); n != 1 || len(logs) != 1 {
				t.Errorf("%d results, %d server logs: want the first cell's only", n, len(logs))
			}
		})
	}
	t.Run("axis value refused", func(t *testing.T) {
		t.Parallel()
		axes := sm120Axes()
		axes[0].Values = []string{"flashinfer_cutlas", "flashinfer_cutlass"}
		axes[1].Values = axes[1].Values[:1]
		out := newTestSession(t, writeLightConfig(t, matrixtest.Config{Name: "usage", Server: simServer(), Axes: axes})).mustRun(t)
		results := readResults(t, out.Dir)
		if len(results) != 2 || results[0].Verdict != classify.Crash || !strings.Contains(results[0].Signature, "invalid choice: 'flashinfer_cutlas'") {
			t.Fatalf("results %+v", results)
		}
		if results[1].Verdict != classify.Correct {
			t.Errorf("%s: %s, want correct", results[1].Cell.ID, results[1].Verdict)
		}
	})
}
