package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestVirtualMemoryLimit runs real bmx processes under `ulimit -v` with
// none of MALLOC_ARENA_MAX set: bmx sets what it needs itself. A plan of
// 2 cells under 1.5 GB (6 of 6 died in a Go crash dump before, and 7 of
// 10 on this machine), under 1.3 GB (where the Go runtime's own
// reservations left too little, also for a bmx built without cgo), a sweep
// of 2 simulated cells under 1.5 GB that judges them as without a limit;
// and under a limit too low to run, one line that names it.
func TestVirtualMemoryLimit(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The sim on the SM120 profile's faster clock (a start-up of 50 ms,
	// not 700): the same verdicts.
	prof := matrixtest.WriteFile(t, filepath.Join(dir, "sm120.toml"), matrixtest.SM120(t, "50ms"))
	cfg := filepath.Join(dir, "two.toml")
	if err := os.WriteFile(cfg, []byte(`name = "two"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}", "--sim-profile", `+strconv.Quote(prof)+`]
ready_timeout = "20s"
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutedsl"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") && !strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			env = append(env, kv)
		}
	}
	underLimit := func(kib int, args ...string) (code int, stdout, stderr string, err error) {
		cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, kib), self}, args...)...)
		cmd.Env = append(env, asBMX+"=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				return 0, "", "", err
			}
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String(), nil
	}
	// The plans (3 tries at each limit) run at once: each is its own
	// process under its own limit.
	var wg sync.WaitGroup
	fails := make([]string, 6)
	for i, kib := range []int{1500000, 1500000, 1500000, 1300000, 1300000, 1300000} {
		wg.Go(func() {
			code, stdout, stderr, err := underLimit(kib, "plan", "-c", cfg)
			if err != nil || code != ExitOK || !strings.HasPrefix(stdout, "two: 2 cells") {
				fails[i] = fmt.Sprintf("plan under ulimit -v %d (try %d): %v, exit %d\n%s\n%s", kib, i%3+1, err, code, stdout, tail(stderr, 1500))
			}
		})
	}
	wg.Wait()
	for _, f := range fails {
		if f != "" {
			t.Fatal(f)
		}
	}

	out := filepath.Join(dir, "runs")
	if code, stdout, stderr, err := underLimit(1500000, "sweep", "-q", "-c", cfg, "--out", out); err != nil || code != ExitOK {
		t.Fatalf("sweep under ulimit -v 1500000: %v, exit %d\n%s\n%s", err, code, stdout, tail(stderr, 1500))
	}
	line, err := os.ReadFile(filepath.Join(runDir(t, out), record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]classify.Verdict{}
	for _, l := range bytes.Split(bytes.TrimSpace(line), []byte("\n")) {
		var r record.Result
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		got[r.Cell.ID] = r.Verdict
	}
	if got["moe_runner=flashinfer_cutlass"] != classify.Correct || got["moe_runner=flashinfer_cutedsl"] != classify.Garbage || len(got) != 2 {
		t.Errorf("verdicts under ulimit -v 1500000: %v, want flashinfer_cutlass correct and flashinfer_cutedsl garbage", got)
	}

	code, stdout, stderr, err := underLimit(1000000, "plan", "-c", cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := "bmx: the virtual-memory limit (ulimit -v 1000000, 976 MiB) is below the 1024 MiB bmx needs"
	if code != ExitInfra || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("plan under ulimit -v 1000000: exit %d, stdout %q, stderr:\n%s\nwant exit %d and one line %q...", code, stdout, tail(stderr, 1500), ExitInfra, want)
	}
}
