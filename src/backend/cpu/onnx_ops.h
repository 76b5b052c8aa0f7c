/* onnx_ops.h — what the ONNX executor's files share (src/backend/cpu/onnx_*.c): the tensor of
 * a run, a step of the schedule, and the ops. Private to the executor; the API is
 * backend/onnx_exec.h.
 *
 * An op is one function ox_op_X(ctx, step, in, out, dry): with dry set it only infers the
 * output's type and shape from the inputs' (and the scratch floats it will need); without, it
 * computes into out->p, which the scheduler has allocated. Inputs that were known before the run
 * (constants, shapes) have their data in dry mode too; ops that read shape-like inputs (Reshape's
 * shape, Clip's bounds, Resize's scales) need that data then and say UNSUPPORTED otherwise.
 * Errors are one line naming the node (ox_fail). The kernels (onnx_kernels.c) are plain loops
 * over C-order fp32 arrays plus OpenBLAS sgemm; no op keeps state between calls.
 */
#ifndef FR_BACKEND_CPU_ONNX_OPS_H
#define FR_BACKEND_CPU_ONNX_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu.h"
#include "backend/onnx_exec.h"

/* A tensor of a run: fp32 or int64, C order. */
typedef struct ox_t {
    fr_onnx_dtype dt;
    int rank;
    int64_t d[FR_ONNX_MAX_RANK];
    int64_t n;  /* product of d (1 for a scalar) */
    void *p;    /* n floats or n int64; NULL while only the shape is known */
} ox_t;

/* The elementwise nodes fused into the op that produces their input (Conv, ConvTranspose,
 * BatchNormalization): a short program run on each output row after the bias, one instruction
 * at a time over chunks of the row, with one saved copy of the value for x * f(x). Every
 * instruction is the unfused node's arithmetic in the same order, so fusing changes no bit. */
typedef enum ox_ep_op {
    OX_EP_MULK,     /* v * a */
    OX_EP_ADDK,     /* v + a */
    OX_EP_SUBK,     /* v - a */
    OX_EP_RSUBK,    /* a - v */
    OX_EP_DIVK,     /* v / a */
    OX_EP_RDIVK,    /* a / v */
    OX_EP_RELU,     /* max(v, 0) */
    OX_EP_CLIP,     /* min(max(v, a), b) */
    OX_EP_SIGMOID,  /* 1 / (1 + exp(-v)) */
    OX_EP_HSIG,     /* max(0, min(1, a*v + b)) */
    OX_EP_SAVE,     /* s = v */
    OX_EP_MULSAVED, /* v = s * v */
} ox_ep_op;

#define OX_EP_MAX 24 /* instructions of one epilogue */

typedef struct ox_ep_ins {
    ox_ep_op op;
    float a, b;
} ox_ep_ins;

typedef struct ox_epi {
    int n;                     /* 0: nothing fused */
    ox_ep_ins ins[OX_EP_MAX];
} ox_epi;

/* One step of the schedule: a node of the graph, possibly with the nodes fused into it. */
typedef struct ox_step {
    int node;        /* index into m->nodes */
    int out;         /* the value it writes (the last fused node's output) */
    int skip;        /* 1: folded at session creation or fused into another step */
    ox_epi epi;      /* fused elementwise nodes */
    float *w, *b;    /* Conv: weights and bias with a batch normalisation folded in (owned);
                        NULL: the node's own inputs */
    int64_t wdims[4]; /* Conv: (M, C/group, kh, kw) of w when w is set */
} ox_step;

/* What an op sees of the session. */
typedef struct ox_ctx {
    const fr_onnx_model *m;
    fr_pool *pool;   /* NULL: one thread */
    fr_err *err;
    float *scratch;  /* the step's scratch (the floats its dry call asked for) */
} ox_ctx;

typedef int (*ox_op_fn)(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                        int64_t *scratch, int dry);

/* The op function for op, or NULL for one the executor handles itself (Constant, If). An op
 * with several outputs (LSTM) gets out[0 .. n_out). */
ox_op_fn ox_op_get(fr_onnx_op op);

/* The prepared steps of s (one per node) and its constants (one per value), owned by s. */
const ox_step *ox_sess_steps(const fr_onnx_sess *s, const ox_t **konst);

/* Sets err to "<model>: node <name> (<Op>): <message>" with code. Returns -1. */
int ox_fail(ox_ctx *c, const fr_onnx_node *n, fr_err_code code, const char *fmt, ...)
    FR_PRINTF(4, 5);

/* Sets t's shape (rank r, dims d) and n; -1 when n would pass FR_ONNX_MAX_ELEMS. */
int ox_set_shape(ox_t *t, fr_onnx_dtype dt, int r, const int64_t *d);

/* Attribute helpers: the value of the attribute called name of n, or def when absent. */
int64_t ox_attr_i(const fr_onnx_node *n, const char *name, int64_t def);
float ox_attr_f(const fr_onnx_node *n, const char *name, float def);
const char *ox_attr_s(const fr_onnx_node *n, const char *name, const char *def);
/* The INTS attribute called name (*cnt set), or NULL (*cnt 0). */
const int64_t *ox_attr_ints(const fr_onnx_node *n, const char *name, int *cnt);

/* Runs the epilogue e on x[0..n) in place. */
void ox_epi_apply(const ox_epi *e, float *x, int64_t n);

/* min(max(v, lo), hi) and max(v, 0) as the executor computes them everywhere (fused or not). */
static inline float ox_clamp(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}
static inline float ox_relu(float v) { return v > 0 ? v : 0; }

/* ---- kernels (onnx_kernels.c), fp32, C order ---- */

/* Convolution of x (N, C, H, W) with w (M, C/g, kh, kw), bias (M) or NULL, into y (N, M, OH, OW);
 * p: pads (top, left, bottom, right), s strides, dl dilations; epi run after the bias.
 * col: scratch of ox_conv_scratch floats. Dense groups go through im2col and sgemm, depthwise
 * groups (C/g == 1 and M/g == 1) through a direct loop split over the pool. */
typedef struct ox_conv {
    int64_t N, C, H, W, M, kh, kw, OH, OW, g;
    int64_t pt, pl, sh, sw, dh, dw;
} ox_conv;
int64_t ox_conv_scratch(const ox_conv *cv);
void ox_conv_run(fr_pool *pool, const ox_conv *cv, const float *x, const float *w,
                 const float *bias, float *y, float *col, const ox_epi *epi);

/* Transposed convolution: x (N, C, H, W), w (C, M/g, kh, kw), bias (M) or NULL, y (N, M, OH, OW)
 * with OH = (H-1)*sh - pt - pb + dh*(kh-1) + 1 + output padding. col: ox_convt_scratch floats. */
int64_t ox_convt_scratch(const ox_conv *cv);
void ox_convt_run(const ox_conv *cv, const float *x, const float *w, const float *bias, float *y,
                  float *col);

/* LSTM (onnx_lstm.c): x (S, B, I), w (4H, I), r (4H, H), b (8H) or NULL, h0 / c0 (B, H) or NULL
 * (zeros); y (S, B, H), yh / yc (B, H), each NULL when not wanted; scratch of 6 B H floats. */
typedef struct ox_lstm {
    int64_t seq, batch, n_in, hid; /* S, B, I, H */
} ox_lstm;
void ox_lstm_run(const ox_lstm *L, const float *x, const float *w, const float *r,
                 const float *b, const float *h0, const float *c0, float *y, float *yh,
                 float *yc, float *scratch);

/* y (M, N) = a (M, K) . b (K, N), row-major, through cblas_sgemm. */
void ox_sgemm(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y);

#endif
