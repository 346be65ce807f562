package classify

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Setup causes: what is broken when a server fails for a reason that is not
// its backends'.
const (
	SetupModel      = "the model cannot be found or loaded"
	SetupPort       = "the port is taken"
	SetupExecutable = "the server executable is missing or cannot run"
	SetupPackage    = "the server's own Python package is missing"
	SetupUsage      = "the server refused a fixed part of its command line (not an axis value)"
)

var (
	// A model or tokenizer that is not there, said so plainly wherever it
	// is in the log: Hugging Face's messages for a local folder or repo id
	// that has no model, vLLM's check of the path, llama.cpp's failure to
	// open its GGUF.
	setupModelRe = filtered(`(?i)does not appear to have a file named|is not a local folder and is not a valid model identifier|is not a valid model|Incorrect path_or_model_id|Invalid repository ID or local directory|RepositoryNotFoundError|Repository Not Found for url|Repo id must be in the form|Can't load (?:tokenizer|config|the configuration|the model) for|gguf_init_from_file\w*: failed to open|failed to open GGUF|error loading model: [^\n]*(?:No such file|failed to open)`,
		"appear to have", "valid model", "path_or_model_id", "Invalid repository", "Repository", "Repo id", "load", "failed to open", "GGUF")
	// The same when it is the exception the server died of: a missing file
	// or a model path that does not exist.
	setupModelCrashRe = filtered(`(?i)FileNotFoundError|No such file or directory|(?:model|tokenizer)[^\n]{0,80}(?:not found|does not exist|is not a directory)`,
		"FileNotFoundError", "No such file", "no such file", "not found", "does not exist", "not a directory")
	setupPortRe = filtered(`(?i)address already in use|\[Errno 98\]|EADDRINUSE|port \d+ is (?:already )?in use|port \d+ is not available`,
		"ddress already in use", "ADDRESS ALREADY IN USE", "Errno 98", "EADDRINUSE", "in use", "not available")
	// bmx could not start the command, or a shell could not find it.
	setupExecRe = filtered(`^bmx: start server:|^(?:\S*/)?(?:ba|da|z)?sh: (?:line )?(?:\d+: )?\S+: (?:command )?not found$|^env: \S+: No such file or directory$`,
		"bmx: start server:", "not found", "No such file")
	noModuleRe = filtered(`No module named '([\w.]+)'`, "No module named")
)

// Setup says whether a crashed server failed because the setup is broken
// rather than a backend: the model or tokenizer cannot be found or loaded,
// the port was taken, the executable is missing (bmx could not start it, a
// shell's exit 127 or 126), the Python package that argv runs is not
// installed, or the server refused a part of its command line that is not
// the cell's own (a mistyped fixed flag, a file it names that is not there,
// a wrong subcommand: see usageError). It returns one of the Setup* causes
// and the log line that shows it (the exit status when that is all there
// is); "" when nothing says so. argv is the server's command line and own
// the arguments the cell's axis values add to it: a missing module counts
// only when it is the server's own (python -m sglang... and "No module named
// 'sglang'"), not a backend's kernel package; a missing file only when it is
// not a backend's (a compiler, a kernel library, JIT output); a usage error
// about one of own is the cell's verdict (the server does not take that
// value), never the setup's.
func Setup(in Input, argv, own []string) (cause, line string) {
	ls := lines(in.Log)
	if l, subjects := usageError(ls, in.Exit); l != "" {
		for _, s := range subjects {
			if !ownArg(s, own) {
				return SetupUsage, l
			}
		}
		return "", ""
	}
	for _, l := range ls {
		switch {
		case setupExecRe.MatchString(l):
			return SetupExecutable, l
		case setupPortRe.MatchString(l):
			return SetupPort, l
		}
		if m := noModuleRe.FindStringSubmatch(l); m != nil && ownModule(m[1], argv) {
			return SetupPackage, l
		}
	}
	if in.Exit != nil && in.Exit.Signal == "" && (in.Exit.Code == 127 || in.Exit.Code == 126) {
		return SetupExecutable, "exit status " + strconv.Itoa(in.Exit.Code)
	}
	for _, l := range ls {
		if setupModelRe.MatchString(l) && !backendFileRe.MatchString(l) {
			return SetupModel, l
		}
	}
	_, crash := crashSignature(ls)
	if crash != "" {
		if setupModelCrashRe.MatchString(crash) && !backendFileRe.MatchString(crash) {
			return SetupModel, crash
		}
		return "", ""
	}
	// Nothing else explains the exit: a file that was not there does
	// ("cat: /models/q/config.json: No such file or directory").
	for _, l := range ls {
		if setupModelCrashRe.MatchString(l) && !backendFileRe.MatchString(l) {
			return SetupModel, l
		}
	}
	return "", ""
}

// backendFileRe names files a backend looks for, not a model: a compiler or
// a kernel library, JIT build output. Their absence is a backend's problem.
var backendFileRe = lazyRE(`(?i)nvcc|ninja|\.so\b|\.so\.|\.cubin|\.ptx|\bjit\b|flashinfer|triton|deep_gemm|cutlass|\.cu\b|\.cuh\b`)

// ownModule reports whether module (from "No module named 'x.y'") is the
// package the server's command runs: python -m x..., an x or x.py script, an
// x console script.
func ownModule(module string, argv []string) bool {
	top, _, _ := strings.Cut(module, ".")
	for i, a := range argv {
		name := filepath.Base(a)
		switch {
		case i > 0 && argv[i-1] == "-m":
			if t, _, _ := strings.Cut(a, "."); t == top {
				return true
			}
		case strings.HasSuffix(name, ".py") && strings.TrimSuffix(name, ".py") == top:
			return true
		case i == 0 && (name == top || strings.HasPrefix(name, top+"-") || strings.HasPrefix(name, top+"_")):
			return true
		}
	}
	return false
}

var (
	// argparseErrorRe is the last line argparse prints when it refuses a
	// command line ("prog: error: msg", after the usage, exit status 2),
	// for the messages that name what was refused.
	argparseErrorRe = filtered(`^\S[^:]*: error: (unrecognized arguments: .+|argument \S+: .+|the following arguments are required: .+)$`, ": error: ")
	// argparse's "argument --a/-b: invalid choice: 'v' (choose from ...)"
	// and "argument --f: can't open 'f': ...": the argument's names and the
	// value refused.
	argparseArgRe = lazyRE(`^argument (\S+): (?:invalid choice: '([^']*)'|can't open '([^']*)')?`)
	// llama.cpp's refusal of an argument it does not know (exit status 1).
	llamaArgRe = filtered(`^error: invalid argument: (\S+)`, "error: invalid argument")
	// A cobra program's unknown subcommand or flag (Go servers: ollama's).
	cobraArgRe = filtered(`unknown command "([^"]+)" for "|unknown (?:shorthand )?flag: '?(-[^' ]+)`, "unknown command", "unknown flag", "unknown shorthand flag")
)

// usageError finds where a server refused its command line before doing
// anything: argparse's error after its usage (exit status 2), llama.cpp's
// "error: invalid argument", a cobra program's unknown command or flag. It
// returns the line and what it names as refused (flags, values, a
// subcommand); "" when the server did not die of its command line.
func usageError(ls []string, exit *evidence.Exit) (line string, subjects []string) {
	for _, l := range ls {
		if m := argparseErrorRe.FindStringSubmatch(l); m != nil && exit != nil && exit.Code == 2 && exit.Signal == "" {
			return l, argparseSubjects(m[1])
		}
		if m := llamaArgRe.FindStringSubmatch(l); m != nil {
			return l, m[1:2]
		}
		if m := cobraArgRe.FindStringSubmatch(l); m != nil {
			return l, []string{m[1] + m[2]}
		}
	}
	return "", nil
}

// argparseSubjects are what argparse's message names: the unrecognized
// arguments, the argument's names (and the value it refused), the required
// arguments.
func argparseSubjects(msg string) []string {
	if rest, ok := strings.CutPrefix(msg, "unrecognized arguments: "); ok {
		return strings.Fields(rest)
	}
	if rest, ok := strings.CutPrefix(msg, "the following arguments are required: "); ok {
		return strings.Split(rest, ", ")
	}
	m := argparseArgRe.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	subjects := strings.Split(m[1], "/")
	if m[2]+m[3] != "" {
		subjects = append(subjects, m[2]+m[3])
	}
	return subjects
}

// ownArg reports whether s, a flag or value a usage error names, is one of
// the cell's own arguments (also either half of a --flag=value).
func ownArg(s string, own []string) bool {
	for _, a := range own {
		if a == s {
			return true
		}
		if name, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") && (name == s || v == s) {
			return true
		}
	}
	return false
}
