package classify

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// FuzzCell: any log, answer and exit give a known verdict and a reason,
// without panicking.
func FuzzCell(f *testing.F) {
	f.Add(nanAssertLog, "323", "", -1, false)
	f.Add("Traceback:\nRuntimeError: CUDA error: an illegal memory access was encountered\n", "", "", 1, false)
	f.Add("[2025-06-26 07:25:31 DP4 TP4] Watchdog timeout (self.watchdog_timeout=300)", "", "", -1, true)
	f.Add("", "OK складаระ并被渝 Keg治愈 cevap Hans Female当然是 nỗ", "", 0, false)
	f.Add("", "<think>x</think>\n\n4", "!!!!!!!!!!", 0, false)
	f.Add("\x1b[31m(Worker pid=1) what():  boom\n", "\xff\xfe", "", 139, true)
	f.Fuzz(func(t *testing.T, log, text, reasoning string, code int, timedOut bool) {
		in := Input{Log: log, TimedOut: timedOut, Observations: []evidence.Observation{{
			Probe: "p", Kind: evidence.Chat, Prompt: "What is 2+2?", Expect: evidence.Number(4),
			Text: text, Reasoning: reasoning, FinishReason: "stop", HTTPStatus: 200,
		}}}
		if code != 0 {
			in.Exit = &evidence.Exit{Code: code}
		}
		j := Cell(in)
		if !j.Verdict.Valid() || j.Verdict == Skipped || j.Verdict == Excluded || j.Verdict == Flaky {
			t.Fatalf("verdict %q", j.Verdict)
		}
		if j.Reason == "" {
			t.Fatal("no reason")
		}
		if in.Exit != nil && in.Exit.Code != 0 && j.Verdict == Correct {
			t.Fatalf("a process that died with %d judged correct", code)
		}
	})
}

// FuzzCrashSignature: signatures are bounded and valid text.
func FuzzCrashSignature(f *testing.F) {
	f.Add("RuntimeError: CUDA error: an illegal memory access was encountered")
	f.Add("  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated")
	f.Add("Fatal Python error: Segmentation fault\n\nThread 0x00007f (most recent call first):")
	f.Add(strings.Repeat("ValueError: x", 1000))
	f.Fuzz(func(t *testing.T, log string) {
		sig, line := CrashSignature(log)
		if utf8.RuneCountInString(sig) > 201 {
			t.Fatalf("signature of %d runes", utf8.RuneCountInString(sig))
		}
		if sig != "" && line == "" {
			t.Fatal("a signature without its line")
		}
	})
}

// FuzzGarbled: the detectors never panic.
func FuzzGarbled(f *testing.F) {
	f.Add("Hello! sp e : 6t8.2 100.p.`5c0F5 0,,6")
	f.Add("합니다합니다합니다합니다")
	f.Add(strings.Repeat("the cat sat on the mat. ", 10))
	f.Fuzz(func(t *testing.T, text string) {
		g, why := Garbled(text)
		if g && why == "" {
			t.Fatal("garbage without a reason")
		}
	})
}

// BenchmarkCellLog shows the classifier is linear in the log's size: compare
// ns/op of the 1 MB and the 10 MB case.
func BenchmarkCellLog(b *testing.B) {
	block := "[2026-03-10 12:00:01 TP0] Decode batch. #running-req: 16, #token: 4096, token usage: 0.02, gen throughput (token/s): 812.3\n" +
		"  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 2731, in run_scheduler_process\n" +
		"WARNING autotuner: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm\n"
	for _, size := range []int{1 << 20, 10 << 20} {
		log := strings.Repeat(block, size/len(block)) + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(log)))
			for range b.N {
				if j := Cell(Input{Log: log, Exit: &evidence.Exit{Code: 1}}); j.Verdict != Crash {
					b.Fatal(j.Verdict)
				}
			}
		})
	}
}
