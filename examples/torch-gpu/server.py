"""An OpenAI-compatible server for stories260K on torch + transformers, with
real kernel choices as flags: the attention backend of torch's SDPA, the
dtype, the linear layers' GEMM (dense, fp8 or fp4 through
torch._scaled_mm), and, for the mixture-of-experts version of the model,
the MoE runner. Python's standard library serves HTTP; nothing needs a
network.

    python3 server.py --model stories260K.gguf --port 30000 \
        --attention-backend efficient --dtype bfloat16 --linear-gemm fp8
    python3 server.py --model stories260K.gguf --moe-runner triton --moe-renormalize on

--moe-runner turns each decoder MLP into moe.py's 8 experts with a seeded
router (top-2), made at start from the checkpoint, and runs them through
one of moe_runners.py's kernel paths: naive (a loop over the experts),
grouped_mm (torch._grouped_mm), triton (moe_triton.py's fused MoE kernel,
its block sizes from --moe-block-m/n/k) or fp8_grouped
(torch._scaled_grouped_mm). --linear-gemm then applies to the attention
projections. --moe-renormalize off skips the renormalisation of the top-k
weights.

--fp4-gemm puts the MoE runner's expert GEMMs on NVFP4 weights (moe_fp4.py:
dequant, triton_w4a16, triton_w4a4, triton_tma, scaled_mm; emulations on
Hopper of SM120's FP4 kernels), with --fp4-recipe nvfp4|mxfp4,
--fp4-scale-layout swizzled|linear and --fp4-global-scale applied|dropped.

A GGUF is converted at start (gguf2hf.py: a transformers Llama checkpoint and
its sentencepiece vocabulary) into a temporary directory; a directory that
holds a converted checkpoint is loaded as it is. Then a warmup forward pass
runs every chosen kernel once: a backend that cannot run (no kernel for the
dtype, no FP4 GEMM on the architecture) raises there, the traceback goes to
stderr and the server exits 1, as a real server does. An error while
answering is an HTTP 500 with the exception's message, its traceback in the
log.

Endpoints: GET /health (503 while loading, then 200), GET /v1/models,
POST /v1/chat/completions (the last user message is the raw prompt: the model
has no chat template; greedy below temperature 1e-5, else seeded sampling;
logprobs with top_logprobs up to 20 in OpenAI's shape; "stream": true for
server-sent events, with logprobs per chunk and the usage chunk when
stream_options.include_usage asks). Requests are answered one at a time.

Scoring given tokens, in vLLM's shape: with "continue_final_message": true
the final message is the assistant's, and its text continues the prompt as
the model's own answer would (no space prefix, no BOS); "prompt_logprobs": k
(0 to 20) adds the reply's top-level "prompt_logprobs", one entry per
prompt token (null for the first, then a map from token id to its logprob,
rank and decoded_token, holding the top k and the prompt's own token),
from one forward pass over the whole prompt. bmx scores a reference cell's
answer so (teacher forcing), to compare a cell's numbers with the
reference's on the very same tokens.

Every forward pass runs the whole sequence again (no key/value cache): the
model is tiny, and each step then goes through the chosen kernels in the
same way.

--detached-worker GIB is a deliberate leak for bmx's GPU hygiene check: the
server starts a helper process in a session of its own (as a daemonized
worker would be) that takes GIB of GPU memory and ignores SIGTERM, so it
outlives the server's process group.

--split N (or a list of devices in --device) puts the decoder layers on N
devices in order, half on each for two (pipeline.py): a server that uses
both GPUs of a bmx slot of two. --reserve-gib GIB takes GIB on each GPU
before the warm-up, as an engine's KV-cache pool does; asking for more than
the GPU has is a real CUDA out-of-memory crash at start, which fills that GPU
alone on the way.
"""
import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf2hf  # noqa: E402
import moe  # noqa: E402
import pipeline  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

ATTENTION = ("math", "efficient", "flash", "cudnn")
DTYPES = ("float32", "bfloat16", "float16")
GEMMS = ("dense", "fp8", "fp4")
MOE_RUNNERS = ("naive", "grouped_mm", "triton", "fp8_grouped")
# moe_fp4.IMPLS, RECIPES, LAYOUTS, GLOBAL (not imported here: Triton loads lazily)
FP4_GEMMS = ("none", "dequant", "triton_w4a16", "triton_w4a4", "triton_tma", "scaled_mm")


def log(msg):
    sys.stderr.write(time.strftime("[%Y-%m-%d %H:%M:%S] ") + msg + "\n")
    sys.stderr.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="server.py", description="stories260K on torch + transformers, OpenAI-compatible")
    p.add_argument("--model", required=True, help="a llama GGUF (F32) or a directory converted by gguf2hf.py")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--device", default="cuda",
                   help="cuda, cuda:N or cpu, or a comma-separated list of them to split the decoder layers over (pipeline.py)")
    p.add_argument("--split", type=int, default=1, metavar="N",
                   help="split the decoder layers over N devices: the first N visible GPUs with --device cuda (bmx's "
                        "{ngpus} for a slot of N GPUs), cpu N times with --device cpu; 1: no split")
    p.add_argument("--reserve-gib", type=float, default=0, metavar="GIB",
                   help="take GIB of memory on each GPU at start, 1 GiB at a time, and hold it (a KV-cache pool sized "
                        "by a memory fraction); more than the GPU has is a CUDA out-of-memory at start")
    p.add_argument("--attention-backend", choices=ATTENTION, default="efficient",
                   help="the only SDPA backend allowed (torch.nn.attention.sdpa_kernel)")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--linear-gemm", choices=GEMMS, default="dense",
                   help="the decoder's linear layers: dense (torch matmul in --dtype), fp8 (float8_e4m3fn, "
                        "per-tensor scales, torch._scaled_mm) or fp4 (NVFP4: float4_e2m1fn_x2 with float8_e4m3fn "
                        "scales per 16 values, torch._scaled_mm)")
    p.add_argument("--moe-runner", choices=MOE_RUNNERS, default=None,
                   help="serve the mixture-of-experts version of the model (moe.py) through this MoE kernel path; "
                        "without it the model is the dense one")
    p.add_argument("--moe-renormalize", choices=("on", "off"), default="on",
                   help="renormalise the top-k experts' weights to sum to 1 (off: the raw softmax probabilities)")
    p.add_argument("--moe-fault", choices=("none", "halve-combine", "drop-expert"), default="none",
                   help="a fault injected where every MoE runner shares the code: the combine's weights halved, or expert 0 never routed to")
    p.add_argument("--moe-experts", type=int, default=moe.EXPERTS, help="experts per MoE layer")
    p.add_argument("--moe-top-k", type=int, default=moe.TOP_K, help="experts per token")
    p.add_argument("--moe-seed", type=int, default=0, help="the seed of the experts' perturbations and the router")
    p.add_argument("--moe-block-m", type=int, default=16, help="triton runner: token rows per block (tl.dot needs 16 or more)")
    p.add_argument("--moe-block-n", type=int, default=64, help="triton runner: output columns per block")
    p.add_argument("--moe-block-k", type=int, default=32, help="triton runner: the reduction's step")
    p.add_argument("--moe-pad", type=int, default=0, metavar="N",
                   help="zero-pad the experts' intermediate size to a multiple of N (0: as the model has it), "
                        "as engines pad MoE weights for a kernel's alignment; the mixture is unchanged")
    p.add_argument("--fp4-gemm", choices=FP4_GEMMS, default="none",
                   help="the MoE runner's expert GEMMs on FP4 weights (moe_fp4.py, emulations on Hopper of SM120's "
                        "FP4 kernels): dequant (to the model's dtype, then the runner's GEMM: the reference of FP4), "
                        "triton_w4a16, triton_w4a4, triton_tma, or scaled_mm (cuBLASLt's NVFP4, Blackwell only)")
    p.add_argument("--fp4-recipe", choices=("nvfp4", "mxfp4"), default="nvfp4",
                   help="nvfp4: e4m3 scale per 16 and an fp32 global scale; mxfp4: e8m0 scale per 32, no global scale")
    p.add_argument("--fp4-scale-layout", choices=("swizzled", "linear"), default="swizzled",
                   help="the block scales as the loader hands them to the kernels, which read the 128x4 swizzle")
    p.add_argument("--fp4-global-scale", choices=("applied", "dropped"), default="applied",
                   help="dropped: the per-tensor global scales left out of the GEMM's epilogue")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--detached-worker", type=float, default=0, metavar="GIB",
                   help="start a helper in its own session holding GIB of GPU memory (a deliberate leak)")
    p.add_argument("--hold-gpu-worker", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.fp4_gemm != "none" and not args.moe_runner:
        p.error("--fp4-gemm applies to the MoE experts: it needs --moe-runner")
    try:
        args.devices = pipeline.devices(args.device, args.split)
    except ValueError as e:
        p.error(str(e))
    return args


# ---------------------------------------------------------------- the model

def build(args):
    """Loads torch, the model and the kernels; returns the engine: the next
    token's log-probabilities for a list of token ids, and those after
    every prefix of it (for scoring given tokens)."""
    logits = load(args)

    def logprobs(ids):
        """The next token's log-probabilities (float32) after ids."""
        return torch.log_softmax(logits(ids)[-1], dim=-1)

    def scores(ids):
        """The next token's log-probabilities (float32) after every prefix
        of ids, from one forward pass: row i follows ids[:i + 1]."""
        return torch.log_softmax(logits(ids), dim=-1)

    return logprobs, scores


def load(args):
    """Loads the model with the chosen kernels; returns its forward pass:
    token ids -> logits (float32) at every position."""
    from transformers import AttentionInterface, LlamaForCausalLM

    backend = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[args.attention_backend]
    dtype = getattr(torch, args.dtype)
    devs = [torch.device(d) for d in args.devices]
    device = devs[0]
    for d in devs:
        if d.type == "cuda" and (d.index or 0) >= torch.cuda.device_count():
            raise RuntimeError(f"device {d}: {torch.cuda.device_count()} GPU(s) visible "
                               f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r})")
        log(f"torch {torch.__version__} (CUDA {torch.version.cuda}), device {d}"
            + (f" ({torch.cuda.get_device_name(d)}, sm_{''.join(map(str, torch.cuda.get_device_capability(d)))})"
               if d.type == "cuda" else ""))

    def sdpa(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        # One sequence, no padding, no cache: causal attention, no mask
        # tensor, so every backend is eligible and only --attention-backend
        # decides. Grouped-query heads are repeated as transformers does.
        rep = query.shape[1] // key.shape[1]
        if rep > 1:
            key = key.repeat_interleave(rep, dim=1)
            value = value.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(query, key, value, is_causal=query.shape[2] > 1, scale=scaling)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register("bmx_sdpa", sdpa)
    model_dir = args.model_dir
    log(f"loading {model_dir} with LlamaForCausalLM, attention: torch SDPA, backend {args.attention_backend}")
    model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation="bmx_sdpa")
    model.to(device=device, dtype=dtype).eval()
    if args.moe_runner:
        build_moe(model, args, dtype, device)
    if len(devs) > 1:
        # After the MoE layers (their weights are buffers, which move) and
        # before the quantized linears (made on their weights' devices).
        log(f"pipeline over {len(devs)} devices: {pipeline.place(model, args.devices)}")
    if args.linear_gemm != "dense":
        n = swap_linears(model, args.linear_gemm)
        log(f"linear GEMM {args.linear_gemm}: {n} linear layers quantized (torch._scaled_mm); lm_head and embeddings stay {args.dtype}")
    params = sum(p.numel() for p in model.parameters())
    log(f"model: {params} parameters in {args.dtype} on {', '.join(args.devices)}")
    if args.reserve_gib > 0:
        reserve(args.reserve_gib, devs)

    @torch.inference_mode()
    def logits(ids):
        x = torch.tensor([ids], dtype=torch.long, device=device)
        with sdpa_kernel([backend]):
            return model(input_ids=x, use_cache=False).logits[0].float()

    return logits


def reserve(gib, devs):
    """Takes gib of memory on each GPU among devs, 1 GiB at a time, and
    keeps it (State.pool) for as long as the server runs."""
    for d in devs:
        if d.type != "cuda":
            log(f"--reserve-gib {gib:g}: nothing reserved on {d}")
            continue
        free, total = torch.cuda.mem_get_info(d)
        log(f"reserving {gib:g} GiB on {d} ({free / 2**30:.1f} of {total / 2**30:.1f} GiB free)")
        left = gib
        while left > 0:
            n = min(left, 1.0)
            S.pool.append(torch.empty(int(n * (1 << 30)), dtype=torch.uint8, device=d))
            left -= n
        log(f"reserved {gib:g} GiB on {d}")


def build_moe(model, args, dtype, device):
    """Replaces each decoder MLP with moe.py's experts behind the chosen
    runner."""
    import moe_runners
    t0 = time.time()
    cfg, tensors = moe.build(args.model_dir, experts=args.moe_experts, top_k=args.moe_top_k, seed=args.moe_seed)
    block = (args.moe_block_m, args.moe_block_n, args.moe_block_k)
    fp4 = {"impl": args.fp4_gemm, "recipe": args.fp4_recipe, "layout": args.fp4_scale_layout,
           "global_scale": args.fp4_global_scale}
    n = moe_runners.swap_mlps(model, tensors, cfg, args.moe_runner, args.moe_renormalize == "on", dtype, device, block,
                              pad=args.moe_pad, fault=args.moe_fault, fp4=fp4)
    weights = sum(len(a) for _, a in tensors.values())
    log(f"MoE: {n} layers of {cfg['num_experts']} experts, {weights} weights (hidden {cfg['hidden_size']}, intermediate "
        f"{cfg['intermediate_size']}" + (f", padded to a multiple of {args.moe_pad}" if args.moe_pad > 0 else "") + f"), top-{cfg['top_k']}, renormalize {args.moe_renormalize}, fault {args.moe_fault}, seed {cfg['seed']}, "
        f"runner {args.moe_runner}" + (f" (blocks {block[0]}x{block[1]}x{block[2]})" if args.moe_runner == "triton" else "")
        + (f", expert GEMMs fp4 {args.fp4_gemm} ({args.fp4_recipe}, scales {args.fp4_scale_layout}, global scale "
           f"{args.fp4_global_scale}; an emulation on Hopper of SM120's FP4 kernels)" if args.fp4_gemm != "none" else "")
        + f", built in {time.time() - t0:.2f}s")


def swap_linears(model, kind):
    """Replaces the decoder layers' nn.Linear modules with quantized ones."""
    cls = {"fp8": Fp8Linear, "fp4": Fp4Linear}[kind]
    n = 0
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, mod in list(parent.named_children()):
                if isinstance(mod, torch.nn.Linear):
                    setattr(parent, name, cls(mod.weight.detach()))
                    n += 1
    return n


def _ceil(n, m):
    return (n + m - 1) // m * m


class Fp8Linear(torch.nn.Module):
    """float8_e4m3fn weights with one scale per tensor, activations
    quantized per tensor on the fly, torch._scaled_mm (cuBLASLt) with the
    output in the model's dtype. Shapes are padded to multiples of 16."""

    def __init__(self, weight):
        super().__init__()
        w = weight.float()
        self.N, self.K = w.shape
        self.Np, self.Kp = _ceil(self.N, 16), _ceil(self.K, 16)
        w = F.pad(w, (0, self.Kp - self.K, 0, self.Np - self.N))
        self.w_scale = (w.abs().amax().clamp(min=1e-12) / 448.0).float()
        self.w8 = (w / self.w_scale).clamp(-448, 448).to(torch.float8_e4m3fn)

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.K).float()
        M = x2.shape[0]
        x2 = F.pad(x2, (0, self.Kp - self.K, 0, _ceil(M, 16) - M))
        xs = (x2.abs().amax().clamp(min=1e-12) / 448.0).float()
        x8 = (x2 / xs).clamp(-448, 448).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(x8, self.w8.t(), scale_a=xs, scale_b=self.w_scale, out_dtype=x.dtype)
        return y[:M, :self.N].reshape(*lead, self.N)


# E2M1 (FP4) magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6; rounding goes by the
# midpoints between them.
E2M1_MID = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def to_blocked(s):
    """cuBLAS's swizzled layout for block scales: 128x4 tiles, each as
    32x16 (rows and columns padded to 128 and 4)."""
    rows, cols = s.shape
    nr, nc = -(-rows // 128), -(-cols // 4)
    p = torch.zeros(nr * 128, nc * 4, dtype=s.dtype, device=s.device)
    p[:rows, :cols] = s
    blocks = p.view(nr, 128, nc, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def quant_nvfp4(t):
    """t (R, C) float32, C a multiple of 16 -> (packed float4_e2m1fn_x2
    (R, C/2), float8_e4m3fn scales (R, C/16)): each 16 values' scale is
    their largest magnitude over 6."""
    R, C = t.shape
    blocks = t.reshape(R, C // 16, 16)
    scale = (blocks.abs().amax(-1) / 6.0).clamp(min=2.0 ** -9, max=448.0).to(torch.float8_e4m3fn)
    q = blocks / scale.float().unsqueeze(-1)
    mid = torch.tensor(E2M1_MID, device=t.device)
    codes = torch.bucketize(q.abs().clamp(max=6.0), mid).to(torch.uint8) | ((q < 0).to(torch.uint8) << 3)
    codes = codes.reshape(R, C)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.contiguous().view(torch.float4_e2m1fn_x2), scale


class Fp4Linear(torch.nn.Module):
    """NVFP4: float4_e2m1fn_x2 weights and activations with a float8_e4m3fn
    scale per 16 values (in cuBLAS's swizzled layout), torch._scaled_mm with
    a bfloat16 output. Rows are padded to 128, K to 64."""

    def __init__(self, weight):
        super().__init__()
        w = weight.float()
        self.N, self.K = w.shape
        self.Np, self.Kp = _ceil(self.N, 128), _ceil(self.K, 64)
        w = F.pad(w, (0, self.Kp - self.K, 0, self.Np - self.N))
        self.w4, ws = quant_nvfp4(w)
        self.w_scale = to_blocked(ws)

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.K).float()
        M = x2.shape[0]
        x2 = F.pad(x2, (0, self.Kp - self.K, 0, _ceil(M, 128) - M))
        x4, xs = quant_nvfp4(x2)
        y = torch._scaled_mm(x4, self.w4.t(), scale_a=to_blocked(xs), scale_b=self.w_scale, out_dtype=torch.bfloat16)
        return y[:M, :self.N].to(x.dtype).reshape(*lead, self.N)


# ---------------------------------------------------------------- serving

class BadRequest(Exception):
    pass


class State:
    ready = False
    pool = []  # --reserve-gib's memory
    logprobs = None
    scores = None
    tok = None
    name = "stories260K"
    max_len = 2048
    lock = threading.Lock()


S = State()


def text_of(m):
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    raise BadRequest(f"a{'n' if m.get('role') == 'assistant' else ''} {m.get('role')} message's content must be a string or a list of parts")


def prompt_of(req):
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list")
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of(m)
    raise BadRequest("no user message")


def prompt_ids(req):
    """The prompt's token ids: the last user message's, and with
    continue_final_message the final (assistant's) message's after them,
    tokenized as text that continues the prompt, as a generated answer
    does (vLLM's prefill of an answer; add_generation_prompt has nothing to
    add here, the model has no chat template)."""
    ids = S.tok.encode(prompt_of(req))
    if req.get("continue_final_message") is not True:
        return ids
    if req.get("add_generation_prompt") is True:
        raise BadRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    last = req["messages"][-1]
    if not isinstance(last, dict) or last.get("role") != "assistant":
        raise BadRequest("continue_final_message is set but the final message is not the assistant's")
    return ids + S.tok.encode(text_of(last), bos=False, space_prefix=False)


def options(req):
    def num(key, default, lo, hi, kind=float):
        v = req.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise BadRequest(f"{key} must be a number from {lo} to {hi}")
        if kind is int and v != int(v):
            raise BadRequest(f"{key} must be an integer")
        return kind(v)

    max_tokens = num("max_tokens", None, 1, S.max_len, int) if req.get("max_tokens") is not None else \
        num("max_completion_tokens", 128, 1, S.max_len, int)
    k = num("top_logprobs", 0, 0, 20, int)
    pk = None
    if req.get("prompt_logprobs") is not None:
        pk = num("prompt_logprobs", None, 0, 20, int)
        if req.get("stream") is True:
            raise BadRequest("`prompt_logprobs` are not available when `stream=True`.")
    return {
        "prompt_logprobs": pk,
        "max_tokens": max_tokens,
        "temperature": num("temperature", 1.0, 0, 2),
        "seed": num("seed", 0, -2 ** 63, 2 ** 64, int),
        "logprobs": req.get("logprobs") is True or k > 0,
        "top": k,
        "ignore_eos": req.get("ignore_eos") is True,
    }


def piece(tid):
    b = S.tok.piece_bytes(tid)
    return b.decode("utf-8", errors="replace"), list(b)


def lp_entry(tid, lp, k):
    tok, b = piece(tid)
    e = {"token": tok, "bytes": b, "logprob": float(lp[tid]), "top_logprobs": []}
    if k:
        vals, idx = torch.topk(lp, k)
        for v, i in zip(vals.tolist(), idx.tolist()):
            t, tb = piece(i)
            e["top_logprobs"].append({"token": t, "bytes": tb, "logprob": v})
    return e


def prompt_logprobs(ids, k):
    """vLLM's prompt_logprobs of ids: None for the first token, then for
    each token a map from token id (a string, as JSON keys are) to its
    logprob, rank and decoded_token, for the top k at that position and
    the prompt's own token. One forward pass scores them all."""
    lp = S.scores(ids).cpu()
    out = [None]
    for i in range(1, len(ids)):
        row, tid = lp[i - 1], ids[i]
        entry = {}
        if k:
            vals, idx = torch.topk(row, k)
            for rank, (v, j) in enumerate(zip(vals.tolist(), idx.tolist()), 1):
                entry[str(j)] = {"logprob": v, "rank": rank, "decoded_token": piece(j)[0]}
        if str(tid) not in entry:
            v = float(row[tid])
            entry[str(tid)] = {"logprob": v, "rank": 1 + int((row > v).sum()), "decoded_token": piece(tid)[0]}
        out.append(entry)
    return out


def generate(ids, o, on_token=None):
    """Continues the prompt's token ids; returns (token ids, logprob
    entries, finish reason, prompt length). on_token(tid, entry) is called
    per token; it returns False to stop."""
    if len(ids) + o["max_tokens"] > S.max_len:
        raise BadRequest(f"the prompt ({len(ids)} tokens) plus max_tokens ({o['max_tokens']}) exceeds the context of {S.max_len}")
    gen, entries, finish = [], [], "length"
    g = None
    if o["temperature"] > 1e-5:
        g = torch.Generator().manual_seed(o["seed"] % (2 ** 63))
    for _ in range(o["max_tokens"]):
        lp = S.logprobs(ids + gen).cpu()
        if g is None:
            tid = int(torch.argmax(lp))
        else:
            probs = torch.softmax(lp / o["temperature"], dim=-1)
            tid = int(torch.multinomial(probs, 1, generator=g))
        e = lp_entry(tid, lp, o["top"]) if o["logprobs"] else None
        if tid == S.tok.eos and not o["ignore_eos"]:
            finish = "stop"
            break
        gen.append(tid)
        if e is not None:
            entries.append(e)
        if on_token is not None and on_token(tid, e) is False:
            return None
    return gen, entries, finish, len(ids)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "torch-gpu-example/1"

    def log_message(self, fmt, *args):
        log("http: " + fmt % args)

    def _send(self, status, obj):
        try:
            body = json.dumps(obj, allow_nan=False).encode()
        except ValueError as e:  # NaN or inf in the numbers, as Starlette's JSONResponse refuses them
            log("ValueError: " + str(e))
            status, body = 500, json.dumps({"error": {"message": "Out of range float values are not JSON compliant",
                                                      "type": "server_error", "code": 500}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status, msg, kind):
        self._send(status, {"error": {"message": msg, "type": kind, "code": status}})

    def do_GET(self):
        if self.path == "/health":
            if not S.ready:
                return self._error(503, "Loading model", "unavailable_error")
            return self._send(200, {"status": "ok"})
        if self.path == "/v1/models":
            return self._send(200, {"object": "list", "data": [
                {"id": S.name, "object": "model", "created": 0, "owned_by": "torch-gpu-example", "max_model_len": S.max_len}]})
        self._error(404, "Not Found", "not_found_error")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if self.path != "/v1/chat/completions":
            return self._error(404, "Not Found", "not_found_error")
        if not S.ready:
            return self._error(503, "Loading model", "unavailable_error")
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise BadRequest("the body must be a JSON object")
            ids, o = prompt_ids(req), options(req)
        except (ValueError, BadRequest) as e:
            return self._error(400, str(e), "invalid_request_error")
        plp = None
        with S.lock:
            if req.get("stream") is True:
                return self._stream(req, ids, o)
            try:
                if o["prompt_logprobs"] is not None:
                    plp = prompt_logprobs(ids, o["prompt_logprobs"])
                out = generate(ids, o)
            except BadRequest as e:
                return self._error(400, str(e), "invalid_request_error")
            except Exception as e:
                traceback.print_exc()
                return self._error(500, f"{type(e).__name__}: {e}", "server_error")
        gen, entries, finish, n_prompt = out
        choice = {"index": 0, "message": {"role": "assistant", "content": S.tok.decode(gen)}, "finish_reason": finish}
        if o["logprobs"]:
            choice["logprobs"] = {"content": entries}
        reply = {
            "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()), "model": S.name,
            "choices": [choice],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": len(gen), "total_tokens": n_prompt + len(gen)},
        }
        if plp is not None:
            reply["prompt_logprobs"] = plp
        self._send(200, reply)

    def _stream(self, req, ids, o):
        cid, created = f"chatcmpl-{time.time_ns()}", int(time.time())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(choices, usage=None):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": S.name, "choices": choices}
            if usage is not None:
                obj["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        gen, pending = [], []
        sent = [""]

        def on_token(tid, e):
            gen.append(tid)
            if e is not None:
                pending.append(e)
            text = S.tok.decode(gen)
            if text.endswith("\ufffd") or len(text) <= len(sent[0]):
                return True  # inside a UTF-8 character: wait for the rest
            delta = {"index": 0, "delta": {"content": text[len(sent[0]):]}, "finish_reason": None}
            if o["logprobs"]:
                delta["logprobs"] = {"content": pending[:]}
                pending.clear()
            sent[0] = text
            try:
                chunk([delta])
            except (BrokenPipeError, ConnectionResetError):
                return False
            return True

        try:
            chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            out = generate(ids, o, on_token)
            if out is None:
                return
            _, _, finish, n_prompt = out
            chunk([{"index": 0, "delta": {}, "finish_reason": finish}])
            if isinstance(req.get("stream_options"), dict) and req["stream_options"].get("include_usage") is True:
                chunk([], {"prompt_tokens": n_prompt, "completion_tokens": len(gen), "total_tokens": n_prompt + len(gen)})
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as e:
            traceback.print_exc()
            code = 400 if isinstance(e, BadRequest) else 500
            kind = "invalid_request_error" if code == 400 else "server_error"
            self.wfile.write(b"data: " + json.dumps({"error": {"message": f"{type(e).__name__}: {e}", "type": kind, "code": code}}).encode() + b"\n\n")


# ---------------------------------------------------------------- the leak

def hold_gpu(gib):
    """The detached worker: take GIB of GPU memory, say so, ignore SIGTERM,
    and stay until killed."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    print(f"worker {os.getpid()} holds {gib:g} GiB", flush=True)
    while True:
        time.sleep(60)


def start_worker(gib):
    w = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--model", "-", "--hold-gpu-worker", str(gib)],
                         stdout=subprocess.PIPE, start_new_session=True, text=True)
    line = w.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"the detached worker {w.pid} exited ({w.wait()}) before taking its memory")
    log(f"detached worker pid {w.pid} (own session {os.getsid(w.pid)}): {line}")


# ---------------------------------------------------------------- main

def main(argv):
    args = parse_args(argv)
    if args.hold_gpu_worker is not None:
        return hold_gpu(args.hold_gpu_worker)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: (log(f"received {signal.Signals(s).name}, shutting down"), os._exit(0)))
    S.name = args.served_model_name or os.path.splitext(os.path.basename(args.model.rstrip("/")))[0]
    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    log(f"listening on http://{args.host}:{httpd.server_address[1]} (loading: /health answers 503)")
    log("args: " + " ".join(f"{k}={v}" for k, v in vars(args).items() if k != "hold_gpu_worker"))

    tmp = None
    if os.path.isdir(args.model):
        args.model_dir = args.model
    else:
        tmp = tempfile.mkdtemp(prefix="torch-gpu-")
        cfg = gguf2hf.convert(args.model, tmp)
        log(f"converted {args.model} into {tmp}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
            f"{cfg['num_attention_heads']} heads ({cfg['num_key_value_heads']} kv), vocab {cfg['vocab_size']}")
        args.model_dir = tmp
    try:
        S.tok = gguf2hf.Tokenizer.load(args.model_dir)
        with open(os.path.join(args.model_dir, "config.json")) as f:
            S.max_len = args.max_model_len or json.load(f)["max_position_embeddings"]
        S.logprobs, S.scores = build(args)
        if args.detached_worker > 0:
            start_worker(args.detached_worker)
        t0 = time.time()
        log(f"warmup: a forward pass through {args.attention_backend} attention and the {args.linear_gemm} GEMM in {args.dtype}"
            + (f", MoE runner {args.moe_runner}" if args.moe_runner else ""))
        lp = S.logprobs(S.tok.encode("Once upon a time"))
        if lp.device.type == "cuda":
            torch.cuda.synchronize()
        top = int(torch.argmax(lp))
        log(f"warmup done in {time.time() - t0:.2f}s: next token {S.tok.decode([top])!r} logprob {float(lp[top]):.4f}")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    S.ready = True
    log(f"The server is ready: {S.name} on {', '.join(args.devices)}, attention {args.attention_backend}, {args.dtype}, {args.linear_gemm} GEMM"
        + (f", MoE runner {args.moe_runner}, renormalize {args.moe_renormalize}" if args.moe_runner else ""))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
