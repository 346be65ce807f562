"""FP4 expert weights for moe_runners.py: NVFP4 (or MXFP4) quantisation in
torch, the stored format every path reads, and the fp4_gemm implementations
of the expert GEMMs. nvfp4.py is the format's standard-library reference.

These are emulations on Hopper (sm_90, no FP4 tensor cores) of the kernels a
Blackwell SM120 host runs for an NVFP4 checkpoint: the same stored bytes (e2m1
packed two to a byte, an e4m3 scale per 16 values in the 128x4 swizzled
layout, an fp32 global scale per expert), decoded in software and multiplied
on bf16 tensor cores. What they share with SM120's kernels is the numerics of
the format and its faults; not the instructions, the speed or the kernels'
own bugs.

  dequant       dequantise to the model's dtype once, then the runner's own
                GEMM (F.linear, torch._grouped_mm, moe_triton's fused
                kernel): the reference of FP4
  triton_w4a16  a Triton kernel that loads packed e2m1 and the scales in its
                inner loop and decodes them to bf16 before tl.dot (the
                weight-only FP4 fallbacks engines run before Blackwell)
  triton_w4a4   the same with the activations quantised to FP4 too, per 16
                values with a per-tensor global scale, both operands decoded
                in the kernel (the numerics of SM120's W4A4 NVFP4 GEMMs)
  triton_tma    W4A16 with another tiling and a persistent grid, the packed
                weights read through a TMA tensor descriptor (Triton's
                host-side TensorDescriptor), with TMA's alignment rules:
                every row of packed bytes a multiple of 16 bytes
  scaled_mm     torch._scaled_mm with float4_e2m1fn_x2 operands and
                block scales (cuBLASLt's NVFP4 GEMM), per expert: Blackwell
                only, the genuine crash on Hopper

Knobs (server flags): --fp4-recipe nvfp4|mxfp4 (MXFP4: an e8m0 scale per
32, no global scale), --fp4-scale-layout swizzled|linear (what the loader
hands the kernels, which always read swizzled), --fp4-global-scale
applied|dropped (the per-expert global scale, and the activations' in W4A4,
left out of the GEMM's epilogue: a checkpoint's weight_scale_2 not applied).
"""
import torch
import torch.nn.functional as F

IMPLS = ("dequant", "triton_w4a16", "triton_w4a4", "triton_tma", "scaled_mm")
RECIPES = {"nvfp4": 16, "mxfp4": 32}
LAYOUTS = ("swizzled", "linear")
GLOBAL = ("applied", "dropped")
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E4M3_MAX, E2M1_MAX = 448.0, 6.0


# ---------------------------------------------------------------- the format

def e2m1_codes(q):
    """e2m1 codes (uint8) of q: nearest, ties to even, saturating (nvfp4.py's
    e2m1_code, vectorised)."""
    a = q.abs()
    c = ((a > 0.25).to(torch.uint8) + (a >= 0.75).to(torch.uint8) + (a > 1.25).to(torch.uint8)
         + (a >= 1.75).to(torch.uint8) + (a > 2.5).to(torch.uint8) + (a >= 3.5).to(torch.uint8)
         + (a > 5.0).to(torch.uint8))
    return c | (torch.signbit(q).to(torch.uint8) << 3)


def quantise(w, recipe="nvfp4"):
    """w (E, N, K) -> (packed uint8 (E, N, K/2), scales uint8 (E, N, K/G),
    global scales float32 (E,)): each of the E matrices is a tensor of its
    own (one global scale each), as nvfp4.quantise does."""
    g = RECIPES[recipe]
    E, N, K = w.shape
    if K % g:
        raise ValueError(f"{recipe}: K={K} is not a multiple of its block of {g} (pad the experts: --moe-pad)")
    w = w.float()
    blocks = w.reshape(E, N, K // g, g)
    bmax = blocks.abs().amax(-1)
    if recipe == "nvfp4":
        amax = w.abs().reshape(E, -1).amax(-1)
        gs = torch.where(amax > 0, amax / (E4M3_MAX * E2M1_MAX), torch.ones_like(amax))
        s8 = ((bmax / E2M1_MAX) / gs[:, None, None]).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
        sb = s8.view(torch.uint8)
        s = s8.float() * gs[:, None, None]
    else:
        gs = torch.ones(E, device=w.device)
        exp = torch.frexp(bmax)[1] - 1 - 2 + 127
        sb = torch.where(bmax > 0, exp.clamp(0, 254), torch.zeros_like(exp)).to(torch.uint8)
        s = torch.exp2(sb.float() - 127)
    q = torch.where(s[..., None] > 0, blocks / s[..., None], blocks * 0.0)
    codes = e2m1_codes(q).reshape(E, N, K)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.contiguous(), sb.contiguous(), gs.float().contiguous()


def padded(n, kg):
    return -(-n // 128) * 128, -(-kg // 4) * 4


def store_scales(sb, layout):
    """Scale bytes (E, N, KG) padded to 128x4 tiles and laid out as the
    loader hands them over: (E, PN*PK) uint8."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown scale layout {layout!r}")
    E, N, KG = sb.shape
    PN, PK = padded(N, KG)
    p = sb.new_zeros(E, PN, PK)
    p[:, :N, :KG] = sb
    if layout == "linear":
        return p.reshape(E, -1).contiguous()
    t = p.view(E, PN // 128, 4, 32, PK // 4, 4)  # (e, row tile, r_hi, r_lo, col tile, c)
    return t.permute(0, 1, 4, 3, 2, 5).reshape(E, -1).contiguous()


def swizzle_index(n, kg, device):
    """(N, KG) int64: where each scale lies in the swizzled layout."""
    r = torch.arange(n, device=device)[:, None]
    c = torch.arange(kg, device=device)[None, :]
    tiles_c = -(-kg // 4)
    return ((r // 128) * tiles_c + c // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + c % 4


def scale_values(b, recipe):
    """float32 values of scale bytes."""
    if recipe == "nvfp4":
        return b.view(torch.float8_e4m3fn).float()
    v = torch.exp2(b.float() - 127)
    return torch.where(b == 255, torch.full_like(v, float("nan")), v)


def dequantise(packed, stored, gs, k, recipe="nvfp4", apply_global=True):
    """(E, N, K) float32 from the stored format, the scales read as the
    kernels read them (swizzled)."""
    E, N, _ = packed.shape
    g = RECIPES[recipe]
    idx = swizzle_index(N, k // g, packed.device)
    s = scale_values(stored[:, idx], recipe)  # (E, N, KG)
    lut = torch.tensor(E2M1, device=packed.device)
    codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(E, N, k).long()
    w = lut[codes] * s.repeat_interleave(g, dim=-1)
    if apply_global:
        w = w * gs[:, None, None]
    return w


def quantise_rows(x, recipe):
    """Activations x (M, K) quantised per block along K with one global
    scale for the tensor (W4A4): (packed (M, K/2), scales (M, K/G) linear,
    global scale (1,) float32), all on x's device, with no host sync."""
    p, s, gs = quantise(x.unsqueeze(0), recipe)
    return p[0], s[0], gs


# ---------------------------------------------------------------- Triton

_TRITON = None


def _triton():
    """The Triton kernels, compiled lazily (the dequant path and the CPU
    tests need no Triton)."""
    global _TRITON
    if _TRITON is None:
        import moe_fp4_triton
        _TRITON = moe_fp4_triton
    return _TRITON


class Fp4Experts:
    """One stack of expert weights (E, N, K) in the stored FP4 format, and
    its GEMMs through the chosen implementation."""

    def __init__(self, w, impl, recipe="nvfp4", layout="swizzled", global_scale="applied", dtype=torch.bfloat16):
        if impl not in IMPLS:
            raise ValueError(f"unknown fp4_gemm {impl!r} (want one of {', '.join(IMPLS)})")
        if global_scale not in GLOBAL:
            raise ValueError(f"unknown global scale {global_scale!r}")
        self.E, self.N, self.K = w.shape
        self.impl, self.recipe, self.layout, self.dtype = impl, recipe, layout, dtype
        self.apply_global = global_scale == "applied"
        self.packed, sb, self.gs = quantise(w, recipe)
        self.stored = store_scales(sb, layout)
        self.kg = self.K // RECIPES[recipe]
        self.alpha = self.gs if self.apply_global else torch.ones_like(self.gs)
        if impl == "dequant":
            self.w = dequantise(self.packed, self.stored, self.gs, self.K, recipe, self.apply_global).to(dtype)

    def __repr__(self):
        return f"Fp4Experts({self.E}x{self.N}x{self.K}, {self.impl}, {self.recipe}, scales {self.layout}, global {'applied' if self.apply_global else 'dropped'})"

    # -- the kernels' common entry: rows by block, vLLM's fused-MoE layout
    def kernel(self, a, sorted_ids, expert_ids, num_post, a_div, rows_out, topk_w=None):
        """out[pair] = a[pair // a_div] @ W[expert].T (times topk_w[pair]),
        for the pairs in sorted_ids' blocks: (rows_out, N) in a's dtype."""
        return _triton().gemm(self, a, sorted_ids, expert_ids, num_post, a_div, rows_out, topk_w)

    def expert(self, a, e):
        """a (M, K) @ W[e].T for one expert (the naive runner's loop)."""
        if self.impl == "dequant":
            return F.linear(a, self.w[e])
        if self.impl == "scaled_mm":
            return scaled_mm(self, a, e)
        import moe_runners
        ids = torch.full((a.shape[0],), e, dtype=torch.int64, device=a.device)
        layout = moe_runners.align_block_size(ids, self.E, _triton().block_m(self.impl))
        return self.kernel(a, *layout, 1, a.shape[0])

    def grouped(self, a, offs, sorted_experts):
        """Rows a (M, K) sorted by expert (offs: int32 cumulative counts,
        sorted_experts: each row's expert) through each row's expert."""
        if self.impl == "dequant":
            return torch._grouped_mm(a, self.w.transpose(1, 2), offs=offs)
        if self.impl == "scaled_mm":
            out, start = a.new_empty(a.shape[0], self.N), 0
            for e, end in enumerate(offs.tolist()):
                if end > start:
                    out[start:end] = scaled_mm(self, a[start:end], e)
                start = end
            return out
        import moe_runners
        layout = moe_runners.align_block_size(sorted_experts, self.E, _triton().block_m(self.impl))
        return self.kernel(a, *layout, 1, a.shape[0])


def scaled_mm(fw, a, e):
    """torch._scaled_mm's FP4 GEMM for expert e (cuBLASLt's block-scaled
    kernel: float4_e2m1fn_x2 operands, scales in the swizzled layout, M
    padded to 128); the global scales multiply the output."""
    M = a.shape[0]
    Mp = -(-M // 128) * 128
    ap = F.pad(a.float(), (0, 0, 0, Mp - M))
    p, s, gs = quantise(ap.unsqueeze(0), fw.recipe)
    sa = store_scales(s, "swizzled")[0]
    sdt = torch.float8_e4m3fn if fw.recipe == "nvfp4" else torch.float8_e8m0fnu
    y = torch._scaled_mm(p[0].view(torch.float4_e2m1fn_x2), fw.packed[e].view(torch.float4_e2m1fn_x2).t(),
                         scale_a=sa.view(sdt), scale_b=fw.stored[e].view(sdt), out_dtype=torch.bfloat16)
    if fw.apply_global:
        y = y * (gs * fw.gs[e])
    return y[:M].to(a.dtype)


# ---------------------------------------------------------------- runners

def silu_mul(h, inter):
    return F.silu(h[:, :inter]) * h[:, inter:]


def run_naive(m, x, weights, ids):
    out = torch.zeros_like(x)
    for e in range(m.E):
        tok, slot = torch.where(ids == e)
        if tok.numel() == 0:
            continue
        h = m.fp13.expert(x[tok], e)
        y = m.fp2.expert(silu_mul(h, m.I), e)
        out.index_add_(0, tok, y * weights[tok, slot].unsqueeze(1).to(y.dtype))
    return out


def run_grouped_mm(m, x, weights, ids):
    import moe_runners
    order, offs = moe_runners.sort_by_expert(ids, m.E)
    tok = order // m.top_k
    experts = ids.reshape(-1)[order]
    h = m.fp13.grouped(x[tok], offs, experts)
    y = m.fp2.grouped(silu_mul(h, m.I), offs, experts)
    y = y * weights.reshape(-1)[order].unsqueeze(1).to(y.dtype)
    return torch.zeros_like(x).index_add_(0, tok, y)


def run_triton(m, x, weights, ids):
    """moe_triton's fused layout: with dequant, its own kernel on the
    dequantised weights; with a Triton FP4 kernel, that kernel in the same
    layout (the token gather and the top-k weights fused); scaled_mm has no
    fused form and runs the naive loop."""
    import moe_runners
    if m.fp13.impl == "dequant":
        import moe_triton
        bm, bn, bk = m.block
        layout = moe_runners.align_block_size(ids, m.E, bm)
        return moe_triton.fused_experts(x, m.fp13.w, m.fp2.w, weights, *layout, m.top_k, bm, bn, bk)
    if m.fp13.impl == "scaled_mm":
        return run_naive(m, x, weights, ids)
    T = x.shape[0]
    layout = moe_runners.align_block_size(ids, m.E, _triton().block_m(m.fp13.impl))
    flat_w = weights.reshape(-1).contiguous()
    h = m.fp13.kernel(x, *layout, m.top_k, T * m.top_k)
    y = m.fp2.kernel(silu_mul(h, m.I), *layout, 1, T * m.top_k, flat_w)
    return y.view(T, m.top_k, -1).sum(dim=1)


RUN = {"naive": run_naive, "grouped_mm": run_grouped_mm, "triton": run_triton}
