package launcher

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/launcher/sim"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/matrixtest/fakegpu"
)

// A fake multi-GPU host, on which slots_gpu_linux_test.go sweeps whole
// sessions, so that slots are checked through real processes as they run on
// a real one:
//
//   - nvidia-smi is package fakegpu's program (fakeGPUProgram), built once
//     for this test binary: a sweep calls it hundreds of times, each the
//     start of a small program instead of this 18 MB binary; it reports
//     FAKE_GPUS GPUs, each GPU's memory the sum of the allocations in its
//     own state file (gpuN.mem) whose holder is alive, as the driver frees
//     a process's memory when it dies, or that the driver is slow to
//     release (fakegpu.GPUUsed);
//   - a server is the simulated server in the "gpu-sim" mode: it "allocates"
//     fakegpu.ServerMiB on each GPU that its CUDA_VISIBLE_DEVICES names, and
//     appends its start and end, its CUDA_VISIBLE_DEVICES, {gpus}, {ngpus}
//     and --tp to a timeline (timeline.jsonl); a server that finds one of its
//     GPUs already holding memory when it starts records a conflict;
//   - FAKE_ROLE=leak starts a detached child (its own session, SIGTERM
//     ignored: the torch example's --detached-worker) that takes fakeLeakMiB
//     on the server's first GPU, which stays held after the child is gone:
//     for FAKE_HOLD, or until FAKE_HOLD_STARTS servers have started on other
//     GPUs since, if that comes first (so that a test sees the other slots
//     go on however slow the machine is, and a sweep that stopped them all
//     is seen after FAKE_HOLD);
//   - FAKE_ROLE=oom allocates, then dies of CUDA out-of-memory while the
//     other slots' servers are up;
//   - FAKE_BARRIER=N holds the first N servers until all N have started.

const (
	// fakeLeakMiB is what a leaky cell's detached child takes.
	fakeLeakMiB = fakegpu.LeakMiB
	// fakeGPUCount is how many GPUs the fake host has.
	fakeGPUCount = fakegpu.GPUCount
)

// gpuEvent is one line of the fake host's timeline.
type gpuEvent = fakegpu.Event

func readTime(path string, def time.Time) time.Time { return fakegpu.ReadTime(path, def) }

func processLives(pid int) bool { return fakegpu.ProcessLives(pid) }

func allocate(dir, g string, pid, mib int, linger time.Duration, starts int) error {
	return fakegpu.Allocate(dir, g, pid, mib, linger, starts)
}

// fakeGPU is the fake host's nvidia-smi, built on first use.
var fakeGPU struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// fakeGPUProgramEnv passes the program to a test's own process
// (runInOwnProcess).
const fakeGPUProgramEnv = "BMX_FAKEGPU_PROGRAM"

// fakeGPUProgram builds the fake host's nvidia-smi (fakegpu/cmd/fakesmi) once for this
// test binary, with the go command that runs the tests (go test puts its
// GOROOT/bin first in PATH), into a directory removed after the tests.
func fakeGPUProgram(t *testing.T) string {
	t.Helper()
	if path := os.Getenv(fakeGPUProgramEnv); path != "" {
		return path // built by the test process that started this one
	}
	fakeGPU.once.Do(func() {
		dir, err := os.MkdirTemp("", "bmx-fakegpu-")
		if err != nil {
			fakeGPU.err = err
			return
		}
		afterTests = append(afterTests, func() { os.RemoveAll(dir) })
		fakeGPU.path = filepath.Join(dir, "nvidia-smi")
		fakeGPU.out, fakeGPU.err = matrixtest.Build("github.com/bmx-dev/bmx/internal/matrixtest/fakegpu/cmd/fakesmi", fakeGPU.path)
	})
	if fakeGPU.err != nil {
		t.Fatalf("building the fake GPU host's program: %v\n%s", fakeGPU.err, fakeGPU.out)
	}
	return fakeGPU.path
}

// fakeGPUHelper runs the fake host's modes; 2 for a mode it does not know.
func fakeGPUHelper(mode string, args []string) int {
	switch mode {
	case "gpu-sim":
		return fakeGPUServer(args)
	case "gpu-hold":
		return fakeGPUHold()
	}
	return 2
}

// fakeGPUServer is a simulated server on the fake host's GPUs.
func fakeGPUServer(args []string) int {
	dir := os.Getenv("FAKE_GPU_DIR")
	ev := gpuEvent{PID: os.Getpid(), Marker: os.Getenv(server.MarkerEnv), CVD: os.Getenv("CUDA_VISIBLE_DEVICES"),
		GPUs: os.Getenv("SLOT_GPUS"), NGPUs: os.Getenv("SLOT_NGPUS")}
	for i, a := range args {
		if a == "--tp" && i+1 < len(args) {
			ev.TP = args[i+1]
		}
	}
	for _, g := range fakegpu.Visible() {
		if used := fakegpu.GPUUsed(dir, g); used > 0 {
			c := ev
			c.Kind, c.Detail = "conflict", fmt.Sprintf("GPU %s: %d MiB held at start", g, used)
			c.Write(dir)
		}
		if err := fakegpu.Allocate(dir, g, os.Getpid(), fakegpu.ServerMiB, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "CUDA_VISIBLE_DEVICES=%s: took %d MiB on GPU %s\n", ev.CVD, fakegpu.ServerMiB, strings.Join(fakegpu.Visible(), ", "))
	ev.Kind = "start"
	ev.Write(dir)
	end := func() { ev.Kind = "end"; ev.Write(dir) }
	if n, _ := strconv.Atoi(os.Getenv("FAKE_BARRIER")); n > 0 {
		if _, started := fakegpu.CountTimeline(dir); started <= n {
			fakegpu.AwaitTimeline(dir, 10*time.Second, func(_, started int) bool { return started >= n })
		}
	}
	switch os.Getenv("FAKE_ROLE") {
	case "oom":
		fakegpu.AwaitTimeline(dir, 20*time.Second, func(up, _ int) bool { return up > 1 })
		fmt.Fprintf(os.Stderr, "Traceback (most recent call last):\n  File \"server.py\", line 1, in <module>\n"+
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 160.00 GiB. GPU %s has a total capacity of 139.81 GiB\n", fakegpu.Visible()[0])
		end()
		return 1
	case "leak":
		if err := startGPUHold(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			end()
			return 1
		}
	}
	code := sim.Main(args, os.Stdout, os.Stderr)
	end()
	return code
}

// startGPUHold starts the leaky cell's detached child and waits until it
// holds its memory.
func startGPUHold() error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=gpu-hold")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("detached worker %d: %w", cmd.Process.Pid, err)
	}
	fmt.Fprintf(os.Stderr, "detached worker pid %d (own session): %s", cmd.Process.Pid, line)
	return nil
}

// fakeGPUHold is the detached child: it takes fakeLeakMiB on the first
// visible GPU, which stays held after its death for FAKE_HOLD or until
// FAKE_HOLD_STARTS servers have started on other GPUs; it ignores SIGTERM
// and waits to be killed.
func fakeGPUHold() int {
	signal.Ignore(syscall.SIGTERM)
	dir := os.Getenv("FAKE_GPU_DIR")
	hold, err := time.ParseDuration(os.Getenv("FAKE_HOLD"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAKE_HOLD:", err)
		return 1
	}
	g := fakegpu.Visible()[0]
	ev := gpuEvent{Kind: "hold", PID: os.Getpid(), Marker: os.Getenv(server.MarkerEnv), CVD: g, Linger: int64(hold)}
	starts, _ := strconv.Atoi(os.Getenv("FAKE_HOLD_STARTS"))
	if err := fakegpu.Allocate(dir, g, os.Getpid(), fakeLeakMiB, hold, starts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev.Write(dir)
	fmt.Printf("holds %d MiB on GPU %s\n", fakeLeakMiB, g)
	time.Sleep(time.Hour)
	return 0
}
