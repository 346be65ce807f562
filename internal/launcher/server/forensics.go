package server

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"time"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// maxPySpy bounds the py-spy dumps of one hang: a TP-8 server has a dozen
// processes, and each dump can take seconds.
const maxPySpy = 16

// pySpyTimeout bounds one py-spy dump: it attaches and walks the stacks in a
// second or two; a process it cannot attach to must not stall the teardown.
const pySpyTimeout = 20 * time.Second

// forensics records a hung server before it is killed: a py-spy stack dump of
// each process of its group (when py-spy is installed) and nvidia-smi's view
// of the GPUs. The log tail is kept anyway.
func forensics(ctx context.Context, srv *process, gpu *GPUs) *evidence.Forensics {
	f := &evidence.Forensics{}
	pids := srv.groupPIDs()
	if pyspy, err := exec.LookPath("py-spy"); err != nil {
		f.Notes = append(f.Notes, "py-spy not on PATH: no stack dumps (pip install py-spy)")
	} else {
		for i, pid := range pids {
			if i == maxPySpy {
				f.Notes = append(f.Notes, "more processes than "+strconv.Itoa(maxPySpy)+": the rest were not dumped")
				break
			}
			f.PySpy = append(f.PySpy, evidence.StackDump{PID: pid, Output: run(ctx, pySpyTimeout, pyspy, "dump", "--pid", strconv.Itoa(pid))})
		}
	}
	if gpu == nil {
		f.Notes = append(f.Notes, "nvidia-smi not found: no GPU snapshot")
	} else {
		f.NvidiaSMI = gpu.smiSnapshot(ctx)
	}
	f.PIDs = pids
	return f
}

func run(ctx context.Context, limit time.Duration, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		out.WriteString("\n(" + err.Error() + ")")
	}
	return out.String()
}
