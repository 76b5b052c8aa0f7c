#!/usr/bin/env python3
"""make_resample_refs.py — PIL references for the bicubic resampler and the Qwen2-VL preprocessing.

Writes, from deterministic uint8 sources (seeded noise, gradients, hard edges):

  tests/fixtures/ref/resample-pil/
    index.json            {"pil": version, "numpy": version, "cases": [{"name", "src", "dst",
                           "mode", "src_size": [w, h], "dst_size": [w, h]}]}
    <name>.src.npy        uint8 [h, w, 3] (RGB) or [h, w] (L): the source
    <name>.dst.npy        uint8, the same layout: PIL Image.resize((w, h), Image.BICUBIC)
  tests/fixtures/ref/vlproc-pil/
    index.json            {"cases": [{"name", "src", "pixel_values", "grid_thw", "config"}]}
    <name>.src.npy        uint8 [h, w, 3]
    <name>.pixel_values.npy  float32 [n_patches, 3 * T * P * P]: the steps of transformers 5's
                          Qwen2VLImageProcessorPil (smart_resize, PIL bicubic on uint8, float64
                          rescale cast to float32, float32 normalise, the frame repeated T times,
                          the patch reshape/transpose), restated here with numpy

  tests/fixtures/ref/exif-pil/
    index.json            {"cases": [{"name", "file", "orientation", "upright"}]}
    o<N>.png, o<N>.webp, o<N>.jpg   a 24x16 four-colour image stored with EXIF Orientation N
                          (PNG eXIf chunk, WebP EXIF chunk, JPEG APP1), and RGBA / LA / P PNGs
    <name>.upright.npy    uint8 [h, w, 3]: PIL.Image.open, ImageOps.exif_transpose,
                          convert("RGB") (what HF's load_image and processor see)

Run from the repository root with Debian's python3-pil and python3-numpy (dev only; the tests read
the committed files and need no Python):  python3 scripts/make_resample_refs.py
tests/test_resample.c and tests/test_vlproc.c compare the C code with these files.
"""
import json
import math
import os

import numpy as np
from PIL import Image

ROOT = os.path.join("tests", "fixtures", "ref")
rng = np.random.default_rng(17)


def noise(h, w, ch):
    shape = (h, w, ch) if ch > 1 else (h, w)
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def photo(h, w):
    """A smooth gradient with edges and some noise (closer to a photo than pure noise)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 7.0) * np.cos(y / 11.0)
    g = 255 * (x / max(w - 1, 1))
    b = np.where((x // 16 + y // 16) % 2 == 0, 230.0, 20.0)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 6, size=(h, w, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def save(folder, name, arr):
    np.save(os.path.join(folder, name), arr)
    return name


def resample_refs():
    folder = os.path.join(ROOT, "resample-pil")
    os.makedirs(folder, exist_ok=True)
    cases = [
        # name, source array, destination (w, h)
        ("up-noise", noise(30, 40, 3), (64, 48)),
        ("down-noise", noise(61, 97, 3), (33, 23)),
        ("down-photo", photo(96, 128), (36, 27)),
        ("down-photo-odd", photo(96, 128), (77, 53)),
        ("vertical-only", noise(37, 50, 3), (50, 80)),
        ("horizontal-only", noise(37, 50, 3), (13, 37)),
        ("extreme", noise(5, 7, 3), (200, 3)),
        ("gray-mixed", noise(29, 31, 1), (17, 45)),
        ("one-pixel-up", noise(1, 1, 3), (3, 2)),
        ("row-down", noise(1, 3, 3), (1, 1)),
        ("same-size", noise(9, 11, 3), (11, 9)),
        ("edges-up", photo(20, 30), (112, 84)),
    ]
    index = []
    for name, src, (w, h) in cases:
        mode = "RGB" if src.ndim == 3 else "L"
        dst = np.asarray(Image.fromarray(src, mode).resize((w, h), Image.BICUBIC))
        index.append({"name": name, "mode": mode,
                      "src": save(folder, name + ".src.npy", src),
                      "dst": save(folder, name + ".dst.npy", dst),
                      "src_size": [int(src.shape[1]), int(src.shape[0])], "dst_size": [w, h]})
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump({"pil": Image.__version__, "numpy": np.__version__, "cases": index}, f, indent=1)
        f.write("\n")


def smart_resize(height, width, factor, min_pixels, max_pixels):
    # transformers 5.17 models/qwen2_vl/image_processing_qwen2_vl.py, restated
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio")
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


CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def qwen2vl_pil(src, patch, merge, temporal, min_pixels, max_pixels):
    h, w = src.shape[:2]
    rh, rw = smart_resize(h, w, patch * merge, min_pixels, max_pixels)
    img = Image.fromarray(src, "RGB")
    if (rw, rh) != (w, h):
        img = img.resize((rw, rh), Image.BICUBIC)
    x = np.asarray(img).transpose(2, 0, 1)                      # CHW uint8
    x = (x.astype(np.float64) * (1 / 255)).astype(np.float32)   # rescale
    mean = np.array(CLIP_MEAN, dtype=np.float32)
    std = np.array(CLIP_STD, dtype=np.float32)
    x = ((x.T - mean) / std).T                                  # normalise (float32)
    p = x[None, None]                                           # [1, 1, C, H, W]
    p = np.repeat(p, temporal, axis=1)                          # the frame T times
    gh, gw = rh // patch, rw // patch
    p = p.reshape(1, 1, temporal, 3, gh // merge, merge, patch, gw // merge, merge, patch)
    p = p.transpose(0, 1, 4, 7, 5, 8, 3, 2, 6, 9)
    return p.reshape(gh * gw, 3 * temporal * patch * patch), [1, gh, gw]


def vlproc_refs():
    folder = os.path.join(ROOT, "vlproc-pil")
    os.makedirs(folder, exist_ok=True)
    cases = [
        # name, source, patch, merge, temporal, min_pixels, max_pixels
        ("small-patch-resize", photo(37, 61), 4, 2, 2, 64, 64 * 400),
        ("small-patch-max", noise(90, 70, 3), 4, 2, 2, 64, 64 * 30),
        ("qwen-min-pixels", photo(30, 45), 14, 2, 2, 56 * 56, 28 * 28 * 1280),
        ("qwen-exact", noise(56, 28, 3), 14, 2, 2, 28 * 28, 28 * 28 * 1280),
    ]
    index = []
    for name, src, patch, merge, temporal, mn, mx in cases:
        pv, grid = qwen2vl_pil(src, patch, merge, temporal, mn, mx)
        index.append({"name": name, "src": save(folder, name + ".src.npy", src),
                      "pixel_values": save(folder, name + ".pixel_values.npy", pv),
                      "grid_thw": grid,
                      "config": {"patch_size": patch, "merge_size": merge,
                                 "temporal_patch_size": temporal, "min_pixels": mn,
                                 "max_pixels": mx}})
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump({"pil": Image.__version__, "numpy": np.__version__, "cases": index}, f, indent=1)
        f.write("\n")


def quadrants(w, h, alpha=False):
    """Four colours (red, green / blue, white) with a gradient so every pixel differs a little."""
    a = np.zeros((h, w, 4 if alpha else 3), np.uint8)
    a[: h // 2, : w // 2, :3] = (220, 30, 30)
    a[: h // 2, w // 2 :, :3] = (30, 200, 40)
    a[h // 2 :, : w // 2, :3] = (40, 50, 210)
    a[h // 2 :, w // 2 :, :3] = (240, 240, 240)
    a[..., 1] = np.clip(a[..., 1].astype(int) + np.arange(w)[None, :], 0, 255).astype(np.uint8)
    if alpha:
        a[..., 3] = np.linspace(0, 255, w * h).reshape(h, w).astype(np.uint8)
    return a


def exif_refs():
    from PIL import ImageOps
    folder = os.path.join(ROOT, "exif-pil")
    os.makedirs(folder, exist_ok=True)
    img = Image.fromarray(quadrants(24, 16), "RGB")
    index = []

    def add(name, fname, orientation):
        up = ImageOps.exif_transpose(Image.open(os.path.join(folder, fname))).convert("RGB")
        index.append({"name": name, "file": fname, "orientation": orientation,
                      "upright": save(folder, name + ".upright.npy", np.asarray(up))})

    for o in range(1, 9):
        ex = Image.Exif()
        ex[0x0112] = o
        img.save(os.path.join(folder, "o%d.png" % o), exif=ex.tobytes())
        add("png-o%d" % o, "o%d.png" % o, o)
    for o in (3, 6, 8):
        ex = Image.Exif()
        ex[0x0112] = o
        img.save(os.path.join(folder, "o%d.webp" % o), lossless=True, exif=ex.tobytes())
        add("webp-o%d" % o, "o%d.webp" % o, o)
        img.save(os.path.join(folder, "o%d.jpg" % o), quality=95, subsampling=0, exif=ex.tobytes())
        add("jpeg-o%d" % o, "o%d.jpg" % o, o)
    # convert("RGB") of other modes: alpha dropped, gray repeated, palette looked up
    Image.fromarray(quadrants(24, 16, alpha=True), "RGBA").save(os.path.join(folder, "rgba.png"))
    add("rgba", "rgba.png", 1)
    la = Image.fromarray(quadrants(24, 16, alpha=True), "RGBA").convert("LA")
    la.save(os.path.join(folder, "la.png"))
    add("la", "la.png", 1)
    pal = img.convert("P", palette=Image.ADAPTIVE, colors=6)
    pal.info["transparency"] = 2
    pal.save(os.path.join(folder, "palette.png"), transparency=2)
    add("palette", "palette.png", 1)
    Image.fromarray(quadrants(24, 16, alpha=True), "RGBA").save(os.path.join(folder, "rgba.webp"), lossless=True)
    add("rgba-webp", "rgba.webp", 1)
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump({"pil": Image.__version__, "numpy": np.__version__, "cases": index}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    resample_refs()
    vlproc_refs()
    exif_refs()
