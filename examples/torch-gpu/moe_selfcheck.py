"""Checks every MoE runner of server.py on this machine, in one short run
that cannot hang: one line per combination.

    python3 examples/torch-gpu/moe_selfcheck.py [--model stories260K.gguf] [--device cuda]
        [--runners naive,grouped_mm,triton,fp8_grouped] [--dtypes float32,bfloat16,float16]
        [--timeout 60]

For each runner x dtype x renormalize (on, off), the MoE model is built as
the server builds it (server.load: efficient attention, dense attention
GEMMs) and runs a forward pass over a short prompt; the line says ok or the
exception (type and first line), the largest absolute difference of its
logits (every position) from the naive runner's in float32 with the same
renormalisation, how many positions' greedy next token agree with it, and
milliseconds per forward pass (the mean of 10, after 2 warm-up passes,
synchronized). A renormalize-off line also says how far it is from the
renormalised reference: the bug's size.

Then each runner x dtype runs a lone MoE layer with seeded weights whose
shapes every kernel accepts (hidden 64, intermediate 256, 33 tokens), to
tell a kernel that refuses the model's shapes (intermediate 172) from one
that does not work at all.

Each runner runs in a child process of its own, killed with its process
group after --timeout seconds (a hung kernel, a poisoned CUDA context stay
in it); the whole check stays under three minutes by default.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf2hf  # noqa: E402

PROMPT = "Once upon a time there was a little girl named Lily. She"
RUNNERS = ("naive", "grouped_mm", "triton", "fp8_grouped")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="moe_selfcheck.py", description="check every MoE runner, one line per combination")
    p.add_argument("--model", default=os.environ.get("TORCHGPU_MODEL") or os.path.join(HERE, "..", "..", "..", "shared", "models", "stories260K.gguf"),
                   help="the GGUF ($TORCHGPU_MODEL, else ../shared/models/stories260K.gguf)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--runners", default=",".join(RUNNERS))
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for each runner's child process")
    p.add_argument("--budget", type=float, default=170.0, help="seconds for the whole check: a child gets what is left, at most --timeout")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ref", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------- the parent

def main(argv):
    args = parse_args(argv)
    if args.child:
        return child(args)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="moe-selfcheck-")
    try:
        model_dir = os.path.join(tmp, "model")
        gguf2hf.convert(args.model, model_dir)
        ref = os.path.join(tmp, "ref.pt")
        print(f"moe_selfcheck: {args.model} on {args.device}, prompt {PROMPT!r}", flush=True)
        deadline = t0 + args.budget
        for runner in args.runners.split(","):
            left = deadline - time.time()
            if left < 5:
                print(f"{runner:11s} not run: the time budget of {args.budget:g}s is spent", flush=True)
                continue
            run_child(args, runner, model_dir, ref, min(args.timeout, left))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"moe_selfcheck: done in {time.time() - t0:.1f}s", flush=True)
    return 0


def run_child(args, runner, model_dir, ref, timeout):
    """Runs one runner's checks in a child of its own session; prints its
    lines, and what went wrong if it did not finish in timeout seconds."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", runner, "--model-dir", model_dir, "--ref", ref,
           "--device", args.device, "--dtypes", args.dtypes, "--timeout", str(timeout)]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        why = None if proc.returncode == 0 else f"exited {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        why = f"killed after {timeout:.0f}s (a hang, or slower than the limit)"
    sys.stdout.write(out)
    if why:
        tail = [ln for ln in err.strip().splitlines() if ln.strip()][-6:]
        print(f"{runner:11s} child {why}; stderr's last lines:", flush=True)
        for ln in tail:
            print("    " + ln[:300])
    print(f"{runner:11s} ({time.time() - t0:.1f}s)", flush=True)


# ---------------------------------------------------------------- the child

def child(args):
    import faulthandler
    import functools

    # A hang in this process dumps every thread's stack before the parent
    # kills it.
    faulthandler.dump_traceback_later(max(1.0, args.timeout - 3), exit=True)
    import moe
    import torch
    import server

    moe.build = functools.lru_cache(maxsize=None)(moe.build)
    runner = args.child
    tok = gguf2hf.Tokenizer.load(args.model_dir)
    ids = tok.encode(PROMPT)
    refs = torch.load(args.ref) if os.path.exists(args.ref) else {}
    if runner == "naive":
        versions = f"torch {torch.__version__}"
        if args.device.startswith("cuda"):
            versions += f", {torch.cuda.get_device_name()}, sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
        try:
            import triton
            versions += f", triton {triton.__version__}"
        except ImportError as e:
            versions += f", no triton ({e})"
        print(versions, flush=True)
    for dtype in args.dtypes.split(","):
        for renorm in ("on", "off"):
            line, logits = model_check(args, runner, dtype, renorm, ids, tok, refs)
            print(line, flush=True)
            if runner == "naive" and dtype == "float32" and logits is not None:
                refs[("model", renorm)] = logits.cpu()
                torch.save(refs, args.ref)
    for dtype in args.dtypes.split(","):
        line, out = layer_check(args, runner, dtype, refs)
        print(line, flush=True)
        if runner == "naive" and dtype == "float32" and out is not None:
            refs[("layer",)] = out.cpu()
            torch.save(refs, args.ref)
    return 0


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def timed(fn, sync):
    """fn's result and its mean milliseconds over 10 calls, after 2."""
    for _ in range(2):
        out = fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        out = fn()
    sync()
    return out, (time.perf_counter() - t0) * 100


def model_check(args, runner, dtype, renorm, ids, tok, refs):
    import torch
    import server

    name = f"{runner:11s} {dtype:8s} renorm={renorm:3s}"
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    try:
        a = server.parse_args(["--model", args.model_dir, "--device", args.device, "--attention-backend", "efficient",
                               "--dtype", dtype, "--moe-runner", runner, "--moe-renormalize", renorm])
        a.model_dir = args.model_dir
        t0 = time.time()
        forward = server.load(a)
        built = time.time() - t0
        logits, ms = timed(lambda: forward(ids), sync)
    except Exception as e:  # the line is the point: the kernel's refusal, as it is
        return f"{name}: error {first_line(e)}", None
    line = f"{name}: ok    {ms:7.2f} ms/forward (build {built:.1f}s)"
    ref = refs.get(("model", renorm))
    if runner == "naive" and dtype == "float32":
        line += ", the reference"
        ref = None
    if not torch.isfinite(logits).all():
        line += f", {int((~torch.isfinite(logits)).sum())} non-finite logits"
    if ref is not None:
        ref = ref.to(logits.device)
        agree = int((logits.argmax(-1) == ref.argmax(-1)).sum())
        nxt = tok.decode([int(logits[-1].argmax())])
        line += (f", max |logit diff| vs naive float32 {float((logits - ref).abs().max()):.4g}, "
                 f"greedy {agree}/{len(ids)} agree, next {nxt!r}")
    on = refs.get(("model", "on"))
    if renorm == "off" and on is not None:
        on = on.to(logits.device)
        line += (f"; vs renormalised: max diff {float((logits - on).abs().max()):.3g}, "
                 f"greedy {int((logits.argmax(-1) == on.argmax(-1)).sum())}/{len(ids)}")
    return line, logits


def layer_check(args, runner, dtype, refs):
    """A lone MoE layer with shapes every kernel accepts."""
    import torch
    import moe_runners

    E, H, inter, T = 8, 64, 256, 33
    name = f"{runner:11s} {dtype:8s} layer I={inter}"
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    g = torch.Generator().manual_seed(0)
    router = torch.randn(E, H, generator=g) / H ** 0.5
    w13 = torch.randn(E, 2 * inter, H, generator=g) / H ** 0.5
    w2 = torch.randn(E, H, inter, generator=g) / inter ** 0.5
    x = torch.randn(1, T, H, generator=g)
    try:
        dt, dev = getattr(torch, dtype), torch.device(args.device)
        layer = moe_runners.MoE(router, w13, w2, 2, True, runner, dt, dev)
        xd = x.to(device=dev, dtype=dt)
        with torch.inference_mode():
            out, ms = timed(lambda: layer(xd).float(), sync)
    except Exception as e:
        return f"{name}: error {first_line(e)}", None
    line = f"{name}: ok    {ms:7.3f} ms/call"
    ref = refs.get(("layer",))
    if ref is not None:
        ref = ref.to(out.device)
        line += f", max |diff| vs naive float32 {float((out - ref).abs().max()):.4g} (output RMS {float(ref.pow(2).mean().sqrt()):.3g})"
    return line, out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
