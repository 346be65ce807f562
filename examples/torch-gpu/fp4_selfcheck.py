"""The FP4 expert GEMMs checked before any sweep (moe_fp4.py): each fp4_gemm
implementation against the dequantise-then-bf16-matmul reference, per
shape, on random and on the model's real expert matrices; it exits 1 and
says FP4 SELF-CHECK FAILED when a path that should run is off.

    python3 examples/torch-gpu/fp4_selfcheck.py [--model stories260K.gguf] [--timeout 120]
        [--impls dequant,triton_w4a16,triton_w4a4,triton_tma,scaled_mm] [--no-model]

Per implementation (a child process of its own, so a kernel that faults or
hangs takes only its own lines) and per shape (E experts x N x K, M rows):
  - the torch quantiser against nvfp4.py's (the bytes, on a small matrix);
  - the expert GEMM through the three entries the runners use (one
    expert's rows, rows grouped by expert, the fused layout with the token
    gather and the top-k weights): max |out - ref| / max |ref|, where ref is
    the weights dequantised (global scale applied), cast to bf16, times
    the bf16 activations, per expert, in float32 accumulation;
  - W4A4 also against the reference on its own quantised activations;
  - the knobs' size (the reference path, against the unquantised float32
    GEMM): nvfp4, mxfp4, the scales linear, the global scale dropped;
  - triton_tma on a K whose packed rows are not a multiple of 16 bytes.
Then (--no-model skips it) each MoE runner x implementation serves a
forward pass of the model (server.load, bfloat16, --moe-pad 32): the max
logit difference from the naive runner's bfloat16 forward without FP4.

Tolerances: 1e-2 of the output's largest value for dequant, triton_w4a16
and triton_tma against the reference and for triton_w4a4 against its own
quantised-activation reference (the bf16 rounding of the decoded weights and
of the output); scaled_mm must raise on sm_90 (no FP4 GEMM before
Blackwell) and match like the others where it runs.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

IMPLS = ("dequant", "triton_w4a16", "triton_w4a4", "triton_tma", "scaled_mm")
TOL = 1e-2


def parse(argv):
    p = argparse.ArgumentParser(prog="fp4_selfcheck.py")
    p.add_argument("--model", default=os.environ.get("TORCHGPU_MODEL") or os.path.join(HERE, "..", "..", "..", "shared", "models", "stories260K.gguf"))
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--no-model", action="store_true")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv):
    args = parse(argv)
    if args.child:
        return child(args)
    import tempfile
    import gguf2hf
    t0 = time.time()
    model_dir = tempfile.mkdtemp(prefix="fp4-selfcheck-")
    gguf2hf.convert(args.model, model_dir)
    failed = []
    for impl in args.impls.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", impl, "--model-dir", model_dir]
        if args.no_model:
            cmd.append("--no-model")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            sys.stdout.write(r.stdout)
            if r.returncode != 0:
                failed.append(impl)
                tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-8:]
                print(f"{impl}: child exited {r.returncode}; stderr's last lines:")
                for ln in tail:
                    print("    " + ln[:300])
        except subprocess.TimeoutExpired as e:
            failed.append(impl)
            sys.stdout.write(e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
            print(f"{impl}: killed after {args.timeout:.0f}s")
        sys.stdout.flush()
    print(f"fp4_selfcheck: {time.time() - t0:.1f}s; " + (f"FP4 SELF-CHECK FAILED: {', '.join(failed)}" if failed else "every path as expected"))
    return 1 if failed else 0


def rel(out, ref):
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-30))


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160] if text else ''}"


def child(args):
    import torch
    import moe_fp4
    import moe_runners
    import nvfp4
    impl = args.child
    dev = torch.device("cuda")
    bad = []
    cap = torch.cuda.get_device_capability()
    blackwell = cap[0] >= 10
    if impl == IMPLS[0]:
        import triton
        print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}, sm_{cap[0]}{cap[1]}")
        # The torch quantiser against the standard-library reference.
        g = torch.Generator().manual_seed(1)
        for recipe in ("nvfp4", "mxfp4"):
            w = torch.randn(1, 8, 64, generator=g) * 0.05
            p, s, gs = moe_fp4.quantise(w.to(dev), recipe)
            rp, rs, rgs = nvfp4.quantise([float(v) for v in w.flatten()], 8, 64, recipe)
            diff = sum(a != b for a, b in zip(p.cpu().flatten().tolist(), rp))
            sdiff = sum(a != b for a, b in zip(s.cpu().flatten().tolist(), rs))
            st = moe_fp4.store_scales(s, "swizzled").cpu().flatten().tolist()
            rst = nvfp4.store_scales(rs, 8, 64 // nvfp4.RECIPES[recipe], "swizzled")
            print(f"quantiser {recipe}: torch vs nvfp4.py: {diff} of {len(rp)} packed bytes differ, {sdiff} of {len(rs)} scales, "
                  f"global {float(gs[0]):.6g} vs {rgs:.6g}, swizzled store {'equal' if st == list(rst) else 'DIFFERS'}")
            if diff or sdiff or st != list(rst):
                bad.append(f"quantiser {recipe}")
    shapes = [("random", *random_experts(8, 256, 512)), ("random-K64", *random_experts(8, 128, 64))]
    if args.model_dir:
        shapes += real_experts(args.model_dir)
    for name, w in shapes:
        E, N, K = w.shape
        M = 48
        g = torch.Generator().manual_seed(2)
        x = torch.randn(M, K, generator=g).to(dev, torch.bfloat16)
        ids = torch.randint(0, E, (M // 2, 2), generator=g).to(dev)
        try:
            fw = moe_fp4.Fp4Experts(w.to(dev), impl)
            wref = moe_fp4.dequantise(fw.packed, fw.stored, fw.gs, K).to(torch.bfloat16)
            torch.cuda.synchronize()
        except Exception as e:
            print(f"{impl:12s} {name:10s} {E}x{N}x{K}: build error {first_line(e)}")
            bad.append(name)
            continue
        line = f"{impl:12s} {name:10s} {E}x{N}x{K}:"
        for entry in ("expert", "grouped") + (("fused",) if impl.startswith("triton") else ()):
            try:
                out, ref, ref_a4 = entry_run(fw, wref, x, ids, entry, impl, moe_runners, moe_fp4)
                torch.cuda.synchronize()
                err = rel(out, ref)
                line += f" {entry} {err:.2e}"
                if not torch.isfinite(out).all():
                    line += " NONFINITE"
                    bad.append(f"{name} {entry}")
                if impl == "triton_w4a4":
                    e4 = rel(out, ref_a4)
                    line += f" (own {e4:.2e})"
                    if e4 > TOL:
                        bad.append(f"{name} {entry}")
                elif err > TOL:
                    bad.append(f"{name} {entry}")
                if impl == "scaled_mm" and not blackwell:
                    bad.append(f"{name} {entry}: ran on sm_{cap[0]}{cap[1]}")
            except Exception as e:
                line += f" {entry} error {first_line(e)}"
                if not (impl == "scaled_mm" and not blackwell):
                    bad.append(f"{name} {entry}")
                torch.cuda.synchronize()
        print(line, flush=True)
        if impl == "dequant":
            knobs(w.to(dev), x, name)
    if impl == "triton_tma":
        # K = 176: rows of 88 packed bytes, not a multiple of 16.
        w = random_experts(2, 128, 176)[0]
        try:
            fw = moe_fp4.Fp4Experts(w.to(dev), impl)
            fw.expert(torch.randn(16, 176, device=dev, dtype=torch.bfloat16), 0)
            torch.cuda.synchronize()
            print(f"triton_tma   K=176 (88-byte rows): ran")
        except Exception as e:
            print(f"triton_tma   K=176 (88-byte rows): {first_line(e)}")
    if not args.no_model and args.model_dir:
        model_lines(args, impl, bad)
    if bad:
        print(f"{impl}: FAILED: {'; '.join(bad)}", flush=True)
        return 1
    return 0


def random_experts(E, N, K):
    import torch
    g = torch.Generator().manual_seed(N * 1000 + K)
    # Rows of different magnitudes, so the block and global scales matter.
    w = torch.randn(E, N, K, generator=g) * torch.exp(torch.randn(E, N, 1, generator=g))
    return (w / K ** 0.5,)


def real_experts(model_dir):
    """Layer 0's w13 and w2 of the MoE model, padded to 192 (--moe-pad 32)."""
    import torch
    import moe
    import moe_runners
    _, t = moe.build(model_dir)
    w = {}
    for n in ("w13", "w2"):
        shape, a = t[f"model.layers.0.moe.{n}"]
        w[n] = torch.frombuffer(bytearray(a.tobytes()), dtype=torch.float32).reshape(shape)
    w13, w2 = moe_runners.pad_intermediate(w["w13"], w["w2"], 32)
    return [("model-w13", w13), ("model-w2", w2)]


def entry_run(fw, wref, x, ids, entry, impl, moe_runners, moe_fp4):
    """(out, ref, ref with FP4 activations) through one of the runners'
    entries."""
    import torch
    E = fw.E

    def a4(t):
        """t as W4A4 sees it: quantised as one tensor, dequantised."""
        if impl != "triton_w4a4":
            return None
        p, s, gs = moe_fp4.quantise(t.float().unsqueeze(0), "nvfp4")
        return moe_fp4.dequantise(p, moe_fp4.store_scales(s, "swizzled"), gs, t.shape[1])[0].to(torch.bfloat16)

    def ref_rows(a, experts):
        out = torch.empty(a.shape[0], fw.N, device=a.device)
        for e in range(E):
            r = experts == e
            if r.any():
                out[r] = (a[r].to(torch.bfloat16) @ wref[e].T).float()
        return out

    if entry == "expert":
        out = fw.expert(x, 3)
        ex = torch.full((x.shape[0],), 3, device=x.device)
        xa4 = a4(x)
        return out, ref_rows(x, ex), ref_rows(xa4, ex) if xa4 is not None else None
    if entry == "grouped":
        flat = ids.reshape(-1)
        order, offs = moe_runners.sort_by_expert(ids, E)
        a = x[: flat.numel()][order]
        ex = flat[order]
        out = fw.grouped(a, offs, ex)
        xa4 = a4(a)
        return out, ref_rows(a, ex), ref_rows(xa4, ex) if xa4 is not None else None
    # fused: token t's pairs t*2, t*2+1 read row t; the output times a weight
    T = ids.shape[0]
    wts = torch.rand(T, 2, device=x.device)
    layout = moe_runners.align_block_size(ids, E, moe_fp4._triton().block_m(impl))
    out = fw.kernel(x[:T], *layout, 2, T * 2, wts.reshape(-1).contiguous())
    flat = ids.reshape(-1)
    rows = torch.arange(T * 2, device=x.device) // 2
    ref = ref_rows(x[rows], flat) * wts.reshape(-1)[:, None]
    xa4 = a4(x[:T])
    ref4 = ref_rows(xa4[rows], flat) * wts.reshape(-1)[:, None] if xa4 is not None else None
    return out, ref, ref4


def knobs(w, x, name):
    """The reference path's error against the unquantised GEMM, per recipe
    and fault: what each knob costs before any kernel."""
    import torch
    import moe_fp4
    E, N, K = w.shape
    full = torch.einsum("mk,enk->emn", x.float(), w.float())
    parts = []
    for label, kw in (("nvfp4", {}), ("mxfp4", {"recipe": "mxfp4"}), ("scales linear", {"layout": "linear"}),
                      ("global dropped", {"global_scale": "dropped"})):
        fw = moe_fp4.Fp4Experts(w, "dequant", **kw)
        got = torch.einsum("mk,enk->emn", x.float(), fw.w.float())
        parts.append(f"{label} {rel(got, full):.3g}" + ("" if torch.isfinite(got).all() else " (non-finite)"))
    print(f"{'knobs':12s} {name:10s} {E}x{N}x{K}: reference vs unquantised float32: " + ", ".join(parts), flush=True)


def model_lines(args, impl, bad):
    """Each runner with this implementation through the server's load."""
    import torch
    import server
    prompt = [1, 9038, 2501, 263, 931, 727, 471, 263, 2217, 7826]

    def forward(extra):
        a = server.parse_args(["--model", args.model_dir, "--device", "cuda", "--attention-backend", "efficient",
                               "--dtype", "bfloat16", "--moe-pad", "32"] + extra)
        a.model_dir = args.model_dir
        f = server.load(a)
        ids = [i % 512 for i in prompt]
        out = f(ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            f(ids)
        torch.cuda.synchronize()
        return out, (time.perf_counter() - t0) * 200

    try:
        base, _ = forward(["--moe-runner", "naive"])
    except Exception as e:
        print(f"model: the baseline failed: {first_line(e)}")
        bad.append("model baseline")
        return
    for runner in ("naive", "grouped_mm", "triton"):
        try:
            out, ms = forward(["--moe-runner", runner, "--fp4-gemm", impl])
            d = float((out - base).abs().max())
            agree = int((out.argmax(-1) == base.argmax(-1)).sum())
            print(f"model {runner:10s} {impl:12s}: max |logit diff| vs naive bf16 {d:.3g}, greedy {agree}/{len(prompt)}, {ms:.1f} ms/forward"
                  + ("" if torch.isfinite(out).all() else ", NON-FINITE"), flush=True)
        except Exception as e:
            print(f"model {runner:10s} {impl:12s}: error {first_line(e)}", flush=True)
            if impl != "scaled_mm":
                bad.append(f"model {runner}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
