// make_refs.mjs — reference outputs of the PP-OCR models from onnxruntime (CPU, fp32), for the
// tests of frugal's ONNX executor. From the repository root, after scripts/install-deps.sh:
//
//   (cd tests/onnx && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-package-lock)
//   node tests/onnx/make_refs.mjs [MODELS_DIR] [OUT_DIR]    # defaults: models/ppocr, tests/fixtures/ref/onnx
//
// Inputs are deterministic: element i of a case is a smooth pattern plus a small pseudo-random
// term (a 32-bit LCG seeded per case), in about [-1, 1] like PP-OCR's normalised pixels. Every
// case writes <case>.in.npy and its outputs as float32 .npy. The recogniser's full output
// (N, W/8, 6625) of the 2x3x48x320 case would be 2 MB, so that case keeps, per time step, the
// argmax class and its probability (<case>.argmax.npy, <case>.max.npy, float32) and the first
// 128 classes (<case>.head.npy); the other cases keep the whole output (<case>.out.npy).
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const models = process.argv[2] || 'models/ppocr';
const out = process.argv[3] || 'tests/fixtures/ref/onnx';
fs.mkdirSync(out, { recursive: true });

function npySave(file, shape, data) {
  const shp = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shp}, }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  dict = dict.padEnd(total - 10 - 1, ' ') + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(dict.length, 8);
  const body = Buffer.from(new Float32Array(data).buffer);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), body]));
}

function input(shape, seed) {
  const n = shape.reduce((a, b) => a * b, 1);
  const x = new Float32Array(n);
  let s = seed >>> 0;
  const [, C, H, W] = shape;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const w = i % W, h = Math.floor(i / W) % H, c = Math.floor(i / (W * H)) % C;
    const smooth = 0.6 * Math.sin(0.37 * w + 0.11 * h * (c + 1)) * Math.cos(0.23 * h - 0.05 * w);
    x[i] = smooth + 0.4 * (s / 4294967296 - 0.5);
  }
  return x;
}

const cases = [
  { name: 'det_64x96', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 64, 96], seed: 1 },
  { name: 'det_96x128', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 96, 128], seed: 2 },
  { name: 'rec_1x48x160', model: 'ch_PP-OCRv4_rec_infer.onnx', shape: [1, 3, 48, 160], seed: 3 },
  { name: 'rec_2x48x320', model: 'ch_PP-OCRv4_rec_infer.onnx', shape: [2, 3, 48, 320], seed: 4, reduce: true },
  { name: 'cls_1x48x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [1, 3, 48, 192], seed: 5 },
];

const sessions = {};
for (const c of cases) {
  if (!sessions[c.model]) {
    sessions[c.model] = await ort.InferenceSession.create(path.join(models, c.model), {
      executionProviders: ['cpu'], graphOptimizationLevel: 'disabled', intraOpNumThreads: 1,
    });
  }
  const sess = sessions[c.model];
  const x = input(c.shape, c.seed);
  const res = await sess.run({ [sess.inputNames[0]]: new ort.Tensor('float32', x, c.shape) });
  const y = res[sess.outputNames[0]];
  npySave(path.join(out, `${c.name}.in.npy`), c.shape, x);
  if (!c.reduce) {
    npySave(path.join(out, `${c.name}.out.npy`), y.dims, y.data);
  } else {
    const [N, T, K] = y.dims;
    const am = new Float32Array(N * T), mx = new Float32Array(N * T), head = new Float32Array(N * T * 128);
    for (let r = 0; r < N * T; r++) {
      let best = 0;
      for (let k = 1; k < K; k++) if (y.data[r * K + k] > y.data[r * K + best]) best = k;
      am[r] = best; mx[r] = y.data[r * K + best];
      for (let k = 0; k < 128; k++) head[r * 128 + k] = y.data[r * K + k];
    }
    npySave(path.join(out, `${c.name}.argmax.npy`), [N, T], am);
    npySave(path.join(out, `${c.name}.max.npy`), [N, T], mx);
    npySave(path.join(out, `${c.name}.head.npy`), [N, T, 128], head);
  }
  console.log(`${c.name}: in ${c.shape.join('x')} out ${y.dims.join('x')}`);
}
