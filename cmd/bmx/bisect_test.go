package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nineVersions are the simulated versions the bisect tests walk.
const nineVersions = "sim_version=1,2,3,4,5,6,7,8,9"

// How a bisect steps (its ends, halving, a retry then a skip, perf
// bisects, resuming by reading recorded steps) is launcher/bisect's
// TestStepping, TestSteppingSkip and TestSteppingResume, on the results
// real bisects recorded; here is the bmx bisect command: its flags, and
// (bisect_linux_test.go) one small real bisect, interrupted and resumed.

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
