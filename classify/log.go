package classify

import (
	"bytes"
	"regexp"
	"strings"
)

var (
	// linePrefixRe strips what loggers put before a message: Ray-style
	// "(Worker pid=1) ", SGLang's "[2025-06-26 07:25:31 DP4 TP4] ", vLLM's
	// "INFO 10-27 20:44:35 file.py:624] ", and ANSI colour codes.
	linePrefixRe = regexp.MustCompile(`^(?:\([\w ]+pid=\d+\)\s*|\[\d{4}-\d\d-\d\d[^\]]*\]\s*|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d [\d:]+ [^\]]*\]\s*)+`)
	ansiRe       = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

	nanLogRe = regexp.MustCompile(`(?i)probability tensor contains either .?inf.?, .?nan.?|NaN in the logits|Out of range float values are not JSON compliant|tensor\(\[+\s*nan, nan`)

	watchdogRe = regexp.MustCompile(`(?i)\bwatchdog timeout\b|Watchdog caught collective operation timeout`)

	cudaErrorRe = regexp.MustCompile(`CUDA error: .+`)
	// An exception line of a Python traceback: "RuntimeError: ...",
	// "torch.AcceleratorError: ...", a bare "EOFError".
	exceptionRe = regexp.MustCompile(`^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$`)
	// Exceptions that only point at an earlier root cause.
	consequenceRe = regexp.MustCompile(`(?i)see root cause above|see the error messages above|initialization failed|^EOFError|^KeyboardInterrupt|^SystemExit`)
	terminateRe   = regexp.MustCompile(`what\(\):\s+(.+)`)
	trtllmErrRe   = regexp.MustCompile(`\[TensorRT-LLM\]\[ERROR\]\s*(.+)`)
	fatalRe       = regexp.MustCompile(`Fatal Python error: .+|Segmentation fault|SIGSEGV|SIGABRT|Aborted \(core dumped\)|Assertion .+ failed`)
	// Signature normalisation: addresses, pids, long numbers, paths.
	hexRe  = regexp.MustCompile(`0x[0-9a-fA-F]+`)
	pidRe  = regexp.MustCompile(`(?i)\b(pid|rank|tp|dp)[= ]?\d+`)
	pathRe = regexp.MustCompile(`(?:/[\w.+-]+){2,}/`)
)

// fatalRe matches the lines with which servers announce that they are going
// down. SGLang logs "Scheduler hit an exception" and then waits tens of
// seconds (diagnostics, py-spy, a CUDA core dump) before it kills itself; a
// sweep should not wait with it.
var fatalLineRe = regexp.MustCompile(`Scheduler hit an exception|Received sigquit from a child process|SIGQUIT received\. signum|(?:Tokenizer|Detokenizer)Manager hit an exception|scheduler is dead|Initialization failed\.|EngineCore failed to start|Engine core initialization failed|Engine core proc \S+ died unexpectedly|(?i:\bwatchdog timeout\b)`)

// fatalWords are literals, one of which every fatal line holds: a cheap
// filter, so a server that floods its log does not cost a regexp per line.
var fatalWords = [][]byte{[]byte("exception"), []byte("sigquit"), []byte("SIGQUIT"), []byte("is dead"),
	[]byte("failed"), []byte("died"), []byte("atchdog"), []byte("ATCHDOG")}

// IsFatal reports whether a log line announces that the server is going down.
// Tracebacks and [ERROR] lines alone are not: servers log those and go on. It
// takes bytes because the launcher calls it on every line a server logs.
func IsFatal(line []byte) bool {
	for _, w := range fatalWords {
		if bytes.Contains(line, w) {
			return fatalLineRe.Match(line)
		}
	}
	return false
}

// cleanLine strips logger prefixes and colour codes from one log line.
func cleanLine(s string) string {
	s = ansiRe.ReplaceAllString(s, "")
	s = strings.TrimRight(s, " \t\r")
	return strings.TrimSpace(linePrefixRe.ReplaceAllString(s, ""))
}

func lines(log string) []string {
	raw := strings.Split(log, "\n")
	out := make([]string, 0, len(raw))
	for _, l := range raw {
		out = append(out, cleanLine(l))
	}
	return out
}

// nanInLog finds evidence of NaN/inf logits in the log.
func nanInLog(log string) (string, bool) {
	for _, l := range lines(log) {
		if nanLogRe.MatchString(l) {
			return l, true
		}
	}
	return "", false
}

// nanSignature names NaN evidence from the phrase that matched onwards
// ("probability tensor contains either `inf`, `nan` or element < 0"),
// without the kernel location and thread coordinates before it.
func nanSignature(line string) string {
	if loc := nanLogRe.FindStringIndex(line); loc != nil {
		return signatureOf(strings.TrimSuffix(strings.TrimSuffix(line[loc[0]:], "."), "` failed"))
	}
	return signatureOf(line)
}

func watchdogInLog(log string) (string, bool) {
	ls := lines(log)
	for i := len(ls) - 1; i >= 0; i-- {
		if watchdogRe.MatchString(ls[i]) {
			return ls[i], true
		}
	}
	return "", false
}

// nonFiniteError reports an HTTP error body caused by NaN/inf: FastAPI's
// json.dumps(allow_nan=False) failing on a NaN logprob.
func nonFiniteError(msg string) bool {
	return strings.Contains(msg, "Out of range float values are not JSON compliant") ||
		strings.Contains(strings.ToLower(msg), "nan or inf")
}

// CrashSignature names why a server died from its log tail, and returns the
// line it came from. The most specific evidence wins: a CUDA error, then the
// last Python exception that is not merely a consequence of an earlier one,
// a C++ terminate, a TensorRT-LLM error, a fatal signal. "" when the log
// names no cause.
func CrashSignature(log string) (sig, line string) {
	ls := lines(log)
	var cuda, exc, consequence, term, trt, fatal string
	for _, l := range ls {
		switch {
		case cudaErrorRe.MatchString(l):
			cuda = l
		case exceptionRe.MatchString(l):
			if consequenceRe.MatchString(l) {
				consequence = l
			} else {
				exc = l
			}
		}
		if terminateRe.MatchString(l) {
			term = l
		}
		if trtllmErrRe.MatchString(l) {
			trt = l
		}
		if fatalRe.MatchString(l) {
			fatal = l
		}
	}
	switch {
	case cuda != "":
		return signatureOf(cudaErrorRe.FindString(cuda)), cuda
	case exc != "":
		return signatureOf(exc), exc
	case term != "":
		return signatureOf(terminateRe.FindStringSubmatch(term)[1]), term
	case trt != "":
		return signatureOf(trt), trt
	case fatal != "":
		return signatureOf(fatalRe.FindString(fatal)), fatal
	case consequence != "":
		return signatureOf(consequence), consequence
	}
	return "", ""
}

// signatureOf normalises a line so that the same failure on other runs, pids
// and paths reads the same.
func signatureOf(line string) string {
	s := cleanLine(line)
	s = hexRe.ReplaceAllString(s, "0x…")
	s = pidRe.ReplaceAllString(s, "$1")
	s = pathRe.ReplaceAllString(s, "…/")
	r := []rune(s)
	if len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// lastLine returns the last non-empty line of the log.
func lastLine(log string) string {
	ls := lines(log)
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i] != "" {
			return ls[i]
		}
	}
	return ""
}
