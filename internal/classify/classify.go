// Package classify owns every verdict: it judges one cell from everything the
// launcher recorded (the server's log tail, how its process ended, whether
// the harness gave up waiting, the probe observations, earlier attempts, the
// reference cell's observations) and says why, on what evidence, and with
// which signature. It reads evidence.Observation and imports no client.
//
// It is pure: the same Input always gives the same Judgement, and it does no
// I/O, so live sweeps, `bmx report` and offline corpus cases are judged by the
// same code.
//
// Verdicts, worst first: crash > hang > nan > garbage > wrong > flaky >
// inconclusive > degraded > correct.
//
// Precedence, where evidence points two ways (first rule that applies wins):
//  1. NaN evidence in the log (the sampler's "probability tensor contains
//     either inf, nan" assert, logprob=nan, a printed list of nan, a message
//     naming NaN logits or logprobs) makes the cell nan even when the
//     assert killed the server, and over "empty output".
//  2. A process that ended with status 0, no error in its log and answers to
//     judge has not crashed: its answers decide.
//  3. A process that ended on its own, or a fatal line in the log ("X hit an
//     exception", a worker that died, "Initialization failed"), live or in a
//     recorded case, is a crash, unless the log shows a watchdog timeout: a
//     watchdog kill after a stall is a hang. The signature names the most
//     specific cause (a CUDA error, then the exception, a C++ terminate, ...).
//  4. A live process the harness gave up waiting for is a hang, unless a
//     worker's death in its log stalled the rest (then a crash). So is a
//     live process whose request timed out elsewhere: a gateway's 504, or
//     the engine's own request timeout (a 5xx that says it timed out).
//  5. A benchmark summary in the log that shows a broken model (most
//     answers unparseable, accuracy near zero) is garbage (or wrong), when
//     it is worse than the probes.
//  6. Otherwise the worst probe decides. Per request (Answer): an HTTP
//     error naming NaN is nan, a 504 or a 5xx that says it timed out a
//     hang, any other 5xx a crash, a 4xx inconclusive (the
//     harness's fault); null or non-finite logprobs, a candidate's too, are
//     nan whatever the text; then garbage
//     in the reasoning; zero completion tokens or empty content (a tool call
//     excepted) are garbage; garbage in the answer, checked even when the
//     expectation is met ("62!!!!!" is garbage); an answer fluent in another
//     language than the prompt's, unasked, is wrong; an answer cut off at
//     max_tokens with its expectation met is inconclusive; then the
//     expectation. With a reference cell, a greedy answer without an
//     expectation must agree with the reference's answer.
//  7. No probes at all: the log alone decides, and a correct verdict says it
//     rests on the log.
//  8. A correct cell needs positive evidence for every probe: an expectation
//     met, or agreement with the reference. A probe judged by shape alone
//     marks the verdict ShapeOnly (correct* in reports) and says so.
//  9. A correct cell whose greedy logprobs part from the reference cell's
//     beyond what healthy backends differ by is degraded (divergence.go).
//  10. A retried cell whose runs disagree is flaky, whatever its last run.
//
// Garbage detection (garbage.go, shape.go, and for short garbage no count
// reaches, control.go, stutter.go, fragments.go) looks at shape, not
// meaning, and measures the whole text and its tail; its vocabularies are
// the control tokens of chat templates, English function words (word soup,
// doubled and dangling words), the function words that tell Latin-script
// languages apart (language.go), the few words and Chinese characters
// that languages say twice on purpose, the words for "times" and the
// numbers before them (a prompt that asks for repetition), and HTML's
// inline and item elements. What repeats by design is read apart from
// what loops (markup.go): markup's tags, table cells and list items, the
// rules and banners that decorate code, an exam's blanks, a burst of "!"
// or "?" that ends a sentence.
package classify

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Verdict is the judgement of a probe or a cell.
type Verdict string

// Verdicts. Skipped, Excluded and Predicted mark cells that did not run.
const (
	Correct Verdict = "correct"
	// Degraded marks a cell whose probes pass but whose numerics part from
	// the reference cell's beyond what healthy backends differ by.
	Degraded     Verdict = "degraded"
	Wrong        Verdict = "wrong"
	Garbage      Verdict = "garbage"
	NaN          Verdict = "nan"
	Crash        Verdict = "crash"
	Hang         Verdict = "hang"
	Inconclusive Verdict = "inconclusive"
	// Flaky marks a cell whose retried runs disagreed (a crash, then a
	// correct run): it is a cell-level verdict, never a probe's.
	Flaky    Verdict = "flaky"
	Skipped  Verdict = "skipped"
	Excluded Verdict = "excluded"
	// Predicted marks a cell --prune did not start: an axis value of it
	// failed alike in enough other cells. It is never a verdict of its own
	// (the predicted one is in the result's evidence) and never correct.
	Predicted Verdict = "predicted"
)

// Verdicts lists the verdicts of cells that ran, best first.
var Verdicts = []Verdict{Correct, Degraded, Inconclusive, Flaky, Wrong, Garbage, NaN, Hang, Crash}

// Severity orders verdicts; higher is worse. Cells that did not run rank
// below correct.
func (v Verdict) Severity() int {
	if i := slices.Index(Verdicts, v); i >= 0 {
		return i
	}
	return -1
}

// Valid reports whether v is a known verdict.
func (v Verdict) Valid() bool {
	return v.Severity() >= 0 || v == Skipped || v == Excluded
}

// endedHow says how a process ended without bmx: which signal came from
// elsewhere (its own abort, a child that sent SIGKILL, the OOM killer), or
// its exit code. bmx's own stops never reach the classifier as an Exit.
func endedHow(e *evidence.Exit) string {
	switch {
	case e == nil:
		return "logged a fatal error"
	case e.Signal == "SIGKILL":
		return "was killed by SIGKILL, not sent by bmx (the server's own crash handling or the OOM killer)"
	case e.Signal == "SIGSEGV" || e.Signal == "SIGABRT" || e.Signal == "SIGBUS" || e.Signal == "SIGFPE" || e.Signal == "SIGILL":
		return "died of " + e.Signal + " (its own fault)"
	case e.Signal != "":
		return "was ended by " + e.Signal + ", not sent by bmx"
	}
	return fmt.Sprintf("exited by itself with code %d", e.Code)
}

// Input is everything the classifier looks at.
type Input struct {
	// Log is the tail of the server's stdout and stderr.
	Log string
	// Exit is set when the process ended by itself; nil means it was alive
	// when judged (bmx stopping it afterwards does not count).
	Exit *evidence.Exit
	// TimedOut means the harness gave up waiting for readiness or a probe.
	TimedOut bool
	// Fatal is a fatal log line (see IsFatal) seen while the process still
	// lived; bmx tore the server down on it rather than wait for the
	// server's own slow death, so it counts as the process ending.
	Fatal string
	// Observations are the probe outcomes, in the order they were sent.
	Observations []evidence.Observation
	// Earlier are the verdicts of earlier runs of a retried cell, oldest
	// first: when any differs from this run's, the cell is flaky.
	Earlier []Verdict
	// Reference holds the observations of the reference cell, if the sweep
	// has one: greedy answers with no expectation are judged by agreeing
	// with it, and failures quote what it answered.
	Reference *Reference
}

// Reference is the reference cell's outcome.
type Reference struct {
	Cell         string
	Observations []evidence.Observation
}

// ProbeVerdict is the judgement of one probe (all requests of a batch).
type ProbeVerdict struct {
	Name     string  `json:"name"`
	Verdict  Verdict `json:"verdict"`
	Basis    Basis   `json:"basis,omitempty"`
	Reason   string  `json:"reason"`
	Evidence string  `json:"evidence,omitempty"`
}

// Judgement is the verdict of a cell and what decided it.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	// Signature names the cause of a crash, hang or NaN in a form that
	// groups alike failures: the exception line, "CUDA error: ...", a signal.
	Signature string `json:"signature,omitempty"`
	// Reason says in a sentence why the verdict was given.
	Reason string `json:"reason"`
	// Evidence quotes what decided it: a log line or a probe's text.
	Evidence string         `json:"evidence,omitempty"`
	Probes   []ProbeVerdict `json:"probes"`
	// Numerics compares the cell's greedy logprobs with the reference
	// cell's; nil without a reference or without logprobs on both sides.
	Numerics *Numerics `json:"numerics,omitempty"`
	// ShapeOnly marks a correct verdict that some probe could only judge by
	// the shape of its text (no expectation, no reference answer): no
	// positive evidence that the answer is right. Reports show correct*.
	ShapeOnly bool `json:"shape_only,omitempty"`
}

// Basis is what a probe's verdict rests on.
type Basis string

// Bases of a probe verdict, strongest first.
const (
	ByExpectation Basis = "expectation" // the answer met (or missed) what the probe expects
	ByReference   Basis = "reference"   // the greedy answer agrees with the reference cell's
	ByShape       Basis = "shape"       // only the text's shape: not garbage, no more
)

// Cell judges one cell. A retried cell whose runs disagree is flaky,
// whatever its last run says.
func Cell(in Input) Judgement { return cellWith(in, nil) }

// cellWith is Cell judging observations through the memo (nil: none).
func cellWith(in Input, memo observationMemo) Judgement {
	j := judgeCellWith(in, memo)
	seq := []string{}
	differ := false
	for _, v := range in.Earlier {
		seq = append(seq, string(v))
		differ = differ || v != j.Verdict
	}
	if differ {
		seq = append(seq, string(j.Verdict))
		j.Verdict = Flaky
		j.Reason = fmt.Sprintf("runs disagree (%s); last run: %s", strings.Join(seq, ", then "), j.Reason)
	}
	return j
}

// judgeCell applies the precedence of the package documentation: NaN in the
// log, then the process's end, then a harness timeout, then a benchmark in
// the log, then the probes (or the log alone when nothing was asked).
func judgeCell(in Input) Judgement { return judgeCellWith(in, nil) }

// judgeCellWith is judgeCell that judges each observation through the memo
// (nil: none).
func judgeCellWith(in Input, memo observationMemo) Judgement {
	j := Judgement{Probes: judgeProbes(in.Observations, in.Reference, memo)}
	ls := lines(in.Log)
	worst := worstProbe(j.Probes)

	if line, ok := nanInLog(ls); ok {
		j.Verdict, j.Signature, j.Evidence = NaN, nanSignature(line), line
		j.Reason = "NaN/inf reached the sampler (log)"
		if in.Exit != nil {
			j.Reason = fmt.Sprintf("the server %s on NaN/inf in the logits", endedHow(in.Exit))
		} else if in.Fatal != "" {
			j.Reason = "the server was going down on NaN/inf in the logits"
		}
		return j
	}
	if cleanExit(in, ls) {
		// A process that ended with status 0 and no error in its log has
		// not crashed (an offline run that finished); its answers decide.
		in.Exit = nil
	}
	if strings.HasPrefix(in.Fatal, bmxLinePrefix) {
		// A record from a bmx that read its own header as the server's.
		in.Fatal = ""
	}
	if in.Exit == nil && in.Fatal == "" {
		// A recorded case has no launcher to have seen its fatal line: a
		// fatal line in its log counts as it would have in a live sweep.
		in.Fatal = fatalInLog(ls)
	}
	if in.Exit != nil || in.Fatal != "" {
		return judgeEnded(j, in, ls)
	}
	if in.TimedOut || worst != nil && worst.Verdict == Hang {
		// A request that timed out at a gateway (504) or in the engine is
		// the harness giving up, one step removed: the process lives.
		return judgeTimedOut(j, ls, worst)
	}
	bench, benchReason, benchLine, benched := benchmarkInLog(ls)
	if bench != "" && (worst == nil || bench.Severity() > worst.Verdict.Severity()) {
		j.Verdict, j.Reason, j.Evidence = bench, benchReason, benchLine
		return j
	}
	if worst == nil {
		return judgeLogOnly(j, ls, benchReason, benched)
	}
	j = judgeByProbes(j, worst)
	// The numerics against the reference cell: figures for every cell that
	// has logprobs on both sides; a correct cell whose numerics part from
	// the reference's beyond healthy drift is degraded (divergence.go).
	compareNumerics(&j, in)
	return j
}

// judgeEnded judges a process that ended by itself or logged a fatal line:
// a crash, named by its most specific cause, or a hang when a watchdog
// killed a stalled server.
func judgeEnded(j Judgement, in Input, ls []string) Judgement {
	how := "logged a fatal error"
	if in.Exit != nil {
		how = in.Exit.String()
	}
	if line, ok := watchdogInLog(ls); ok {
		j.Verdict, j.Signature, j.Evidence = Hang, signatureOf(line), line
		j.Reason = fmt.Sprintf("the server stalled until its watchdog killed it (%s)", how)
		return j
	}
	sig, line := crashSignature(ls)
	if sig == "" && in.Fatal != "" {
		sig, line = signatureOf(in.Fatal), in.Fatal
	}
	if sig == "" {
		sig = how
	}
	j.Verdict, j.Signature, j.Evidence = Crash, sig, line
	j.Reason = "the server process " + endedHow(in.Exit)
	if in.Exit == nil {
		j.Reason = "the server logged a fatal error and was going down (bmx stopped it without waiting)"
	}
	if ready := slices.ContainsFunc(in.Observations, func(o evidence.Observation) bool { return o.ErrKind == "" }); ready {
		j.Reason += " while being probed"
	} else {
		j.Reason += " before answering any probe"
	}
	return j
}

// judgeTimedOut judges a live server the harness gave up waiting for: a
// hang, unless a worker's death in the log stalled the rest.
func judgeTimedOut(j Judgement, ls []string, worst *ProbeVerdict) Judgement {
	if sig, line := stalledByCrash(ls); sig != "" {
		j.Verdict, j.Signature, j.Evidence = Crash, sig, line
		j.Reason = "a worker died and the rest of the server stalled until bmx gave up waiting"
		return j
	}
	last := lastLine(ls)
	j.Verdict, j.Evidence, j.Signature = Hang, last, stuckSignature(last)
	j.Reason = "the server was alive but did not answer in time"
	if worst != nil && worst.Verdict == Hang {
		j.Reason = worst.Name + ": " + worst.Reason
		if last == "" {
			j.Evidence = worst.Evidence
		}
	}
	return j
}

// judgeLogOnly judges a cell with no probe observations by its log: a
// sticky CUDA error is a crash; otherwise correct, on a healthy benchmark
// score, or by the absence of failures alone (shape only).
func judgeLogOnly(j Judgement, ls []string, benchReason string, benched bool) Judgement {
	if line := stickyCUDAError(ls); line != "" {
		// A sticky CUDA error leaves the context unusable: the server
		// cannot serve again, whether or not its process is gone yet.
		j.Verdict, j.Signature, j.Evidence = Crash, signatureOf(line), line
		if sig, _ := crashSignature([]string{line}); sig != "" {
			j.Signature = sig
		}
		j.Reason = "judged by the log only (no probe observations): a sticky CUDA error leaves the server unable to run a kernel again"
		return j
	}
	j.Verdict, j.ShapeOnly = Correct, !benched
	j.Reason = "judged by the log only (no probe observations): " + benchReason
	if !benched {
		j.Reason = "judged by the log only (no probe observations), so by shape only: the server kept serving and logged no failure"
	}
	return j
}

// ShapeOnlyClause starts the part of a correct cell's reason that says it
// was judged by shape only; the agreement among cells takes it out again
// when agreeing cells vouch for the cell.
const ShapeOnlyClause = "; judged by shape only"

// judgeByProbes gives the worst probe's verdict; a correct cell says which
// probes rest on their shape alone and is marked ShapeOnly.
func judgeByProbes(j Judgement, worst *ProbeVerdict) Judgement {
	j.Verdict, j.Reason, j.Evidence = worst.Verdict, worst.Name+": "+worst.Reason, worst.Evidence
	switch worst.Verdict {
	case Crash, NaN:
		j.Signature = signatureOf(worst.Evidence)
	case Degraded:
		j.Signature = pathSignature
	}
	if worst.Verdict != Correct {
		return j
	}
	j.Reason = fmt.Sprintf("all %d probes answered as expected", len(j.Probes))
	var shape []string
	for _, p := range j.Probes {
		if p.Basis == ByShape {
			shape = append(shape, p.Name)
		}
	}
	if len(shape) > 0 {
		j.ShapeOnly = true
		j.Reason += fmt.Sprintf("%s: %s had no expectation to meet and no reference answer to agree with", ShapeOnlyClause, strings.Join(shape, ", "))
	}
	return j
}

// fatalInLog returns the first line that announces the server going down.
func fatalInLog(ls []string) string {
	for _, l := range ls {
		if IsFatal([]byte(l)) {
			return l
		}
	}
	return ""
}

// cleanExit reports an exit with status 0, no error in the log, and probe
// answers to judge. Without answers it is still a crash: a server that quits
// before answering anything is broken whatever its status.
func cleanExit(in Input, ls []string) bool {
	if in.Exit == nil || in.Exit.Code != 0 || in.Exit.Signal != "" || in.Fatal != "" {
		return false
	}
	if sig, _ := crashSignature(ls); sig != "" {
		return false
	}
	return slices.ContainsFunc(in.Observations, func(o evidence.Observation) bool { return o.ErrKind == "" })
}

// judgeProbes groups observations by probe, keeping the worst request.
func judgeProbes(obs []evidence.Observation, ref *Reference, memo observationMemo) []ProbeVerdict {
	var out []ProbeVerdict
	index := map[string]int{}
	counts := map[string]int{}
	for _, o := range obs {
		counts[o.Probe]++
	}
	for _, o := range obs {
		v, reason, ev := memo.judge(o)
		v, reason, agreed := ref.compare(o, v, reason)
		if counts[o.Probe] > 1 {
			reason = fmt.Sprintf("request %d of %d: %s", o.Request+1, counts[o.Probe], reason)
		}
		basis := ByShape
		switch {
		case o.Expect != nil || o.Kind == evidence.ModelInfo || !o.Answered():
			basis = ByExpectation
		case agreed:
			basis = ByReference
		}
		if v != Correct {
			basis = ""
		}
		pv := ProbeVerdict{Name: o.Probe, Verdict: v, Basis: basis, Reason: reason, Evidence: ev}
		i, seen := index[o.Probe]
		if !seen {
			index[o.Probe] = len(out)
			out = append(out, pv)
			continue
		}
		if v.Severity() > out[i].Verdict.Severity() {
			out[i] = pv
		} else if v == out[i].Verdict && basis == ByShape {
			out[i].Basis = ByShape
		}
	}
	if out == nil {
		out = []ProbeVerdict{}
	}
	return out
}

func worstProbe(pvs []ProbeVerdict) *ProbeVerdict {
	var worst *ProbeVerdict
	for i := range pvs {
		if worst == nil || pvs[i].Verdict.Severity() > worst.Verdict.Severity() {
			worst = &pvs[i]
		}
	}
	return worst
}

// nanLogprobsEvidence is the evidence, and so the signature, of a reply
// whose logprobs are not all numbers: one signature whatever the text, so
// cells broken alike group together.
const nanLogprobsEvidence = "null or non-finite logprobs"

// Observation judges one request's outcome.
func Observation(o evidence.Observation) (v Verdict, reason, ev string) {
	switch errKind(o) {
	case evidence.Aborted:
		return Inconclusive, "abandoned: " + o.Err, ""
	case evidence.Timeout:
		return Hang, "no answer within the probe timeout", o.Err
	case evidence.Connection:
		return Crash, "the connection failed: " + o.Err, o.Err
	case evidence.Decode:
		return Inconclusive, "the reply could not be read as a chat completion: " + o.Err, o.Err
	case evidence.HTTPError:
		return httpVerdict(o)
	}
	if o.Logprobs.Bad() {
		return NaN, "the reply's logprobs hold null or non-finite values (NaN/inf in the logits), whatever its text says", nanLogprobsEvidence
	}
	if o.Kind == evidence.ModelInfo {
		if strings.TrimSpace(o.Text) == "" {
			return Wrong, o.Endpoint + " answered without a model path", ""
		}
		return Correct, "serves " + o.Text, o.Text
	}
	return Answer(o)
}

// errKind is the observation's error kind; recorded cases from elsewhere
// carry only a status and a message, so it is inferred from those.
func errKind(o evidence.Observation) evidence.ErrorKind {
	if o.ErrKind != "" || (o.Err == "" && o.HTTPStatus < 400) {
		return o.ErrKind
	}
	msg := strings.ToLower(o.Err)
	switch {
	case o.HTTPStatus >= 400:
		return evidence.HTTPError
	case strings.Contains(msg, "timeout") || strings.Contains(msg, "timed out") || strings.Contains(msg, "deadline exceeded"):
		return evidence.Timeout
	default:
		return evidence.Connection
	}
}

func httpVerdict(o evidence.Observation) (Verdict, string, string) {
	ev := fmt.Sprintf("HTTP %d: %s", o.HTTPStatus, excerpt(o.Err))
	switch {
	case nonFiniteError(o.Err):
		return NaN, "the server could not serialise a non-finite float (NaN/inf logprobs)", ev
	case nanLogRe.MatchString(o.Err):
		return NaN, "the server failed the request on NaN/inf in the logits", ev
	case o.Kind == evidence.ModelInfo && o.HTTPStatus == 404:
		return Inconclusive, "the server has no model info endpoint (not a backend failure)", ev
	case o.HTTPStatus == http.StatusGatewayTimeout:
		return Hang, "the request timed out at a gateway (HTTP 504): the server stopped answering", ev
	case gaveUp(o):
		return Hang, "the engine gave up on the request as timed out: the server stopped answering", ev
	case o.HTTPStatus >= 500:
		return Crash, "the server failed the request", ev
	default:
		return Inconclusive, "the server rejected the request (a harness or probe problem, not a backend failure)", ev
	}
}

// requestTimeoutRe is an error body that says a request timed out: an
// engine's own request timeout ("Request timed out", "TimeoutError",
// "deadline exceeded").
var requestTimeoutRe = lazyRE(`(?i)\btim(?:ed|e)[ -]?out\b|timeouterror|deadline exceeded`)

// requestTimeout reports an error body that says the request timed out,
// and names no CUDA error ("the launch timed out and was terminated" is
// a kernel's fault, a crash).
func requestTimeout(msg string) bool {
	return requestTimeoutRe.MatchString(msg) && !cudaErrorRe.MatchString(msg) && !stickyRe.MatchString(msg)
}

// Answer judges the text of a chat reply, in this order: garbage in the
// reasoning; no text from the model (zero completion tokens, empty content
// that is not a tool call); garbage in the answer, checked even when the
// expectation is met; an answer in a language the prompt did not ask for;
// truncation; the expectation.
func Answer(o evidence.Observation) (Verdict, string, string) {
	answer, thought := SplitThinking(o.Text)
	reasoning := strings.TrimSpace(strings.Join(nonEmpty(o.Reasoning, thought), "\n"))
	truncated := o.FinishReason == "length"
	ctx := textContext{prompt: o.Prompt, truncated: truncated, ended: o.FinishReason == "stop"}
	// Reasoning shorter than a few words (an empty think block, a quoted
	// "...") says nothing about its shape.
	if g, why := garbled(reasoning, ctx); g && len([]rune(reasoning)) >= 8 {
		return Garbage, "the reasoning is garbage: " + why, excerpt(reasoning)
	}
	answer = strings.TrimSpace(answer)
	if o.Tokens != nil && *o.Tokens == 0 && o.FinishReason != "tool_calls" {
		return Garbage, "the server counted 0 completion tokens: no text came from the model", excerpt(answer)
	}
	fromReasoning := false
	if answer == "" && reasoning != "" {
		if truncated {
			return Inconclusive, fmt.Sprintf("max_tokens (%d) cut the reasoning short before an answer", o.MaxTokens), excerpt(reasoning)
		}
		// Content empty with the answer in the reasoning: judge that.
		answer, fromReasoning = reasoning, true
	}
	if answer == "" {
		if o.FinishReason == "tool_calls" || o.FinishReason == "function_call" {
			if o.Expect != nil {
				return Inconclusive, "answered with a tool call, so " + o.Expect.String() + " cannot be checked", ""
			}
			return Correct, "answered with a tool call (empty content is what a tool call has)", ""
		}
		return Garbage, "empty output", ""
	}
	if g, why := garbled(answer, ctx); g {
		return Garbage, why, excerpt(answer)
	}
	if from, to, ok := languageMismatch(o.Prompt, answer); ok && !fromReasoning {
		return Wrong, fmt.Sprintf("answered in %s to a prompt in %s that asked for no other language", to, from), excerpt(answer)
	}
	met, want := Meets(o.Expect, answer, o.Prompt)
	switch {
	case truncated && met && o.Expect != nil:
		return Inconclusive, fmt.Sprintf("%s is there but the answer was cut off at max_tokens (%d)", want, o.MaxTokens), excerpt(answer)
	case truncated && o.Expect != nil:
		return Wrong, fmt.Sprintf("no %s within max_tokens (%d)", want, o.MaxTokens), excerpt(answer)
	case !met:
		return Wrong, "expected " + want, excerpt(answer)
	case o.Expect == nil:
		// Stories and sampled answers have no single right text; being cut
		// off at max_tokens is expected of them.
		return Correct, "well-formed text (no expectation: judged by shape)", excerpt(answer)
	}
	return Correct, "answered " + want, excerpt(answer)
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// SplitThinking separates <think>...</think> blocks from the answer. Text
// before a lone </think> (a template that opens the block in the prompt) is
// reasoning too; an unclosed <think> runs to the end.
func SplitThinking(text string) (answer, thought string) {
	var th []string
	if i := strings.Index(text, "</think>"); i >= 0 && !strings.Contains(text[:i], "<think>") {
		th = append(th, text[:i])
		text = text[i+len("</think>"):]
	}
	for {
		i := strings.Index(text, "<think>")
		if i < 0 {
			break
		}
		rest := text[i+len("<think>"):]
		j := strings.Index(rest, "</think>")
		if j < 0 {
			th = append(th, rest)
			text = text[:i]
			break
		}
		th = append(th, rest[:j])
		text = text[:i] + rest[j+len("</think>"):]
	}
	return text, strings.Join(th, "\n")
}

// excerpt shortens text for a report, keeping both ends.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= 240 {
		return s
	}
	return string(r[:160]) + " … " + string(r[len(r)-60:])
}

// TimedOut reports whether any of the observations timed out: the harness
// gave up waiting for an answer, or a gateway or the engine did (an HTTP
// 504, a 5xx that says the request timed out), which makes a cell timed
// out (Input's TimedOut) as much as a server that never got ready: the
// launcher sends it no more probes and takes its forensics.
func TimedOut(obs []evidence.Observation) bool {
	return slices.ContainsFunc(obs, func(o evidence.Observation) bool {
		return o.ErrKind == evidence.Timeout || gaveUp(o)
	})
}

// gaveUp reports a request that a gateway or the engine gave up on as
// timed out.
func gaveUp(o evidence.Observation) bool {
	return o.HTTPStatus == http.StatusGatewayTimeout || (o.HTTPStatus >= 500 && requestTimeout(o.Err))
}
