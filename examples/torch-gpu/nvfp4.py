"""NVFP4 (and MXFP4) weights with the standard library alone: the format's
reference, which the torch quantiser and the GPU kernels (moe_fp4.py) are
checked against, and which CI tests without torch (nvfp4_test.py).

NVFP4, the two-level recipe of NVIDIA's Blackwell (SM100/SM120) kernels:
  - values in e2m1 (FP4: sign, 2 exponent bits, 1 mantissa bit; magnitudes
    0, 0.5, 1, 1.5, 2, 3, 4, 6), two to a byte, the even element in the low
    nibble;
  - a scale per 16 consecutive values along K in float8 e4m3 (e4m3fn: bias 7,
    largest 448, no infinity);
  - a float32 global scale per tensor, so that the block scales use e4m3's
    range: global = amax / (448 * 6), block scale = e4m3(amax_block / 6 /
    global), value = e2m1(x / (block scale * global)).
  Dequantised: e2m1 * block scale * global.
MXFP4, the OCP microscaling recipe (what gpt-oss ships): e2m1 values, a
scale per 32 values in e8m0 (a power of two, the byte is the exponent plus
127), no global scale: scale = 2^(floor(log2(amax_block)) - 2).

Rounding is to nearest, ties to even, saturating at the largest value
(what torch's casts and the hardware's cvt do).

Scale layout: the block scales of an (N, K/G) matrix are stored padded to
(128-row, 4-column) tiles; Blackwell's block-scaled GEMMs (cuBLASLt,
CUTLASS, FlashInfer, and torch._scaled_mm's NVFP4 path) read them in the
128x4 swizzled layout, where tile t's element (r, c) is at t*512 +
(r%32)*16 + (r//32)*4 + c and tiles go row-block-major. "linear" stores the
same padded matrix row-major: a loader that hands linear scales to a kernel
that reads swizzled ones scrambles them (the fault users meet).

    python3 nvfp4.py demo     # one small matrix quantised, packed, dequantised
"""
import math
import struct
import sys

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
RECIPES = {"nvfp4": 16, "mxfp4": 32}  # values per block scale
LAYOUTS = ("swizzled", "linear")


def e2m1_code(x):
    """The 4-bit e2m1 code of x: nearest magnitude, ties to the even code,
    saturating at 6; the sign in bit 3 (negative zero kept)."""
    a = abs(x)
    # The thresholds between neighbouring magnitudes, with the tie going
    # to the even code (strict > where the code above is odd).
    c = (a > 0.25) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5.0)
    return c | (8 if math.copysign(1.0, x) < 0 else 0)


def e2m1_value(code):
    v = E2M1[code & 7]
    return -v if code & 8 else v


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def e4m3_byte(x):
    """The float8 e4m3fn byte of x >= 0 (x at most 448): nearest, ties to
    even; subnormals below 2^-6 in steps of 2^-9."""
    if not 0 <= x <= E4M3_MAX:
        raise ValueError(f"e4m3 scale {x} outside [0, 448]")
    if x < 2.0 ** -6:
        m = round(x / 2.0 ** -9)  # round() is half to even
        return m  # exponent 0 (subnormal), or 8 = the smallest normal
    e = math.frexp(x)[1] - 1  # x = 1.f * 2^e
    m = round(x / 2.0 ** (e - 3)) - 8  # 3 mantissa bits
    if m == 8:
        e, m = e + 1, 0
    return ((e + 7) << 3) | m


def e4m3_value(b):
    e, m = (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return math.nan
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if b & 128 else v


def e8m0_value(b):
    return math.nan if b == 255 else 2.0 ** (b - 127)


def scale_value(b, recipe):
    return e4m3_value(b) if recipe == "nvfp4" else e8m0_value(b)


def quantise(w, n, k, recipe="nvfp4"):
    """w: n*k floats, row-major (n output rows, k the reduction). Returns
    (packed bytes n*k/2, scale bytes n*(k/G) row-major, global scale): the
    format's three parts. k must be a multiple of the block G."""
    g = RECIPES[recipe]
    if k % g:
        raise ValueError(f"{recipe}: K={k} is not a multiple of its block of {g}")
    amax = max((abs(v) for v in w), default=0.0)
    if recipe == "nvfp4":
        gs = _f32(amax / (E4M3_MAX * E2M1_MAX)) if amax > 0 else 1.0
    else:
        gs = 1.0
    codes, scales = bytearray(n * k), bytearray(n * (k // g))
    for r in range(n):
        for b in range(k // g):
            blk = w[r * k + b * g:r * k + (b + 1) * g]
            bmax = max(abs(v) for v in blk)
            if recipe == "nvfp4":
                sb = e4m3_byte(min(_f32(_f32(bmax / E2M1_MAX) / gs), E4M3_MAX))
                s = _f32(e4m3_value(sb) * gs)
            else:
                # floor(log2(bmax)) exactly: frexp's exponent less one.
                sb = min(max(math.frexp(bmax)[1] - 1 - 2 + 127, 0), 254) if bmax > 0 else 0
                s = e8m0_value(sb)
            scales[r * (k // g) + b] = sb
            for i, v in enumerate(blk):
                codes[r * k + b * g + i] = e2m1_code(_f32(v / s) if s > 0 else 0.0 * v)
    packed = bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, n * k, 2))
    return packed, bytes(scales), gs


def padded(n, kg):
    """The scale matrix's padded shape: rows to 128, columns to 4."""
    return -(-n // 128) * 128, -(-kg // 4) * 4


def swizzle_offset(r, c, kg):
    """Where scale (r, c) of a matrix with kg scale columns lies in the
    128x4 swizzled layout."""
    tiles_c = -(-kg // 4)
    return ((r // 128) * tiles_c + c // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + c % 4


def store_scales(scales, n, kg, layout):
    """The scale bytes (n x kg row-major) as the loader hands them to the
    kernels: padded, then swizzled or left linear."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown scale layout {layout!r}")
    pn, pk = padded(n, kg)
    out = bytearray(pn * pk)
    for r in range(n):
        for c in range(kg):
            out[swizzle_offset(r, c, kg) if layout == "swizzled" else r * pk + c] = scales[r * kg + c]
    return bytes(out)


def dequantise(packed, stored, gs, n, k, recipe="nvfp4", apply_global=True):
    """n*k floats from the stored format, reading the scales as every kernel
    here reads them: in the swizzled layout."""
    g = RECIPES[recipe]
    kg = k // g
    gsv = gs if apply_global else 1.0
    out = []
    for r in range(n):
        for i in range(k):
            byte = packed[(r * k + i) // 2]
            code = byte >> 4 if i % 2 else byte & 15
            s = scale_value(stored[swizzle_offset(r, i // g, kg)], recipe)
            out.append(e2m1_value(code) * s * gsv)
    return out


def main(argv):
    if argv != ["demo"]:
        sys.exit(__doc__.rsplit("\n\n", 1)[1])
    import random
    rnd = random.Random(0)
    n, k = 4, 32
    w = [rnd.gauss(0, 0.1) for _ in range(n * k)]
    for recipe in RECIPES:
        packed, scales, gs = quantise(w, n, k, recipe)
        d = dequantise(packed, store_scales(scales, n, k // RECIPES[recipe], "swizzled"), gs, n, k, recipe)
        err = max(abs(a - b) for a, b in zip(w, d)) / max(abs(v) for v in w)
        print(f"{recipe}: {len(packed)} bytes of e2m1, {len(scales)} scales, global {gs:.4g}, max error {err:.3f} of amax")


if __name__ == "__main__":
    main(sys.argv[1:])
