//go:build linux

package launcher

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/launcher/sim"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// The test binary doubles as the servers the launcher starts: with
// BMX_LAUNCHER_HELPER set it runs that mode instead of the tests; as bmx
// does, it is also each server's supervisor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == server.SuperviseArg {
		os.Exit(server.Supervise(os.Args[2:]))
	}
	if mode := os.Getenv("BMX_LAUNCHER_HELPER"); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "sim-server" {
		// The built-in config's versions_command runs "{self} sim-server
		// --print-versions" without the server's env.
		os.Exit(helper("sim", os.Args[1:]))
	}
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		// A command this binary does not play: running the tests again
		// here would start the same sweeps again, each one more process.
		fmt.Fprintf(os.Stderr, "launcher.test: not a helper command: %q\n", os.Args[1:])
		os.Exit(2)
	}
	moreParallel()
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests are run after the tests, in the test binary that ran them.
var afterTests []func()

// inOwnProcess is set to 1 in a test process that runs one test for the
// test process that started it (runInOwnProcess).
const inOwnProcess = "BMX_TEST_IN_OWN_PROCESS"

// runInOwnProcess runs the test t again in a test process of its own, this
// binary with env added to its environment, and fails t with that process's
// output unless t passed there. It reports whether it did: in that process
// it returns false, and the test goes on to run there. A test whose
// environment is the point (bmx's own CUDA_VISIBLE_DEVICES) so runs beside
// the others, where t.Setenv would hold every parallel test back.
func runInOwnProcess(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(inOwnProcess) == "1" {
		return false
	}
	var run []string
	for _, name := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(name)+"$")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self, "-test.run", strings.Join(run, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), inOwnProcess+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" (") {
		t.Fatalf("%s in a test process of its own (%s): %v\n%s", t.Name(), strings.Join(env, " "), err, out)
	}
	return true
}

// parallelTests is how many parallel tests run at once unless -parallel
// says otherwise. The session and slot tests wait (on servers' start-ups,
// ready and GPU-free timeouts, SIGTERM graces) far more than they compute,
// so more of them run at once than there are CPUs, the default (as in
// cmd/bmx's tests).
const parallelTests = 6

func moreParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(parallelTests, runtime.GOMAXPROCS(0))))
	}
}

func helper(mode string, args []string) int {
	if len(args) > 0 && args[0] == "sim-server" {
		args = args[1:]
	}
	port := ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	switch mode {
	case "sim":
		fmt.Fprintf(os.Stderr, "CUDA_VISIBLE_DEVICES=%s\n", os.Getenv("CUDA_VISIBLE_DEVICES"))
		return sim.Main(args, os.Stdout, os.Stderr)
	case "port-taken":
		// Another process holds the port when the sim binds it: each start
		// (STEAL=always) or the first start of the cell (STEAL=once).
		first := filepath.Join(os.Getenv("STEAL_DIR"), "started-"+os.Getenv("STEAL"))
		_, err := os.Stat(first)
		os.WriteFile(first, nil, 0o644)
		if os.Getenv("STEAL") == "always" || (os.Getenv("STEAL") == "once" && err != nil) {
			ln, lerr := net.Listen("tcp", "127.0.0.1:"+port)
			if lerr != nil {
				fmt.Fprintln(os.Stderr, lerr)
				return 3
			}
			defer ln.Close()
		}
		return sim.Main(args, os.Stdout, os.Stderr)
	case "fatal-then-linger":
		// SGLang's scheduler death: the fatal line, the traceback, then a long
		// wait for diagnostics before it kills itself.
		fmt.Fprintln(os.Stderr, "[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):")
		fmt.Fprintln(os.Stderr, "  File \"scheduler.py\", line 1, in run_scheduler_process")
		fmt.Fprintln(os.Stderr, "RuntimeError: CUTLASS grouped GEMM failed: Error Internal")
		fmt.Fprintln(os.Stderr, "[2026-03-10 12:00:01] Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
		time.Sleep(time.Minute)
	case "setsid-child":
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=stuck-ignore-term")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "child pid %d\n", cmd.Process.Pid)
		time.Sleep(time.Hour)
	case "kill-supervisor":
		// A grandchild that leaves the process group and the environment
		// (no marker), then the SIGKILL of the supervisor that holds it.
		if err := exec.Command("setsid", "env", "-i", "sleep", os.Getenv("NAPS")).Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for len(procsByCmdline("sleep\x00"+os.Getenv("NAPS"))) == 0 {
			time.Sleep(time.Millisecond)
		}
		syscall.Kill(os.Getppid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	case "flaky":
		// Crashes on its first run, works on the next: the state is a file.
		state := os.Getenv("FLAKY_STATE")
		if _, err := os.Stat(state); err != nil {
			os.WriteFile(state, []byte("ran"), 0o644)
			fmt.Fprintln(os.Stderr, "RuntimeError: CUDA error: an illegal memory access was encountered")
			return 1
		}
		return sim.Main(args, os.Stdout, os.Stderr)
	case "started":
		// The bench server's own process start, for BenchmarkCellOverhead.
		fmt.Println(time.Now().UnixNano())
		return 0
	case "bench":
		// A server with a known own time: BENCH_STARTUP before it listens,
		// then instant answers; it exits at once on SIGTERM.
		d, _ := time.ParseDuration(os.Getenv("BENCH_STARTUP"))
		time.Sleep(d)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
		})
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"OK"},"finish_reason":"stop"}]}`)
		})
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	case "setup-gate":
		// Says it started (a file GATE/started-N), then answers its first
		// chat request at once and the later ones only once the server of
		// cell N=1 has started: the first cell is correct only if the next
		// cell starts while it still runs.
		os.WriteFile(filepath.Join(os.Getenv("GATE"), "started-"+os.Getenv("N")), nil, 0o644)
		var chats atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			if chats.Add(1) > 1 && os.Getenv("N") == "0" {
				for {
					if _, err := os.Stat(filepath.Join(os.Getenv("GATE"), "started-1")); err == nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"OK"},"finish_reason":"stop"}],"usage":{"completion_tokens":1}}`)
		})
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	case "fatal-bench":
		// Logs a fatal line, records when, and records when SIGTERM came.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintf(os.Stderr, "FATAL_AT=%d\n[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\nRuntimeError: boom\n", time.Now().UnixNano())
		<-term
		fmt.Fprintf(os.Stderr, "TERM_AT=%d\n", time.Now().UnixNano())
		return 0
	case "flood-1g":
		chunk := []byte(strings.Repeat(strings.Repeat("y", 127)+"\n", 8192)) // 1 MiB
		for range 1024 {
			os.Stderr.Write(chunk)
		}
		fmt.Fprintln(os.Stderr, "RuntimeError: CUDA error: out of memory")
		return 1
	case "leak":
		// Leaves GPU memory "held" in the fake nvidia-smi's state, then dies.
		os.WriteFile(os.Getenv("SMI_STATE"), []byte("0, 9000\n1, 0\n"), 0o644)
		fmt.Fprintln(os.Stderr, "RuntimeError: CUDA error: out of memory")
		return 1
	case "exit1":
		fmt.Fprintln(os.Stderr, "Traceback (most recent call last):\n  File \"launch.py\", line 1, in <module>\nValueError: --fp4-gemm-backend cudnn needs cuDNN 9.10")
		return 1
	case "stuck-ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "Capture cuda graph begin. This can take up to several minutes.")
		time.Sleep(time.Hour)
	case "grandchild":
		// A child in the same process group that ignores SIGTERM, as a
		// scheduler subprocess of a wedged server would.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BMX_LAUNCHER_HELPER=stuck-ignore-term")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "child pid %d\n", cmd.Process.Pid)
		time.Sleep(time.Hour)
	case "flood":
		// 20 MB of lines, written 64 KiB at a time (not a write call
		// each), then the error.
		w := bufio.NewWriterSize(os.Stderr, 64<<10)
		line := strings.Repeat("x", 199) + "\n"
		for i := 0; i < 100_000; i++ {
			w.WriteString(line)
		}
		fmt.Fprintln(w, "RuntimeError: CUDA error: out of memory")
		w.Flush()
		return 1
	case "huge-reply":
		// Every generation answers 10 MB of text.
		body := []byte(`{"choices":[{"message":{"role":"assistant","content":"OK ` + strings.Repeat("word ", 2<<20) + `"},"finish_reason":"length"}],"usage":{"completion_tokens":2097152}}`)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"id":"/m"}]}`)
		})
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			w.Write(body)
		})
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	case "no-generate", "fatal-on-chat":
		// no-generate: up, /health and the model list answer, but a
		// generation never returns (a wedged scheduler). fatal-on-chat: each
		// generation logs a fatal line and is answered; the process lives on.
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"id":"/m"}]}`)
		})
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			if mode == "no-generate" {
				<-r.Context().Done()
				return
			}
			fmt.Fprintln(os.Stderr, "[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):")
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"OK"},"finish_reason":"stop"}],"usage":{"completion_tokens":1}}`)
		})
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	case "die-on-chat":
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("GET /get_model_info", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"model_path":"/m"}`)
		})
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"data":[{"id":"/m"}]}`)
		})
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(os.Stderr, "Fatal Python error: Segmentation fault")
			os.Exit(139)
		})
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	}
	return fakeGPUHelper(mode, args)
}

func sweepFor(t *testing.T, mode string, server string) (*Sweep, matrix.Cell) {
	t.Helper()
	src := fmt.Sprintf(`[server]
command = ["{self}", "--model-path", "/m", "--host", "{host}", "--port", "{port}"]
env = { BMX_LAUNCHER_HELPER = %q }
%s
[[axis]]
name = "mode"
flag = "--mode-label"
values = [%q]
`, mode, server, mode)
	if mode == "sim" {
		src = strings.Replace(src, `flag = "--mode-label"`, `flag = "--moe-runner-backend"`, 1)
		src = strings.Replace(src, fmt.Sprintf("values = [%q]", mode), `values = ["flashinfer_cutlass"]`, 1)
	}
	sw, cells := newSweep(t, src)
	return sw, cells[0]
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func portFree(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Errorf("port %d still busy after the cell: %v", port, err)
		return
	}
	ln.Close()
}

func TestRunCell(t *testing.T) {
	tests := []struct {
		mode, server string
		want         classify.Verdict
		check        func(t *testing.T, r record.Result)
	}{
		{
			mode: "sim", server: `ready_timeout = "20s"` + "\nstop_grace = \"5s\"",
			want: classify.Correct,
			check: func(t *testing.T, r record.Result) {
				if r.Stop != "SIGTERM" || r.Exit != nil || r.Timings.ReadyMS == 0 {
					t.Errorf("stop %q exit %v ready %d", r.Stop, r.Exit, r.Timings.ReadyMS)
				}
				if r.Resolved["fp4_gemm_runner_backend"] != "flashinfer_cudnn" {
					t.Errorf("resolved %v: auto should show what it became", r.Resolved)
				}
			},
		},
		{
			mode: "exit1", server: `ready_timeout = "20s"`,
			want: classify.Crash,
			check: func(t *testing.T, r record.Result) {
				if r.Exit == nil || r.Exit.Code != 1 || r.Signature != "ValueError: --fp4-gemm-backend cudnn needs cuDNN 9.10" || r.Stop != "" {
					t.Errorf("exit %v signature %q stop %q", r.Exit, r.Signature, r.Stop)
				}
				if len(r.Observations) != 0 {
					t.Errorf("probes ran against a dead server: %d", len(r.Observations))
				}
			},
		},
		{
			mode: "stuck-ignore-term", server: `ready_timeout = "3s"` + "\nstop_grace = \"300ms\"",
			want: classify.Hang,
			check: func(t *testing.T, r record.Result) {
				if !r.TimedOut || !strings.HasPrefix(r.Stop, "SIGKILL after 300ms grace") {
					t.Errorf("timed out %v, stop %q", r.TimedOut, r.Stop)
				}
				if !strings.Contains(r.Signature, "Capture cuda graph begin") {
					t.Errorf("signature %q", r.Signature)
				}
			},
		},
		{
			mode: "grandchild", server: `ready_timeout = "3s"` + "\nstop_grace = \"300ms\"",
			want: classify.Hang,
			check: func(t *testing.T, r record.Result) {
				log, err := os.ReadFile(r.LogPath)
				if err != nil {
					t.Fatal(err)
				}
				var pid int
				for _, line := range strings.Split(string(log), "\n") {
					if _, err := fmt.Sscanf(line, "child pid %d", &pid); err == nil {
						break
					}
				}
				if pid == 0 {
					t.Fatalf("no child pid in log:\n%s", log)
				}
				// The child is reaped by init once killed; give it a moment.
				deadline := time.Now().Add(2 * time.Second)
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("grandchild %d outlived the cell", pid)
				}
			},
		},
		{
			mode: "flood", server: `ready_timeout = "20s"`,
			want: classify.Crash,
			check: func(t *testing.T, r record.Result) {
				st, err := os.Stat(r.LogPath)
				if err != nil || st.Size() < 20_000_000 {
					t.Errorf("log not written whole: %v %v", st, err)
				}
				if len(r.LogTail) > server.TailBytes || strings.Count(r.LogTail, "\n") > server.TailLines {
					t.Errorf("tail not bounded: %d bytes, %d lines", len(r.LogTail), strings.Count(r.LogTail, "\n"))
				}
				if r.Signature != "CUDA error: out of memory" {
					t.Errorf("signature %q", r.Signature)
				}
			},
		},
		{
			mode: "die-on-chat", server: `ready_timeout = "20s"`,
			want: classify.Crash,
			check: func(t *testing.T, r record.Result) {
				if r.Exit == nil || r.Exit.Code != 139 || !strings.Contains(r.Reason, "while being probed") {
					t.Errorf("exit %v reason %q", r.Exit, r.Reason)
				}
				if r.Signature != "Fatal Python error: Segmentation fault" {
					t.Errorf("signature %q", r.Signature)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			sw, cell := sweepFor(t, tt.mode, tt.server)
			if tt.mode == "sim" {
				// What is read of the healthy cell is how it started, what
				// it resolved and how it stopped, not the smoke set's
				// batch, thinking and counting probes.
				sw.Probes = probe.Set{Probes: probe.Smoke().Probes[:2]}
			}
			r, err := sw.RunCell(context.Background(), "", cell, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tt.want {
				log, _ := os.ReadFile(r.LogPath)
				t.Fatalf("verdict %s (%s), want %s\nlog:\n%.3000s", r.Verdict, r.Reason, tt.want, log)
			}
			portFree(t, r.Port)
			if r.Port == 0 || r.Port == 30000 {
				t.Errorf("port %d: each cell should get a free port", r.Port)
			}
			if !strings.HasPrefix(r.LogPath, sw.Dir) {
				t.Errorf("log %s outside the run dir", r.LogPath)
			}
			// A teardown kills what carries its marker host-wide: the
			// marker names this run, so a concurrent test's cell of the
			// same mode is not killed by this one's.
			if want := server.MarkerEnv + "=" + server.MarkerPrefix(server.RunMarker(sw.Dir)) + cell.ID + "#1"; !slices.Contains(r.Env, want) {
				t.Errorf("env %q lacks the run's own marker %s", r.Env, want)
			}
			tt.check(t, r)
		})
	}
}

func TestRunCellCannotStart(t *testing.T) {
	sw, cell := sweepFor(t, "exit1", "")
	sw.Self = filepath.Join(t.TempDir(), "no-such-server")
	r, err := sw.RunCell(context.Background(), "", cell, 1)
	if err != nil {
		t.Fatalf("a server that cannot start is a failed cell, not an error: %v", err)
	}
	if r.Verdict != classify.Crash || len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "no such file") {
		t.Errorf("verdict %s problems %q", r.Verdict, r.Problems)
	}
}

// TestSweepStoresEachCell checks that results reach results.jsonl as cells
// end, and an interrupt keeps what finished.
func TestSweepStoresEachCell(t *testing.T) {
	sw, cell := sweepFor(t, "exit1", `ready_timeout = "20s"`)
	cells := []matrix.Cell{cell, cell, cell}
	cells[1].ID, cells[2].ID = "mode=second", "mode=third"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	sw.OnCell = func(slot int, r record.Result) {
		n++
		if n == 2 {
			cancel()
		}
	}
	results, err := sw.Run(ctx, cells)
	if err != ErrInterrupted || len(results) != 2 || n != 2 {
		t.Fatalf("err %v, %d results, %d callbacks", err, len(results), n)
	}
	f, err := os.Open(filepath.Join(sw.Dir, record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stored, torn, err := record.ReadResults(f)
	if err != nil || torn || len(stored) != 2 || stored[1].Cell.ID != "mode=second" {
		t.Errorf("stored %d (torn %v, err %v)", len(stored), torn, err)
	}
}

var (
	execLookPath = exec.LookPath
	execCommand  = exec.Command
)
