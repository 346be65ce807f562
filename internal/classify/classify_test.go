package classify

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/bmx-dev/bmx/internal/evidence"
)

func obs(text string) evidence.Observation {
	return evidence.Observation{Probe: "p", Kind: evidence.Chat, Prompt: "What is 300+23?", Expect: evidence.Number(323), MaxTokens: 64, Text: text, FinishReason: "stop", HTTPStatus: 200}
}

func TestAnswer(t *testing.T) {
	contains := &evidence.Expect{Contains: "OK"}
	tests := []struct {
		name   string
		o      evidence.Observation
		want   Verdict
		reason string
	}{
		{"plain right answer", obs("300 + 23 = **323**"), Correct, "answered the number 323"},
		{"answer first, operands after", obs("323 is the sum of 300 and 23."), Correct, ""},
		{"wrong number", obs("300 + 23 = 324"), Wrong, "expected the number 323"},
		{"passing the number in a list", obs("1 2 3 300 323 400 500"), Wrong, ""},
		{"think block stripped", obs("<think>300 plus 23. Maybe 324? No.</think>\n\n323"), Correct, ""},
		{"think block alone is not the answer", obs("<think>323</think>\n\nI cannot say."), Wrong, ""},
		{"empty", obs(""), Garbage, "empty output"},
		{"exclamation run", obs("3!!!!!!!!!!!!!!!"), Garbage, "NaN logits"},
		{"plus run", obs("++++++++++++++++"), Garbage, "a run of 16 \"+\""},
		{"punctuation only", obs(", , ."), Garbage, "punctuation-only"},
		{"salad containing the answer", func() evidence.Observation {
			o := obs("OK складаระ并被渝 Keg治愈 cevap Hans Female当然是 nỗ")
			o.Expect = contains
			return o
		}(), Garbage, "multilingual"},
		{"word loop", obs("323 Cheng Cheng Cheng Cheng Cheng"), Garbage, "repeated 5 times"},
		{"korean verb loop", obs("323 합니다합니다합니다합니다합니다"), Garbage, "a loop"},
		{"loop without sentence ends", obs("323 " + strings.Repeat("we need to compute the total distance traveled based on the given input parameters and then ", 3)), Garbage, "repeats itself"},
		{"sentence loop", obs(strings.Repeat("The answer to the question that you asked me is three hundred and twenty three. ", 4)), Garbage, "the same sentence 4 times"},
		{"replacement characters", obs("323 \uFFFD\uFFFD"), Garbage, "replacement characters"},
		{"mostly non-words", obs("Hello! sp e : 6t8.2 100.p.`5c0F5 0,,6 8 0 InK spref-10 spè,,q Fo v sp,Å 1:3Kh21out2"), Garbage, "non-words"},
		{"truncated but present", func() evidence.Observation { o := obs("300 + 23 = 323, and"); o.FinishReason = "length"; return o }(), Inconclusive, "cut off"},
		{"truncated and absent", func() evidence.Observation {
			o := obs("Let me think about this step")
			o.FinishReason = "length"
			return o
		}(), Wrong, "within max_tokens"},
		{"reasoning cut short", func() evidence.Observation {
			o := obs("")
			o.Thinking, o.Reasoning, o.FinishReason = true, "The user asks for 300+23. Let me add the hundreds first", "length"
			return o
		}(), Inconclusive, "cut the reasoning short"},
		{"answer only in reasoning", func() evidence.Observation {
			o := obs("")
			o.Thinking, o.Reasoning = true, "300 + 23 = 323"
			return o
		}(), Correct, ""},
		{"garbage in the reasoning alone", func() evidence.Observation {
			o := obs("323")
			o.Thinking, o.Reasoning = true, strings.Repeat("!", 40)
			return o
		}(), Garbage, "reasoning is garbage"},
		{"answer in content, reasoning apart", func() evidence.Observation {
			o := obs("300 + 23 = **323**")
			o.Thinking, o.Reasoning = true, "The user asks for 300+23. Working it out: 300 + 23 gives 323."
			return o
		}(), Correct, ""},
		{"contains any case, whole word", func() evidence.Observation { o := obs("ok."); o.Expect = contains; return o }(), Correct, ""},
		{"contains is not a prefix", func() evidence.Observation { o := obs("Okay"); o.Expect = contains; return o }(), Wrong, ""},
		{"regex", func() evidence.Observation {
			o := obs("1, 2, 3")
			o.Expect = &evidence.Expect{Regex: `\b1\b\D+2\b\D+3\b`}
			return o
		}(), Correct, ""},
		{"exact", func() evidence.Observation { o := obs(" yes \n"); o.Expect = &evidence.Expect{Exact: "yes"}; return o }(), Correct, ""},
		{"shape only", func() evidence.Observation {
			o := obs("Once upon a time, there was a little girl named Lily.")
			o.Expect = nil
			return o
		}(), Correct, "judged by shape"},
		{"count to fifty is not a loop", func() evidence.Observation {
			var nums []string
			for i := 1; i <= 50; i++ {
				nums = append(nums, string(rune('0'+i/10))+string(rune('0'+i%10)))
			}
			o := obs(strings.Join(nums, ", "))
			o.Expect = nil
			return o
		}(), Correct, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, reason, _ := Observation(tt.o)
			if v != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("got %s (%s), want %s (%q)", v, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestObservationErrors(t *testing.T) {
	tests := []struct {
		name string
		o    evidence.Observation
		want Verdict
	}{
		{"NaN 500", evidence.Observation{HTTPStatus: 500, Err: "Out of range float values are not JSON compliant", ErrKind: evidence.HTTPError}, NaN},
		{"other 500", evidence.Observation{HTTPStatus: 500, Err: "Internal Server Error", ErrKind: evidence.HTTPError}, Crash},
		{"400", evidence.Observation{HTTPStatus: 400, Err: "bad", ErrKind: evidence.HTTPError}, Inconclusive},
		{"model info 404", evidence.Observation{Kind: evidence.ModelInfo, HTTPStatus: 404, ErrKind: evidence.HTTPError}, Inconclusive},
		{"timeout", evidence.Observation{ErrKind: evidence.Timeout}, Hang},
		{"connection", evidence.Observation{ErrKind: evidence.Connection, Err: "EOF"}, Crash},
		{"aborted", evidence.Observation{ErrKind: evidence.Aborted}, Inconclusive},
		{"null logprobs", evidence.Observation{Text: "OK", Expect: &evidence.Expect{Contains: "OK"}, Logprobs: &evidence.Logprobs{Tokens: 2, Null: 1}}, NaN},
		{"model info", evidence.Observation{Kind: evidence.ModelInfo, Text: "/m", HTTPStatus: 200}, Correct},
		{"model info empty", evidence.Observation{Kind: evidence.ModelInfo, HTTPStatus: 200}, Wrong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, reason, _ := Observation(tt.o); v != tt.want {
				t.Errorf("got %s (%s), want %s", v, reason, tt.want)
			}
		})
	}
}

const nanAssertLog = `[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/layers/sampler.py", line 131, in forward
/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion ` + "`probability tensor contains either `inf`, `nan` or element < 0`" + ` failed.
torch.AcceleratorError: CUDA error: device-side assert triggered
[2026-03-10 12:00:01] Received sigquit from a child process. It usually means the child failed.
`

// TestCellPrecedence pins the precedence rules in the package doc.
func TestCellPrecedence(t *testing.T) {
	good := []evidence.Observation{obs("323")}
	killed := &evidence.Exit{Code: -1, Signal: "SIGKILL"}
	tests := []struct {
		name      string
		in        Input
		want      Verdict
		signature string
	}{
		{"NaN assert that killed the server is nan", Input{Log: nanAssertLog, Exit: killed, Observations: good}, NaN, "probability tensor contains either"},
		{"watchdog kill after a stall is hang", Input{Log: "[2025-06-26 07:25:31 DP4 TP4] Watchdog timeout (self.watchdog_timeout=300)", Exit: killed, TimedOut: true}, Hang, "Watchdog timeout"},
		{"exit is a crash", Input{Log: "Traceback:\nRuntimeError: FlashInfer-CUTLASS MoE kernel does not support current device sm_120\n", Exit: &evidence.Exit{Code: 1}}, Crash, "RuntimeError: FlashInfer-CUTLASS MoE kernel does not support current device sm_120"},
		{"CUDA error beats the consequence", Input{Log: "RuntimeError: CUDA error: an illegal memory access was encountered\nEOFError\nRuntimeError: Initialization failed. Please see the error messages above.\n", Exit: &evidence.Exit{Code: 1}}, Crash, "CUDA error: an illegal memory access was encountered"},
		{"no kernel image in graph capture is a crash naming the kernel", Input{Log: "Exception: Capture cuda graph failed: CUDA error: no kernel image is available for execution on the device\nPossible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n", Exit: &evidence.Exit{Code: 1}}, Crash, "no kernel image is available"},
		{"exit with an empty log", Input{Exit: killed}, Crash, "killed by SIGKILL"},
		{"alive and timed out is hang", Input{Log: "Capture cuda graph begin. This can take up to several minutes.\n", TimedOut: true}, Hang, "stuck after: Capture cuda graph begin"},
		{"timed out beats an HTTP 500", Input{TimedOut: true, Observations: []evidence.Observation{{Probe: "c", HTTPStatus: 500, Err: "Internal Server Error", ErrKind: evidence.HTTPError}}}, Hang, ""},
		{"traceback in a serving log is not a crash", Input{Log: "WARNING autotuner: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm\nTraceback (most recent call last):\nValueError: skipped tactic\n", Observations: good}, Correct, ""},
		{"worst probe decides", Input{Observations: []evidence.Observation{obs("323"), obs("324"), obs("!!!!!!!!!!")}}, Garbage, ""},
		{"nan beats garbage", Input{Observations: []evidence.Observation{obs("!!!!!!!!!!"), {Probe: "q", HTTPStatus: 500, Err: "Out of range float values are not JSON compliant", ErrKind: evidence.HTTPError}}}, NaN, "Out of range float values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Cell(tt.in)
			if j.Verdict != tt.want || !strings.Contains(j.Signature, tt.signature) {
				t.Errorf("got %s %q (%s), want %s %q", j.Verdict, j.Signature, j.Reason, tt.want, tt.signature)
			}
			if j.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

func TestCellCorrectNeedsEveryProbe(t *testing.T) {
	in := Input{Observations: []evidence.Observation{obs("323"), {Probe: "m", Kind: evidence.ModelInfo, HTTPStatus: 404, ErrKind: evidence.HTTPError}}}
	if j := Cell(in); j.Verdict != Inconclusive {
		t.Errorf("got %s: a probe that could not be judged must keep the cell from correct", j.Verdict)
	}
}

func TestCrashSignature(t *testing.T) {
	tests := []struct{ log, want string }{
		{"(WorkerDict pid=859188) RuntimeError: CUDA error: an illegal memory access was encountered", "CUDA error: an illegal memory access was encountered"},
		{"  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: boom", "[PG ID 2 PG GUID 3 Rank] Process group watchdog thread terminated with exception: boom"},
		{"[TensorRT-LLM][ERROR] Assertion failed: no tactic", "[TensorRT-LLM][ERROR] Assertion failed: no tactic"},
		{"Fatal Python error: Segmentation fault", "Fatal Python error: Segmentation fault"},
		{"  File \"/a/b/c.py\", line 1\nAssertionError", "AssertionError"},
		{"all is well\n", ""},
		{"ValueError: at 0x7f8416d6c1b6 in /usr/local/lib/python3.10/dist-packages/torch/x.py pid=1234", "ValueError: at 0x… in …/x.py pid"},
	}
	for _, tt := range tests {
		if got, _ := CrashSignature(tt.log); got != tt.want {
			t.Errorf("CrashSignature(%q)\n got %q\nwant %q", tt.log, got, tt.want)
		}
	}
}

func TestSplitThinking(t *testing.T) {
	tests := []struct{ in, answer, thought string }{
		{"<think>a</think>b", "b", "a"},
		{"a</think>b", "b", "a"},
		{"x<think>a", "x", "a"},
		{"plain", "plain", ""},
	}
	for _, tt := range tests {
		a, th := SplitThinking(tt.in)
		if a != tt.answer || th != tt.thought {
			t.Errorf("SplitThinking(%q) = %q, %q", tt.in, a, th)
		}
	}
}

func TestVerdictSeverity(t *testing.T) {
	order := []Verdict{Correct, Inconclusive, Wrong, Garbage, NaN, Hang, Crash}
	for i := 1; i < len(order); i++ {
		if order[i].Severity() <= order[i-1].Severity() {
			t.Errorf("%s should be worse than %s", order[i], order[i-1])
		}
	}
	if Skipped.Severity() >= Correct.Severity() || !Excluded.Valid() || Verdict("fine").Valid() {
		t.Error("skipped/excluded/unknown verdicts")
	}
}

func TestIsFatal(t *testing.T) {
	fatal := []string{
		"[2026-03-10 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
		"[2025-05-23 18:02:42] Received sigquit from a child process. It usually means the child failed.",
		"SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
		"Rank 0 scheduler is dead. Please check if there are relevant logs.",
		"(APIServer pid=1) ERROR Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
		"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
		"[2025-06-26 07:25:31 DP4 TP4] Watchdog timeout (self.watchdog_timeout=300)",
		"TokenizerManager hit an exception: boom",
	}
	benign := []string{
		"WARNING autotuner: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm",
		"Traceback (most recent call last):",
		"ValueError: skipped tactic",
		"INFO: 127.0.0.1:5678 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
		"Capture cuda graph begin. This can take up to several minutes.",
	}
	for _, l := range fatal {
		if !IsFatal([]byte(l)) {
			t.Errorf("not fatal: %s", l)
		}
	}
	for _, l := range benign {
		if IsFatal([]byte(l)) {
			t.Errorf("fatal: %s", l)
		}
	}
}

func BenchmarkIsFatal(b *testing.B) {
	line := []byte(strings.Repeat("y", 127))
	b.ReportAllocs()
	for range b.N {
		IsFatal(line)
	}
}

func TestStalledByACrashedRank(t *testing.T) {
	log := `[2026-03-10 12:00:01 TP3] RuntimeError: CUDA error: an illegal memory access was encountered
[2026-03-10 12:00:02 TP0] Decode batch. #running-req: 16
`
	j := Cell(Input{Log: log, TimedOut: true})
	if j.Verdict != Crash || j.Signature != "CUDA error: an illegal memory access was encountered" {
		t.Errorf("got %s %q", j.Verdict, j.Signature)
	}
	j = Cell(Input{Log: "[2026-03-10 12:00:02 TP0] Decode batch. #running-req: 16\nValueError: skipped tactic\n", TimedOut: true})
	if j.Verdict != Hang {
		t.Errorf("a plain exception in a stalled server: got %s", j.Verdict)
	}
}

func TestAgree(t *testing.T) {
	story := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
	tests := []struct {
		a, b string
		want bool
	}{
		{story, story, true},
		{story, "Once upon a time, there was a little girl named Lily. She loved to paint pictures of the sea.", true},
		{story, "Once upon a time, there was a big dog named Max. He loved to run.", true},
		{story, "The stock market closed lower on Tuesday as investors weighed new data.", false},
		{"323", "323", true},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got, score := Agree(tt.a, tt.b); got != tt.want {
			t.Errorf("Agree(%q, %q) = %v (%.2f), want %v", tt.a, tt.b, got, score, tt.want)
		}
	}
}

func TestReference(t *testing.T) {
	shape := func(text string) evidence.Observation {
		return evidence.Observation{Probe: "story", Kind: evidence.Chat, Prompt: "Once upon a time", Text: text, FinishReason: "length", HTTPStatus: 200}
	}
	ref := &Reference{Cell: "fa=off,k=f16", Observations: []evidence.Observation{
		shape("Once upon a time, there was a little girl named Lily. She loved to play outside in the park."),
		obs("323"),
	}}
	tests := []struct {
		name   string
		o      evidence.Observation
		want   Verdict
		reason string
	}{
		{"agrees", shape("Once upon a time, there was a little girl named Lily. She liked the sun."), Correct, "agrees with the reference"},
		{"coherent but elsewhere", shape("The stock market closed lower on Tuesday as investors weighed new data on jobs."), Wrong, "diverges from the reference cell fa=off,k=f16"},
		{"expectation decides, reference quoted", obs("324"), Wrong, `the reference cell fa=off,k=f16 answered "323"`},
		{"sampled is judged by shape", func() evidence.Observation {
			o := shape("The sea is wide and deep. Waves roll in from far away.")
			temp := float32(0.8)
			o.Temperature = &temp
			return o
		}(), Correct, "shape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Cell(Input{Observations: []evidence.Observation{tt.o}, Reference: ref})
			if j.Verdict != tt.want || !strings.Contains(j.Probes[0].Reason, tt.reason) {
				t.Errorf("got %s (%s), want %s (%q)", j.Verdict, j.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestNumberRules(t *testing.T) {
	tests := []struct {
		text, prompt string
		want         float64
		ok           bool
	}{
		{"Four.", "What is 2+2?", 4, true},
		{"twenty-three", "What is 20+3?", 23, true},
		{"4. In binary that is 100.", "What is 2+2?", 4, true},
		{"Let's add: 300 + 20 = 320, then 320 + 3 = 323.", "What is 300+23?", 323, true},
		{"The answer is 5.", "What is 2+2?", 4, false},
		{"1, 2, 3, 300, 323, 400", "What is 300+23?", 323, false},
		{"I don't know.", "What is 2+2?", 4, false},
	}
	for _, tt := range tests {
		if got, _ := Meets(evidence.Number(tt.want), tt.text, tt.prompt); got != tt.ok {
			t.Errorf("Meets(%v, %q) = %v, want %v", tt.want, tt.text, got, tt.ok)
		}
	}
}

func TestExitZero(t *testing.T) {
	done := &evidence.Exit{Code: 0}
	if j := Cell(Input{Exit: done, Observations: []evidence.Observation{obs("323")}}); j.Verdict != Correct {
		t.Errorf("an offline run that finished and answered: %s (%s)", j.Verdict, j.Reason)
	}
	if j := Cell(Input{Exit: done}); j.Verdict != Crash {
		t.Errorf("a server that quit with 0 before answering anything: %s", j.Verdict)
	}
	if j := Cell(Input{Exit: done, Log: "AssertionError: bad\n", Observations: []evidence.Observation{obs("323")}}); j.Verdict != Crash {
		t.Errorf("exit 0 after an error: %s", j.Verdict)
	}
}

func TestNaNInLog(t *testing.T) {
	for _, l := range []string{
		"WARNING: logits contain NaN at step 3",
		"Detected errors during sampling! NaN in the logits.",
		"ValueError: Out of range float values are not JSON compliant: nan",
		"found nan in hidden states of layer 12",
	} {
		if j := Cell(Input{Log: l, Exit: &evidence.Exit{Code: 1}}); j.Verdict != NaN {
			t.Errorf("%q: %s", l, j.Verdict)
		}
	}
	if j := Cell(Input{Log: "Loaded nanobind extension; finance data", Exit: &evidence.Exit{Code: 1}}); j.Verdict == NaN {
		t.Error("'nan' inside a word is not NaN evidence")
	}
}

func TestScriptSalad(t *testing.T) {
	if g, _ := Garbled("OK 并被 складывать ระบบ ölçü"); !g {
		t.Error("four scripts in a short answer should be salad")
	}
	if g, _ := Garbled("Tokyo is called 東京 in Japanese."); g {
		t.Error("two scripts are ordinary")
	}
}

func TestErrorLineSignature(t *testing.T) {
	log := `load: bad special token: 'tokenizer.ggml.padding_token_id' = 4294967295, using default id -1
[node-llama-cpp] Failed simulating context resource usage. Falling back to estimation heuristic. Error: Failed to create context
llama_init_from_model: quantized V cache requires flash_attn to be enabled
common_init_from_params: failed to create context with model 'stories260K.gguf'
main: exiting due to model loading error
`
	if sig, _ := CrashSignature(log); sig != "llama_init_from_model: quantized V cache requires flash_attn to be enabled" {
		t.Errorf("signature %q: want the first error line that is not a recovery", sig)
	}
}

func TestMoreShapes(t *testing.T) {
	for _, g := range []string{
		"0 0 0 0 0 0 0 0 0 0",
		"ĠĠĠĠĠĠĠĠĠĠĠĠ",
		"<|im_end|><|im_end|><|im_end|><|im_end|>",
		"aSdFgHjKl QwErTyUiOp zXcVbNm PoIuYtReW lKjHgFdS mNbVcXz qAzWsXeDc RfVtGbYhN",
	} {
		if ok, _ := Garbled(g); !ok {
			t.Errorf("not garbage: %q", g)
		}
	}
	for _, fine := range []string{
		"I bought an iPhone at McDonald's near the JavaScript meetup, and it was great fun for everyone there.",
		"The numbers are 7, 7 and 8.",
	} {
		if ok, why := Garbled(fine); ok {
			t.Errorf("garbage (%s): %q", why, fine)
		}
	}
}

func TestInferredErrorKinds(t *testing.T) {
	tests := []struct {
		o    evidence.Observation
		want Verdict
	}{
		{evidence.Observation{Probe: "c", Err: "Connection refused"}, Crash},
		{evidence.Observation{Probe: "c", Err: "Read timed out. (read timeout=600)"}, Hang},
		{evidence.Observation{Probe: "c", HTTPStatus: 500, Err: "Internal Server Error"}, Crash},
		{evidence.Observation{Probe: "c", HTTPStatus: 500, Err: "RuntimeError: probability tensor contains either inf, nan or element < 0"}, NaN},
		{evidence.Observation{Probe: "c", HTTPStatus: 400, Err: "context length exceeded"}, Inconclusive},
	}
	for _, tt := range tests {
		if v, reason, _ := Observation(tt.o); v != tt.want {
			t.Errorf("%+v: %s (%s), want %s", tt.o, v, reason, tt.want)
		}
	}
}

func TestRealWorldLoops(t *testing.T) {
	for _, s := range []string{
		// vLLM #31856 (MiniMax NVFP4): the reasoning repeats its sentence.
		"We need to compute total distance traveled based on a given parameters\nSystem: \nA train travels at 60 mph for 2 hours.\nWe need to compute a total distance traveled based on a given input parameters\nUser: \nWe need to compute a total distance traveled based on a given input parameters\nSystem: \nWe need to compute a total distance traveled based on a given input parameters",
		// Sampled NVFP4 collapse into function-word soup.
		"and the of a to in that is was he for it with as his on be at by i this had not are but from or have an they which one",
		// A dash loop in the reasoning (gemma-4 nvfp4 report).
		"Respond'-friendly, helpful, and-invitingly to l-start-the-conversation" + strings.Repeat("-", 60),
	} {
		if ok, _ := Garbled(s); !ok {
			t.Errorf("not garbage: %q", s)
		}
	}
	prose := "The sea is a vast body of salt water that covers most of the Earth. It is home to countless creatures, from tiny plankton to enormous whales, and it shapes the weather of the whole planet."
	if ok, why := Garbled(prose); ok {
		t.Errorf("prose judged garbage: %s", why)
	}
}

func TestBMXOwnLinesAreNoEvidence(t *testing.T) {
	log := "# bmx: cell moe=error_failed (attempt 1, slot \"\")\n# bmx: srv --moe error_failed RuntimeError: boom\nSegmentation fault\n"
	j := Cell(Input{Log: log, Exit: &evidence.Exit{Code: -1, Signal: "SIGSEGV"}})
	if j.Verdict != Crash || strings.Contains(j.Signature, "bmx") || strings.Contains(j.Evidence, "# bmx") {
		t.Errorf("got %s %q (%q): a signature from bmx's own header", j.Verdict, j.Signature, j.Evidence)
	}
	// The header quotes axis values that read as a fatal line: the
	// launcher's watch (IsFatal) must not stop the server on it, nor a
	// record that an older bmx stopped on it keep it as the cause.
	header := "# bmx: cell wd=error: Scheduler hit an exception (attempt 1, slot \"\")"
	if IsFatal([]byte(header)) {
		t.Errorf("IsFatal(%q): bmx's own line", header)
	}
	if !IsFatal([]byte("[2026-03-10 12:00:09 TP0] Scheduler hit an exception: Traceback")) {
		t.Error("IsFatal misses the server's own fatal line")
	}
	j = Cell(Input{Log: header + "\nserver started\n", Fatal: header})
	if j.Verdict == Crash || strings.Contains(j.Evidence, "# bmx") {
		t.Errorf("a record stopped on bmx's own header: %s %q", j.Verdict, j.Evidence)
	}
}

// TestFingerprint: the classifier's fingerprint is its code's: comments,
// spacing and test files leave it as it is, a changed rule changes it.
func TestFingerprint(t *testing.T) {
	if f := Fingerprint(); len(f) != 12 || strings.Trim(f, "0123456789abcdef") != "" || f != Fingerprint() {
		t.Errorf("Fingerprint() = %q", f)
	}
	code := "package classify\n\n// Limit is a rule.\nconst Limit = 0.002\n"
	base := codeHash(fstest.MapFS{"a.go": {Data: []byte(code)}})
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		same bool
	}{
		{"comment and spacing", fstest.MapFS{"a.go": {Data: []byte("package classify\n// Limit is the rule.\nconst Limit   =   0.002 // nats\n")}}, true},
		{"a test added", fstest.MapFS{"a.go": {Data: []byte(code)}, "a_test.go": {Data: []byte("package classify\n")}}, true},
		{"rule changed", fstest.MapFS{"a.go": {Data: []byte(strings.Replace(code, "0.002", "0.01", 1))}}, false},
		{"file added", fstest.MapFS{"a.go": {Data: []byte(code)}, "b.go": {Data: []byte("package classify\n")}}, false},
	} {
		if got := codeHash(tc.fs); (got == base) != tc.same {
			t.Errorf("%s: %s, base %s: same %v, want %v", tc.name, got, base, got == base, tc.same)
		}
	}
}
