package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/launcher/sim"
)

// A fake multi-GPU host, on which slots_gpu_linux_test.go sweeps whole
// sessions, so that slots are checked through real processes as they run on
// a real one:
//
//   - nvidia-smi is this test binary in its "fake-smi" mode: it reports
//     FAKE_GPUS GPUs, each GPU's memory the sum of the allocations in its own
//     state file (gpuN.mem) whose holder is alive, as the driver frees a
//     process's memory when it dies, or that the driver is slow to release
//     (below);
//   - a server is the simulated server in the "gpu-sim" mode: it "allocates"
//     fakeServerMiB on each GPU that its CUDA_VISIBLE_DEVICES names, and
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
	// fakeServerMiB is what a fake server takes on each GPU of its slot:
	// above the configs' busy_mib, so a GPU a server holds counts as held.
	fakeServerMiB = 4000
	// fakeLeakMiB is what a leaky cell's detached child takes.
	fakeLeakMiB = 9000
	// fakeReleaseFloor is how long at least a dead holder's memory stays
	// held when it is released by starts elsewhere (gpuUsed).
	fakeReleaseFloor = time.Second
	// fakeGPUCount is how many GPUs the fake host has.
	fakeGPUCount = 4
)

// gpuEvent is one line of the fake host's timeline.
type gpuEvent struct {
	// Kind is start or end (a server), hold (a leaky cell's child took its
	// memory), or conflict (a server found memory held on its GPU).
	Kind   string `json:"kind"`
	At     int64  `json:"at"` // Unix nanoseconds
	PID    int    `json:"pid"`
	Marker string `json:"marker"`
	CVD    string `json:"cvd"`
	GPUs   string `json:"gpus"`
	NGPUs  string `json:"ngpus"`
	TP     string `json:"tp"`
	// Linger is how long at most a hold's memory stays after its process
	// died (nanoseconds).
	Linger int64  `json:"linger,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// cell is the cell ID in the event's marker (run//cell#attempt).
func (e gpuEvent) cell() string {
	_, rest, _ := strings.Cut(e.Marker, "//")
	if i := strings.LastIndex(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func (e gpuEvent) at() time.Time { return time.Unix(0, e.At) }

// fakeGPUHelper runs the fake host's modes; 2 for a mode it does not know.
func fakeGPUHelper(mode string, args []string) int {
	switch mode {
	case "fake-smi":
		return fakeSMIMain(os.Getenv("FAKE_GPU_DIR"), os.Args[1:])
	case "gpu-sim":
		return fakeGPUServer(args)
	case "gpu-hold":
		return fakeGPUHold()
	}
	return 2
}

// fakeGPUs is the fake host's GPU indexes.
func fakeGPUs() []string {
	n, _ := strconv.Atoi(os.Getenv("FAKE_GPUS"))
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// fakeSMIMain answers nvidia-smi's --query-gpu with the fields asked for (the
// memory use from the state files) and its plain report otherwise.
func fakeSMIMain(dir string, args []string) int {
	var query string
	for _, a := range args {
		if q, ok := strings.CutPrefix(a, "--query-gpu="); ok {
			query = q
		}
	}
	if query == "" {
		fmt.Println("NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0   (fake, for bmx's tests)")
		for _, g := range fakeGPUs() {
			fmt.Printf("GPU %s: NVIDIA H200 (fake), %d MiB / 143771 MiB\n", g, gpuUsed(dir, g))
		}
		return 0
	}
	for _, g := range fakeGPUs() {
		var row []string
		for _, f := range strings.Split(query, ",") {
			v := "[N/A]"
			switch f {
			case "index":
				v = g
			case "name":
				v = "NVIDIA H200 (fake)"
			case "compute_cap":
				v = "9.0"
			case "driver_version":
				v = "580.00"
			case "memory.total":
				v = "143771"
			case "memory.used":
				v = strconv.Itoa(gpuUsed(dir, g))
			}
			row = append(row, v)
		}
		fmt.Println(strings.Join(row, ", "))
	}
	return 0
}

// gpuUsed is the memory the live allocations of GPU g add up to. A line of
// gpuN.mem is "pid MiB linger starts": it counts while pid lives and, as a
// driver slow to release it, for linger nanoseconds after the first look
// that found pid dead (recorded in dead.<pid>), or until starts servers
// have started on other GPUs since then (0: no such end) and at least
// fakeReleaseFloor has passed. The floor is what makes the leaky slot's own
// look after its teardown see the memory: the first look that finds pid
// dead may be another slot's, before a start of its own, and under load two
// cells started elsewhere before the leaky slot looked (a CI run). The first look
// that finds it released records when in released.<pid>.
func gpuUsed(dir, g string) int {
	f, err := os.Open(filepath.Join(dir, "gpu"+g+".mem"))
	if err != nil {
		return 0
	}
	defer f.Close()
	used := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var pid, mib, starts int
		var linger int64
		if _, err := fmt.Sscan(sc.Text(), &pid, &mib, &linger, &starts); err != nil {
			continue
		}
		if processLives(pid) {
			used += mib
			continue
		}
		if linger == 0 {
			continue
		}
		dead := firstLook(dir, "dead", pid)
		since := time.Since(dead)
		if since < time.Duration(linger) && (starts == 0 || since < fakeReleaseFloor || startsElsewhere(dir, g, dead) < starts) {
			used += mib
		} else {
			firstLook(dir, "released", pid)
		}
	}
	return used
}

// startsElsewhere is how many servers started after since on GPUs other
// than g.
func startsElsewhere(dir, g string, since time.Time) int {
	b, _ := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		var e gpuEvent
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "start" && e.at().After(since) &&
			!slices.Contains(strings.Split(e.CVD, ","), g) {
			n++
		}
	}
	return n
}

// firstLook is when a look first found what (dead, released) of pid: now,
// for the first one, which records it in what.<pid>.
func firstLook(dir, what string, pid int) time.Time {
	path := filepath.Join(dir, what+"."+strconv.Itoa(pid))
	now := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprint(f, now.UnixNano())
		f.Close()
		return now
	}
	return readTime(path, now)
}

// readTime reads a time written by firstLook, which may be writing it;
// def if it cannot.
func readTime(path string, def time.Time) time.Time {
	for range 100 {
		b, _ := os.ReadFile(path)
		if ns, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return time.Unix(0, ns)
		}
		time.Sleep(time.Millisecond)
	}
	return def
}

// processLives says whether pid runs: a zombie has released its memory.
func processLives(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// appendLine appends one line to path in one write, which O_APPEND keeps
// whole among the concurrent servers' writes.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func allocate(dir, g string, pid, mib int, linger time.Duration, starts int) error {
	return appendLine(filepath.Join(dir, "gpu"+g+".mem"), fmt.Sprintf("%d %d %d %d", pid, mib, linger, starts))
}

func (e gpuEvent) write(dir string) {
	e.At = time.Now().UnixNano()
	b, _ := json.Marshal(e)
	if err := appendLine(filepath.Join(dir, "timeline.jsonl"), string(b)); err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
	}
}

// visible is the GPUs a process sees: its CUDA_VISIBLE_DEVICES, or all.
func visible() []string {
	if cvd := os.Getenv("CUDA_VISIBLE_DEVICES"); cvd != "" {
		return strings.Split(cvd, ",")
	}
	return fakeGPUs()
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
	for _, g := range visible() {
		if used := gpuUsed(dir, g); used > 0 {
			c := ev
			c.Kind, c.Detail = "conflict", fmt.Sprintf("GPU %s: %d MiB held at start", g, used)
			c.write(dir)
		}
		if err := allocate(dir, g, os.Getpid(), fakeServerMiB, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "CUDA_VISIBLE_DEVICES=%s: took %d MiB on GPU %s\n", ev.CVD, fakeServerMiB, strings.Join(visible(), ", "))
	ev.Kind = "start"
	ev.write(dir)
	end := func() { ev.Kind = "end"; ev.write(dir) }
	if n, _ := strconv.Atoi(os.Getenv("FAKE_BARRIER")); n > 0 {
		if _, started := countTimeline(dir); started <= n {
			awaitTimeline(dir, 10*time.Second, func(_, started int) bool { return started >= n })
		}
	}
	switch os.Getenv("FAKE_ROLE") {
	case "oom":
		awaitTimeline(dir, 20*time.Second, func(up, _ int) bool { return up > 1 })
		fmt.Fprintf(os.Stderr, "Traceback (most recent call last):\n  File \"server.py\", line 1, in <module>\n"+
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 160.00 GiB. GPU %s has a total capacity of 139.81 GiB\n", visible()[0])
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

// countTimeline is the number of servers up (started, not ended) and of
// servers started, from the timeline.
func countTimeline(dir string) (up, started int) {
	b, _ := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	live := map[int]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		var e gpuEvent
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Kind {
		case "start":
			live[e.PID] = true
			started++
		case "end":
			delete(live, e.PID)
		}
	}
	return len(live), started
}

// awaitTimeline polls the timeline for up to limit until ok says yes to
// countTimeline's counts, so that the servers of a test meet whatever the
// load of the machine: the first FAKE_BARRIER servers wait for each other,
// which shows that bmx ran that many at once (if it did not, they pass the
// barrier one by one, late), and the oom server dies while another server
// is up.
func awaitTimeline(dir string, limit time.Duration, ok func(up, started int) bool) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok(countTimeline(dir)) {
			return
		}
	}
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
	g := visible()[0]
	ev := gpuEvent{Kind: "hold", PID: os.Getpid(), Marker: os.Getenv(server.MarkerEnv), CVD: g, Linger: int64(hold)}
	starts, _ := strconv.Atoi(os.Getenv("FAKE_HOLD_STARTS"))
	if err := allocate(dir, g, os.Getpid(), fakeLeakMiB, hold, starts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ev.write(dir)
	fmt.Printf("holds %d MiB on GPU %s\n", fakeLeakMiB, g)
	time.Sleep(time.Hour)
	return 0
}
