// Package server owns one server's life, from its start to the moment its
// port and GPUs are free again: the server runs in a process group of its
// own under a supervisor (bmx re-executed as a child subreaper, see
// Supervise) that holds its whole process tree and kills it when told to,
// when the cell ends or when bmx dies, even by SIGKILL; its output goes
// straight to its log file, which a watcher follows for the ready line and
// the first fatal line; readiness is polled while the process's exit, the
// deadline and the log are watched; a hung server's stacks and GPUs are
// recorded before it is killed (forensics); teardown is SIGTERM, a grace
// period, SIGKILL, then every descendant the supervisor holds (and, unless
// the supervisor held the whole tree to its end, every process that carries
// the server's marker), until the port can be bound again; and the GPU check waits for a slot's memory to be released.
//
// It keeps this apart from the sweep (package launcher: which cells run,
// where and when) so that one server's life reads as one sequence and its
// processes can be tested alone. It reports what happened and never judges
// it: the one text rule it needs, whether a log line is fatal, is given to
// it (classify.IsFatal), and the verdict is the classifier's.
package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Spec is what Start runs.
type Spec struct {
	// Argv is the server's command line.
	Argv []string
	// Env is added to bmx's own environment; it carries MarkerEnv=Marker.
	Env []string
	// Marker is the server's marker (CellMarker): whatever carries it after
	// the teardown is killed too.
	Marker string
	// Log is the server's log file: its stdout and stderr are appended to
	// the file at this path.
	Log *os.File
	// Host and Port are where the server listens.
	Host string
	Port int
	// ReadyLine, if set, must appear in the log before the server counts
	// as ready.
	ReadyLine *regexp.Regexp
	// IsFatal says whether a log line announces the server going down.
	IsFatal func(line []byte) bool
}

// Server is a running server, its process tree and the watcher of its log.
type Server struct {
	spec  Spec
	proc  *process
	watch *logWatch
	// conns are bmx's connections to the server (Client). They are closed
	// before its teardown: a server that drains its connections on SIGTERM
	// would wait for an idle one (or one the transport dialled for a
	// request another connection served, which the server still counts
	// as new) until its shutdown timed out.
	conns *http.Transport
}

// Start launches the server under a supervisor and starts watching its log.
// The error says why the server could not start; then nothing runs.
func Start(spec Spec) (*Server, error) {
	p, err := start(spec.Argv, processEnv(spec.Env), spec.Log)
	if err != nil {
		return nil, err
	}
	conns := http.DefaultTransport.(*http.Transport).Clone()
	return &Server{spec: spec, proc: p, watch: watchLog(spec.Log.Name(), spec.ReadyLine, spec.IsFatal), conns: conns}, nil
}

// Harness is a *HarnessError when bmx's own machinery failed under the
// server (its supervisor died before the server's exit was seen, and the
// server with it): what the server did then says nothing of the server.
// Nil while the server runs.
func (s *Server) Harness() error {
	if s.proc.alive() {
		return nil
	}
	return s.proc.harness
}

// Client is an HTTP client of the server's own connections (closed at its
// teardown), each request bounded by timeout (0: by its context alone).
func (s *Server) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: s.conns, Timeout: timeout}
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + hostPort(s.spec.Host, s.spec.Port) }

// Exited is closed when the server's main process has ended.
func (s *Server) Exited() <-chan struct{} { return s.proc.exited }

// Alive reports whether the server's main process is still running.
func (s *Server) Alive() bool { return s.proc.alive() }

// Exit is how the server's main process ended by itself; nil while it runs
// or once bmx has stopped it.
func (s *Server) Exit() *evidence.Exit { return s.proc.exit() }

// Fatal receives the first fatal line of the log, once.
func (s *Server) Fatal() <-chan string { return s.watch.fatal }

// FatalLine reads the log to its current end and returns the first fatal
// line found so far ("" if none), whether or not Fatal delivered it: a
// line can land between the watcher's reads and the end of the probes.
func (s *Server) FatalLine() string { return s.watch.sync() }

// Settle waits until the log has been quiet for fatalSettle, at most
// fatalSettleMax, so the traceback after a fatal line is on disk before
// the server is torn down.
func (s *Server) Settle() {
	deadline := time.Now().Add(fatalSettleMax)
	for time.Now().Before(deadline) && time.Since(s.watch.lastGrowth()) < fatalSettle {
		time.Sleep(watchInterval / 2)
	}
}

// fatalSettle is how long the log must be quiet after a fatal line (at most
// fatalSettleMax) before bmx tears the server down, so the traceback that
// follows the line is in the record.
const (
	fatalSettle    = 60 * time.Millisecond
	fatalSettleMax = 700 * time.Millisecond
)

// Tail is the end of the server's log as the classifier reads it (see
// ReadTail).
func (s *Server) Tail() (string, error) { return ReadTail(s.spec.Log.Name()) }

// Forensics records a hung server before it is killed: a py-spy stack dump
// of each process of its group and nvidia-smi's view of the GPUs (gpus nil:
// no nvidia-smi on this host).
func (s *Server) Forensics(ctx context.Context, gpus *GPUs) *evidence.Forensics {
	return forensics(ctx, s.proc, gpus)
}

// Stopped is what a server's teardown found.
type Stopped struct {
	// How says how bmx ended the server ("" when it had ended by itself).
	How string
	// Problems are what the teardown left to say: processes that had left
	// the process group or could not be killed, a port still in use.
	Problems []string
	// Orphans counts the processes that had left the server's process
	// group, or outlived its supervisor, and were killed.
	Orphans int
}

// Teardown ends the server: SIGTERM to its process group, up to grace for
// the main process to exit, SIGKILL, then every descendant the supervisor
// holds and every process that carries the server's marker. It returns once
// the server's port can be bound again (or portFreeWait has passed), so the
// next server does not meet the last one's socket, and stops the log
// watcher.
func (s *Server) Teardown(grace time.Duration) Stopped {
	defer s.watch.stop()
	s.conns.CloseIdleConnections()
	st := s.stopTree(grace)
	if err := waitPortFree(s.spec.Host, s.spec.Port, portFreeWait); err != nil {
		st.Problems = append(st.Problems, err.Error())
	}
	return st
}

// stopTree ends the server's process tree and every process that carries
// its marker.
func (s *Server) stopTree(grace time.Duration) Stopped {
	st := Stopped{How: s.proc.stop(grace), Problems: s.proc.teardownProblems(), Orphans: s.proc.done.Escaped + len(s.proc.adopted)}
	// The marker sweep reads the environment of every process on the host
	// (a millisecond per hundred or so): it is skipped when the supervisor
	// held the whole tree to its end, since then every process the server
	// started was its descendant and none is left.
	if s.proc.heldWhole() {
		return st
	}
	if n := KillMarked(s.spec.Marker); n > 0 {
		// Only a supervisor that was itself SIGKILLed leaves these, and
		// only when bmx is no subreaper to adopt them (adoptOrphans).
		st.Orphans += n
		st.Problems = append(st.Problems, fmt.Sprintf("%d processes outlived the server's supervisor and were killed by marker", n))
	}
	return st
}

// processEnv is bmx's environment with the server's additions in place of
// the variables they set (the last addition of a name wins). Python output
// is made unbuffered so the log is complete up to the moment a server dies;
// a marker inherited from an outer bmx is dropped. No name is listed twice:
// getenv (libc's, Python's os.environ, Go's) takes the first of two, so a
// slot's CUDA_VISIBLE_DEVICES after the one bmx was started with (by Slurm,
// say) would be ignored, and every slot's server would see all of bmx's
// GPUs.
func processEnv(add []string) []string {
	if os.Getenv("PYTHONUNBUFFERED") == "" {
		add = append([]string{"PYTHONUNBUFFERED=1"}, add...)
	}
	last := map[string]int{} // a name's last addition
	for i, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, added := last[k]; !added && k != MarkerEnv {
			env = append(env, kv)
		}
	}
	for i, kv := range add {
		if k, _, _ := strings.Cut(kv, "="); last[k] == i {
			env = append(env, kv)
		}
	}
	return env
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
