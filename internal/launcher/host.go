package launcher

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Limits of the commands a fingerprint and a help check run.
const (
	// versionsTimeout bounds the versions command: importing torch and an
	// engine to print their versions takes seconds, or a minute on a cold
	// page cache.
	versionsTimeout = time.Minute
	// HelpTimeout bounds a server's --help: SGLang imports its whole stack
	// (torch, flashinfer) before argparse prints, tens of seconds when cold.
	HelpTimeout = 2 * time.Minute
	// helpClip is how much of a failed help command's output an error
	// quotes: the end of a traceback, not all of it.
	helpClip = 2000
)

// gpuQuery is what the fingerprint asks nvidia-smi, in this order.
const gpuQuery = "index,name,compute_cap,driver_version,memory.total,memory.used"

// ParseGPUInfo parses nvidia-smi's CSV for gpuQuery: either with its header
// (--format=csv, units in the header and the values), whose columns it finds
// by name, or without (--format=csv,noheader,nounits), in gpuQuery's order.
func ParseGPUInfo(out []byte) ([]record.GPU, error) {
	r := csv.NewReader(strings.NewReader(strings.TrimSpace(string(out))))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi CSV: %w", err)
	}
	col := map[string]int{}
	for i, name := range strings.Split(gpuQuery, ",") {
		col[name] = i
	}
	if len(rows) > 0 && strings.HasPrefix(strings.TrimSpace(rows[0][0]), "index") {
		col = map[string]int{}
		for i, h := range rows[0] {
			name, _, _ := strings.Cut(strings.TrimSpace(h), " ")
			col[name] = i
		}
		rows = rows[1:]
	}
	field := func(row []string, name string) string {
		i, ok := col[name]
		if !ok || i >= len(row) {
			return ""
		}
		return strings.TrimSpace(row[i])
	}
	mib := func(s string) int {
		n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(s, "MiB")))
		return n
	}
	var gpus []record.GPU
	for n, row := range rows {
		idx, err := strconv.Atoi(field(row, "index"))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi CSV line %d: no GPU index in %q", n+1, strings.Join(row, ","))
		}
		gpus = append(gpus, record.GPU{
			Index: idx, Name: field(row, "name"), ComputeCap: field(row, "compute_cap"),
			Driver: field(row, "driver_version"), MemoryMiB: mib(field(row, "memory.total")),
		})
	}
	return gpus, nil
}

var cudaVersionRe = regexp.MustCompile(`CUDA Version:\s*([0-9.]+)`)

// ParseCUDAVersion reads the CUDA version from nvidia-smi's plain report.
func ParseCUDAVersion(out []byte) string {
	if m := cudaVersionRe.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// ParseVersions reads "name=version" lines; other lines are ignored.
func ParseVersions(out []byte) map[string]string {
	v := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && k != "" && !strings.ContainsAny(k, " \t") {
			v[k] = val
		}
	}
	return v
}

// Fingerprint describes the host at the start of a run: the machine, its
// GPUs, driver and CUDA version (nvidia-smi), and the engine's package
// versions (the config's versions_command). A missing tool is recorded as
// unknown with a note, never an error.
func Fingerprint(ctx context.Context, cfg *matrix.Config, self string) record.Host {
	h := hostBasics()
	smi := cfg.GPU.SMI
	if _, err := exec.LookPath(smi[0]); err != nil {
		h.Notes = append(h.Notes, "nvidia-smi not found: GPU, driver and CUDA version unknown")
	} else {
		args := append(slices.Clone(smi[1:]), "--query-gpu="+gpuQuery, "--format=csv,noheader,nounits")
		if out, err := output(ctx, smi[0], args...); err != nil {
			h.Notes = append(h.Notes, "nvidia-smi --query-gpu failed: "+err.Error())
		} else if gpus, err := ParseGPUInfo(out); err != nil {
			h.Notes = append(h.Notes, err.Error())
		} else {
			h.GPUs = gpus
			if len(gpus) > 0 {
				h.GPU, h.Driver = gpus[0].Name, gpus[0].Driver
			}
		}
		if out, err := output(ctx, smi[0], smi[1:]...); err == nil {
			if v := ParseCUDAVersion(out); v != "" {
				h.CUDA = v
			}
		}
	}
	if vc := cfg.Server.VersionsCommand; len(vc) > 0 {
		rendered := cfg.Render(vc, matrix.Runtime{Self: self})
		if out, err := output(ctx, rendered[0], rendered[1:]...); err != nil {
			h.Notes = append(h.Notes, fmt.Sprintf("versions command %s failed: %v", rendered[0], err))
		} else {
			h.Versions = ParseVersions(out)
		}
	}
	return h
}

// hostBasics is what Fingerprint knows without running anything: the
// machine, its OS and CPUs; GPU, driver and CUDA unknown.
func hostBasics() record.Host {
	host, _ := os.Hostname()
	return record.Host{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), CUDA: "unknown", Driver: "unknown"}
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, versionsTimeout)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).Output()
}

// ServerHelp runs the server's help command and reads its argparse options.
func ServerHelp(ctx context.Context, cfg *matrix.Config, self string) (*matrix.Help, error) {
	if len(cfg.Server.HelpCommand) == 0 {
		return nil, fmt.Errorf("%s: help_check needs server.help_command (or an engine that has one)", cfg.Path)
	}
	return runHelp(ctx, cfg.Render(cfg.Server.HelpCommand, matrix.Runtime{Self: self}))
}

// ArgparseFlags runs argv, a server's help command, and parses the argparse
// options it prints, keyed by each of their names.
func ArgparseFlags(ctx context.Context, argv []string) (map[string]matrix.HelpFlag, error) {
	h, err := runHelp(ctx, argv)
	if err != nil {
		return nil, err
	}
	return h.Flags, nil
}

func runHelp(ctx context.Context, argv []string) (*matrix.Help, error) {
	ctx, cancel := context.WithTimeout(ctx, HelpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	h := matrix.NewHelp(argv, string(out))
	if err != nil && len(h.Flags) == 0 {
		if printed := clipOutput(out); printed != "" {
			return nil, fmt.Errorf("%s: %w\n%s", matrix.ShellJoin(argv), err, printed)
		}
		return nil, fmt.Errorf("%s: %w", matrix.ShellJoin(argv), err)
	}
	if len(h.Flags) == 0 {
		return nil, fmt.Errorf("%s printed no argparse options", matrix.ShellJoin(argv))
	}
	return h, nil
}

// axisWords are what the names of the flags a sweep varies say.
var axisWords = []string{"backend", "kernel", "quantization", "dtype", "parser"}

// AxisFlags lists the flags that have a choice list, once each, sorted by
// name; unless all, only those whose names say backend, kernel,
// quantization, dtype or parser: the candidates for a matrix's axes.
func AxisFlags(flags map[string]matrix.HelpFlag, all bool) []matrix.HelpFlag {
	seen := map[string]bool{}
	var out []matrix.HelpFlag
	for _, f := range flags {
		if f.Choices == nil || seen[f.Names[0]] {
			continue
		}
		seen[f.Names[0]] = true
		names := strings.Join(f.Names, " ")
		if all || slices.ContainsFunc(axisWords, func(w string) bool { return strings.Contains(names, w) }) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b matrix.HelpFlag) int { return strings.Compare(a.Names[0], b.Names[0]) })
	return out
}

func clipOutput(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > helpClip {
		s = "…" + s[len(s)-helpClip:]
	}
	return s
}
