/* onnx_cuda.h — the ONNX executor on one CUDA device: the run contract of backend/onnx_exec.h
 * (fp32 host arrays in, fp32 host arrays out, shapes inferred per run), computed on the GPU.
 *
 *   fr_err err = {0};
 *   fr_onnx_model *m = fr_onnx_model_load("models/ppocr/ch_PP-OCRv4_rec_infer.onnx", &err);
 *   fr_onnx_cuda_opts o = fr_onnx_cuda_default_opts();            // TF32, graphs on
 *   fr_onnx_cuda_sess *s = fr_onnx_cuda_sess_new(m, 0, &o, &err);  // device 0; m outlives s
 *   fr_onnx_arr in = {.rank = 4, .dims = {64, 3, 48, 320}, .data = x}, out;
 *   if (fr_onnx_cuda_sess_run(s, &in, 1, &out, 1, NULL, &err)) { ... err.code ... }
 *   ... out.data (64, 40, 6625), pinned host memory, valid until the next run on s ...
 *   fr_onnx_cuda_sess_free(s);
 *
 * Preparation is the CPU executor's (a CPU session made inside: constant folding, BN folded
 * into Conv, fused elementwise epilogues); the device runs its schedule. Per distinct input shape a plan
 * is made once and cached (at most opts.max_plans, least recently used evicted): the shapes of
 * every value, the shape subgraphs computed on the host, one device arena with an offset per
 * tensor (tensors whose lifetimes do not overlap share bytes; Reshape / Squeeze alias their
 * input), the cuDNN descriptors and the algorithm found for each convolution, pinned staging
 * for inputs and outputs. The second run of a plan captures the whole run (input copies, every
 * kernel, output copies) into a CUDA graph, later runs replay it; callers bucket shapes (det
 * sides rounded to 32, rec widths in buckets) so a few graphs serve every page.
 *
 * Convolutions: cuDNN, NCHW fp32 (cudnnConvolutionForward, ConvTranspose as
 * cudnnConvolutionBackwardData), the algorithm chosen by cudnnFind at planning; bias and the
 * fused elementwise program in one epilogue kernel. opts.tf32 lets cuDNN and cuBLAS (MatMul) use TF32
 * tensor cores (10-bit mantissa products, fp32 sums); with it off, only fp32 FMA kernels.
 * Accuracy against onnxruntime (tests/gpu/onnx_check.c, docs/ONNX.md): fp32 within the CPU
 * executor's tolerances, TF32 within rel L2 1e-2 (det: max abs 2e-2 on probabilities).
 *
 * Errors: as onnx_exec.h (BAD_REQUEST for inputs the graph does not take, TOO_LARGE over
 * opts.max_bytes of device work memory, checked at planning, UNSUPPORTED for a step the device
 * does not run: an int64 tensor computed from data, asymmetric ConvTranspose pads); CUDA and
 * cuDNN failures inside a planned run are broken invariants and abort with file:line.
 * cancel is polled before the run and, without a graph, between steps.
 *
 * Threads: one session runs one graph at a time (callers serialise runs on it); sessions are
 * independent (each has its stream, cuDNN and cuBLAS handles and its own weights on the device),
 * so several host threads with a session each keep many pages in flight on one GPU.
 */
#ifndef FR_BACKEND_CUDA_ONNX_CUDA_H
#define FR_BACKEND_CUDA_ONNX_CUDA_H

#include <stddef.h>

#include "backend/onnx_exec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fr_onnx_cuda_opts {
    size_t max_bytes; /* device work memory of one plan (arena + cuDNN workspace); 0: 8 GiB */
    int tf32;         /* 1: TF32 tensor cores in cuDNN and cuBLAS; 0: fp32 FMA only */
    int graphs;       /* 1: capture a CUDA graph on the second run of a plan and replay it */
    int max_plans;    /* plans (input shapes) kept; <= 0: 16 */
    int argmax_last;  /* 1: every device output of rank >= 2 comes back reduced over its last
                         axis, on the device: dims (..., 2), [index as a float, value] of the
                         first largest element (what a greedy CTC decoder reads of (N, T, C)
                         class probabilities: 2 floats a step copied instead of C); 0 (default)
                         the outputs whole */
    int poison;       /* checks: each step's output filled with NaN bytes before the step, so
                         an element a kernel leaves unwritten shows (0 in production) */
} fr_onnx_cuda_opts;

typedef struct fr_onnx_cuda_sess fr_onnx_cuda_sess;

fr_onnx_cuda_opts fr_onnx_cuda_default_opts(void);

/* Prepares m on CUDA device `device` (weights uploaded). m is borrowed and must outlive the
 * session. NULL with err set: an op the executor does not run (UNSUPPORTED), no such device or
 * out of device memory (INTERNAL). */
fr_onnx_cuda_sess *fr_onnx_cuda_sess_new(const fr_onnx_model *m, int device,
                                         const fr_onnx_cuda_opts *opts, fr_err *err);

/* Runs the graph as fr_onnx_sess_run does; out[i].data is pinned host memory of the session,
 * valid until the next run or free. 0, or -1 with err set. */
int fr_onnx_cuda_sess_run(fr_onnx_cuda_sess *s, const fr_onnx_arr *in, int n_in,
                          fr_onnx_arr *out, int n_out, const fr_cancel *cancel, fr_err *err);

/* How the last run went: 1 replayed a CUDA graph, 0 ran step by step. */
int fr_onnx_cuda_sess_last_graphed(const fr_onnx_cuda_sess *s);

void fr_onnx_cuda_sess_free(fr_onnx_cuda_sess *s);

#ifdef __cplusplus
}
#endif

#endif
