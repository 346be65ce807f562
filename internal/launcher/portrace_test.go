//go:build linux

package launcher

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestPortTakenStartsAgain: a server that finds its port taken by another
// process (the race between bmx finding the port free and the server
// binding it, which two sweeps on one host can lose) is started again on
// another port, and its verdict is the backend's: correct, with a problem
// that says so. A port taken at every start stays a crash after the
// retries, each one noted. One cell run alone (RunCell, as bmx bisect runs
// its steps) starts again the same way.
func TestPortTakenStartsAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	matrixtest.Profile{Name: "fast", Startup: "50ms"}.Write(t, filepath.Join(dir, "fast.toml"))
	cfg := matrixtest.Config{
		Name: "ports", Head: `order = "file"`,
		Server: matrixtest.Server{
			Command:      matrixtest.Sim("--sim-profile", "{dir}/fast.toml"),
			Env:          map[string]string{"BMX_LAUNCHER_HELPER": "port-taken", "STEAL_DIR": dir},
			ReadyTimeout: "20s", StopGrace: "2s",
		},
		// lightProbes: what is read is how each cell's starts end.
		Tail: "[[axis]]\nname = \"steal\"\nenv = \"STEAL\"\nvalues = [\"never\", \"once\", \"always\"]\n[probes]\nfile = \"probes.toml\"\n",
	}.Write(t, filepath.Join(dir, "ports.toml"))
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), lightProbes)
	s := newTestSession(t, cfg)
	s.KeepGoing = true
	rep := s.mustRun(t).Report
	got := byCell(rep)
	if r := got["steal=never"]; r.Verdict != classify.Correct || len(r.Problems) > 0 {
		t.Errorf("steal=never: %s (%s), problems %q", r.Verdict, r.Reason, r.Problems)
	}
	once := got["steal=once"]
	if once.Verdict != classify.Correct || len(once.Problems) != 1 || !strings.Contains(once.Problems[0], "the port was taken before the server bound it") {
		t.Errorf("steal=once: %s (%s), problems %q; want correct, started again once", once.Verdict, once.Reason, once.Problems)
	}
	always := got["steal=always"]
	if always.Verdict != classify.Crash || len(always.Problems) < portRaceRetries || !strings.Contains(always.Reason+always.Signature, "address already in use") {
		t.Errorf("steal=always: %s (%s, %s), problems %q; want a crash on the taken port after %d more starts",
			always.Verdict, always.Reason, always.Signature, always.Problems, portRaceRetries)
	}

	// The same race for one cell run alone.
	one, cells := newSweep(t, matrixtest.Config{
		Server: matrixtest.Server{
			Command:      matrixtest.Sim("--sim-profile", filepath.Join(dir, "fast.toml")),
			Env:          map[string]string{"BMX_LAUNCHER_HELPER": "port-taken", "STEAL_DIR": t.TempDir()},
			ReadyTimeout: "20s", StopGrace: "2s",
		},
		Tail: "[[axis]]\nname = \"steal\"\nenv = \"STEAL\"\nvalues = [\"once\"]\n",
	}.String())
	one.Probes = probe.Set{Probes: probe.Smoke().Probes[:2]}
	r, err := one.RunCell(context.Background(), "", cells[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != classify.Correct || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "the port was taken before the server bound it") {
		t.Errorf("RunCell, port taken once: %s (%s), problems %q; want correct, started again once", r.Verdict, r.Reason, r.Problems)
	}
}
