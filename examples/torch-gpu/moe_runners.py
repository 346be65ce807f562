"""The MoE layer of moe.py's model in torch, with the MoE runner as a
choice: each runner is a different real kernel path for the same experts.

  naive        a loop over the experts: gather the tokens routed to each,
               two matmuls, scatter-add back (the reference)
  grouped_mm   the (token, expert) pairs sorted by expert, one
               torch._grouped_mm for gate+up and one for down (CUTLASS's
               grouped GEMM on sm_90 in bfloat16; in float16 and float32
               torch runs a matmul per group after the same checks)
  triton       moe_triton.py's fused MoE kernel, in the shape of vLLM's and
               SGLang's fused_moe: sorted token ids padded to the block
               size, an expert id per block, the top-k weights applied in
               the kernel
  fp8_grouped  expert weights (per output row) and activations (per token)
               in float8_e4m3fn with float32 scales,
               torch._scaled_grouped_mm

With fp4 (server.py --fp4-gemm), the naive, grouped_mm and triton runners
run their expert GEMMs on NVFP4 (or MXFP4) weights through one of
moe_fp4.py's implementations, the routing and the dispatch staying the
runner's own.

Routing is the same for every runner: router logits in the model's dtype
(Mixtral's gate), softmax in float32, the top-k experts, their weights
renormalised to sum to 1 unless renormalize is off. Nothing here pads a
shape or changes a layout to suit a kernel unless asked (pad): a kernel
that refuses the model's shapes (intermediate 172 is not a multiple of 16),
dtype or architecture raises, and the server's warmup turns that into an
exit. pad > 0 zero-pads the experts' intermediate size to a multiple of
pad, as SGLang and vLLM pad MoE weights for their kernels' alignment: the
extra gate and up rows are zero, so SiLU(0) * 0 adds nothing through the
extra (zero) down columns, and the result is the same mixture.
"""
import torch
import torch.nn.functional as F

RUNNERS = ("naive", "grouped_mm", "triton", "fp8_grouped")
# Faults injected where every runner shares the code (the router and the
# combine's weights), so each runner breaks the same way: a test of the
# agreement among cells, which must not take one fault's agreeing cells
# for a yardstick.
FAULTS = ("none", "halve-combine", "drop-expert")
FP8_MAX = 448.0


class MoE(torch.nn.Module):
    """One decoder layer's MoE MLP: router (E, H), w13 (E, 2I, H) gate rows
    then up rows, w2 (E, H, I); float32 tensors, cast to dtype on device."""

    def __init__(self, router, w13, w2, top_k, renormalize, runner, dtype, device, block=(16, 64, 32), fault="none",
                 fp4=None):
        super().__init__()
        if fault not in FAULTS:
            raise ValueError(f"unknown MoE fault {fault!r} (want one of {', '.join(FAULTS)})")
        self.fault = fault
        if runner not in RUNNERS:
            raise ValueError(f"unknown MoE runner {runner!r} (want one of {', '.join(RUNNERS)})")
        self.E, self.I2, self.H = w13.shape
        self.I = self.I2 // 2
        self.top_k, self.renormalize, self.runner, self.block = top_k, renormalize, runner, block
        self.register_buffer("router", router.to(device=device, dtype=dtype), persistent=False)
        self.register_buffer("w13", w13.to(device=device, dtype=dtype).contiguous(), persistent=False)
        self.register_buffer("w2", w2.to(device=device, dtype=dtype).contiguous(), persistent=False)
        if runner == "fp8_grouped":
            # Per output row, from the float32 weights.
            for name, w in (("13", w13), ("2", w2)):
                q, s = quant_rows(w.to(device))
                self.register_buffer("w" + name + "_8", q, persistent=False)
                self.register_buffer("s" + name, s, persistent=False)
        # fp4: the expert GEMMs on FP4 weights (moe_fp4.py), a dict of
        # impl, recipe, layout and global_scale; None or impl "none": the
        # runner's own GEMMs in dtype.
        self.fp4 = fp4 if fp4 and fp4.get("impl", "none") != "none" else None
        if self.fp4:
            import moe_fp4
            if runner not in moe_fp4.RUN:
                raise ValueError(f"fp4_gemm applies to the {', '.join(moe_fp4.RUN)} runners, not {runner}")
            kw = dict(recipe=self.fp4.get("recipe", "nvfp4"), layout=self.fp4.get("layout", "swizzled"),
                      global_scale=self.fp4.get("global_scale", "applied"), dtype=dtype)
            self.fp13 = moe_fp4.Fp4Experts(w13.to(device), self.fp4["impl"], **kw)
            self.fp2 = moe_fp4.Fp4Experts(w2.to(device), self.fp4["impl"], **kw)

    def extra_repr(self):
        return (f"experts={self.E}, hidden={self.H}, intermediate={self.I}, top_k={self.top_k}, "
                f"renormalize={self.renormalize}, runner={self.runner}")

    def route(self, x):
        """(weights (T, k) float32, expert ids (T, k) int64) for tokens x (T, H)."""
        probs = torch.softmax(F.linear(x, self.router), dim=-1, dtype=torch.float32)
        if self.fault == "drop-expert":
            # Expert 0 is never chosen: its tokens go to the next best.
            probs = probs.clone()
            probs[:, 0] = 0
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        if self.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.fault == "halve-combine":
            # The combine's weights halved: the mixture's output at half scale.
            weights = weights * 0.5
        return weights, ids

    def forward(self, hidden):
        x = hidden.reshape(-1, self.H)
        weights, ids = self.route(x)
        if self.fp4:
            import moe_fp4
            y = moe_fp4.RUN[self.runner](self, x, weights, ids)
        else:
            y = RUN[self.runner](self, x, weights, ids)
        return y.reshape(hidden.shape)


def silu_mul(h, inter):
    """SiLU(gate) * up for h (M, 2I) holding gate then up columns."""
    return F.silu(h[:, :inter]) * h[:, inter:]


def run_naive(m, x, weights, ids):
    out = torch.zeros_like(x)
    for e in range(m.E):
        tok, slot = torch.where(ids == e)
        if tok.numel() == 0:
            continue
        h = F.linear(x[tok], m.w13[e])
        y = F.linear(silu_mul(h, m.I), m.w2[e])
        out.index_add_(0, tok, y * weights[tok, slot].unsqueeze(1).to(y.dtype))
    return out


def sort_by_expert(ids, experts):
    """The (token, expert) pairs sorted by expert: (order: indices into the
    flattened ids, offs: int32 cumulative counts per expert, as
    torch._grouped_mm takes them)."""
    flat = ids.reshape(-1)
    _, order = torch.sort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=experts), 0).to(torch.int32)
    return order, offs


def run_grouped_mm(m, x, weights, ids):
    order, offs = sort_by_expert(ids, m.E)
    tok = order // m.top_k
    # 2D tokens x 3D experts: the weights as (E, K, N), the transposed view
    # of their (E, N, K) nn.Linear layout.
    h = torch._grouped_mm(x[tok], m.w13.transpose(1, 2), offs=offs)
    y = torch._grouped_mm(silu_mul(h, m.I), m.w2.transpose(1, 2), offs=offs)
    y = y * weights.reshape(-1)[order].unsqueeze(1).to(y.dtype)
    return torch.zeros_like(x).index_add_(0, tok, y)


def quant_rows(t):
    """float8_e4m3fn values and float32 scales of t's rows (the last
    dimension): each row's scale is its largest magnitude over 448."""
    t = t.float()
    s = t.abs().amax(dim=-1).clamp(min=1e-12) / FP8_MAX
    q = (t / s.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, s.contiguous()


def run_fp8_grouped(m, x, weights, ids):
    order, offs = sort_by_expert(ids, m.E)
    tok = order // m.top_k
    x8, sx = quant_rows(x[tok])
    # Rowwise scales: one per token (M,), one per expert and output row
    # (E, N); the weights as the transposed view of (E, N, K).
    h = torch._scaled_grouped_mm(x8, m.w13_8.transpose(1, 2), scale_a=sx, scale_b=m.s13, offs=offs, out_dtype=x.dtype)
    a8, sa = quant_rows(silu_mul(h, m.I))
    y = torch._scaled_grouped_mm(a8, m.w2_8.transpose(1, 2), scale_a=sa, scale_b=m.s2, offs=offs, out_dtype=x.dtype)
    y = y * weights.reshape(-1)[order].unsqueeze(1).to(y.dtype)
    return torch.zeros_like(x).index_add_(0, tok, y)


def align_block_size(ids, experts, block_m):
    """The (token, expert) pairs grouped by expert, each expert's group
    padded to a multiple of block_m, as vLLM's moe_align_block_size lays
    them out for the fused kernel: (sorted_ids int32: indices into the
    flattened ids, the padding holding ids.numel(); expert_ids int32: the
    expert of each block of block_m; num_post int32 (1,): the padded
    length). Sized for the worst case, ids.numel() + experts * (block_m -
    1), so that the launch grid needs no device-to-host copy."""
    flat = ids.reshape(-1)
    n = flat.numel()
    counts = torch.bincount(flat, minlength=experts)
    padded = (counts + block_m - 1) // block_m * block_m
    ends = torch.cumsum(padded, 0)
    expert_sorted, order = torch.sort(flat, stable=True)
    rank = torch.arange(n, device=flat.device) - (torch.cumsum(counts, 0) - counts)[expert_sorted]
    blocks = (n + experts * (block_m - 1) + block_m - 1) // block_m
    sorted_ids = torch.full((blocks * block_m,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[(ends - padded)[expert_sorted] + rank] = order.to(torch.int32)
    starts = torch.arange(blocks, device=flat.device) * block_m
    expert_ids = torch.searchsorted(ends, starts, right=True).clamp(max=experts - 1).to(torch.int32)
    return sorted_ids, expert_ids, ends[-1:].to(torch.int32)


def run_triton(m, x, weights, ids):
    import moe_triton
    bm, bn, bk = m.block
    sorted_ids, expert_ids, num_post = align_block_size(ids, m.E, bm)
    return moe_triton.fused_experts(x, m.w13, m.w2, weights, sorted_ids, expert_ids, num_post, m.top_k, bm, bn, bk)


RUN = {"naive": run_naive, "grouped_mm": run_grouped_mm, "triton": run_triton, "fp8_grouped": run_fp8_grouped}


def pad_intermediate(w13, w2, multiple):
    """w13 (E, 2I, H) and w2 (E, H, I) with I zero-padded up to a multiple
    of multiple (unchanged for multiple <= 0)."""
    inter = w2.shape[2]
    extra = (-inter) % multiple if multiple > 0 else 0
    if extra == 0:
        return w13, w2
    E, _, H = w13.shape
    z = w13.new_zeros(E, extra, H)
    w13 = torch.cat([w13[:, :inter], z, w13[:, inter:], z], dim=1)
    w2 = torch.cat([w2, w2.new_zeros(E, H, extra)], dim=2)
    return w13, w2


def swap_mlps(model, tensors, moe_cfg, runner, renormalize, dtype, device, block, pad=0, fault="none", fp4=None):
    """Replaces each decoder layer's MLP with the MoE layer built from
    moe.build's tensors (intermediate zero-padded to a multiple of pad);
    returns the number of layers."""
    n = 0
    for li, layer in enumerate(model.model.layers):
        t = {}
        for name in ("router", "w13", "w2"):
            shape, a = tensors[f"model.layers.{li}.moe.{name}"]
            t[name] = torch.frombuffer(bytearray(a.tobytes()), dtype=torch.float32).reshape(shape)
        w13, w2 = pad_intermediate(t["w13"], t["w2"], pad)
        layer.mlp = MoE(t["router"], w13, w2, moe_cfg["top_k"], renormalize, runner, dtype, device, block, fault, fp4)
        n += 1
    return n
