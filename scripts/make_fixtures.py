#!/usr/bin/env python3
"""Make the test fixtures: tiny random Qwen2 and Llama models with their tokenizers and chat
templates, saved in HF layout (safetensors) and as GGUF, plus reference outputs computed by HF
transformers and tokenizers.

Run on a machine where torch, transformers and tokenizers are installed (the GPU host):
    python3 scripts/make_fixtures.py --out tests/fixtures

What it writes (all under --out):
  qwen2-tiny/            HF layout, fp32, tied embeddings, QKV bias, transformers-5 config
                         (rope_parameters), chat_template.jinja
  qwen2-tiny-bf16/       the same weights rounded to bf16, saved as bf16 safetensors
  llama-tiny/            HF layout, fp32, untied, GQA 4:1, llama3 rope scaling, sharded safetensors
                         with model.safetensors.index.json, old-style config (top-level rope_theta)
                         and chat_template inside tokenizer_config.json
  qwen2-tiny-f32.gguf, qwen2-tiny-q8_0.gguf, qwen2-tiny-q4_0.gguf, llama-tiny-f16.gguf
  ref/qwen2-tiny.json, ref/llama-tiny.json: token ids, decoded text, last-position logits, greedy
                         continuations, rendered chat templates.
  then the vision-language fixtures of scripts/make_vl_fixtures.py (qwen25vl-tiny/, qwen2vl-tiny/,
  vl-images/, ref/qwen25vl-tiny/, ref/qwen2vl-tiny/, ref/resample/; see that script's header):
  --vl-only makes only those, --no-vl skips them.

The GGUF writer below follows the GGUF v3 specification (ggml's docs/gguf.md) and llama.cpp's
tensor naming; it is written here from the spec so no gguf package is needed.
"""
import argparse, json, math, os, shutil, struct, sys, time

import numpy as np
import torch
import tokenizers
import transformers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

LLAMA3_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
                   "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
                   "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
                   "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
                   "{% endif %}")

TOKENIZE_TEXTS = [
    "Hello world! How are you today?",
    "I can't find my card \u2014 it's been 2 weeks. What's the status?",
    "They'll, we've, I'm, you'd, she's, DON'T, WE'LL, it'S",
    "\u6211\u7684\u94f6\u884c\u5361\u4e22\u4e86\uff0c\u600e\u4e48\u529e\uff1f\u8bf7\u5e2e\u6211\u51bb\u7ed3\u3002",
    "Emoji test \U0001F600\U0001F44D\U0001F3FD and flags \U0001F1FA\U0001F1F8 \U0001F1E8\U0001F1F3 \u2764\ufe0f",
    "Transfer 1234567.89 USD on 2024-03-15 at 10:30, ref 12345678901234567890",
    "  leading spaces\tand\ttabs\n\nnewlines   \n  trailing  ",
    "\t\t  \n\r\n windows\r\nline endings \u00a0nbsp",
    "Cafe\u0301 e\u0301le\u0300ve na\u0308ive",
    "\u00dcn\u00efc\u00f6d\u00e9 \u00c0\u00c9\u00ce \u00df \u3053\u3093\u306b\u3061\u306f \uc548\ub155\ud558\uc138\uc694",
    "",
    " ",
    "a",
    "x" * 40 + " supercalifragilisticexpialidocious",
    "<tool_call>{\"name\": \"get_balance\"}</tool_call> after",
    "control \u0000\u0007 chars and \u200b zero width",
    "What's my balance?   I've got $1,000,000.00!!!  ...",
]
SPECIAL_TEXTS = {
    "qwen2": ["<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
              "text<|endoftext|>more text <|im_end|>"],
    "llama": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
              "a<|eot_id|>b <|end_of_text|>"],
}
PROMPTS = [
    "My card has not arrived yet, what should I do?",
    "How do I transfer money to another account?",
    "\u6211\u7684\u94f6\u884c\u5361\u8fd8\u6ca1\u6709\u6536\u5230\u3002",
    "The quick brown fox jumps over the lazy dog. " * 4,
]
CHATS = [
    [{"role": "user", "content": "Where is my card?"}],
    [{"role": "system", "content": "You are a bank assistant."},
     {"role": "user", "content": "Hello"}],
    [{"role": "user", "content": "  I lost my card.  "},
     {"role": "assistant", "content": "I can help you freeze it."},
     {"role": "user", "content": "Please do, and order a new one.\n"}],
    [{"role": "system", "content": "\u4f60\u662f\u94f6\u884c\u5ba2\u670d\u3002"},
     {"role": "user", "content": "\u6211\u7684\u5361\u4e22\u4e86 \U0001F622"},
     {"role": "assistant", "content": "\u597d\u7684"},
     {"role": "user", "content": "\u8c22\u8c22"}],
]


def log(*a):
    print("[fixtures]", *a, flush=True)


# ---------------------------------------------------------------- tokenizers
def train_tokenizer(kind, corpus, vocab_size):
    if kind == "qwen2":
        tok = Tokenizer(models.BPE(ignore_merges=False))
        tok.normalizer = normalizers.NFC()
        pat = QWEN2_PAT
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        plain_added = ["<tool_call>", "</tool_call>"]
    else:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        pat = LLAMA3_PAT
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
        plain_added = []
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pat), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    if plain_added:
        tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in plain_added])
    if kind == "qwen2":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def hf_tokenizer(tok, kind):
    from transformers import PreTrainedTokenizerFast
    if kind == "qwen2":
        t = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                    pad_token="<|endoftext|>", bos_token=None)
        t.chat_template = QWEN25_TEMPLATE
    else:
        t = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                    eos_token="<|eot_id|>")
        t.chat_template = LLAMA3_TEMPLATE
    return t


# ---------------------------------------------------------------- models
def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "o_proj" in name or "down_proj" in name:
                # residual branches larger than the embedding, so that greedy continuations do
                # not just repeat the last token (tied embeddings favour it otherwise)
                p.copy_(4.0 * torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def make_model(kind, vocab_size, bos, eos):
    if kind == "qwen2":
        cfg = transformers.Qwen2Config(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        m = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=192, num_hidden_layers=3,
            num_attention_heads=8, num_key_value_heads=2, head_dim=8, max_position_embeddings=16384,
            rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192})
        m = transformers.LlamaForCausalLM(cfg)
    try:
        m.config._attn_implementation = "eager"
    except Exception:  # noqa
        pass
    init_weights(m, 1234 if kind == "qwen2" else 5678)
    if kind == "qwen2":
        m.tie_weights()
    m.eval()
    return m


@torch.no_grad()
def last_logits(model, ids):
    out = model(torch.tensor([ids], dtype=torch.long))
    return out.logits[0, -1].float().numpy()


@torch.no_grad()
def greedy(model, ids, n):
    ids = list(ids)
    gen = []
    for _ in range(n):
        nxt = int(np.argmax(last_logits(model, ids)))
        gen.append(nxt)
        ids.append(nxt)
    return gen


def with_weights(model, fn):
    """A copy of model whose 2-D weights are replaced by fn(name, w) (to get the function a
    quantised file computes)."""
    import copy
    m2 = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in m2.named_parameters():
            p.copy_(fn(name, p.detach().clone()))
    return m2


# ---------------------------------------------------------------- GGUF writer
GGUF_T = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
          "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30


def f16_bytes(a):
    return np.asarray(a, dtype=np.float16).tobytes()


def quant_q8_0(w):
    x = w.reshape(-1, 32).astype(np.float32)
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    idv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0).astype(np.float32)
    v = x * idv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    d16 = d.astype(np.float16)
    out = bytearray()
    for i in range(x.shape[0]):
        out += d16[i].tobytes() + q[i].tobytes()
    deq = (q.astype(np.float32) * d16.astype(np.float32)[:, None]).reshape(w.shape)
    return bytes(out), deq


def quant_q4_0(w):
    x = w.reshape(-1, 32).astype(np.float32)
    idx = np.abs(x).argmax(axis=1)
    mx = x[np.arange(x.shape[0]), idx]
    d = mx / -8.0
    idv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0).astype(np.float32)
    q = np.minimum(15, np.trunc(x * idv[:, None] + 8.5)).astype(np.uint8)
    d16 = d.astype(np.float16)
    out = bytearray()
    for i in range(x.shape[0]):
        packed = (q[i, :16] | (q[i, 16:] << 4)).astype(np.uint8)
        out += d16[i].tobytes() + packed.tobytes()
    deq = ((q.astype(np.float32) - 8.0) * d16.astype(np.float32)[:, None]).reshape(w.shape)
    return bytes(out), deq


class GGUFWriter:
    def __init__(self, path, alignment=32):
        self.path, self.align, self.kv, self.tensors = path, alignment, [], []

    def add(self, key, typ, val, elem=None):
        self.kv.append((key, typ, val, elem))

    def add_tensor(self, name, shape_torch, ggml_type, data):
        self.tensors.append((name, list(reversed(shape_torch)), ggml_type, data))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, typ, val, elem):
        if typ == "str":
            return self._str(val)
        if typ == "arr":
            out = struct.pack("<IQ", GGUF_T[elem], len(val))
            return out + b"".join(self._val(elem, v, None) for v in val)
        fmt = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i",
               "f32": "f", "bool": "?", "u64": "Q", "i64": "q", "f64": "d"}[typ]
        return struct.pack("<" + fmt, val)

    def write(self):
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, typ, val, elem in self.kv:
            head += self._str(key) + struct.pack("<I", GGUF_T[typ]) + self._val(typ, val, elem)
        off = 0
        infos, blobs = b"", []
        for name, dims, t, data in self.tensors:
            infos += self._str(name) + struct.pack("<I", len(dims))
            infos += b"".join(struct.pack("<Q", d) for d in dims)
            infos += struct.pack("<IQ", t, off)
            pad = (-len(data)) % self.align
            blobs.append(data + b"\0" * pad)
            off += len(data) + pad
        body = head + infos
        body += b"\0" * ((-len(body)) % self.align)
        with open(self.path, "wb") as f:
            f.write(body)
            for b in blobs:
                f.write(b)


def llama_permute(w, n_head):
    # llama.cpp's convert script reorders Q/K rows of Llama checkpoints so that RoPE rotates
    # adjacent pairs (the original Meta layout) instead of the two halves of each head.
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(cfg):
    rp = cfg.rope_parameters
    theta, dim = rp["rope_theta"], cfg.head_dim
    factor, lo, hi, old = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"], \
        rp["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / (theta ** (i / dim))
        wl = 2 * math.pi / freq
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_gguf(path, kind, model, tok, template, wtype):
    """Returns a dict name->dequantised weights (torch names) for reference computation."""
    cfg = model.config
    arch = "qwen2" if kind == "qwen2" else "llama"
    w = GGUFWriter(path)
    w.add("general.architecture", "str", arch)
    w.add("general.name", "str", f"{kind}-tiny")
    w.add("general.alignment", "u32", 32)
    w.add(f"{arch}.context_length", "u32", cfg.max_position_embeddings)
    w.add(f"{arch}.embedding_length", "u32", cfg.hidden_size)
    w.add(f"{arch}.block_count", "u32", cfg.num_hidden_layers)
    w.add(f"{arch}.feed_forward_length", "u32", cfg.intermediate_size)
    w.add(f"{arch}.attention.head_count", "u32", cfg.num_attention_heads)
    w.add(f"{arch}.attention.head_count_kv", "u32", cfg.num_key_value_heads)
    w.add(f"{arch}.rope.freq_base", "f32", float(cfg.rope_parameters["rope_theta"]))
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", "f32", float(cfg.rms_norm_eps))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add(f"{arch}.rope.dimension_count", "u32", head_dim)
    if head_dim * cfg.num_attention_heads != cfg.hidden_size:
        w.add(f"{arch}.attention.key_length", "u32", head_dim)
        w.add(f"{arch}.attention.value_length", "u32", head_dim)
    # tokenizer
    vocab = json.loads(tok.to_str())
    n = tok.get_vocab_size(with_added_tokens=True)
    tokens = [None] * n
    types = [1] * n
    for s, i in vocab["model"]["vocab"].items():
        tokens[i] = s
    for at in vocab["added_tokens"]:
        tokens[at["id"]] = at["content"]
        types[at["id"]] = 3 if at["special"] else 4
    assert all(t is not None for t in tokens)
    merges = [m if isinstance(m, str) else " ".join(m) for m in vocab["model"]["merges"]]
    w.add("tokenizer.ggml.model", "str", "gpt2")
    w.add("tokenizer.ggml.pre", "str", "qwen2" if kind == "qwen2" else "llama-bpe")
    w.add("tokenizer.ggml.tokens", "arr", tokens, "str")
    w.add("tokenizer.ggml.token_type", "arr", types, "i32")
    w.add("tokenizer.ggml.merges", "arr", merges, "str")
    if kind == "qwen2":
        w.add("tokenizer.ggml.eos_token_id", "u32", tok.token_to_id("<|im_end|>"))
        w.add("tokenizer.ggml.padding_token_id", "u32", tok.token_to_id("<|endoftext|>"))
        w.add("tokenizer.ggml.bos_token_id", "u32", tok.token_to_id("<|endoftext|>"))
        w.add("tokenizer.ggml.add_bos_token", "bool", False)
    else:
        w.add("tokenizer.ggml.bos_token_id", "u32", tok.token_to_id("<|begin_of_text|>"))
        w.add("tokenizer.ggml.eos_token_id", "u32", tok.token_to_id("<|eot_id|>"))
        w.add("tokenizer.ggml.add_bos_token", "bool", True)
    w.add("tokenizer.chat_template", "str", template)
    if wtype in (GGML_Q8_0, GGML_Q4_0):
        # the spec: required whenever a tensor is quantized (ggml's GGML_QNT_VERSION)
        w.add("general.quantization_version", "u32", 2)

    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    deq = {}
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads

    def put(gname, tname, arr, quantisable=True):
        a = np.ascontiguousarray(arr.astype(np.float32))
        t = wtype if (quantisable and a.ndim == 2) else GGML_F32
        if t == GGML_F32:
            data, dq = a.tobytes(), a
        elif t == GGML_F16:
            data, dq = f16_bytes(a), a.astype(np.float16).astype(np.float32)
        elif t == GGML_Q8_0:
            data, dq = quant_q8_0(a)
        elif t == GGML_Q4_0:
            data, dq = quant_q4_0(a)
        else:
            raise ValueError(t)
        w.add_tensor(gname, a.shape, t, data)
        if tname is not None:
            deq[tname] = dq

    put("token_embd.weight", "model.embed_tokens.weight", sd["model.embed_tokens.weight"])
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}."
        b = f"blk.{l}."
        put(b + "attn_norm.weight", p + "input_layernorm.weight", sd[p + "input_layernorm.weight"])
        for proj, g, heads in (("q_proj", "attn_q", nh), ("k_proj", "attn_k", nkv), ("v_proj", "attn_v", None)):
            wt = sd[p + "self_attn." + proj + ".weight"]
            if kind == "llama" and heads is not None:
                pw = llama_permute(wt, heads)
                put(b + g + ".weight", None, pw)
                # the function computed is the un-permuted one; record dequantised in HF order
                inv = np.empty_like(pw)
                dq = deq_last(w, pw.shape)
                inv[:] = unpermute(dq, heads)
                deq[p + "self_attn." + proj + ".weight"] = inv
            else:
                put(b + g + ".weight", p + "self_attn." + proj + ".weight", wt)
            bias = p + "self_attn." + proj + ".bias"
            if bias in sd:
                put(b + g + ".bias", bias, sd[bias], quantisable=False)
        put(b + "attn_output.weight", p + "self_attn.o_proj.weight", sd[p + "self_attn.o_proj.weight"])
        put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", sd[p + "post_attention_layernorm.weight"])
        put(b + "ffn_gate.weight", p + "mlp.gate_proj.weight", sd[p + "mlp.gate_proj.weight"])
        put(b + "ffn_up.weight", p + "mlp.up_proj.weight", sd[p + "mlp.up_proj.weight"])
        put(b + "ffn_down.weight", p + "mlp.down_proj.weight", sd[p + "mlp.down_proj.weight"])
    put("output_norm.weight", "model.norm.weight", sd["model.norm.weight"])
    if not cfg.tie_word_embeddings:
        put("output.weight", "lm_head.weight", sd["lm_head.weight"])
    if kind == "llama":
        w.add_tensor("rope_freqs.weight", [head_dim // 2], GGML_F32, llama3_rope_factors(cfg).tobytes())
    w.write()
    return deq


def deq_last(writer, shape):
    """Dequantise the last tensor added to writer (used for permuted Q/K)."""
    name, dims, t, data = writer.tensors[-1]
    if t == GGML_F32:
        return np.frombuffer(data, dtype=np.float32).reshape(shape)
    if t == GGML_F16:
        return np.frombuffer(data, dtype=np.float16).astype(np.float32).reshape(shape)
    raise ValueError("only F32/F16 supported for permuted tensors here")


def unpermute(w, n_head):
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--vl-only", action="store_true", help="only the vision-language fixtures")
    ap.add_argument("--no-vl", action="store_true", help="skip the vision-language fixtures")
    args = ap.parse_args()
    if args.vl_only:
        sys.exit(make_vl(args.out))
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    log("torch", torch.__version__, "transformers", transformers.__version__,
        "tokenizers", tokenizers.__version__, "numpy", np.__version__)
    out = args.out
    os.makedirs(os.path.join(out, "ref"), exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    corpus_dir = os.path.join(os.path.dirname(here), "tests", "fixtures")
    corpus = open(os.path.join(corpus_dir, "corpus-en.txt"), encoding="utf-8").read().splitlines()
    zh = open(os.path.join(corpus_dir, "corpus-zh.txt"), encoding="utf-8").read().splitlines()
    corpus = corpus + zh * 20

    for kind, vocab_size in (("qwen2", 4000), ("llama", 3000)):
        t0 = time.time()
        name = f"{kind}-tiny"
        tok = train_tokenizer(kind, corpus, vocab_size)
        hft = hf_tokenizer(tok, kind)
        nvocab = tok.get_vocab_size(with_added_tokens=True)
        if kind == "qwen2":
            bos, eos = None, tok.token_to_id("<|im_end|>")
        else:
            bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|eot_id|>")
        log(name, "tokenizer trained: vocab", nvocab)
        model = make_model(kind, nvocab, bos, eos)
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        if kind == "qwen2":
            model.save_pretrained(d, safe_serialization=True)
        else:
            model.save_pretrained(d, safe_serialization=True, max_shard_size="600KB")
        hft.save_pretrained(d)
        tok.save(os.path.join(d, "tokenizer.json"))
        files = sorted(os.listdir(d))
        log(name, "saved:", files)
        if kind == "llama":
            # older layout: top-level rope_theta and rope_scaling, template inside tokenizer_config
            cfgj = json.load(open(os.path.join(d, "config.json")))
            rp = cfgj.pop("rope_parameters", None)
            if rp is not None:
                cfgj["rope_theta"] = rp["rope_theta"]
                rs = {k: v for k, v in rp.items() if k != "rope_theta"}
                cfgj["rope_scaling"] = rs
            json.dump(cfgj, open(os.path.join(d, "config.json"), "w"), indent=2)
            tcp = os.path.join(d, "tokenizer_config.json")
            tc = json.load(open(tcp))
            tc["chat_template"] = LLAMA3_TEMPLATE
            json.dump(tc, open(tcp, "w"), indent=2)
            jp = os.path.join(d, "chat_template.jinja")
            if os.path.exists(jp):
                os.remove(jp)
        else:
            jp = os.path.join(d, "chat_template.jinja")
            if not os.path.exists(jp):
                open(jp, "w").write(QWEN25_TEMPLATE)
                tcp = os.path.join(d, "tokenizer_config.json")
                tc = json.load(open(tcp))
                tc.pop("chat_template", None)
                json.dump(tc, open(tcp, "w"), indent=2)
        # reload check: the files alone reproduce the model
        try:
            re = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                                   attn_implementation="eager")
            re.eval()
            ids0 = tok.encode(PROMPTS[0]).ids
            diff = float(np.abs(last_logits(re, ids0) - last_logits(model, ids0)).max())
            log(name, "reload max |diff| =", diff)
        except Exception as e:  # noqa
            log(name, "WARNING reload failed:", repr(e))

        ref = {"model": name, "versions": {"torch": torch.__version__,
                                           "transformers": transformers.__version__,
                                           "tokenizers": tokenizers.__version__},
               "n_vocab": nvocab, "eos": eos, "bos": bos}
        ref["tokenize"] = []
        for text in TOKENIZE_TEXTS + SPECIAL_TEXTS[kind]:
            ids = tok.encode(text).ids
            ref["tokenize"].append({"text": text, "ids": ids,
                                    "decoded": tok.decode(ids, skip_special_tokens=False)})
        ref["prompts"] = []
        for p in PROMPTS:
            ids = tok.encode(p).ids
            lg = last_logits(model, ids)
            ref["prompts"].append({"text": p, "ids": ids,
                                   "logits": [float(f"{x:.8g}") for x in lg],
                                   "greedy": greedy(model, ids, 24)})
            log(name, "greedy:", ref["prompts"][-1]["greedy"])
        ref["chat"] = []
        for msgs in CHATS:
            s = hft.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            ref["chat"].append({"messages": msgs, "rendered": s})
        # GGUF variants and the function each computes
        gg = {}
        variants = ([("f32", GGML_F32), ("q8_0", GGML_Q8_0), ("q4_0", GGML_Q4_0)]
                    if kind == "qwen2" else [("f16", GGML_F16)])
        tmpl = QWEN25_TEMPLATE if kind == "qwen2" else LLAMA3_TEMPLATE
        for vname, vt in variants:
            gp = os.path.join(out, f"{name}-{vname}.gguf")
            deq = write_gguf(gp, kind, model, tok, tmpl, vt)
            if kind == "qwen2":
                deq.setdefault("lm_head.weight", deq["model.embed_tokens.weight"])
            mq = with_weights(model, lambda n, p: torch.from_numpy(deq[n]) if n in deq else p)
            gg[vname] = []
            for p in PROMPTS:
                ids = tok.encode(p).ids
                lg = last_logits(mq, ids)
                gg[vname].append([float(f"{x:.8g}") for x in lg])
            log(name, "wrote", gp, os.path.getsize(gp), "bytes")
        ref["gguf_logits"] = gg
        json.dump(ref, open(os.path.join(out, "ref", f"{name}.json"), "w"), ensure_ascii=False)
        if kind == "qwen2":
            # bf16 checkpoint of the same model; reference = fp32 compute on bf16-rounded weights
            db = os.path.join(out, "qwen2-tiny-bf16")
            shutil.rmtree(db, ignore_errors=True)
            import copy
            mb = copy.deepcopy(model).to(torch.bfloat16)
            mb.save_pretrained(db, safe_serialization=True)
            for f in os.listdir(d):
                if f.startswith("tokenizer") or f.endswith(".jinja"):
                    shutil.copy(os.path.join(d, f), db)
            mbf = mb.float().eval()
            bref = {"model": "qwen2-tiny-bf16", "prompts": []}
            for p in PROMPTS:
                ids = tok.encode(p).ids
                bref["prompts"].append({"text": p, "ids": ids, "logits": [
                    float(f"{x:.8g}") for x in last_logits(mbf, ids)]})
            json.dump(bref, open(os.path.join(out, "ref", "qwen2-tiny-bf16.json"), "w"),
                      ensure_ascii=False)
        log(name, "done in %.1fs" % (time.time() - t0))
    log("all fixtures written to", out)
    if not args.no_vl:
        sys.exit(make_vl(out))


def make_vl(out):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_vl_fixtures
    return make_vl_fixtures.run(out)


if __name__ == "__main__":
    main()
