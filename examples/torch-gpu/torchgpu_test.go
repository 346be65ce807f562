// Package torchgpu tests the torch + transformers example: the GGUF
// conversion and the MoE model made from it (plain Python, runs wherever
// python3 does), the server on CPU with math attention and float32, dense
// through bmx and MoE through the naive and grouped_mm runners (needs torch
// 2.5+ and transformers), the matrices, and the committed H200 report.
package torchgpu

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/matrixtest"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
	"github.com/bmx-dev/bmx/internal/testenv"
)

// python is the interpreter the tests run: $TORCHGPU_PYTHON, or python3
// resolved once to the executable it runs (its sys.executable). A python3
// on PATH may be a version manager's shim (pyenv's is a bash script that
// runs pyenv exec), which costs more than most of the scripts the tests run
// with it, on every call; the resolved path is the same interpreter without
// it. Where python3 does not start, it stays "python3", for the tests to
// say so.
var python = sync.OnceValue(func() string {
	if p := os.Getenv("TORCHGPU_PYTHON"); p != "" {
		return p
	}
	out, err := exec.Command("python3", "-S", "-c", "import sys; print(sys.executable)").Output() // -S: no site-packages to set up for this
	if p := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(p) {
		return p
	}
	return "python3"
})

// needModel returns the GGUF ($TORCHGPU_MODEL, else models/ of the shared
// folder, see internal/testenv) and python3, or skips (fails in CI, which
// has both).
func needModel(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath(python()); err != nil {
		testenv.Skip(t, "the conversion test needs %s: it is not installed", python())
	}
	model := os.Getenv("TORCHGPU_MODEL")
	if model == "" {
		return testenv.Shared(t, "models", "stories260K.gguf")
	}
	model, _ = filepath.Abs(model)
	if _, err := os.Stat(model); err != nil {
		testenv.Skip(t, "the conversion test needs the model: TORCHGPU_MODEL is %s, which does not exist", model)
	}
	return model
}

// stdlib is the arguments of a python run of a script that uses the
// standard library alone (gguf2hf.py, moe.py, pipeline.py): -S, so no
// site-packages are set up. Their .pth hooks (pyenv's certifi import) cost
// more than a short script, on every call; and the run shows the script
// needs nothing else.
func stdlib(args ...string) []string {
	return append([]string{"-S"}, args...)
}

// sharedDir is where the conversions shared by the package's tests are
// made; TestMain removes it.
var sharedDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// conversion is one shared conversion: made once, by the first test that
// needs it, and only read after.
type conversion struct {
	once sync.Once
	dir  string
	err  error
}

var (
	conversionsMu sync.Mutex
	conversions   = map[string]*conversion{}
)

// shared runs python with args(dir) once per key for the package, dir a
// new directory for the conversion, and returns dir. A conversion is the same for
// the same model and seed (TestConvertMoE checks that on conversions of
// its own), and the tests only read it, so one is converted once rather
// than once per test.
func shared(t *testing.T, key string, args func(dir string) []string) string {
	t.Helper()
	conversionsMu.Lock()
	c := conversions[key]
	if c == nil {
		c = &conversion{}
		conversions[key] = c
	}
	conversionsMu.Unlock()
	c.once.Do(func() {
		conversionsMu.Lock()
		if sharedDir == "" {
			sharedDir, c.err = os.MkdirTemp("", "torchgpu-test-")
		}
		root := sharedDir
		conversionsMu.Unlock()
		if c.err != nil {
			return
		}
		if c.dir, c.err = os.MkdirTemp(root, "conversion-"); c.err != nil {
			return
		}
		argv := args(c.dir)
		cmd := exec.Command(python(), argv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			c.err = fmt.Errorf("%s %s: %v\n%s%s", python(), strings.Join(argv, " "), err, out, stderr.Bytes())
		}
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.dir
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// convert is gguf2hf.py convert of the model, made once for the package
// (shared).
func convert(t *testing.T, model string) string {
	t.Helper()
	return shared(t, "gguf2hf "+model, func(dir string) []string { return stdlib("gguf2hf.py", "convert", model, dir) })
}

type step struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Top     []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top"`
}

type generated struct {
	PromptIDs []int  `json:"prompt_ids"`
	IDs       []int  `json:"ids"`
	Text      string `json:"text"`
	Steps     []step `json:"steps"`
}

func reference(t *testing.T, dir, prompt string, n int, extra ...string) generated {
	t.Helper()
	var g generated
	out := run(t, python(), stdlib(append([]string{"gguf2hf.py", "generate", dir, prompt, fmt.Sprint(n)}, extra...)...)...)
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return g
}

// TestConvert converts the GGUF with the standard library alone and checks
// the result against llama.cpp: the checkpoint run with transformers' Llama
// semantics in plain Python must continue "Once upon a time" as llama.cpp
// did (examples/llamacpp recorded its first 40 greedy steps with top-5
// logprobs, without a BOS token, with an f16 V cache), token for token over
// the first 16 steps and within 0.01 nats on every top-5 logprob. A wrong
// rotary permutation, GQA head mapping or tokenizer merge would fail this.
func TestConvert(t *testing.T) {
	t.Parallel()
	model := needModel(t)
	dir := convert(t, model)
	var cfg map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, "config.json")), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512, "intermediate_size": 172} {
		if cfg[k] != want {
			t.Errorf("config %s = %v, want %v", k, cfg[k], want)
		}
	}
	if cfg["tie_word_embeddings"] != false {
		t.Errorf("tie_word_embeddings %v: the GGUF has its own output.weight", cfg["tie_word_embeddings"])
	}

	// The tokenizer: the probe prompts come back as they went in.
	var once []string // the pieces of "Once upon a time"
	for _, p := range []string{"Once upon a time", "Lily and her dog went to the park.", "The sun was shining and", "Tom's cat, \"Max\", jumped! 3 + 4 = 7 ☃"} {
		var tok struct {
			IDs    []int    `json:"ids"`
			Pieces []string `json:"pieces"`
			Text   string   `json:"text"`
		}
		if err := json.Unmarshal(run(t, python(), stdlib("gguf2hf.py", "tokenize", dir, p)...), &tok); err != nil {
			t.Fatal(err)
		}
		if tok.IDs[0] != 1 || tok.Text != " "+p {
			t.Errorf("%q: ids %v pieces %q decode to %q", p, tok.IDs, tok.Pieces, tok.Text)
		}
		if p == "Once upon a time" {
			once = tok.Pieces
		}
	}
	if got := strings.Join(once, "|"); got != "<s>|▁Once|▁upon|▁a|▁time" {
		t.Errorf("pieces %s", got)
	}

	var rec struct {
		Cells []struct {
			Cell  string `json:"cell"`
			Steps []struct {
				T   string  `json:"t"`
				LP  float64 `json:"lp"`
				Top []struct {
					T  string  `json:"t"`
					LP float64 `json:"lp"`
				} `json:"top"`
			} `json:"steps"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join("..", "llamacpp", "testdata", "once-logprobs.json")), &rec); err != nil {
		t.Fatal(err)
	}
	llama := rec.Cells[0].Steps
	const n = 16
	g := reference(t, dir, "Once upon a time", n, "--no-bos")
	if len(g.Steps) != n {
		t.Fatalf("%d steps: %+v", len(g.Steps), g)
	}
	worst := 0.0
	for i := range n {
		s, l := g.Steps[i], llama[i]
		if s.Token != l.T {
			t.Fatalf("step %d: %q, llama.cpp %q (text so far %q)", i, s.Token, l.T, g.Text)
		}
		for j, c := range l.Top {
			if s.Top[j].Token != c.T {
				t.Errorf("step %d candidate %d: %q, llama.cpp %q", i, j, s.Top[j].Token, c.T)
			}
			worst = max(worst, math.Abs(s.Top[j].Logprob-c.LP))
		}
	}
	t.Logf("%q: %d tokens as llama.cpp's, top-5 logprobs within %.4f nats", g.Text, n, worst)
	if worst > 0.01 {
		t.Errorf("top-5 logprobs differ from llama.cpp's by up to %.4f nats", worst)
	}
}

// TestMatrix checks the H200 matrix: 28 cells (fp4 in bfloat16 only), the
// reference first, one GPU per cell, the leaking worker on one cell.
func TestMatrix(t *testing.T) {
	t.Parallel()
	cfg, err := matrix.LoadFile("matrix.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfg.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Cells) != 28 || plan.Reference != "attention=math,dtype=float32,gemm=dense" || plan.Cells[0].ID != plan.Reference {
		t.Fatalf("%d cells, reference %q first %q", len(plan.Cells), plan.Reference, plan.Cells[0].ID)
	}
	if len(cfg.Slots) != 1 || cfg.Slots[0].GPUs != "0" {
		t.Errorf("slots %+v, want one slot of GPU 0", cfg.Slots)
	}
	leaks := 0
	for _, c := range plan.Cells {
		if strings.Contains(strings.Join(c.Args, " "), "--detached-worker") {
			leaks++
			if c.ID != "attention=efficient,dtype=float16,gemm=dense" {
				t.Errorf("the leak is on %s", c.ID)
			}
		}
	}
	if leaks != 1 {
		t.Errorf("%d leaking cells, want 1", leaks)
	}
}

// torchCheck imports torch and transformers once for the package: the
// import takes seconds where they are installed, and its answer is the
// same for every test.
var torchCheck = sync.OnceValues(func() ([]byte, error) {
	check := "import torch, transformers; from torch.nn.attention import sdpa_kernel; torch.float4_e2m1fn_x2; print(torch.__version__, transformers.__version__)"
	return exec.Command(python(), "-c", check).CombinedOutput()
})

// needTorch skips unless the interpreter has torch 2.5+ (sdpa_kernel,
// float8 and float4 dtypes) and transformers. CI cannot install them: it
// installs from Debian (bookworm: python3-torch 1.13.1, which has no
// torch.nn.attention and no float8 dtypes; no python3-transformers) and npm,
// and has no PyPI; so this test skips there too, saying so.
func needTorch(t *testing.T) {
	t.Helper()
	out, err := torchCheck()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Skipf("%s has no torch 2.5+ with transformers (%s); CI cannot install them (Debian bookworm has python3-torch 1.13.1 and no transformers; no PyPI): set TORCHGPU_PYTHON to an interpreter that has them",
			python(), lines[len(lines)-1])
	}
	t.Logf("%s: torch, transformers %s", python(), strings.TrimSpace(string(out)))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts server.py on the model with args and a free port,
// waits for /health to answer 200 (120 s at most), and returns its URL; the
// server is killed when the test ends, its log shown if the test failed.
func startServer(t *testing.T, model string, args ...string) string {
	t.Helper()
	url, _ := startServerLog(t, model, args...)
	return url
}

// serverLog is a server's output as it comes, safe to read while the
// server writes it.
type serverLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startServerLog is startServer that also returns the server's log.
func startServerLog(t *testing.T, model string, args ...string) (string, *serverLog) {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	logBuf := &serverLog{}
	srv := exec.Command(python(), append([]string{"server.py", "--model", model, "--port", fmt.Sprint(port)}, args...)...)
	srv.Stdout, srv.Stderr = logBuf, logBuf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log (%s):\n%s", strings.Join(args, " "), logBuf.String())
		}
	})
	deadline := time.Now().Add(120 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url, logBuf
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s: not ready in 120s", strings.Join(args, " "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type chatReply struct {
	Choices []struct {
		Message      struct{ Content string }
		FinishReason string `json:"finish_reason"`
		Logprobs     struct {
			Content []struct {
				Token       string
				Logprob     float64
				TopLogprobs []struct {
					Token   string
					Logprob float64
				} `json:"top_logprobs"`
			}
		}
	}
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	}
}

func post(t *testing.T, url string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp, out.Bytes()
}

// TestServerCPU starts the server on CPU (math attention, float32, dense) and
// checks its HTTP surface against the plain-Python reference of the same
// conversion: the same greedy tokens with the same logprobs, a stream that
// says the same, a 400 for a bad request, argparse's exit 2 for a bad flag.
// Then bmx sweeps the reference cell and its bfloat16 neighbour on CPU.
func TestServerCPU(t *testing.T) {
	model := needModel(t)
	needTorch(t)

	bad, err := exec.Command(python(), "server.py", "--model", model, "--attention-backend", "flex").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(bad, []byte("invalid choice: 'flex'")) {
		t.Errorf("a bad flag: %v\n%s", err, bad)
	}

	url := startServer(t, model, "--device", "cpu", "--attention-backend", "math", "--dtype", "float32")

	const n = 12
	ref := reference(t, convert(t, model), "Once upon a time", n)
	answer, worst := greedyAsReference(t, url, "Once upon a time", n, ref)
	t.Logf("server: %q, top-5 logprobs within %.2g nats of the plain-Python reference", answer, worst)
	if worst > 1e-3 {
		t.Errorf("the server's logprobs differ from the reference's by %.3g nats", worst)
	}

	// The same request streamed.
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "Once upon a time"}},
		"max_tokens": n, "temperature": 0, "stream": true, "stream_options": map[string]bool{"include_usage": true}})
	sresp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var text, finish string
	usage, done := 0, false
	sc := bufio.NewScanner(sresp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for _, x := range ch.Choices {
			text += x.Delta.Content
			if x.FinishReason != nil {
				finish = *x.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.CompletionTokens
		}
	}
	sresp.Body.Close()
	if text != ref.Text || finish != "length" || usage != n || !done {
		t.Errorf("stream: %q finish %q usage %d done %v", text, finish, usage, done)
	}

	if resp, body := post(t, url, map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "top_logprobs": 30}); resp.StatusCode != 400 || !bytes.Contains(body, []byte("top_logprobs")) {
		t.Errorf("top_logprobs 30: %d %s", resp.StatusCode, body)
	}

	sweepCPU(t, model)
}

// greedyAsReference asks the server at url for n greedy tokens after
// prompt with top-5 logprobs, fails the test unless they are the
// reference's n tokens, and returns the answer and the largest difference
// of a top-5 logprob from the reference's.
func greedyAsReference(t *testing.T, url, prompt string, n int, ref generated) (string, float64) {
	t.Helper()
	resp, body := post(t, url, map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": n, "temperature": 0, "logprobs": true, "top_logprobs": 5})
	var r chatReply
	if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
		t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
	}
	c := r.Choices[0]
	if c.Message.Content != ref.Text || c.FinishReason != "length" || r.Usage.CompletionTokens != n || len(c.Logprobs.Content) != n {
		t.Fatalf("answer %q (%s, %d tokens, %d logprobs), the reference %q", c.Message.Content, c.FinishReason, r.Usage.CompletionTokens, len(c.Logprobs.Content), ref.Text)
	}
	worst := 0.0
	for i, s := range c.Logprobs.Content {
		if s.Token != ref.Steps[i].Token || len(s.TopLogprobs) != 5 {
			t.Fatalf("step %d: %q with %d candidates, the reference %q", i, s.Token, len(s.TopLogprobs), ref.Steps[i].Token)
		}
		for j, a := range s.TopLogprobs {
			worst = max(worst, math.Abs(a.Logprob-ref.Steps[i].Top[j].Logprob))
		}
	}
	return c.Message.Content, worst
}

// bmxBinary is $BMX_BIN, or bmx built from this checkout.
func bmxBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("BMX_BIN"); b != "" {
		return b
	}
	return matrixtest.BuildBMX(t)
}

// sweepCPU runs bmx on the example's own matrix, on CPU: the reference cell
// (math, float32, dense) and math/bfloat16/dense, which bmx compares with it.
func sweepCPU(t *testing.T, model string) {
	out := t.TempDir()
	cmd := exec.Command(bmxBinary(t), "sweep", "-c", "matrix.toml", "--var", "model="+model, "--var", "device=cpu", "--var", "python="+python(),
		"--only", "attention=math", "--only", "gemm=dense", "--only", "dtype=float32", "--only", "dtype=bfloat16", "--out", out, "-q")
	stdout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bmx sweep: %v\n%s", err, stdout)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	rep := readReport(t, filepath.Join(dirs[0], "report.json"))
	got := map[string]string{}
	for _, c := range rep.Cells {
		got[c.Cell.ID] = c.Verdict
		t.Logf("%s: %s (%s)", c.Cell.ID, c.Verdict, c.Reason)
	}
	if got["attention=math,dtype=float32,gemm=dense"] != "correct" || got["attention=math,dtype=bfloat16,gemm=dense"] != "correct" || len(got) != 2 {
		t.Errorf("verdicts %v, want both correct\n%s", got, stdout)
	}
}

type report struct {
	Run struct {
		Reference string `json:"reference"`
	} `json:"run"`
	Cells []struct {
		Cell struct {
			ID string `json:"id"`
		} `json:"cell"`
		Verdict   string   `json:"verdict"`
		Reason    string   `json:"reason"`
		Signature string   `json:"signature"`
		Problems  []string `json:"problems"`
		Orphans   int      `json:"orphans"`
		Numerics  *struct {
			KL       float64 `json:"kl"`
			Compared int     `json:"compared"`
		} `json:"numerics"`
	} `json:"cells"`
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readReport(t *testing.T, path string) report {
	t.Helper()
	data := readFile(t, path)
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rep
}

// h200Want is what a person reading each cell's log and answers says
// happened on the H200 (h200/NOTES.md explains every line); the committed
// report's verdicts, and this bmx's verdicts on the committed evidence,
// must be these.
// update re-judges the committed H200 runs with this bmx's classifier and
// rewrites their results.jsonl (record.RejudgeRun), after a change to the
// classifier that changes their verdicts (the tests say so).
var update = flag.Bool("update", false, "re-judge the committed H200 runs (h200/run, h200-moe/run) and rewrite their results.jsonl")

// storedCurrent re-judges the run at dir in place with -update, then
// checks that the verdicts it stores are those this bmx gives, so that
// `bmx report` of it agrees with docs/gpu.md without --rejudge. It
// returns the run as record.Load read it.
func storedCurrent(t *testing.T, dir string) *record.Report {
	t.Helper()
	if *update {
		if _, err := record.RejudgeRun(dir, "go test -update (examples/torch-gpu)"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := record.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Judged().Changes {
		t.Errorf("%s: %s stored, %s by this bmx's classifier: go test ./examples/torch-gpu -run TestH200 -update re-judges the run", c.Cell, c.From, c.To)
	}
	return rep
}

// readmeAgrees checks that docs/gpu.md's grid of the run at dir (the code
// block holding header) is what `bmx report` prints of it now: each of the
// block's table and summary lines is in the report. rep is the run as
// record.Load reads it (storedCurrent's), read once for both checks.
func readmeAgrees(t *testing.T, rep *record.Report, dir, header string) {
	t.Helper()
	var out bytes.Buffer
	if err := reports.TableWith(&out, rep, reports.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	readme := string(readFile(t, filepath.Join("..", "..", "docs", "gpu.md")))
	at := strings.Index(readme, header)
	if at < 0 {
		t.Fatalf("docs/gpu.md has no grid headed %q", header)
	}
	block := readme[strings.LastIndex(readme[:at], "```"):]
	block = block[:strings.Index(block[3:], "```")+3]
	for _, l := range strings.Split(block, "\n") {
		if (strings.HasPrefix(l, "|") || strings.HasPrefix(l, "+") || strings.Contains(l, " cells: ")) && !strings.Contains(out.String(), l+"\n") {
			t.Errorf("docs/gpu.md's grid of %s: %q is not what bmx report prints:\n%s", dir, l, out.String())
			break
		}
	}
}

var h200Want = map[string]string{
	// The reference: judged by shape (nothing to compare it with).
	"attention=math,dtype=float32,gemm=dense": "correct",
	// Dense GEMMs: the same greedy tokens as the reference (float16,
	// float32) or bf16 rounding noise (KL <= 0.00027).
	"attention=math,dtype=bfloat16,gemm=dense":      "correct",
	"attention=math,dtype=float16,gemm=dense":       "correct",
	"attention=efficient,dtype=float32,gemm=dense":  "correct",
	"attention=efficient,dtype=bfloat16,gemm=dense": "correct",
	"attention=efficient,dtype=float16,gemm=dense":  "correct", // and the detached GPU worker, named and killed
	"attention=flash,dtype=bfloat16,gemm=dense":     "correct",
	"attention=flash,dtype=float16,gemm=dense":      "correct",
	"attention=cudnn,dtype=bfloat16,gemm=dense":     "correct",
	"attention=cudnn,dtype=float16,gemm=dense":      "correct",
	// Flash and cuDNN SDPA have no float32 kernel: "No available kernel".
	"attention=flash,dtype=float32,gemm=dense": "crash",
	"attention=flash,dtype=float32,gemm=fp8":   "crash",
	"attention=cudnn,dtype=float32,gemm=dense": "crash",
	"attention=cudnn,dtype=float32,gemm=fp8":   "crash",
	// No FP4 GEMM on sm_90: CUBLAS_STATUS_NOT_SUPPORTED.
	"attention=math,dtype=bfloat16,gemm=fp4":      "crash",
	"attention=efficient,dtype=bfloat16,gemm=fp4": "crash",
	"attention=flash,dtype=bfloat16,gemm=fp4":     "crash",
	"attention=cudnn,dtype=bfloat16,gemm=fp4":     "crash",
	// fp8 GEMMs with per-tensor scales: fluent stories, KL 0.005-0.0057
	// against the reference, greedy paths parting at near ties.
	"attention=math,dtype=float32,gemm=fp8":       "degraded",
	"attention=math,dtype=bfloat16,gemm=fp8":      "degraded",
	"attention=math,dtype=float16,gemm=fp8":       "degraded",
	"attention=efficient,dtype=float32,gemm=fp8":  "degraded",
	"attention=efficient,dtype=bfloat16,gemm=fp8": "degraded",
	"attention=efficient,dtype=float16,gemm=fp8":  "degraded",
	"attention=flash,dtype=bfloat16,gemm=fp8":     "degraded",
	"attention=flash,dtype=float16,gemm=fp8":      "degraded",
	"attention=cudnn,dtype=bfloat16,gemm=fp8":     "degraded",
	"attention=cudnn,dtype=float16,gemm=fp8":      "degraded",
}

// TestH200Report parses the committed report of the live H200 sweep and
// checks its verdicts against h200Want, then judges the committed evidence
// (h200/run: run.json, results.jsonl, logs) again with this bmx's
// classifier: a change to it that turns a real GPU verdict is caught here.
func TestH200Report(t *testing.T) {
	t.Parallel()
	path := filepath.Join("h200", "report.json")
	rep := readReport(t, path)
	if rep.Run.Reference != "attention=math,dtype=float32,gemm=dense" {
		t.Errorf("reference %q", rep.Run.Reference)
	}
	committed := map[string]string{}
	for _, c := range rep.Cells {
		committed[c.Cell.ID] = c.Verdict
	}
	readmeAgrees(t, storedCurrent(t, filepath.Join("h200", "run")), filepath.Join("h200", "run"), "| attention,dtype \\ gemm |")
	run, err := record.Load(filepath.Join("h200", "run"))
	if err != nil {
		t.Fatal(err)
	}
	run.Rejudge()
	now := map[string]string{}
	for _, r := range run.Results {
		now[r.Cell.ID] = string(r.Verdict)
		if r.Cell.ID == "attention=efficient,dtype=float16,gemm=dense" {
			named := strings.Join(r.Problems, "\n")
			if !strings.Contains(named, "--hold-gpu-worker") || !strings.Contains(named, "GPU memory was still held") {
				t.Errorf("the leaking cell's notes do not name the GPU worker and its memory: %q", named)
			}
		}
	}
	for what, got := range map[string]map[string]string{"committed report": committed, "rejudged evidence": now} {
		for id, want := range h200Want {
			if got[id] != want {
				t.Errorf("%s: %s: %q, want %q", what, id, got[id], want)
			}
		}
		if len(got) != len(h200Want) {
			t.Errorf("%s: %d cells, %d explained", what, len(got), len(h200Want))
		}
	}
}
