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

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// acrossConfig writes the config of a simulated host (gpu "": no
// nvidia-smi) and returns its path. Its axis holds two of AcrossProfile's
// three backends, the flip's and the flake's (the third's perf drop comes
// at version 10): two cells, so a run has an agreement among cells.
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
	profile := write("profile.toml", matrixtest.AcrossProfile)
	write("probes.toml", matrixtest.LightProbes)
	smi := ""
	if gpu != "" {
		script := write("smi.sh", "GPU_NAME='"+gpu+"'\n"+matrixtest.FakeSMI)
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
values = ["flashinfer_cutlass", "flashinfer_cutedsl"]
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
