"""Tests of the FP4 format (nvfp4.py, standard library) and, where torch is
installed, of moe_fp4.py's torch quantiser and dequant path against it.
Run by TestNVFP4 (fp4_test.go) or directly:

    python3 examples/torch-gpu/nvfp4_test.py -v

Without torch the torch tests are skipped with the reason (CI has none);
the GPU kernels are checked by fp4_selfcheck.py on the device.
"""
import importlib.util
import math
import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nvfp4  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed for this python (CI has none): the torch quantiser is checked on the device by fp4_selfcheck.py"


class E2M1(unittest.TestCase):
    def test_values_round_trip(self):
        for code in range(16):
            v = nvfp4.e2m1_value(code)
            self.assertEqual(nvfp4.e2m1_code(v), code, (code, v))

    def test_rounding_ties_to_even_and_saturation(self):
        cases = {0.2: 0.0, 0.25: 0.0, 0.26: 0.5, 0.75: 1.0, 1.25: 1.0, 1.3: 1.5, 1.75: 2.0, 2.5: 2.0,
                 2.6: 3.0, 3.5: 4.0, 5.0: 4.0, 5.1: 6.0, 7.0: 6.0, 1e9: 6.0}
        for x, want in cases.items():
            self.assertEqual(nvfp4.e2m1_value(nvfp4.e2m1_code(x)), want, x)
            self.assertEqual(nvfp4.e2m1_value(nvfp4.e2m1_code(-x)), -want, -x)

    def test_negative_zero_keeps_its_sign(self):
        self.assertEqual(nvfp4.e2m1_code(-0.0), 8)
        self.assertEqual(nvfp4.e2m1_code(-0.1), 8)


class E4M3(unittest.TestCase):
    def test_every_finite_byte_round_trips(self):
        for b in range(0x7F):  # 0x7F is NaN
            v = nvfp4.e4m3_value(b)
            self.assertEqual(nvfp4.e4m3_byte(v), b, (b, v))

    def test_known_values(self):
        self.assertEqual(nvfp4.e4m3_value(0x7E), 448.0)
        self.assertEqual(nvfp4.e4m3_value(0x08), 2.0 ** -6)
        self.assertEqual(nvfp4.e4m3_value(0x01), 2.0 ** -9)
        self.assertTrue(math.isnan(nvfp4.e4m3_value(0x7F)))
        self.assertEqual(nvfp4.e4m3_byte(1.0), 0x38)

    def test_rounding_is_to_nearest_even(self):
        # Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to 1.0.
        self.assertEqual(nvfp4.e4m3_byte(1.0625), 0x38)
        self.assertEqual(nvfp4.e4m3_byte(1.07), 0x39)
        # Between 1.125 and 1.25: the midpoint goes to 1.25 (even mantissa).
        self.assertEqual(nvfp4.e4m3_byte(1.1875), 0x3A)
        # Up to the next binade.
        self.assertEqual(nvfp4.e4m3_value(nvfp4.e4m3_byte(1.97)), 2.0)

    def test_out_of_range_refused(self):
        with self.assertRaises(ValueError):
            nvfp4.e4m3_byte(449.0)


def rand_matrix(n, k, seed):
    rnd = random.Random(seed)
    rows = [math.exp(rnd.gauss(0, 1)) for _ in range(n)]
    return [rnd.gauss(0, 1) * rows[i // k] / math.sqrt(k) for i in range(n * k)]


class Quantise(unittest.TestCase):
    def test_nvfp4_error_and_scales(self):
        n, k = 8, 64
        w = rand_matrix(n, k, 1)
        packed, scales, gs = nvfp4.quantise(w, n, k)
        self.assertEqual((len(packed), len(scales)), (n * k // 2, n * k // 16))
        amax = max(abs(v) for v in w)
        self.assertAlmostEqual(gs, amax / 2688, delta=amax * 1e-9)
        # The largest block's scale is e4m3's largest, 448.
        self.assertEqual(max(nvfp4.e4m3_value(b) for b in scales), 448.0)
        d = nvfp4.dequantise(packed, nvfp4.store_scales(scales, n, k // 16, "swizzled"), gs, n, k)
        # Each value within half a step of e2m1 of its block (the block
        # scale's own rounding adds at most 1/16 of it).
        for r in range(n):
            for b in range(k // 16):
                blk = range(r * k + b * 16, r * k + b * 16 + 16)
                bmax = max(abs(w[i]) for i in blk)
                for i in blk:
                    self.assertLessEqual(abs(w[i] - d[i]), bmax / 6 * 1.0 * 1.07 + 1e-12, (r, b, i))
        err = max(abs(a - b) for a, b in zip(w, d)) / amax
        self.assertLess(err, 0.2)
        self.assertGreater(err, 0.001)

    def test_packing_low_nibble_first(self):
        w = [0.0] * 16
        w[0], w[1] = 6.0, -0.5  # codes 7 and 9
        packed, scales, gs = nvfp4.quantise(w, 1, 16)
        self.assertEqual(packed[0], 7 | (9 << 4))
        self.assertEqual(packed[1:], bytes(7))

    def test_mxfp4_power_of_two_scales(self):
        n, k = 4, 64
        w = rand_matrix(n, k, 2)
        packed, scales, gs = nvfp4.quantise(w, n, k, "mxfp4")
        self.assertEqual((len(scales), gs), (n * k // 32, 1.0))
        for r in range(n):
            for b in range(k // 32):
                bmax = max(abs(v) for v in w[r * k + b * 32:r * k + b * 32 + 32])
                self.assertEqual(nvfp4.e8m0_value(scales[r * 2 + b]), 2.0 ** (math.floor(math.log2(bmax)) - 2))
        d = nvfp4.dequantise(packed, nvfp4.store_scales(scales, n, 2, "swizzled"), gs, n, k, "mxfp4")
        self.assertLess(max(abs(a - b) for a, b in zip(w, d)) / max(abs(v) for v in w), 0.34)

    def test_block_multiple_required(self):
        with self.assertRaises(ValueError):
            nvfp4.quantise([0.0] * 24, 1, 24)
        with self.assertRaises(ValueError):
            nvfp4.quantise([0.0] * 48, 1, 48, "mxfp4")

    def test_zero_block(self):
        packed, scales, gs = nvfp4.quantise([0.0] * 32, 1, 32)
        self.assertEqual((packed, scales, gs), (bytes(16), bytes(2), 1.0))


class Layout(unittest.TestCase):
    def test_swizzle_is_a_permutation_of_the_padded_tile(self):
        for n, kg in ((128, 4), (64, 12), (300, 9)):
            pn, pk = nvfp4.padded(n, kg)
            offs = {nvfp4.swizzle_offset(r, c, pk) for r in range(pn) for c in range(pk)}
            self.assertEqual(offs, set(range(pn * pk)), (n, kg))

    def test_swizzle_known_offsets(self):
        # cuBLAS's 128x4 layout: row r of a tile at (r%32)*16 + (r//32)*4.
        self.assertEqual(nvfp4.swizzle_offset(0, 1, 4), 1)
        self.assertEqual(nvfp4.swizzle_offset(1, 0, 4), 16)
        self.assertEqual(nvfp4.swizzle_offset(32, 0, 4), 4)
        self.assertEqual(nvfp4.swizzle_offset(33, 3, 4), 23)
        self.assertEqual(nvfp4.swizzle_offset(0, 4, 8), 512)
        self.assertEqual(nvfp4.swizzle_offset(128, 0, 8), 1024)

    def test_linear_scales_read_as_swizzled_are_scrambled(self):
        n, k = 64, 64
        w = rand_matrix(n, k, 3)
        packed, scales, gs = nvfp4.quantise(w, n, k)
        good = nvfp4.dequantise(packed, nvfp4.store_scales(scales, n, 4, "swizzled"), gs, n, k)
        bad = nvfp4.dequantise(packed, nvfp4.store_scales(scales, n, 4, "linear"), gs, n, k)
        amax = max(abs(v) for v in w)
        self.assertLess(max(abs(a - b) for a, b in zip(w, good)) / amax, 0.2)
        self.assertGreater(max(abs(a - b) for a, b in zip(w, bad)) / amax, 0.3)
        # Row 0's first four scales sit at the same offsets either way.
        self.assertEqual(good[:64], bad[:64])

    def test_global_scale_dropped(self):
        n, k = 2, 32
        w = rand_matrix(n, k, 4)
        packed, scales, gs = nvfp4.quantise(w, n, k)
        st = nvfp4.store_scales(scales, n, 2, "swizzled")
        on = nvfp4.dequantise(packed, st, gs, n, k)
        off = nvfp4.dequantise(packed, st, gs, n, k, apply_global=False)
        for a, b in zip(on, off):
            self.assertAlmostEqual(b * gs, a, delta=abs(a) * 1e-12)
        self.assertGreater(1 / gs, 1000)


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchMatchesReference(unittest.TestCase):
    def test_quantise_and_dequant_path(self):
        import torch
        import moe_fp4
        g = torch.Generator().manual_seed(5)
        for recipe in ("nvfp4", "mxfp4"):
            w = torch.randn(3, 40, 64, generator=g) * torch.exp(torch.randn(3, 40, 1, generator=g)) / 8
            p, s, gs = moe_fp4.quantise(w, recipe)
            for layout in ("swizzled", "linear"):
                st = moe_fp4.store_scales(s, layout)
                d = moe_fp4.dequantise(p, st, gs, 64, recipe)
                for e in range(3):
                    flat = [float(v) for v in w[e].flatten()]
                    rp, rs, rgs = nvfp4.quantise(flat, 40, 64, recipe)
                    self.assertEqual(bytes(p[e].flatten().tolist()), rp, (recipe, e))
                    self.assertEqual(bytes(s[e].flatten().tolist()), rs, (recipe, e))
                    self.assertEqual(float(gs[e]), rgs)
                    rst = nvfp4.store_scales(rs, 40, 64 // nvfp4.RECIPES[recipe], layout)
                    self.assertEqual(bytes(st[e].tolist()), rst, (recipe, layout))
                    rd = nvfp4.dequantise(rp, rst, rgs, 40, 64, recipe)
                    self.assertLess(max(abs(a - b) for a, b in zip(d[e].flatten().tolist(), rd)), 1e-6)

    def test_dequant_runner_entries_on_cpu(self):
        import torch
        import moe_fp4
        g = torch.Generator().manual_seed(6)
        w = torch.randn(4, 32, 64, generator=g) / 8
        fw = moe_fp4.Fp4Experts(w, "dequant", dtype=torch.float32)
        x = torch.randn(5, 64, generator=g)
        want = x @ moe_fp4.dequantise(fw.packed, fw.stored, fw.gs, 64)[2].T
        self.assertLess(float((fw.expert(x, 2) - want).abs().max()), 1e-5)
        dropped = moe_fp4.Fp4Experts(w, "dequant", global_scale="dropped", dtype=torch.float32)
        self.assertGreater(float(dropped.w.abs().max() / fw.w.abs().max()), 1000)


if __name__ == "__main__":
    unittest.main()
