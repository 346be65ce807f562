package classify

import (
	"bytes"
	"strings"
)

var (
	// linePrefixRe strips what loggers put before a message: Ray-style
	// "(Worker pid=1) ", SGLang's "[2025-06-26 07:25:31 DP4 TP4] ", vLLM's
	// "INFO 10-27 20:44:35 file.py:624] ", and ANSI colour codes.
	linePrefixRe = lazyRE(`^(?:\([\w ]+pid=\d+\)\s*|\[\d{4}-\d\d-\d\d[^\]]*\]\s*|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d [\d:]+ [^\]]*\]\s*)+`)
	ansiRe       = lazyRE(`\x1b\[[0-9;?]*[A-Za-z]`)

	// NaN evidence: the sampler's assert, serialisation failures, NaN
	// logprobs printed as key=value or as a Python list, messages that
	// name NaN logits or logprobs. Flags and variables that merely name NaN
	// handling (--enable-nan-detection, SANITIZE_NAN_LOGITS=1) do not match.
	nanLogRe = cued(nanCue, `(?i)probability tensor contains either .?inf.?, .?nan.?|\b(?:cumulative_)?logprobs?['"]?\s*[=:]\s*\[?\s*-?nan\b|logprob[^\n]*[\[(,]\s*-?nan\s*[,\])]|\[\s*-?nan\s*(?:,\s*-?nan\s*){2,}|assert\w*\s*\(\s*!\s*(?:std::)?is(?:nan|inf)\b|\bnan (?:logprobs?|logits|probabilities|values? in (?:the )?(?:logits|logprobs|output))\b|\bproduced (?:an? )?nan\b|NaN in the logits|Out of range float values are not JSON compliant|tensor\(\[+\s*nan, nan|\b(?:logits?|logprobs?|probs|hidden[_ ]states?) (?:contains?|has|have|had|are|is|were|was)(?: an?)? (?:nan|inf)\b|\b(?:found|detected|encountered) (?:nan|inf)\b`)

	watchdogRe = filtered(`(?i)\bwatchdog timeout\b|Watchdog caught collective operation timeout`, "atchdog", "ATCHDOG")

	cudaErrorRe = filtered(`CUDA error: .+`, "CUDA error")
	// An exception line of a Python traceback: "RuntimeError: ...",
	// "torch.AcceleratorError: ...", a bare "EOFError".
	exceptionRe = filtered(`^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$`, "Error", "Exception", "Exit", "Interrupt")
	// Exceptions that only point at an earlier root cause.
	consequenceRe = lazyRE(`(?i)see root cause above|see the error messages above|initialization failed|^EOFError|^KeyboardInterrupt|^SystemExit`)
	terminateRe   = filtered(`what\(\):\s+(.+)`, "what():")
	trtllmErrRe   = filtered(`\[TensorRT-LLM\]\[ERROR\]\s*(.+)`, "[TensorRT-LLM][ERROR]")
	fatalRe       = filtered(`Fatal Python error: .+|Segmentation fault|SIGSEGV|SIGABRT|Aborted \(core dumped\)|Assertion .+ failed`,
		"Fatal Python error", "Segmentation fault", "SIGSEGV", "SIGABRT", "Aborted", "Assertion")
	ncclErrorRe = filtered(`NCCL error|ncclInternalError|ncclUnhandledCudaError|ncclSystemError`, "NCCL error", "nccl")
	// Signature normalisation: addresses, pids, long numbers, paths.
	hexRe    = lazyRE(`0x[0-9a-fA-F]+`)
	pidRe    = lazyRE(`(?i)\b(pid|rank|tp|dp)[= ]?\d+`)
	pathRe   = lazyRE(`(?:/[\w.+-]+){2,}/`)
	timeRe   = lazyRE(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b`)
	digitsRe = lazyRE(`\d+(?:\.\d+)?`)
)

// lineRe is a regexp with literals one of which every match contains: the
// literal check is cheap, so a long log costs a regexp only on the few lines
// that could match.
type lineRe struct {
	re    *lazyRegexp
	words []string
	// cue, when set, is the check in place of words.
	cue func(string) bool
}

func filtered(expr string, words ...string) *lineRe {
	return &lineRe{re: lazyRE(expr), words: words}
}

// cued is a lineRe whose every match passes cue.
func cued(cue func(string) bool, expr string) *lineRe {
	return &lineRe{re: lazyRE(expr), cue: cue}
}

// nanCue is what every match of nanLogRe has: "Out of range", or, in any
// case, "nan" or "inf" as a word (not followed by a letter, digit or
// underscore), or "inf" and one character before a comma ("either infs,").
// A plain "inf" is in every vLLM line (INFO) and in "inference": checked
// by the literal alone, the regexp ran on almost every line of a log.
func nanCue(s string) bool {
	if strings.Contains(s, "Out of range") {
		return true
	}
	for i := 0; i+3 <= len(s); i++ {
		w := [3]byte{s[i] | 0x20, s[i+1] | 0x20, s[i+2] | 0x20}
		if w != [3]byte{'n', 'a', 'n'} && w != [3]byte{'i', 'n', 'f'} {
			continue
		}
		next := i + 3
		if next == len(s) || !isWordByte(s[next]) || (w[0] == 'i' && next+1 < len(s) && s[next+1] == ',') {
			return true
		}
	}
	return false
}

// isWordByte is regexp's \w: an ASCII letter, digit or underscore.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'z'
}

func (l *lineRe) maybe(s string) bool {
	if l.cue != nil {
		return l.cue(s)
	}
	for _, w := range l.words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (l *lineRe) MatchString(s string) bool { return l.maybe(s) && l.re.MatchString(s) }

func (l *lineRe) FindString(s string) string {
	if !l.maybe(s) {
		return ""
	}
	return l.re.FindString(s)
}

func (l *lineRe) FindStringIndex(s string) []int {
	if !l.maybe(s) {
		return nil
	}
	return l.re.FindStringIndex(s)
}

func (l *lineRe) FindStringSubmatch(s string) []string {
	if !l.maybe(s) {
		return nil
	}
	return l.re.FindStringSubmatch(s)
}

// fatalRe matches the lines with which servers announce that they are going
// down. SGLang logs "Scheduler hit an exception" and then waits tens of
// seconds (diagnostics, py-spy, a CUDA core dump) before it kills itself; a
// sweep should not wait with it.
var fatalLineRe = lazyRE(`\b[A-Z]\w+ hit an exception|(?i:\bworker\b[^\n]{0,60}\bdied\b)|Received sigquit from a child process|SIGQUIT received\. signum|(?:Tokenizer|Detokenizer)Manager hit an exception|scheduler is dead|Initialization failed\.|EngineCore failed to start|Engine core initialization failed|Engine core proc \S+ died unexpectedly|(?i:\bwatchdog timeout\b)`)

// fatalWords are literals, one of which every fatal line holds: a cheap
// filter, so a server that floods its log does not cost a regexp per line.
var fatalWords = [][]byte{[]byte("exception"), []byte("sigquit"), []byte("SIGQUIT"), []byte("is dead"),
	[]byte("failed"), []byte("died"), []byte("atchdog"), []byte("ATCHDOG")}

// IsFatal reports whether a log line announces that the server is going down.
// Tracebacks and [ERROR] lines alone are not: servers log those and go on.
// bmx's own lines (the cell and its command, which quote axis values) never
// are. It takes bytes because the launcher calls it on every line a server
// logs.
func IsFatal(line []byte) bool {
	if bytes.HasPrefix(line, []byte(bmxLinePrefix)) {
		return false
	}
	for _, w := range fatalWords {
		if bytes.Contains(line, w) {
			return fatalLineRe.Match(line)
		}
	}
	return false
}

// stickyRe matches the CUDA errors after which a context runs no kernel
// again (the process must restart): cudaErrorIllegalAddress and friends.
var stickyRe = filtered(`(?i)illegal memory access|misaligned address|illegal instruction|unspecified launch failure|device-side assert triggered|cudaErrorIllegalAddress|cudaErrorLaunchFailure`,
	"illegal", "llegal", "misaligned", "unspecified launch", "device-side", "cudaError")

// stickyCUDAError returns the first line with a sticky CUDA error, or "".
func stickyCUDAError(ls []string) string {
	for _, l := range ls {
		if stickyRe.MatchString(l) {
			return l
		}
	}
	return ""
}

// cleanLine strips logger prefixes and colour codes from one log line.
func cleanLine(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRe.ReplaceAllString(s, "")
	}
	s = strings.TrimSpace(s)
	if s != "" && strings.IndexByte("([IWEDC", s[0]) >= 0 {
		s = strings.TrimSpace(linePrefixRe.ReplaceAllString(s, ""))
	}
	return s
}

// bmxLinePrefix starts the lines bmx itself writes into a server's log (the
// cell and its command): never evidence, whatever axis values they quote.
const bmxLinePrefix = "# bmx:"

func lines(log string) []string {
	raw := strings.Split(log, "\n")
	out := make([]string, 0, len(raw))
	for _, l := range raw {
		if strings.HasPrefix(l, bmxLinePrefix) {
			continue
		}
		out = append(out, cleanLine(l))
	}
	return out
}

// nanInLog finds evidence of NaN/inf logits in the log.
func nanInLog(ls []string) (string, bool) {
	for _, l := range ls {
		if nanLogRe.MatchString(l) {
			return l, true
		}
	}
	return "", false
}

// stalledByCrash finds, in the log of a server that stopped answering, a
// worker's death that explains the stall: a CUDA or NCCL error, or a fatal
// line. An illegal memory access on one rank leaves the others waiting in a
// collective forever; that is a crash, not a hang. Plain exceptions are not
// enough: servers log those and go on.
func stalledByCrash(ls []string) (sig, line string) {
	var fatal string
	for _, l := range ls {
		if cudaErrorRe.MatchString(l) || ncclErrorRe.MatchString(l) {
			sig, line = crashSignature(ls)
			if sig == "" {
				sig, line = signatureOf(l), l
			}
			return sig, line
		}
		if fatal == "" && IsFatal([]byte(l)) && !watchdogRe.MatchString(l) {
			fatal = l
		}
	}
	if fatal != "" {
		if sig, line = crashSignature(ls); sig == "" {
			sig, line = signatureOf(fatal), fatal
		}
	}
	return sig, line
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

func watchdogInLog(ls []string) (string, bool) {
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
	return crashSignature(lines(log))
}

func crashSignature(ls []string) (sig, line string) {
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
	// No exception or signal: the first line that reads as an error, as C
	// and C++ engines print their own (llama.cpp: "llama_init_from_model:
	// quantized V cache requires flash_attn to be enabled"). The first one is
	// the cause; the lines after it report the consequences.
	for _, l := range ls {
		if errorLineRe.MatchString(l) && !recoveryRe.MatchString(l) {
			return signatureOf(l), l
		}
	}
	return "", ""
}

var (
	errorLineRe = lazyRE(`(?i)\b(?:error|failed|failure|fatal|cannot|can't|unable to|requires|not supported|unsupported|does not divide|invalid|out of memory)\b`)
	// recoveryRe marks lines that report a problem worked around.
	recoveryRe = lazyRE(`(?i)\bwarn(?:ing)?\b|falling back|fallback|retrying|will retry|ignor(?:e|ing)\b|skipping`)
)

// signatureOf normalises a line so that the same failure on other runs, pids
// and paths reads the same.
func signatureOf(line string) string {
	s := cleanLine(line)
	s = timeRe.ReplaceAllString(s, "<time>")
	s = hexRe.ReplaceAllString(s, "0x…")
	s = pidRe.ReplaceAllString(s, "$1")
	s = pathRe.ReplaceAllString(s, "…/")
	r := []rune(s)
	if len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// stuckSignature names a hang by the last thing the server logged, with its
// numbers blanked, so hangs at the same place group together across runs.
func stuckSignature(last string) string {
	if last == "" {
		return "stuck with an empty log"
	}
	return "stuck after: " + digitsRe.ReplaceAllString(signatureOf(last), "N")
}

// lastLine returns the last non-empty line of the log.
func lastLine(ls []string) string {
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i] != "" {
			return ls[i]
		}
	}
	return ""
}
