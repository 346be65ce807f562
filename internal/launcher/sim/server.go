package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ReadyLine is what SGLang logs when it is ready; the sim logs it too.
const ReadyLine = "The server is fired up and ready to roll!"

// Server is one simulated SGLang server.
type Server struct {
	opts     Options
	profile  *Profile
	resolved Resolved
	rule     Rule
	speed    Speed

	logMu sync.Mutex
	logw  io.Writer

	ready atomic.Bool
	// die ends the process the way SGLang's kill_process_tree does: SIGKILL
	// to itself. Tests that serve the handler in-process replace it.
	die func()

	// vocab is the sim's tokenizer: every text it has tokenized, by id.
	vocab vocab

	mu       sync.Mutex
	inflight map[int64]int // request id -> prompt length
	nextID   int64
	dying    atomic.Bool
	// streams counts the streams being written, for the batch slowdown.
	streams atomic.Int64
	// generations counts the chat requests, for the wedge after the first.
	generations atomic.Int64
}

// killSelf ends the process at once, as a crashing server does (SIGKILL on
// Unix).
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
}

// New prepares a server; Run starts it.
func New(opts Options, profile *Profile, logw io.Writer) *Server {
	resolved := profile.Resolve(opts)
	rule := profile.Rule(resolved)
	return &Server{
		opts: opts, profile: profile, resolved: resolved, rule: rule, speed: profile.SpeedOf(rule),
		logw: logw, inflight: map[int64]int{},
		die: killSelf,
	}
}

// SetReady marks the server ready; for tests that serve the handler directly.
func (s *Server) SetReady() { s.ready.Store(true) }

// OnDeath replaces what the server does when it would kill itself.
func (s *Server) OnDeath(f func()) { s.die = f }

// logf writes one SGLang-style log line, tagged as simulated.
func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.logw, "[%s sim] %s\n", time.Now().UTC().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
}

// raw writes lines as they are, as Python prints a traceback.
func (s *Server) raw(text string) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	io.WriteString(s.logw, text)
}

// Main runs `bmx sim-server ARGS` and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	opts, err := ParseArgs(args)
	var argErr *ArgError
	switch {
	case errors.Is(err, ErrHelp):
		fmt.Fprint(stdout, Help())
		return 0
	case errors.As(err, &argErr):
		fmt.Fprintln(stderr, Usage)
		fmt.Fprintf(stderr, "%s: error: %s\n", Prog, argErr.Msg)
		return 2
	}
	if opts.PrintVersions {
		fmt.Fprint(stdout, Versions(opts.version()))
		return 0
	}
	profile := DefaultProfile()
	if opts.Profile != "" {
		data, err := os.ReadFile(opts.Profile)
		if err != nil {
			// As argparse's FileType refuses a file it cannot open.
			fmt.Fprintln(stderr, Usage)
			fmt.Fprintf(stderr, "%s: error: argument --sim-profile: can't open '%s': %s\n", Prog, opts.Profile, pyOSError(err))
			return 2
		}
		if profile, err = ParseProfile(opts.Profile, data); err != nil {
			// As argparse refuses a value its type does not take, on one
			// line: bmx reads it as a broken setup, not a backend's crash.
			fmt.Fprintln(stderr, Usage)
			fmt.Fprintf(stderr, "%s: error: argument --sim-profile: %s\n", Prog, strings.ReplaceAll(err.Error(), "\n", "; "))
			return 2
		}
	}
	s := New(opts, profile, stderr)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for sig := range sigs {
			if s.rule.IgnoreSIGTERM && sig == syscall.SIGTERM {
				s.logf("Received %s while stuck in CUDA graph capture; not responding (simulated wedged GPU)", sigName(sig))
				continue
			}
			s.logf("Received %s, shutting down", sigName(sig))
			stop()
		}
	}()
	if err := s.Run(ctx); err != nil {
		s.logf("ERROR: %v", err)
		return 1
	}
	return 0
}

// Run goes through SGLang's start-up (load weights, capture CUDA graphs, bind
// the port, warm up, report ready) as the profile's rule allows, then serves
// until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	startup := s.profile.Startup.Duration
	if s.rule.Startup.Duration > 0 {
		startup = s.rule.Startup.Duration
	}
	if s.rule.Behaviour == Slow && s.rule.Startup.Duration == 0 {
		startup *= 4
	}
	s.logf("bmx sim-server: this is a SIMULATED SGLang server (profile %s: %s); no GPU is used", s.profile.Name, s.profile.Description)
	s.logf("server_args=ServerArgs(model_path='%s', host='%s', port=%d, tp_size=%d, moe_runner_backend='%s', fp4_gemm_runner_backend='%s', attention_backend=%s, reasoning_parser=%s)",
		s.opts.ModelPath, s.opts.Host, s.opts.Port, s.opts.TP, s.opts.MoERunner, s.opts.FP4Gemm, pyStr(s.opts.Attention), pyStr(s.opts.ReasoningParser))
	s.logf("Load weight begin. avail mem=94.12 GB")
	if !sleep(ctx, startup*3/10) {
		return nil
	}
	if s.rule.Behaviour == Crash {
		s.crashAtStart()
		return nil
	}
	s.logf("Load weight end. type=Qwen3_5MoeForCausalLM, dtype=torch.bfloat16, avail mem=42.37 GB, mem usage=51.75 GB.")
	s.logf("Capture cuda graph begin. This can take up to several minutes. avail mem=41.90 GB")
	if s.rule.Behaviour == Hang {
		<-ctx.Done()
		return nil
	}
	if !sleep(ctx, startup*3/10) {
		return nil
	}
	s.logf("Capture cuda graph end. Time elapsed: %.2f s. mem usage=1.12 GB. avail mem=40.78 GB.", (startup * 3 / 10).Seconds())

	addr := net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("[Errno 98] error while attempting to bind on address %s: address already in use (%w)", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.logf("Uvicorn running on http://%s (Press CTRL+C to quit)", addr)
	if sleep(ctx, startup*4/10) {
		s.ready.Store(true)
		s.logf("%s (simulated)", ReadyLine)
		<-ctx.Done()
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func pyStr(s string) string {
	if s == "" {
		return "None"
	}
	return "'" + s + "'"
}

// crashAtStart prints the traceback SGLang's scheduler prints when a kernel
// fails during model load, then dies as kill_process_tree makes it: SIGKILL.
func (s *Server) crashAtStart() {
	frame := s.rule.Frame
	if frame == "" {
		frame = "sglang/srt/layers/quantization/modelopt_quant.py"
	}
	msg := s.rule.Error
	if msg == "" {
		msg = "RuntimeError: simulated crash at start"
	}
	s.logf("Scheduler hit an exception: Traceback (most recent call last):")
	s.raw(fmt.Sprintf(`  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2731, in run_scheduler_process
    scheduler = Scheduler(
                ^^^^^^^^^^
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 318, in initialize
    self.load_model()
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 802, in load_model
    self.model = get_model(
                 ^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/%s", line 1570, in apply
    return self.kernel(x, w, scales)
           ^^^^^^^^^^^^^^^^^^^^^^^^^
%s
[simulated by bmx sim-server]

`, frame, msg))
	s.logf("Received sigquit from a child process. It usually means the child failed.")
	s.dying.Store(true)
	s.die()
}

// nanCrash is the sampler's device-side assert on NaN probabilities, which
// SGLang's scheduler turns into a SIGKILL of the whole tree.
func (s *Server) nanCrash() {
	if !s.dying.CompareAndSwap(false, true) {
		return
	}
	s.raw(`/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion ` + "`probability tensor contains either `inf`, `nan` or element < 0`" + ` failed.
`)
	s.logf("Scheduler hit an exception: Traceback (most recent call last):")
	s.raw(`  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2731, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/sgl-workspace/sglang/python/sglang/srt/layers/sampler.py", line 131, in forward
    batch_next_token_ids = torch.multinomial(probs, num_samples=1).view(-1)
                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with ` + "`TORCH_USE_CUDA_DSA`" + ` to enable device-side assertions.
[simulated by bmx sim-server]

`)
	s.logf("Received sigquit from a child process. It usually means the child failed.")
	s.die()
}

// Handler serves SGLang's HTTP surface.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /health_generate", s.health)
	mux.HandleFunc("GET /get_model_info", s.modelInfo)
	mux.HandleFunc("GET /model_info", s.modelInfo)
	mux.HandleFunc("GET /get_server_info", s.serverInfo)
	mux.HandleFunc("GET /server_info", s.serverInfo)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/tokenize", s.tokenize)
	mux.HandleFunc("POST /tokenize", s.tokenize)
	mux.HandleFunc("POST /generate", s.generate)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Bmx-Simulated", "true")
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		s.logf("INFO:     %s - \"%s %s HTTP/1.1\" %d %s", r.RemoteAddr, r.Method, r.URL.Path, rec.status, http.StatusText(rec.status))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController flush a stream through the recorder.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorJSON is SGLang's flat error body.
func errorJSON(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": status})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) modelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": s.opts.ModelPath, "tokenizer_path": s.opts.ModelPath, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default", "simulated": true,
	})
}

func (s *Server) serverInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": s.opts.ModelPath, "host": s.opts.Host, "port": s.opts.Port, "tp_size": s.opts.TP,
		"moe_runner_backend":      s.resolved["moe_runner_backend"],
		"fp4_gemm_runner_backend": s.resolved["fp4_gemm_backend"],
		"attention_backend":       s.resolved["attention_backend"],
		"reasoning_parser":        nilIfEmpty(s.opts.ReasoningParser),
		"version":                 "bmx-sim",
		"simulated":               true,
		"sim_profile":             s.profile.Name,
		"sim_behaviour":           s.rule.Behaviour,
	})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.opts.ModelPath, "object": "model", "created": time.Now().Unix(), "owned_by": "sglang (simulated)",
		"root": s.opts.ModelPath, "parent": nil, "max_model_len": 262144,
	}}})
}

// chatMessage is one message of a chat request; its content is a string
// or a list of content parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is the message's content as text (a string, or its text parts
// joined).
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Logprobs            bool          `json:"logprobs"`
	TopLogprobs         int           `json:"top_logprobs"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// IgnoreEOS is SGLang's sampling parameter: write max_tokens tokens
	// whatever the answer.
	IgnoreEOS          bool           `json:"ignore_eos"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
}

// prompt is the last user message's text (string or content parts).
func (r *chatRequest) prompt() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			return m.text()
		}
	}
	return ""
}

// thinking decides whether the chat template thinks: the request's
// enable_thinking if given, else on for parsers that think by default.
func (s *Server) thinking(r *chatRequest) bool { return s.thinks(r.ChatTemplateKwargs) }

// thinks is thinking for a request's chat_template_kwargs.
func (s *Server) thinks(kwargs map[string]any) bool {
	if v, ok := kwargs["enable_thinking"].(bool); ok {
		return v
	}
	switch s.opts.ReasoningParser {
	case "qwen3", "deepseek-r1", "qwen3-thinking", "gpt-oss", "minimax":
		return true
	}
	return false
}

// maxTokens is the request's token budget, by either name; 128 when unset.
func (r *chatRequest) maxTokens() int {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return *r.MaxTokens
	}
	return 128
}

func (s *Server) chat(w http.ResponseWriter, req *http.Request) {
	var r chatRequest
	if err := json.NewDecoder(req.Body).Decode(&r); err != nil {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "invalid request body: "+err.Error())
		return
	}
	if len(r.Messages) == 0 {
		errorJSON(w, http.StatusBadRequest, "BadRequestError", "messages must not be empty")
		return
	}
	maxTokens := r.maxTokens()
	prompt := r.prompt()

	if s.wedged(req) {
		return
	}
	if !s.admit(w, len(prompt), r.Stream) {
		return
	}

	var answer, reasoning, finish = "", "", "stop"
	switch s.rule.Behaviour {
	case Garbage:
		answer, finish = salad(prompt, maxTokens*3/4+1), "length"
	case NaN:
		if r.Logprobs || r.TopLogprobs > 0 {
			errorJSON(w, http.StatusInternalServerError, "InternalServerError", "Out of range float values are not JSON compliant")
			return
		}
		answer, finish = strings.Repeat("!", maxTokens), "length"
	default:
		answer, reasoning = respondWith(s.rule.Behaviour, s.rule.Variant, prompt)
		if !s.thinking(&r) {
			reasoning = ""
		}
		if tokens(reasoning)+tokens(answer) > maxTokens {
			finish = "length"
			if tokens(reasoning) >= maxTokens {
				reasoning, answer = truncateTokens(reasoning, maxTokens), ""
			} else {
				answer = truncateTokens(answer, maxTokens-tokens(reasoning))
			}
		}
	}
	completion := tokens(reasoning) + tokens(answer)
	if r.IgnoreEOS && finish == "stop" {
		answer = continueAnswer(answer, maxTokens-tokens(reasoning))
		finish, completion = "length", maxTokens
	}
	if r.Stream {
		s.stream(w, req, &r, reply{answer: answer, reasoning: reasoning, finish: finish, prompt: tokens(prompt), completion: completion})
		return
	}
	msg := map[string]any{"role": "assistant", "content": answer, "reasoning_content": nil, "tool_calls": nil}
	switch {
	case reasoning != "" && s.opts.ReasoningParser != "":
		msg["reasoning_content"] = reasoning
	case reasoning != "":
		msg["content"] = "<think>\n" + reasoning + "\n</think>\n\n" + answer
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}
	if r.Logprobs || r.TopLogprobs > 0 {
		// As SGLang: every generated token, the reasoning's included.
		choice["logprobs"] = s.logprobs(strings.TrimSpace(reasoning+" "+answer), r.TopLogprobs)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("sim-%d", time.Now().UnixNano()), "object": "chat.completion", "created": time.Now().Unix(),
		"model": r.Model, "system_fingerprint": "bmx-sim (simulated)", "choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": tokens(prompt), "completion_tokens": completion,
			"total_tokens": tokens(prompt) + completion, "reasoning_tokens": tokens(reasoning)},
	})
}

// admit lets a generation of a prompt of n characters into the simulated
// scheduler: a nan-batch backend's dies under a mixed batch (a 500, and
// false); others take a token or two of decode time (a stream is paced by
// the backend's speed instead).
func (s *Server) admit(w http.ResponseWriter, n int, stream bool) bool {
	if s.rule.Behaviour == NaNBatch {
		if !s.batch(n) {
			errorJSON(w, http.StatusInternalServerError, "InternalServerError", "the scheduler died (simulated)")
			return false
		}
	} else if !stream {
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// wedged holds a generation of a wedge server after its first until the
// client gives up, and reports whether it did.
func (s *Server) wedged(req *http.Request) bool {
	if s.rule.Behaviour != Wedge || s.generations.Add(1) == 1 {
		return false
	}
	// With the body read to its end, the request's context ends when the
	// client closes the connection.
	_, _ = io.Copy(io.Discard, req.Body)
	<-req.Context().Done()
	return true
}

// batch holds a request for a short batching window; if the batch it lands
// in is large and of mixed prompt lengths, the FP4 GEMM produces NaN and the
// sampler's assert kills the server. It reports whether the request may go on.
func (s *Server) batch(promptLen int) bool {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.inflight[id] = promptLen
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
	}()
	time.Sleep(40 * time.Millisecond)
	s.mu.Lock()
	lengths := map[int]bool{}
	for _, l := range s.inflight {
		lengths[l] = true
	}
	mixed := len(s.inflight) >= 4 && len(lengths) >= 2
	s.mu.Unlock()
	if mixed {
		s.nanCrash()
		return false
	}
	return !s.dying.Load()
}

func sigName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// pyOSError words a file error as Python's OSError does: "[Errno 2] No such
// file or directory: 'x'".
func pyOSError(err error) string {
	var pe *fs.PathError
	var errno syscall.Errno
	if !errors.As(err, &pe) || !errors.As(err, &errno) {
		return err.Error()
	}
	msg := errno.Error()
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return fmt.Sprintf("[Errno %d] %s: '%s'", int(errno), msg, pe.Path)
}
