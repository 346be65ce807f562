"""Pipeline placement of a decoder-only transformers model over several
devices: the embeddings and the first decoder layers on the first device,
the next layers on the next, the last layers, the final norm and lm_head on
the last. A forward pass goes through the devices in order, one at a time
(no micro-batches): what it shows is a server that uses every GPU of a
bmx slot of two or more, with each GPU holding its share of the weights.

    python3 pipeline.py plan N_LAYERS DEVICE SPLIT   # the placement as JSON (no torch needed)

plan() and devices() are plain Python; place() needs torch. Each placed
module gets a forward pre-hook that moves its tensor inputs (the hidden
states, the rotary position embeddings, masks and positions) to its device
and, on CUDA, makes that device current, so a kernel launched through the
current device (a Triton kernel) runs where its operands are.
"""
import json
import sys


def devices(device, split):
    """The devices the model goes on, from --device and --split: a
    comma-separated --device is that list, in order (--split must then be 1
    or its length); one device with --split N > 1 is the first N visible
    GPUs for cuda (cuda:0 .. cuda:N-1, as CUDA_VISIBLE_DEVICES numbers
    them), or cpu N times (the same code path, for a test without a GPU)."""
    names = [d.strip() for d in device.split(",") if d.strip()]
    if not names:
        raise ValueError(f"--device {device!r} names no device")
    if split < 1:
        raise ValueError(f"--split {split}: want 1 or more")
    if len(names) > 1:
        if split not in (1, len(names)):
            raise ValueError(f"--split {split} with the {len(names)} devices of --device {device}")
        return names
    if split == 1:
        return names
    if names[0] == "cuda":
        return [f"cuda:{i}" for i in range(split)]
    if names[0] == "cpu":
        return ["cpu"] * split
    raise ValueError(f"--split {split} needs --device cuda or cpu (or a list of devices), not {names[0]}")


def plan(n_layers, n_devices):
    """The device index of each of n_layers decoder layers over n_devices:
    contiguous runs as even as they go, the first devices taking one more
    when n_devices does not divide n_layers."""
    if n_devices < 1 or n_devices > n_layers:
        raise ValueError(f"{n_layers} decoder layers cannot be split over {n_devices} devices (each needs a layer)")
    base, extra = divmod(n_layers, n_devices)
    stage = []
    for d in range(n_devices):
        stage += [d] * (base + (1 if d < extra else 0))
    return stage


def describe(stage, devs):
    """'layers 0-2 on cuda:0, layers 3-4 on cuda:1'."""
    parts = []
    for d, dev in enumerate(devs):
        idx = [i for i, s in enumerate(stage) if s == d]
        span = f"layer {idx[0]}" if len(idx) == 1 else f"layers {idx[0]}-{idx[-1]}"
        parts.append(f"{span} on {dev}")
    return ", ".join(parts)


def _follow(device):
    """A forward pre-hook that moves a module's tensor inputs to device."""
    import torch

    def move(x):
        if isinstance(x, torch.Tensor):
            return x.to(device, non_blocking=False) if x.device != device else x
        if isinstance(x, tuple):
            return tuple(move(v) for v in x)
        if isinstance(x, list):
            return [move(v) for v in x]
        if isinstance(x, dict):
            return {k: move(v) for k, v in x.items()}
        return x

    def hook(module, args, kwargs):
        if device.type == "cuda":
            torch.cuda.set_device(device)
        return move(args), move(kwargs)

    return hook


def place(model, devs):
    """Moves model (model.model.embed_tokens, .rotary_emb, .layers, .norm;
    model.lm_head, as transformers' Llama has them) onto devs by plan() and
    hooks every placed module after the embeddings so its inputs follow it.
    Returns the placement as describe() says it. One device moves nothing
    and hooks nothing."""
    import torch
    devs = [torch.device(d) for d in devs]
    layers = model.model.layers
    stage = plan(len(layers), len(devs))
    if len(devs) == 1:
        return describe(stage, [str(d) for d in devs])
    first, last = devs[0], devs[-1]
    model.model.embed_tokens.to(first)
    if getattr(model.model, "rotary_emb", None) is not None:
        model.model.rotary_emb.to(first)
    for layer, s in zip(layers, stage):
        layer.to(devs[s])
        layer.register_forward_pre_hook(_follow(devs[s]), with_kwargs=True)
    for m in (model.model.norm, model.lm_head):
        m.to(last)
        m.register_forward_pre_hook(_follow(last), with_kwargs=True)
    return describe(stage, [str(d) for d in devs])


def main(argv):
    if len(argv) == 4 and argv[0] == "plan":
        devs = devices(argv[2], int(argv[3]))
        stage = plan(int(argv[1]), len(devs))
        print(json.dumps({"devices": devs, "stage": stage, "placement": describe(stage, devs)}))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
