//go:build linux

// Package fakegpu is a fake multi-GPU host for bmx's tests, which sweep
// whole sessions on it so that slots are checked through real processes as
// they run on a real one. Its nvidia-smi is a program of its own
// (cmd/fakesmi, built once by a test package), which imports nothing but
// the standard library, so that each of its hundreds of starts in a sweep
// is that of a small program; a test package plays the servers and the
// leaky cells' children with the rest of this package:
//
//   - nvidia-smi reports FAKE_GPUS GPUs, each GPU's memory the sum of the
//     allocations in its own state file (gpuN.mem) whose holder is alive,
//     as the driver frees a process's memory when it dies, or that the
//     driver is slow to release (GPUUsed);
//   - a server "allocates" ServerMiB on each GPU that its
//     CUDA_VISIBLE_DEVICES names (Allocate), and appends its start and end
//     to a timeline (timeline.jsonl, Event.Write);
//   - a leaky cell's detached child takes LeakMiB on the server's first
//     GPU, which stays held after the child is gone for a while.
package fakegpu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// ServerMiB is what a fake server takes on each GPU of its slot:
	// above the configs' busy_mib, so a GPU a server holds counts as held.
	ServerMiB = 4000
	// LeakMiB is what a leaky cell's detached child takes.
	LeakMiB = 9000
	// ReleaseFloor is how long at least a dead holder's memory stays
	// held when it is released by starts elsewhere (gpuUsed).
	ReleaseFloor = time.Second
	// GPUCount is how many GPUs the fake host has.
	GPUCount = 4
)

// Event is one line of the fake host's timeline.
type Event struct {
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

// Cell is the cell ID in the event's marker (run//cell#attempt).
func (e Event) Cell() string {
	_, rest, _ := strings.Cut(e.Marker, "//")
	if i := strings.LastIndex(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// Time is when e happened.
func (e Event) Time() time.Time { return time.Unix(0, e.At) }

// GPUs is the fake host's GPU indexes.
func GPUs() []string {
	n, _ := strconv.Atoi(os.Getenv("FAKE_GPUS"))
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// SMIMain answers nvidia-smi's --query-gpu with the fields asked for (the
// memory use from the state files) and its plain report otherwise.
func SMIMain(dir string, args []string) int {
	var query string
	for _, a := range args {
		if q, ok := strings.CutPrefix(a, "--query-gpu="); ok {
			query = q
		}
	}
	if query == "" {
		fmt.Println("NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0   (fake, for bmx's tests)")
		for _, g := range GPUs() {
			fmt.Printf("GPU %s: NVIDIA H200 (fake), %d MiB / 143771 MiB\n", g, GPUUsed(dir, g))
		}
		return 0
	}
	for _, g := range GPUs() {
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
				v = strconv.Itoa(GPUUsed(dir, g))
			}
			row = append(row, v)
		}
		fmt.Println(strings.Join(row, ", "))
	}
	return 0
}

// GPUUsed is the memory the live allocations of GPU g add up to. A line of
// gpuN.mem is "pid MiB linger starts": it counts while pid lives and, as a
// driver slow to release it, for linger nanoseconds after the first look
// that found pid dead (recorded in dead.<pid>), or until starts servers
// have started on other GPUs since then (0: no such end) and at least
// ReleaseFloor has passed. The floor is what makes the leaky slot's own
// look after its teardown see the memory: the first look that finds pid
// dead may be another slot's, before a start of its own, and under load two
// cells started elsewhere before the leaky slot looked (a CI run). The first look
// that finds it released records when in released.<pid>.
func GPUUsed(dir, g string) int {
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
		if ProcessLives(pid) {
			used += mib
			continue
		}
		if linger == 0 {
			continue
		}
		dead := firstLook(dir, "dead", pid)
		since := time.Since(dead)
		if since < time.Duration(linger) && (starts == 0 || since < ReleaseFloor || startsElsewhere(dir, g, dead) < starts) {
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
		var e Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "start" && e.Time().After(since) &&
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
	return ReadTime(path, now)
}

// ReadTime reads a time written by firstLook, which may be writing it;
// def if it cannot.
func ReadTime(path string, def time.Time) time.Time {
	for range 100 {
		b, _ := os.ReadFile(path)
		if ns, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return time.Unix(0, ns)
		}
		time.Sleep(time.Millisecond)
	}
	return def
}

// ProcessLives says whether pid runs: a zombie has released its memory.
func ProcessLives(pid int) bool {
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

// Allocate records that pid took mib on GPU g, which stays held for linger
// after pid died or until starts servers started elsewhere (GPUUsed).
func Allocate(dir, g string, pid, mib int, linger time.Duration, starts int) error {
	return appendLine(filepath.Join(dir, "gpu"+g+".mem"), fmt.Sprintf("%d %d %d %d", pid, mib, linger, starts))
}

// Write appends e to the timeline of the fake host in dir, stamped now.
func (e Event) Write(dir string) {
	e.At = time.Now().UnixNano()
	b, _ := json.Marshal(e)
	if err := appendLine(filepath.Join(dir, "timeline.jsonl"), string(b)); err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
	}
}

// Visible is the GPUs a process sees: its CUDA_VISIBLE_DEVICES, or all.
func Visible() []string {
	if cvd := os.Getenv("CUDA_VISIBLE_DEVICES"); cvd != "" {
		return strings.Split(cvd, ",")
	}
	return GPUs()
}

// CountTimeline is the number of servers up (started, not ended) and of
// servers started, from the timeline.
func CountTimeline(dir string) (up, started int) {
	b, _ := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	live := map[int]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		var e Event
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

// AwaitTimeline polls the timeline for up to limit until ok says yes to
// countTimeline's counts, so that the servers of a test meet whatever the
// load of the machine: the first FAKE_BARRIER servers wait for each other,
// which shows that bmx ran that many at once (if it did not, they pass the
// barrier one by one, late), and the oom server dies while another server
// is up.
func AwaitTimeline(dir string, limit time.Duration, ok func(up, started int) bool) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok(CountTimeline(dir)) {
			return
		}
	}
}
