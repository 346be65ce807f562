"""A fused MoE kernel in Triton, in the shape vLLM's and SGLang's
fused_moe take, written for this example.

The (token, expert) pairs come grouped by expert and each group padded to a
multiple of BLOCK_M (moe_runners.align_block_size): sorted_ids holds the
flattened pair indices, the padding the sentinel T*k; expert_ids names the
expert of each block of BLOCK_M. One program computes a BLOCK_M x BLOCK_N
tile of one expert's output: it loads the tile's token rows (a pair's row of
A is its token, pair // top_k, for the first GEMM), the expert's weight
columns, accumulates tl.dot over K in float32, multiplies by the pairs'
top-k weights when MUL_ROUTED_WEIGHT (the second GEMM), and stores the rows
to their pair's place. The padding rows are masked out. The two GEMMs and
the sum over the top k are fused_experts.

tl.dot takes the model's dtype as it is: float16 and bfloat16 on the
tensor cores, float32 as TF32 (Triton's default input precision), as vLLM's
kernel does.
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["EM", "num_valid"])
def fused_moe_kernel(a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_ids_ptr, expert_ids_ptr, num_post_ptr,
                     N, K, EM, num_valid,
                     stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     MUL_ROUTED_WEIGHT: tl.constexpr, TOP_K: tl.constexpr):
    # Tiles in groups of GROUP_M rows of blocks, so neighbouring programs
    # share weight columns in L2 (Triton's matmul tutorial, vLLM's kernel).
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    if pid_m * BLOCK_M >= tl.load(num_post_ptr):
        return

    offs_id = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_token = tl.load(sorted_ids_ptr + offs_id).to(tl.int64)
    token_mask = offs_token < num_valid
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_token[:, None] // TOP_K) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None] * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_mask[None, :], other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if MUL_ROUTED_WEIGHT:
        w = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
        acc = acc * w[:, None]
    c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=token_mask[:, None] & n_mask[None, :])


def _gemm(a, w, c, weights, sorted_ids, expert_ids, num_post, mul_weight, top_k, bm, bn, bk):
    """c[pair] = a[pair // top_k] @ w[expert].T (times the pair's weight)."""
    N, K = w.shape[1], w.shape[2]
    EM = sorted_ids.numel()
    grid = (triton.cdiv(EM, bm) * triton.cdiv(N, bn),)
    fused_moe_kernel[grid](a, w, c, weights, sorted_ids, expert_ids, num_post,
                           N, K, EM, c.shape[0],
                           a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
                           BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                           MUL_ROUTED_WEIGHT=mul_weight, TOP_K=top_k)


def fused_experts(x, w13, w2, weights, sorted_ids, expert_ids, num_post, top_k, bm, bn, bk):
    """The MoE MLP of tokens x (T, H): w13 (E, 2I, H), w2 (E, H, I), the
    top-k weights (T, k) float32, and align_block_size's layout of the
    experts the router chose."""
    T, H = x.shape
    inter = w13.shape[1] // 2
    flat_w = weights.reshape(-1).contiguous()
    h = torch.empty((T * top_k, 2 * inter), dtype=x.dtype, device=x.device)
    _gemm(x, w13, h, flat_w, sorted_ids, expert_ids, num_post, False, top_k, bm, bn, bk)
    a = F.silu(h[:, :inter]) * h[:, inter:]
    y = torch.empty((T * top_k, H), dtype=x.dtype, device=x.device)
    _gemm(a, w2, y, flat_w, sorted_ids, expert_ids, num_post, True, 1, bm, bn, bk)
    return y.view(T, top_k, H).sum(dim=1)
