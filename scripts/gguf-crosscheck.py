#!/usr/bin/env python3
"""gguf-crosscheck.py — read a GGUF file with the reference Python reader, outside the CPU suite.

    python3 scripts/gguf-crosscheck.py FILE.gguf [--frugal build/frugal] [--prompt TEXT] [--tokens N]

1. With the `gguf` package (llama.cpp's gguf-py, `pip install gguf`): gguf.GGUFReader parses the
   file and the script prints the architecture, every key with its value type, and every tensor
   with its type and shape (ne[0] first, as GGUF stores it). Exit 1 if the package is missing or
   the reader fails.
2. With --frugal BIN, and transformers able to load GGUF (`from_pretrained(dir, gguf_file=...)`,
   which needs the `gguf` package as well): the prompt is tokenised by `frugal tokenize`, both
   transformers (float32, dequantised weights) and `frugal generate --temperature 0 --json` run the
   same ids greedily for --tokens steps (EOS ignored), and the script prints both continuations
   and whether they agree; exit 1 if they differ. Meant for tiny models (transformers holds the
   whole model in float32); on random weights a near-tie between two logits can flip one token,
   so a difference there is a reason to look, not yet a verdict.
Not part of the CPU test suite (it needs packages CI does not install).
"""
import argparse
import json
import os
import subprocess
import sys


def read_with_gguf(path):
    try:
        import gguf  # llama.cpp's gguf-py
    except ImportError:
        print("gguf-crosscheck: the Python package 'gguf' is not installed (pip install gguf)")
        return False
    r = gguf.GGUFReader(path)
    arch = None
    print(f"{path}: {len(r.fields)} keys, {len(r.tensors)} tensors")
    for name, f in r.fields.items():
        types = "/".join(t.name for t in f.types)
        val = ""
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            val = bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
            if name == "general.architecture":
                arch = val
            val = " = " + (val[:60] + "..." if len(val) > 60 else val).replace("\n", "\\n")
        elif f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            val = f" [{len(f.data)} elements]"
        elif f.data:
            val = " = " + str(f.parts[f.data[0]].tolist()[0])
        print(f"  kv  {name:45s} {types}{val}")
    for t in r.tensors:
        print(f"  t   {t.name:32s} {t.tensor_type.name:6s} {list(int(x) for x in t.shape)}")
    print(f"architecture: {arch}")
    return arch is not None


def compare_with_transformers(path, frugal, prompt, n):
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print(f"gguf-crosscheck: transformers comparison skipped ({e})")
        return True
    ids = json.loads(subprocess.check_output([frugal, "tokenize", "--model", path, prompt]))
    out = json.loads(subprocess.check_output(
        [frugal, "generate", "--model", path, "--prompt", prompt, "--max-tokens", str(n),
         "--temperature", "0", "--ignore-eos", "--json"]))
    if out.get("prompt_ids") != ids:
        print(f"note: generate's prompt ids {out.get('prompt_ids')} differ from tokenize's {ids} "
              "(generate renders a chat prompt); using generate's")
        ids = out["prompt_ids"]
    d, f = os.path.split(os.path.abspath(path))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        seq = list(ids)
        for _ in range(n):
            logits = model(torch.tensor([seq])).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    hf = seq[len(ids):]
    ours = out["ids"][:n]
    print(f"transformers greedy: {hf}")
    print(f"frugal greedy:       {ours}")
    same = hf[:len(ours)] == ours
    print("agree" if same else "DIFFER")
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf_file")
    ap.add_argument("--frugal", help="frugal binary: also compare greedy tokens with transformers")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--tokens", type=int, default=8)
    a = ap.parse_args()
    ok = read_with_gguf(a.gguf_file)
    if ok and a.frugal:
        ok = compare_with_transformers(a.gguf_file, a.frugal, a.prompt, a.tokens)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
