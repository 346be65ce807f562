// Package matrix owns the sweep configuration: the TOML file a user writes
// (server command, axes of backend flags, excludes and includes, the probe
// set), its strict decoding and validation, and its expansion into the cells
// a sweep runs, each with the exact argv and environment of its server.
//
// It never starts a process: everything here is pure data, so `bmx plan` can
// show exactly what `bmx sweep` would run, and a bad config is rejected with
// its file, line and key before any GPU is touched.
package matrix

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Defaults applied by Load when the config leaves a field out.
const (
	DefaultHost         = "127.0.0.1"
	DefaultHealth       = "/health"
	DefaultReadyTimeout = 10 * time.Minute
	DefaultProbeTimeout = 2 * time.Minute
	DefaultStopGrace    = 15 * time.Second
	DefaultProbeSet     = "smoke"
)

// Config is a decoded, defaulted and validated matrix file.
type Config struct {
	// Name names the run directory; it defaults to the file's base name.
	Name string
	// Path is the file the config came from; "" for the built-in one.
	Path string
	// Source is the file's text, kept for the run's snapshot.
	Source string
	// Dir is the absolute directory of the config file ("" for the built-in
	// one), for {dir}.
	Dir  string
	Vars map[string]string
	// VarFlags are the vars a --var set (over [vars] or not): an error
	// about such a value names the flag, not the config's line.
	VarFlags map[string]bool
	Server   Server
	Axes     []Axis
	// Exclude and Include follow GitHub Actions matrix semantics: excludes
	// remove matching combinations first, then each include extends the
	// combinations it matches or, matching none, adds a cell of its own.
	Exclude []map[string]string
	Include []Include
	Probes  Probes
	// Slots are GPU groups cells run on concurrently; none means one slot
	// with all GPUs.
	Slots []Slot
	GPU   GPU
	// Retries is how often a crash or hang cell is run again to tell a
	// flaky backend from a broken one.
	Retries int
	// Reference picks the cell whose answers the others are compared with
	// (axis -> value); it runs first.
	Reference map[string]string
	// Known lists expected failures.
	Known []Known
	// Engine names the engine profile the config builds on ("" = none).
	Engine string
	// HelpCheck validates axis values against the server's --help before
	// anything starts.
	HelpCheck bool
	// MaxCells bounds the cells Expand builds (0: DefaultMaxCells); the
	// command line raises it with --max-cells.
	MaxCells int
	// Order is the order cells start in: OrderInformative or OrderFile
	// (the default when the key is absent, so an existing config keeps
	// its order; `bmx init` writes order = "informative" into new ones).
	// It never changes a verdict or a report's layout, only which cells
	// run first.
	Order string
	// Prune turns pruning on (sweep --prune does too); PruneAfter is its K:
	// an axis value that failed with one cause in K cells that differ in
	// every other axis has its other cells predicted instead of started.
	Prune      bool
	PruneAfter int
	// Dedupe skips a cell whose backends an "auto" cell that ran resolved
	// to: it inherits that cell's verdict instead of starting a server of
	// the same backends (sweep --dedupe does too).
	Dedupe bool
}

// Run orders (the order key).
const (
	// OrderInformative starts the reference cell, then cells that cover
	// every axis value as early as possible, likely-working ones first.
	OrderInformative = "informative"
	// OrderFile starts cells in the order the config expands to.
	OrderFile = "file"
)

// Orders lists the values of the order key.
var Orders = []string{OrderInformative, OrderFile}

// DefaultPruneAfter is prune_after's default K.
const DefaultPruneAfter = 2

// DefaultMaxCells is the most cells a config may expand to unless raised:
// at minutes of model load per cell, 10,000 cells are weeks of GPU time,
// and a bigger matrix is almost always a typo in an axis.
const DefaultMaxCells = 10000

// Known is a known issue: the cells it matches are expected to fail.
type Known struct {
	Match   map[string]string `json:"match"`
	Verdict string            `json:"verdict,omitempty"` // "" = any failure
	Issue   string            `json:"issue,omitempty"`
	Note    string            `json:"note,omitempty"`
}

// Slot is a set of GPUs one cell runs on, as CUDA_VISIBLE_DEVICES lists them
// ("0,1,2,3"); "" means all GPUs, CUDA_VISIBLE_DEVICES left as it is.
type Slot struct {
	GPUs string
}

// GPU configures the check that a slot's GPUs are free before a cell starts
// and after it ends.
type GPU struct {
	// SMI is the nvidia-smi command; bmx appends its query flags.
	SMI []string
	// BusyMiB is the memory use above which a GPU counts as held.
	BusyMiB int
	// FreeTimeout bounds the wait for a held GPU to become free.
	FreeTimeout time.Duration
}

// Defaults of the GPU check.
const (
	DefaultBusyMiB     = 1024
	DefaultFreeTimeout = 2 * time.Minute
)

// Server describes how to start one server and how to tell it is ready.
type Server struct {
	// ReadyGenerate requires a one-token generation to succeed before the
	// server counts as ready (SGLang's /health can pass before it can).
	ReadyGenerate bool
	// HelpCommand prints the server's argparse help, for help_check and
	// `bmx axes`; VersionsCommand prints "name=version" lines for the host
	// fingerprint.
	HelpCommand     []string
	VersionsCommand []string
	// Paths names vars whose values are files or directories the server
	// loads: bmx checks they exist before any server starts, whatever they
	// look like (PathVars are checked when they look local).
	Paths        []string
	Command      []string
	Env          map[string]string
	Host         string
	Health       string
	ReadyLog     *regexp.Regexp
	ReadyTimeout time.Duration
	ProbeTimeout time.Duration
	StopGrace    time.Duration
	// CellTimeout bounds a cell from its start to the end of its probes
	// (teardown not counted); 0 means ready_timeout plus a probe_timeout
	// for each probe and one more, about the most a cell whose every wait
	// runs out can take.
	CellTimeout time.Duration
}

// Axis is one dimension of the matrix, such as the MoE runner backend.
type Axis struct {
	Name string
	// Flag, if set, is passed as "Flag value" for each value.
	Flag string
	// Env, if set, is set to the value's name in the server's environment.
	Env    string
	Values []Value
}

// Value is one choice on an axis; Args and Env are extra settings that come
// with it.
type Value struct {
	Name string
	Args []string
	Env  map[string]string
}

// Include is one [[include]] entry.
type Include struct {
	Values map[string]string // axis name -> value
	Args   []string
	Env    map[string]string
}

// Probes says which probe set to send.
type Probes struct {
	Set   string // a built-in set
	File  string // a probe file, resolved against the config's directory
	Model string // the model name to request; "" = ask the server
}

// Placeholders that bmx fills in itself; every other {name} must be a var.
const (
	PlaceholderPort = "port"
	PlaceholderHost = "host"
	PlaceholderSelf = "self"
	// PlaceholderGPUs is the cell's slot ("0,1,2,3"); PlaceholderNGPUs its size,
	// e.g. for --tp {ngpus}.
	PlaceholderGPUs  = "gpus"
	PlaceholderNGPUs = "ngpus"
	// PlaceholderDir is the directory of the config file, so a config can
	// name files beside it (a server script, a profile) from any working
	// directory.
	PlaceholderDir = "dir"
)

// reserved are the placeholders bmx fills in itself.
var reserved = []string{PlaceholderPort, PlaceholderHost, PlaceholderSelf, PlaceholderGPUs, PlaceholderNGPUs, PlaceholderDir}

// ConfigError is one problem in a config file, located by line and key.
type ConfigError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// ErrInvalid is wrapped by every error Load returns for bad content, so
// callers can tell bad usage from an unreadable file.
var ErrInvalid = errors.New("invalid config")

func (c *Config) axis(name string) *Axis {
	for i := range c.Axes {
		if c.Axes[i].Name == name {
			return &c.Axes[i]
		}
	}
	return nil
}

func (c *Config) axisNames() []string {
	names := make([]string, len(c.Axes))
	for i, a := range c.Axes {
		names[i] = a.Name
	}
	return names
}
