//go:build linux

// Command fakesmi is the fake multi-GPU host's nvidia-smi (package
// fakegpu): the host is the state files in FAKE_GPU_DIR, of FAKE_GPUS GPUs.
package main

import (
	"os"

	"github.com/bmx-dev/bmx/internal/matrixtest/fakegpu"
)

func main() { os.Exit(fakegpu.SMIMain(os.Getenv("FAKE_GPU_DIR"), os.Args[1:])) }
