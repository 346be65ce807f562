"""The mixture-of-experts version of a converted Llama checkpoint, made from
its dense MLPs with the standard library alone.

    python3 moe.py convert MODEL.gguf OUTDIR [--seed N]   # gguf2hf's checkpoint plus moe.safetensors, moe.json
    python3 moe.py generate OUTDIR PROMPT N [--renormalize on|off]
                                                      # N greedy tokens (and top-5 logprobs) of the MoE
                                                      # model by a plain-Python forward pass

Each decoder MLP (gate, up and down projections, SiLU-gated) becomes E
experts: expert e's matrices are the dense ones plus seeded uniform noise of
PERTURBATION times the matrix's RMS, so every expert still writes the
model's stories and no two experts compute the same thing. A router (E x
hidden, seeded uniform noise) scores the experts per token; the top-k by
softmax probability run, weighted by their probabilities renormalised to sum
to 1 (Mixtral's rule). --renormalize off weights them by the raw
probabilities instead (a model served without its norm_topk_prob): the
mixture then carries only part of the MLP's output, a real user bug.

The noise comes from random.Random seeded by a string of the seed, the
layer, the matrix and the expert, so the model is the same on every machine,
Python and torch version, and the plain-Python reference here runs exactly
the weights the torch server builds (server.py --moe-runner).

Tensors, per layer i (E experts, H hidden, I intermediate):
  model.layers.i.moe.router  (E, H)     the router
  model.layers.i.moe.w13     (E, 2I, H) gate rows then up rows (nn.Linear layout)
  model.layers.i.moe.w2      (E, H, I)  down
"""
import array
import json
import math
import operator
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf2hf  # noqa: E402

EXPERTS = 8
TOP_K = 2
# PERTURBATION is each expert's noise as a fraction of its matrix's RMS:
# enough that the experts differ (the routing decides the numbers), small
# enough that each expert alone still writes the model's stories.
PERTURBATION = 0.1
# ROUTER_SCALE sets the router's logits against the normalized hidden
# state: uniform noise of standard deviation ROUTER_SCALE/sqrt(H) per
# weight, so a token's top two experts carry about half of the softmax's
# probability and skipping the renormalisation changes the output.
ROUTER_SCALE = 1.0


def noise(key, n):
    """n values of seeded uniform noise of unit variance (in
    (-sqrt 3, sqrt 3)), the same on every machine for the same key."""
    h = array.array("H")
    h.frombytes(random.Random(key).randbytes(2 * n))
    if sys.byteorder != "little":
        h.byteswap()
    s3 = math.sqrt(3.0)
    c = s3 / 32768.0
    return [(v + 0.5) * c - s3 for v in h]


def perturbed(a, key, frac):
    """a (array('f')) plus uniform noise of frac times a's RMS."""
    rms = math.sqrt(sum(map(operator.mul, a, a)) / len(a))  # the squares summed in order, as sum(v * v for v in a)
    c = frac * rms
    return array.array("f", [v + c * u for v, u in zip(a, noise(key, len(a)))])


def build(model_dir, experts=EXPERTS, top_k=TOP_K, seed=0):
    """Returns (config, tensors) of the MoE model for the checkpoint in
    model_dir: tensors maps a name to (shape, array('f')), as
    gguf2hf.read_safetensors does."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if not 1 <= top_k <= experts:
        raise ValueError(f"top-k {top_k} must be from 1 to the number of experts ({experts})")
    w = gguf2hf.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    out = {}
    for li in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{li}."
        w13, w2 = array.array("f"), array.array("f")
        for e in range(experts):
            for proj in ("gate_proj", "up_proj"):
                w13.extend(perturbed(w[p + f"mlp.{proj}.weight"][1], f"bmx-moe:{seed}:{li}:{proj}:{e}", PERTURBATION))
            w2.extend(perturbed(w[p + "mlp.down_proj.weight"][1], f"bmx-moe:{seed}:{li}:down_proj:{e}", PERTURBATION))
        r = ROUTER_SCALE / math.sqrt(H)
        router = array.array("f", [r * u for u in noise(f"bmx-moe:{seed}:{li}:router", experts * H)])
        out[p + "moe.router"] = ((experts, H), router)
        out[p + "moe.w13"] = ((experts, 2 * I, H), w13)
        out[p + "moe.w2"] = ((experts, H, I), w2)
    moe = {"num_experts": experts, "top_k": top_k, "seed": seed, "perturbation": PERTURBATION,
           "router_scale": ROUTER_SCALE, "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": cfg["num_hidden_layers"]}
    return moe, out


def convert(gguf_path, out_dir, seed=0):
    """gguf2hf's checkpoint of the GGUF in out_dir, plus the MoE model's
    tensors (moe.safetensors) and its configuration (moe.json)."""
    gguf2hf.convert(gguf_path, out_dir)
    moe, tensors = build(out_dir, seed=seed)
    gguf2hf.write_safetensors(os.path.join(out_dir, "moe.safetensors"), tensors)
    with open(os.path.join(out_dir, "moe.json"), "w") as f:
        json.dump(moe, f, indent=1)
    return moe


def route(logits, top_k, renormalize):
    """The chosen experts and their weights for one token's router logits:
    softmax, the top_k by probability, then (renormalize) divided by their
    sum."""
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    z = sum(e)
    probs = [v / z for v in e]
    chosen = sorted(range(len(probs)), key=lambda i: -probs[i])[:top_k]
    weights = [probs[i] for i in chosen]
    if renormalize:
        s = sum(weights)
        weights = [v / s for v in weights]
    return chosen, weights


def _rows(a, row0, rows, cols, x):
    """rows x cols block of the flat matrix a, from row row0, times x."""
    # Each row's products summed in order from k = 0, as
    # sum(a[(row0 + r) * cols + k] * x[k] for k in range(cols)) would,
    # without an interpreted step per product.
    mul = operator.mul
    return [sum(map(mul, a[r * cols:(r + 1) * cols], x)) for r in range(row0, row0 + rows)]


class ReferenceMoE(gguf2hf.ReferenceLlama):
    """gguf2hf's plain-Python forward pass with each MLP replaced by the
    MoE layer: the reference the torch runners are checked against."""

    def __init__(self, model_dir, renormalize=True):
        super().__init__(model_dir)
        with open(os.path.join(model_dir, "moe.json")) as f:
            self.moe = json.load(f)
        self.w.update(gguf2hf.read_safetensors(os.path.join(model_dir, "moe.safetensors")))
        self.renormalize = renormalize

    def _mlp(self, li, h):
        p = f"model.layers.{li}.moe."
        E, H, I = self.moe["num_experts"], self.moe["hidden_size"], self.moe["intermediate_size"]
        logits = _rows(self.w[p + "router"][1], 0, E, H, h)
        chosen, weights = route(logits, self.moe["top_k"], self.renormalize)
        w13, w2 = self.w[p + "w13"][1], self.w[p + "w2"][1]
        out = [0.0] * H
        for e, wt in zip(chosen, weights):
            g = _rows(w13, e * 2 * I, I, H, h)
            u = _rows(w13, e * 2 * I + I, I, H, h)
            m = [gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(g, u)]
            d = _rows(w2, e * H, H, I, m)
            out = [o + wt * v for o, v in zip(out, d)]
        return out


def main(argv):
    usage = __doc__.split("\n\n")[1]
    if argv[:1] == ["convert"] and len(argv) in (3, 5) and (len(argv) == 3 or argv[3] == "--seed"):
        moe = convert(argv[1], argv[2], seed=int(argv[4]) if len(argv) == 5 else 0)
        print(f"converted {argv[1]} -> {argv[2]}: {moe['num_hidden_layers']} MoE layers of {moe['num_experts']} experts "
              f"(intermediate {moe['intermediate_size']}), top-{moe['top_k']}, seed {moe['seed']}")
    elif argv[:1] == ["generate"] and len(argv) in (4, 6) and (len(argv) == 4 or (argv[4] == "--renormalize" and argv[5] in ("on", "off"))):
        model = ReferenceMoE(argv[1], renormalize=argv[5:] != ["off"])
        print(gguf2hf.generate_json(model, gguf2hf.Tokenizer.load(argv[1]), argv[2], int(argv[3])))
    else:
        sys.exit(usage)


if __name__ == "__main__":
    main(sys.argv[1:])
