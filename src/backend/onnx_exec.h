/* onnx_exec.h — running a loaded ONNX graph (model/onnx/onnx.h): a session that owns the
 * graph's prepared weights and its work memory, and runs it on fp32 inputs.
 *
 *   fr_err err = {0};
 *   fr_onnx_model *m = fr_onnx_model_load("models/ppocr/ch_PP-OCRv4_det_infer.onnx", &err);
 *   fr_onnx_sess_opts o = fr_onnx_sess_default_opts();        // threads, memory cap
 *   fr_onnx_sess *s = fr_onnx_sess_new(m, &o, &err);          // m must outlive s
 *   fr_onnx_arr in = {.rank = 4, .dims = {1, 3, 960, 736}, .data = x};
 *   fr_onnx_arr out;
 *   if (fr_onnx_sess_run(s, &in, 1, &out, 1, NULL, &err)) { ... err.code says why ... }
 *   ... out.data (1, 1, 960, 736) is valid until the next run or fr_onnx_sess_free ...
 *   fr_onnx_sess_free(s); fr_onnx_model_free(m);
 *
 * Inputs and outputs are the graph's, in the model's order (m->inputs, m->outputs), fp32 at the
 * boundary (int64 tensors live inside the graph: shapes and their arithmetic; small int64 control
 * inputs are allowed, see fr_onnx_arr). If nodes run the branch their condition selects; the
 * condition must be known at planning (a constant, a shape, an int64 input), else UNSUPPORTED. Shapes are
 * inferred per run from the inputs' dimensions, so one session serves every input size the graph
 * accepts (the det model's H and W, the rec model's batch and width).
 *
 * Bounds: an input whose rank or fixed dimensions disagree with the graph's declaration is
 * BAD_REQUEST; an intermediate tensor over FR_ONNX_MAX_ELEMS elements, or a run needing more
 * than opts.max_bytes of work memory, is TOO_LARGE (checked before anything is computed); the
 * cancel check is polled between nodes and a stop returns its code (fr_cancel_reason_code).
 * An op the executor meets with attributes it does not implement is UNSUPPORTED, naming the node.
 *
 * Threads: a session runs one graph at a time (the caller serialises runs on it); independent
 * sessions on the same model may run at once. Inside a run, opts.n_threads threads share the
 * large ops (convolution and matrix products through OpenBLAS, elementwise loops by rows).
 */
#ifndef FR_BACKEND_ONNX_EXEC_H
#define FR_BACKEND_ONNX_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "model/onnx/onnx.h"

/* An fp32 array at the graph boundary, C order. An int64 graph input (a control value such as
 * Silero VAD's sample rate, at most FR_ONNX_MAX_I64_INPUT elements) comes in idata instead; its
 * values are known to the planner, so an If on it selects a branch before the run. */
typedef struct fr_onnx_arr {
    int rank;
    int64_t dims[FR_ONNX_MAX_RANK];
    float *data; /* inputs: the caller's; outputs: the session's, valid until the next run */
    const int64_t *idata; /* int64 inputs only (data unused then) */
} fr_onnx_arr;

#define FR_ONNX_MAX_I64_INPUT 64

typedef struct fr_onnx_sess_opts {
    int n_threads;    /* threads for one run; <= 0: fr_n_cores() */
    size_t max_bytes; /* work memory of one run (activations), 0: 2 GiB */
} fr_onnx_sess_opts;

typedef struct fr_onnx_sess fr_onnx_sess;

fr_onnx_sess_opts fr_onnx_sess_default_opts(void);

/* Prepares m for running (constant folding of the shape-independent parts, weights laid out for
 * the kernels, batch normalisation folded into the convolution before it). m is borrowed and must
 * outlive the session. NULL with err set (an op or attribute the executor does not run:
 * UNSUPPORTED; out of memory). */
fr_onnx_sess *fr_onnx_sess_new(const fr_onnx_model *m, const fr_onnx_sess_opts *opts, fr_err *err);

/* Runs the graph on n_in inputs (== m->n_inputs) and fills n_out outputs (== m->n_outputs) with
 * their shapes and data. cancel may be NULL. 0, or -1 with err set (see Bounds above). */
int fr_onnx_sess_run(fr_onnx_sess *s, const fr_onnx_arr *in, int n_in, fr_onnx_arr *out,
                     int n_out, const fr_cancel *cancel, fr_err *err);

void fr_onnx_sess_free(fr_onnx_sess *s);

#endif
