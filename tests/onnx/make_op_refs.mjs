// make_op_refs.mjs — one small ONNX model per op case, with inputs and onnxruntime's outputs, for
// tests/test_onnx_exec.c. From the repository root:
//
//   (cd tests/onnx && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-package-lock)
//   node tests/onnx/make_op_refs.mjs [OUT_DIR]          # default: tests/fixtures/ref/onnx_ops
//
// The models are written here with a minimal protobuf encoder (the ONNX field numbers of
// src/model/onnx/onnx.proto), so nothing but onnxruntime-node is needed. Every case writes
// <case>.onnx, <case>.in<k>.npy (float32, deterministic: a seeded 32-bit LCG in [-1, 1] times
// the case's scale, or in [0.1, 1.1] for `pos`) and <case>.out<k>.npy (onnxruntime CPU, graph
// optimisations off, one thread; int64 outputs written as float32), and the list cases.txt
// ("<case> <n_inputs> <n_outputs>" per line) that the test reads.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const out = process.argv[2] || 'tests/fixtures/ref/onnx_ops';
fs.mkdirSync(out, { recursive: true });

// ---- protobuf encoding
function varint(n) {
  let v = BigInt.asUintN(64, BigInt(n));
  const b = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    b.push(byte);
  } while (v);
  return Buffer.from(b);
}
const key = (field, wt) => varint((field << 3) | wt);
const fInt = (field, n) => Buffer.concat([key(field, 0), varint(n)]);
const fBytes = (field, buf) => Buffer.concat([key(field, 2), varint(buf.length), buf]);
const fStr = (field, s) => fBytes(field, Buffer.from(s, 'utf8'));
const fF32 = (field, x) => { const b = Buffer.alloc(4); b.writeFloatLE(x); return Buffer.concat([key(field, 5), b]); };
const cat = (parts) => Buffer.concat(parts.filter(Boolean));

const FLOAT = 1, INT64 = 7;
function tensor(name, dims, dt, data) {
  const raw = dt === FLOAT ? Buffer.from(new Float32Array(data).buffer)
                           : Buffer.from(new BigInt64Array(data.map((x) => BigInt(x))).buffer);
  return cat([...dims.map((d) => fInt(1, d)), fInt(2, dt), name ? fStr(8, name) : null, fBytes(9, raw)]);
}
function attr(name, v) {
  const p = [fStr(1, name)];
  if (v.f !== undefined) p.push(fInt(20, 1), fF32(2, v.f));
  else if (v.i !== undefined) p.push(fInt(20, 2), fInt(3, v.i));
  else if (v.s !== undefined) p.push(fInt(20, 3), fStr(4, v.s));
  else if (v.ints !== undefined) p.push(fInt(20, 7), ...v.ints.map((x) => fInt(8, x)));
  else throw new Error(`attribute ${name}`);
  return cat(p);
}
function node(op, ins, outs, attrs = {}) {
  return cat([...ins.map((s) => fStr(1, s)), ...outs.map((s) => fStr(2, s)), fStr(3, `${op}_${outs[0]}`),
              fStr(4, op), ...Object.entries(attrs).map(([k, v]) => fBytes(5, attr(k, v)))]);
}
function valueInfo(name, elem, dims) {
  let tt = fInt(1, elem);
  if (dims) {
    const dimMsgs = dims.map((d) => fBytes(1, typeof d === 'string' ? fStr(2, d) : fInt(1, d)));
    tt = cat([tt, fBytes(2, cat(dimMsgs))]);
  }
  return cat([fStr(1, name), fBytes(2, fBytes(1, tt))]);
}
function model(opset, nodes, inits, inputs, outputs) {
  const g = cat([...nodes.map((n) => fBytes(1, n)), fStr(2, 'g'), ...inits.map((t) => fBytes(5, t)),
                 ...inputs.map((v) => fBytes(11, v)), ...outputs.map((v) => fBytes(12, v))]);
  return cat([fInt(1, 8), fBytes(8, cat([fStr(1, ''), fInt(2, opset)])), fBytes(7, g)]);
}

// ---- npy
function npySave(file, shape, data) {
  const shp = shape.length === 0 ? '()' : shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shp}, }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  dict = dict.padEnd(total - 10 - 1, ' ') + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(dict.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), Buffer.from(new Float32Array(data).buffer)]));
}

let seed = 12345;
function rand(n, kind = 1) {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const u = seed / 4294967296;
    x[i] = kind === 'pos' ? 0.1 + u : kind * (2 * u - 1);
  }
  return x;
}
const prod = (d) => d.reduce((a, b) => a * b, 1);
// a float initializer of random values
const W = (name, dims, scale = 0.5) => tensor(name, dims, FLOAT, Array.from(rand(prod(dims), scale)));
const F = (name, dims, vals) => tensor(name, dims, FLOAT, vals);
const I = (name, dims, vals) => tensor(name, dims, INT64, vals);
const bn = (p, C) => [F(`${p}s`, [C], Array.from(rand(C, 'pos'))), W(`${p}b`, [C]), W(`${p}m`, [C]),
                      F(`${p}v`, [C], Array.from(rand(C, 'pos')))];

// ---- the cases: { name, opset, nodes, inits, inputs: [[name, dims, kind, declared dims]], outputs: [[name, elem]] }
const cases = [];
const c = (name, opset, nodes, inits, inputs, outputs) => cases.push({ name, opset, nodes, inits, inputs, outputs });
const Y = [['y', FLOAT]];

// elementwise, broadcasting
c('add_bcast', 11, [node('Add', ['a', 'b'], ['y'])], [], [['a', [2, 3, 4, 5]], ['b', [3, 1, 5]]], Y);
c('sub_both_bcast', 11, [node('Sub', ['a', 'b'], ['y'])], [], [['a', [2, 3, 1, 5]], ['b', [1, 1, 4, 1]]], Y);
c('mul_channel', 11, [node('Mul', ['a', 'b'], ['y'])], [], [['a', [2, 6, 5, 7]], ['b', [2, 6, 1, 1]]], Y);
c('mul_const_first', 11, [node('Mul', ['k', 'a'], ['y'])], [W('k', [1, 4, 1, 1])], [['a', [1, 4, 3, 5]]], Y);
c('div_scalar', 9, [node('Div', ['a', 'k'], ['y'])], [F('k', [1], [6])], [['a', [3, 5]]], Y);
c('div_bcast', 11, [node('Div', ['a', 'b'], ['y'])], [], [['a', [2, 3, 5]], ['b', [5], 'pos']], Y);
c('pow_square', 9, [node('Pow', ['a', 'k'], ['y'])], [F('k', [1], [2])], [['a', [4, 7]]], Y);
c('pow_general', 11, [node('Pow', ['a', 'b'], ['y'])], [], [['a', [3, 4], 'pos'], ['b', [4]]], Y);
c('relu', 11, [node('Relu', ['a'], ['y'])], [], [['a', [2, 3, 5]]], Y);
c('sigmoid', 11, [node('Sigmoid', ['a'], ['y'])], [], [['a', [2, 3, 5], 8]], Y);
c('sqrt', 11, [node('Sqrt', ['a'], ['y'])], [], [['a', [3, 7], 'pos']], Y);
c('hardsigmoid_default', 11, [node('HardSigmoid', ['a'], ['y'])], [], [['a', [4, 9], 4]], Y);
c('hardsigmoid_sixth', 11, [node('HardSigmoid', ['a'], ['y'], { alpha: { f: 1 / 6 }, beta: { f: 0.5 } })], [], [['a', [4, 9], 5]], Y);
c('clip_attrs_opset9', 9, [node('Clip', ['a'], ['y'], { min: { f: 0 }, max: { f: 6 } })], [], [['a', [3, 11], 8]], Y);
c('clip_inputs_opset11', 11, [node('Clip', ['a', 'lo', 'hi'], ['y'])], [F('lo', [], [-1]), F('hi', [], [2])], [['a', [3, 11], 4]], Y);
c('clip_min_only', 11, [node('Clip', ['a', 'lo'], ['y'])], [F('lo', [], [0.25])], [['a', [3, 11]]], Y);

// convolution
const conv = (ins, a = {}) => node('Conv', ins, ['y'], a);
c('conv_3x3_s2_p1_bias', 11, [conv(['x', 'w', 'b'], { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] } })],
  [W('w', [8, 3, 3, 3]), W('b', [8])], [['x', [1, 3, 11, 13]]], Y);
c('conv_1x1_batch2', 11, [conv(['x', 'w'])], [W('w', [8, 16, 1, 1], 0.3)], [['x', [2, 16, 5, 6]]], Y);
c('conv_depthwise_3x3', 11, [conv(['x', 'w', 'b'], { group: { i: 8 }, pads: { ints: [1, 1, 1, 1] } })],
  [W('w', [8, 1, 3, 3]), W('b', [8])], [['x', [1, 8, 9, 10]]], Y);
c('conv_depthwise_5x5_s2', 11, [conv(['x', 'w'], { group: { i: 6 }, pads: { ints: [2, 2, 2, 2] }, strides: { ints: [2, 2] } })],
  [W('w', [6, 1, 5, 5])], [['x', [2, 6, 11, 9]]], Y);
c('conv_depthwise_s21', 9, [conv(['x', 'w'], { group: { i: 4 }, pads: { ints: [1, 1, 1, 1] }, strides: { ints: [2, 1] } })],
  [W('w', [4, 1, 3, 3])], [['x', [1, 4, 7, 8]]], Y);
c('conv_group2_asym_pads_s21', 11, [conv(['x', 'w', 'b'], { group: { i: 2 }, pads: { ints: [0, 1, 0, 1] }, strides: { ints: [2, 1] } })],
  [W('w', [6, 4, 3, 3], 0.3), W('b', [6])], [['x', [1, 8, 7, 7]]], Y);
c('conv_1x3_s12', 11, [conv(['x', 'w'], { strides: { ints: [1, 2] }, pads: { ints: [0, 1, 0, 1] } })],
  [W('w', [5, 3, 1, 3])], [['x', [1, 3, 4, 9]]], Y);
c('conv_dilation2', 11, [conv(['x', 'w'], { dilations: { ints: [2, 2] }, pads: { ints: [2, 2, 2, 2] } })],
  [W('w', [4, 3, 3, 3])], [['x', [1, 3, 8, 7]]], Y);
c('conv_bn_relu', 11, [node('Conv', ['x', 'w'], ['c'], { pads: { ints: [1, 1, 1, 1] } }),
  node('BatchNormalization', ['c', 'bs', 'bb', 'bm', 'bv'], ['n'], { epsilon: { f: 1e-5 } }), node('Relu', ['n'], ['y'])],
  [W('w', [6, 3, 3, 3]), ...bn('b', 6)], [['x', [1, 3, 6, 7]]], Y);
c('conv_hardswish', 11, [node('Conv', ['x', 'w', 'b'], ['c']), node('HardSigmoid', ['c'], ['h'], { alpha: { f: 1 / 6 }, beta: { f: 0.5 } }), node('Mul', ['c', 'h'], ['y'])],
  [W('w', [5, 4, 1, 1], 2), W('b', [5])], [['x', [1, 4, 5, 6], 2]], Y);
c('conv_bn_hardswish6_opset9', 9, [node('Conv', ['x', 'w'], ['c']), node('BatchNormalization', ['c', 'bs', 'bb', 'bm', 'bv'], ['n']),
  node('Add', ['n', 'k3'], ['a']), node('Clip', ['a'], ['cl'], { min: { f: 0 }, max: { f: 6 } }), node('Mul', ['n', 'cl'], ['m']), node('Div', ['m', 'k6'], ['y'])],
  [W('w', [6, 4, 3, 3], 1), ...bn('b', 6), F('k3', [1], [3]), F('k6', [1], [6])], [['x', [1, 4, 6, 6], 2]], Y);
c('conv_hardswish6_opset11', 11, [node('Conv', ['x', 'w'], ['c']), node('Add', ['c', 'k3'], ['a']), node('Clip', ['a', 'lo', 'hi'], ['cl']),
  node('Mul', ['c', 'cl'], ['m']), node('Div', ['m', 'k6'], ['y'])],
  [W('w', [6, 4, 1, 1], 2), F('k3', [1], [3]), F('lo', [], [0]), F('hi', [], [6]), F('k6', [1], [6])], [['x', [1, 4, 3, 5], 2]], Y);
c('conv_swish', 11, [node('Conv', ['x', 'w'], ['c']), node('Sigmoid', ['c'], ['s']), node('Mul', ['s', 'c'], ['y'])],
  [W('w', [4, 3, 1, 1], 2)], [['x', [2, 3, 3, 4], 2]], Y);
c('conv_clip6', 11, [node('Conv', ['x', 'w'], ['c']), node('Clip', ['c', 'lo', 'hi'], ['y'])],
  [W('w', [4, 3, 3, 3], 2), F('lo', [], [0]), F('hi', [], [6])], [['x', [1, 3, 5, 5], 2]], Y);
// the conv output read twice: no BN folding, the plain BN kernel
c('conv_bn_unfolded', 11, [node('Conv', ['x', 'w'], ['c']), node('BatchNormalization', ['c', 'bs', 'bb', 'bm', 'bv'], ['n']), node('Add', ['n', 'c'], ['y'])],
  [W('w', [5, 3, 1, 1]), ...bn('b', 5)], [['x', [1, 3, 4, 6]]], Y);
c('batchnorm', 11, [node('BatchNormalization', ['x', 'bs', 'bb', 'bm', 'bv'], ['y'], { epsilon: { f: 1e-3 } })],
  bn('b', 4), [['x', [2, 4, 3, 5]]], Y);
c('convtranspose_2x2_s2_bias', 11, [node('ConvTranspose', ['x', 'w', 'b'], ['y'], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } })],
  [W('w', [4, 3, 2, 2]), W('b', [3])], [['x', [1, 4, 5, 6]]], Y);
c('convtranspose_3x3_s2_p1_outpad', 11, [node('ConvTranspose', ['x', 'w'], ['y'], { strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] }, output_padding: { ints: [1, 1] } })],
  [W('w', [3, 2, 3, 3])], [['x', [2, 3, 4, 3]]], Y);
c('convtranspose_group2', 11, [node('ConvTranspose', ['x', 'w'], ['y'], { group: { i: 2 }, strides: { ints: [2, 2] } })],
  [W('w', [4, 3, 2, 2])], [['x', [1, 4, 3, 3]]], Y);

// pools, resize
c('maxpool_2x2_s2', 9, [node('MaxPool', ['x'], ['y'], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, pads: { ints: [0, 0, 0, 0] } })], [], [['x', [1, 3, 8, 9]]], Y);
c('maxpool_3x3_s2_p1', 11, [node('MaxPool', ['x'], ['y'], { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] } })], [], [['x', [2, 2, 7, 6]]], Y);
c('maxpool_ceil', 11, [node('MaxPool', ['x'], ['y'], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, ceil_mode: { i: 1 } })], [], [['x', [1, 2, 5, 7]]], Y);
c('avgpool_3x2_s32', 9, [node('AveragePool', ['x'], ['y'], { kernel_shape: { ints: [3, 2] }, strides: { ints: [3, 2] }, pads: { ints: [0, 0, 0, 0] }, count_include_pad: { i: 0 } })], [], [['x', [1, 4, 9, 8]]], Y);
c('avgpool_pad_exclude', 11, [node('AveragePool', ['x'], ['y'], { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } })], [], [['x', [1, 2, 5, 6]]], Y);
c('avgpool_pad_include', 11, [node('AveragePool', ['x'], ['y'], { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] }, count_include_pad: { i: 1 } })], [], [['x', [1, 2, 5, 6]]], Y);
c('globalaveragepool', 11, [node('GlobalAveragePool', ['x'], ['y'])], [], [['x', [2, 5, 7, 3]]], Y);
const nearest = { mode: { s: 'nearest' }, coordinate_transformation_mode: { s: 'asymmetric' }, nearest_mode: { s: 'floor' } };
c('resize_scales_2x', 11, [node('Resize', ['x', 'roi', 'sc'], ['y'], nearest)], [F('roi', [0], []), F('sc', [4], [1, 1, 2, 2])], [['x', [1, 3, 4, 5]]], Y);
c('resize_sizes_odd', 11, [node('Resize', ['x', 'roi', 'sc', 'sz'], ['y'], nearest)], [F('roi', [0], []), F('sc', [0], []), I('sz', [4], [1, 3, 7, 11])], [['x', [1, 3, 4, 5]]], Y);

// matrix products, softmax, reductions
c('matmul_2d_const', 11, [node('MatMul', ['a', 'w'], ['y'])], [W('w', [7, 3])], [['a', [5, 7]]], Y);
c('matmul_3d_const', 9, [node('MatMul', ['a', 'w'], ['y'])], [W('w', [8, 4])], [['a', [2, 6, 8]]], Y);
c('matmul_batched', 11, [node('MatMul', ['a', 'b'], ['y'])], [], [['a', [2, 3, 4, 5]], ['b', [2, 3, 5, 6]]], Y);
c('matmul_bcast_batch', 11, [node('MatMul', ['a', 'b'], ['y'])], [], [['a', [2, 1, 4, 5]], ['b', [3, 5, 2]]], Y);
c('matmul_vec', 11, [node('MatMul', ['a', 'b'], ['y'])], [], [['a', [3, 4, 5]], ['b', [5]]], Y);
c('softmax_axis1_opset9', 9, [node('Softmax', ['x'], ['y'], { axis: { i: 1 } })], [], [['x', [2, 3, 4], 3]], Y);
c('softmax_last_opset9', 9, [node('Softmax', ['x'], ['y'], { axis: { i: 2 } })], [], [['x', [2, 3, 5], 3]], Y);
c('softmax_axis3', 11, [node('Softmax', ['x'], ['y'], { axis: { i: 3 } })], [], [['x', [1, 2, 3, 4], 3]], Y);
c('softmax_axis1_opset13', 13, [node('Softmax', ['x'], ['y'], { axis: { i: 1 } })], [], [['x', [2, 3, 4], 3]], Y);
c('reducemean_last', 9, [node('ReduceMean', ['x'], ['y'], { axes: { ints: [-1] } })], [], [['x', [2, 3, 7]]], Y);
c('reducemean_mid_nokeep', 11, [node('ReduceMean', ['x'], ['y'], { axes: { ints: [1] }, keepdims: { i: 0 } })], [], [['x', [2, 3, 4]]], Y);
c('reducemean_all', 11, [node('ReduceMean', ['x'], ['y'])], [], [['x', [2, 3, 4]]], Y);

// data movement and shapes
c('transpose_0312', 9, [node('Transpose', ['x'], ['y'], { perm: { ints: [0, 3, 1, 2] } })], [], [['x', [2, 3, 4, 5]]], Y);
c('transpose_20314', 9, [node('Transpose', ['x'], ['y'], { perm: { ints: [2, 0, 3, 1, 4] } })], [], [['x', [3, 2, 4, 2, 5]]], Y);
c('transpose_default', 11, [node('Transpose', ['x'], ['y'])], [], [['x', [2, 3, 4]]], Y);
c('squeeze_axis0', 9, [node('Squeeze', ['x'], ['y'], { axes: { ints: [0] } })], [], [['x', [1, 3, 4]]], Y);
c('squeeze_axis2', 11, [node('Squeeze', ['x'], ['y'], { axes: { ints: [2] } })], [], [['x', [2, 3, 1, 5]]], Y);
c('squeeze_all', 11, [node('Squeeze', ['x'], ['y'])], [], [['x', [1, 3, 1, 2]]], Y);
c('concat_axis1', 11, [node('Concat', ['a', 'b', 'c'], ['y'], { axis: { i: 1 } })], [], [['a', [1, 2, 3, 4]], ['b', [1, 3, 3, 4]], ['c', [1, 1, 3, 4]]], Y);
c('concat_neg_axis', 11, [node('Concat', ['a', 'b'], ['y'], { axis: { i: -1 } })], [], [['a', [2, 3, 2]], ['b', [2, 3, 5]]], Y);
c('slice_attrs_opset9', 9, [node('Slice', ['x'], ['y'], { starts: { ints: [1] }, ends: { ints: [4] }, axes: { ints: [0] } })], [], [['x', [6, 5]]], Y);
c('slice_inputs_steps', 11, [node('Slice', ['x', 'st', 'en', 'ax', 'sp'], ['y'])],
  [I('st', [2], [-1, 1]), I('en', [2], [-100, 1000]), I('ax', [2], [1, 2]), I('sp', [2], [-2, 2])], [['x', [2, 5, 7]]], Y);
// paddle2onnx's reshape: Shape -> Cast(INT32) -> Slice -> Cast(INT64) -> Concat with a constant -> Reshape;
// the shape itself is an output too (int64, written as float)
c('shape_slice_concat_reshape', 9, [node('Shape', ['x'], ['s']), node('Cast', ['s'], ['s32'], { to: { i: 6 } }),
  node('Slice', ['s32'], ['s2'], { starts: { ints: [0] }, ends: { ints: [2] }, axes: { ints: [0] } }),
  node('Cast', ['s2'], ['s64'], { to: { i: 7 } }), node('Cast', ['m1'], ['m1c'], { to: { i: 7 } }),
  node('Concat', ['s64', 'm1c'], ['shp'], { axis: { i: 0 } }), node('Reshape', ['x', 'shp'], ['y'])],
  [I('m1', [1], [-1])], [['x', [2, 3, 4, 5], 1, ['N', 3, 'H', 'W']]], [['y', FLOAT], ['s', INT64]]);
c('shape_arith_reshape', 11, [node('Shape', ['x'], ['s']), node('Slice', ['s', 'z', 'o', 'z'], ['n']),
  node('Slice', ['s', 'two', 'three', 'z'], ['w']), node('Div', ['w', 'two'], ['w2']),
  node('Concat', ['n', 'w2', 'm1'], ['shp'], { axis: { i: 0 } }), node('Reshape', ['x', 'shp'], ['y'])],
  [I('z', [1], [0]), I('o', [1], [1]), I('two', [1], [2]), I('three', [1], [3]), I('m1', [1], [-1])], [['x', [2, 3, 4], 1, ['N', 3, 'W']]], Y);
c('reshape_zero_neg', 11, [node('Reshape', ['x', 'shp'], ['y'])], [I('shp', [3], [0, -1, 2])], [['x', [3, 4, 2]]], Y);
c('cast_shape_to_float', 11, [node('Shape', ['x'], ['s']), node('Cast', ['s'], ['sf'], { to: { i: 1 } }), node('Mul', ['x', 'sf'], ['y'])],
  [], [['x', [2, 3, 4, 4]]], Y);

const list = [];
for (const k of cases) {
  const inputs = k.inputs.map(([n, d, kind, decl]) => valueInfo(n, FLOAT, decl || d));
  const outputs = k.outputs.map(([n, e]) => valueInfo(n, e, null));
  const bytes = model(k.opset, k.nodes, k.inits, inputs, outputs);
  const file = path.join(out, `${k.name}.onnx`);
  fs.writeFileSync(file, bytes);
  const sess = await ort.InferenceSession.create(file, { executionProviders: ['cpu'], graphOptimizationLevel: 'disabled', intraOpNumThreads: 1 });
  const feeds = {};
  k.inputs.forEach(([n, d, kind], i) => {
    const x = rand(prod(d), kind === undefined ? 1 : kind);
    feeds[n] = new ort.Tensor('float32', x, d);
    npySave(path.join(out, `${k.name}.in${i}.npy`), d, x);
  });
  const res = await sess.run(feeds);
  k.outputs.forEach(([n], i) => {
    const t = res[n];
    const data = t.type === 'int64' ? Array.from(t.data, (v) => Number(v)) : t.data;
    npySave(path.join(out, `${k.name}.out${i}.npy`), t.dims, data);
  });
  list.push(`${k.name} ${k.inputs.length} ${k.outputs.length}`);
  console.log(`${k.name}: ${k.outputs.map(([n]) => res[n].dims.join('x')).join(', ')}`);
}
fs.writeFileSync(path.join(out, 'cases.txt'), list.join('\n') + '\n');
