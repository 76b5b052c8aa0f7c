#!/usr/bin/env python3
"""vl_hf.py - HF transformers' side of the Qwen2.5-VL benchmark (bench/gpu/vl_bench.sh).

  vl_hf.py --model-dir DIR --fixture tests/fixtures/qwen25vl-tiny --images A,B,C --csv OUT.csv

1. Builds a Qwen2_5_VLForConditionalGeneration of the Qwen2.5-VL-7B shape (vision depth 32,
   hidden 1280, 16 heads, MLP 3420, out 3584, window 112, full attention at 7/15/23/31; LLM 28
   layers, hidden 3584, 28/4 heads, FFN 18944, vocab 152064, mrope_section [16, 24, 24]) directly
   on the GPU in bf16 (its own random init, run on the device), and saves it with
   save_pretrained to DIR (sharded safetensors, BF16). The tokenizer is the fixture's (a small
   byte-level BPE whose ids all lie below the vocabulary; the config's image / vision ids are
   its ids), so HF's processor and frugal tokenize the same prompt the same way; the image
   processor config allows 1344 x 1344 pixels so no image is resized.
2. Measures HF (bf16, sdpa) on those weights, one image and a question:
   vit_ms      model's get_image_features per resolution (mean of 5 after a warm-up);
   ttft_ms     PIL open + processor + model forward (vision + prefill) + argmax of the last
               logits, median of 3 after a warm-up; vit_plus_prefill_ms the forward alone;
   decode_tok_s (generate of 65 tokens - generate of 1 token) / 64 at 896;
   request_joules NVML energy of one generate of 64 tokens at 896 (when NVML reads).
   Rows "csv,hf,<metric>,<res>,<keep>,<tokens>,<value>,<unit>" go to OUT.csv and stdout.
--make-images DIR writes the three test images (JPEG q90, 448 / 896 / 1344 a side) and exits.
"""
import argparse
import ctypes
import json
import os
import shutil
import sys
import time

QUESTION = "What is written on the sign in this picture?"
SIDES = (448, 896, 1344)


def log(*a):
    print("[vl_hf %.1fs]" % (time.time() - T0), *a, file=sys.stderr, flush=True)


T0 = time.time()


def make_images(d):
    import numpy as np
    from PIL import Image, ImageDraw
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(17)
    paths = []
    for s in SIDES:
        y, x = np.mgrid[0:s, 0:s].astype(np.float32) / s
        img = np.stack([255 * x, 255 * y, 255 * (1 - x * y)], -1)
        img += rng.normal(0, 12, img.shape)
        im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
        dr = ImageDraw.Draw(im)
        for k in range(12):
            x0, y0 = rng.integers(0, s - s // 6, 2)
            w, h = rng.integers(s // 16, s // 6, 2)
            col = tuple(int(c) for c in rng.integers(0, 255, 3))
            (dr.rectangle if k % 2 else dr.ellipse)([int(x0), int(y0), int(x0 + w), int(y0 + h)], fill=col)
        dr.text((s // 10, s // 2), "OPEN 9-5  SALE 30%", fill=(0, 0, 0))
        p = os.path.join(d, "img%d.jpg" % s)  # a photo: JPEG, as clients send them
        im.save(p, quality=90)
        paths.append(p)
    print(",".join(paths))


class Nvml:
    def __init__(self):
        self.h = None
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != 0:
                return
            h = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0:
                self.h = h
        except OSError:
            pass

    def joules(self):
        if self.h is None:
            return float("nan")
        e = ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.h, ctypes.byref(e)) != 0:
            return float("nan")
        return e.value / 1000.0


def build_and_save(model_dir, fixture):
    import torch
    import transformers
    with open(os.path.join(fixture, "config.json")) as f:
        fc = json.load(f)
    tc = fc["text_config"]
    text = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                rms_norm_eps=1e-6, hidden_act="silu", use_sliding_window=False,
                bos_token_id=tc["bos_token_id"], eos_token_id=tc["eos_token_id"],
                pad_token_id=tc.get("pad_token_id", tc["bos_token_id"]),
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                 "mrope_section": [16, 24, 24]})
    vision = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                  out_hidden_size=3584, window_size=112, fullatt_block_indexes=[7, 15, 23, 31],
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, tokens_per_second=2,
                  hidden_act="silu", in_channels=3)
    ids = {k: fc[k] for k in ("image_token_id", "video_token_id", "vision_start_token_id",
                              "vision_end_token_id")}
    cfg = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision,
                                        tie_word_embeddings=False, **ids)
    t = time.time()
    torch.manual_seed(7)
    with torch.device("cuda"):
        try:
            model = transformers.Qwen2_5_VLForConditionalGeneration._from_config(
                cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
        except TypeError:
            model = transformers.Qwen2_5_VLForConditionalGeneration._from_config(
                cfg, attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16).eval()
    torch.cuda.synchronize()
    n = sum(p.numel() for p in model.parameters())
    log("built on %s: %.2fB parameters, %.1f s" % (next(model.parameters()).device, n / 1e9,
                                                    time.time() - t))
    t = time.time()
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    model.save_pretrained(model_dir, max_shard_size="4GB")
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(fixture, f), os.path.join(model_dir, f))
    with open(os.path.join(fixture, "preprocessor_config.json")) as f:
        pc = json.load(f)
    pc["size"] = {"shortest_edge": 3136, "longest_edge": 1344 * 1344}
    pc.pop("min_pixels", None)
    pc.pop("max_pixels", None)
    with open(os.path.join(model_dir, "preprocessor_config.json"), "w") as f:
        json.dump(pc, f, indent=2)
    log("saved to %s: %.1f s" % (model_dir, time.time() - t))
    return model


class Inputs:
    """HF's processor for one image and the question: Qwen2_5_VLProcessor when AutoProcessor
    loads it from the folder, else the same steps by hand (the image processor, the chat
    template, each <|image_pad|> expanded to t*h*w/4 pads, the tokenizer) - what the processor
    does inside."""

    def __init__(self, model_dir):
        import transformers
        self.proc = None
        try:
            self.proc = transformers.AutoProcessor.from_pretrained(model_dir)
            self.tok = self.proc.tokenizer
        except Exception as e:  # noqa
            log("AutoProcessor failed (%r); image processor + tokenizer by hand" % (e,))
            self.ip = transformers.AutoImageProcessor.from_pretrained(model_dir)
            self.tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        with open(os.path.join(model_dir, "chat_template.jinja")) as f:
            tmpl = f.read()
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
        self.text = self.tok.apply_chat_template(msgs, chat_template=tmpl, add_generation_prompt=True,
                                                 tokenize=False)
        log("processor:", type(self.proc).__name__ if self.proc else "by hand", "prompt %r" % self.text)

    def __call__(self, path):
        from PIL import Image
        im = Image.open(path).convert("RGB")
        if self.proc is not None:
            return self.proc(text=[self.text], images=[im], return_tensors="pt").to("cuda")
        iv = self.ip(images=[im], return_tensors="pt")
        g = iv["image_grid_thw"][0].tolist()
        text = self.text.replace("<|image_pad|>", "<|image_pad|>" * (g[0] * g[1] * g[2] // 4), 1)
        t = self.tok([text], return_tensors="pt")
        out = dict(input_ids=t["input_ids"], attention_mask=t["attention_mask"],
                   pixel_values=iv["pixel_values"], image_grid_thw=iv["image_grid_thw"])
        return {k: v.to("cuda") for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-images")
    ap.add_argument("--model-dir")
    ap.add_argument("--fixture")
    ap.add_argument("--images")
    ap.add_argument("--csv")
    a = ap.parse_args()
    if a.make_images:
        make_images(a.make_images)
        return
    import torch
    out = open(a.csv, "a")

    def row(metric, res, keep, tokens, v, unit):
        line = "csv,hf,%s,%d,%.2f,%d,%.4f,%s" % (metric, res, keep, tokens, v, unit)
        print(line, flush=True)
        out.write(line + "\n")
        out.flush()

    row("torch_" + torch.__version__.replace(",", "_"), 0, 0, 0, 0, "version")
    import transformers
    row("transformers_" + transformers.__version__, 0, 0, 0, 0, "version")
    t = time.time()
    model = build_and_save(a.model_dir, a.fixture)
    row("build_save_s", 0, 0, 0, time.time() - t, "s")
    inputs_for = Inputs(a.model_dir)
    images = a.images.split(",")
    sync = torch.cuda.synchronize

    def image_features(inp):
        pv = inp["pixel_values"].to(torch.bfloat16)
        g = inp["image_grid_thw"]
        for obj in (model, getattr(model, "model", None)):
            f = getattr(obj, "get_image_features", None) if obj is not None else None
            if f is not None:
                return f(pv, g)
        return model.model.visual(pv, grid_thw=g)

    with torch.inference_mode():
        for side, path in zip(SIDES, images):
            inp = inputs_for(path)
            g = inp["image_grid_thw"][0].tolist()
            ntok = g[0] * g[1] * g[2] // 4
            image_features(inp)
            sync()
            ts = []
            for _ in range(5):
                t = time.time()
                image_features(inp)
                sync()
                ts.append(time.time() - t)
            row("vit_ms", side, 1, ntok, 1e3 * sum(ts) / len(ts), "ms")
            tt, tf = [], []
            for it in range(4):
                t = time.time()
                inp = inputs_for(path)
                t1 = time.time()
                o = model(**inp, use_cache=True, logits_to_keep=1)  # last row, as generate
                int(o.logits[0, -1].argmax())
                sync()
                t2 = time.time()
                if it:
                    tt.append(t2 - t)
                    tf.append(t2 - t1)
                del o
            row("ttft_ms", side, 1, ntok, 1e3 * sorted(tt)[1], "ms")
            row("vit_plus_prefill_ms", side, 1, ntok, 1e3 * sorted(tf)[1], "ms")
            log("res %d: %d tokens done" % (side, ntok))
        # decode at 896
        inp = inputs_for(images[1])
        g = inp["image_grid_thw"][0].tolist()
        ntok = g[0] * g[1] * g[2] // 4
        kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)

        def gen(n):
            sync()
            t = time.time()
            model.generate(**inp, max_new_tokens=n, min_new_tokens=n, **kw)
            sync()
            return time.time() - t

        gen(2)
        t1 = min(gen(1), gen(1))
        nv = Nvml()
        j0 = nv.joules()
        t65 = gen(65)
        j1 = nv.joules()
        row("decode_tok_s", 896, 1, ntok, 64 / max(t65 - t1, 1e-9), "tok/s")
        row("request_s", 896, 1, ntok, t65, "s")
        row("request_joules", 896, 1, ntok, j1 - j0, "J")
    out.close()
    log("done")


if __name__ == "__main__":
    main()
