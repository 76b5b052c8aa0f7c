#!/usr/bin/env python3
"""Make the LoRA test fixtures: PEFT adapters with random (not zero) weights on the tiny Qwen2 and
Llama fixtures, and what HF transformers + peft compute with them.

Run on a machine with torch, transformers and peft (the GPU host), from the repository root:
    python3 scripts/make_lora_fixtures.py tests/fixtures

Reads tests/fixtures/{qwen2-tiny,llama-tiny} (made by scripts/make_fixtures.py). Writes, under
the folder given (argv[1]):
  lora/qwen2-tiny-all/   adapter_config.json + adapter_model.safetensors: rank 8, alpha 16,
                         every projection (q k v o gate up down), random A and B
  lora/qwen2-tiny-qv/    rank 4, alpha 32, use_rslora (scale alpha / sqrt(r)), q and v only
  lora/llama-tiny-all/   rank 16, alpha 8, every projection
  ref/lora.json          per adapter: the prompt ids, the last-position logits of the base model
                         and of the model with the adapter, the greedy continuation (12 tokens)
                         with the adapter, and the same logits from the merged model
                         (merge_and_unload), so a reader can check "adapter = merged weights".
The prompt ids are the first prompt of ref/<model>.json (made by make_fixtures.py).
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
import peft
from peft import LoraConfig, get_peft_model

ADAPTERS = [
    # name, base, rank, alpha, targets, rslora, seed
    ("qwen2-tiny-all", "qwen2-tiny", 8, 16,
     ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], False, 1),
    ("qwen2-tiny-qv", "qwen2-tiny", 4, 32, ["q_proj", "v_proj"], True, 2),
    ("llama-tiny-all", "llama-tiny", 16, 8,
     ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], False, 3),
]
N_GREEDY = 12


def load_base(fix, name):
    m = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(fix, name),
                                                          dtype=torch.float32)
    m.eval()
    return m


@torch.no_grad()
def last_logits(model, ids):
    return model(torch.tensor([ids], dtype=torch.long)).logits[0, -1].float().numpy()


@torch.no_grad()
def greedy(model, ids, n):
    ids, gen = list(ids), []
    for _ in range(n):
        nxt = int(np.argmax(last_logits(model, ids)))
        gen.append(nxt)
        ids.append(nxt)
    return gen


def rounded(v):
    return [float(f"{x:.8g}") for x in v]


def main():
    fix = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    torch.manual_seed(0)
    ref = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "peft": peft.__version__}, "adapters": {}}
    for name, base, r, alpha, targets, rslora, seed in ADAPTERS:
        base_ref = json.load(open(os.path.join(fix, "ref", f"{base}.json")))
        ids = base_ref["prompts"][0]["ids"]
        model = load_base(fix, base)
        base_logits = last_logits(model, ids)
        cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0,
                         bias="none", use_rslora=rslora, init_lora_weights=False,
                         task_type="CAUSAL_LM")
        torch.manual_seed(seed)
        pm = get_peft_model(model, cfg)
        with torch.no_grad():  # random A and B at a size that moves the logits visibly
            for n, p in pm.named_parameters():
                if "lora_A" in n or "lora_B" in n:
                    p.copy_(torch.randn_like(p) * 0.05)
        pm.eval()
        out = os.path.join(fix, "lora", name)
        os.makedirs(out, exist_ok=True)
        pm.save_pretrained(out, safe_serialization=True)
        lora_logits = last_logits(pm, ids)
        gen = greedy(pm, ids, N_GREEDY)
        merged = pm.merge_and_unload()
        merged_logits = last_logits(merged, ids)
        ref["adapters"][name] = {
            "base": base, "rank": r, "alpha": alpha, "targets": targets, "rslora": rslora,
            "ids": ids, "base_logits": rounded(base_logits), "lora_logits": rounded(lora_logits),
            "merged_logits": rounded(merged_logits), "greedy": gen,
            "max_abs_lora_vs_base": float(np.abs(lora_logits - base_logits).max()),
            "max_abs_lora_vs_merged": float(np.abs(lora_logits - merged_logits).max()),
        }
        print(name, "max |lora - base|", ref["adapters"][name]["max_abs_lora_vs_base"],
              "max |lora - merged|", ref["adapters"][name]["max_abs_lora_vs_merged"])
        # the base model by its folder name, not the path it was read from on this host
        cp = os.path.join(out, "adapter_config.json")
        c = json.load(open(cp))
        c["base_model_name_or_path"] = base
        with open(cp, "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")
        # the saved folder holds only the adapter; the README peft writes is not needed
        readme = os.path.join(out, "README.md")
        if os.path.exists(readme):
            os.remove(readme)
    os.makedirs(os.path.join(fix, "ref"), exist_ok=True)
    json.dump(ref, open(os.path.join(fix, "ref", "lora.json"), "w"))


if __name__ == "__main__":
    main()
