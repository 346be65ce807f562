package classify

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Setup causes: what is broken when a server fails for a reason that is not
// its backends'.
const (
	SetupModel      = "the model cannot be found or loaded"
	SetupPort       = "the port is taken"
	SetupExecutable = "the server executable is missing or cannot run"
	SetupPackage    = "the server's own Python package is missing"
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
		"FileNotFoundError", "No such file", "not found", "does not exist", "not a directory")
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
// shell's exit 127 or 126), or the Python package that argv runs is not
// installed. It returns one of the Setup* causes and the log line that shows
// it (the exit status when that is all there is); "" when nothing says so.
// argv is the server's command line: a missing module counts only when it is
// the server's own (python -m sglang... and "No module named 'sglang'"), not
// a backend's kernel package; a missing file only when it is not a
// backend's (a compiler, a kernel library, JIT output).
func Setup(in Input, argv []string) (cause, line string) {
	ls := lines(in.Log)
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
var backendFileRe = regexp.MustCompile(`(?i)nvcc|ninja|\.so\b|\.so\.|\.cubin|\.ptx|\bjit\b|flashinfer|triton|deep_gemm|cutlass|\.cu\b|\.cuh\b`)

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
