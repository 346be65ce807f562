"""Convert a llama GGUF (F32 tensors, llama2 sentencepiece vocabulary) into a
transformers Llama checkpoint, with the standard library alone.

    python3 gguf2hf.py convert MODEL.gguf OUTDIR   # config.json, model.safetensors, tokenizer files
    python3 gguf2hf.py generate OUTDIR PROMPT N [--no-bos]  # N greedy tokens (and top-5 logprobs)
                                                   # by a plain-Python forward pass
    python3 gguf2hf.py tokenize OUTDIR TEXT        # token ids, pieces, and the decoded text

The GGUF (here stories260K.gguf, converted by llama.cpp from llama2.c) keeps
the query and key rows in llama.cpp's rotary layout (each rotated pair
adjacent); transformers' Llama rotates the first half of a head against the
second half, so those rows are permuted back, as transformers' own GGUF
loader does. The tokenizer is llama.cpp's sentencepiece (SPM) algorithm over
the GGUF's vocabulary and scores: a space prefix, spaces as U+2581, the
best-scoring adjacent merge first, bytes as <0xXX> tokens when a character
is not in the vocabulary.

`generate` is the check of the conversion that needs no torch: it runs the
converted checkpoint with transformers' Llama semantics (rotate-half RoPE,
RMSNorm, SiLU MLP, grouped-query attention) in plain Python, so its greedy
tokens can be compared with llama.cpp's for the same GGUF.
"""
import array
import json
import math
import operator
import os
import struct
import sys

GGUF_MAGIC = b"GGUF"
# GGUF metadata value types.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
GGML_F32 = 0

# Token types in tokenizer.ggml.token_type (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"


class GGUFError(Exception):
    pass


def read_gguf(path):
    """Returns (metadata, tensors): tensors maps a name to (shape, array('f')),
    the shape in row-major order (GGUF lists the fastest dimension first)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (magic {data[:4]!r})")
    off = 4

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)[0]
        off += struct.calcsize("<" + fmt)
        return v

    def rstr():
        nonlocal off
        n = rd("Q")
        s = data[off:off + n].decode("utf-8")
        off += n
        return s

    def rval(t):
        if t == _STRING:
            return rstr()
        if t == _ARRAY:
            et, n = rd("I"), rd("Q")
            return [rval(et) for _ in range(n)]
        if t not in _SCALARS:
            raise GGUFError(f"{path}: unknown metadata type {t}")
        return rd(_SCALARS[t])

    version = rd("I")
    if version not in (2, 3):
        raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or 3)")
    n_tensors, n_kv = rd("Q"), rd("Q")
    meta = {}
    for _ in range(n_kv):
        key = rstr()
        meta[key] = rval(rd("I"))
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        dims = [rd("Q") for _ in range(rd("I"))]
        ttype, toff = rd("I"), rd("Q")
        infos.append((name, dims, ttype, toff))
    align = meta.get("general.alignment", 32)
    base = (off + align - 1) // align * align
    tensors = {}
    for name, dims, ttype, toff in infos:
        if ttype != GGML_F32:
            raise GGUFError(f"{path}: tensor {name} has ggml type {ttype}; only F32 (0) is supported")
        n = math.prod(dims)
        a = array.array("f")
        a.frombytes(data[base + toff:base + toff + 4 * n])
        if sys.byteorder != "little":
            a.byteswap()
        tensors[name] = (tuple(reversed(dims)), a)
    return meta, tensors


def unpermute_rows(w, rows, cols, n_head):
    """Undoes llama.cpp's rotary permutation of query/key rows: within each
    head, GGUF row 2*j+s is transformers' row s*(head_dim/2)+j."""
    hd = rows // n_head
    out = array.array("f", bytes(4 * rows * cols))
    for h in range(n_head):
        for j in range(hd // 2):
            for s in range(2):
                src = (h * hd + 2 * j + s) * cols
                dst = (h * hd + s * (hd // 2) + j) * cols
                out[dst:dst + cols] = w[src:src + cols]
    return out


def convert(gguf_path, out_dir):
    """Writes a transformers Llama checkpoint for the GGUF into out_dir."""
    meta, t = read_gguf(gguf_path)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise GGUFError(f"{gguf_path}: architecture {arch!r}; only llama is supported")
    if meta.get("tokenizer.ggml.model") != "llama":
        raise GGUFError(f"{gguf_path}: tokenizer {meta.get('tokenizer.ggml.model')!r}; only llama (sentencepiece) is supported")
    p = "llama."
    dim = meta[p + "embedding_length"]
    n_layer = meta[p + "block_count"]
    n_head = meta[p + "attention.head_count"]
    n_kv = meta.get(p + "attention.head_count_kv", n_head)
    head_dim = dim // n_head
    if meta.get(p + "rope.dimension_count", head_dim) != head_dim:
        raise GGUFError(f"{gguf_path}: partial rotary embeddings are not supported")
    tokens = meta["tokenizer.ggml.tokens"]
    theta = meta.get(p + "rope.freq_base", 10000.0)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": len(tokens),
        "hidden_size": dim,
        "intermediate_size": meta[p + "feed_forward_length"],
        "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "max_position_embeddings": meta.get(p + "context_length", 2048),
        "rms_norm_eps": meta.get(p + "attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": "output.weight" not in t,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id", 1),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id", 2),
        "torch_dtype": "float32",
        "dtype": "float32",
    }
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "attn_norm": "input_layernorm", "ffn_gate": "mlp.gate_proj",
                 "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj", "ffn_norm": "post_attention_layernorm"}
    out = {}
    for name, (shape, a) in t.items():
        if name in names:
            out[names[name]] = (shape, a)
            continue
        parts = name.split(".")
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in per_layer:
            raise GGUFError(f"{gguf_path}: unexpected tensor {name}")
        if parts[2] in ("attn_q", "attn_k"):
            a = unpermute_rows(a, shape[0], shape[1], n_head if parts[2] == "attn_q" else n_kv)
        out[f"model.layers.{parts[1]}.{per_layer[parts[2]]}.weight"] = (shape, a)
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), out)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f)
    vocab = {
        "model": "llama-spm",
        "tokens": tokens,
        "scores": meta["tokenizer.ggml.scores"],
        "token_type": meta["tokenizer.ggml.token_type"],
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "unknown_token_id": meta.get("tokenizer.ggml.unknown_token_id", 0),
        "add_bos_token": meta.get("tokenizer.ggml.add_bos_token", True),
        "add_space_prefix": meta.get("tokenizer.ggml.add_space_prefix", True),
    }
    with open(os.path.join(out_dir, "spm_vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    return config


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name in sorted(tensors):
        shape, a = tensors[name]
        n = 4 * len(a)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt", "source": "gguf2hf.py"}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name in sorted(tensors):
            a = tensors[name][1]
            if sys.byteorder != "little":
                a = array.array("f", a)
                a.byteswap()
            f.write(a.tobytes())


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise GGUFError(f"{path}: {name} is {info['dtype']}; only F32 is read")
        b, e = info["data_offsets"]
        a = array.array("f")
        a.frombytes(data[8 + n + b:8 + n + e])
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (tuple(info["shape"]), a)
    return out


class Tokenizer:
    """llama.cpp's SPM tokenizer over a GGUF vocabulary (spm_vocab.json)."""

    def __init__(self, vocab):
        self.tokens = vocab["tokens"]
        self.scores = vocab["scores"]
        self.types = vocab["token_type"]
        self.bos = vocab["bos_token_id"]
        self.eos = vocab["eos_token_id"]
        self.unk = vocab["unknown_token_id"]
        self.add_bos = vocab.get("add_bos_token", True)
        self.add_space_prefix = vocab.get("add_space_prefix", True)
        self.ids = {}
        for i, tok in enumerate(self.tokens):
            if self.types[i] in (NORMAL, USER_DEFINED, UNKNOWN, CONTROL):
                self.ids.setdefault(tok, i)
        self.byte_ids = {}
        for i, tok in enumerate(self.tokens):
            if self.types[i] == BYTE:
                self.byte_ids[int(tok[3:5], 16)] = i

    @classmethod
    def load(cls, model_dir):
        with open(os.path.join(model_dir, "spm_vocab.json")) as f:
            return cls(json.load(f))

    def encode(self, text, bos=None, space_prefix=None):
        """text's ids: BOS first and a space before the text as the
        vocabulary says (bos and space_prefix override it; text that
        continues earlier text takes neither)."""
        ids = [self.bos] if (self.add_bos if bos is None else bos) else []
        if not text:
            return ids
        if self.add_space_prefix if space_prefix is None else space_prefix:
            text = " " + text
        syms = list(text.replace(" ", SPACE))
        while len(syms) > 1:
            best, at = None, -1
            for i in range(len(syms) - 1):
                tid = self.ids.get(syms[i] + syms[i + 1])
                if tid is not None and self.types[tid] == NORMAL and (best is None or self.scores[tid] > best):
                    best, at = self.scores[tid], i
            if at < 0:
                break
            syms[at:at + 2] = [syms[at] + syms[at + 1]]
        for s in syms:
            tid = self.ids.get(s)
            if tid is not None:
                ids.append(tid)
            else:
                ids.extend(self.byte_ids.get(b, self.unk) for b in s.encode("utf-8"))
        return ids

    def piece_bytes(self, tid):
        """A token's text as UTF-8 bytes, as it continues earlier text."""
        ty = self.types[tid]
        if ty == BYTE:
            return bytes([int(self.tokens[tid][3:5], 16)])
        if ty in (CONTROL, UNKNOWN, UNUSED):
            return b""
        return self.tokens[tid].replace(SPACE, " ").encode("utf-8")

    def decode(self, ids):
        return b"".join(self.piece_bytes(i) for i in ids).decode("utf-8", errors="replace")


class ReferenceLlama:
    """transformers' LlamaForCausalLM forward pass in plain Python, with a
    key/value cache: slow, but needs nothing, for checking a conversion."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = c = json.load(f)
        self.w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.dim, self.n_head, self.n_kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c["head_dim"]
        self.eps = c["rms_norm_eps"]
        theta = c["rope_theta"]
        self.inv_freq = [1.0 / theta ** (2 * i / self.hd) for i in range(self.hd // 2)]
        self.cache = [([], []) for _ in range(c["num_hidden_layers"])]
        self._rows = {}  # _mv's weights by name, row by row

    def _mv(self, name, x):
        # Each row's products summed in order from k = 0, as
        # sum(a[r * cols + k] * x[k] for k in range(cols)) would, without
        # an interpreted step per product; the rows are made once, as
        # lists of the (exact) doubles of their float32 values.
        rows = self._rows.get(name)
        if rows is None:
            (n, cols), a = self.w[name]
            rows = self._rows[name] = [a[r * cols:(r + 1) * cols].tolist() for r in range(n)]
        mul = operator.mul
        return [sum(map(mul, row, x)) for row in rows]

    def _norm(self, name, x):
        g = self.w[name][1]
        s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + self.eps)
        return [v * s * g[i] for i, v in enumerate(x)]

    def _rope(self, v, pos):
        h = self.hd // 2
        out = list(v)
        for i in range(h):
            c, s = math.cos(pos * self.inv_freq[i]), math.sin(pos * self.inv_freq[i])
            out[i] = v[i] * c - v[i + h] * s
            out[i + h] = v[i + h] * c + v[i] * s
        return out

    def _mlp(self, li, h):
        """Layer li's SiLU-gated MLP of the normalized hidden state h."""
        p = f"model.layers.{li}.mlp."
        g = self._mv(p + "gate_proj.weight", h)
        u = self._mv(p + "up_proj.weight", h)
        m = [gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(g, u)]
        return self._mv(p + "down_proj.weight", m)

    def step(self, tok, pos):
        """Feeds one token at position pos; returns the next token's logits."""
        (_, dim), emb = self.w["model.embed_tokens.weight"]
        x = list(emb[tok * dim:(tok + 1) * dim])
        hd, rep = self.hd, self.n_head // self.n_kv
        for li, (kc, vc) in enumerate(self.cache):
            p = f"model.layers.{li}."
            h = self._norm(p + "input_layernorm.weight", x)
            q = self._mv(p + "self_attn.q_proj.weight", h)
            k = self._mv(p + "self_attn.k_proj.weight", h)
            v = self._mv(p + "self_attn.v_proj.weight", h)
            q = [x_ for hh in range(self.n_head) for x_ in self._rope(q[hh * hd:(hh + 1) * hd], pos)]
            k = [x_ for hh in range(self.n_kv) for x_ in self._rope(k[hh * hd:(hh + 1) * hd], pos)]
            kc.append(k)
            vc.append(v)
            att = []
            for hh in range(self.n_head):
                kv = hh // rep
                qh = q[hh * hd:(hh + 1) * hd]
                sc = [sum(map(operator.mul, qh, kk[kv * hd:(kv + 1) * hd])) / math.sqrt(hd) for kk in kc]
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = sum(e)
                w = [v_ / z for v_ in e]
                att.extend(sum(map(operator.mul, w, col)) for col in zip(*(vt[kv * hd:(kv + 1) * hd] for vt in vc)))
            o = self._mv(p + "self_attn.o_proj.weight", att)
            x = [a + b for a, b in zip(x, o)]
            h = self._norm(p + "post_attention_layernorm.weight", x)
            d = self._mlp(li, h)
            x = [a + b for a, b in zip(x, d)]
        x = self._norm("model.norm.weight", x)
        return self._mv("lm_head.weight", x)

    def greedy(self, ids, n, eos=None, top=5):
        """n greedy tokens after ids (fewer at eos): [(token, logprob,
        [(candidate, logprob), ...top])]."""
        logits = None
        for pos, t in enumerate(ids):
            logits = self.step(t, pos)
        out = []
        for _ in range(n):
            m = max(logits)
            z = m + math.log(sum(math.exp(v - m) for v in logits))
            lp = [v - z for v in logits]
            order = sorted(range(len(lp)), key=lambda i: -lp[i])
            t = order[0]
            if t == eos:
                break
            out.append((t, lp[t], [(i, lp[i]) for i in order[:top]]))
            logits = self.step(t, len(ids) + len(out) - 1)
        return out


def generate_json(model, tok, prompt, n, bos=True):
    """n greedy steps of model after prompt, as the JSON that `generate`
    prints: the prompt's ids, the tokens, the text, and each step's top 5."""
    ids = tok.encode(prompt, bos=bos)
    out = model.greedy(ids, n, eos=tok.eos)
    text = lambda i: tok.piece_bytes(i).decode("utf-8", "replace")  # noqa: E731
    steps = [{"token": text(t), "logprob": lp, "top": [{"token": text(i), "logprob": v} for i, v in top]}
             for t, lp, top in out]
    return json.dumps({"prompt_ids": ids, "ids": [t for t, _, _ in out], "text": tok.decode([t for t, _, _ in out]),
                       "steps": steps}, ensure_ascii=False)


def main(argv):
    usage = __doc__.split("\n\n")[1]
    if len(argv) < 3:
        sys.exit(usage)
    cmd = argv[0]
    if cmd == "convert" and len(argv) == 3:
        cfg = convert(argv[1], argv[2])
        print(f"converted {argv[1]} -> {argv[2]}: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
              f"{cfg['num_attention_heads']} heads ({cfg['num_key_value_heads']} kv), vocab {cfg['vocab_size']}")
    elif cmd == "generate" and len(argv) in (4, 5) and argv[4:] in ([], ["--no-bos"]):
        print(generate_json(ReferenceLlama(argv[1]), Tokenizer.load(argv[1]), argv[2], int(argv[3]), argv[4:] != ["--no-bos"]))
    elif cmd == "tokenize" and len(argv) == 3:
        tok = Tokenizer.load(argv[1])
        ids = tok.encode(argv[2])
        print(json.dumps({"ids": ids, "pieces": [tok.tokens[i] for i in ids], "text": tok.decode(ids)}, ensure_ascii=False))
    else:
        sys.exit(usage)


if __name__ == "__main__":
    main(sys.argv[1:])
