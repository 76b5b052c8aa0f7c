#!/usr/bin/env python3
"""Make the vision-language test fixtures: a tiny random Qwen2.5-VL and a tiny random Qwen2-VL in HF
layout, test images made with PIL, and reference outputs computed by HF transformers on the CPU
(fp32, eager attention, fixed seeds).

Run on a machine with torch, transformers (5.x), tokenizers, safetensors, numpy and PIL:
    python3 scripts/make_vl_fixtures.py ROOT            # writes ROOT/tests/fixtures/..., then checks it
    python3 scripts/make_vl_fixtures.py ROOT --check    # only re-loads what was written and verifies it
    python3 scripts/make_vl_fixtures.py ROOT --images-only   # images + resampling refs (PIL/numpy only)
scripts/make_fixtures.py calls it too (its --vl / --vl-only options). Every step logs what it does; a
failing step names itself ("STEP FAILED: ...") and the script exits 1. A cross-check that fails but
leaves the references usable is a WARNING, listed again at the end.

What it writes (paths relative to tests/fixtures/):

  vl-images/               test images made with PIL (sizes are width x height as stored):
    rgba-64x96.png         PNG RGBA, transparent disc and half-transparent band
    wide-200x120.png       PNG RGB
    square-90x90.webp      WebP lossless RGB
    gray-150x40.png        PNG grayscale (mode L)
    odd-123x77.jpg         JPEG RGB (quality 95, 4:4:4), sides not multiples of 28
    exif6-100x60.jpg       JPEG RGB stored 100x60 with EXIF Orientation=6: shown (and fed to HF) as
                           60x100 after PIL.ImageOps.exif_transpose
    regions-112x56.png     the pruning image: left half red with white dots, right half blue/cyan
                           horizontal stripes; 2x4 merged tokens, 2 token columns per half
  Every reference below opened the file with PIL, applied ImageOps.exif_transpose (a no-op for the
  files without the tag) and gave the PIL image to HF's processor, which converts it to RGB itself.

  qwen25vl-tiny/           Qwen2_5_VLForConditionalGeneration as save_pretrained writes it
                           (transformers-5 nested config: text_config, vision_config,
                           text_config.rope_parameters.mrope_section = [2, 3, 3]); F32 safetensors in
                           >= 2 shards + model.safetensors.index.json; untied lm_head;
                           tokenizer.json, tokenizer_config.json, chat_template.jinja,
                           preprocessor_config.json (size {shortest_edge: min_pixels, longest_edge:
                           max_pixels}), generation_config.json.
                           Vision: depth 4, hidden 32, 2 heads, MLP 64 (SwiGLU), window 56, full
                           attention at [1, 3], out 64. LLM: hidden 64, 2 layers, 4/2 heads,
                           head_dim 16, FFN 128.
  qwen2vl-tiny/            Qwen2VLForConditionalGeneration with the older FLAT config (text fields at
                           the top level, rope_theta and rope_scaling {type: mrope, mrope_section}
                           at the top level, vision_config {depth, embed_dim, mlp_ratio, num_heads,
                           in_chans, hidden_size, patch_size, spatial_merge_size,
                           temporal_patch_size}; no vision hidden_act: quick_gelu by default), one
                           BF16 model.safetensors with the older tensor names (visual.*, model.*,
                           tied lm_head absent), processor_config.json in the older flat form
                           (min_pixels / max_pixels at the top level), tokenizer files and
                           chat_template.jinja. Vision: depth 2, embed_dim 32, 2 heads, mlp_ratio 2,
                           LayerNorm + quick_gelu MLP, merger to 64. LLM as above, tied embeddings.
                           Its references are fp32 computations with the bf16-rounded weights.

  ref/qwen25vl-tiny/, ref/qwen2vl-tiny/
    ref.json               {model, versions, token_ids, eos_ids, processor, cases: [...], pruning}
                           each case: {name, images (paths relative to tests/fixtures), prompt,
                           rendered (chat template output before pad expansion), input_ids (pads
                           expanded), n_image_tokens, image_grid_thw [[t,h,w],...], position_ids
                           [3][n] (HF get_rope_index: t, h, w rows), rope_delta, pixel_values,
                           image_embeds, last_logits (file names in this folder, null for text
                           only), greedy_ids (model.generate, greedy, 12 new tokens, stops at an eos
                           id), greedy_ids_recompute (greedy by full re-computation, no KV cache),
                           greedy_margin_min (smallest top-1 minus top-2 logit over those steps),
                           greedy_text}
    <case>-pixel_values.npy   float32 [n_patches, 3*2*14*14] as the processor returns it
    <case>-image_embeds.npy   float32 [n_image_tokens, 64]: the vision tower's merger output
                              (model.model.visual(...).pooler_output, original token order)
    <case>-last_logits.npy    float32 [vocab]: logits at the prompt's last position
                           Cases sharing an image share the files (regions_left / regions_right).
    summary.json           versions of python/torch/transformers/tokenizers/safetensors/PIL/numpy,
                           files with sizes and sha256, cross-check results; no timings.

  ref/resample/
    index.json             {versions, filter: "BICUBIC", entries: [...], vl_images: [...],
                           processor, float_formula}
    <src>.npy, <src>-<H>x<W>.npy        uint8 [H, W, 3]: synthetic sources and PIL
                           Image.resize((W, H), Image.BICUBIC) of them, up and down
    <src>-<H>x<W>-f32.npy  float32 [3, H, W]: HF's float path of that result (rescale then
                           normalise, as Qwen2VLImageProcessorPil computes it)
    vl-<image>-rgb.npy     uint8 [H, W, 3]: what HF's processor sees after exif_transpose and its
                           own RGB conversion (not kept for RGB PNGs, whose pixels are the file's:
                           "rgb" is null in index.json)
    vl-<image>-resized.npy uint8 [H', W', 3]: that image resized by PIL bicubic to its smart_resize
                           size (the processor's min/max pixels)

Preprocessing: the SLOW (PIL) image processor, Qwen2VLImageProcessorPil, min_pixels 3136,
max_pixels 9408 (at most 12 merged tokens per image); the fast one uses torchvision and differs.
"""
import argparse, hashlib, json, math, os, shutil, sys, tempfile, time, traceback

import numpy as np
from PIL import Image, ImageDraw, ImageOps

# ------------------------------------------------------------------ settings
PATCH, MERGE, TPS = 14, 2, 2
FACTOR = PATCH * MERGE
MIN_PIXELS = 28 * 28 * 4      # 3136
MAX_PIXELS = 28 * 28 * 12     # 9408: at most 12 merged tokens per image
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
BPE_VOCAB = 512               # trained part; the special tokens follow it
N_NEW = 12                    # greedy tokens per case
SIZE_LIMIT = 3 * 1024 * 1024

# Qwen2-VL's vision config in the older layout (what config.json holds; hidden_act is left out: the
# default quick_gelu)
QWEN2VL_VISION = dict(depth=2, embed_dim=32, mlp_ratio=2, num_heads=2, hidden_size=64,
                      patch_size=PATCH, spatial_merge_size=MERGE, temporal_patch_size=TPS)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Renders like HF's Qwen2-VL chat template: a default system turn, string content as is, list
# content part by part (an image part -> <|vision_start|><|image_pad|><|vision_end|>, optionally
# "Picture N: " before it when add_vision_id is set), then the assistant prompt.
QWEN2VL_TEMPLATE = """{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- for message in messages -%}
    {%- if loop.first and message['role'] != 'system' -%}
        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}
    {%- endif -%}
    {{- '<|im_start|>' + message['role'] + '\\n' -}}
    {%- if message['content'] is string -%}
        {{- message['content'] + '<|im_end|>\\n' -}}
    {%- else -%}
        {%- for part in message['content'] -%}
            {%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}
                {%- set image_count.value = image_count.value + 1 -%}
                {%- if add_vision_id -%}
                    {{- 'Picture ' + image_count.value | string + ': ' -}}
                {%- endif -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif part['type'] == 'video' or 'video' in part -%}
                {%- set video_count.value = video_count.value + 1 -%}
                {%- if add_vision_id -%}
                    {{- 'Video ' + video_count.value | string + ': ' -}}
                {%- endif -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif 'text' in part -%}
                {{- part['text'] -}}
            {%- endif -%}
        {%- endfor -%}
        {{- '<|im_end|>\\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\\n' -}}
{%- endif -%}
"""

# (file, format, stored width, stored height)
IMAGES = [
    ("rgba-64x96.png", "PNG", 64, 96),
    ("wide-200x120.png", "PNG", 200, 120),
    ("square-90x90.webp", "WEBP", 90, 90),
    ("gray-150x40.png", "PNG", 150, 40),
    ("odd-123x77.jpg", "JPEG", 123, 77),
    ("exif6-100x60.jpg", "JPEG", 100, 60),
    ("regions-112x56.png", "PNG", 112, 56),
]
PRUNE_IMAGE = "regions-112x56.png"
PRUNE_Q_LEFT = "What is in the left half of the picture?"
PRUNE_Q_RIGHT = "What is in the right half of the picture?"

CASES = {
    "qwen25vl-tiny": [
        {"name": "one_image", "images": ["odd-123x77.jpg"], "prompt": "Describe this image."},
        {"name": "two_images", "images": ["rgba-64x96.png", "exif6-100x60.jpg"],
         "prompt": "Compare the two pictures."},
        {"name": "text_only", "images": [], "prompt": "Where is my card?"},
        {"name": "regions_left", "images": [PRUNE_IMAGE], "prompt": PRUNE_Q_LEFT},
        {"name": "regions_right", "images": [PRUNE_IMAGE], "prompt": PRUNE_Q_RIGHT},
    ],
    "qwen2vl-tiny": [
        {"name": "one_image", "images": ["square-90x90.webp"], "prompt": "What is shown here?"},
        {"name": "text_only", "images": [], "prompt": "How do I transfer money?"},
    ],
}

# synthetic resampling sources: name -> (H, W), target sizes (H, W); the first target also gets
# the float path
RESAMPLE = {
    "s0": ((33, 47), [(17, 23), (66, 94), (28, 56), (33, 47), (50, 20)]),
    "s1": ((64, 64), [(28, 28), (112, 84), (37, 51), (8, 8)]),
    "s2": ((20, 90), [(28, 84), (56, 168), (10, 45)]),
}

WARNINGS = []


def log(*a):
    print("[vl-fixtures]", *a, flush=True)


def warn(*a):
    msg = " ".join(str(x) for x in a)
    WARNINGS.append(msg)
    print("[vl-fixtures] WARNING:", msg, flush=True)


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
        print("[vl-fixtures] STEP FAILED: %s: %s" % (self.name, ev), flush=True)
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


# ------------------------------------------------------------------ preprocessing (numpy/PIL)
def smart_resize(height, width, factor=FACTOR, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS):
    """HF's smart_resize (image_processing_qwen2_vl.py), re-stated."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio over 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def pil_bicubic(rgb_u8, h, w):
    """PIL's bicubic resize of a uint8 [H, W, 3] array to (h, w): what HF's PIL backend does
    (image_transforms.resize: to a PIL image, Image.resize((w, h), BICUBIC), back to numpy)."""
    return np.asarray(Image.fromarray(rgb_u8, "RGB").resize((w, h), Image.BICUBIC)).copy()


def float_path(resized_u8, mean=CLIP_MEAN, std=CLIP_STD):
    """HF's PIL-backend float path: channels first, x = float32(float64(u8) * (1/255)), then
    (x - mean) / std in float32 (image_transforms.rescale and normalize). Returns [3, H, W]."""
    x = resized_u8.transpose(2, 0, 1)
    x = (x.astype(np.float64) * (1 / 255)).astype(np.float32)
    m = np.array(mean, dtype=np.float32)[:, None, None]
    s = np.array(std, dtype=np.float32)[:, None, None]
    return ((x - m) / s).astype(np.float32)


def patchify(chw, patch=PATCH, merge=MERGE, tps=TPS):
    """[3, H, W] float32 -> [grid_h*grid_w, 3*tps*patch*patch] in Qwen2VLImageProcessorPil's order
    (the frame duplicated for the temporal patch; rows by merge block, then within the block)."""
    c, h, w = chw.shape
    gh, gw = h // patch, w // patch
    p = np.repeat(chw[None, None], tps, axis=1)  # [1, tps, C, H, W]
    p = p.reshape(1, 1, tps, c, gh // merge, merge, patch, gw // merge, merge, patch)
    p = p.transpose(0, 1, 4, 7, 5, 8, 3, 2, 6, 9)
    return np.ascontiguousarray(p.reshape(gh * gw, c * tps * patch * patch))


def open_for_hf(path):
    """How every reference opened an image: PIL, then EXIF orientation applied."""
    im = Image.open(path)
    im.load()
    return ImageOps.exif_transpose(im)


def hf_rgb(im, image_processor=None):
    """The RGB array HF's processor works on: its own convert_to_rgb when transformers is there
    (recorded in index.json), else PIL's convert('RGB')."""
    if image_processor is not None and hasattr(image_processor, "convert_to_rgb"):
        out = image_processor.convert_to_rgb(im)
    else:
        out = im if im.mode == "RGB" else im.convert("RGB")
    a = np.asarray(out)
    assert a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3, a.shape
    return a.copy()


# ------------------------------------------------------------------ images
def _grad(h, w, c0, c1, axis):
    t = (np.arange(w if axis == 1 else h, dtype=np.float64) /
         max(1, (w if axis == 1 else h) - 1))
    t = t[None, :, None] if axis == 1 else t[:, None, None]
    a = np.array(c0, np.float64) * (1 - t) + np.array(c1, np.float64) * t
    return np.broadcast_to(a, (h, w, 3)).copy()


def _noise(rng, a, amp):
    return np.clip(a + rng.integers(-amp, amp + 1, size=a.shape), 0, 255)


def make_images(img_dir):
    os.makedirs(img_dir, exist_ok=True)
    rng = np.random.default_rng(17)
    out = {}
    # rgba-64x96.png
    w, h = 64, 96
    a = _noise(rng, _grad(h, w, (250, 200, 40), (30, 90, 200), 0), 4).astype(np.uint8)
    im = Image.fromarray(a, "RGB").convert("RGBA")
    d = ImageDraw.Draw(im)
    d.rectangle([6, 8, 30, 40], fill=(200, 30, 30, 255))
    alpha = np.full((h, w), 255, np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    alpha[(yy - 60) ** 2 + (xx - 40) ** 2 < 14 ** 2] = 0
    alpha[70:84, :] = 128
    im.putalpha(Image.fromarray(alpha, "L"))
    out["rgba-64x96.png"] = im
    # wide-200x120.png
    w, h = 200, 120
    a = _noise(rng, _grad(h, w, (20, 120, 40), (240, 240, 200), 1), 3).astype(np.uint8)
    im = Image.fromarray(a, "RGB")
    d = ImageDraw.Draw(im)
    d.ellipse([20, 20, 90, 100], fill=(220, 60, 20), outline=(0, 0, 0), width=3)
    d.rectangle([120, 30, 185, 70], fill=(30, 30, 160))
    for x in range(0, 200, 9):
        d.line([x, 110, x + 5, 119], fill=(0, 0, 0), width=1)
    out["wide-200x120.png"] = im
    # square-90x90.webp
    w = h = 90
    a = np.zeros((h, w, 3), np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    chk = (yy // 10 + xx // 10) % 2
    a[chk == 0] = (235, 235, 235)
    a[chk == 1] = (40, 40, 40)
    im = Image.fromarray(a, "RGB")
    d = ImageDraw.Draw(im)
    d.ellipse([25, 25, 65, 65], fill=(30, 180, 60))
    d.polygon([(5, 85), (45, 55), (85, 85)], fill=(200, 40, 160))
    out["square-90x90.webp"] = im
    # gray-150x40.png
    w, h = 150, 40
    g = _grad(h, w, (0, 0, 0), (255, 255, 255), 1)[:, :, 0]
    g[:, ::7] = 255 - g[:, ::7]
    g[12:28, 30:120] = 128
    out["gray-150x40.png"] = Image.fromarray(_noise(rng, g, 2).astype(np.uint8), "L")
    # odd-123x77.jpg
    w, h = 123, 77
    a = _grad(h, w, (60, 20, 100), (250, 180, 90), 1) * 0.5 + _grad(h, w, (0, 80, 0), (0, 0, 255), 0) * 0.5
    im = Image.fromarray(a.astype(np.uint8), "RGB")
    d = ImageDraw.Draw(im)
    d.rectangle([10, 10, 50, 40], fill=(255, 255, 255))
    d.ellipse([70, 30, 115, 70], fill=(10, 10, 10))
    d.line([0, 76, 122, 0], fill=(255, 0, 0), width=2)
    out["odd-123x77.jpg"] = im
    # exif6-100x60.jpg (stored; displayed rotated)
    w, h = 100, 60
    a = _grad(h, w, (240, 240, 240), (60, 60, 200), 1)
    a[4:24, 4:30] = (230, 20, 20)       # red block at the stored top-left
    a[40:56, 70:96] = (20, 160, 20)     # green block at the stored bottom-right
    out["exif6-100x60.jpg"] = Image.fromarray(a.astype(np.uint8), "RGB")
    # regions-112x56.png: left half red with white dots, right half blue/cyan stripes
    w, h = 112, 56
    a = np.zeros((h, w, 3), np.uint8)
    a[:, :56] = (200, 30, 30)
    for y in range(3, h, 9):
        for x in range(3, 56, 9):
            a[y:y + 3, x:x + 3] = (255, 255, 255)
    for y in range(h):
        a[y, 56:] = (20, 40, 200) if (y // 4) % 2 == 0 else (60, 200, 230)
    out["regions-112x56.png"] = Image.fromarray(a, "RGB")

    for name, fmt, w, h in IMAGES:
        im = out[name]
        assert im.size == (w, h), (name, im.size)
        p = os.path.join(img_dir, name)
        if fmt == "PNG":
            im.save(p, "PNG", optimize=True)
        elif fmt == "WEBP":
            im.save(p, "WEBP", lossless=True, quality=100, method=6)
        elif name.startswith("exif6"):
            exif = Image.Exif()
            exif[0x0112] = 6
            im.save(p, "JPEG", quality=95, subsampling=0, exif=exif.tobytes())
        else:
            im.save(p, "JPEG", quality=95, subsampling=0)
        log("image", name, im.mode, im.size, os.path.getsize(p), "bytes")
    # verify what a reader sees
    for name, fmt, w, h in IMAGES:
        im = Image.open(os.path.join(img_dir, name))
        assert im.format == fmt, (name, im.format)
        tr = ImageOps.exif_transpose(im)
        if name.startswith("exif6"):
            assert im.getexif().get(0x0112) == 6, "EXIF orientation tag missing"
            assert tr.size == (h, w), ("exif_transpose did not rotate", tr.size)
        else:
            assert tr.size == (w, h)


# ------------------------------------------------------------------ resampling references
def make_resample_refs(fix, image_processor=None, versions=None):
    rdir = os.path.join(fix, "ref", "resample")
    shutil.rmtree(rdir, ignore_errors=True)
    os.makedirs(rdir)
    rng = np.random.default_rng(1234)
    entries = []
    for name, ((h, w), targets) in RESAMPLE.items():
        if name == "s0":
            src = _noise(rng, _grad(h, w, (0, 50, 255), (255, 200, 0), 1), 40)
        elif name == "s1":
            yy, xx = np.mgrid[0:h, 0:w]
            src = np.zeros((h, w, 3))
            src[((yy // 4 + xx // 4) % 2) == 0] = (255, 255, 255)
            src[(yy - 32) ** 2 + (xx - 32) ** 2 < 20 ** 2] = (255, 0, 0)
        else:
            src = np.zeros((h, w, 3))
            src[:, ::2] = (0, 0, 0)
            src[:, 1::2] = (255, 255, 255)
            src[::3, :, 1] = 128
        src = src.astype(np.uint8)
        np.save(os.path.join(rdir, name + ".npy"), src)
        for i, (th, tw) in enumerate(targets):
            res = pil_bicubic(src, th, tw)
            assert res.shape == (th, tw, 3) and res.dtype == np.uint8
            rn = "%s-%dx%d" % (name, th, tw)
            np.save(os.path.join(rdir, rn + ".npy"), res)
            e = {"name": rn, "source": name + ".npy", "source_hw": [h, w], "size_hw": [th, tw],
                 "result": rn + ".npy", "float": None}
            if i == 0:
                f = float_path(res)
                np.save(os.path.join(rdir, rn + "-f32.npy"), f)
                e["float"] = rn + "-f32.npy"
            entries.append(e)
    vl = []
    img_dir = os.path.join(fix, "vl-images")
    conv = "convert('RGB') by PIL (transformers not loaded)"
    for name, fmt, sw, sh in IMAGES:
        raw = Image.open(os.path.join(img_dir, name))
        orient = int(raw.getexif().get(0x0112, 1))
        im = open_for_hf(os.path.join(img_dir, name))
        rgb = hf_rgb(im, image_processor)
        if im.mode == "RGBA" and image_processor is not None:
            dropped = np.asarray(im.convert("RGB"))
            white = Image.new("RGBA", im.size, (255, 255, 255))
            comp = np.asarray(Image.alpha_composite(white, im.convert("RGBA")).convert("RGB"))
            conv = ("alpha dropped (Image.convert('RGB'))" if np.array_equal(rgb, dropped) else
                    "alpha composited over white" if np.array_equal(rgb, comp) else "unknown")
            log("HF's RGB conversion of RGBA:", conv)
        h, w = rgb.shape[:2]
        rh, rw = smart_resize(h, w)
        res = pil_bicubic(rgb, rh, rw)
        base = "vl-" + os.path.splitext(name)[0]
        # an RGB PNG decodes exactly: its pixels are the file's (no copy kept, to stay small)
        keep_rgb = not (fmt == "PNG" and raw.mode == "RGB")
        if keep_rgb:
            np.save(os.path.join(rdir, base + "-rgb.npy"), rgb)
        np.save(os.path.join(rdir, base + "-resized.npy"), res)
        vl.append({"image": "vl-images/" + name, "format": fmt, "mode": raw.mode,
                   "stored_wh": [sw, sh], "exif_orientation": orient,
                   "rgb": base + "-rgb.npy" if keep_rgb else None,
                   "rgb_hw": [h, w], "smart_resize_hw": [rh, rw],
                   "grid_thw": [1, rh // PATCH, rw // PATCH],
                   "n_image_tokens": (rh // PATCH) * (rw // PATCH) // (MERGE * MERGE),
                   "resized": base + "-resized.npy"})
        log("resample ref", name, "rgb", (h, w), "->", (rh, rw), "grid", vl[-1]["grid_thw"])
    import PIL
    idx = {"versions": dict(versions or {}, PIL=PIL.__version__, numpy=np.__version__),
           "filter": "BICUBIC",
           "note": ("results are PIL Image.resize((W, H), Image.BICUBIC) of uint8 RGB arrays, "
                    "reducing_gap None, as HF's PIL image processor calls it; arrays are [H, W, 3] "
                    "uint8; *-f32.npy are [3, H, W] float32"),
           "rgba_conversion": conv,
           "entries": entries, "vl_images": vl,
           "processor": {"patch_size": PATCH, "merge_size": MERGE, "temporal_patch_size": TPS,
                         "min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS,
                         "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
                         "rescale_factor": 1 / 255},
           "float_formula": ("x = float32(float64(u8) * (1/255)); y = (x - float32(mean[c])) / "
                             "float32(std[c]) in float32, channels first; pixel_values = "
                             "patchify(y) with the frame repeated temporal_patch_size times")}
    jdump(idx, os.path.join(rdir, "index.json"))
    return idx


# ------------------------------------------------------------------ tokenizer
def train_tokenizer(corpus_lines):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus_lines, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    assert all(v is not None for v in ids.values()), ids
    assert len(set(ids.values())) == len(SPECIALS)
    for s, i in ids.items():  # each special is one token, also inside text
        assert tok.encode("a" + s + "b").ids.count(i) == 1, s
    return tok, ids


def hf_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast
    t = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                pad_token="<|endoftext|>", bos_token=None)
    t.chat_template = QWEN2VL_TEMPLATE
    return t


# ------------------------------------------------------------------ models
def init_weights(model, seed):
    """Non-trivial random weights: norms near 1 (1 + 0.1 N), biases 0.05 N, token embeddings 0.5 N,
    matrices N / sqrt(fan_in); the LLM's o_proj / down_proj / untied lm_head 4x larger (as
    make_fixtures.py does) so that greedy continuations differ between prompts, do not repeat the
    last token, and the top logits are far apart (no near ties)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if name.endswith(".bias"):
                p.copy_(0.05 * r)
            elif p.dim() == 1:
                p.copy_(1.0 + 0.1 * r)
            elif "embed_tokens" in name:
                p.copy_(0.5 * r)
            else:
                fan_in = p[0].numel()
                big = ("o_proj" in name or "down_proj" in name or "lm_head" in name)
                scale = 4.0 if ("visual" not in name and big) else 1.0
                p.copy_(scale * r / math.sqrt(fan_in))


def set_eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # noqa
        log("set_attn_implementation failed (%r); setting the config fields" % (e,))
        for c in (model.config, getattr(model.config, "text_config", None),
                  getattr(model.config, "vision_config", None)):
            if c is not None:
                c._attn_implementation = "eager"
    impl = [getattr(c, "_attn_implementation", None) for c in
            (model.config, getattr(model.config, "text_config", None),
             getattr(model.config, "vision_config", None))]
    log("attention implementation (top, text, vision):", impl)
    if any(i not in (None, "eager") for i in impl):
        warn("attention is not eager everywhere:", impl)


def build_model(kind, vocab, ids):
    import torch
    import transformers
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    text = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                rms_norm_eps=1e-6, hidden_act="silu", use_sliding_window=False,
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"],
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                 "mrope_section": [2, 3, 3]})
    tok_ids = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                   vision_start_token_id=ids["<|vision_start|>"],
                   vision_end_token_id=ids["<|vision_end|>"])
    if kind == "qwen25vl-tiny":
        vision = dict(depth=4, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                      window_size=56, fullatt_block_indexes=[1, 3], patch_size=PATCH,
                      spatial_merge_size=MERGE, temporal_patch_size=TPS, tokens_per_second=2,
                      hidden_act="silu", in_channels=3)
        cfg = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision,
                                            tie_word_embeddings=False, **tok_ids)
        cls = transformers.Qwen2_5_VLForConditionalGeneration
        seed = 2501
    else:
        vision = dict(QWEN2VL_VISION, hidden_act="quick_gelu", in_channels=3)
        cfg = transformers.Qwen2VLConfig(text_config=dict(text, tie_word_embeddings=True),
                                         vision_config=vision, tie_word_embeddings=True, **tok_ids)
        cls = transformers.Qwen2VLForConditionalGeneration
        seed = 2001
    torch.manual_seed(seed)
    try:
        model = cls._from_config(cfg, attn_implementation="eager")
    except Exception as e:  # noqa
        log("_from_config(attn_implementation=eager) failed (%r); plain constructor" % (e,))
        model = cls(cfg)
    set_eager(model)
    init_weights(model, seed)
    if kind == "qwen2vl-tiny":
        try:
            model.tie_weights()
        except Exception as e:  # noqa
            warn("tie_weights:", repr(e))
        emb = model.get_input_embeddings().weight
        if model.lm_head.weight.data_ptr() != emb.data_ptr():
            with torch.no_grad():
                model.lm_head.weight = emb
        assert model.lm_head.weight.data_ptr() == emb.data_ptr(), "lm_head not tied"
        # the checkpoint is BF16: compute the references with the bf16-rounded weights
        with torch.no_grad():
            for _, p in model.named_parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    else:
        assert model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    model.eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=eos, pad_token_id=ids["<|endoftext|>"],
        do_sample=False)
    n = sum(p.numel() for p in model.parameters())
    log(kind, "built:", cls.__name__, n, "parameters")
    for k in list(model.state_dict().keys())[:3] + list(model.state_dict().keys())[-3:]:
        log("  state_dict key:", k)
    return model


def tf_attr(name):
    """transformers.<name>, or None when this version lacks it (the lazy module may raise more
    than AttributeError for a class whose optional dependency is missing)."""
    import transformers
    try:
        return getattr(transformers, name)
    except Exception as e:  # noqa
        log("transformers.%s unavailable: %r" % (name, e))
        return None


def make_image_processor():
    """The SLOW (PIL) Qwen2-VL image processor of transformers 5 (Qwen2VLImageProcessorPil)."""
    import transformers
    cls = tf_attr("Qwen2VLImageProcessorPil")
    if cls is None:
        try:
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import \
                Qwen2VLImageProcessorPil as cls  # noqa
        except Exception as e:  # noqa
            log("no Qwen2VLImageProcessorPil (%r)" % (e,))
            cls = None
    kw = dict(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}, patch_size=PATCH,
              temporal_patch_size=TPS, merge_size=MERGE, image_mean=CLIP_MEAN, image_std=CLIP_STD)
    if cls is not None:
        ip = cls(**kw)
    else:
        # transformers 4.x: the slow class is Qwen2VLImageProcessor itself
        ip = transformers.Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                                patch_size=PATCH, temporal_patch_size=TPS,
                                                merge_size=MERGE)
    backend = getattr(ip, "backend", None)
    log("image processor:", type(ip).__name__, "backend", backend)
    if backend not in (None, "pil") or "Fast" in type(ip).__name__:
        raise RuntimeError("the image processor is not the PIL one: %s %s" % (type(ip).__name__, backend))
    return ip


def make_processor(kind, ip, hft):
    import transformers
    cls = transformers.Qwen2_5_VLProcessor if kind == "qwen25vl-tiny" else transformers.Qwen2VLProcessor
    vp = None
    for vname in (("Qwen2_5_VLVideoProcessor", "Qwen2VLVideoProcessor") if kind == "qwen25vl-tiny"
                  else ("Qwen2VLVideoProcessor",)):
        vcls = tf_attr(vname)
        if vcls is None:
            continue
        try:
            vp = vcls()
            break
        except Exception as e:  # noqa
            log("video processor", vname, "not made:", repr(e))
    tries = []
    if vp is not None:
        tries.append(dict(image_processor=ip, tokenizer=hft, video_processor=vp,
                          chat_template=QWEN2VL_TEMPLATE))
    tries.append(dict(image_processor=ip, tokenizer=hft, chat_template=QWEN2VL_TEMPLATE))
    for kw in tries:
        try:
            p = cls(**kw)
            log("processor:", cls.__name__, "with", sorted(kw))
            return p
        except Exception as e:  # noqa
            log("processor", cls.__name__, "with", sorted(kw), "failed:", repr(e))
    # last resort: the same class without ProcessorMixin's isinstance check of its parts (a
    # tokenizer made from a tokenizers object is not a Qwen2Tokenizer in some versions)
    loose = type(cls.__name__, (cls,), {"check_argument_for_proper_class":
                                        lambda self, name, arg: type(arg)})
    for kw in tries:
        try:
            p = loose(**kw)
            warn(kind, ": processor made without the class check of its parts")
            return p
        except Exception as e:  # noqa
            log("processor (no class check) with", sorted(kw), "failed:", repr(e))
    warn(kind, ": no processor object; expanding the image pads by hand")
    return None


# ------------------------------------------------------------------ references
def expand_pads(text, grids, image_token="<|image_pad|>"):
    parts = text.split(image_token)
    assert len(parts) - 1 == len(grids), (len(parts) - 1, len(grids))
    out = parts[0]
    for g, rest in zip(grids, parts[1:]):
        out += image_token * (int(g[0]) * int(g[1]) * int(g[2]) // (MERGE * MERGE)) + rest
    return out


def rope_index_py(ids, image_token_id, grids):
    """get_rope_index re-stated (images only): text tokens count up on all three rows; an image's
    tokens get t = start + t_idx, h = start + row, w = start + col over the merged grid; the text
    after it starts at start + max(grid_h, grid_w) / merge."""
    pos = [[], [], []]
    cur, i, gi = 0, 0, 0
    while i < len(ids):
        if ids[i] == image_token_id:
            t, h, w = (int(x) for x in grids[gi])
            gi += 1
            lh, lw = h // MERGE, w // MERGE
            for tt in range(t):
                for hh in range(lh):
                    for ww in range(lw):
                        pos[0].append(cur + tt)
                        pos[1].append(cur + hh)
                        pos[2].append(cur + ww)
            n = t * lh * lw
            assert all(x == image_token_id for x in ids[i:i + n]), "pad run shorter than the grid"
            i += n
            cur += max(h, w) // MERGE
        else:
            for r in pos:
                r.append(cur)
            cur += 1
            i += 1
    return pos


def call_rope_index(model, input_ids, mm, grid):
    import inspect
    f = model.model.get_rope_index
    params = inspect.signature(f).parameters
    kw = {"image_grid_thw": grid, "attention_mask": None}
    if "mm_token_type_ids" in params:
        kw["mm_token_type_ids"] = mm
    pos, delta = f(input_ids, **kw)
    return pos, delta


def visual_embeds(model, pv, grid):
    out = model.model.visual(pv, grid_thw=grid)
    if hasattr(out, "pooler_output") and out.pooler_output is not None:
        return out.pooler_output
    if isinstance(out, (tuple, list)):
        return out[0]
    return out


MM_KWARG = {"ok": True}  # False once a model refused mm_token_type_ids (transformers < 5)


def call_with_mm(fn, kw, mm):
    """fn(**kw, mm_token_type_ids=mm); without it when this transformers does not take it."""
    if mm is not None and MM_KWARG["ok"]:
        try:
            return fn(mm_token_type_ids=mm, **kw)
        except (TypeError, ValueError) as e:
            if "mm_token_type_ids" not in str(e):
                raise
            MM_KWARG["ok"] = False
            warn("this transformers does not take mm_token_type_ids: %r" % (e,))
    return fn(**kw)


def forward_last_logits(model, input_ids, pv, grid, mm, position_ids=None):
    import torch
    kw = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False)
    if pv is not None:
        kw.update(pixel_values=pv, image_grid_thw=grid)
    if position_ids is not None:
        kw["position_ids"] = position_ids
    model.model.rope_deltas = None
    return call_with_mm(model, kw, mm).logits[0, -1].float()


def greedy_generate(model, input_ids, pv, grid, mm, n, eos, pad):
    import torch
    model.model.rope_deltas = None
    kw = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=n,
              do_sample=False, num_beams=1, eos_token_id=eos, pad_token_id=pad)
    if pv is not None:
        kw.update(pixel_values=pv, image_grid_thw=grid)
    return call_with_mm(model.generate, kw, mm)[0, input_ids.shape[1]:].tolist()


def run_case(kind, model, proc, ip, hft, ids, case, fix, rdir, shared):
    import torch
    img_dir = os.path.join(fix, "vl-images")
    image_token_id = ids["<|image_pad|>"]
    content = [{"type": "image"} for _ in case["images"]] + [{"type": "text", "text": case["prompt"]}]
    messages = [{"role": "user", "content": content}]
    rendered = hft.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if proc is not None:
        with step(kind + "/" + case["name"] + ": processor.apply_chat_template", fatal=False):
            r2 = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            if r2 != rendered:
                warn(kind, case["name"], "processor and tokenizer render differently:", repr(r2))
    assert rendered.count("<|image_pad|>") == len(case["images"]), rendered
    log("rendered:", repr(rendered))
    images = [open_for_hf(os.path.join(img_dir, n)) for n in case["images"]]
    for n, im in zip(case["images"], images):
        log("  image", n, "mode", im.mode, "size after exif_transpose", im.size)

    # processor call (pads expanded by HF)
    with torch.no_grad():
        inputs = None
        if proc is not None:
            kw = dict(text=[rendered], return_tensors="pt")
            if images:
                kw["images"] = images
            try:
                inputs = proc(return_mm_token_type_ids=True, **kw)
            except Exception as e:  # noqa
                log("processor call with return_mm_token_type_ids failed (%r); without" % (e,))
                inputs = proc(**kw)
        else:
            enc = {}
            if images:
                enc = ip(images=images, return_tensors="pt")
            grids0 = enc["image_grid_thw"].tolist() if images else []
            inputs = dict(enc)
            inputs["input_ids"] = torch.tensor([hft(expand_pads(rendered, grids0))["input_ids"]])
        input_ids = inputs["input_ids"].long()
        assert input_ids.dim() == 2 and input_ids.shape[0] == 1, input_ids.shape
        pv = inputs.get("pixel_values") if images else None
        grid = inputs.get("image_grid_thw") if images else None
        grids = grid.tolist() if grid is not None else []
        log("input_ids", input_ids.shape[1], "tokens; grid_thw", grids)

        # cross-check: my pad expansion + the tokenizer give the same ids
        mine = hft(expand_pads(rendered, grids))["input_ids"]
        if mine != input_ids[0].tolist():
            warn(kind, case["name"], "processor ids differ from expanding the pads by hand")
        n_img = int((input_ids[0] == image_token_id).sum())
        assert n_img == sum(t * h * w // (MERGE * MERGE) for t, h, w in grids), (n_img, grids)
        mm = (input_ids == image_token_id).to(torch.int32)
        if "mm_token_type_ids" in inputs and inputs["mm_token_type_ids"] is not None:
            if not torch.equal(inputs["mm_token_type_ids"].to(torch.int32), mm):
                warn(kind, case["name"], "processor mm_token_type_ids differ from ids == image pad")

        # pixel values and their cross-check against the numpy re-statement
        if images:
            pv = pv.float()
            assert pv.dim() == 2 and pv.shape[1] == 3 * TPS * PATCH * PATCH, pv.shape
            assert pv.shape[0] == sum(t * h * w for t, h, w in grids), (pv.shape, grids)
            emu = []
            for im, (t, gh, gw) in zip(images, grids):
                rgb = hf_rgb(im, ip)
                rh, rw = smart_resize(rgb.shape[0], rgb.shape[1])
                assert (rh // PATCH, rw // PATCH) == (gh, gw), ((rh, rw), (gh, gw))
                emu.append(patchify(float_path(pil_bicubic(rgb, rh, rw), ip.image_mean, ip.image_std)))
            emu = np.concatenate(emu, 0)
            d = float(np.abs(emu - pv.numpy()).max())
            log("pixel_values", tuple(pv.shape), "max |HF - numpy re-statement| =", d)
            shared.setdefault("pixel_restatement_maxdiff", []).append(d)
            if d > 1e-6:
                warn(kind, case["name"], "pixel values differ from the numpy re-statement by", d)

        # M-RoPE positions
        pos, delta = call_rope_index(model, input_ids, mm, grid)
        pos = pos[:, 0, :].tolist()
        assert len(pos) == 3 and len(pos[0]) == input_ids.shape[1]
        mine = rope_index_py(input_ids[0].tolist(), image_token_id, grids)
        if mine != pos:
            warn(kind, case["name"], "get_rope_index differs from the re-statement")
        rope_delta = int(delta.reshape(-1)[0]) if delta is not None else 0

        # vision features after the merger
        embeds = None
        if images:
            embeds = visual_embeds(model, pv, grid).float()
            assert embeds.shape == (n_img, model.config.text_config.hidden_size), embeds.shape
            with step(kind + "/" + case["name"] + ": get_image_features cross-check", fatal=False):
                f = model.model.get_image_features(pv, image_grid_thw=grid)
                f = getattr(f, "pooler_output", f)
                f = torch.cat(list(f), 0) if isinstance(f, (tuple, list)) else f
                d = float((f.float() - embeds).abs().max())
                log("get_image_features vs visual(): max diff", d)
                if d > 1e-6:
                    warn(kind, case["name"], "get_image_features differs from visual() by", d)

        # last logits: HF's own positions, and explicit positions from get_rope_index
        logits = forward_last_logits(model, input_ids, pv, grid, mm)
        lg2 = forward_last_logits(model, input_ids, pv, grid, mm,
                                  position_ids=torch.tensor(pos, dtype=torch.long)[:, None, :])
        d = float((logits - lg2).abs().max())
        log("last logits: argmax", int(logits.argmax()), "| HF positions vs explicit:", d)
        if d > 1e-4:
            warn(kind, case["name"], "logits with explicit positions differ by", d)

        # greedy continuation by generate and by full re-computation
        greedy = greedy_generate(model, input_ids, pv, grid, mm, N_NEW,
                                 model.generation_config.eos_token_id,
                                 model.generation_config.pad_token_id)
        eos = set(model.generation_config.eos_token_id)
        seq = input_ids[0].tolist()
        rec, margin = [], float("inf")
        for _ in range(N_NEW):
            x = torch.tensor([seq + rec])
            lg = forward_last_logits(model, x, pv, grid, (x == image_token_id).to(torch.int32))
            top = torch.topk(lg, 2)
            margin = min(margin, float(top.values[0] - top.values[1]))
            nxt = int(top.indices[0])
            rec.append(nxt)
            if nxt in eos:
                break
        log("greedy (generate):", greedy)
        if rec != greedy:
            warn(kind, case["name"], "generate", greedy, "!= recompute", rec)
        if margin < 1e-3:
            warn(kind, case["name"], "a greedy step is a near tie: margin", margin)

    # files
    name = case["name"]
    key = tuple(case["images"])
    rec_files = {"pixel_values": None, "image_embeds": None}
    if images:
        if key in shared["files"]:
            rec_files = shared["files"][key]
            old = np.load(os.path.join(rdir, rec_files["pixel_values"]))
            assert np.array_equal(old, pv.numpy()), "shared pixel values differ"
        else:
            rec_files = {"pixel_values": name + "-pixel_values.npy",
                         "image_embeds": name + "-image_embeds.npy"}
            np.save(os.path.join(rdir, rec_files["pixel_values"]),
                    np.ascontiguousarray(pv.numpy().astype(np.float32)))
            np.save(os.path.join(rdir, rec_files["image_embeds"]),
                    np.ascontiguousarray(embeds.numpy().astype(np.float32)))
            shared["files"][key] = rec_files
    np.save(os.path.join(rdir, name + "-last_logits.npy"),
            np.ascontiguousarray(logits.numpy().astype(np.float32)))
    return {"name": name, "images": ["vl-images/" + n for n in case["images"]],
            "prompt": case["prompt"], "rendered": rendered, "input_ids": input_ids[0].tolist(),
            "n_image_tokens": n_img, "image_grid_thw": grids, "position_ids": pos,
            "rope_delta": rope_delta, "pixel_values": rec_files["pixel_values"],
            "image_embeds": rec_files["image_embeds"], "last_logits": name + "-last_logits.npy",
            "greedy_ids": greedy, "greedy_ids_recompute": rec,
            "greedy_margin_min": margin, "greedy_text": hft.decode(greedy, skip_special_tokens=False)}


# ------------------------------------------------------------------ writing the model folders
def to_legacy_name(k):
    if k.startswith("model.visual."):
        return "visual." + k[len("model.visual."):]
    if k.startswith("model.language_model."):
        return "model." + k[len("model.language_model."):]
    return k


def save_qwen25(model, proc, ip, hft, tok, d):
    shutil.rmtree(d, ignore_errors=True)
    nbytes = sum(p.numel() * 4 for p in model.parameters())
    shard = max(64 * 1024, nbytes // 3)
    model.save_pretrained(d, max_shard_size=shard)
    finish_tokenizer(hft, tok, d)
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "preprocessor_config.json")
        if proc is not None:
            with step("qwen25vl-tiny: processor.save_pretrained", fatal=False):
                proc.save_pretrained(tmp)
                log("processor.save_pretrained wrote:", sorted(os.listdir(tmp)))
        if not os.path.exists(src):
            with step("qwen25vl-tiny: image_processor.save_pretrained", fatal=False):
                ip.save_pretrained(tmp)
                log("image_processor.save_pretrained wrote:", sorted(os.listdir(tmp)))
        nested = os.path.join(tmp, "processor_config.json")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(d, "preprocessor_config.json"))
        elif os.path.exists(nested) and "image_processor" in json.load(open(nested)):
            jdump(json.load(open(nested))["image_processor"],
                  os.path.join(d, "preprocessor_config.json"))
        else:
            warn("no preprocessor_config.json was saved; writing the image processor's to_dict")
            jdump(json.loads(ip.to_json_string()), os.path.join(d, "preprocessor_config.json"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pc = json.load(open(os.path.join(d, "preprocessor_config.json")))
    log("preprocessor_config.json:", json.dumps(pc, sort_keys=True))
    shards = [f for f in os.listdir(d) if f.startswith("model-") and f.endswith(".safetensors")]
    if len(shards) < 2 or not os.path.exists(os.path.join(d, "model.safetensors.index.json")):
        raise RuntimeError("expected >= 2 shards and an index, got %s" % sorted(os.listdir(d)))
    cfg = json.load(open(os.path.join(d, "config.json")))
    rp = cfg.get("text_config", {}).get("rope_parameters", {})
    log("config: top keys", sorted(cfg), "| text rope_parameters", rp)
    if rp.get("mrope_section") != [2, 3, 3]:
        warn("qwen25vl-tiny config.json text_config.rope_parameters lacks mrope_section [2,3,3]:", rp)


def finish_tokenizer(hft, tok, d):
    hft.save_pretrained(d)
    tok.save(os.path.join(d, "tokenizer.json"))
    jp = os.path.join(d, "chat_template.jinja")
    with open(jp, "w", encoding="utf-8") as f:
        f.write(QWEN2VL_TEMPLATE)
    tcp = os.path.join(d, "tokenizer_config.json")
    tc = json.load(open(tcp))
    tc.pop("chat_template", None)
    jdump(tc, tcp)
    for extra in ("special_tokens_map.json", "chat_template.json"):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))


def save_qwen2(model, hft, tok, ip, ids, d):
    import torch
    from safetensors.torch import save_file
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    sd = {}
    for k, v in model.state_dict().items():
        nk = to_legacy_name(k)
        if nk == "lm_head.weight":
            continue  # tied
        assert "language_model" not in nk, nk
        sd[nk] = v.detach().to(torch.bfloat16).contiguous().clone()
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    log("qwen2vl-tiny: wrote", len(sd), "BF16 tensors, e.g.", sorted(sd)[:2], sorted(sd)[-2:])
    tc = model.config.text_config
    flat = {
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "model_type": "qwen2_vl",
        "attention_dropout": 0.0,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "hidden_act": tc.hidden_act,
        "hidden_size": tc.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": tc.intermediate_size,
        "max_position_embeddings": tc.max_position_embeddings,
        "max_window_layers": tc.num_hidden_layers,
        "num_attention_heads": tc.num_attention_heads,
        "num_hidden_layers": tc.num_hidden_layers,
        "num_key_value_heads": tc.num_key_value_heads,
        "rms_norm_eps": tc.rms_norm_eps,
        "rope_theta": 1000000.0,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vision_config": dict(QWEN2VL_VISION, in_chans=3),
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "vocab_size": tc.vocab_size,
    }
    assert getattr(model.config.vision_config, "hidden_act", "quick_gelu") == "quick_gelu"
    jdump(flat, os.path.join(d, "config.json"))
    model.generation_config.save_pretrained(d)
    finish_tokenizer(hft, tok, d)
    jdump({"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS, "patch_size": PATCH,
           "temporal_patch_size": TPS, "merge_size": MERGE, "image_mean": list(ip.image_mean),
           "image_std": list(ip.image_std), "image_processor_type": "Qwen2VLImageProcessor",
           "processor_class": "Qwen2VLProcessor"}, os.path.join(d, "processor_config.json"))
    log("qwen2vl-tiny files:", sorted(os.listdir(d)))


def versions():
    import platform
    v = {"python": platform.python_version(), "numpy": np.__version__}
    import PIL
    v["PIL"] = PIL.__version__
    for m in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            v[m] = __import__(m).__version__
        except Exception:  # noqa
            v[m] = None
    return v


def write_summary(rdir, extra):
    files = {}
    for f in sorted(os.listdir(rdir)):
        if f == "summary.json":
            continue
        p = os.path.join(rdir, f)
        files[f] = {"bytes": os.path.getsize(p), "sha256": sha256(p)}
    jdump(dict(extra, versions=versions(), files=files), os.path.join(rdir, "summary.json"))


# ------------------------------------------------------------------ generate
def generate(fix, corpus_path=None, threads=4):
    import torch
    import transformers  # noqa: F401 (fail here, early, when it is missing)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    vers = versions()
    log("versions:", vers)
    with step("images"):
        make_images(os.path.join(fix, "vl-images"))
    with step("image processor (PIL)"):
        ip = make_image_processor()
    with step("resampling references"):
        idx = make_resample_refs(fix, ip, vers)
    with step("tokenizer"):
        here = os.path.dirname(os.path.abspath(__file__))
        corpus_path = corpus_path or os.path.join(os.path.dirname(here), "tests", "fixtures",
                                                  "corpus-en.txt")
        lines = open(corpus_path, encoding="utf-8").read().splitlines()
        tok, ids = train_tokenizer(lines)
        hft = hf_tokenizer(tok)
        vocab = tok.get_vocab_size(with_added_tokens=True)
        log("tokenizer: vocab", vocab, "special ids", ids)
        for s, i in ids.items():
            assert hft.convert_tokens_to_ids(s) == i, s
    for kind in ("qwen25vl-tiny", "qwen2vl-tiny"):
        rdir = os.path.join(fix, "ref", kind)
        with step(kind + ": model"):
            model = build_model(kind, vocab, ids)
        with step(kind + ": processor"):
            proc = make_processor(kind, ip, hft)
        shutil.rmtree(rdir, ignore_errors=True)
        os.makedirs(rdir)
        shared = {"files": {}}
        cases = []
        for case in CASES[kind]:
            with step(kind + ": case " + case["name"]):
                cases.append(run_case(kind, model, proc, ip, hft, ids, case, fix, rdir, shared))
        g = [c["greedy_ids"] for c in cases]
        if len(set(map(tuple, g))) < len(g) - (1 if kind == "qwen25vl-tiny" else 0):
            warn(kind, "greedy continuations repeat across prompts:", g)
        with step(kind + ": save model folder"):
            d = os.path.join(fix, kind)
            if kind == "qwen25vl-tiny":
                save_qwen25(model, proc, ip, hft, tok, d)
            else:
                save_qwen2(model, hft, tok, ip, ids, d)
        ref = {"model": kind, "versions": vers,
               "token_ids": {s: i for s, i in ids.items()}, "vocab_size": vocab,
               "eos_ids": list(model.generation_config.eos_token_id),
               "processor": {"class": "Qwen2VLImageProcessorPil", "min_pixels": MIN_PIXELS,
                             "max_pixels": MAX_PIXELS, "patch_size": PATCH, "merge_size": MERGE,
                             "temporal_patch_size": TPS, "image_mean": list(ip.image_mean),
                             "image_std": list(ip.image_std),
                             "image_loading": "PIL.Image.open, ImageOps.exif_transpose, then the "
                                              "processor (its own RGB conversion: %s)" %
                                              idx["rgba_conversion"]},
               "max_new_tokens": N_NEW, "cases": cases}
        if kind == "qwen25vl-tiny":
            c = next(c for c in cases if c["name"] == "regions_left")
            t, gh, gw = c["image_grid_thw"][0]
            mh, mw = gh // MERGE, gw // MERGE
            ref["pruning"] = {
                "image": "vl-images/" + PRUNE_IMAGE, "cases": ["regions_left", "regions_right"],
                "questions": {"left": PRUNE_Q_LEFT, "right": PRUNE_Q_RIGHT},
                "merged_grid_hw": [mh, mw],
                "left_token_indices": [r * mw + q for r in range(mh) for q in range(mw // 2)],
                "right_token_indices": [r * mw + q for r in range(mh) for q in range(mw // 2, mw)],
                "left": "red with white dots", "right": "blue and cyan horizontal stripes"}
        jdump(ref, os.path.join(rdir, "ref.json"))
        write_summary(rdir, {"model": kind, "warnings": [w for w in WARNINGS if kind in w],
                             "pixel_restatement_maxdiff": shared.get("pixel_restatement_maxdiff")})
        del model
    write_summary(os.path.join(fix, "ref", "resample"), {"what": "PIL bicubic references"})
    report_sizes(fix)


def report_sizes(fix):
    total = 0
    for sub in ("vl-images", "qwen25vl-tiny", "qwen2vl-tiny", "ref/qwen25vl-tiny",
                "ref/qwen2vl-tiny", "ref/resample"):
        p = os.path.join(fix, sub)
        n = sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)) if os.path.isdir(p) else 0
        total += n
        log("size %-20s %8d bytes" % (sub, n))
    log("size total %d bytes (limit %d)" % (total, SIZE_LIMIT))
    if total > SIZE_LIMIT:
        warn("the VL fixtures take %d bytes, over %d" % (total, SIZE_LIMIT))
    return total


# ------------------------------------------------------------------ check
def check(fix, threads=4):
    """Re-load what generate() wrote and verify it: images and resampling refs (re-computed with
    PIL), the HF folders (from_pretrained, no missing tensors), ids from the saved tokenizer and
    chat template, pixel values from the saved processor config, positions, features, logits and
    greedy ids against the saved references. Returns the number of failures."""
    fails = []

    def ok(cond, what):
        log(("PASS " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    rdir = os.path.join(fix, "ref", "resample")
    with step("check: resampling references", fatal=False) as s:
        idx = json.load(open(os.path.join(rdir, "index.json")))
        for e in idx["entries"]:
            src = np.load(os.path.join(rdir, e["source"]))
            res = np.load(os.path.join(rdir, e["result"]))
            ok(np.array_equal(pil_bicubic(src, *e["size_hw"]), res), "resample " + e["name"])
            if e["float"]:
                f = np.load(os.path.join(rdir, e["float"]))
                ok(f.dtype == np.float32 and f.shape == (3, *e["size_hw"]) and
                   np.array_equal(f, float_path(res)), "float path " + e["name"])
        for v in idx["vl_images"]:
            im = open_for_hf(os.path.join(fix, v["image"]))
            rgb = np.load(os.path.join(rdir, v["rgb"])) if v["rgb"] else np.asarray(im)
            ok(list(rgb.shape[:2]) == v["rgb_hw"] and im.size == (v["rgb_hw"][1], v["rgb_hw"][0]),
               "vl image size " + v["image"])
            if im.mode == "RGB":
                ok(np.array_equal(np.asarray(im), rgb), "vl image decode " + v["image"])
            res = np.load(os.path.join(rdir, v["resized"]))
            ok(list(smart_resize(*v["rgb_hw"])) == v["smart_resize_hw"] and
               np.array_equal(pil_bicubic(rgb, *v["smart_resize_hw"]), res),
               "vl image resize " + v["image"])
    if s.failed:
        fails.append("the resampling check raised")
    try:
        import torch
        import transformers  # noqa: F401
    except Exception as e:  # noqa
        log("torch/transformers not available (%r): model checks skipped" % (e,))
        torch = None
    if torch is not None:
        torch.set_num_threads(threads)
        for kind in ("qwen25vl-tiny", "qwen2vl-tiny"):
            with step("check: " + kind, fatal=False) as s:
                check_model(fix, kind, ok)
            if s.failed:
                fails.append(kind + ": the check raised")
    total = report_sizes(fix)
    ok(total <= SIZE_LIMIT, "total size %d <= %d" % (total, SIZE_LIMIT))
    log("check: %d failure(s)" % len(fails))
    for f in fails:
        log("  FAILED:", f)
    return len(fails)


def check_model(fix, kind, ok):
    import torch
    import transformers
    d = os.path.join(fix, kind)
    rdir = os.path.join(fix, "ref", kind)
    ref = json.load(open(os.path.join(rdir, "ref.json")))
    cls = (transformers.Qwen2_5_VLForConditionalGeneration if kind == "qwen25vl-tiny"
           else transformers.Qwen2VLForConditionalGeneration)
    model, info = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                      output_loading_info=True)
    model.eval()
    log(kind, "loading info:", {k: (list(v)[:8] if hasattr(v, "__iter__") else v)
                                for k, v in info.items()})
    ok(not info.get("missing_keys") and not info.get("unexpected_keys") and
       not info.get("mismatched_keys"), kind + ": from_pretrained loads every tensor")
    cfg = model.config
    ok(cfg.image_token_id == ref["token_ids"]["<|image_pad|>"] and
       cfg.vision_start_token_id == ref["token_ids"]["<|vision_start|>"],
       kind + ": token ids in the config")
    rp = cfg.text_config.rope_parameters
    ok(list(rp.get("mrope_section", [])) == [2, 3, 3], kind + ": mrope_section %s" % (rp,))
    try:
        hft = transformers.AutoTokenizer.from_pretrained(d)
    except Exception as e:  # noqa
        log(kind, "AutoTokenizer failed (%r); the tokenizer.json alone" % (e,))
        hft = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))
    ok(hft.convert_tokens_to_ids("<|image_pad|>") == ref["token_ids"]["<|image_pad|>"],
       kind + ": the saved tokenizer has the special tokens")
    template = open(os.path.join(d, "chat_template.jinja"), encoding="utf-8").read()
    pcfg_name = "preprocessor_config.json" if kind == "qwen25vl-tiny" else "processor_config.json"
    pcfg = json.load(open(os.path.join(d, pcfg_name)))
    kw = {k: v for k, v in pcfg.items() if k not in ("image_processor_type", "processor_class")}
    cls_ip = tf_attr("Qwen2VLImageProcessorPil")
    if cls_ip is None:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import \
            Qwen2VLImageProcessorPil as cls_ip  # noqa
    try:
        ip = cls_ip(**kw)
    except Exception as e:  # noqa
        log(kind, "constructor from", pcfg_name, "failed (%r); from_dict" % (e,))
        ip = cls_ip.from_dict(pcfg)
    log(kind, "image processor from", pcfg_name, ":", ip.size, ip.patch_size, ip.merge_size)
    image_token_id = ref["token_ids"]["<|image_pad|>"]
    eos = ref["eos_ids"]
    for c in ref["cases"]:
        name = kind + "/" + c["name"]
        content = [{"type": "image"} for _ in c["images"]] + [{"type": "text", "text": c["prompt"]}]
        rendered = hft.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                           add_generation_prompt=True, chat_template=template)
        ok(rendered == c["rendered"], name + ": chat template renders the same")
        grids = c["image_grid_thw"]
        ids = hft(expand_pads(rendered, grids))["input_ids"]
        ok(ids == c["input_ids"], name + ": input ids from the saved tokenizer")
        input_ids = torch.tensor([c["input_ids"]])
        mm = (input_ids == image_token_id).to(torch.int32)
        pv = grid = None
        if c["images"]:
            images = [open_for_hf(os.path.join(fix, p)) for p in c["images"]]
            enc = ip(images=images, return_tensors="pt")
            pv_ref = np.load(os.path.join(rdir, c["pixel_values"]))
            ok(enc["image_grid_thw"].tolist() == grids, name + ": grid_thw from the saved config")
            ok(pv_ref.dtype == np.float32 and np.array_equal(enc["pixel_values"].float().numpy(), pv_ref),
               name + ": pixel values from the saved processor config")
            pv = torch.from_numpy(pv_ref)
            grid = torch.tensor(grids, dtype=torch.long)
        with torch.no_grad():
            pos, _ = call_rope_index(model, input_ids, mm, grid)
            ok(pos[:, 0, :].tolist() == c["position_ids"], name + ": position ids")
            if pv is not None:
                emb = visual_embeds(model, pv, grid).float().numpy()
                emb_ref = np.load(os.path.join(rdir, c["image_embeds"]))
                rel = float(np.linalg.norm(emb - emb_ref) / max(1e-30, np.linalg.norm(emb_ref)))
                ok(emb_ref.dtype == np.float32 and emb.shape == emb_ref.shape and rel < 1e-5,
                   name + ": image embeds (rel L2 %.2e)" % rel)
            lg = forward_last_logits(model, input_ids, pv, grid, mm).numpy()
            lg_ref = np.load(os.path.join(rdir, c["last_logits"]))
            rel = float(np.linalg.norm(lg - lg_ref) / max(1e-30, np.linalg.norm(lg_ref)))
            ok(lg_ref.dtype == np.float32 and lg.shape == lg_ref.shape and rel < 1e-5,
               name + ": last logits (rel L2 %.2e)" % rel)
            g = greedy_generate(model, input_ids, pv, grid, mm, ref["max_new_tokens"], eos,
                                ref["token_ids"]["<|endoftext|>"])
            ok(g == c["greedy_ids"], name + ": greedy ids %s" % g)


# ------------------------------------------------------------------ main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=".",
                    help="repository root: writes ROOT/tests/fixtures/... (default .)")
    ap.add_argument("--check", action="store_true", help="only verify what is there")
    ap.add_argument("--images-only", action="store_true",
                    help="only the images and the resampling references (PIL and numpy)")
    ap.add_argument("--corpus", default=None, help="tokenizer corpus (default tests/fixtures/corpus-en.txt)")
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args(argv)
    return run(os.path.join(args.root, "tests", "fixtures"), check_only=args.check,
               images_only=args.images_only, corpus=args.corpus, threads=args.threads)


def run(fix, check_only=False, images_only=False, corpus=None, threads=4):
    """Makes (unless check_only) and checks the VL fixtures under fix (a tests/fixtures folder).
    Returns the process exit status: 0 when every step and every check passed."""
    t0 = time.time()
    try:
        if images_only:
            with step("images"):
                make_images(os.path.join(fix, "vl-images"))
            with step("resampling references"):
                make_resample_refs(fix, None, versions())
            write_summary(os.path.join(fix, "ref", "resample"), {"what": "PIL bicubic references"})
            nfail = check(fix, threads) if check_only else 0
        elif check_only:
            nfail = check(fix, threads)
        else:
            generate(fix, corpus, threads)
            log("generated; now checking what was written")
            nfail = check(fix, threads)
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
