#!/usr/bin/env python3
"""Make the Whisper test fixtures: two tiny random WhisperForConditionalGeneration models (80 and
128 mel bins) in the HF transformers-5 layout, the same weights in whisper.cpp's ggml .bin format
(F32 and F16), synthetic test audio written as 16-bit PCM WAV, and reference outputs computed by HF
transformers on the CPU (fp32, eager attention, fixed seeds).

Run on a machine with torch, transformers (5.x), tokenizers, safetensors and numpy (no librosa, no
soundfile, no network needed):
    python3 scripts/make_whisper_fixtures.py ROOT            # writes ROOT/tests/fixtures/..., then checks
    python3 scripts/make_whisper_fixtures.py ROOT --check    # only re-loads what was written and verifies it
    python3 scripts/make_whisper_fixtures.py ROOT --audio-only   # only the WAV files (numpy + wave)
Every step logs what it does; a failing step names itself ("STEP FAILED: ...") and the script exits
1. A cross-check that fails but leaves the references usable is a WARNING, listed again at the end.

What it writes (paths relative to tests/fixtures/):

  whisper-tiny/
    hf-80/                 WhisperForConditionalGeneration.save_pretrained: config.json,
                           generation_config.json, model.safetensors (F32; proj_out tied to
                           model.decoder.embed_tokens, so not stored), preprocessor_config.json
                           (WhisperFeatureExtractor, 80 mels), tokenizer.json (byte-level BPE built
                           with the tokenizers library, GPT-2 split, Whisper's special tokens),
                           tokenizer_config.json.
                           d_model 24, 2 encoder + 2 decoder layers, 4 heads (head_dim 6), FFN 96,
                           max_source_positions 1500 (30 s), max_target_positions 448.
                           (d_model is small so that every fixture fits in 3 MB: the 1500 encoder
                           positions and 1501 timestamp tokens dominate.)
    hf-128-f16/            the same shape with 128 mels and other weights, stored as F16
                           safetensors (config.json, generation_config.json, preprocessor_config.json;
                           no tokenizer files: its vocabulary layout is the same). Its references
                           are fp32 computations with the F16-rounded weights.
    ggml-80-f32.bin        hf-80 in whisper.cpp's format, every tensor F32 (ftype 0)
    ggml-128-f16.bin       hf-128-f16 in whisper.cpp's format, ftype 1: matrices F16, 1-D tensors,
                           conv biases and positional embeddings F32 (convert-h5-to-ggml.py's rule);
                           the values are exactly hf-128-f16's
    audio/<name>.wav       mono 16 kHz 16-bit PCM (python's wave module):
                           tone-1s (440 Hz + 1 kHz), chirp-7.3s (100 -> 4000 Hz, a little noise),
                           noise-2s (Gaussian), silence-0.5s (zeros)

  ggml layout (little-endian int32 unless said): magic 0x67676d6c; hparams n_vocab, n_audio_ctx,
  n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer,
  n_mels, ftype; mel filters: n_mel, n_fft (= 201 bins), float32[n_mel][n_fft] (HF's slaney filter
  bank); vocabulary: n_words, then per word a length and its raw bytes, ids 0..n_words-1 (the text
  tokens only, as convert-pt-to-ggml.py writes them: <|endoftext|> = n_words, then the special tokens
  in Whisper's order); tensors until the end of the file: n_dims, name length, type (0 F32, 1 F16),
  dims innermost first, name, data. Tensor names are openai-whisper's (encoder.conv1.weight,
  encoder.blocks.N.attn.query.weight, decoder.blocks.N.cross_attn.key.weight, decoder.ln.weight, ...);
  the conv biases are stored as [n_state, 1].

  Vocabulary layout (both models; as Whisper's, with a small BPE part): ids 0..n_text-1 byte-level BPE,
  then <|endoftext|>, <|startoftranscript|>, 99 languages (<|en|> ... <|su|>), <|translate|>,
  <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nocaptions|>, <|notimestamps|>, then 1501
  timestamps <|0.00|> ... <|30.00|>.

  ref/whisper/
    ref.json               {versions, vocab (token ids), audio: {name: {file | recipe, n_samples}},
                           features: [...], models: {hf-80: {...}, hf-128-f16: {...}}}
      audio recipes: the long inputs are not stored; each is the concatenation of int16 sample runs
        [{"src": name or null (zeros), "from": first sample, "n": count}], rebuilt bit-exactly
        from the WAV files: long-30s (exactly 480000 samples) and long-45s (720000)
      features: {name, audio, n_mels, mode ("pad30": the extractor's default, pad or truncate to
        30 s, 3000 frames | "longest": truncation off, padding longest, for long-form), n_frames,
        file (npy float32 [n_mels, k]: the frames range(start, stop, step)), start, stop, step,
        tail_from, tail_value (every frame from tail_from on holds tail_value in every bin; null when
        the audio fills the frames)}; the features are WhisperFeatureExtractor.__call__'s (its torch
        path when torch is there), cross-checked against its numpy path
      mel_filters-80.npy, mel_filters-128.npy   float32 [n_mels, 201] (the extractor's, transposed)
      per model: {dir, ggml, n_mels, dtype, encoder: [...], logits: [...], generate: [...]}
        encoder case: {audio, features (a features entry name), file: npy float32 [k, d_model] rows
          range(0, 1500, step) of the encoder's last_hidden_state, step}
        logits case: {audio, prompt (decoder input ids), file: npy float32 [len(prompt), n_vocab]}
        generate case: {name, audio, features, kwargs (what model.generate got besides the
          features), init_tokens (the decoder prompt HF builds: sot, language, task, notimestamps),
          detected_language (token id or null), sequences (what generate returned, batch 0:
          in transformers 5 the segments of every window of its seek loop, which also runs
          for a padded 30 s input),
          tokens (sequences with init_tokens stripped when they lead), recompute (argmax of the
          processed logits by teacher forcing, greedy cases only), margin_min (smallest top-1 minus
          top-2 processed logit over the steps, greedy only), segments (long-form only:
          [{start, end, tokens}], seconds)}
    summary.json           versions, files with sizes and sha256, warnings; no timings.
"""
import argparse, hashlib, json, math, os, shutil, struct, sys, time, traceback, wave

import numpy as np

# ------------------------------------------------------------------ settings
SR = 16000
N_FFT, HOP, CHUNK = 400, 160, 30
N_SAMPLES = SR * CHUNK          # 480000
N_FRAMES = N_SAMPLES // HOP     # 3000
D_MODEL, N_HEAD, N_LAYER, FFN = 24, 4, 2, 96
N_AUDIO_CTX, N_TEXT_CTX = 1500, 448
BPE_VOCAB = 360                 # text tokens asked of the trainer (256 bytes + merges)
N_NEW = 16                      # max_new_tokens of every generate case
SIZE_LIMIT = 3 * 1024 * 1024
TAG = "[whisper-fixtures]"

# openai-whisper's 99 languages in token order (v1/v2 models; v3 adds yue)
LANGS = ("en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
         "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw "
         "gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl "
         "mg as tt haw ln ha ba jw su").split()
TASK_SPECIALS = ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                 "<|nocaptions|>", "<|notimestamps|>"]
N_TS = 1501

WARNINGS = []


def log(*a):
    print(TAG, *a, flush=True)


def warn(*a):
    msg = " ".join(str(x) for x in a)
    WARNINGS.append(msg)
    print(TAG, "WARNING:", msg, flush=True)


class step:
    """with step("name"): ... logs the start, the end with its duration, and on an exception the
    step's name and the traceback; fatal steps re-raise (the script then exits 1), soft ones record a
    warning and continue."""

    def __init__(self, name, fatal=True):
        self.name, self.fatal, self.failed = name, fatal, False

    def __enter__(self):
        self.t0 = time.time()
        log(">>", self.name)
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            log("<< %s (%.2fs)" % (self.name, time.time() - self.t0))
            return False
        self.failed = True
        print(TAG, "STEP FAILED: %s: %s" % (self.name, ev), flush=True)
        traceback.print_exception(et, ev, tb)
        if self.fatal:
            return False
        warn("soft step failed:", self.name, repr(ev))
        return True


def jdump(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(1e-30, np.linalg.norm(b)))


def versions():
    import platform
    v = {"python": platform.python_version(), "numpy": np.__version__}
    for m in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            v[m] = __import__(m).__version__
        except Exception:  # noqa
            v[m] = None
    return v


# ------------------------------------------------------------------ audio
AUDIO_FILES = ["tone-1s", "chirp-7.3s", "noise-2s", "silence-0.5s"]


def synth_audio():
    """The four stored signals as int16 arrays (fixed seed)."""
    rng = np.random.default_rng(1234)
    out = {}
    t = np.arange(SR) / SR
    out["tone-1s"] = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1000 * t + 0.3)
    n = int(7.3 * SR)
    t = np.arange(n) / SR
    f0, f1, dur = 100.0, 4000.0, n / SR
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / dur * t * t)
    env = np.minimum(1.0, np.minimum(t / 0.05, (dur - t) / 0.05))
    out["chirp-7.3s"] = 0.4 * env * np.sin(phase) + 0.01 * rng.standard_normal(n)
    out["noise-2s"] = np.clip(0.1 * rng.standard_normal(2 * SR), -0.9, 0.9)
    out["silence-0.5s"] = np.zeros(SR // 2)
    return {k: np.clip(np.round(v * 32767.0), -32768, 32767).astype(np.int16) for k, v in out.items()}


def recipe_fill(order, total, lens):
    """A recipe that repeats the sources of order (None = zeros of 0.75 s) until total samples."""
    segs, n = [], 0
    i = 0
    while n < total:
        src = order[i % len(order)]
        i += 1
        ln = lens[src] if src is not None else (3 * SR) // 4
        take = min(ln, total - n)
        segs.append({"src": src, "from": 0, "n": int(take)})
        n += take
    return segs


def recipes(lens):
    return {
        "long-30s": recipe_fill(["chirp-7.3s", None, "tone-1s", "noise-2s", "tone-1s"], N_SAMPLES, lens),
        "long-45s": recipe_fill(["tone-1s", "chirp-7.3s", "silence-0.5s", "noise-2s", None,
                                 "chirp-7.3s"], 45 * SR, lens),
    }


def build_recipe(segs, store):
    parts = []
    for s in segs:
        if s["src"] is None:
            parts.append(np.zeros(s["n"], np.int16))
        else:
            a = store[s["src"]]
            assert s["from"] + s["n"] <= len(a), s
            parts.append(a[s["from"]:s["from"] + s["n"]])
    return np.concatenate(parts)


def write_wav(path, pcm):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.astype("<i2").tobytes())


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == SR, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.int16)


def to_float(pcm):
    """int16 -> float32 as libsndfile's sf_read_float reads it (x / 32768)."""
    return (pcm.astype(np.float32) / np.float32(32768.0)).astype(np.float32)


def make_audio(fix):
    d = os.path.join(fix, "whisper-tiny", "audio")
    os.makedirs(d, exist_ok=True)
    pcm = synth_audio()
    for name in AUDIO_FILES:
        write_wav(os.path.join(d, name + ".wav"), pcm[name])
        back = read_wav(os.path.join(d, name + ".wav"))
        assert np.array_equal(back, pcm[name]), name
        log("audio", name, len(back), "samples")
    return load_audio(fix)


def load_audio(fix):
    """{name: int16 samples} for the stored files and the recipes, and the audio table of ref.json."""
    d = os.path.join(fix, "whisper-tiny", "audio")
    store, table = {}, {}
    for name in AUDIO_FILES:
        store[name] = read_wav(os.path.join(d, name + ".wav"))
        table[name] = {"file": "whisper-tiny/audio/%s.wav" % name, "n_samples": int(len(store[name]))}
    lens = {k: len(v) for k, v in store.items()}
    for name, segs in recipes(lens).items():
        store[name] = build_recipe(segs, store)
        table[name] = {"recipe": segs, "n_samples": int(len(store[name]))}
    assert len(store["long-30s"]) == N_SAMPLES and len(store["long-45s"]) == 45 * SR
    return store, table


# ------------------------------------------------------------------ tokenizer
def vocab_layout(n_text):
    """Whisper's special tokens after n_text BPE tokens: {token: id}."""
    names = ["<|endoftext|>", "<|startoftranscript|>"] + ["<|%s|>" % l for l in LANGS] + TASK_SPECIALS
    names += ["<|%.2f|>" % (i * 0.02) for i in range(N_TS)]
    return {s: n_text + i for i, s in enumerate(names)}, names


def build_tokenizer(corpus_lines):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus_lines, trainer)
    n_text = tok.get_vocab_size()
    ids, names = vocab_layout(n_text)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in names])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    for s, i in ids.items():
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s), i)
    assert tok.get_vocab_size() == n_text + len(names)
    log("tokenizer: %d text tokens, %d in all" % (n_text, tok.get_vocab_size()))
    return tok, n_text, ids


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def text_token_bytes(tok, n_text):
    dec = byte_decoder()
    out = []
    for i in range(n_text):
        s = tok.id_to_token(i)
        out.append(bytes(dec[c] for c in s))
    return out


def save_tokenizer(tok, ids, d):
    tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
    eot = "<|endoftext|>"
    cfg = {"tokenizer_class": "WhisperTokenizer", "bos_token": eot, "eos_token": eot,
           "unk_token": eot, "pad_token": eot, "add_prefix_space": False,
           "model_max_length": 1024, "errors": "replace"}
    with step("HF WhisperTokenizer over tokenizer.json (soft)", fatal=False):
        import transformers
        cls = getattr(transformers, "WhisperTokenizerFast", None) or transformers.WhisperTokenizer
        hft = cls(tokenizer_file=os.path.join(d, "tokenizer.json"), **{k: v for k, v in cfg.items()
                                                                       if k.endswith("_token")})
        got = hft.convert_tokens_to_ids("<|startoftranscript|>")
        if got != ids["<|startoftranscript|>"]:
            warn("HF tokenizer: <|startoftranscript|> ->", got)
        log("HF tokenizer class", type(hft).__name__, "decodes",
            repr(hft.decode(tok.encode(" hello world").ids)))
    jdump(cfg, os.path.join(d, "tokenizer_config.json"))


# ------------------------------------------------------------------ features
def make_fe(n_mels):
    from transformers import WhisperFeatureExtractor
    return WhisperFeatureExtractor(feature_size=n_mels, sampling_rate=SR, hop_length=HOP,
                                   chunk_length=CHUNK, n_fft=N_FFT, padding_value=0.0)


def features(fe, x, mode):
    """The extractor's features of float32 samples x: (n_mels, frames) float32, and the frame count
    that holds audio (the attention mask's sum in "longest" mode)."""
    if mode == "pad30":
        out = fe(x, sampling_rate=SR, return_tensors="np")
        f = out["input_features"][0]
    else:
        out = fe(x, sampling_rate=SR, truncation=False, padding="longest",
                 return_attention_mask=True, return_tensors="np")
        f = out["input_features"][0]
    return np.ascontiguousarray(f.astype(np.float32))


def np_features(fe, x, mode):
    """The extractor's numpy path on the same padded waveform (cross-check)."""
    n = N_SAMPLES if mode == "pad30" else len(x)
    w = np.zeros(n, np.float32)
    w[:min(n, len(x))] = x[:n]
    return fe._np_extract_fbank_features(w[None, :], "cpu")[0].astype(np.float32)


def tail_of(f):
    """(tail_from, tail_value): first frame from which every value is one constant; None if none."""
    last = f[:, -1]
    if not np.all(last == last[0]):
        return None, None
    v = last[0]
    j = f.shape[1]
    while j > 0 and np.all(f[:, j - 1] == v):
        j -= 1
    if j >= f.shape[1]:
        return None, None
    return int(j), float(v)


FEATURE_CASES = [
    # name, audio, n_mels, mode, step
    ("tone-1s-80", "tone-1s", 80, "pad30", 1),
    ("chirp-7.3s-80", "chirp-7.3s", 80, "pad30", 3),
    ("noise-2s-80", "noise-2s", 80, "pad30", 1),
    ("silence-0.5s-80", "silence-0.5s", 80, "pad30", 1),
    ("long-30s-80", "long-30s", 80, "pad30", 15),
    ("long-45s-80", "long-45s", 80, "pad30", 15),
    ("long-45s-80-longest", "long-45s", 80, "longest", 15),
    ("tone-1s-128", "tone-1s", 128, "pad30", 1),
    ("chirp-7.3s-128", "chirp-7.3s", 128, "pad30", 6),
]


def make_features(fix, rdir, audio, fes):
    out, full = [], {}
    for name, a, n_mels, mode, stp in FEATURE_CASES:
        x = to_float(audio[a])
        f = features(fes[n_mels], x, mode)
        full[name] = f
        try:
            g = np_features(fes[n_mels], x, mode)
            r = rel_l2(f, g) if g.shape == f.shape else float("inf")
            log("features", name, f.shape, "torch vs numpy path rel L2 %.2e" % r)
            if r > 1e-5:
                warn("features %s: the numpy path differs, rel L2 %.2e" % (name, r))
        except Exception as e:  # noqa
            warn("features %s: numpy cross-check failed (%r)" % (name, e))
        tf, tv = tail_of(f)
        stop = f.shape[1] if tf is None else min(f.shape[1], tf + 3)
        sub = np.ascontiguousarray(f[:, 0:stop:stp])
        fn = "features-%s.npy" % name
        np.save(os.path.join(rdir, fn), sub)
        out.append({"name": name, "audio": a, "n_mels": n_mels, "mode": mode,
                    "n_frames": int(f.shape[1]), "file": fn, "start": 0, "stop": int(stop),
                    "step": stp, "tail_from": tf, "tail_value": tv})
    return out, full


# ------------------------------------------------------------------ models
def sinusoids(length, channels, max_timescale=10000):
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def init_weights(model, seed):
    """Non-trivial random weights: norms 1 + 0.1 N, biases 0.05 N, token embeddings 0.5 N, decoder
    positions 0.1 N, matrices N / sqrt(fan_in) (out_proj / fc2 2x); the encoder positions are
    Whisper's sinusoids."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("encoder.embed_positions.weight"):
                p.copy_(torch.from_numpy(sinusoids(*p.shape)))
                continue
            r = torch.randn(p.shape, generator=g)
            if name.endswith(".bias"):
                p.copy_(0.05 * r)
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * r)
            elif "embed_tokens" in name:
                p.copy_(0.5 * r)
            elif "embed_positions" in name:
                p.copy_(0.1 * r)
            else:
                fan_in = p[0].numel()
                scale = 2.0 if ("out_proj" in name or "fc2" in name) else 1.0
                p.copy_(scale * r / math.sqrt(fan_in))


def suppress_lists(ids, tok):
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    space = tok.token_to_id("\u0120")
    assert space is not None
    # a few text tokens (as the real list holds punctuation), then sot and the task/other specials
    text = [tok.token_to_id(c) for c in ["\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=",
                                         ">", "@", "[", "\\", "]", "^", "_", "`", "{", "|", "}", "~"]
            if tok.token_to_id(c) is not None]
    sup = sorted(set(text + [sot] + [ids[s] for s in TASK_SPECIALS[:5]]))
    return sup, [space, eot]


def make_config(n_mels, vocab_size, ids, sup, begin_sup):
    from transformers import WhisperConfig
    eot = ids["<|endoftext|>"]
    return WhisperConfig(
        vocab_size=vocab_size, num_mel_bins=n_mels, d_model=D_MODEL,
        encoder_layers=N_LAYER, decoder_layers=N_LAYER,
        encoder_attention_heads=N_HEAD, decoder_attention_heads=N_HEAD,
        encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
        max_source_positions=N_AUDIO_CTX, max_target_positions=N_TEXT_CTX,
        activation_function="gelu", scale_embedding=False, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, decoder_start_token_id=ids["<|startoftranscript|>"],
        pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, tie_word_embeddings=True,
        suppress_tokens=sup, begin_suppress_tokens=begin_sup, use_cache=True)


def make_gen_config(ids, sup, begin_sup):
    from transformers import GenerationConfig
    eot = ids["<|endoftext|>"]
    gc = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"], bos_token_id=eot, eos_token_id=eot,
        pad_token_id=eot, max_length=N_TEXT_CTX, suppress_tokens=sup, begin_suppress_tokens=begin_sup,
        forced_decoder_ids=None)
    gc.is_multilingual = True
    gc.lang_to_id = {"<|%s|>" % l: ids["<|%s|>" % l] for l in LANGS}
    gc.task_to_id = {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]}
    gc.no_timestamps_token_id = ids["<|notimestamps|>"]
    gc.prev_sot_token_id = ids["<|startofprev|>"]
    gc.max_initial_timestamp_index = 50
    gc.return_timestamps = False
    return gc


def set_eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # noqa
        log("set_attn_implementation failed (%r); setting the config field" % (e,))
        model.config._attn_implementation = "eager"


def build_model(n_mels, vocab_size, ids, sup, begin_sup, seed):
    import torch
    from transformers import WhisperForConditionalGeneration
    torch.manual_seed(seed)
    cfg = make_config(n_mels, vocab_size, ids, sup, begin_sup)
    model = WhisperForConditionalGeneration(cfg).to(torch.float32)
    init_weights(model, seed)
    model.generation_config = make_gen_config(ids, sup, begin_sup)
    set_eager(model)
    model.eval()
    return model


def save_model(model, fe, d, f16=False):
    import torch
    os.makedirs(d, exist_ok=True)
    if f16:
        model.to(torch.float16)
    model.save_pretrained(d)
    if f16:
        model.to(torch.float32)
    fe.save_pretrained(d)
    names = sorted(os.listdir(d))
    log("saved", d, names)
    assert "model.safetensors" in names, names
    assert "generation_config.json" in names and "config.json" in names


# ------------------------------------------------------------------ ggml
GGML_MAP = {
    "self_attn.k_proj": "attn.key", "self_attn.q_proj": "attn.query", "self_attn.v_proj": "attn.value",
    "self_attn.out_proj": "attn.out", "self_attn_layer_norm": "attn_ln",
    "encoder_attn.q_proj": "cross_attn.query", "encoder_attn.k_proj": "cross_attn.key",
    "encoder_attn.v_proj": "cross_attn.value", "encoder_attn.out_proj": "cross_attn.out",
    "encoder_attn_layer_norm": "cross_attn_ln", "fc1": "mlp.0", "fc2": "mlp.2",
    "final_layer_norm": "mlp_ln",
}
GGML_TOP = {
    "encoder.layer_norm.bias": "encoder.ln_post.bias", "encoder.layer_norm.weight": "encoder.ln_post.weight",
    "encoder.embed_positions.weight": "encoder.positional_embedding",
    "decoder.layer_norm.bias": "decoder.ln.bias", "decoder.layer_norm.weight": "decoder.ln.weight",
    "decoder.embed_positions.weight": "decoder.positional_embedding",
    "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
}


def ggml_name(hf):
    assert hf.startswith("model."), hf
    nn = hf.split(".")[1:]
    if nn[1] == "layers":
        return ".".join([nn[0], "blocks", nn[2], GGML_MAP[".".join(nn[3:-1])], nn[-1]])
    n = ".".join(nn)
    return GGML_TOP.get(n, n)


def write_ggml(path, model, mel_filters, words, f16):
    cfg = model.config
    sd = {k: v.detach().to("cpu").float().numpy() for k, v in model.state_dict().items()}
    with open(path, "wb") as f:
        f.write(struct.pack("<i", 0x67676d6c))
        f.write(struct.pack("<11i", cfg.vocab_size, cfg.max_source_positions, cfg.d_model,
                            cfg.encoder_attention_heads, cfg.encoder_layers, cfg.max_target_positions,
                            cfg.d_model, cfg.decoder_attention_heads, cfg.decoder_layers,
                            cfg.num_mel_bins, 1 if f16 else 0))
        mf = np.ascontiguousarray(mel_filters.astype("<f4"))
        f.write(struct.pack("<ii", mf.shape[0], mf.shape[1]))
        f.write(mf.tobytes())
        f.write(struct.pack("<i", len(words)))
        for w in words:
            f.write(struct.pack("<i", len(w)))
            f.write(w)
        n = 0
        for k in sd:
            if k == "proj_out.weight":
                continue
            name = ggml_name(k)
            data = sd[k].squeeze() if sd[k].ndim > 1 else sd[k]
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                data = data.reshape(data.shape[0], 1)
            small = (data.ndim < 2 or name in ("encoder.conv1.bias", "encoder.conv2.bias",
                                               "encoder.positional_embedding",
                                               "decoder.positional_embedding"))
            ftype = 1 if (f16 and not small) else 0
            data = np.ascontiguousarray(data.astype("<f2" if ftype else "<f4"))
            nb = name.encode()
            f.write(struct.pack("<iii", data.ndim, len(nb), ftype))
            for i in range(data.ndim):
                f.write(struct.pack("<i", data.shape[data.ndim - 1 - i]))
            f.write(nb)
            f.write(data.tobytes())
            n += 1
    log("ggml", path, "%d tensors, %d bytes" % (n, os.path.getsize(path)))


def read_ggml(path):
    """Parses a ggml file written above: (hparams list, filters, words, {name: float32 array})."""
    b = open(path, "rb").read()
    o = 0

    def ints(k):
        nonlocal o
        v = struct.unpack_from("<%di" % k, b, o)
        o += 4 * k
        return v
    assert ints(1)[0] == 0x67676d6c
    hp = ints(11)
    nm, nf = ints(2)
    filt = np.frombuffer(b, "<f4", nm * nf, o).reshape(nm, nf)
    o += 4 * nm * nf
    words = []
    for _ in range(ints(1)[0]):
        ln = ints(1)[0]
        words.append(b[o:o + ln])
        o += ln
    tensors = {}
    while o < len(b):
        nd, ln, ft = ints(3)
        dims = ints(nd)
        name = b[o:o + ln].decode()
        o += ln
        cnt = int(np.prod(dims))
        dt = "<f2" if ft == 1 else "<f4"
        a = np.frombuffer(b, dt, cnt, o).astype(np.float32).reshape(tuple(reversed(dims)))
        o += cnt * (2 if ft == 1 else 4)
        tensors[name] = a
    return hp, filt, words, tensors


# ------------------------------------------------------------------ references
def encode(model, feats):
    import torch
    with torch.no_grad():
        return model.model.encoder(torch.from_numpy(feats[None])).last_hidden_state


def decoder_logits(model, enc, prompt):
    import torch
    with torch.no_grad():
        out = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([prompt]), use_cache=False)
    return out.logits[0].float().numpy()


def init_tokens(gc, ids, language, task, timestamps, detected):
    """The decoder prompt HF's Whisper generate builds (recorded for the C side, and compared with
    what generate returned when it returns the prompt)."""
    t = [gc.decoder_start_token_id]
    lang = ids["<|%s|>" % language] if language else detected
    if lang is not None:
        t.append(lang)
    if task is not None:
        t.append(gc.task_to_id[task])
    elif language is not None:
        t.append(gc.task_to_id["transcribe"])
    if not timestamps:
        t.append(gc.no_timestamps_token_id)
    return t


def detect_language(model, feats):
    import torch
    with torch.no_grad():
        r = model.detect_language(torch.from_numpy(feats[None]))
    return int(r.reshape(-1)[0])


def processors_for(model, begin_index, timestamps):
    """HF's Whisper logits processors for the teacher-forced recompute."""
    from transformers.generation import logits_process as lp
    gc = model.generation_config
    # the order HF's Whisper generate applies them in: begin-suppress, suppress, timestamps
    ps = [lp.SuppressTokensAtBeginLogitsProcessor(gc.begin_suppress_tokens, begin_index, device="cpu"),
          lp.SuppressTokensLogitsProcessor(gc.suppress_tokens, device="cpu")]
    if timestamps:
        ps.append(lp.WhisperTimeStampLogitsProcessor(gc, begin_index=begin_index))
    return ps


def recompute_greedy(model, enc, seq, n_init, timestamps):
    """Teacher-forced: for each generated position, the argmax of the processed logits and the top-1
    minus top-2 margin."""
    import torch
    ps = processors_for(model, n_init, timestamps)
    ids = torch.tensor([seq])
    with torch.no_grad():
        lg = model(encoder_outputs=(enc,), decoder_input_ids=ids, use_cache=False).logits.float()
    out, margins = [], []
    for i in range(n_init, len(seq)):
        s = lg[:, i - 1, :].clone()
        prefix = ids[:, :i]
        for p in ps:
            s = p(prefix, s)
        top = torch.topk(s[0], 2)
        out.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
    return out, margins


GEN_CASES = [
    # name, model, audio, features case, kwargs
    ("chirp-en-greedy", "hf-80", "chirp-7.3s", "chirp-7.3s-80",
     dict(language="en", task="transcribe")),
    ("chirp-detect-greedy", "hf-80", "chirp-7.3s", "chirp-7.3s-80", dict(task="transcribe")),
    ("silence-detect-greedy", "hf-80", "silence-0.5s", "silence-0.5s-80", dict(task="transcribe")),
    ("noise-de-translate", "hf-80", "noise-2s", "noise-2s-80", dict(language="de", task="translate")),
    ("tone-en-timestamps", "hf-80", "tone-1s", "tone-1s-80",
     dict(language="en", task="transcribe", return_timestamps=True)),
    ("long30-detect-timestamps", "hf-80", "long-30s", "long-30s-80",
     dict(task="transcribe", return_timestamps=True)),
    ("chirp-en-beam3", "hf-80", "chirp-7.3s", "chirp-7.3s-80",
     dict(language="en", task="transcribe", num_beams=3)),
    ("tone-en-beam3-timestamps", "hf-80", "tone-1s", "tone-1s-80",
     dict(language="en", task="transcribe", num_beams=3, return_timestamps=True)),
    ("long45-en-longform", "hf-80", "long-45s", "long-45s-80-longest",
     dict(language="en", task="transcribe", return_timestamps=True)),
    ("chirp128-en-greedy", "hf-128-f16", "chirp-7.3s", "chirp-7.3s-128",
     dict(language="en", task="transcribe")),
    ("tone128-detect-timestamps", "hf-128-f16", "tone-1s", "tone-1s-128",
     dict(task="transcribe", return_timestamps=True)),
]


def run_generate(model, ids, feats, kw, n_frames_audio):
    import torch
    x = torch.from_numpy(feats[None])
    args = dict(kw, max_new_tokens=N_NEW, do_sample=False)
    args.setdefault("num_beams", 1)
    longform = feats.shape[1] > N_FRAMES
    with torch.no_grad():
        if longform:
            am = torch.zeros((1, feats.shape[1]), dtype=torch.long)
            am[0, :n_frames_audio] = 1
            try:
                out = model.generate(x, attention_mask=am, return_segments=True, **args)
            except TypeError as e:
                warn("generate(return_segments=True) refused (%r); return_dict_in_generate" % (e,))
                out = model.generate(x, attention_mask=am, return_dict_in_generate=True, **args)
        else:
            out = model.generate(x, **args)
    segments = None
    if isinstance(out, dict) or hasattr(out, "keys"):
        seqs = out["sequences"]
        if longform and "segments" in out:
            segments = []
            for sg in out["segments"][0]:
                segments.append({"start": float(sg["start"]), "end": float(sg["end"]),
                                 "tokens": [int(t) for t in sg["tokens"].reshape(-1).tolist()]})
    else:
        seqs = out
    return [int(t) for t in seqs[0].tolist()], segments


def make_model_refs(key, model, mdir_rel, ggml_rel, ids, fe_full, audio, rdir, n_mels, dtype):
    import torch
    gc = model.generation_config
    info = {"dir": mdir_rel, "ggml": ggml_rel, "n_mels": n_mels, "dtype": dtype,
            "encoder": [], "logits": [], "generate": []}
    tag = "80" if n_mels == 80 else "128"
    enc_cases = [("chirp-7.3s", "chirp-7.3s-" + tag, 3), ("tone-1s", "tone-1s-" + tag, 5)]
    encs = {}
    for a, fname, stp in enc_cases:
        e = encode(model, fe_full[fname])
        encs[fname] = e
        fn = "%s-encoder-%s.npy" % (key, a)
        np.save(os.path.join(rdir, fn), np.ascontiguousarray(e[0].float().numpy()[0:N_AUDIO_CTX:stp]))
        info["encoder"].append({"audio": a, "features": fname, "file": fn, "step": stp})
        log(key, "encoder", a, tuple(e.shape))
    # a fixed prompt: sot, en, transcribe, notimestamps, then a few text tokens
    prompt = [ids["<|startoftranscript|>"], ids["<|en|>"], ids["<|transcribe|>"],
              ids["<|notimestamps|>"], 40, 100, 7, 250 % ids["<|endoftext|>"]]
    for a, fname, _ in enc_cases[:1]:
        lg = decoder_logits(model, encs[fname], prompt)
        fn = "%s-logits-%s.npy" % (key, a)
        np.save(os.path.join(rdir, fn), np.ascontiguousarray(lg.astype(np.float32)))
        info["logits"].append({"audio": a, "features": fname, "prompt": prompt, "file": fn})
        # cached decoding gives the same last logits (cross-check)
        with torch.no_grad():
            o1 = model(encoder_outputs=(encs[fname],), decoder_input_ids=torch.tensor([prompt[:-1]]),
                       use_cache=True)
            o2 = model(encoder_outputs=(encs[fname],), decoder_input_ids=torch.tensor([prompt[-1:]]),
                       past_key_values=o1.past_key_values, use_cache=True)
        r = rel_l2(o2.logits[0, -1].float().numpy(), lg[-1])
        log(key, "logits", a, lg.shape, "cached vs full rel L2 %.2e" % r)
        if r > 1e-5:
            warn("%s: cached decoding differs from the full forward (rel L2 %.2e)" % (key, r))
    for name, mk, a, fname, kw in GEN_CASES:
        if mk != key:
            continue
        with step("%s: generate %s" % (key, name), fatal=False):
            feats = fe_full[fname]
            n_audio = min(feats.shape[1], (len(audio[a]) + HOP - 1) // HOP)
            seq, segments = run_generate(model, ids, feats, kw, n_audio)
            ts = bool(kw.get("return_timestamps"))
            det = None
            if kw.get("language") is None:
                det = detect_language(model, feats[:, :N_FRAMES])
            init = init_tokens(gc, ids, kw.get("language"), kw.get("task"), ts, det)
            toks = seq[len(init):] if seq[:len(init)] == init else list(seq)
            c = {"name": name, "audio": a, "features": fname, "kwargs": kw, "init_tokens": init,
                 "detected_language": det, "sequences": seq, "tokens": toks,
                 "prompt_returned": seq[:len(init)] == init, "max_new_tokens": N_NEW,
                 "recompute": None, "margin_min": None, "segments": segments}
            if kw.get("num_beams", 1) == 1 and feats.shape[1] == N_FRAMES:
                try:
                    e = encode(model, feats)
                    rc, margins = recompute_greedy(model, e, init + toks, len(init), ts)
                    c["recompute"] = rc
                    c["margin_min"] = min(margins) if margins else None
                    # transformers 5 decodes a further window after one that stops at a
                    # timestamp pair, so only the first window (at most N_NEW tokens, ended
                    # early only by <|endoftext|>, which is dropped) is one teacher-forced run
                    bad = [i for i in range(min(len(rc), N_NEW)) if rc[i] != toks[i]]
                    if bad and rc[bad[0]] != ids["<|endoftext|>"]:
                        warn("%s/%s: teacher-forced argmax %s differs from generate %s at %d" %
                             (key, name, rc, toks, bad[0]))
                    if margins and min(margins) < 1e-3:
                        warn("%s/%s: near tie (margin %.2e)" % (key, name, min(margins)))
                except Exception as ex:  # noqa
                    warn("%s/%s: recompute failed (%r)" % (key, name, ex))
            log(key, name, "init", init, "tokens", toks, "segments", segments)
            info["generate"].append(c)
    return info


# ------------------------------------------------------------------ generate / check
def report_sizes(fix):
    total = 0
    for sub in ("whisper-tiny", os.path.join("ref", "whisper")):
        for root, _, files in os.walk(os.path.join(fix, sub)):
            for f in files:
                total += os.path.getsize(os.path.join(root, f))
    log("total fixture size %d bytes (%.2f MiB)" % (total, total / 1048576))
    return total


def generate(fix, corpus_path=None, threads=4):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    wdir = os.path.join(fix, "whisper-tiny")
    rdir = os.path.join(fix, "ref", "whisper")
    for d in (wdir, rdir):
        if os.path.isdir(d):
            shutil.rmtree(d)
    os.makedirs(rdir)
    with step("audio"):
        make_audio(fix)
        audio, table = load_audio(fix)
    with step("tokenizer"):
        corpus = corpus_path or os.path.join(fix, "corpus-en.txt")
        lines = [l.strip() for l in open(corpus, encoding="utf-8") if l.strip()]
        tok, n_text, ids = build_tokenizer(lines)
        words = text_token_bytes(tok, n_text)
        vocab_size = n_text + len(vocab_layout(n_text)[1])
        sup, begin_sup = suppress_lists(ids, tok)
    with step("feature extractors and features"):
        fes = {80: make_fe(80), 128: make_fe(128)}
        for n, fe in fes.items():
            np.save(os.path.join(rdir, "mel_filters-%d.npy" % n),
                    np.ascontiguousarray(fe.mel_filters.T.astype(np.float32)))
        feats, fe_full = make_features(fix, rdir, audio, fes)
    models = {}
    with step("model hf-80 (F32)"):
        m80 = build_model(80, vocab_size, ids, sup, begin_sup, seed=80)
        save_model(m80, fes[80], os.path.join(wdir, "hf-80"))
        save_tokenizer(tok, ids, os.path.join(wdir, "hf-80"))
        write_ggml(os.path.join(wdir, "ggml-80-f32.bin"), m80, fes[80].mel_filters.T, words, f16=False)
    with step("model hf-128-f16 (F16 weights)"):
        m128 = build_model(128, vocab_size, ids, sup, begin_sup, seed=128)
        with torch.no_grad():  # round the weights to F16 first: the references use those values
            for p in m128.parameters():
                p.copy_(p.to(torch.float16).to(torch.float32))
        save_model(m128, fes[128], os.path.join(wdir, "hf-128-f16"), f16=True)
        m128.to(torch.float32)
        write_ggml(os.path.join(wdir, "ggml-128-f16.bin"), m128, fes[128].mel_filters.T, words, f16=True)
    with step("references hf-80"):
        models["hf-80"] = make_model_refs("hf-80", m80, "whisper-tiny/hf-80",
                                          "whisper-tiny/ggml-80-f32.bin", ids, fe_full, audio, rdir,
                                          80, "F32")
    with step("references hf-128-f16"):
        models["hf-128-f16"] = make_model_refs("hf-128-f16", m128, "whisper-tiny/hf-128-f16",
                                               "whisper-tiny/ggml-128-f16.bin", ids, fe_full, audio,
                                               rdir, 128, "F16")
    vocab = {"n_text": n_text, "n_vocab": vocab_size, "eot": ids["<|endoftext|>"],
             "sot": ids["<|startoftranscript|>"], "translate": ids["<|translate|>"],
             "transcribe": ids["<|transcribe|>"], "startoflm": ids["<|startoflm|>"],
             "startofprev": ids["<|startofprev|>"], "nocaptions": ids["<|nocaptions|>"],
             "notimestamps": ids["<|notimestamps|>"], "timestamp_begin": ids["<|0.00|>"],
             "languages": {l: ids["<|%s|>" % l] for l in LANGS}, "suppress_tokens": sup,
             "begin_suppress_tokens": begin_sup, "space": tok.token_to_id("\u0120"),
             "sample_text": {"text": " hello world, my card",
                             "ids": tok.encode(" hello world, my card").ids}}
    jdump({"versions": versions(), "vocab": vocab, "audio": table, "features": feats,
           "models": models, "max_new_tokens": N_NEW}, os.path.join(rdir, "ref.json"))
    write_summary(fix)


def write_summary(fix):
    rdir = os.path.join(fix, "ref", "whisper")
    files = {}
    for sub in ("whisper-tiny", os.path.join("ref", "whisper")):
        for root, _, fs in os.walk(os.path.join(fix, sub)):
            for f in sorted(fs):
                if f == "summary.json":
                    continue
                p = os.path.join(root, f)
                files[os.path.relpath(p, fix)] = {"bytes": os.path.getsize(p), "sha256": sha256(p)}
    jdump({"versions": versions(), "files": files, "warnings": WARNINGS},
          os.path.join(rdir, "summary.json"))


def check(fix, threads=4):
    import torch
    import transformers
    torch.set_num_threads(threads)
    fails = []

    def ok(cond, what):
        log(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)
    rdir = os.path.join(fix, "ref", "whisper")
    ref = json.load(open(os.path.join(rdir, "ref.json")))
    audio, _ = load_audio(fix)
    for name in AUDIO_FILES:
        ok(ref["audio"][name]["n_samples"] == len(audio[name]), "audio %s length" % name)
    fes = {}
    for key, m in ref["models"].items():
        d = os.path.join(fix, m["dir"])
        fes[m["n_mels"]] = transformers.WhisperFeatureExtractor.from_pretrained(d)
    full = {}
    for fc in ref["features"]:
        f = features(fes[fc["n_mels"]], to_float(audio[fc["audio"]]), fc["mode"])
        full[fc["name"]] = f
        sub = np.load(os.path.join(rdir, fc["file"]))
        got = f[:, fc["start"]:fc["stop"]:fc["step"]]
        ok(sub.dtype == np.float32 and got.shape == sub.shape and rel_l2(got, sub) < 1e-6,
           "features %s from the saved preprocessor config" % fc["name"])
        if fc["tail_from"] is not None:
            ok(bool(np.all(f[:, fc["tail_from"]:] == np.float32(fc["tail_value"]))),
               "features %s tail constant" % fc["name"])
        filt = np.load(os.path.join(rdir, "mel_filters-%d.npy" % fc["n_mels"]))
        ok(np.array_equal(filt, fes[fc["n_mels"]].mel_filters.T.astype(np.float32)),
           "mel filters %d" % fc["n_mels"])
    for key, m in ref["models"].items():
        d = os.path.join(fix, m["dir"])
        model, info = transformers.WhisperForConditionalGeneration.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
        model.eval()
        ok(not info.get("missing_keys") and not info.get("unexpected_keys") and
           not info.get("mismatched_keys"), key + ": from_pretrained loads every tensor %s" % (info,))
        hp, filt, words, tensors = read_ggml(os.path.join(fix, m["ggml"]))
        cfg = model.config
        ok(list(hp[:10]) == [cfg.vocab_size, 1500, cfg.d_model, cfg.encoder_attention_heads,
                             cfg.encoder_layers, cfg.max_target_positions, cfg.d_model,
                             cfg.decoder_attention_heads, cfg.decoder_layers, cfg.num_mel_bins],
           key + ": ggml hparams %s" % (hp,))
        ok(len(words) == ref["vocab"]["n_text"], key + ": ggml words")
        sd = {k: v.float().numpy() for k, v in model.state_dict().items()}
        bad = []
        for k, v in sd.items():
            if k == "proj_out.weight":
                continue
            g = tensors.get(ggml_name(k))
            if g is None or g.size != v.size or not np.array_equal(g.reshape(-1), v.reshape(-1)):
                bad.append(k)
        ok(not bad and len(tensors) == len(sd) - ("proj_out.weight" in sd),
           key + ": ggml tensors equal the safetensors' (%s)" % bad[:4])
        for e in m["encoder"]:
            got = encode(model, full[e["features"]])[0].float().numpy()[0:N_AUDIO_CTX:e["step"]]
            r = rel_l2(got, np.load(os.path.join(rdir, e["file"])))
            ok(r < 1e-5, "%s: encoder %s (rel L2 %.2e)" % (key, e["audio"], r))
        for lc in m["logits"]:
            enc = encode(model, full[lc["features"]])
            r = rel_l2(decoder_logits(model, enc, lc["prompt"]), np.load(os.path.join(rdir, lc["file"])))
            ok(r < 1e-5, "%s: logits %s (rel L2 %.2e)" % (key, lc["audio"], r))
        for c in m["generate"]:
            feats = full[c["features"]]
            n_audio = min(feats.shape[1], (len(audio[c["audio"]]) + HOP - 1) // HOP)
            seq, segs = run_generate(model, None, feats, c["kwargs"], n_audio)
            ok(seq == c["sequences"], "%s: generate %s %s" % (key, c["name"], seq))
    total = report_sizes(fix)
    ok(total <= SIZE_LIMIT, "total size %d <= %d" % (total, SIZE_LIMIT))
    log("check: %d failure(s)" % len(fails))
    for f in fails:
        log("  FAILED:", f)
    return len(fails)


# ------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=".",
                    help="repository root: writes ROOT/tests/fixtures/... (default .)")
    ap.add_argument("--check", action="store_true", help="only verify what is there")
    ap.add_argument("--audio-only", action="store_true", help="only the WAV files (numpy + wave)")
    ap.add_argument("--corpus", default=None, help="tokenizer corpus (default tests/fixtures/corpus-en.txt)")
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args(argv)
    fix = os.path.join(args.root, "tests", "fixtures")
    t0 = time.time()
    try:
        if args.audio_only:
            with step("audio"):
                make_audio(fix)
            nfail = 0
        elif args.check:
            nfail = check(fix, args.threads)
        else:
            generate(fix, args.corpus, args.threads)
            log("generated; now checking what was written")
            nfail = check(fix, args.threads)
    except Exception as e:  # noqa
        log("FAILED: %r" % (e,))
        for w in WARNINGS:
            log("  warning:", w)
        return 1
    log("done in %.1fs; %d warning(s), %d check failure(s)" % (time.time() - t0, len(WARNINGS), nfail))
    for w in WARNINGS:
        log("  warning:", w)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
