package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// DefaultCallTimeout bounds one sbatch, squeue or scontrol call. A live
// controller answers in well under a second; a dead one makes clients
// retry for minutes.
const DefaultCallTimeout = 30 * time.Second

// ErrUnsupported means Slurm's commands are not run on this OS.
var ErrUnsupported = errors.New("submitting to Slurm needs Linux (scripts are written on any OS: --dry-run)")

// Commands are the Slurm programs a submission and its follow run.
var Commands = []string{"sbatch", "squeue", "scontrol"}

// Available reports whether Slurm's commands can run here (Linux, each of
// Commands on PATH), so a submission is refused before its job directory
// is written.
func Available() error {
	if runtime.GOOS != "linux" {
		return ErrUnsupported
	}
	var missing []string
	for _, c := range Commands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("submit to Slurm: %s not found on PATH (without --submit the job is written to submit from a host that has them)", strings.Join(missing, ", "))
	}
	return nil
}

// CallError is a Slurm command that failed or did not answer in time.
type CallError struct {
	Command string
	Err     error
	// Stderr is what the command said.
	Stderr   string
	TimedOut bool
}

func (e *CallError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Command, e.Err)
	if e.TimedOut {
		msg = fmt.Sprintf("%s did not answer in time: is slurmctld running?", e.Command)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

func (e *CallError) Unwrap() error { return e.Err }

// Client runs Slurm's commands, each with a timeout.
type Client struct {
	// Timeout bounds each call (DefaultCallTimeout when 0).
	Timeout time.Duration
	// Env is added to the environment of each call: sbatch hands it on to
	// the job, which is how secret vars reach the tasks unwritten.
	Env []string
}

// call runs one Slurm command and returns its stdout.
func (c Client) call(ctx context.Context, name string, args ...string) (string, error) {
	if runtime.GOOS != "linux" {
		return "", ErrUnsupported
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), &CallError{Command: name + " " + strings.Join(args, " "), Err: err, Stderr: clipTail(stderr.String(), 500),
			TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	}
	return stdout.String(), nil
}

func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Sbatch submits a script and returns the job ID.
func (c Client) Sbatch(ctx context.Context, script string, args ...string) (string, error) {
	out, err := c.call(ctx, "sbatch", append(append([]string{"--parsable"}, args...), script)...)
	if err != nil {
		return "", err
	}
	// --parsable prints "id" or "id;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch %s: no job ID in its output %q", script, out)
	}
	return id, nil
}

// TaskState is one job, or one array task, as Slurm sees it.
type TaskState struct {
	// ID is the job ID, "123_4" for task 4 of array 123.
	ID string
	// Task is the array task index (-1 for a job that is not an array's).
	Task int
	// State is Slurm's: PENDING, RUNNING, COMPLETED, FAILED, ...
	State string
	// Reason is why it waits (Dependency, Resources, ...), "None" else.
	Reason string
	// ExitCode is "code:signal", when known.
	ExitCode string
}

// Done says the state is final.
func (t TaskState) Done() bool {
	switch t.State {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT":
		return true
	}
	return false
}

// Queue lists the tasks of the given jobs that the controller still
// remembers, finished ones included (squeue -t all, one line per array
// task).
func (c Client) Queue(ctx context.Context, jobs ...string) ([]TaskState, error) {
	out, err := c.call(ctx, "squeue", "-h", "-r", "-t", "all", "-j", strings.Join(jobs, ","), "-o", "%i|%T|%r")
	if err != nil {
		// squeue fails for a job ID the controller has forgotten.
		var ce *CallError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id") {
			return nil, nil
		}
		return nil, err
	}
	var states []TaskState
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 {
			continue
		}
		states = append(states, TaskState{ID: f[0], Task: taskIndex(f[0]), State: f[1], Reason: f[2]})
	}
	return states, nil
}

func taskIndex(id string) int {
	_, t, ok := strings.Cut(id, "_")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return -1
	}
	return n
}

// Show is scontrol show job: every task of the job, with its fields
// (JobState, ExitCode, Command, ...). ErrNoJob when Slurm does not know it.
func (c Client) Show(ctx context.Context, job string) ([]map[string]string, error) {
	out, err := c.call(ctx, "scontrol", "show", "job", "-o", job)
	if err != nil {
		var ce *CallError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id") {
			return nil, fmt.Errorf("job %s: %w", job, ErrNoJob)
		}
		return nil, err
	}
	var jobs []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = v
			}
		}
		jobs = append(jobs, fields)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("job %s: %w", job, ErrNoJob)
	}
	return jobs, nil
}
