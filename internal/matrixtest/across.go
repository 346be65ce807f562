package matrixtest

// AcrossProfile is the simulated host the history and publish tests sweep
// at many versions: moe_runner flashinfer_cutlass crashes from version 7
// on (a flip), flashinfer_cutedsl answers garbage at versions 3, 5 and 9
// only (a flake), flashinfer_trtllm decodes five times slower from
// version 10 on (a perf drop).
const AcrossProfile = `name = "across"
startup = "100ms"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutlass" }
since = 7
behaviour = "crash"
error = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 3
before = 4
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 5
before = 6
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_cutedsl" }
since = 9
before = 10
behaviour = "garbage"
[[rule]]
when = { moe_runner_backend = "flashinfer_trtllm" }
since = 10
behaviour = "correct"
speed = { token_latency = "5ms" }
`

// LightProbes is a probe file for the tests that sweep many runs to read
// them across (history, publish): two greedy probes tell correct from
// garbage and crash, and the performance probe at concurrency 1 only (the
// level history and publish compare) sees a fivefold slowdown; its default
// 64 tokens keep a loaded host's TTFT noise under the 10% a shift must
// pass (16 tokens did not: a 16% "improvement" under load). The smoke set
// would cost several times the time a sweep.
const LightProbes = GreedyProbes + `
[perf]
concurrency = 1
`

// GreedyProbes are the smoke set's two short greedy probes, with logprobs,
// as a probe file's [[probe]] tables (a [perf] table may follow).
const GreedyProbes = `[[probe]]
name = "say-ok"
prompt = "Say 'OK'"
max_tokens = 32
logprobs = true
expect = { contains = "OK" }

[[probe]]
name = "math"
prompt = "What is 300+23?"
max_tokens = 64
logprobs = true
expect = { number = 323 }
`

// FakeSMI is an nvidia-smi that reports one GPU named by its first
// argument, so two configs are two simulated hosts.
const FakeSMI = `q=""
for a in "$@"; do case "$a" in --query-gpu=*) q="${a#--query-gpu=}";; esac; done
if [ -z "$q" ]; then echo "NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: 13.0"; exit 0; fi
out=""
IFS=,
for f in $q; do
  case "$f" in index) v=0;; name) v="$GPU_NAME";; compute_cap) v=9.0;; driver_version) v=580.00;; memory.total) v=143771;; memory.used) v=0;; *) v="[N/A]";; esac
  out="${out:+$out, }$v"
done
echo "$out"
`
