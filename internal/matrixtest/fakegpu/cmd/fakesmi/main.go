//go:build linux

// Command fakesmi is the fake multi-GPU host's nvidia-smi (package
// fakegpu): the host is the state files in the directory of its first
// argument, --fake-dir=DIR (else FAKE_GPU_DIR), with the GPUs of
// --fake-gpus=N (else FAKE_GPUS); nvidia-smi's own arguments follow. A
// config so names them in its smi command, which then starts no env(1).
package main

import (
	"os"
	"strings"

	"github.com/bmx-dev/bmx/internal/matrixtest/fakegpu"
)

func main() {
	args := os.Args[1:]
	for len(args) > 0 {
		if v, ok := strings.CutPrefix(args[0], "--fake-dir="); ok {
			os.Setenv("FAKE_GPU_DIR", v)
		} else if v, ok := strings.CutPrefix(args[0], "--fake-gpus="); ok {
			os.Setenv("FAKE_GPUS", v)
		} else {
			break
		}
		args = args[1:]
	}
	os.Exit(fakegpu.SMIMain(os.Getenv("FAKE_GPU_DIR"), args))
}
