package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
)

// nineVersions are the simulated versions the bisect tests walk.
const nineVersions = "sim_version=1,2,3,4,5,6,7,8,9"

// readBisect is the one bisect run directory under out and its bisect.json.
func readBisect(t *testing.T, out string) (string, *record.Bisect) {
	t.Helper()
	dir := runDir(t, out)
	b, err := record.ReadBisect(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// TestBisectBuiltin bisects the built-in simulated host through a real bmx
// process over nine versions: the working cell crashes from version 6 on,
// the CuTe DSL pair decodes five times slower from 5 on (--perf). Each
// takes at most five cell runs (2 ends + log2(8)), every visited result is
// in the one run directory, and bmx report renders it.
func TestBisectBuiltin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cell string
		perf       bool
		lastGood   string
		firstBad   string
		text       string
	}{
		{"verdict", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", false, "5", "6",
			"crash (CUDA error: an illegal memory access was encountered) from 6 on; 5 correct"},
		{"perf", "moe_runner=flashinfer_cutedsl,fp4_gemm=flashinfer_cutedsl", true, "4", "5", "tok/s per request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "runs")
			args := []string{"bisect", "--cell", tc.cell, "--along", nineVersions, "--out", out}
			if tc.perf {
				args = append(args, "--perf")
			}
			code, stdout, stderr := runBMX(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			dir, b := readBisect(t, out)
			f := b.Finding
			if !b.Done || f == nil || f.LastGood != tc.lastGood || f.FirstBad != tc.firstBad || len(f.Candidates) > 0 {
				t.Fatalf("finding %+v, want last good %s, first bad %s\n%s", f, tc.lastGood, tc.firstBad, stdout)
			}
			if !strings.Contains(f.Text, tc.text) || !strings.Contains(stdout, f.Text) {
				t.Errorf("finding %q, want it to say %q, and stdout to hold it:\n%s", f.Text, tc.text, stdout)
			}
			if b.Runs > 5 || countLines(filepath.Join(dir, record.ResultsFile)) != b.Runs {
				t.Errorf("%d cell runs (%d results), want at most 5, each recorded", b.Runs, countLines(filepath.Join(dir, record.ResultsFile)))
			}
			if !strings.Contains(stdout, "first bad: sim_version="+tc.firstBad) || !strings.Contains(stdout, "cell runs") {
				t.Errorf("stdout:\n%s", stdout)
			}
			code, rep, stderr := runBMX(t, "report", dir)
			if code != 0 || !strings.Contains(rep, "sim_version") {
				t.Errorf("bmx report of the bisect: exit %d\n%s\n%s", code, rep, stderr)
			}
		})
	}
}

// TestBisectSkip bisects a config whose environment at version 5 does not
// start (its profile file is missing): the step is run twice, then
// skipped, and the finding names the values the first bad one is among.
func TestBisectSkip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	profile := "name = \"v\"\n[[rule]]\nwhen = {}\nsince = 6\nbehaviour = \"crash\"\nerror = \"RuntimeError: broken from 6\"\n"
	for _, v := range []string{"1", "2", "3", "4", "6", "7", "8", "9"} {
		if err := os.WriteFile(filepath.Join(dir, v+".toml"), []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := matrixtest.Config{Name: "skip", Vars: map[string]string{"sim_version": "1"},
		Server: matrixtest.Server{Command: []string{"{self}", "sim-server", "--model-path", "m", "--port", "{port}",
			"--sim-profile", "{dir}/{sim_version}.toml", "--sim-version", "{sim_version}"}, ReadyTimeout: "10s"},
		Axes: []matrixtest.Axis{{Name: "moe", Flag: "--moe-runner-backend", Values: []string{"flashinfer_cutlass"}}},
	}.Write(t, filepath.Join(dir, "m.toml"))
	out := filepath.Join(dir, "runs")
	code, stdout, stderr := runBMX(t, "bisect", "-c", cfg, "--cell", "moe=flashinfer_cutlass", "--along", nineVersions, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	_, b := readBisect(t, out)
	f := b.Finding
	if f == nil || f.LastGood != "4" || f.FirstBad != "6" || strings.Join(f.Skipped, ",") != "5" || strings.Join(f.Candidates, ",") != "5,6" {
		t.Fatalf("finding %+v, want 4 good, 6 bad, 5 skipped\n%s", f, stdout)
	}
	var sides []string
	for _, s := range b.Steps {
		if s.Value == "5" {
			sides = append(sides, s.Side)
		}
	}
	if strings.Join(sides, ",") != "retry,skip" || b.Runs != 7 {
		t.Errorf("version 5 steps %v, %d runs; want retry,skip in 7 runs\n%s", sides, b.Runs, stdout)
	}
	if !strings.Contains(stdout, "first bad: one of sim_version=5,6") || !strings.Contains(stdout, "did not start") {
		t.Errorf("stdout does not say the skip:\n%s", stdout)
	}
}

// TestBisectFlags checks the flags before anything runs: each error is one
// line naming the flag, exit 2.
func TestBisectFlags(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no cell", []string{"--along", nineVersions}, "--cell: required"},
		{"no along", []string{"--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn"}, "--along"},
		{"one value", []string{"--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", "sim_version=1"}, "--along sim_version: want at least two values"},
		{"twice", []string{"--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", "sim_version=1,2,1"}, "given twice"},
		{"no such var", []string{"--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", "torch=a,b"}, "--along torch=a"},
		{"half a cell", []string{"--cell", "moe_runner=flashinfer_cutlass", "--along", "sim_version=1,2"}, "--cell moe_runner=flashinfer_cutlass: no cell"},
		{"missing file", []string{"--cell", "moe_runner=flashinfer_cutlass,fp4_gemm=flashinfer_cudnn", "--along", "sim_version=@/nonexistent"}, "--along sim_version=@/nonexistent"},
		{"resume and cell", []string{"--resume", out, "--cell", "moe_runner=x"}, "--resume takes"},
		{"resume not a bisect", []string{"--resume", out}, "--resume " + out + ": not a bisect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := bmx(t, append([]string{"bisect", "--out", out}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || stdout != "" {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, stderr, tc.want)
			}
		})
	}
}

// TestBisectAlongFile reads --along's values from a file, one a line.
func TestBisectAlongFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "versions.txt")
	os.WriteFile(path, []byte("# nightlies\n1\n2\n\n3\n"), 0o644)
	name, values, err := parseAlong("sim_version=@" + path)
	if err != nil || name != "sim_version" || strings.Join(values, ",") != "1,2,3" {
		t.Errorf("parseAlong = %q %q %v", name, values, err)
	}
}
