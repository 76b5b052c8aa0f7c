/* onnx_ops.c — the ops of the ONNX executor (onnx_ops.h): shape inference and a plain fp32 /
 * int64 implementation of each op of docs/ONNX.md, with the attributes the ONNX specification
 * gives them at the opsets PP-OCR uses (9 and 11; the inputs that later opsets moved attributes
 * into are read too where it costs one branch).
 *
 * Each op is a function of (ctx, step, inputs, output, scratch, dry): dry infers the output's
 * type and shape only; otherwise it computes. Broadcasting follows numpy: shapes aligned on the
 * right, a dimension of 1 stretches. The elementwise loop coalesces adjacent dimensions that
 * broadcast alike, so the inner loop runs over the longest contiguous run. Int64 tensors are
 * shapes and their arithmetic (Shape, Cast, Slice, Concat, Add/Sub/Mul/Div, Squeeze, Reshape).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/onnx_ops.h"

/* ---------------------------------------------------------------- helpers */

int ox_fail(ox_ctx *c, const fr_onnx_node *n, fr_err_code code, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fr_err_setc(c->err, code, "%s: node %s (%s): %s", c->m->path, n->name,
                fr_onnx_op_name(n->op), msg);
    return -1;
}

int ox_set_shape(ox_t *t, fr_onnx_dtype dt, int r, const int64_t *d) {
    t->dt = dt;
    t->rank = r;
    int64_t n = 1;
    for (int i = 0; i < r; i++) {
        t->d[i] = d[i];
        if (d[i] < 0) return -1;
        if (d[i] && n > FR_ONNX_MAX_ELEMS / d[i]) return -1;
        n *= d[i];
    }
    for (int i = r; i < FR_ONNX_MAX_RANK; i++) t->d[i] = 0;
    t->n = n;
    return n > FR_ONNX_MAX_ELEMS ? -1 : 0;
}

int64_t ox_attr_i(const fr_onnx_node *n, const char *name, int64_t def) {
    const fr_onnx_attr *a = fr_onnx_node_attr(n, name);
    return a && a->type == FR_ONNX_ATTR_INT ? a->i : def;
}
float ox_attr_f(const fr_onnx_node *n, const char *name, float def) {
    const fr_onnx_attr *a = fr_onnx_node_attr(n, name);
    if (a && a->type == FR_ONNX_ATTR_FLOAT) return a->f;
    if (a && a->type == FR_ONNX_ATTR_INT) return (float)a->i;
    return def;
}
const char *ox_attr_s(const fr_onnx_node *n, const char *name, const char *def) {
    const fr_onnx_attr *a = fr_onnx_node_attr(n, name);
    return a && a->type == FR_ONNX_ATTR_STRING ? a->s : def;
}
const int64_t *ox_attr_ints(const fr_onnx_node *n, const char *name, int *cnt) {
    const fr_onnx_attr *a = fr_onnx_node_attr(n, name);
    if (!a || a->type != FR_ONNX_ATTR_INTS) {
        *cnt = 0;
        return NULL;
    }
    *cnt = a->n;
    return a->ints;
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

#define OX_EP_CHUNK 256

void ox_epi_apply(const ox_epi *e, float *x, int64_t n) {
    if (!e || e->n == 0) return;
    float sv[OX_EP_CHUNK];
    for (int64_t off = 0; off < n; off += OX_EP_CHUNK) {
        float *v = x + off;
        const int m = (int)FR_MIN((int64_t)OX_EP_CHUNK, n - off);
        for (int k = 0; k < e->n; k++) {
            const float a = e->ins[k].a, b = e->ins[k].b;
            switch (e->ins[k].op) {
            case OX_EP_MULK: for (int i = 0; i < m; i++) v[i] = v[i] * a; break;
            case OX_EP_ADDK: for (int i = 0; i < m; i++) v[i] = v[i] + a; break;
            case OX_EP_SUBK: for (int i = 0; i < m; i++) v[i] = v[i] - a; break;
            case OX_EP_RSUBK: for (int i = 0; i < m; i++) v[i] = a - v[i]; break;
            case OX_EP_DIVK: for (int i = 0; i < m; i++) v[i] = v[i] / a; break;
            case OX_EP_RDIVK: for (int i = 0; i < m; i++) v[i] = a / v[i]; break;
            case OX_EP_RELU: for (int i = 0; i < m; i++) v[i] = ox_relu(v[i]); break;
            case OX_EP_CLIP: for (int i = 0; i < m; i++) v[i] = ox_clamp(v[i], a, b); break;
            case OX_EP_SIGMOID: for (int i = 0; i < m; i++) v[i] = sigmoidf(v[i]); break;
            case OX_EP_HSIG: for (int i = 0; i < m; i++) v[i] = ox_clamp(a * v[i] + b, 0.0f, 1.0f); break;
            case OX_EP_SAVE: memcpy(sv, v, (size_t)m * sizeof *v); break;
            case OX_EP_MULSAVED: for (int i = 0; i < m; i++) v[i] = sv[i] * v[i]; break;
            }
        }
    }
}

static const fr_onnx_node *NODE(ox_ctx *c, const ox_step *st) { return &c->m->nodes[st->node]; }

/* An axis in [-r, r) made non-negative; -1 when out of range. */
static int norm_axis(int64_t a, int r) {
    if (a < 0) a += r;
    return a >= 0 && a < r ? (int)a : -1;
}

static int need(ox_ctx *c, const fr_onnx_node *n, ox_t *const *in, int n_in, int k) {
    for (int i = 0; i < k; i++)
        if (i >= n_in || !in[i])
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input %d is missing", i);
    return 0;
}
static int need_f32(ox_ctx *c, const fr_onnx_node *n, const ox_t *t, int i) {
    if (t->dt != FR_ONNX_DTYPE_F32)
        return ox_fail(c, n, FR_ERR_UNSUPPORTED, "input %d is int64, the op takes float", i);
    return 0;
}
static int shape_ok(ox_ctx *c, const fr_onnx_node *n, ox_t *out, fr_onnx_dtype dt, int r,
                    const int64_t *d) {
    if (ox_set_shape(out, dt, r, d))
        return ox_fail(c, n, FR_ERR_TOO_LARGE, "output over %lld elements or a negative dimension",
                       (long long)FR_ONNX_MAX_ELEMS);
    return 0;
}

/* Reads a small known int64 (or float) input into v (at most cap values); -1 when its data is
 * not known before the run. */
static int known_ints(ox_ctx *c, const fr_onnx_node *n, const ox_t *t, int64_t *v, int cap,
                      int *cnt, const char *what) {
    if (!t->p)
        return ox_fail(c, n, FR_ERR_UNSUPPORTED, "%s is computed from data, not known before the run",
                       what);
    if (t->n > cap) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "%s has %lld values", what, (long long)t->n);
    for (int64_t i = 0; i < t->n; i++)
        v[i] = t->dt == FR_ONNX_DTYPE_I64 ? ((const int64_t *)t->p)[i]
                                          : (int64_t)((const float *)t->p)[i];
    *cnt = (int)t->n;
    return 0;
}

/* ---------------------------------------------------------------- elementwise */

/* Broadcast shape of a and b into out; -1 when they do not broadcast. */
static int bcast_shape(const ox_t *a, const ox_t *b, int *r, int64_t *d) {
    *r = FR_MAX(a->rank, b->rank);
    for (int i = 0; i < *r; i++) {
        const int ia = i - (*r - a->rank), ib = i - (*r - b->rank);
        const int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        d[i] = da == 1 ? db : da;
    }
    return 0;
}

/* Strides of t aligned to the output shape (r, d); 0 where t broadcasts. */
static void bcast_strides(const ox_t *t, int r, const int64_t *d, int64_t *st) {
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        const int it = i - (r - t->rank);
        const int64_t dt = it >= 0 ? t->d[it] : 1;
        st[i] = (dt == 1 && d[i] != 1) ? 0 : s;
        s *= dt;
    }
}

typedef enum bin_op { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW } bin_op;

/* A loop over the output with up to two broadcast inputs: coalesced dims, inner run. */
typedef struct bin_iter {
    int r;
    int64_t d[FR_ONNX_MAX_RANK], sa[FR_ONNX_MAX_RANK], sb[FR_ONNX_MAX_RANK];
} bin_iter;

static void bin_iter_init(bin_iter *it, const ox_t *a, const ox_t *b, const ox_t *out) {
    int64_t sa[FR_ONNX_MAX_RANK], sb[FR_ONNX_MAX_RANK];
    bcast_strides(a, out->rank, out->d, sa);
    bcast_strides(b, out->rank, out->d, sb);
    int r = 0;
    for (int i = 0; i < out->rank; i++) {
        if (out->d[i] == 1) continue;
        if (r > 0) {
            /* merge with the previous kept dim when both inputs step alike across the seam */
            const int j = r - 1;
            const int ca = (sa[i] == 0 && it->sa[j] == 0) || (sa[i] != 0 && it->sa[j] == sa[i] * out->d[i]);
            const int cb = (sb[i] == 0 && it->sb[j] == 0) || (sb[i] != 0 && it->sb[j] == sb[i] * out->d[i]);
            if (ca && cb) {
                it->d[j] *= out->d[i];
                it->sa[j] = sa[i];
                it->sb[j] = sb[i];
                continue;
            }
        }
        it->d[r] = out->d[i];
        it->sa[r] = sa[i];
        it->sb[r] = sb[i];
        r++;
    }
    if (r == 0) {
        it->d[0] = 1;
        it->sa[0] = it->sb[0] = 0;
        r = 1;
    }
    it->r = r;
}

#define BIN_LOOP(T, EXPR)                                                                  \
    do {                                                                                   \
        const T *A = a->p, *B = b->p;                                                      \
        T *Y = out->p;                                                                     \
        const int r = it.r;                                                                \
        const int64_t inner = it.d[r - 1], ia = it.sa[r - 1], ib = it.sb[r - 1];          \
        const int64_t outer = out->n / (inner ? inner : 1);                                \
        int64_t idx[FR_ONNX_MAX_RANK] = {0}, oa = 0, ob = 0;                               \
        for (int64_t o = 0; o < outer && inner; o++) {                                     \
            const T *pa = A + oa, *pb = B + ob;                                            \
            T *py = Y + o * inner;                                                         \
            if (ia == 1 && ib == 1) {                                                      \
                for (int64_t k = 0; k < inner; k++) {                                      \
                    const T x = pa[k], y = pb[k];                                          \
                    py[k] = (EXPR);                                                        \
                }                                                                          \
            } else if (ia == 1 && ib == 0) {                                               \
                const T y = pb[0];                                                         \
                for (int64_t k = 0; k < inner; k++) {                                      \
                    const T x = pa[k];                                                     \
                    py[k] = (EXPR);                                                        \
                }                                                                          \
            } else if (ia == 0 && ib == 1) {                                               \
                const T x = pa[0];                                                         \
                for (int64_t k = 0; k < inner; k++) {                                      \
                    const T y = pb[k];                                                     \
                    py[k] = (EXPR);                                                        \
                }                                                                          \
            } else {                                                                       \
                for (int64_t k = 0; k < inner; k++) {                                      \
                    const T x = pa[k * ia], y = pb[k * ib];                                \
                    py[k] = (EXPR);                                                        \
                }                                                                          \
            }                                                                              \
            for (int j = r - 2; j >= 0; j--) {                                             \
                idx[j]++;                                                                  \
                oa += it.sa[j];                                                            \
                ob += it.sb[j];                                                            \
                if (idx[j] < it.d[j]) break;                                               \
                oa -= it.sa[j] * it.d[j];                                                  \
                ob -= it.sb[j] * it.d[j];                                                  \
                idx[j] = 0;                                                                \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* int64 shape arithmetic wraps (two's complement) instead of overflowing; x / 0 is 0 */
static int64_t iadd(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static int64_t isub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static int64_t imul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }
static int64_t idiv(int64_t x, int64_t y) {
    if (y == 0) return 0;
    if (y == -1) return (int64_t)(0 - (uint64_t)x);
    return x / y;
}

static int op_binary(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                     int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *a = in[0], *b = in[1];
    bin_op op = n->op == FR_ONNX_OP_Add ? BIN_ADD : n->op == FR_ONNX_OP_Sub ? BIN_SUB
              : n->op == FR_ONNX_OP_Mul ? BIN_MUL : n->op == FR_ONNX_OP_Div ? BIN_DIV : BIN_POW;
    if (dry) {
        if (a->dt != b->dt)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "inputs of different element types");
        if (op == BIN_POW && a->dt != FR_ONNX_DTYPE_F32) return need_f32(c, n, a, 0);
        int r;
        int64_t d[FR_ONNX_MAX_RANK];
        if (bcast_shape(a, b, &r, d))
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "shapes do not broadcast");
        return shape_ok(c, n, out, a->dt, r, d);
    }
    bin_iter it;
    bin_iter_init(&it, a, b, out);
    if (a->dt == FR_ONNX_DTYPE_I64) {
        switch (op) {
        case BIN_ADD: BIN_LOOP(int64_t, iadd(x, y)); break;
        case BIN_SUB: BIN_LOOP(int64_t, isub(x, y)); break;
        case BIN_MUL: BIN_LOOP(int64_t, imul(x, y)); break;
        default: BIN_LOOP(int64_t, idiv(x, y)); break;
        }
        return 0;
    }
    switch (op) {
    case BIN_ADD: BIN_LOOP(float, x + y); break;
    case BIN_SUB: BIN_LOOP(float, x - y); break;
    case BIN_MUL: BIN_LOOP(float, x * y); break;
    case BIN_DIV: BIN_LOOP(float, x / y); break;
    case BIN_POW: BIN_LOOP(float, y == 2.0f ? x * x : powf(x, y)); break;
    }
    return 0;
}

/* Relu, Sigmoid, Sqrt, Log, Neg, HardSigmoid, Clip: one float in, same shape out. */
static int op_unary(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                    int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1) || need_f32(c, n, in[0], 0)) return -1;
    float lo = -INFINITY, hi = INFINITY;
    if (n->op == FR_ONNX_OP_Clip) {
        if (c->m->opset < 11) {
            lo = ox_attr_f(n, "min", -INFINITY);
            hi = ox_attr_f(n, "max", INFINITY);
        } else {
            for (int k = 1; k <= 2; k++) {
                if (k >= n_in || !in[k]) continue;
                if (!in[k]->p || in[k]->n != 1 || in[k]->dt != FR_ONNX_DTYPE_F32)
                    return ox_fail(c, n, FR_ERR_UNSUPPORTED,
                                   "min / max must be float scalars known before the run");
                *(k == 1 ? &lo : &hi) = *(const float *)in[k]->p;
            }
        }
    }
    if (dry) return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, in[0]->rank, in[0]->d);
    const float *x = in[0]->p;
    float *y = out->p;
    const int64_t N = out->n;
    switch (n->op) {
    case FR_ONNX_OP_Relu:
        for (int64_t i = 0; i < N; i++) y[i] = ox_relu(x[i]);
        break;
    case FR_ONNX_OP_Sigmoid:
        for (int64_t i = 0; i < N; i++) y[i] = sigmoidf(x[i]);
        break;
    case FR_ONNX_OP_Sqrt:
        for (int64_t i = 0; i < N; i++) y[i] = sqrtf(x[i]);
        break;
    case FR_ONNX_OP_Log:
        for (int64_t i = 0; i < N; i++) y[i] = logf(x[i]);
        break;
    case FR_ONNX_OP_Neg:
        for (int64_t i = 0; i < N; i++) y[i] = -x[i];
        break;
    case FR_ONNX_OP_HardSigmoid: {
        const float al = ox_attr_f(n, "alpha", 0.2f), be = ox_attr_f(n, "beta", 0.5f);
        for (int64_t i = 0; i < N; i++) y[i] = ox_clamp(al * x[i] + be, 0.0f, 1.0f);
        break;
    }
    default: /* Clip */
        for (int64_t i = 0; i < N; i++) y[i] = ox_clamp(x[i], lo, hi);
        break;
    }
    return 0;
}

/* ---------------------------------------------------------------- convolution */

/* A 1-D Conv's attributes (kernel_shape, strides, dilations of 1 value; pads of 2) as the 2-D
 * ones of a convolution over (N, C, 1, L): 0, or -1 when a count is not the 1-D one. */
static int conv_attrs_1d(ox_ctx *c, const fr_onnx_node *n, const int64_t *wd, ox_conv *cv,
                         int64_t *pb, int64_t *pr) {
    int cnt;
    const int64_t *v;
    cv->kh = 1;
    cv->kw = wd[3];
    cv->sh = cv->sw = cv->dh = cv->dw = 1;
    cv->pt = cv->pl = *pb = *pr = 0;
    if ((v = ox_attr_ints(n, "kernel_shape", &cnt)) && (cnt != 1 || v[0] != wd[3]))
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "kernel_shape disagrees with the weights");
    if ((v = ox_attr_ints(n, "strides", &cnt)) && (cnt != 1 || (cv->sw = v[0]) < 0))
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "strides of a 1-D convolution");
    if ((v = ox_attr_ints(n, "dilations", &cnt)) && (cnt != 1 || (cv->dw = v[0]) < 0))
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "dilations of a 1-D convolution");
    if ((v = ox_attr_ints(n, "pads", &cnt))) {
        if (cnt != 2) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "pads of a 1-D convolution");
        cv->pl = v[0];
        *pr = v[1];
    }
    return 0;
}

/* Reads kernel_shape / strides / pads / dilations / group of a 2-D Conv or ConvTranspose (or a
 * 1-D Conv, one_d, as a 2-D one of height 1). */
static int conv_attrs(ox_ctx *c, const fr_onnx_node *n, const int64_t *wd, ox_conv *cv,
                      int64_t *pb, int64_t *pr, int one_d) {
    int cnt;
    const int64_t *v;
    cv->kh = wd[2];
    cv->kw = wd[3];
    if (one_d) {
        if (conv_attrs_1d(c, n, wd, cv, pb, pr)) return -1;
        goto check;
    }
    if ((v = ox_attr_ints(n, "kernel_shape", &cnt)) && (cnt != 2 || v[0] != wd[2] || v[1] != wd[3]))
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "kernel_shape disagrees with the weights");
    cv->sh = cv->sw = cv->dh = cv->dw = 1;
    cv->pt = cv->pl = *pb = *pr = 0;
    if ((v = ox_attr_ints(n, "strides", &cnt))) {
        if (cnt != 2) return ox_fail(c, n, FR_ERR_UNSUPPORTED, "strides of %d values", cnt);
        cv->sh = v[0];
        cv->sw = v[1];
    }
    if ((v = ox_attr_ints(n, "dilations", &cnt))) {
        if (cnt != 2) return ox_fail(c, n, FR_ERR_UNSUPPORTED, "dilations of %d values", cnt);
        cv->dh = v[0];
        cv->dw = v[1];
    }
    if ((v = ox_attr_ints(n, "pads", &cnt))) {
        if (cnt != 4) return ox_fail(c, n, FR_ERR_UNSUPPORTED, "pads of %d values", cnt);
        cv->pt = v[0];
        cv->pl = v[1];
        *pb = v[2];
        *pr = v[3];
    }
check:;
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return ox_fail(c, n, FR_ERR_UNSUPPORTED, "auto_pad %s", ap);
    cv->g = ox_attr_i(n, "group", 1);
    if (cv->sh < 1 || cv->sw < 1 || cv->dh < 1 || cv->dw < 1 || cv->pt < 0 || cv->pl < 0 ||
        *pb < 0 || *pr < 0 || cv->g < 1 || cv->sh > 1024 || cv->sw > 1024 || cv->dh > 1024 ||
        cv->dw > 1024 || cv->pt > 4096 || cv->pl > 4096 || *pb > 4096 || *pr > 4096)
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bad strides, dilations, pads or group");
    return 0;
}

static int op_conv(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                   int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *x = in[0];
    const int one_d = !st->w && x->rank == 3 && in[1]->rank == 3;
    const int64_t *wd = st->w ? st->wdims : in[1]->d;
    int64_t wd4[4];
    if (one_d) { /* (N, C, L) as (N, C, 1, L), weights (M, C/g, k) as (M, C/g, 1, k) */
        wd4[0] = wd[0], wd4[1] = wd[1], wd4[2] = 1, wd4[3] = wd[2];
        wd = wd4;
    }
    if (dry) {
        if (need_f32(c, n, x, 0) || need_f32(c, n, in[1], 1)) return -1;
        if (!one_d && (x->rank != 4 || in[1]->rank != 4))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "only 1-D or 2-D convolution (rank 3 or 4), got rank %d",
                           x->rank);
    }
    ox_conv cv;
    int64_t pb, pr;
    if (conv_attrs(c, n, wd, &cv, &pb, &pr, one_d)) return -1;
    cv.N = x->d[0];
    cv.C = x->d[1];
    cv.H = one_d ? 1 : x->d[2];
    cv.W = one_d ? x->d[2] : x->d[3];
    cv.M = wd[0];
    const int64_t ekh = cv.dh * (cv.kh - 1) + 1, ekw = cv.dw * (cv.kw - 1) + 1;
    cv.OH = (cv.H + cv.pt + pb - ekh) / cv.sh + 1;
    cv.OW = (cv.W + cv.pl + pr - ekw) / cv.sw + 1;
    if (dry) {
        if (cv.C % cv.g || cv.M % cv.g || wd[1] != cv.C / cv.g)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST,
                           "input has %lld channels, weights (%lld, %lld) with group %lld",
                           (long long)cv.C, (long long)wd[0], (long long)wd[1], (long long)cv.g);
        const ox_t *bt = n_in > 2 ? in[2] : NULL;
        if (!st->w && bt && (bt->dt != FR_ONNX_DTYPE_F32 || bt->n != cv.M))
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bias of %lld values for %lld channels",
                           (long long)bt->n, (long long)cv.M);
        if (cv.H + cv.pt + pb < ekh || cv.W + cv.pl + pr < ekw)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input %lldx%lld smaller than the kernel",
                           (long long)cv.H, (long long)cv.W);
        if (one_d ? shape_ok(c, n, out, FR_ONNX_DTYPE_F32, 3, (const int64_t[]){cv.N, cv.M, cv.OW})
                  : shape_ok(c, n, out, FR_ONNX_DTYPE_F32, 4, (const int64_t[]){cv.N, cv.M, cv.OH, cv.OW}))
            return -1;
        *scratch = ox_conv_scratch(&cv); /* K (<= the weights' elements) * OH*OW: no overflow */
        if (*scratch > FR_ONNX_MAX_ELEMS)
            return ox_fail(c, n, FR_ERR_TOO_LARGE, "im2col buffer of %lld floats", (long long)*scratch);
        return 0;
    }
    const float *w = st->w ? st->w : in[1]->p;
    const float *bias = st->w ? st->b : (n_in > 2 && in[2] ? in[2]->p : NULL);
    ox_conv_run(c->pool, &cv, x->p, w, bias, out->p, c->scratch, &st->epi);
    return 0;
}

static int op_convt(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                    int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *x = in[0], *w = in[1];
    if (dry) {
        if (need_f32(c, n, x, 0) || need_f32(c, n, w, 1)) return -1;
        if (x->rank != 4 || w->rank != 4)
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "only 2-D transposed convolution");
        if (fr_onnx_node_attr(n, "output_shape"))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "output_shape");
    }
    ox_conv cv;
    int64_t pb, pr;
    if (conv_attrs(c, n, w->d, &cv, &pb, &pr, 0)) return -1;
    int cnt;
    const int64_t *op = ox_attr_ints(n, "output_padding", &cnt);
    const int64_t oph = op && cnt == 2 ? op[0] : 0, opw = op && cnt == 2 ? op[1] : 0;
    cv.N = x->d[0];
    cv.C = x->d[1];
    cv.H = x->d[2];
    cv.W = x->d[3];
    cv.M = w->d[1] * cv.g;
    cv.OH = (cv.H - 1) * cv.sh - cv.pt - pb + cv.dh * (cv.kh - 1) + 1 + oph;
    cv.OW = (cv.W - 1) * cv.sw - cv.pl - pr + cv.dw * (cv.kw - 1) + 1 + opw;
    if (dry) {
        if (w->d[0] != cv.C || cv.C % cv.g)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input has %lld channels, weights %lld",
                           (long long)cv.C, (long long)w->d[0]);
        if (n_in > 2 && in[2] && (in[2]->dt != FR_ONNX_DTYPE_F32 || in[2]->n != cv.M))
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bias size");
        if (cv.OH < 1 || cv.OW < 1 || oph < 0 || opw < 0)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "empty output");
        if (shape_ok(c, n, out, FR_ONNX_DTYPE_F32, 4, (const int64_t[]){cv.N, cv.M, cv.OH, cv.OW}))
            return -1;
        *scratch = ox_convt_scratch(&cv);
        if (*scratch > FR_ONNX_MAX_ELEMS)
            return ox_fail(c, n, FR_ERR_TOO_LARGE, "col2im buffer of %lld floats", (long long)*scratch);
        return 0;
    }
    ox_convt_run(&cv, x->p, w->p, n_in > 2 && in[2] ? in[2]->p : NULL, out->p, c->scratch);
    ox_epi_apply(&st->epi, out->p, out->n);
    return 0;
}

/* BatchNormalization (inference): y = (x - mean) / sqrt(var + eps) * scale + bias per channel. */
static int op_bn(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                 int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 5)) return -1;
    const ox_t *x = in[0];
    if (dry) {
        if (need_f32(c, n, x, 0)) return -1;
        if (x->rank < 2) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input of rank %d", x->rank);
        for (int k = 1; k < 5; k++)
            if (in[k]->dt != FR_ONNX_DTYPE_F32 || in[k]->n != x->d[1])
                return ox_fail(c, n, FR_ERR_BAD_REQUEST, "parameter %d has %lld values for %lld channels",
                               k, (long long)in[k]->n, (long long)x->d[1]);
        return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, x->rank, x->d);
    }
    const float eps = ox_attr_f(n, "epsilon", 1e-5f);
    const float *sc = in[1]->p, *bi = in[2]->p, *mu = in[3]->p, *va = in[4]->p;
    const int64_t C = x->d[1], inner = x->d[0] > 0 && C > 0 ? x->n / (x->d[0] * C) : 0;
    const float *xp = x->p;
    float *y = out->p;
    for (int64_t b = 0; b < x->d[0]; b++)
        for (int64_t ch = 0; ch < C; ch++) {
            const float s = sc[ch] / sqrtf(va[ch] + eps), t = bi[ch] - mu[ch] * s;
            const float *xr = xp + (b * C + ch) * inner;
            float *yr = y + (b * C + ch) * inner;
            for (int64_t i = 0; i < inner; i++) yr[i] = xr[i] * s + t;
            ox_epi_apply(&st->epi, yr, inner);
        }
    return 0;
}

/* ---------------------------------------------------------------- pools */

static int op_pool(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                   int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    if (dry && (need_f32(c, n, x, 0) || x->rank != 4))
        return x->rank != 4 ? ox_fail(c, n, FR_ERR_UNSUPPORTED, "only 2-D pooling (rank 4)") : -1;
    const int64_t N = x->d[0], C = x->d[1], H = x->d[2], W = x->d[3];
    if (n->op == FR_ONNX_OP_GlobalAveragePool) {
        if (dry) return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, 4, (const int64_t[]){N, C, 1, 1});
        const float *xp = x->p;
        float *y = out->p;
        for (int64_t p = 0; p < N * C; p++) {
            double s = 0;
            for (int64_t i = 0; i < H * W; i++) s += xp[p * H * W + i];
            y[p] = (float)(s / (double)(H * W));
        }
        return 0;
    }
    int cnt;
    const int64_t *k = ox_attr_ints(n, "kernel_shape", &cnt);
    if (!k || cnt != 2) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "kernel_shape of 2 values needed");
    const int64_t kh = k[0], kw = k[1];
    int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
    const int64_t *v;
    if ((v = ox_attr_ints(n, "strides", &cnt)) && cnt == 2) sh = v[0], sw = v[1];
    if ((v = ox_attr_ints(n, "pads", &cnt)) && cnt == 4) pt = v[0], pl = v[1], pb = v[2], pr = v[3];
    const int ceil_mode = (int)ox_attr_i(n, "ceil_mode", 0);
    const int incl = (int)ox_attr_i(n, "count_include_pad", 0);
    if (dry) {
        const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "auto_pad %s", ap);
        if ((v = ox_attr_ints(n, "dilations", &cnt)) && (cnt != 2 || v[0] != 1 || v[1] != 1))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "dilations");
        if (fr_onnx_node_attr(n, "storage_order") && ox_attr_i(n, "storage_order", 0))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "storage_order");
        if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || pt < 0 || pl < 0 || pb < 0 || pr < 0 ||
            kh > 4096 || kw > 4096 || sh > 4096 || sw > 4096 || pt >= kh || pl >= kw ||
            pb >= kh || pr >= kw || H + pt + pb < kh || W + pl + pr < kw)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bad kernel, strides or pads for %lldx%lld",
                           (long long)H, (long long)W);
    }
    const int64_t eh = H + pt + pb - kh, ew = W + pl + pr - kw;
    int64_t OH = (ceil_mode ? (eh + sh - 1) / sh : eh / sh) + 1;
    int64_t OW = (ceil_mode ? (ew + sw - 1) / sw : ew / sw) + 1;
    /* ceil mode: a window that starts in the padding at the end is dropped */
    if (ceil_mode && (OH - 1) * sh >= H + pt) OH--;
    if (ceil_mode && (OW - 1) * sw >= W + pl) OW--;
    if (dry) return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, 4, (const int64_t[]){N, C, OH, OW});
    const int is_max = n->op == FR_ONNX_OP_MaxPool;
    const float *xp = x->p;
    float *y = out->p;
    for (int64_t p = 0; p < N * C; p++) {
        const float *xpl = xp + p * H * W;
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                const int64_t y0 = oy * sh - pt, x0 = ox * sw - pl;
                const int64_t ya = FR_MAX(y0, 0), yb = FR_MIN(y0 + kh, H);
                const int64_t xa = FR_MAX(x0, 0), xb = FR_MIN(x0 + kw, W);
                float acc = is_max ? -INFINITY : 0.0f;
                for (int64_t iy = ya; iy < yb; iy++)
                    for (int64_t ix = xa; ix < xb; ix++) {
                        const float vv = xpl[iy * W + ix];
                        acc = is_max ? (vv > acc ? vv : acc) : acc + vv;
                    }
                if (!is_max) {
                    int64_t cntw = (yb - ya) * (xb - xa);
                    if (incl)
                        cntw = (FR_MIN(y0 + kh, H + pb) - y0) * (FR_MIN(x0 + kw, W + pr) - x0);
                    acc = cntw > 0 ? acc / (float)cntw : 0.0f;
                }
                y[(p * OH + oy) * OW + ox] = acc;
            }
    }
    return 0;
}

/* ---------------------------------------------------------------- Resize */

static int op_resize(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                     int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int r = x->rank;
    float scale[FR_ONNX_MAX_RANK];
    int64_t od[FR_ONNX_MAX_RANK];
    /* opset 10: (X, scales); 11+: (X, roi, scales, sizes) */
    const ox_t *sc = c->m->opset < 11 ? (n_in > 1 ? in[1] : NULL) : (n_in > 2 ? in[2] : NULL);
    const ox_t *sz = c->m->opset < 11 ? NULL : (n_in > 3 ? in[3] : NULL);
    if (sc && sc->n == 0) sc = NULL;
    if (sz && sz->n == 0) sz = NULL;
    if (dry) {
        if (need_f32(c, n, x, 0)) return -1;
        if (strcmp(ox_attr_s(n, "mode", "nearest"), "nearest") ||
            strcmp(ox_attr_s(n, "coordinate_transformation_mode", "half_pixel"), "asymmetric") ||
            strcmp(ox_attr_s(n, "nearest_mode", "round_prefer_floor"), "floor"))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED,
                           "only mode nearest, coordinate_transformation_mode asymmetric, "
                           "nearest_mode floor");
        if (!sc == !sz) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "exactly one of scales and sizes");
    }
    if (sz) {
        int64_t v[FR_ONNX_MAX_RANK];
        int cnt = 0;
        if (known_ints(c, n, sz, v, FR_ONNX_MAX_RANK, &cnt, "sizes")) return -1;
        if (cnt != r) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "sizes of %d values for rank %d", cnt, r);
        for (int i = 0; i < r; i++) {
            od[i] = v[i];
            scale[i] = x->d[i] ? (float)v[i] / (float)x->d[i] : 1.0f;
        }
    } else {
        if (!sc->p || sc->dt != FR_ONNX_DTYPE_F32)
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "scales must be floats known before the run");
        if (sc->n != r) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "scales of %lld values for rank %d",
                                       (long long)sc->n, r);
        for (int i = 0; i < r; i++) {
            scale[i] = ((const float *)sc->p)[i];
            if (!(scale[i] > 0) || scale[i] > 1024)
                return ox_fail(c, n, FR_ERR_BAD_REQUEST, "scale %g", (double)scale[i]);
            od[i] = (int64_t)floorf((float)x->d[i] * scale[i]);
        }
    }
    if (dry) {
        if (shape_ok(c, n, out, FR_ONNX_DTYPE_F32, r, od)) return -1;
        if (out->n > 0 && x->n == 0)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "resizing an empty input to a non-empty output");
        return 0;
    }
    /* per output coordinate of each axis, the input coordinate: floor(o / scale), clamped */
    int64_t *map[FR_ONNX_MAX_RANK];
    int64_t xs[FR_ONNX_MAX_RANK];
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = s;
        s *= x->d[i];
    }
    for (int i = 0; i < r; i++) {
        map[i] = fr_xmalloc((size_t)(od[i] ? od[i] : 1) * sizeof(int64_t));
        for (int64_t o = 0; o < od[i]; o++) {
            int64_t k = (int64_t)floorf((float)o / scale[i]);
            if (k > x->d[i] - 1) k = x->d[i] - 1;
            if (k < 0) k = 0;
            map[i][o] = k * xs[i];
        }
    }
    const float *xp = x->p;
    float *y = out->p;
    int64_t idx[FR_ONNX_MAX_RANK] = {0};
    const int64_t inner = r ? od[r - 1] : 1;
    for (int64_t o = 0; o < out->n && inner; o += inner) {
        int64_t base = 0;
        for (int i = 0; i < r - 1; i++) base += map[i][idx[i]];
        for (int64_t k = 0; k < inner; k++) y[o + k] = xp[base + (r ? map[r - 1][k] : 0)];
        for (int j = r - 2; j >= 0; j--) {
            if (++idx[j] < od[j]) break;
            idx[j] = 0;
        }
    }
    for (int i = 0; i < r; i++) free(map[i]);
    return 0;
}

/* ---------------------------------------------------------------- MatMul, Softmax, ReduceMean */

static int op_matmul(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                     int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *a = in[0], *b = in[1];
    if (dry && (need_f32(c, n, a, 0) || need_f32(c, n, b, 1))) return -1;
    if (a->rank < 1 || b->rank < 1) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "scalar operand");
    /* a (..., M, K), b (..., K, N); a 1-D a is (1, K), a 1-D b is (K, 1), dropped after */
    const int64_t M = a->rank >= 2 ? a->d[a->rank - 2] : 1, K = a->d[a->rank - 1];
    const int64_t Kb = b->rank >= 2 ? b->d[b->rank - 2] : b->d[0];
    const int64_t N = b->rank >= 2 ? b->d[b->rank - 1] : 1;
    ox_t ab = {0}, bb = {0}; /* the batch parts */
    ab.rank = FR_MAX(a->rank - 2, 0);
    bb.rank = FR_MAX(b->rank - 2, 0);
    for (int i = 0; i < ab.rank; i++) ab.d[i] = a->d[i];
    for (int i = 0; i < bb.rank; i++) bb.d[i] = b->d[i];
    int br;
    int64_t bd[FR_ONNX_MAX_RANK];
    if (bcast_shape(&ab, &bb, &br, bd)) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "batch dims do not broadcast");
    if (dry) {
        if (K != Kb)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "inner dims %lld and %lld", (long long)K, (long long)Kb);
        int64_t od[FR_ONNX_MAX_RANK];
        int r = br;
        for (int i = 0; i < br; i++) od[i] = bd[i];
        if (a->rank >= 2) od[r++] = M;
        if (b->rank >= 2) od[r++] = N;
        return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, r, od);
    }
    const float *A = a->p, *B = b->p;
    float *Y = out->p;
    int64_t nb = 1;
    for (int i = 0; i < br; i++) nb *= bd[i];
    int64_t bn = 1;
    for (int i = 0; i < bb.rank; i++) bn *= bb.d[i];
    if (bn == 1) { /* one b for every batch of a: one sgemm over all rows of a */
        ox_sgemm(nb * M, N, K, A, B, Y);
        return 0;
    }
    int64_t sa[FR_ONNX_MAX_RANK], sb[FR_ONNX_MAX_RANK], idx[FR_ONNX_MAX_RANK] = {0};
    ab.n = bb.n = 1;
    bcast_strides(&ab, br, bd, sa);
    bcast_strides(&bb, br, bd, sb);
    for (int64_t t = 0; t < nb; t++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < br; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        ox_sgemm(M, N, K, A + oa * M * K, B + ob * K * N, Y + t * M * N);
        for (int j = br - 1; j >= 0; j--) {
            if (++idx[j] < bd[j]) break;
            idx[j] = 0;
        }
    }
    return 0;
}

static int op_softmax(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                      int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int new_def = c->m->opset >= 13;
    const int ax = norm_axis(ox_attr_i(n, "axis", new_def ? -1 : 1), x->rank);
    if (dry) {
        if (need_f32(c, n, x, 0)) return -1;
        if (ax < 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "axis out of range for rank %d", x->rank);
        return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, x->rank, x->d);
    }
    /* opset < 13: the dims from axis on are one row; 13+: axis alone, strided by the rest */
    int64_t outer = 1, D = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= x->d[i];
    if (new_def) {
        D = x->d[ax];
        for (int i = ax + 1; i < x->rank; i++) inner *= x->d[i];
    } else {
        for (int i = ax; i < x->rank; i++) D *= x->d[i];
    }
    const float *xp = x->p;
    float *y = out->p;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            const float *xr = xp + o * D * inner + k;
            float *yr = y + o * D * inner + k;
            float mx = -INFINITY;
            for (int64_t i = 0; i < D; i++) mx = xr[i * inner] > mx ? xr[i * inner] : mx;
            float s = 0;
            for (int64_t i = 0; i < D; i++) s += (yr[i * inner] = expf(xr[i * inner] - mx));
            const float inv = 1.0f / s;
            for (int64_t i = 0; i < D; i++) yr[i * inner] *= inv;
        }
    return 0;
}

static int op_reducemean(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                         int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    int cnt;
    const int64_t *axes = ox_attr_ints(n, "axes", &cnt);
    const int keep = (int)ox_attr_i(n, "keepdims", 1);
    int red[FR_ONNX_MAX_RANK] = {0};
    if (!axes)
        for (int i = 0; i < x->rank; i++) red[i] = 1;
    for (int i = 0; i < cnt; i++) {
        const int a = norm_axis(axes[i], x->rank);
        if (a < 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "axis %lld out of range", (long long)axes[i]);
        red[a] = 1;
    }
    if (dry) {
        if (need_f32(c, n, x, 0)) return -1;
        int64_t od[FR_ONNX_MAX_RANK];
        int r = 0;
        for (int i = 0; i < x->rank; i++)
            if (!red[i]) od[r++] = x->d[i];
            else if (keep) od[r++] = 1;
        return shape_ok(c, n, out, FR_ONNX_DTYPE_F32, r, od);
    }
    const float *xp = x->p;
    float *y = out->p;
    int64_t cnt_red = 1;
    for (int i = 0; i < x->rank; i++)
        if (red[i]) cnt_red *= x->d[i];
    int trailing = 1; /* the reduced axes are the last ones: rows */
    for (int i = 0, seen = 0; i < x->rank; i++) {
        if (red[i]) seen = 1;
        else if (seen) trailing = 0;
    }
    if (trailing) {
        const int64_t rows = cnt_red ? x->n / cnt_red : 0;
        for (int64_t r = 0; r < rows; r++) {
            float s = 0;
            for (int64_t i = 0; i < cnt_red; i++) s += xp[r * cnt_red + i];
            y[r] = s / (float)cnt_red;
        }
        return 0;
    }
    /* general: accumulate each input element into its output slot */
    int64_t ostr[FR_ONNX_MAX_RANK], s = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        ostr[i] = red[i] ? 0 : s;
        if (!red[i]) s *= x->d[i];
    }
    for (int64_t i = 0; i < out->n; i++) y[i] = 0;
    int64_t idx[FR_ONNX_MAX_RANK] = {0};
    for (int64_t i = 0; i < x->n; i++) {
        int64_t o = 0;
        for (int j = 0; j < x->rank; j++) o += idx[j] * ostr[j];
        y[o] += xp[i];
        for (int j = x->rank - 1; j >= 0; j--) {
            if (++idx[j] < x->d[j]) break;
            idx[j] = 0;
        }
    }
    for (int64_t i = 0; i < out->n; i++) y[i] /= (float)cnt_red;
    return 0;
}

/* ---------------------------------------------------------------- data movement */

static size_t esize(const ox_t *t) { return t->dt == FR_ONNX_DTYPE_I64 ? 8 : 4; }

static int op_transpose(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                        int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int r = x->rank;
    int cnt;
    const int64_t *pv = ox_attr_ints(n, "perm", &cnt);
    int perm[FR_ONNX_MAX_RANK];
    if (pv && cnt != r) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "perm of %d values for rank %d", cnt, r);
    int used[FR_ONNX_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        perm[i] = pv ? norm_axis(pv[i], r) : r - 1 - i;
        if (perm[i] < 0 || used[perm[i]]++) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "perm is not a permutation");
    }
    int64_t od[FR_ONNX_MAX_RANK];
    for (int i = 0; i < r; i++) od[i] = x->d[perm[i]];
    if (dry) return shape_ok(c, n, out, x->dt, r, od);
    int64_t xs[FR_ONNX_MAX_RANK], s = 1, st2[FR_ONNX_MAX_RANK];
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = s;
        s *= x->d[i];
    }
    for (int i = 0; i < r; i++) st2[i] = xs[perm[i]]; /* input stride of output axis i */
    const size_t es = esize(x);
    const char *xp = x->p;
    char *y = out->p;
    int64_t idx[FR_ONNX_MAX_RANK] = {0}, off = 0;
    const int64_t inner = r ? od[r - 1] : 1, is = r ? st2[r - 1] : 0;
    for (int64_t o = 0; o < out->n && inner; o += inner) {
        if (es == 4) {
            const float *src = (const float *)xp + off;
            float *dst = (float *)y + o;
            for (int64_t k = 0; k < inner; k++) dst[k] = src[k * is];
        } else {
            const int64_t *src = (const int64_t *)xp + off;
            int64_t *dst = (int64_t *)y + o;
            for (int64_t k = 0; k < inner; k++) dst[k] = src[k * is];
        }
        for (int j = r - 2; j >= 0; j--) {
            off += st2[j];
            if (++idx[j] < od[j]) break;
            off -= st2[j] * od[j];
            idx[j] = 0;
        }
    }
    return 0;
}

static int op_concat(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                     int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (n_in < 1 || need(c, n, in, n_in, n_in)) return n_in < 1 ? ox_fail(c, n, FR_ERR_BAD_REQUEST, "no inputs") : -1;
    const ox_t *x0 = in[0];
    const int r = x0->rank;
    const int ax = norm_axis(ox_attr_i(n, "axis", 0), r);
    if (dry) {
        if (ax < 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "axis out of range for rank %d", r);
        int64_t od[FR_ONNX_MAX_RANK];
        memcpy(od, x0->d, sizeof od);
        od[ax] = 0;
        for (int k = 0; k < n_in; k++) {
            if (in[k]->dt != x0->dt || in[k]->rank != r)
                return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input %d differs in type or rank", k);
            for (int i = 0; i < r; i++)
                if (i != ax && in[k]->d[i] != x0->d[i])
                    return ox_fail(c, n, FR_ERR_BAD_REQUEST, "input %d differs in dim %d", k, i);
            od[ax] += in[k]->d[ax];
            if (od[ax] > FR_ONNX_MAX_ELEMS) return ox_fail(c, n, FR_ERR_TOO_LARGE, "too large");
        }
        return shape_ok(c, n, out, x0->dt, r, od);
    }
    const size_t es = esize(x0);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= x0->d[i];
    for (int i = ax + 1; i < r; i++) inner *= x0->d[i];
    char *y = out->p;
    const int64_t orow = out->d[ax] * inner;
    int64_t col = 0;
    for (int k = 0; k < n_in; k++) {
        const int64_t row = in[k]->d[ax] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (size_t)(o * orow + col) * es, (const char *)in[k]->p + (size_t)(o * row) * es,
                   (size_t)row * es);
        col += row;
    }
    return 0;
}

static int op_slice(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                    int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int r = x->rank;
    int64_t sv[FR_ONNX_MAX_RANK], ev[FR_ONNX_MAX_RANK], av[FR_ONNX_MAX_RANK], pv[FR_ONNX_MAX_RANK];
    int ns = 0, ne = 0, na = 0, np = 0;
    if (c->m->opset < 10) {
        int cnt;
        const int64_t *v;
        if ((v = ox_attr_ints(n, "starts", &cnt)) && cnt <= FR_ONNX_MAX_RANK) memcpy(sv, v, (size_t)(ns = cnt) * 8);
        if ((v = ox_attr_ints(n, "ends", &cnt)) && cnt <= FR_ONNX_MAX_RANK) memcpy(ev, v, (size_t)(ne = cnt) * 8);
        if ((v = ox_attr_ints(n, "axes", &cnt)) && cnt <= FR_ONNX_MAX_RANK) memcpy(av, v, (size_t)(na = cnt) * 8);
    } else {
        if (need(c, n, in, n_in, 3)) return -1;
        if (known_ints(c, n, in[1], sv, FR_ONNX_MAX_RANK, &ns, "starts") ||
            known_ints(c, n, in[2], ev, FR_ONNX_MAX_RANK, &ne, "ends"))
            return -1;
        if (n_in > 3 && in[3] && known_ints(c, n, in[3], av, FR_ONNX_MAX_RANK, &na, "axes")) return -1;
        if (n_in > 4 && in[4] && known_ints(c, n, in[4], pv, FR_ONNX_MAX_RANK, &np, "steps")) return -1;
    }
    if (ns != ne || ns == 0 || (na && na != ns) || (np && np != ns))
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "starts, ends, axes, steps of different lengths");
    int64_t start[FR_ONNX_MAX_RANK], step[FR_ONNX_MAX_RANK], od[FR_ONNX_MAX_RANK];
    int seen[FR_ONNX_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        start[i] = 0;
        step[i] = 1;
        od[i] = x->d[i];
    }
    for (int k = 0; k < ns; k++) {
        const int a = norm_axis(na ? av[k] : k, r);
        if (a < 0 || seen[a]++) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bad or repeated axis");
        const int64_t D = x->d[a];
        int64_t s = np ? pv[k] : 1;
        if (s == 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "step 0");
        if (s < -INT64_MAX) s = -INT64_MAX;
        int64_t b = sv[k], e = ev[k];
        if (b < 0) b += D;
        if (e < 0) e += D;
        if (s > 0) {
            b = b < 0 ? 0 : b > D ? D : b;
            e = e < 0 ? 0 : e > D ? D : e;
            od[a] = e > b ? 1 + (e - b - 1) / s : 0;
        } else {
            b = b < 0 ? -1 : b > D - 1 ? D - 1 : b;
            e = e < -1 ? -1 : e > D - 1 ? D - 1 : e;
            od[a] = b > e ? 1 + (b - e - 1) / (-s) : 0;
        }
        start[a] = b;
        step[a] = s;
    }
    if (dry) return shape_ok(c, n, out, x->dt, r, od);
    int64_t xs[FR_ONNX_MAX_RANK], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = s;
        s *= x->d[i];
    }
    const size_t es = esize(x);
    int64_t idx[FR_ONNX_MAX_RANK] = {0};
    for (int64_t o = 0; o < out->n; o++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += (start[i] + idx[i] * step[i]) * xs[i];
        memcpy((char *)out->p + (size_t)o * es, (const char *)x->p + (size_t)off * es, es);
        for (int j = r - 1; j >= 0; j--) {
            if (++idx[j] < od[j]) break;
            idx[j] = 0;
        }
    }
    return 0;
}

/* Unsqueeze's output shape: x's with a 1 inserted at each axis (of the output's rank). */
static int unsqueeze_shape(ox_ctx *c, const fr_onnx_node *n, ox_t *const *in, int n_in,
                           int64_t *od, int *r) {
    const ox_t *x = in[0];
    int64_t av[FR_ONNX_MAX_RANK];
    int na = 0, cnt;
    const int64_t *v = ox_attr_ints(n, "axes", &cnt);
    if (v) {
        if (cnt > FR_ONNX_MAX_RANK) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "too many axes");
        memcpy(av, v, (size_t)(na = cnt) * 8);
    } else if (n_in < 2 || !in[1]) {
        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "no axes");
    } else if (known_ints(c, n, in[1], av, FR_ONNX_MAX_RANK, &na, "axes")) {
        return -1;
    }
    *r = x->rank + na;
    if (*r > FR_ONNX_MAX_RANK) return ox_fail(c, n, FR_ERR_TOO_LARGE, "rank over %d", FR_ONNX_MAX_RANK);
    int one[FR_ONNX_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        const int a = norm_axis(av[k], *r);
        if (a < 0 || one[a]++) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bad or repeated axis");
    }
    for (int i = 0, j = 0; i < *r; i++) od[i] = one[i] ? 1 : x->d[j++];
    return 0;
}

/* Reshape, Squeeze, Unsqueeze, Identity: the data unchanged, a new shape. */
static int op_reshape(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                      int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    if (dry) {
        int64_t od[FR_ONNX_MAX_RANK];
        int r = 0;
        if (n->op == FR_ONNX_OP_Identity) {
            r = x->rank;
            memcpy(od, x->d, sizeof od);
        } else if (n->op == FR_ONNX_OP_Unsqueeze) {
            if (unsqueeze_shape(c, n, in, n_in, od, &r)) return -1;
        } else if (n->op == FR_ONNX_OP_Squeeze) {
            int64_t av[FR_ONNX_MAX_RANK];
            int na = 0, cnt;
            const int64_t *v = ox_attr_ints(n, "axes", &cnt);
            if (v) {
                if (cnt > FR_ONNX_MAX_RANK) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "too many axes");
                memcpy(av, v, (size_t)(na = cnt) * 8);
            } else if (n_in > 1 && in[1] && known_ints(c, n, in[1], av, FR_ONNX_MAX_RANK, &na, "axes")) {
                return -1;
            }
            int sq[FR_ONNX_MAX_RANK] = {0};
            for (int k = 0; k < na; k++) {
                const int a = norm_axis(av[k], x->rank);
                if (a < 0 || x->d[a] != 1)
                    return ox_fail(c, n, FR_ERR_BAD_REQUEST, "axis %lld is not a dimension of 1",
                                   (long long)av[k]);
                sq[a] = 1;
            }
            for (int i = 0; i < x->rank; i++)
                if (!(na ? sq[i] : x->d[i] == 1)) od[r++] = x->d[i];
        } else {
            if (need(c, n, in, n_in, 2)) return -1;
            int64_t sv[FR_ONNX_MAX_RANK];
            if (known_ints(c, n, in[1], sv, FR_ONNX_MAX_RANK, &r, "the shape")) return -1;
            const int allowzero = (int)ox_attr_i(n, "allowzero", 0);
            int neg = -1;
            int64_t prod = 1;
            for (int i = 0; i < r; i++) {
                od[i] = sv[i];
                if (sv[i] == 0 && !allowzero) {
                    if (i >= x->rank) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "0 past the input's rank");
                    od[i] = x->d[i];
                }
                if (od[i] == -1) {
                    if (neg >= 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "two -1 in the shape");
                    neg = i;
                } else if (od[i] < 0) {
                    return ox_fail(c, n, FR_ERR_BAD_REQUEST, "negative dimension");
                } else {
                    if (od[i] && prod > FR_ONNX_MAX_ELEMS / od[i])
                        return ox_fail(c, n, FR_ERR_BAD_REQUEST, "shape does not match %lld elements",
                                       (long long)x->n);
                    prod *= od[i];
                }
            }
            if (neg >= 0) {
                if (prod == 0 || x->n % prod)
                    return ox_fail(c, n, FR_ERR_BAD_REQUEST, "cannot infer -1 for %lld elements",
                                   (long long)x->n);
                od[neg] = x->n / prod;
            }
        }
        if (shape_ok(c, n, out, x->dt, r, od)) return -1;
        if (out->n != x->n)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "%lld elements reshaped to %lld",
                           (long long)x->n, (long long)out->n);
        return 0;
    }
    if (out->p != x->p) memcpy(out->p, x->p, (size_t)x->n * esize(x));
    return 0;
}

static int op_shape(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                    int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    int64_t a = ox_attr_i(n, "start", 0), b = ox_attr_i(n, "end", x->rank);
    if (a < 0) a += x->rank;
    if (b < 0) b += x->rank;
    a = FR_MAX(0, FR_MIN(a, x->rank));
    b = FR_MAX(a, FR_MIN(b, x->rank));
    if (dry) return shape_ok(c, n, out, FR_ONNX_DTYPE_I64, 1, (const int64_t[]){b - a});
    for (int64_t i = a; i < b; i++) ((int64_t *)out->p)[i - a] = x->d[i];
    return 0;
}

static int op_cast(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                   int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int64_t to = ox_attr_i(n, "to", 0);
    /* FLOAT (1) is float, INT32 (6), INT64 (7) and BOOL (9) are int64 here */
    const fr_onnx_dtype dt = to == 1 ? FR_ONNX_DTYPE_F32 : FR_ONNX_DTYPE_I64;
    if (dry) {
        if (to != 1 && to != 6 && to != 7 && to != 9)
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "cast to element type %lld", (long long)to);
        return shape_ok(c, n, out, dt, x->rank, x->d);
    }
    if (to == 9) { /* BOOL, held as int64 0 / 1 */
        for (int64_t i = 0; i < x->n; i++)
            ((int64_t *)out->p)[i] = x->dt == FR_ONNX_DTYPE_I64 ? ((const int64_t *)x->p)[i] != 0
                                                                : ((const float *)x->p)[i] != 0.0f;
        return 0;
    }
    if (x->dt == dt) {
        memcpy(out->p, x->p, (size_t)x->n * esize(x));
        if (to == 6) /* INT32: wrap as a cast to int32 would */
            for (int64_t i = 0; i < x->n; i++)
                ((int64_t *)out->p)[i] = (int32_t)(uint32_t)((uint64_t *)out->p)[i];
    } else if (dt == FR_ONNX_DTYPE_F32) {
        for (int64_t i = 0; i < x->n; i++) ((float *)out->p)[i] = (float)((const int64_t *)x->p)[i];
    } else {
        for (int64_t i = 0; i < x->n; i++) {
            const float v = ((const float *)x->p)[i];
            /* truncation toward zero; NaN and out-of-range values become 0 rather than UB */
            ((int64_t *)out->p)[i] = (v > -9.2e18f && v < 9.2e18f) ? (int64_t)v : 0;
            if (to == 6) ((int64_t *)out->p)[i] = (int32_t)(uint32_t)((uint64_t *)out->p)[i];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- comparison, indexing, padding */

/* Equal: numpy broadcasting, float or int64 inputs of one type, a 0 / 1 (int64) output. */
static int op_equal(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                    int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *a = in[0], *b = in[1];
    int r;
    int64_t d[FR_ONNX_MAX_RANK];
    if (dry) {
        if (a->dt != b->dt) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "inputs of different element types");
        if (bcast_shape(a, b, &r, d)) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "shapes do not broadcast");
        return shape_ok(c, n, out, FR_ONNX_DTYPE_I64, r, d);
    }
    int64_t sa[FR_ONNX_MAX_RANK], sb[FR_ONNX_MAX_RANK], idx[FR_ONNX_MAX_RANK] = {0};
    r = out->rank;
    bcast_strides(a, r, out->d, sa);
    bcast_strides(b, r, out->d, sb);
    for (int64_t o = 0; o < out->n; o++) {
        int64_t ia = 0, ib = 0;
        for (int i = 0; i < r; i++) ia += idx[i] * sa[i], ib += idx[i] * sb[i];
        ((int64_t *)out->p)[o] = a->dt == FR_ONNX_DTYPE_I64
                                     ? ((const int64_t *)a->p)[ia] == ((const int64_t *)b->p)[ib]
                                     : ((const float *)a->p)[ia] == ((const float *)b->p)[ib];
        for (int j = r - 1; j >= 0; j--) {
            if (++idx[j] < out->d[j]) break;
            idx[j] = 0;
        }
    }
    return 0;
}

/* Gather along axis: out = x[..., idx[...], ...]; indices in [-D, D) (BAD_REQUEST otherwise). */
static int op_gather(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                     int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 2)) return -1;
    const ox_t *x = in[0], *ix = in[1];
    const int ax = norm_axis(ox_attr_i(n, "axis", 0), x->rank);
    if (dry) {
        if (ax < 0) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "axis out of range for rank %d", x->rank);
        if (ix->dt != FR_ONNX_DTYPE_I64) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "indices are not integers");
        if (x->rank - 1 + ix->rank > FR_ONNX_MAX_RANK) return ox_fail(c, n, FR_ERR_TOO_LARGE, "rank over %d", FR_ONNX_MAX_RANK);
        int64_t od[FR_ONNX_MAX_RANK];
        int r = 0;
        for (int i = 0; i < ax; i++) od[r++] = x->d[i];
        for (int i = 0; i < ix->rank; i++) od[r++] = ix->d[i];
        for (int i = ax + 1; i < x->rank; i++) od[r++] = x->d[i];
        return shape_ok(c, n, out, x->dt, r, od);
    }
    int64_t outer = 1, inner = 1;
    const int64_t D = x->d[ax];
    for (int i = 0; i < ax; i++) outer *= x->d[i];
    for (int i = ax + 1; i < x->rank; i++) inner *= x->d[i];
    const size_t es = esize(x);
    const int64_t *iv = ix->p;
    for (int64_t k = 0; k < ix->n; k++)
        if (iv[k] < -D || iv[k] >= D)
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "index %lld out of [-%lld, %lld)",
                           (long long)iv[k], (long long)D, (long long)D);
    char *y = out->p;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ix->n; k++) {
            const int64_t j = iv[k] < 0 ? iv[k] + D : iv[k];
            memcpy(y + (size_t)((o * ix->n + k) * inner) * es,
                   (const char *)x->p + (size_t)((o * D + j) * inner) * es, (size_t)inner * es);
        }
    return 0;
}

/* ConstantOfShape: the shape (known before the run) filled with the 'value' tensor's one
 * element (float 0 by default). */
static int op_constofshape(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                           int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const fr_onnx_attr *a = fr_onnx_node_attr(n, "value");
    const fr_onnx_tensor *t = a && a->type == FR_ONNX_ATTR_TENSOR ? a->t : NULL;
    if (a && (!t || t->n != 1)) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "value must be one element");
    const fr_onnx_dtype dt = t ? t->dtype : FR_ONNX_DTYPE_F32;
    if (dry) {
        int64_t d[FR_ONNX_MAX_RANK];
        int r = 0;
        if (known_ints(c, n, in[0], d, FR_ONNX_MAX_RANK, &r, "the shape")) return -1;
        return shape_ok(c, n, out, dt, r, d);
    }
    for (int64_t i = 0; i < out->n; i++) {
        if (dt == FR_ONNX_DTYPE_I64) ((int64_t *)out->p)[i] = t ? *(const int64_t *)t->data : 0;
        else ((float *)out->p)[i] = t ? *(const float *)t->data : 0.0f;
    }
    return 0;
}

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } pad_mode;

/* The input coordinate output coordinate j (before the pad) reads along a dim of D; -1: the
 * constant. */
static int64_t pad_src(int64_t j, int64_t D, pad_mode mode) {
    if (j >= 0 && j < D) return j;
    if (mode == PAD_CONSTANT) return -1;
    if (mode == PAD_EDGE) return j < 0 ? 0 : D - 1;
    return j < 0 ? -j : 2 * (D - 1) - j; /* reflect, pads < D checked */
}

/* Pad (opset 11+: pads and constant_value inputs; earlier: attributes), modes constant,
 * reflect, edge; pads >= 0 and at most 1 << 20. */
static int op_pad(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                  int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 1)) return -1;
    const ox_t *x = in[0];
    const int r = x->rank;
    const char *ms = ox_attr_s(n, "mode", "constant");
    const pad_mode mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE : PAD_CONSTANT;
    if (mode == PAD_CONSTANT && strcmp(ms, "constant")) return ox_fail(c, n, FR_ERR_UNSUPPORTED, "mode %s", ms);
    int64_t pv[2 * FR_ONNX_MAX_RANK];
    int np = 0;
    float cv = 0.0f;
    if (c->m->opset < 11) {
        int cnt;
        const int64_t *v = ox_attr_ints(n, "pads", &cnt);
        if (!v || cnt > 2 * FR_ONNX_MAX_RANK) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "bad pads");
        memcpy(pv, v, (size_t)(np = cnt) * 8);
        cv = ox_attr_f(n, "value", 0.0f);
    } else {
        if (need(c, n, in, n_in, 2) || known_ints(c, n, in[1], pv, 2 * FR_ONNX_MAX_RANK, &np, "pads")) return -1;
        if (n_in > 3 && in[3]) return ox_fail(c, n, FR_ERR_UNSUPPORTED, "axes input");
        if (n_in > 2 && in[2]) {
            if (!in[2]->p || in[2]->n != 1 || in[2]->dt != x->dt)
                return ox_fail(c, n, FR_ERR_UNSUPPORTED, "constant_value must be one value known before the run");
            cv = x->dt == FR_ONNX_DTYPE_F32 ? *(const float *)in[2]->p : (float)*(const int64_t *)in[2]->p;
        }
    }
    if (np != 2 * r) return ox_fail(c, n, FR_ERR_BAD_REQUEST, "%d pads for rank %d", np, r);
    int64_t od[FR_ONNX_MAX_RANK];
    for (int i = 0; i < r; i++) {
        const int64_t b = pv[i], e = pv[r + i];
        if (b < 0 || e < 0 || b > (1 << 20) || e > (1 << 20))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "pads must lie in [0, 2^20]");
        if ((mode == PAD_REFLECT && (b >= x->d[i] || e >= x->d[i]) && (b || e)) ||
            (mode == PAD_EDGE && x->d[i] == 0 && (b || e)))
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "pad of %lld, %lld on a dimension of %lld",
                           (long long)b, (long long)e, (long long)x->d[i]);
        od[i] = x->d[i] + b + e;
    }
    if (dry) return shape_ok(c, n, out, x->dt, r, od);
    int64_t xs[FR_ONNX_MAX_RANK], s = 1, idx[FR_ONNX_MAX_RANK] = {0};
    for (int i = r - 1; i >= 0; i--) xs[i] = s, s *= x->d[i];
    const size_t es = esize(x);
    for (int64_t o = 0; o < out->n; o++) {
        int64_t off = 0;
        for (int i = 0; i < r && off >= 0; i++) {
            const int64_t j = pad_src(idx[i] - pv[i], x->d[i], mode);
            off = j < 0 ? -1 : off + j * xs[i];
        }
        char *dst = (char *)out->p + (size_t)o * es;
        if (off >= 0) memcpy(dst, (const char *)x->p + (size_t)off * es, es);
        else if (es == 4) *(float *)dst = cv;
        else *(int64_t *)dst = (int64_t)cv;
        for (int j = r - 1; j >= 0; j--) {
            if (++idx[j] < od[j]) break;
            idx[j] = 0;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- recurrent */

/* LSTM, forward direction, layout 0, the default activations, no peepholes, no sequence_lens:
 * X (S, B, I), W (1, 4H, I), R (1, 4H, H), B (1, 8H) optional, initial_h / initial_c (1, B, H)
 * optional. Outputs Y (S, 1, B, H), Y_h (1, B, H), Y_c (1, B, H), any prefix of them. */
static int op_lstm(ox_ctx *c, const ox_step *st, ox_t *const *in, int n_in, ox_t *out,
                   int64_t *scratch, int dry) {
    const fr_onnx_node *n = NODE(c, st);
    if (need(c, n, in, n_in, 3)) return -1;
    const ox_t *x = in[0], *w = in[1], *rr = in[2];
    const ox_t *b = n_in > 3 ? in[3] : NULL, *h0 = n_in > 5 ? in[5] : NULL, *c0 = n_in > 6 ? in[6] : NULL;
    const int64_t H = ox_attr_i(n, "hidden_size", 0);
    if (dry) {
        if (strcmp(ox_attr_s(n, "direction", "forward"), "forward") || ox_attr_i(n, "layout", 0) ||
            ox_attr_i(n, "input_forget", 0) || fr_onnx_node_attr(n, "clip") ||
            fr_onnx_node_attr(n, "activations") || (n_in > 4 && in[4]) || (n_in > 7 && in[7]))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED,
                           "only forward, layout 0, default activations, no clip, peepholes or sequence_lens");
        for (int k = 0; k < n_in && k < 7; k++)
            if (in[k] && need_f32(c, n, in[k], k)) return -1;
        if (H < 1 || H > 4096 || x->rank != 3 || x->d[2] > (1 << 16) || w->rank != 3 ||
            w->d[0] != 1 || w->d[1] != 4 * H || w->d[2] != x->d[2] || rr->rank != 3 ||
            rr->d[0] != 1 || rr->d[1] != 4 * H || rr->d[2] != H || (b && b->n != 8 * H))
            return ox_fail(c, n, FR_ERR_BAD_REQUEST, "X, W, R, B do not fit hidden_size %lld", (long long)H);
        const int64_t B = x->d[1];
        for (int k = 0; k < 2; k++) {
            const ox_t *t = k ? c0 : h0;
            if (t && (t->rank != 3 || t->d[0] != 1 || t->d[1] != B || t->d[2] != H))
                return ox_fail(c, n, FR_ERR_BAD_REQUEST, "initial state is not (1, %lld, %lld)",
                               (long long)B, (long long)H);
        }
        if (shape_ok(c, n, &out[0], FR_ONNX_DTYPE_F32, 4, (const int64_t[]){x->d[0], 1, B, H})) return -1;
        for (int k = 1; k < n->n_out && k < 3; k++)
            if (shape_ok(c, n, &out[k], FR_ONNX_DTYPE_F32, 3, (const int64_t[]){1, B, H})) return -1;
        *scratch = 6 * B * H; /* gates (4H) and the state (h, c) per batch row */
        return 0;
    }
    ox_lstm L = {.seq = x->d[0], .batch = x->d[1], .n_in = x->d[2], .hid = H};
    ox_lstm_run(&L, x->p, w->p, rr->p, b ? b->p : NULL, h0 ? h0->p : NULL, c0 ? c0->p : NULL,
                out[0].p, n->n_out > 1 ? out[1].p : NULL, n->n_out > 2 ? out[2].p : NULL, c->scratch);
    return 0;
}

ox_op_fn ox_op_get(fr_onnx_op op) {
    switch (op) {
    case FR_ONNX_OP_Add:
    case FR_ONNX_OP_Sub:
    case FR_ONNX_OP_Mul:
    case FR_ONNX_OP_Div:
    case FR_ONNX_OP_Pow: return op_binary;
    case FR_ONNX_OP_Relu:
    case FR_ONNX_OP_Sigmoid:
    case FR_ONNX_OP_Sqrt:
    case FR_ONNX_OP_HardSigmoid:
    case FR_ONNX_OP_Clip: return op_unary;
    case FR_ONNX_OP_Conv: return op_conv;
    case FR_ONNX_OP_ConvTranspose: return op_convt;
    case FR_ONNX_OP_BatchNormalization: return op_bn;
    case FR_ONNX_OP_AveragePool:
    case FR_ONNX_OP_MaxPool:
    case FR_ONNX_OP_GlobalAveragePool: return op_pool;
    case FR_ONNX_OP_Resize: return op_resize;
    case FR_ONNX_OP_MatMul: return op_matmul;
    case FR_ONNX_OP_Softmax: return op_softmax;
    case FR_ONNX_OP_ReduceMean: return op_reducemean;
    case FR_ONNX_OP_Transpose: return op_transpose;
    case FR_ONNX_OP_Concat: return op_concat;
    case FR_ONNX_OP_Slice: return op_slice;
    case FR_ONNX_OP_Reshape:
    case FR_ONNX_OP_Squeeze: return op_reshape;
    case FR_ONNX_OP_Shape: return op_shape;
    case FR_ONNX_OP_Cast: return op_cast;
    case FR_ONNX_OP_Log:
    case FR_ONNX_OP_Neg: return op_unary;
    case FR_ONNX_OP_Unsqueeze:
    case FR_ONNX_OP_Identity: return op_reshape;
    case FR_ONNX_OP_Equal: return op_equal;
    case FR_ONNX_OP_Gather: return op_gather;
    case FR_ONNX_OP_ConstantOfShape: return op_constofshape;
    case FR_ONNX_OP_Pad: return op_pad;
    case FR_ONNX_OP_LSTM: return op_lstm;
    default: return NULL;
    }
}
