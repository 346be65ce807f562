//go:build linux

package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestRunJSONBesideFirstServer: run.json is there before the first server
// starts (the run directory is a run from its start), the host's
// fingerprint (here a versions command that takes 300 ms, as nvidia-smi and
// pip do) is taken once the first server has started, not before it, and
// run.json then holds it and bmx's version.
func TestRunJSONBesideFirstServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	at := filepath.Join(dir, "versions.at")
	// The server says whether its run's run.json is there as it starts
	// (its marker names the run directory); the words are split in the
	// command line, which the log's header holds too.
	srv := simServer()
	srv.Command = append([]string{"sh", "-c", `d=${BMX_MARKER%%//*}; test -s "$d/run.json" && echo "run.json was"' there' >&2; exec "$0" "$@"`}, srv.Command...)
	cfg := matrixtest.Config{Name: "fingerprint", Server: srv, Axes: []matrixtest.Axis{
		{Name: "moe_runner", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass"}},
		{Name: "fp4_gemm", Flag: "--fp4-gemm-backend", Values: []string{"flashinfer_cudnn", "flashinfer_cutlass"}},
	}, Tail: "[probes]\nfile = \"probes.toml\"\n"}.String() // lightProbes: what is read here is run.json
	matrixtest.WriteFile(t, filepath.Join(dir, "probes.toml"), lightProbes)
	cfg = strings.Replace(cfg, "[server]\n", `[server]
versions_command = ["sh", "-c", "date +%s%N > `+at+`; sleep 0.3; echo torch=2.12.0"]
`, 1)
	path := filepath.Join(dir, "m.toml")
	matrixtest.WriteFile(t, path, cfg)
	s := newTestSession(t, path)
	s.Version = func() string { return "v9.9.9-test" }
	out := s.mustRun(t)
	run, err := record.ReadRun(out.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if run.BMXVersion != "v9.9.9-test" || run.Host.Versions["torch"] != "2.12.0" || run.Host.Hostname == "" {
		t.Errorf("run.json: version %q, host %+v", run.BMXVersion, run.Host)
	}
	data, err := os.ReadFile(at)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	first := out.Report.Results[0].Started
	for _, r := range out.Report.Results {
		if r.Started.Before(first) {
			first = r.Started
		}
	}
	if versions := time.Unix(0, ns); versions.Before(first) {
		t.Errorf("the versions command ran at %s, before the first cell started at %s", versions.Format(time.StampMicro), first.Format(time.StampMicro))
	}
	if len(out.Report.Results) != 2 {
		t.Errorf("%d results, want 2", len(out.Report.Results))
	}
	for _, r := range out.Report.Results {
		if log, _ := os.ReadFile(r.LogPath); !strings.Contains(string(log), "run.json was there") {
			t.Errorf("%s's server started before run.json was written:\n%s", r.Cell.ID, log)
		}
	}
}

// TestNoResultBeforeRunJSON: the results store records nothing until
// run.json is written, and a run.json that could not be written is the
// store's error: the sweep stops as on any failure of its storage.
func TestNoResultBeforeRunJSON(t *testing.T) {
	t.Parallel()
	for _, werr := range []error{nil, errors.New("write run.json: no space left on device")} {
		dir := t.TempDir()
		release := make(chan struct{})
		store, err := openStore(dir, func() error { <-release; return werr })
		if err != nil {
			t.Fatal(err)
		}
		appended := make(chan error, 1)
		go func() { appended <- store.Append(record.Result{}) }()
		select {
		case err := <-appended:
			t.Fatalf("a result was appended (%v) before run.json was written", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		err = <-appended
		store.Close()
		data, _ := os.ReadFile(filepath.Join(dir, record.ResultsFile))
		switch {
		case werr == nil && (err != nil || len(data) == 0):
			t.Errorf("after run.json: append %v, results %q", err, data)
		case werr != nil && (!errors.Is(err, werr) || len(data) > 0):
			t.Errorf("run.json failed: append %v (want %v), results %q", err, werr, data)
		}
	}
}
