package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/record"
)

// acrossProfile is the simulated host the history and publish tests sweep
// at many versions: moe_runner flashinfer_cutlass crashes from version 7
// on (a flip), flashinfer_cutedsl answers garbage at versions 3, 5 and 9
// only (a flake), flashinfer_trtllm decodes five times slower from
// version 10 on (a perf drop).
const acrossProfile = `name = "across"
startup = "100ms"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutlass" }
since = 7
behaviour = "crash"
error = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 3
before = 4
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 5
before = 6
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 9
before = 10
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
since = 10
behaviour = "correct"
speed = { token_latency = "5ms" }
`

// lightProbes is a probe file for the tests that sweep many runs to read
// them across (history, publish): two greedy probes tell correct from
// garbage and crash, and the performance probe at concurrency 1 only (the
// level history and publish compare) sees a fivefold slowdown; its default
// 64 tokens keep a loaded host's TTFT noise under the 10% a shift must
// pass (16 tokens did not: a 16% "improvement" under load). The smoke set
// would cost several times the time a sweep.
const lightProbes = `[[probe]]
name = "say-ok"
prompt = "Say 'OK'"
max_tokens = 32
logprobs = true
expect = { contains = "OK" }

[[probe]]
name = "math"
prompt = "What is 300+23?"
max_tokens = 64
logprobs = true
expect = { number = 323 }

[perf]
concurrency = 1
`

// fakeSMI is an nvidia-smi that reports one GPU named by its first
// argument, so two configs are two simulated hosts.
const fakeSMI = `q=""
for a in "$@"; do case "$a" in --query-gpu=*) q="${a#--query-gpu=}";; esac; done
if [ -z "$q" ]; then echo "NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0"; exit 0; fi
out=""
IFS=,
for f in $q; do
  case "$f" in index) v=0;; name) v="$GPU_NAME";; compute_cap) v=9.0;; driver_version) v=580.00;; memory.total) v=143771;; memory.used) v=0;; *) v="[N/A]";; esac
  out="${out:+$out, }$v"
done
echo "$out"
`

// acrossConfig writes the config of a simulated host (gpu "": no
// nvidia-smi) and returns its path.
func acrossConfig(t *testing.T, dir, name, gpu string) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	write := func(file, text string) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	profile := write("profile.toml", acrossProfile)
	write("probes.toml", lightProbes)
	smi := ""
	if gpu != "" {
		script := write("smi.sh", "GPU_NAME='"+gpu+"'\n"+fakeSMI)
		smi = fmt.Sprintf("[gpu]\nsmi = [\"/bin/sh\", %q]\n", script)
	}
	return write(name+".toml", fmt.Sprintf(`name = %q
[vars]
sim_version = "1"
[server]
command = ["{self}", "sim-server", "--model-path", "m", "--host", "{host}", "--port", "{port}", "--sim-profile", %q, "--sim-version", "{sim_version}"]
versions_command = ["{self}", "sim-server", "--print-versions", "--sim-version", "{sim_version}"]
ready_timeout = "10s"
[probes]
file = "probes.toml"
%s
[[axis]]
name = "moe_runner"
flag = "--moe-runner-backend"
values = ["flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm"]
`, name, profile, smi))
}

// sweepLanes is how many of sweepVersions' sweeps run at once. Each sweep
// mostly waits on its servers, so three overlap well on two CPUs.
const sweepLanes = 3

// sweepVersions sweeps cfg once per version through real bmx processes into
// out and returns the run directories, oldest first. Sweeps overlap, up to
// sweepLanes at once, but each starts only once the one before has written
// its run.json, so the runs' start times keep the versions' order.
func sweepVersions(t *testing.T, cfg, out string, versions []int) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, len(versions))
	failed := make([]string, len(versions))
	lanes := make(chan struct{}, sweepLanes)
	var wg sync.WaitGroup
	for i, v := range versions {
		lanes <- struct{}{}
		before, _ := filepath.Glob(filepath.Join(out, "*"))
		cmd := exec.Command(self, "sweep", "-q", "-c", cfg, "--out", out, "--var", fmt.Sprintf("sim_version=%d", v))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				failed[i] = fmt.Sprintf("sweep at version %d: %v\n%s\n%s", v, err, &stdout, &stderr)
			}
			close(exited)
			<-lanes
		})
		dirs[i] = newRunDir(out, before, exited)
	}
	wg.Wait()
	for i, f := range failed {
		if f == "" && dirs[i] == "" {
			f = fmt.Sprintf("sweep at version %d wrote no run.json under %s", versions[i], out)
		}
		if f != "" {
			t.Fatal(f)
		}
	}
	return dirs
}

// newRunDir waits for a directory under out that is not in before and holds
// a run.json, and returns it; "" when the sweep exited without one.
func newRunDir(out string, before []string, exited <-chan struct{}) string {
	for {
		done := false
		select {
		case <-exited:
			done = true
		case <-time.After(5 * time.Millisecond):
		}
		after, _ := filepath.Glob(filepath.Join(out, "*", record.RunFile))
		for _, f := range after {
			if d := filepath.Dir(f); !contains(before, d) {
				return d
			}
		}
		if done {
			return ""
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// linesWith are the lines of text that contain s, joined.
func linesWith(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
