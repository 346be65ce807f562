package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bmx-dev/bmx/internal/launcher"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// TestSweepFlags: each flag of bmx sweep reaches the session it asks for;
// what the session does with it is launcher's to test (launcher's
// TestSession*).
func TestSweepFlags(t *testing.T) {
	t.Parallel()
	defaults := launcher.SessionOptions{Out: defaultOut, MaxCells: matrix.DefaultMaxCells}
	with := func(f func(o *launcher.SessionOptions)) launcher.SessionOptions {
		o := defaults
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		args []string
		want launcher.SessionOptions
	}{
		{"defaults", nil, defaults},
		{"config", []string{"-c", "m.toml", "--var", "model=/m", "--var", "tp=4", "--only", "a=x", "--only", "b=y", "--max-cells", "9", "--out", "elsewhere"},
			with(func(o *launcher.SessionOptions) {
				o.Config, o.Vars, o.Only, o.MaxCells, o.Out = "m.toml", map[string]string{"model": "/m", "tp": "4"}, []string{"a=x", "b=y"}, 9, "elsewhere"
			})},
		{"resume", []string{"--resume", "runs/r", "--force"}, with(func(o *launcher.SessionOptions) { o.Resume, o.Force = "runs/r", true })},
		{"slots", []string{"--slots", "2"}, with(func(o *launcher.SessionOptions) { o.Slots = 2 })},
		{"shard", []string{"--shard", "1/4"}, with(func(o *launcher.SessionOptions) { o.Shard = matrix.Shard{Index: 1, Count: 4} })},
		{"order and prune", []string{"--order", "file", "--prune", "--prune-after", "3"},
			with(func(o *launcher.SessionOptions) { o.Order, o.Prune, o.PruneAfter = "file", true, 3 })},
		{"confirm", []string{"--resume", "runs/r", "--confirm"}, with(func(o *launcher.SessionOptions) { o.Resume, o.Confirm = "runs/r", true })},
		{"baseline", []string{"--baseline", "runs/b"}, with(func(o *launcher.SessionOptions) { o.Baseline = "runs/b" })},
		{"keep going", []string{"--keep-going"}, with(func(o *launcher.SessionOptions) { o.KeepGoing = true })},
		{"dedupe", []string{"--dedupe"}, with(func(o *launcher.SessionOptions) { o.Dedupe = true })},
		{"quiet", []string{"-q"}, defaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errb bytes.Buffer
			io := iostreams{Out: &bytes.Buffer{}, Err: &errb}
			var got launcher.SessionOptions
			cmd := newSweepCmd(io, func(_ context.Context, opts *sweepOptions) error {
				var err error
				got, err = sessionOptions(opts, io)
				return err
			})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&errb)
			cmd.SetErr(&errb)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%v\n%s", err, errb.String())
			}
			// What the CLI always hands the session: itself for {self},
			// its version, a log on stderr, the report files and the
			// blame table; progress unless -q.
			if got.Self == "" || got.Version == nil || got.Log == nil || got.WriteReports == nil || got.Blamed == nil {
				t.Errorf("the session lacks what the CLI gives every session: %+v", got)
			}
			got.Log.Print("resuming runs/r: 2 cells done, 2 to run")
			if !bytes.Contains(errb.Bytes(), []byte("bmx: resuming runs/r: 2 cells done, 2 to run\n")) {
				t.Errorf("the session's log does not go to stderr as bmx's: %q", errb.String())
			}
			if quiet := len(tc.args) > 0 && tc.args[0] == "-q"; (got.Progress == nil) != quiet {
				t.Errorf("progress %v with args %q", got.Progress, tc.args)
			}
			ignore := cmpopts.IgnoreFields(launcher.SessionOptions{}, "Self", "Version", "Log", "Progress", "WriteReports", "Blamed")
			if d := cmp.Diff(tc.want, got, ignore, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("session options (-want +got):\n%s", d)
			}
		})
	}
}
