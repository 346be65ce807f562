"""The Triton FP4 expert GEMMs of moe_fp4.py (emulations on Hopper of SM120's
block-scaled FP4 kernels): packed e2m1 weights decoded in the kernel with
their block scales, read in the 128x4 swizzled layout.

Every kernel takes vLLM's fused-MoE layout (moe_runners.align_block_size):
sorted_ids holds pair indices in blocks of BLOCK_M rows, one expert per
block (expert_ids), the padding the sentinel rows_out; a pair's row of A is
pair // A_DIV, its row of the output is the pair. One program (or one
iteration of a persistent program) computes a BLOCK_M x BLOCK_N tile.

  w4a16  BLOCK 16 x 64, K by 32 packed bytes (64 values): the even and the
         odd values of each byte go through two tl.dot with A's even and
         odd columns (no interleave in registers)
  w4a4   the same tiling, A packed too (its scales linear, per row), both
         operands decoded to bf16 before tl.dot
  tma    persistent (one program per SM, tiles strided over programs),
         BLOCK 32 x 128, K by 64 values; the packed weights (E*N, K/2) come
         through a host-side TMA tensor descriptor and are interleaved in
         registers (tl.join + reshape) into a (BLOCK_N, BLOCK_K) tile
"""
import torch
import triton
import triton.language as tl

BLOCKS = {"triton_w4a16": (16, 64, 64), "triton_w4a4": (16, 64, 64), "triton_tma": (32, 128, 64)}


def block_m(impl):
    return BLOCKS[impl][0]


@triton.jit
def _e2m1(c):
    """float32 values of e2m1 codes c (int32, 0..15)."""
    e = (c >> 1) & 3
    m = (c & 1).to(tl.float32)
    mag = tl.where(e == 0, m * 0.5, (1.0 + m * 0.5) * tl.exp2((e - 1).to(tl.float32)))
    return tl.where((c & 8) != 0, -mag, mag)


@triton.jit
def _scale(s_ptr, n, g, KG, mask, MX: tl.constexpr):
    """The block scale of output row n, scale column g (broadcast shapes),
    read in the 128x4 swizzled layout of a matrix with KG scale columns
    (0 where mask is false)."""
    tiles_c = (KG + 3) // 4
    off = ((n // 128) * tiles_c + g // 4) * 512 + (n % 32) * 16 + ((n // 32) % 4) * 4 + g % 4
    b = tl.load(s_ptr + off, mask=mask, other=0)
    if MX:
        v = (b.to(tl.int32) << 23).to(tl.float32, bitcast=True)
    else:
        v = b.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    return v


@triton.jit(do_not_specialize=["EM", "num_valid"])
def w4a16_kernel(a_ptr, b_ptr, s_ptr, alpha_ptr, c_ptr, topk_w_ptr, sorted_ids_ptr, expert_ids_ptr, num_post_ptr,
                 N, K, KG, EM, num_valid, stride_am, stride_be, stride_bn, stride_se, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_KP: tl.constexpr, GROUP: tl.constexpr,
                 MX: tl.constexpr, A4: tl.constexpr, MUL_W: tl.constexpr, A_DIV: tl.constexpr,
                 as_ptr, agx_ptr, stride_asm):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    if pid_m * BLOCK_M >= tl.load(num_post_ptr):
        return
    offs_id = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_tok = tl.load(sorted_ids_ptr + offs_id).to(tl.int64)
    tok_mask = offs_tok < num_valid
    a_row = offs_tok // A_DIV
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_j = tl.arange(0, BLOCK_KP)
    KP = K // 2
    b_base = b_ptr + expert * stride_be
    s_base = s_ptr + expert * stride_se
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(KP, BLOCK_KP)):
        j = kb * BLOCK_KP + offs_j
        j_mask = j < KP
        p = tl.load(b_base + offs_n[None, :] * stride_bn + j[:, None],
                    mask=j_mask[:, None] & n_mask[None, :], other=0).to(tl.int32)  # (KP, N)
        sc = _scale(s_base, offs_n[None, :], (2 * j[:, None]) // GROUP, KG, j_mask[:, None] & n_mask[None, :], MX)
        if A4:
            ap = tl.load(a_ptr + a_row[:, None] * stride_am + j[None, :],
                         mask=tok_mask[:, None] & j_mask[None, :], other=0).to(tl.int32)  # (M, KP)
            asb = tl.load(as_ptr + a_row[:, None] * stride_asm + (2 * j[None, :]) // GROUP,
                          mask=tok_mask[:, None] & j_mask[None, :], other=0)
            if MX:
                asc = (asb.to(tl.int32) << 23).to(tl.float32, bitcast=True)
            else:
                asc = asb.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            a_lo = (_e2m1(ap & 15) * asc).to(tl.bfloat16)
            a_hi = (_e2m1(ap >> 4) * asc).to(tl.bfloat16)
            b_lo = (_e2m1(p & 15) * sc).to(tl.bfloat16)
            b_hi = (_e2m1(p >> 4) * sc).to(tl.bfloat16)
        else:
            a_lo = tl.load(a_ptr + a_row[:, None] * stride_am + 2 * j[None, :],
                           mask=tok_mask[:, None] & j_mask[None, :], other=0.0)
            a_hi = tl.load(a_ptr + a_row[:, None] * stride_am + 2 * j[None, :] + 1,
                           mask=tok_mask[:, None] & j_mask[None, :], other=0.0)
            b_lo = (_e2m1(p & 15) * sc).to(a_lo.dtype)
            b_hi = (_e2m1(p >> 4) * sc).to(a_lo.dtype)
        acc += tl.dot(a_lo, b_lo)
        acc += tl.dot(a_hi, b_hi)
    alpha = tl.load(alpha_ptr + expert)
    if A4:
        alpha = alpha * tl.load(agx_ptr)
    acc = acc * alpha
    if MUL_W:
        w = tl.load(topk_w_ptr + offs_tok, mask=tok_mask, other=0.0)
        acc = acc * w[:, None]
    c_ptrs = c_ptr + offs_tok[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=tok_mask[:, None] & n_mask[None, :])


@triton.jit(do_not_specialize=["EM", "num_valid"])
def tma_kernel(a_ptr, b_desc, s_ptr, alpha_ptr, c_ptr, topk_w_ptr, sorted_ids_ptr, expert_ids_ptr, num_post_ptr,
               N, K, KG, EM, num_valid, stride_am, stride_se, stride_cm,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
               MX: tl.constexpr, MUL_W: tl.constexpr, A_DIV: tl.constexpr, NUM_PROGS: tl.constexpr):
    start = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_post = tl.load(num_post_ptr)
    for tile in range(start, num_pid_m * num_pid_n, NUM_PROGS):
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        if pid_m * BLOCK_M < num_post:
            offs_id = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_tok = tl.load(sorted_ids_ptr + offs_id).to(tl.int64)
            tok_mask = offs_tok < num_valid
            a_row = offs_tok // A_DIV
            expert = tl.load(expert_ids_ptr + pid_m)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            n_mask = offs_n < N
            s_base = s_ptr + expert.to(tl.int64) * stride_se
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for kb in range(0, tl.cdiv(K, BLOCK_K)):
                offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
                k_mask = offs_k < K
                p = b_desc.load([expert * N + pid_n * BLOCK_N, kb * (BLOCK_K // 2)]).to(tl.int32)  # (N, K/2)
                w = tl.reshape(tl.join(_e2m1(p & 15), _e2m1(p >> 4)), (BLOCK_N, BLOCK_K))
                sc = _scale(s_base, offs_n[:, None], offs_k[None, :] // GROUP, KG, n_mask[:, None] & k_mask[None, :], MX)
                a = tl.load(a_ptr + a_row[:, None] * stride_am + offs_k[None, :],
                            mask=tok_mask[:, None] & k_mask[None, :], other=0.0)
                acc += tl.dot(a, tl.trans((w * sc).to(a.dtype)))
            acc = acc * tl.load(alpha_ptr + expert)
            if MUL_W:
                wt = tl.load(topk_w_ptr + offs_tok, mask=tok_mask, other=0.0)
                acc = acc * wt[:, None]
            c_ptrs = c_ptr + offs_tok[:, None] * stride_cm + offs_n[None, :]
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=tok_mask[:, None] & n_mask[None, :])


_SMS = {}


def _num_sms(device):
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def gemm(fw, a, sorted_ids, expert_ids, num_post, a_div, rows_out, topk_w=None):
    """moe_fp4.Fp4Experts.kernel: out (rows_out, N) in a's dtype."""
    from moe_fp4 import RECIPES, quantise_rows
    bm, bn, bk = BLOCKS[fw.impl]
    a = a.contiguous()
    c = torch.empty((rows_out, fw.N), dtype=a.dtype, device=a.device)
    EM = sorted_ids.numel()
    group, mx = RECIPES[fw.recipe], fw.recipe == "mxfp4"
    mul = topk_w is not None
    tw = topk_w if mul else fw.alpha
    if fw.impl == "triton_tma":
        from triton.tools.tensor_descriptor import TensorDescriptor
        # TMA: the base 16-byte aligned, every row of packed bytes a multiple
        # of 16 bytes; the descriptor checks, as the hardware requires.
        desc = TensorDescriptor.from_tensor(fw.packed.view(fw.E * fw.N, fw.K // 2), [bn, bk // 2])
        tiles = triton.cdiv(EM, bm) * triton.cdiv(fw.N, bn)
        progs = min(_num_sms(a.device), tiles)
        tma_kernel[(progs,)](a, desc, fw.stored, fw.alpha, c, tw, sorted_ids, expert_ids, num_post,
                             fw.N, fw.K, fw.kg, EM, rows_out, a.stride(0), fw.stored.stride(0), c.stride(0),
                             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=group, MX=mx, MUL_W=mul, A_DIV=a_div,
                             NUM_PROGS=progs)
        return c
    a4 = fw.impl == "triton_w4a4"
    if a4:
        ap, asb, agx = quantise_rows(a, fw.recipe)
        if not fw.apply_global:
            agx = torch.ones_like(agx)
        arg_a, as_, stride_asm = ap, asb, asb.stride(0)
    else:
        arg_a, as_, agx, stride_asm = a, fw.alpha, fw.alpha, 0
    grid = (triton.cdiv(EM, bm) * triton.cdiv(fw.N, bn),)
    w4a16_kernel[grid](arg_a, fw.packed, fw.stored, fw.alpha, c, tw, sorted_ids, expert_ids, num_post,
                       fw.N, fw.K, fw.kg, EM, rows_out, arg_a.stride(0), fw.packed.stride(0), fw.packed.stride(1),
                       fw.stored.stride(0), c.stride(0),
                       BLOCK_M=bm, BLOCK_N=bn, BLOCK_KP=bk // 2, GROUP=group, MX=mx, A4=a4, MUL_W=mul, A_DIV=a_div,
                       as_ptr=as_, agx_ptr=agx, stride_asm=stride_asm)
    return c
