package across

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// publishHosts are the simulated hosts publishRuns sweeps: each an
// nvidia-smi of its own GPU, swept at its versions of the simulated
// server (matrixtest.AcrossProfile says what each version does).
var publishHosts = []struct {
	name, gpu string
	versions  []int
}{
	{"a", "NVIDIA H200 (simulated host A)", []int{1, 6, 8}},
	{"b", "NVIDIA RTX PRO 6000 Blackwell (simulated host B)", []int{2, 10}},
}

// simConfig is the config "pub" of a simulated host: the simulated server
// at {sim_version}, three MoE runners.
const simConfig = `name = "pub"
[vars]
sim_version = "1"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}", "--sim-profile", %q, "--sim-version", "{sim_version}"]
versions_command = ["{self}", "sim-server", "--print-versions", "--sim-version", "{sim_version}"]
ready_timeout = "10s"
[probes]
file = "probes.toml"
[gpu]
smi = ["/bin/sh", %q]
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm"]
`

// publishRuns builds bmx, sweeps each of publishHosts at its versions, one
// sweep after another (the runs' start times keep the versions' order),
// the hosts at once, and records the run directories under out/<host>,
// replacing what was there: what a run leaves beside its results for a
// reader (reports, summary) is left out and each log keeps its end.
func publishRuns(t *testing.T, out string) {
	t.Helper()
	work := t.TempDir()
	bmx := matrixtest.BuildBMX(t)
	var wg sync.WaitGroup
	runs := make([][]string, len(publishHosts))
	errs := make([]error, len(publishHosts))
	for i, h := range publishHosts {
		wg.Go(func() { runs[i], errs[i] = sweepHost(bmx, filepath.Join(work, h.name), h.gpu, h.versions) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	for i, h := range publishHosts {
		for _, r := range runs[i] {
			if err := matrixtest.RecordRun(r, filepath.Join(out, h.name, filepath.Base(r))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sweepHost writes the config of a simulated host with GPU gpu into dir
// and sweeps it once per version, in order, returning the run directories.
func sweepHost(bmx, dir, gpu string, versions []int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	profile, smi := filepath.Join(dir, "profile.toml"), filepath.Join(dir, "smi.sh")
	cfg := filepath.Join(dir, "pub.toml")
	for path, text := range map[string]string{profile: matrixtest.AcrossProfile, filepath.Join(dir, "probes.toml"): matrixtest.LightProbes,
		smi: "GPU_NAME='" + gpu + "'\n" + matrixtest.FakeSMI, cfg: fmt.Sprintf(simConfig, profile, smi)} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	out := filepath.Join(dir, "runs")
	var dirs []string
	for _, v := range versions {
		before, _ := filepath.Glob(filepath.Join(out, "*"))
		cmd := exec.Command(bmx, "sweep", "-q", "-c", cfg, "--out", out, "--var", fmt.Sprintf("sim_version=%d", v))
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("sweep of %s at version %d: %v\n%s", gpu, v, err, b)
		}
		after, _ := filepath.Glob(filepath.Join(out, "*"))
		for _, d := range after {
			if !slices.Contains(before, d) {
				dirs = append(dirs, d)
			}
		}
		if len(dirs) != len(before)+1 {
			return nil, fmt.Errorf("sweep of %s at version %d: %d new run directories under %s", gpu, v, len(after)-len(before), out)
		}
	}
	return dirs, nil
}
