#!/usr/bin/env python3
"""make_sp_fixtures.py — small SentencePiece-style tokenizers and HF reference ids for the tests.

How to run (needs the Python package `tokenizers`; `transformers`, `sentencepiece` and `jinja2`
are used when importable; no network, no download):

    python3 scripts/make_sp_fixtures.py OUT_DIR

then copy everything under OUT_DIR into tests/fixtures/sp/ of the repository and commit it
(tests/test_sp_tokenizer.c reads tests/fixtures/sp/*/). It takes well under a minute on one core.

What it writes (each tokenizer in its own folder, vocabularies of about 1-2k pieces, trained on
scripts/sp_corpus.txt, which sits beside this script):
  unigram/          `tokenizers` Unigram, Metaspace pre-tokenizer (prepend always, split),
                    Metaspace decoder, byte fallback pieces <0x00>..<0xFF>, <unk> <s> </s>
  bpe-llama2/       `tokenizers` BPE with byte_fallback, the Llama-2 tokenizer.json shape:
                    normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, decoder
                    Replace("▁", " ") + ByteFallback + Fuse + Strip(1, 0), TemplateProcessing <s> $A
  bpe-metaspace/    the same model in the newer Llama/Mistral shape: Metaspace pre-tokenizer
                    (prepend_scheme first, split false), no normalizer
  bpe-gemma/        the same model in the Gemma shape: normalizer Replace(" ", "▁") only,
                    Split(" ", MergedWithPrevious), decoder Replace + ByteFallback + Fuse
  spm/              (only with `sentencepiece`) a real SentencePiece BPE model trained with
                    Llama-2's settings: sp.model, vocab.json (pieces with scores and types, as a
                    GGUF `llama` vocabulary stores them) and sentencepiece's own ids
  spm-llama/        (with `sentencepiece` and `transformers`) spm/sp.model converted by
                    transformers (LlamaTokenizer[Fast].from_pretrained, legacy=True);
                    spm-llama-nolegacy/ the same with legacy=False; spm-gemma/ converted by
                    GemmaTokenizer[Fast]; each with the "<s> $A" template those classes add
Each folder holds tokenizer.json, tokenizer_config.json and expect.json:
  {"tool": {versions}, "cases": [{"text", "ids" (add_special_tokens=False),
   "ids_special" (add_special_tokens=True), "decoded" (decode(ids)),
   "decoded_special" (decode(ids_special)), "decoded_skip" (decode(ids_special,
   skip_special_tokens=True)), "sp_ids" (spm only: sentencepiece encode)}],
   "chat": [{"messages", "rendered" (apply_chat_template, add_generation_prompt=False)}]}
Failures of optional parts are printed and skipped; the exit status is 1 only if a required
part (the `tokenizers` ones) failed.
"""
import copy
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "sp_corpus.txt")
SPECIALS = ["<unk>", "<s>", "</s>"]
BYTES = ["<0x%02X>" % i for i in range(256)]
MS = "\u2581"  # the SentencePiece meta space

STRINGS = [
    "Hello world",
    "Hello, world! How are you?",
    "The quick brown fox jumps over the lazy dog.",
    "I still haven't received my card after two weeks.",
    "I'd like to pay $1,234.56 on 2026-12-02 at 10:30.",
    "12345 67890 3.14159 007",
    "!!! ??? ... --- *** ,,, ;;",
    "hello",
    " hello",
    "  hello",
    "   leading spaces",
    "trailing spaces   ",
    "multiple    spaces   inside",
    "line one\nline two\n\nline four",
    "\n",
    "\n\nstarts with newlines",
    "ends with newline\n",
    "\r\nwindows line\r\n",
    "tabs\tand\ttabs",
    " ",
    "   ",
    "",
    "a",
    "我的银行卡还没有收到",
    "你好，世界！",
    "混合 mixed 文本 text",
    "龘靐齉",
    "emoji \U0001F600 and \U0001F389\U0001F389",
    "\U0001F44D",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
    "e\u0301 combining accent",
    "\u00dcberweisung Geb\u00fchr \u00df \u00f8 \u00e5",
    "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439\u0442\u0435, \u043c\u0438\u0440",
    "\u0645\u0631\u062d\u0628\u0627",
    "\u3053\u3093\u306b\u3061\u306f",
    "\U0001D518\U0001D52B\U0001D526",
    "zero\u200bwidth and\u00a0nbsp",
    MS + "already" + MS + "has" + MS + "metaspace",
    "<s> literal specials </s> <unk>",
    "text with<s>inside</s>it",
    "<s>",
    "<0x41> looks like a byte piece",
    "def f(x):\n    return x * 2\n",
    '{"key": [1, 2, 3]}',
    "UPPER lower MiXeD CamelCase",
    "supercalifragilisticexpialidocious",
    "a b c d e f g h",
    "Can I track my card while it is in the process of delivery?",
]

CHATS = [
    [{"role": "user", "content": "Hello, who are you?"}],
    [{"role": "user", "content": "What is my balance?"},
     {"role": "assistant", "content": " It is 42 EUR. "},
     {"role": "user", "content": "Thanks!"}],
    [{"role": "system", "content": "You are a bank assistant."},
     {"role": "user", "content": "Freeze my card."}],
]

# Llama-2-chat's and Mistral-Instruct's template shapes.
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}")
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}")

FAILED_REQUIRED = []


def log(msg):
    print("make_sp_fixtures: " + msg, file=sys.stderr)


def corpus_lines():
    with open(CORPUS, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def versions():
    v = {"python": sys.version.split()[0]}
    for mod in ("tokenizers", "transformers", "sentencepiece"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional module
            pass
    return v


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def cases_for(tok, sp=None):
    """HF ids and decodings of every fixture string with a `tokenizers.Tokenizer`."""
    out = []
    for s in STRINGS:
        ids = tok.encode(s, add_special_tokens=False).ids
        ids_sp = tok.encode(s, add_special_tokens=True).ids
        c = {"text": s, "ids": ids, "ids_special": ids_sp,
             "decoded": tok.decode(ids, skip_special_tokens=False),
             "decoded_special": tok.decode(ids_sp, skip_special_tokens=False),
             "decoded_skip": tok.decode(ids_sp, skip_special_tokens=True)}
        if sp is not None:
            c["sp_ids"] = sp.encode(s)
        out.append(c)
    return out


def chats_for(hf_fast, template):
    """Chat renderings with transformers' apply_chat_template (skipped without it)."""
    out = []
    if hf_fast is None:
        return out
    for msgs in CHATS:
        try:
            r = hf_fast.apply_chat_template(msgs, chat_template=template, tokenize=False,
                                            add_generation_prompt=False)
        except Exception as e:  # noqa: BLE001 - e.g. a system message Mistral's template refuses
            out.append({"messages": msgs, "error": type(e).__name__})
            continue
        out.append({"messages": msgs, "rendered": r})
    return out


def config_for(template, extra=None):
    c = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
         "eos_token": "</s>", "unk_token": "<unk>", "chat_template": template,
         "tokenizer_class": "LlamaTokenizerFast", "legacy": True,
         "clean_up_tokenization_spaces": False}
    c.update(extra or {})
    return c


def fast_from_file(path):
    """A transformers PreTrainedTokenizerFast over tokenizer.json, for apply_chat_template."""
    try:
        from transformers import PreTrainedTokenizerFast
        return PreTrainedTokenizerFast(tokenizer_file=path, bos_token="<s>", eos_token="</s>",
                                       unk_token="<unk>")
    except Exception as e:  # noqa: BLE001 - transformers is optional
        log("transformers unavailable for chat renderings: %s" % e)
        return None


def emit(out_dir, name, tj, template, sp=None, extra_cfg=None):
    """Write tokenizer.json (dict tj), tokenizer_config.json and expect.json into out_dir/name."""
    from tokenizers import Tokenizer
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    write_json(path, tj)
    tok = Tokenizer.from_file(path)
    write_json(os.path.join(d, "tokenizer_config.json"), config_for(template, extra_cfg))
    exp = {"tool": versions(), "cases": cases_for(tok, sp),
           "chat": chats_for(fast_from_file(path), template)}
    write_json(os.path.join(d, "expect.json"), exp)
    log("%s: %d pieces" % (name, tok.get_vocab_size()))


def added_tokens():
    return [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]


def bos_template(tj=None):
    """TemplateProcessing "<s> $A" (pair "<s> $A <s> $B") with <s>'s id in tj (default 1)."""
    bos = 1
    for a in (tj or {}).get("added_tokens", []):
        if a["content"] == "<s>":
            bos = a["id"]
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}}


def metaspace(scheme, split):
    return {"type": "Metaspace", "replacement": MS, "prepend_scheme": scheme, "split": split}


def sp_decoder(strip):
    seq = [{"type": "Replace", "pattern": {"String": MS}, "content": " "},
           {"type": "ByteFallback"}, {"type": "Fuse"}]
    if strip:
        seq.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {"type": "Sequence", "decoders": seq}


def train_unigram(lines):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tr = trainers.UnigramTrainer(vocab_size=1200, special_tokens=SPECIALS, unk_token="<unk>",
                                 show_progress=False, max_piece_length=12)
    tok.train_from_iterator(lines, trainer=tr)
    tj = json.loads(tok.to_str())
    pieces = [p for p in tj["model"]["vocab"] if p[0] not in SPECIALS and p[0] not in BYTES]
    vocab = [[s, 0.0] for s in SPECIALS] + [[b, 0.0] for b in BYTES] + pieces
    tj["model"] = {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": True}
    tj["added_tokens"] = added_tokens()
    tj["normalizer"] = None
    tj["pre_tokenizer"] = metaspace("always", True)
    tj["decoder"] = {"type": "Metaspace", "replacement": MS, "prepend_scheme": "always",
                     "split": True}
    tj["post_processor"] = bos_template()
    return tj


def train_bpe(lines):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tr = trainers.BpeTrainer(vocab_size=1400, special_tokens=SPECIALS, show_progress=False,
                             limit_alphabet=160, initial_alphabet=[MS])
    tok.train_from_iterator(lines, trainer=tr)
    tj = json.loads(tok.to_str())
    trained = sorted(tj["model"]["vocab"].items(), key=lambda kv: kv[1])
    order = SPECIALS + BYTES + [s for s, _ in trained if s not in SPECIALS and s not in BYTES]
    tj["model"]["vocab"] = {s: i for i, s in enumerate(order)}
    tj["model"].update({"byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                        "dropout": None, "continuing_subword_prefix": None,
                        "end_of_word_suffix": None})
    tj["added_tokens"] = added_tokens()
    tj["post_processor"] = bos_template()
    return tj


def bpe_shapes(base):
    """The three tokenizer.json shapes of SentencePiece BPE checkpoints over one model."""
    llama2 = copy.deepcopy(base)
    llama2["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": MS},
        {"type": "Replace", "pattern": {"String": " "}, "content": MS}]}
    llama2["pre_tokenizer"] = None
    llama2["decoder"] = sp_decoder(True)
    meta = copy.deepcopy(base)
    meta["normalizer"] = None
    meta["pre_tokenizer"] = metaspace("first", False)
    meta["decoder"] = sp_decoder(True)
    gemma = copy.deepcopy(base)
    gemma["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": MS}
    gemma["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "},
                              "behavior": "MergedWithPrevious", "invert": False}
    gemma["decoder"] = sp_decoder(False)
    return {"bpe-llama2": llama2, "bpe-metaspace": meta, "bpe-gemma": gemma}


def required(out_dir, lines):
    try:
        emit(out_dir, "unigram", train_unigram(lines), LLAMA2_TEMPLATE)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        FAILED_REQUIRED.append("unigram")
    try:
        base = train_bpe(lines)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        FAILED_REQUIRED.append("bpe")
        return
    for name, tj in bpe_shapes(base).items():
        tmpl = MISTRAL_TEMPLATE if name == "bpe-metaspace" else LLAMA2_TEMPLATE
        try:
            emit(out_dir, name, tj, tmpl)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            FAILED_REQUIRED.append(name)


# ---- optional: a real SentencePiece model ----

def sp_types(sp, model_file):
    """Piece types as GGUF numbers them (1 normal, 2 unknown, 3 control, 4 user-defined,
    5 unused, 6 byte), from the model proto when protobuf is there, else from the accessors."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
        m = pb.ModelProto()
        with open(model_file, "rb") as f:
            m.ParseFromString(f.read())
        return [int(p.type) for p in m.pieces], bool(m.normalizer_spec.add_dummy_prefix)
    except Exception as e:  # noqa: BLE001 - protobuf is optional
        log("no model proto (%s); types from the accessors" % e)
    types = []
    for i in range(sp.get_piece_size()):
        t = 1
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        types.append(t)
    return types, True


def train_spm(out_dir):
    import sentencepiece as spm
    d = os.path.join(out_dir, "spm")
    os.makedirs(d, exist_ok=True)
    prefix = os.path.join(d, "sp")
    # the model stores its input and prefix paths: train from inside d with relative ones, so
    # sp.model names no path of the machine that made it
    cwd = os.getcwd()
    os.chdir(d)
    try:
        spm.SentencePieceTrainer.train(
            input=os.path.relpath(CORPUS), model_prefix="sp", vocab_size=1400, model_type="bpe",
            byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True,
            remove_extra_whitespaces=False, normalization_rule_name="identity",
            character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            hard_vocab_limit=False, num_threads=1, minloglevel=2)
    finally:
        os.chdir(cwd)
    if os.path.exists(prefix + ".vocab"):
        os.remove(prefix + ".vocab")
    model = prefix + ".model"
    sp = spm.SentencePieceProcessor(model_file=model)
    types, dummy = sp_types(sp, model)
    pieces = [[sp.id_to_piece(i), sp.get_score(i), types[i]] for i in range(sp.get_piece_size())]
    write_json(os.path.join(d, "vocab.json"),
               {"model": "llama", "add_dummy_prefix": dummy, "bos_id": 1, "eos_id": 2,
                "unk_id": 0, "pieces": pieces})
    cases = [{"text": s, "sp_ids": sp.encode(s), "sp_decoded": sp.decode(sp.encode(s))}
             for s in STRINGS]
    write_json(os.path.join(d, "expect.json"), {"tool": versions(), "cases": cases})
    log("spm: %d pieces" % sp.get_piece_size())
    return model, sp


def convert_spm(model, class_names, kw):
    """tokenizer.json (as a dict) of transformers' own conversion of the SentencePiece model
    (from_pretrained on a folder holding it as tokenizer.model), with the "<s> $A" template
    that LlamaTokenizerFast / GemmaTokenizerFast apply for add_bos_token."""
    import shutil
    import tempfile
    import transformers
    last = None
    for cls_name in class_names:
        cls = getattr(transformers, cls_name, None)
        if cls is None:
            continue
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(model, os.path.join(d, "tokenizer.model"))
            try:
                t = cls.from_pretrained(d, **kw)
            except Exception as e:  # noqa: BLE001 - try the next class
                last = e
                continue
        bt = getattr(t, "backend_tokenizer", None) or getattr(t, "_tokenizer", None)
        if bt is None:
            continue
        tj = json.loads(bt.to_str())
        if len(tj["model"]["vocab"]) < 300:
            last = RuntimeError("%s gave an empty vocabulary" % cls_name)
            continue
        tj["post_processor"] = bos_template(tj)
        return tj
    raise RuntimeError("no conversion of %s worked (%s)" % (class_names, last))


def optional(out_dir):
    try:
        model, sp = train_spm(out_dir)
    except Exception as e:  # noqa: BLE001
        log("sentencepiece part skipped: %s" % e)
        return
    llama = ["LlamaTokenizerFast", "LlamaTokenizer"]
    gemma = ["GemmaTokenizerFast", "GemmaTokenizer"]
    toks = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    for name, classes, kw, tmpl in (
            ("spm-llama", llama, {"legacy": True, "from_slow": True}, LLAMA2_TEMPLATE),
            ("spm-llama-nolegacy", llama, {"legacy": False, "from_slow": True},
             MISTRAL_TEMPLATE),
            ("spm-gemma", gemma, dict(toks, pad_token="<unk>", from_slow=True),
             MISTRAL_TEMPLATE)):
        try:
            emit(out_dir, name, convert_spm(model, classes, kw), tmpl, sp,
                 {"legacy": kw.get("legacy", True)})
        except Exception:  # noqa: BLE001 - transformers is optional
            traceback.print_exc()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    lines = corpus_lines()
    required(out_dir, lines)
    optional(out_dir)
    write_json(os.path.join(out_dir, "strings.json"), {"tool": versions(), "strings": STRINGS})
    if FAILED_REQUIRED:
        log("FAILED: " + ", ".join(FAILED_REQUIRED))
        return 1
    log("done: " + out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
