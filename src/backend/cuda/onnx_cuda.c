/* onnx_cuda.c — the ONNX executor on a CUDA device (onnx_cuda.h): the CPU executor's prepared
 * schedule (backend/cpu/onnx_ops.h: folded constants, BN folded into Conv, fused epilogues)
 * run by cuDNN, cuBLAS and the kernels of k_onnx.cu.
 *
 * This file sits above both backends (the layer of backend_cuda.cu): it takes the schedule and
 * the shape inference (each op's dry call) from the CPU executor and runs the steps here.
 *
 * A plan, once per input shape:
 *   1. every step infers its output shape (the CPU op's dry call); a step whose inputs are known
 *      before the run (constants, Shape and its int64 arithmetic) is computed on the host right
 *      there, as the CPU executor does; the others run on the device and must be fp32;
 *   2. lifetimes: each device value lives from its step to the last device step reading it
 *      (graph outputs to the end); Reshape / Squeeze alias their input, whose lifetime grows;
 *   3. offsets: the steps are simulated in order with a first-fit allocator over one arena, so
 *      values whose lifetimes do not overlap share bytes; the arena's peak plus the cuDNN
 *      workspace is checked against max_bytes before anything is allocated;
 *   4. per convolution: descriptors and the fastest algorithm cudnnFind measures (fp32 FMA only
 *      unless tf32), a pre-padding buffer when the pads are asymmetric; the choice is kept in
 *      a process-wide table keyed by the convolution's shape, device and precision, so every
 *      later session and plan with that convolution takes it without a search, and searches run
 *      one at a time (timed on a quiet device, never short of memory because another session
 *      is searching beside them);
 *   5. device copies of the constants the device steps read (session constants once per
 *      session, host-computed values per plan), pinned staging for the inputs and outputs.
 * A run: the inputs into pinned staging, then either the recorded CUDA graph (from the second
 * run of a plan on) or the steps one by one on the session's stream, then one synchronisation.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/onnx_ops.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/k_onnx.h"
#include "backend/cuda/onnx_cuda.h"

#define CX_DEFAULT_MAX_BYTES ((size_t)8 << 30)
#define CX_CONV_WS_MAX ((size_t)256 << 20) /* largest cuDNN workspace an algorithm may take */
#define CX_BLAS_WS ((size_t)32 << 20)
#define CX_ALIGN 256

/* cuDNN / cuBLAS status inside a run: a failure while capturing a graph gives the graph up
 * (s->cap_fail); any other failure is a broken invariant. */
#define CX_CKD(s, call)                                                                    \
    do {                                                                                   \
        cudnnStatus_t d_ = (call);                                                         \
        if (d_ != CUDNN_STATUS_SUCCESS) {                                                  \
            if ((s)->capturing) { (s)->cap_fail = 1; break; }                              \
            fprintf(stderr, "%s:%d: cuDNN error %s (in %s)\n", __FILE__, __LINE__,         \
                    cudnnGetErrorString(d_), #call);                                       \
            abort();                                                                       \
        }                                                                                  \
    } while (0)
#define CX_CKB(s, call)                                                                    \
    do {                                                                                   \
        cublasStatus_t b_ = (call);                                                        \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            if ((s)->capturing) { (s)->cap_fail = 1; break; }                              \
            FR_CKB(b_);                                                                    \
        }                                                                                  \
    } while (0)
#define CX_CK(s, call)                                                                     \
    do {                                                                                   \
        cudaError_t c_ = (call);                                                           \
        if (c_ != cudaSuccess) {                                                           \
            if ((s)->capturing) { (s)->cap_fail = 1; break; }                              \
            FR_CK(c_);                                                                     \
        }                                                                                  \
    } while (0)
/* planning-time cuDNN calls (descriptors): failures there are broken invariants too */
#define CX_DNN(call)                                                                       \
    do {                                                                                   \
        cudnnStatus_t d_ = (call);                                                         \
        if (d_ != CUDNN_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s:%d: cuDNN error %s (in %s)\n", __FILE__, __LINE__,         \
                    cudnnGetErrorString(d_), #call);                                       \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* A convolution's cuDNN state in one plan. */
typedef struct cx_conv {
    int on;                              /* descriptors made */
    cudnnTensorDescriptor_t xd, yd;      /* x (N, C, H', W') as cuDNN sees it, y (N, M, OH, OW) */
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo;                            /* cudnnConvolutionFwdAlgo_t / BwdDataAlgo_t */
    size_t ws;                           /* workspace bytes of algo */
    int prepad;                          /* 1: x is first copied into a zero-padded buffer */
    int64_t N, C, H, W, M, OH, OW, pt, pl, Hp, Wp;
    size_t pad_off;                      /* arena offset of the padded copy */
} cx_conv;

typedef struct cx_plan {
    int64_t *key;        /* per graph input: rank, then its dims */
    int key_len;
    uint64_t used;       /* tick of the last run */
    ox_t *v;             /* (nv) shapes; host data of constants and host-computed values */
    uint8_t *own;        /* (nv) v[i].p malloc'd by the plan */
    uint8_t *rt;         /* (ns) the step runs on the device */
    void **dp;           /* (nv) device address of each value the device reads or writes */
    uint8_t *up;         /* (nv) dp[v] is a cudaMalloc of the plan (a host value uploaded) */
    char *arena;
    size_t arena_bytes;
    void *ws;            /* cuDNN workspace, the largest of the plan's algorithms */
    size_t ws_bytes;
    cx_conv *cv;         /* (ns) */
    float **hin, **hout; /* (n_inputs, n_outputs) pinned staging; hout[i] NULL: host value */
    float **outconv;     /* (n_outputs) int64 host outputs as floats */
    float **dred;        /* (n_outputs) with argmax_last: the device's (rows, 2) reduction */
    int64_t *red_rows;   /* (n_outputs) its rows (0: the output comes back whole) */
    int runs;
    int gstate;          /* 0 not tried, 1 graph made, -1 capture failed: step by step */
    cudaGraphExec_t gx;
} cx_plan;

struct fr_onnx_cuda_sess {
    const fr_onnx_model *m;
    fr_onnx_cuda_opts o;
    int dev;
    fr_onnx_sess *cpu;        /* the preparation */
    const ox_step *steps;     /* (ns) cpu's */
    const ox_t *kv;           /* (nv) cpu's constants */
    int nv, ns;
    uint8_t *is_out;          /* (nv) */
    void **kdev;              /* (nv) device copies of session constants, made when needed */
    float **wdev, **bdev;     /* (ns) folded Conv weights and bias on the device */
    cudaStream_t st;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    void *blas_ws;
    cx_plan **plans;
    int n_plans;
    uint64_t tick;
    int capturing, cap_fail;  /* inside a graph capture; a call failed during it */
    int last_graphed;
};

fr_onnx_cuda_opts fr_onnx_cuda_default_opts(void) {
    return (fr_onnx_cuda_opts){.max_bytes = CX_DEFAULT_MAX_BYTES, .tf32 = 1, .graphs = 1, .max_plans = 16, .poison = 0};
}

static size_t tbytes(const ox_t *t) { return (size_t)t->n * (t->dt == FR_ONNX_DTYPE_I64 ? 8 : 4); }
static size_t align_up(size_t b) { return (b + CX_ALIGN - 1) / CX_ALIGN * CX_ALIGN; }
static const fr_onnx_node *snode(const fr_onnx_cuda_sess *s, int i) { return &s->m->nodes[i]; }

/* Whether input k of step i is read on the device when the step runs there (the others are
 * parameters the host reads: Reshape's shape, Slice's starts, Resize's scales, Clip's bounds,
 * a Conv's weights folded at preparation). */
static int dev_input(const fr_onnx_cuda_sess *s, int i, int k) {
    const fr_onnx_node *n = snode(s, i);
    if (n->in[k] < 0) return 0;
    switch (n->op) {
    case FR_ONNX_OP_Reshape:
    case FR_ONNX_OP_Squeeze:
    case FR_ONNX_OP_Slice:
    case FR_ONNX_OP_Resize:
    case FR_ONNX_OP_Clip:
    case FR_ONNX_OP_Cast: return k == 0;
    case FR_ONNX_OP_Conv: return k == 0 || (!s->steps[i].w && k <= 2);
    default: return 1;
    }
}

static int is_alias(const fr_onnx_node *n) {
    return n->op == FR_ONNX_OP_Reshape || n->op == FR_ONNX_OP_Squeeze;
}

/* ---------------------------------------------------------------- first-fit arena */

typedef struct cx_blk { size_t off, size; } cx_blk;
typedef struct cx_alloc {
    cx_blk *b;  /* live blocks sorted by offset */
    int n, cap;
    size_t peak;
} cx_alloc;

static size_t arena_get(cx_alloc *a, size_t size) {
    size = align_up(size ? size : 1);
    size_t at = 0;
    int pos = 0;
    for (; pos < a->n; pos++) {
        if (a->b[pos].off >= at + size) break;
        at = a->b[pos].off + a->b[pos].size;
    }
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->b = fr_xrealloc(a->b, (size_t)a->cap * sizeof *a->b);
    }
    memmove(a->b + pos + 1, a->b + pos, (size_t)(a->n - pos) * sizeof *a->b);
    a->b[pos] = (cx_blk){at, size};
    a->n++;
    if (at + size > a->peak) a->peak = at + size;
    return at;
}

static void arena_put(cx_alloc *a, size_t off) {
    for (int i = 0; i < a->n; i++)
        if (a->b[i].off == off) {
            memmove(a->b + i, a->b + i + 1, (size_t)(a->n - i - 1) * sizeof *a->b);
            a->n--;
            return;
        }
}

/* ---------------------------------------------------------------- plans */

static void plan_free(fr_onnx_cuda_sess *s, cx_plan *p) {
    if (!p) return;
    if (p->gstate == 1) cudaGraphExecDestroy(p->gx);
    for (int v = 0; v < s->nv; v++) {
        if (p->own && p->own[v]) free(p->v[v].p);
        if (p->up && p->up[v]) cudaFree(p->dp[v]);
    }
    for (int i = 0; p->cv && i < s->ns; i++) {
        cx_conv *c = &p->cv[i];
        if (!c->on) continue;
        cudnnDestroyTensorDescriptor(c->xd);
        cudnnDestroyTensorDescriptor(c->yd);
        cudnnDestroyFilterDescriptor(c->wd);
        cudnnDestroyConvolutionDescriptor(c->cd);
    }
    for (int i = 0; p->hin && i < s->m->n_inputs; i++) cudaFreeHost(p->hin[i]);
    for (int i = 0; p->hout && i < s->m->n_outputs; i++) {
        cudaFreeHost(p->hout[i]);
        free(p->outconv[i]);
        if (p->dred) cudaFree(p->dred[i]);
    }
    free(p->dred);
    free(p->red_rows);
    cudaFree(p->arena);
    cudaFree(p->ws);
    free(p->key);
    free(p->v);
    free(p->own);
    free(p->rt);
    free(p->dp);
    free(p->up);
    free(p->cv);
    free(p->hin);
    free(p->hout);
    free(p->outconv);
    free(p);
}

static int check_inputs(fr_onnx_cuda_sess *s, cx_plan *p, const fr_onnx_arr *in, int n_in,
                        int n_out, fr_err *err) {
    const fr_onnx_model *m = s->m;
    if (n_in != m->n_inputs || n_out != m->n_outputs) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %d inputs and %d outputs given, the graph has %d and %d",
                    m->path, n_in, n_out, m->n_inputs, m->n_outputs);
        return -1;
    }
    for (int i = 0; i < n_in; i++) {
        const fr_onnx_io *io = &m->inputs[i];
        const char *name = m->values[io->value].name;
        if (in[i].rank != io->rank || in[i].rank < 0 || in[i].rank > FR_ONNX_MAX_RANK) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: input %s has rank %d, the graph takes %d",
                        m->path, name, in[i].rank, io->rank);
            return -1;
        }
        for (int k = 0; k < io->rank; k++)
            if (in[i].dims[k] < 0 || (io->dims[k] >= 0 && in[i].dims[k] != io->dims[k])) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: input %s dim %d is %lld, the graph takes %lld",
                            m->path, name, k, (long long)in[i].dims[k], (long long)io->dims[k]);
                return -1;
            }
        if (p) {
            ox_t *t = &p->v[io->value];
            if (ox_set_shape(t, FR_ONNX_DTYPE_F32, in[i].rank, in[i].dims)) {
                fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: input %s has over %lld elements", m->path,
                            name, (long long)FR_ONNX_MAX_ELEMS);
                return -1;
            }
            t->p = NULL;
        }
    }
    return 0;
}

/* Step 1 of a plan: shapes, host-computed steps, which steps run on the device. */
static int plan_shapes(fr_onnx_cuda_sess *s, cx_plan *p, fr_err *err) {
    const fr_onnx_model *m = s->m;
    ox_ctx c = {m, NULL, err, NULL};
    size_t host = 0;
    for (int i = 0; i < s->ns; i++) {
        const ox_step *st = &s->steps[i];
        if (st->skip) continue;
        const fr_onnx_node *n = snode(s, i);
        ox_t *in[FR_ONNX_MAX_IO];
        for (int k = 0; k < n->n_in; k++) in[k] = n->in[k] >= 0 ? &p->v[n->in[k]] : NULL;
        int known = 1;
        for (int k = 0; k < n->n_in; k++)
            if (in[k] && !in[k]->p && in[k]->n && n->op != FR_ONNX_OP_Shape) known = 0;
        ox_t out = {0};
        int64_t scratch = 0;
        if (ox_op_get(n->op)(&c, st, in, n->n_in, &out, &scratch, 1)) return -1;
        if (!known) {
            p->rt[i] = 1;
            out.p = NULL;
            p->v[st->out] = out;
            int bad = out.dt != FR_ONNX_DTYPE_F32;
            for (int k = 0; k < n->n_in; k++)
                if (dev_input(s, i, k) && in[k]->dt != FR_ONNX_DTYPE_F32) bad = 1;
            if (bad)
                return ox_fail(&c, n, FR_ERR_UNSUPPORTED,
                               "an int64 tensor computed from data (the device runs fp32 only)");
            continue;
        }
        const size_t ob = tbytes(&out), sb = (size_t)scratch * 4;
        host += ob;
        if (host + sb > s->o.max_bytes)
            return ox_fail(&c, n, FR_ERR_TOO_LARGE, "the run needs over %zu bytes of work memory",
                           s->o.max_bytes);
        out.p = malloc(ob ? ob : 1);
        c.scratch = sb ? malloc(sb) : NULL;
        if (!out.p || (sb && !c.scratch)) {
            free(out.p);
            free(c.scratch);
            fr_err_setc(err, FR_ERR_INTERNAL, "%s: out of memory", m->path);
            return -1;
        }
        const int rc = ox_op_get(n->op)(&c, st, in, n->n_in, &out, &scratch, 0);
        free(c.scratch);
        c.scratch = NULL;
        p->v[st->out] = out;
        p->own[st->out] = 1;
        if (rc) return -1;
    }
    return 0;
}

/* The device address of constant v of the session, uploaded on first use; NULL out of memory. */
static void *kdev_get(fr_onnx_cuda_sess *s, int v) {
    if (s->kdev[v]) return s->kdev[v];
    const size_t b = tbytes(&s->kv[v]);
    if (cudaMalloc(&s->kdev[v], b ? b : 4) != cudaSuccess) {
        cudaGetLastError();
        s->kdev[v] = NULL;
        return NULL;
    }
    FR_CK(cudaMemcpyAsync(s->kdev[v], s->kv[v].p, b, cudaMemcpyHostToDevice, s->st));
    return s->kdev[v];
}

/* Conv attributes as the CPU op reads them (it has validated them in its dry call). */
static void conv_attrs(const fr_onnx_node *n, int64_t *sh, int64_t *sw, int64_t *dh, int64_t *dw,
                       int64_t pads[4]) {
    int cnt;
    const int64_t *v;
    *sh = *sw = *dh = *dw = 1;
    pads[0] = pads[1] = pads[2] = pads[3] = 0;
    if ((v = ox_attr_ints(n, "strides", &cnt)) && cnt == 2) *sh = v[0], *sw = v[1];
    if ((v = ox_attr_ints(n, "dilations", &cnt)) && cnt == 2) *dh = v[0], *dw = v[1];
    if ((v = ox_attr_ints(n, "pads", &cnt)) && cnt == 4) memcpy(pads, v, 4 * sizeof *pads);
}

/* The algorithm table: what one search chose for a convolution. Shapes are few (a model has a
 * few dozen convolutions, a session a few input shapes), so a full table stops adding and the
 * searches go on uncached. */
enum { CX_ALGO_CAP = 4096, CX_KEY_N = 20 };
typedef struct cx_algo_entry {
    int key[CX_KEY_N];
    int algo, math;
    size_t ws;
} cx_algo_entry;
static pthread_mutex_t cx_algo_mu = PTHREAD_MUTEX_INITIALIZER;
static cx_algo_entry cx_algo_tab[CX_ALGO_CAP];
static int cx_algo_n;

/* The key of convolution c of session s (transposed when tr). */
static void algo_key(const fr_onnx_cuda_sess *s, const cx_conv *c, const int64_t *wd, int tr,
                     int64_t ph, int64_t pw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                     int64_t g, int key[CX_KEY_N]) {
    const int64_t k[CX_KEY_N] = {s->dev, tr,    s->o.tf32, c->N,  c->C,  c->Hp, c->Wp,
                                 c->M,   c->OH, c->OW,     wd[0], wd[1], wd[2], wd[3],
                                 ph,     pw,    sh,        sw,    dh * 65536 + dw, g};
    for (int i = 0; i < CX_KEY_N; i++) key[i] = (int)k[i];
}

/* Under cx_algo_mu: the entry for key, or NULL. */
static const cx_algo_entry *algo_find(const int key[CX_KEY_N]) {
    for (int i = 0; i < cx_algo_n; i++)
        if (!memcmp(cx_algo_tab[i].key, key, sizeof cx_algo_tab[i].key)) return &cx_algo_tab[i];
    return NULL;
}

/* Under cx_algo_mu: keeps a choice (dropped when the table is full). */
static void algo_keep(const int key[CX_KEY_N], int algo, int math, size_t ws) {
    if (cx_algo_n >= CX_ALGO_CAP) return;
    cx_algo_entry *e = &cx_algo_tab[cx_algo_n++];
    memcpy(e->key, key, sizeof e->key);
    e->algo = algo, e->math = math, e->ws = ws;
}

/* Whether an algorithm's math type keeps the session's precision: FMA always, TF32 tensor
 * cores with tf32; never ALLOW_CONVERSION (it may round fp32 inputs to fp16). */
static int math_ok(const fr_onnx_cuda_sess *s, cudnnMathType_t t) {
    return t == CUDNN_FMA_MATH || t == CUDNN_DEFAULT_MATH || (s->o.tf32 && t == CUDNN_TENSOR_OP_MATH);
}

/* The first usable algorithm of perf[0..got): status success, workspace within the cap, math
 * type keeping the precision; its index or -1. */
static int first_fwd(const fr_onnx_cuda_sess *s, const cudnnConvolutionFwdAlgoPerf_t *perf, int got) {
    for (int k = 0; k < got; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= CX_CONV_WS_MAX &&
            math_ok(s, perf[k].mathType))
            return k;
    return -1;
}

static int first_bwd(const fr_onnx_cuda_sess *s, const cudnnConvolutionBwdDataAlgoPerf_t *perf,
                     int got) {
    for (int k = 0; k < got; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= CX_CONV_WS_MAX &&
            math_ok(s, perf[k].mathType))
            return k;
    return -1;
}

/* The forward algorithm of c: cudnnFind's fastest usable one, else cuDNN's heuristic ranking
 * (Find times every algorithm with buffers it allocates itself, and fails when the device is
 * short of memory at that moment; the ranking allocates nothing). 0, or -1 when none. */
static int pick_fwd(fr_onnx_cuda_sess *s, cx_conv *c, int *math) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    if (cudnnFindConvolutionForwardAlgorithm(s->dnn, c->xd, c->wd, c->cd, c->yd,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf) !=
        CUDNN_STATUS_SUCCESS)
        got = 0;
    int pick = first_fwd(s, perf, got);
    if (pick < 0) {
        got = 0;
        if (cudnnGetConvolutionForwardAlgorithm_v7(s->dnn, c->xd, c->wd, c->cd, c->yd,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                   perf) != CUDNN_STATUS_SUCCESS)
            got = 0;
        pick = first_fwd(s, perf, got);
    }
    if (pick < 0) return -1;
    c->algo = (int)perf[pick].algo;
    c->ws = perf[pick].memory;
    *math = (int)perf[pick].mathType;
    return 0;
}

/* The transposed convolution's algorithm: the transposed convolution of x is the data gradient
 * of a convolution whose output is x: dy = x (N, C, H, W), dx = y (N, M, OH, OW), the filter
 * (C, M/g, kh, kw). 0, or -1 when none. */
static int pick_bwd(fr_onnx_cuda_sess *s, cx_conv *c, int *math) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int got = 0;
    if (cudnnFindConvolutionBackwardDataAlgorithm(s->dnn, c->wd, c->xd, c->cd, c->yd,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                  perf) != CUDNN_STATUS_SUCCESS)
        got = 0;
    int pick = first_bwd(s, perf, got);
    if (pick < 0) return -1;
    c->algo = (int)perf[pick].algo;
    c->ws = perf[pick].memory;
    *math = (int)perf[pick].mathType;
    return 0;
}

/* Step 4 for step i: descriptors and algorithm. */
static int plan_conv(fr_onnx_cuda_sess *s, cx_plan *p, int i, cx_alloc *al, fr_err *err) {
    const fr_onnx_node *n = snode(s, i);
    const ox_step *st = &s->steps[i];
    cx_conv *c = &p->cv[i];
    const ox_t *x = &p->v[n->in[0]], *y = &p->v[st->out];
    const int64_t *wd = st->w ? st->wdims : p->v[n->in[1]].d;
    int64_t sh, sw, dh, dw, pads[4];
    conv_attrs(n, &sh, &sw, &dh, &dw, pads);
    const int64_t g = ox_attr_i(n, "group", 1);
    const int tr = n->op == FR_ONNX_OP_ConvTranspose;
    c->N = x->d[0], c->C = x->d[1], c->H = x->d[2], c->W = x->d[3];
    c->M = y->d[1], c->OH = y->d[2], c->OW = y->d[3];
    c->Hp = c->H, c->Wp = c->W;
    if (!c->N || !c->C || !c->H || !c->W || !c->M || !c->OH || !c->OW)
        return ox_fail(&(ox_ctx){s->m, NULL, err, NULL}, n, FR_ERR_BAD_REQUEST,
                       "an empty tensor (a dimension of 0) on the device");
    int64_t ph = pads[0], pw = pads[1];
    if (pads[0] != pads[2] || pads[1] != pads[3]) {
        if (tr)
            return ox_fail(&(ox_ctx){s->m, NULL, err, NULL}, n, FR_ERR_UNSUPPORTED,
                           "asymmetric pads on the device");
        c->prepad = 1;
        c->pt = pads[0], c->pl = pads[1];
        c->Hp = c->H + pads[0] + pads[2];
        c->Wp = c->W + pads[1] + pads[3];
        ph = pw = 0;
    }
    CX_DNN(cudnnCreateTensorDescriptor(&c->xd));
    CX_DNN(cudnnCreateTensorDescriptor(&c->yd));
    CX_DNN(cudnnCreateFilterDescriptor(&c->wd));
    CX_DNN(cudnnCreateConvolutionDescriptor(&c->cd));
    c->on = 1;
    CX_DNN(cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)c->N, (int)c->C,
                                      (int)c->Hp, (int)c->Wp));
    CX_DNN(cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)c->N, (int)c->M,
                                      (int)c->OH, (int)c->OW));
    CX_DNN(cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)wd[0], (int)wd[1],
                                      (int)wd[2], (int)wd[3]));
    CX_DNN(cudnnSetConvolution2dDescriptor(c->cd, (int)ph, (int)pw, (int)sh, (int)sw, (int)dh, (int)dw,
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CX_DNN(cudnnSetConvolutionGroupCount(c->cd, (int)g));
    CX_DNN(cudnnSetConvolutionMathType(c->cd, s->o.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    if (!tr) {
        int on, oc, oh, ow;
        CX_DNN(cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh, &ow));
        if (on != c->N || oc != c->M || oh != c->OH || ow != c->OW)
            return ox_fail(&(ox_ctx){s->m, NULL, err, NULL}, n, FR_ERR_UNSUPPORTED,
                           "cuDNN's output %dx%d differs from %lldx%lld", oh, ow,
                           (long long)c->OH, (long long)c->OW);
    }
    int key[CX_KEY_N];
    algo_key(s, c, wd, tr, ph, pw, sh, sw, dh, dw, g, key);
    pthread_mutex_lock(&cx_algo_mu);
    const cx_algo_entry *hit = algo_find(key);
    int math = 0, rc = 0;
    if (hit) {
        c->algo = hit->algo, c->ws = hit->ws, math = hit->math;
    } else {
        rc = tr ? pick_bwd(s, c, &math) : pick_fwd(s, c, &math);
        if (!rc) algo_keep(key, c->algo, math, c->ws);
    }
    pthread_mutex_unlock(&cx_algo_mu);
    if (rc)
        return ox_fail(&(ox_ctx){s->m, NULL, err, NULL}, n, FR_ERR_UNSUPPORTED,
                       tr ? "cuDNN has no algorithm for this transposed convolution"
                          : "cuDNN has no forward algorithm for this convolution");
    CX_DNN(cudnnSetConvolutionMathType(c->cd, (cudnnMathType_t)math));
    if (c->ws > p->ws_bytes) p->ws_bytes = c->ws;
    (void)al;
    return 0;
}

/* Steps 2-5 of a plan. */
static int plan_memory(fr_onnx_cuda_sess *s, cx_plan *p, fr_err *err) {
    const fr_onnx_model *m = s->m;
    const int nv = s->nv;
    int *lastrt = fr_xmalloc((size_t)(nv + 1) * sizeof(int));
    int *root = fr_xmalloc((size_t)(nv + 1) * sizeof(int));
    int *eff = fr_xmalloc((size_t)(nv + 1) * sizeof(int));
    uint8_t *dev = fr_xcalloc((size_t)nv + 1, 1);    /* lives in the arena */
    uint8_t *live = fr_xcalloc((size_t)nv + 1, 1);
    size_t *off = fr_xcalloc((size_t)nv + 1, sizeof(size_t));
    cx_alloc al = {0};
    int rc = -1;
    for (int v = 0; v < nv; v++) lastrt[v] = -1, root[v] = v, eff[v] = -1;
    for (int i = 0; i < s->ns; i++) {
        if (!p->rt[i]) continue;
        const fr_onnx_node *n = snode(s, i);
        for (int k = 0; k < n->n_in; k++)
            if (dev_input(s, i, k)) lastrt[n->in[k]] = i;
        dev[s->steps[i].out] = 1;
    }
    for (int i = 0; i < m->n_inputs; i++) {
        const int v = m->inputs[i].value;
        if (lastrt[v] >= 0 || s->is_out[v]) dev[v] = 1;
    }
    for (int v = 0; v < nv; v++)
        if (s->is_out[v] && dev[v]) lastrt[v] = INT_MAX;
    for (int i = 0; i < s->ns; i++)
        if (p->rt[i] && is_alias(snode(s, i))) root[s->steps[i].out] = root[snode(s, i)->in[0]];
    for (int v = 0; v < nv; v++)
        if (dev[v] && lastrt[v] > eff[root[v]]) eff[root[v]] = lastrt[v];
    /* the simulation */
    for (int i = 0; i < m->n_inputs; i++) {
        const int v = m->inputs[i].value;
        if (dev[v] && !live[v]) off[v] = arena_get(&al, tbytes(&p->v[v])), live[v] = 1;
    }
    for (int i = 0; i < s->ns; i++) {
        if (!p->rt[i]) continue;
        const fr_onnx_node *n = snode(s, i);
        const int o = s->steps[i].out;
        if (!is_alias(n)) {
            off[o] = arena_get(&al, tbytes(&p->v[o]));
            live[o] = 1;
        }
        if (n->op == FR_ONNX_OP_Conv || n->op == FR_ONNX_OP_ConvTranspose) {
            if (plan_conv(s, p, i, &al, err)) goto done;
            cx_conv *c = &p->cv[i];
            if (c->prepad) {
                c->pad_off = arena_get(&al, (size_t)(c->N * c->C * c->Hp * c->Wp) * 4);
                arena_put(&al, c->pad_off);
            }
        }
        for (int k = 0; k < n->n_in; k++) {
            if (!dev_input(s, i, k)) continue;
            const int r = root[n->in[k]];
            if (live[r] && eff[r] == i) arena_put(&al, off[r]), live[r] = 0;
        }
        if (!is_alias(n) && eff[o] < i && live[o]) arena_put(&al, off[o]), live[o] = 0;
    }
    p->arena_bytes = al.peak;
    if (p->arena_bytes + p->ws_bytes > s->o.max_bytes) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: the run needs %zu bytes of device memory, over %zu",
                    m->path, p->arena_bytes + p->ws_bytes, s->o.max_bytes);
        goto done;
    }
    if (cudaMalloc((void **)&p->arena, p->arena_bytes ? p->arena_bytes : CX_ALIGN) != cudaSuccess ||
        (p->ws_bytes && cudaMalloc(&p->ws, p->ws_bytes) != cudaSuccess)) {
        cudaGetLastError();
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: out of device memory for %zu bytes", m->path,
                    p->arena_bytes + p->ws_bytes);
        goto done;
    }
    for (int v = 0; v < nv; v++)
        if (dev[v]) p->dp[v] = p->arena + off[root[v]];
    /* constants and host-computed values the device reads */
    for (int i = 0; i < s->ns; i++) {
        if (!p->rt[i]) continue;
        const fr_onnx_node *n = snode(s, i);
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (!dev_input(s, i, k) || p->dp[v]) continue;
            if (s->kv[v].p && !p->own[v]) {
                p->dp[v] = kdev_get(s, v);
            } else if (p->v[v].p) {
                const size_t b = tbytes(&p->v[v]);
                if (cudaMalloc(&p->dp[v], b ? b : 4) != cudaSuccess) p->dp[v] = NULL;
                else {
                    FR_CK(cudaMemcpyAsync(p->dp[v], p->v[v].p, b, cudaMemcpyHostToDevice, s->st));
                    p->up[v] = 1;
                }
            }
            if (!p->dp[v]) {
                cudaGetLastError();
                fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: out of device memory for a constant", m->path);
                goto done;
            }
        }
    }
    for (int i = 0; i < m->n_inputs; i++) {
        const int v = m->inputs[i].value;
        if (p->dp[v] && cudaMallocHost((void **)&p->hin[i], tbytes(&p->v[v]) ? tbytes(&p->v[v]) : 4) != cudaSuccess)
            goto oom;
    }
    for (int i = 0; i < m->n_outputs; i++) {
        const int v = m->outputs[i].value;
        if (!p->dp[v] || p->v[v].p) continue;
        const ox_t *t = &p->v[v];
        if (s->o.argmax_last && t->rank >= 2 && t->d[t->rank - 1] > 0 && t->n > 0)
            p->red_rows[i] = t->n / t->d[t->rank - 1];
        const size_t hb = p->red_rows[i] ? (size_t)p->red_rows[i] * 2 * sizeof(float) : tbytes(t);
        if (cudaMallocHost((void **)&p->hout[i], hb ? hb : 4) != cudaSuccess) goto oom;
        if (p->red_rows[i] && cudaMalloc((void **)&p->dred[i], hb) != cudaSuccess) {
            cudaGetLastError();
            fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: out of device memory for %zu bytes", m->path, hb);
            goto done;
        }
    }
    /* the uploads are on the session's stream (no device-wide synchronisation: another
     * thread's session may be capturing a graph) */
    FR_CK(cudaStreamSynchronize(s->st));
    rc = 0;
    goto done;
oom:
    cudaGetLastError();
    fr_err_setc(err, FR_ERR_INTERNAL, "%s: out of pinned host memory", m->path);
done:
    free(lastrt);
    free(root);
    free(eff);
    free(dev);
    free(live);
    free(off);
    free(al.b);
    return rc;
}

static cx_plan *plan_new(fr_onnx_cuda_sess *s, const fr_onnx_arr *in, fr_err *err) {
    const fr_onnx_model *m = s->m;
    cx_plan *p = fr_xcalloc(1, sizeof *p);
    p->key_len = m->n_inputs * (1 + FR_ONNX_MAX_RANK);
    p->key = fr_xcalloc((size_t)p->key_len + 1, sizeof(int64_t));
    for (int i = 0; i < m->n_inputs; i++) {
        p->key[i * (1 + FR_ONNX_MAX_RANK)] = in[i].rank;
        for (int k = 0; k < in[i].rank; k++) p->key[i * (1 + FR_ONNX_MAX_RANK) + 1 + k] = in[i].dims[k];
    }
    p->v = fr_xcalloc((size_t)s->nv + 1, sizeof *p->v);
    p->own = fr_xcalloc((size_t)s->nv + 1, 1);
    p->rt = fr_xcalloc((size_t)s->ns + 1, 1);
    p->dp = fr_xcalloc((size_t)s->nv + 1, sizeof *p->dp);
    p->up = fr_xcalloc((size_t)s->nv + 1, 1);
    p->cv = fr_xcalloc((size_t)s->ns + 1, sizeof *p->cv);
    p->hin = fr_xcalloc((size_t)m->n_inputs + 1, sizeof *p->hin);
    p->hout = fr_xcalloc((size_t)m->n_outputs + 1, sizeof *p->hout);
    p->outconv = fr_xcalloc((size_t)m->n_outputs + 1, sizeof *p->outconv);
    p->dred = fr_xcalloc((size_t)m->n_outputs + 1, sizeof *p->dred);
    p->red_rows = fr_xcalloc((size_t)m->n_outputs + 1, sizeof *p->red_rows);
    for (int v = 0; v < s->nv; v++)
        if (s->kv[v].p) p->v[v] = s->kv[v];
    if (check_inputs(s, p, in, m->n_inputs, m->n_outputs, err) || plan_shapes(s, p, err) ||
        plan_memory(s, p, err)) {
        plan_free(s, p);
        return NULL;
    }
    for (int i = 0; i < m->n_outputs; i++) {
        const ox_t *t = &p->v[m->outputs[i].value];
        if (t->p && t->dt == FR_ONNX_DTYPE_I64) {
            p->outconv[i] = fr_xmalloc((size_t)(t->n ? t->n : 1) * sizeof(float));
            for (int64_t k = 0; k < t->n; k++) p->outconv[i][k] = (float)((const int64_t *)t->p)[k];
        }
    }
    return p;
}

/* ---------------------------------------------------------------- the steps on the device */

/* The step's fused program for the kernels (the same instructions: k_onnx.h mirrors ox_ep_op). */
static kox_epi epi_of(const ox_epi *e) {
    _Static_assert(OX_EP_MAX <= KOX_EP_MAX, "epilogue length");
    _Static_assert((int)OX_EP_MULSAVED == (int)KOX_EP_MULSAVED && (int)OX_EP_HSIG == (int)KOX_EP_HSIG,
                   "epilogue opcodes");
    kox_epi k;
    memset(&k, 0, sizeof k);
    k.n = e->n;
    for (int i = 0; i < e->n; i++) {
        k.ins[i].op = (int)e->ins[i].op;
        k.ins[i].a = e->ins[i].a;
        k.ins[i].b = e->ins[i].b;
    }
    return k;
}

/* Broadcast strides of t aligned to the output (r, d); 0 where t broadcasts. */
static void bstrides(const ox_t *t, int r, const int64_t *d, int64_t *st) {
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        const int it = i - (r - t->rank);
        const int64_t dt = it >= 0 ? t->d[it] : 1;
        st[i] = (dt == 1 && d[i] != 1) ? 0 : s;
        s *= dt;
    }
}

/* Output axes of 1 dropped, neighbours that both inputs step through alike merged. */
static void idx_coalesce(kox_idx *ix, int r, const int64_t *d, const int64_t *sa, const int64_t *sb) {
    int q = 0;
    for (int i = 0; i < r; i++) {
        if (d[i] == 1) continue;
        if (q > 0) {
            const int j = q - 1;
            const int ca = (sa[i] == 0 && ix->sa[j] == 0) || (sa[i] != 0 && ix->sa[j] == sa[i] * d[i]);
            const int cb = (sb[i] == 0 && ix->sb[j] == 0) || (sb[i] != 0 && ix->sb[j] == sb[i] * d[i]);
            if (ca && cb) {
                ix->d[j] *= d[i];
                ix->sa[j] = sa[i];
                ix->sb[j] = sb[i];
                continue;
            }
        }
        ix->d[q] = d[i];
        ix->sa[q] = sa[i];
        ix->sb[q] = sb[i];
        q++;
    }
    if (q == 0) ix->d[0] = 1, ix->sa[0] = ix->sb[0] = 0, q = 1;
    ix->r = q;
}

static void x_binary(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *a = &p->v[n->in[0]], *b = &p->v[n->in[1]], *y = &p->v[s->steps[i].out];
    int64_t sa[FR_ONNX_MAX_RANK], sb[FR_ONNX_MAX_RANK];
    bstrides(a, y->rank, y->d, sa);
    bstrides(b, y->rank, y->d, sb);
    kox_idx ix = {0};
    idx_coalesce(&ix, y->rank, y->d, sa, sb);
    ix.n = y->n;
    const kox_bin_op op = n->op == FR_ONNX_OP_Add ? KOX_ADD : n->op == FR_ONNX_OP_Sub ? KOX_SUB
                        : n->op == FR_ONNX_OP_Mul ? KOX_MUL : n->op == FR_ONNX_OP_Div ? KOX_DIV : KOX_POW;
    kox_binary(s->st, op, &ix, p->dp[n->in[0]], p->dp[n->in[1]], p->dp[s->steps[i].out]);
}

static void x_unary(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const int o = s->steps[i].out;
    float p0 = 0, p1 = 0;
    kox_un_op op = KOX_COPY;
    switch (n->op) {
    case FR_ONNX_OP_Relu: op = KOX_RELU; break;
    case FR_ONNX_OP_Sigmoid: op = KOX_SIGMOID; break;
    case FR_ONNX_OP_Sqrt: op = KOX_SQRT; break;
    case FR_ONNX_OP_HardSigmoid:
        op = KOX_HARDSIGMOID;
        p0 = ox_attr_f(n, "alpha", 0.2f);
        p1 = ox_attr_f(n, "beta", 0.5f);
        break;
    case FR_ONNX_OP_Clip:
        op = KOX_CLIP;
        p0 = -INFINITY;
        p1 = INFINITY;
        if (s->m->opset < 11) {
            p0 = ox_attr_f(n, "min", -INFINITY);
            p1 = ox_attr_f(n, "max", INFINITY);
        } else {
            for (int k = 1; k <= 2 && k < n->n_in; k++)
                if (n->in[k] >= 0) *(k == 1 ? &p0 : &p1) = *(const float *)p->v[n->in[k]].p;
        }
        break;
    default: break; /* Cast float to float */
    }
    kox_unary(s->st, op, p->v[o].n, p0, p1, p->dp[n->in[0]], p->dp[o]);
}

static void x_conv(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_step *st = &s->steps[i];
    cx_conv *c = &p->cv[i];
    const float one = 1.0f, zero = 0.0f;
    const float *x = p->dp[n->in[0]];
    float *y = p->dp[st->out];
    if (c->prepad) {
        float *xp = (float *)(p->arena + c->pad_off);
        kox_pad2d(s->st, x, xp, c->N * c->C, c->H, c->W, c->pt, c->pl, c->Hp, c->Wp);
        x = xp;
    }
    const float *w, *bias;
    if (n->op == FR_ONNX_OP_Conv && st->w) {
        w = s->wdev[i];
        bias = s->bdev[i];
    } else {
        w = p->dp[n->in[1]];
        bias = n->n_in > 2 && n->in[2] >= 0 ? p->dp[n->in[2]] : NULL;
    }
    if (n->op == FR_ONNX_OP_Conv)
        CX_CKD(s, cudnnConvolutionForward(s->dnn, &one, c->xd, x, c->wd, w, c->cd,
                                          (cudnnConvolutionFwdAlgo_t)c->algo, p->ws, c->ws, &zero,
                                          c->yd, y));
    else
        CX_CKD(s, cudnnConvolutionBackwardData(s->dnn, &one, c->wd, w, c->xd, x, c->cd,
                                               (cudnnConvolutionBwdDataAlgo_t)c->algo, p->ws, c->ws,
                                               &zero, c->yd, y));
    const kox_epi e = epi_of(&st->epi);
    kox_bias_epi(s->st, y, bias, c->N * c->M, c->M, c->OH * c->OW, &e);
}

static void x_bn(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]];
    const int64_t C = x->d[1], inner = x->d[0] > 0 && C > 0 ? x->n / (x->d[0] * C) : 0;
    const kox_epi e = epi_of(&s->steps[i].epi);
    kox_bn(s->st, p->dp[n->in[0]], p->dp[s->steps[i].out], p->dp[n->in[1]], p->dp[n->in[2]],
           p->dp[n->in[3]], p->dp[n->in[4]], ox_attr_f(n, "epsilon", 1e-5f), x->d[0], C, inner,
           &e);
}

static void x_pool(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]], *y = &p->v[s->steps[i].out];
    if (n->op == FR_ONNX_OP_GlobalAveragePool) {
        kox_row_mean(s->st, p->dp[n->in[0]], p->dp[s->steps[i].out], x->d[0] * x->d[1], x->d[2] * x->d[3]);
        return;
    }
    kox_pool q = {0};
    int cnt;
    const int64_t *k = ox_attr_ints(n, "kernel_shape", &cnt), *v;
    q.planes = x->d[0] * x->d[1], q.H = x->d[2], q.W = x->d[3], q.OH = y->d[2], q.OW = y->d[3];
    q.kh = k[0], q.kw = k[1], q.sh = q.sw = 1;
    if ((v = ox_attr_ints(n, "strides", &cnt)) && cnt == 2) q.sh = v[0], q.sw = v[1];
    if ((v = ox_attr_ints(n, "pads", &cnt)) && cnt == 4) q.pt = v[0], q.pl = v[1], q.pb = v[2], q.pr = v[3];
    q.is_max = n->op == FR_ONNX_OP_MaxPool;
    q.include_pad = (int)ox_attr_i(n, "count_include_pad", 0);
    kox_pool2d(s->st, &q, p->dp[n->in[0]], p->dp[s->steps[i].out]);
}

static void x_resize(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]], *y = &p->v[s->steps[i].out];
    const int old = s->m->opset < 11;
    const ox_t *sc = old ? (n->n_in > 1 && n->in[1] >= 0 ? &p->v[n->in[1]] : NULL)
                         : (n->n_in > 2 && n->in[2] >= 0 ? &p->v[n->in[2]] : NULL);
    const ox_t *sz = old ? NULL : (n->n_in > 3 && n->in[3] >= 0 ? &p->v[n->in[3]] : NULL);
    if (sc && sc->n == 0) sc = NULL;
    if (sz && sz->n == 0) sz = NULL;
    float scale[FR_ONNX_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        scale[k] = sz ? (x->d[k] ? (float)y->d[k] / (float)x->d[k] : 1.0f) : ((const float *)sc->p)[k];
    kox_resize_nearest(s->st, x->rank, x->d, y->d, scale, y->n, p->dp[n->in[0]], p->dp[s->steps[i].out]);
}

static void gemm(fr_onnx_cuda_sess *s, int64_t M, int64_t N, int64_t K, const float *a, int64_t sa,
                 const float *b, int64_t sb, float *y, int64_t batch) {
    const float one = 1.0f, zero = 0.0f;
    /* row-major y (M, N) = a (M, K) b (K, N) is column-major y^T = b^T a^T */
    CX_CKB(s, cublasSgemmStridedBatched(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                        &one, b, (int)N, sb, a, (int)K, sa, &zero, y, (int)N, M * N,
                                        (int)batch));
}

static void x_matmul(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *a = &p->v[n->in[0]], *b = &p->v[n->in[1]];
    const float *A = p->dp[n->in[0]], *B = p->dp[n->in[1]];
    float *Y = p->dp[s->steps[i].out];
    const int64_t M = a->rank >= 2 ? a->d[a->rank - 2] : 1, K = a->d[a->rank - 1];
    const int64_t N = b->rank >= 2 ? b->d[b->rank - 1] : 1;
    ox_t ab = {0}, bb = {0};
    ab.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    int64_t na = 1, nbb = 1;
    for (int k = 0; k < ab.rank; k++) ab.d[k] = a->d[k], na *= a->d[k];
    for (int k = 0; k < bb.rank; k++) bb.d[k] = b->d[k], nbb *= b->d[k];
    const int br = ab.rank > bb.rank ? ab.rank : bb.rank;
    int64_t bd[FR_ONNX_MAX_RANK] = {0}, nb = 1;
    for (int k = 0; k < br; k++) {
        const int ia = k - (br - ab.rank), ib = k - (br - bb.rank);
        const int64_t da = ia >= 0 ? ab.d[ia] : 1, db = ib >= 0 ? bb.d[ib] : 1;
        bd[k] = da == 1 ? db : da;
        nb *= bd[k];
    }
    if (nb == 0 || M == 0 || N == 0) return;
    if (nbb == 1) {
        gemm(s, nb * M, N, K, A, 0, B, 0, Y, 1);
        return;
    }
    if (nbb == nb && (na == nb || na == 1)) { /* b per batch, a per batch or shared */
        gemm(s, M, N, K, A, na == 1 ? 0 : M * K, B, K * N, Y, nb);
        return;
    }
    /* general broadcast of the batch dims: one product per batch */
    int64_t sA[FR_ONNX_MAX_RANK], sB[FR_ONNX_MAX_RANK], idx[FR_ONNX_MAX_RANK] = {0};
    bstrides(&ab, br, bd, sA);
    bstrides(&bb, br, bd, sB);
    for (int64_t t = 0; t < nb; t++) {
        int64_t oa = 0, ob = 0;
        for (int k = 0; k < br; k++) oa += idx[k] * sA[k], ob += idx[k] * sB[k];
        gemm(s, M, N, K, A + oa * M * K, 0, B + ob * K * N, 0, Y + t * M * N, 1);
        for (int j = br - 1; j >= 0; j--) {
            if (++idx[j] < bd[j]) break;
            idx[j] = 0;
        }
    }
}

static int norm_axis(int64_t a, int r) {
    if (a < 0) a += r;
    return a >= 0 && a < r ? (int)a : 0;
}

static void x_softmax(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]];
    const int new_def = s->m->opset >= 13;
    const int ax = norm_axis(ox_attr_i(n, "axis", new_def ? -1 : 1), x->rank);
    int64_t outer = 1, D = 1, inner = 1;
    for (int k = 0; k < ax; k++) outer *= x->d[k];
    if (new_def) {
        D = x->d[ax];
        for (int k = ax + 1; k < x->rank; k++) inner *= x->d[k];
    } else {
        for (int k = ax; k < x->rank; k++) D *= x->d[k];
    }
    kox_softmax(s->st, p->dp[n->in[0]], p->dp[s->steps[i].out], outer, D, inner);
}

static void x_reducemean(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]];
    int cnt;
    const int64_t *axes = ox_attr_ints(n, "axes", &cnt);
    int red[FR_ONNX_MAX_RANK] = {0};
    if (!axes)
        for (int k = 0; k < x->rank; k++) red[k] = 1;
    for (int k = 0; k < cnt; k++) red[norm_axis(axes[k], x->rank)] = 1;
    kox_reduce q = {0};
    int64_t xs[FR_ONNX_MAX_RANK], str = 1;
    for (int k = x->rank - 1; k >= 0; k--) xs[k] = str, str *= x->d[k];
    q.n_out = 1;
    q.cnt = 1;
    int trailing = 1, seen = 0;
    for (int k = 0; k < x->rank; k++) {
        if (red[k]) {
            seen = 1;
            q.rd[q.nr] = x->d[k], q.rs[q.nr] = xs[k], q.nr++, q.cnt *= x->d[k];
        } else {
            if (seen) trailing = 0;
            q.kd[q.nk] = x->d[k], q.ks[q.nk] = xs[k], q.nk++, q.n_out *= x->d[k];
        }
    }
    if (trailing) kox_row_mean(s->st, p->dp[n->in[0]], p->dp[s->steps[i].out], q.n_out, q.cnt);
    else kox_reduce_mean(s->st, &q, p->dp[n->in[0]], p->dp[s->steps[i].out]);
}

static void x_transpose(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]], *y = &p->v[s->steps[i].out];
    const int r = x->rank;
    int cnt;
    const int64_t *pv = ox_attr_ints(n, "perm", &cnt);
    int64_t xs[FR_ONNX_MAX_RANK], sa[FR_ONNX_MAX_RANK], zero[FR_ONNX_MAX_RANK] = {0}, str = 1;
    for (int k = r - 1; k >= 0; k--) xs[k] = str, str *= x->d[k];
    for (int k = 0; k < r; k++) sa[k] = xs[pv ? norm_axis(pv[k], r) : r - 1 - k];
    kox_idx ix = {0};
    idx_coalesce(&ix, r, y->d, sa, zero);
    ix.n = y->n;
    kox_gather(s->st, &ix, p->dp[n->in[0]], p->dp[s->steps[i].out]);
}

/* Slice: the start and step of each axis, as the CPU op computes them. */
static void x_slice(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x = &p->v[n->in[0]], *y = &p->v[s->steps[i].out];
    const int r = x->rank;
    int64_t sv[FR_ONNX_MAX_RANK] = {0}, av[FR_ONNX_MAX_RANK] = {0}, pv[FR_ONNX_MAX_RANK] = {0};
    int ns = 0, na = 0, np = 0;
    if (s->m->opset < 10) {
        int cnt;
        const int64_t *v;
        if ((v = ox_attr_ints(n, "starts", &cnt)) && cnt <= r) memcpy(sv, v, (size_t)(ns = cnt) * 8);
        if ((v = ox_attr_ints(n, "axes", &cnt)) && cnt <= r) memcpy(av, v, (size_t)(na = cnt) * 8);
    } else {
        const ox_t *t[3] = {&p->v[n->in[1]], n->n_in > 3 && n->in[3] >= 0 ? &p->v[n->in[3]] : NULL,
                            n->n_in > 4 && n->in[4] >= 0 ? &p->v[n->in[4]] : NULL};
        int64_t *dst[3] = {sv, av, pv};
        int *cn[3] = {&ns, &na, &np};
        for (int q = 0; q < 3; q++) {
            if (!t[q] || t[q]->n > r) continue;
            *cn[q] = (int)t[q]->n;
            for (int64_t k = 0; k < t[q]->n; k++)
                dst[q][k] = t[q]->dt == FR_ONNX_DTYPE_I64 ? ((const int64_t *)t[q]->p)[k]
                                                          : (int64_t)((const float *)t[q]->p)[k];
        }
    }
    int64_t start[FR_ONNX_MAX_RANK], step[FR_ONNX_MAX_RANK], xs[FR_ONNX_MAX_RANK], str = 1;
    for (int k = r - 1; k >= 0; k--) xs[k] = str, str *= x->d[k];
    for (int k = 0; k < r; k++) start[k] = 0, step[k] = 1;
    for (int k = 0; k < ns; k++) {
        const int a = norm_axis(na ? av[k] : k, r);
        const int64_t D = x->d[a], st = np ? pv[k] : 1;
        int64_t b = sv[k];
        if (b < 0) b += D;
        if (st > 0) b = b < 0 ? 0 : b > D ? D : b;
        else b = b < 0 ? -1 : b > D - 1 ? D - 1 : b;
        start[a] = b;
        step[a] = st;
    }
    kox_idx ix = {0};
    ix.r = r > 0 ? r : 1;
    ix.n = y->n;
    ix.d[0] = 1;
    for (int k = 0; k < r; k++) {
        ix.d[k] = y->d[k];
        ix.sa[k] = step[k] * xs[k];
        ix.oa += start[k] * xs[k];
    }
    kox_gather(s->st, &ix, p->dp[n->in[0]], p->dp[s->steps[i].out]);
}

static void x_concat(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    const fr_onnx_node *n = snode(s, i);
    const ox_t *x0 = &p->v[n->in[0]], *y = &p->v[s->steps[i].out];
    const int ax = norm_axis(ox_attr_i(n, "axis", 0), x0->rank);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < ax; k++) outer *= x0->d[k];
    for (int k = ax + 1; k < x0->rank; k++) inner *= x0->d[k];
    const int64_t orow = y->d[ax] * inner;
    int64_t col = 0;
    for (int k = 0; k < n->n_in; k++) {
        const int64_t row = p->v[n->in[k]].d[ax] * inner;
        if (row && outer)
            CX_CK(s, cudaMemcpy2DAsync((float *)p->dp[s->steps[i].out] + col, (size_t)orow * 4,
                                       p->dp[n->in[k]], (size_t)row * 4, (size_t)row * 4,
                                       (size_t)outer, cudaMemcpyDeviceToDevice, s->st));
        col += row;
    }
}

static void exec_step(fr_onnx_cuda_sess *s, cx_plan *p, int i) {
    switch (snode(s, i)->op) {
    case FR_ONNX_OP_Add:
    case FR_ONNX_OP_Sub:
    case FR_ONNX_OP_Mul:
    case FR_ONNX_OP_Div:
    case FR_ONNX_OP_Pow: x_binary(s, p, i); break;
    case FR_ONNX_OP_Relu:
    case FR_ONNX_OP_Sigmoid:
    case FR_ONNX_OP_Sqrt:
    case FR_ONNX_OP_HardSigmoid:
    case FR_ONNX_OP_Clip:
    case FR_ONNX_OP_Cast: x_unary(s, p, i); break;
    case FR_ONNX_OP_Conv:
    case FR_ONNX_OP_ConvTranspose: x_conv(s, p, i); break;
    case FR_ONNX_OP_BatchNormalization: x_bn(s, p, i); break;
    case FR_ONNX_OP_AveragePool:
    case FR_ONNX_OP_MaxPool:
    case FR_ONNX_OP_GlobalAveragePool: x_pool(s, p, i); break;
    case FR_ONNX_OP_Resize: x_resize(s, p, i); break;
    case FR_ONNX_OP_MatMul: x_matmul(s, p, i); break;
    case FR_ONNX_OP_Softmax: x_softmax(s, p, i); break;
    case FR_ONNX_OP_ReduceMean: x_reducemean(s, p, i); break;
    case FR_ONNX_OP_Transpose: x_transpose(s, p, i); break;
    case FR_ONNX_OP_Slice: x_slice(s, p, i); break;
    case FR_ONNX_OP_Concat: x_concat(s, p, i); break;
    default: break; /* Reshape, Squeeze: aliases; Shape never runs on the device */
    }
}

/* The whole run on the stream: inputs in, every device step, outputs out. cancel (NULL while
 * capturing) is polled before each step; a stop returns its reason with the stream drained. */
static fr_cancel_reason plan_enqueue(fr_onnx_cuda_sess *s, cx_plan *p, const fr_cancel *cancel,
                                     int *at) {
    const fr_onnx_model *m = s->m;
    for (int i = 0; i < m->n_inputs; i++) {
        const int v = m->inputs[i].value;
        if (p->dp[v] && p->v[v].n)
            CX_CK(s, cudaMemcpyAsync(p->dp[v], p->hin[i], tbytes(&p->v[v]), cudaMemcpyHostToDevice, s->st));
    }
    for (int i = 0; i < s->ns; i++) {
        if (!p->rt[i]) continue;
        const fr_cancel_reason why = fr_cancel_check(cancel);
        if (why != FR_CANCEL_NONE) {
            FR_CK(cudaStreamSynchronize(s->st));
            *at = i;
            return why;
        }
        if (s->o.poison && !is_alias(snode(s, i)))
            CX_CK(s, cudaMemsetAsync(p->dp[s->steps[i].out], 0xff, tbytes(&p->v[s->steps[i].out]), s->st));
        exec_step(s, p, i);
    }
    for (int i = 0; i < m->n_outputs; i++) {
        const int v = m->outputs[i].value;
        if (!p->hout[i] || !p->v[v].n) continue;
        if (p->red_rows[i]) {
            const ox_t *t = &p->v[v];
            kox_argmax_last(s->st, (const float *)p->dp[v], p->dred[i], p->red_rows[i],
                            t->d[t->rank - 1]);
            CX_CK(s, cudaMemcpyAsync(p->hout[i], p->dred[i], (size_t)p->red_rows[i] * 2 * sizeof(float),
                                     cudaMemcpyDeviceToHost, s->st));
        } else {
            CX_CK(s, cudaMemcpyAsync(p->hout[i], p->dp[v], tbytes(&p->v[v]), cudaMemcpyDeviceToHost, s->st));
        }
    }
    return FR_CANCEL_NONE;
}

/* Records the plan's run into a CUDA graph; on any failure the plan runs step by step. */
static void plan_capture(fr_onnx_cuda_sess *s, cx_plan *p) {
    cudaGraph_t g = NULL;
    s->capturing = 1;
    s->cap_fail = 0;
    if (cudaStreamBeginCapture(s->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        s->cap_fail = 1;
    } else {
        int at;
        plan_enqueue(s, p, NULL, &at);
        if (cudaStreamEndCapture(s->st, &g) != cudaSuccess) s->cap_fail = 1;
    }
    s->capturing = 0;
    if (!s->cap_fail && g && cudaGraphInstantiate(&p->gx, g, 0) == cudaSuccess) p->gstate = 1;
    else p->gstate = -1;
    if (g) cudaGraphDestroy(g);
    cudaGetLastError(); /* a failed capture leaves its error behind */
}

/* ---------------------------------------------------------------- sessions */

static int cuda_fail(fr_err *err, const fr_onnx_model *m, const char *what, cudaError_t e) {
    fr_err_setc(err, FR_ERR_INTERNAL, "%s: %s: %s", m->path, what, cudaGetErrorString(e));
    cudaGetLastError();
    return -1;
}

/* What only the CPU executor runs (the Silero VAD additions): If branches, int64 graph inputs,
 * 1-D convolutions and the ops added with them. UNSUPPORTED naming the node, or 0. */
static int cx_refuse_cpu_only(const fr_onnx_model *m, fr_err *err) {
    for (int i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].dtype != FR_ONNX_DTYPE_F32) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: int64 graph inputs run on the CPU executor only",
                        m->path);
            return -1;
        }
    for (int i = 0; i < m->n_nodes; i++) {
        const fr_onnx_node *n = &m->nodes[i];
        const fr_onnx_tensor *w = n->op == FR_ONNX_OP_Conv && n->n_in > 1 && n->in[1] >= 0
                                      ? m->values[n->in[1]].konst : NULL;
        if (n->op >= FR_ONNX_OP_ConstantOfShape || n->scope > 0 || (w && w->rank != 4))
            return ox_fail(&(ox_ctx){m, NULL, err, NULL}, n, FR_ERR_UNSUPPORTED,
                           "runs on the CPU executor only (If branches, 1-D Conv, the Silero ops)");
    }
    return 0;
}

fr_onnx_cuda_sess *fr_onnx_cuda_sess_new(const fr_onnx_model *m, int device,
                                         const fr_onnx_cuda_opts *opts, fr_err *err) {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        cuda_fail(err, m, "no CUDA device", e);
        return NULL;
    }
    fr_onnx_sess_opts co = fr_onnx_sess_default_opts();
    co.n_threads = 1;
    if (cx_refuse_cpu_only(m, err)) return NULL;
    fr_onnx_sess *cpu = fr_onnx_sess_new(m, &co, err);
    if (!cpu) return NULL;
    fr_onnx_cuda_sess *s = fr_xcalloc(1, sizeof *s);
    s->m = m;
    s->o = opts ? *opts : fr_onnx_cuda_default_opts();
    if (s->o.max_bytes == 0) s->o.max_bytes = CX_DEFAULT_MAX_BYTES;
    if (s->o.max_plans <= 0) s->o.max_plans = 16;
    s->dev = device;
    s->cpu = cpu;
    s->steps = ox_sess_steps(cpu, &s->kv);
    s->nv = m->n_values;
    s->ns = m->n_nodes;
    s->is_out = fr_xcalloc((size_t)s->nv + 1, 1);
    s->kdev = fr_xcalloc((size_t)s->nv + 1, sizeof *s->kdev);
    s->wdev = fr_xcalloc((size_t)s->ns + 1, sizeof *s->wdev);
    s->bdev = fr_xcalloc((size_t)s->ns + 1, sizeof *s->bdev);
    s->plans = fr_xcalloc((size_t)s->o.max_plans, sizeof *s->plans);
    for (int i = 0; i < m->n_outputs; i++) s->is_out[m->outputs[i].value] = 1;
    if ((e = cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking)) != cudaSuccess) {
        cuda_fail(err, m, "stream", e);
        goto fail;
    }
    if (cudnnCreate(&s->dnn) != CUDNN_STATUS_SUCCESS) {
        fr_err_setc(err, FR_ERR_INTERNAL, "%s: cuDNN could not start", m->path);
        s->dnn = NULL;
        goto fail;
    }
    if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS) {
        fr_err_setc(err, FR_ERR_INTERNAL, "%s: cuBLAS could not start", m->path);
        s->blas = NULL;
        goto fail;
    }
    CX_DNN(cudnnSetStream(s->dnn, s->st));
    FR_CKB(cublasSetStream(s->blas, s->st));
    FR_CKB(cublasSetMathMode(s->blas, s->o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    if ((e = cudaMalloc(&s->blas_ws, CX_BLAS_WS)) != cudaSuccess) {
        cuda_fail(err, m, "cuBLAS workspace", e);
        goto fail;
    }
    FR_CKB(cublasSetWorkspace(s->blas, s->blas_ws, CX_BLAS_WS));
    for (int i = 0; i < s->ns; i++) {
        const ox_step *st = &s->steps[i];
        if (st->skip || !st->w) continue;
        const int64_t nw = st->wdims[0] * st->wdims[1] * st->wdims[2] * st->wdims[3];
        if ((e = cudaMalloc((void **)&s->wdev[i], (size_t)nw * 4)) != cudaSuccess ||
            (e = cudaMalloc((void **)&s->bdev[i], (size_t)st->wdims[0] * 4)) != cudaSuccess) {
            cuda_fail(err, m, "weights", e);
            goto fail;
        }
        FR_CK(cudaMemcpyAsync(s->wdev[i], st->w, (size_t)nw * 4, cudaMemcpyHostToDevice, s->st));
        FR_CK(cudaMemcpyAsync(s->bdev[i], st->b, (size_t)st->wdims[0] * 4, cudaMemcpyHostToDevice, s->st));
    }
    FR_CK(cudaStreamSynchronize(s->st));
    return s;
fail:
    fr_onnx_cuda_sess_free(s);
    return NULL;
}

void fr_onnx_cuda_sess_free(fr_onnx_cuda_sess *s) {
    if (!s) return;
    cudaSetDevice(s->dev);
    if (s->st) cudaStreamSynchronize(s->st);
    for (int i = 0; i < s->n_plans; i++) plan_free(s, s->plans[i]);
    for (int v = 0; v < s->nv; v++) cudaFree(s->kdev[v]);
    for (int i = 0; i < s->ns; i++) {
        cudaFree(s->wdev[i]);
        cudaFree(s->bdev[i]);
    }
    if (s->blas) cublasDestroy(s->blas);
    if (s->dnn) cudnnDestroy(s->dnn);
    cudaFree(s->blas_ws);
    if (s->st) cudaStreamDestroy(s->st);
    fr_onnx_sess_free(s->cpu);
    free(s->is_out);
    free(s->kdev);
    free(s->wdev);
    free(s->bdev);
    free(s->plans);
    free(s);
}

int fr_onnx_cuda_sess_last_graphed(const fr_onnx_cuda_sess *s) { return s->last_graphed; }

/* The cached plan for these inputs, or a new one (the least recently used evicted). */
static cx_plan *plan_get(fr_onnx_cuda_sess *s, const fr_onnx_arr *in, fr_err *err) {
    const int len = s->m->n_inputs * (1 + FR_ONNX_MAX_RANK);
    int64_t *key = fr_xcalloc((size_t)len + 1, sizeof(int64_t));
    for (int i = 0; i < s->m->n_inputs; i++) {
        key[i * (1 + FR_ONNX_MAX_RANK)] = in[i].rank;
        for (int k = 0; k < in[i].rank; k++) key[i * (1 + FR_ONNX_MAX_RANK) + 1 + k] = in[i].dims[k];
    }
    cx_plan *p = NULL;
    for (int i = 0; i < s->n_plans && !p; i++)
        if (!memcmp(s->plans[i]->key, key, (size_t)len * sizeof(int64_t))) p = s->plans[i];
    free(key);
    if (p) return p;
    p = plan_new(s, in, err);
    if (!p) return NULL;
    if (s->n_plans == s->o.max_plans) {
        int lru = 0;
        for (int i = 1; i < s->n_plans; i++)
            if (s->plans[i]->used < s->plans[lru]->used) lru = i;
        plan_free(s, s->plans[lru]);
        s->plans[lru] = s->plans[--s->n_plans];
    }
    s->plans[s->n_plans++] = p;
    return p;
}

int fr_onnx_cuda_sess_run(fr_onnx_cuda_sess *s, const fr_onnx_arr *in, int n_in,
                          fr_onnx_arr *out, int n_out, const fr_cancel *cancel, fr_err *err) {
    const fr_onnx_model *m = s->m;
    FR_CK(cudaSetDevice(s->dev));
    if (check_inputs(s, NULL, in, n_in, n_out, err)) return -1;
    for (int i = 0; i < n_in; i++) {
        int64_t n = 1;
        for (int k = 0; k < in[i].rank; k++) n *= in[i].dims[k];
        if (!in[i].data && n) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: input %s has no data", m->path,
                        m->values[m->inputs[i].value].name);
            return -1;
        }
    }
    cx_plan *p = plan_get(s, in, err);
    if (!p) return -1;
    p->used = ++s->tick;
    fr_cancel_reason why = fr_cancel_check(cancel);
    if (why != FR_CANCEL_NONE) {
        fr_err_setc(err, fr_cancel_reason_code(why), "%s: stopped before the run: %s", m->path,
                    fr_cancel_reason_name(why));
        return -1;
    }
    for (int i = 0; i < n_in; i++)
        if (p->hin[i]) memcpy(p->hin[i], in[i].data, tbytes(&p->v[m->inputs[i].value]));
    if (s->o.graphs && p->runs >= 1 && p->gstate == 0) plan_capture(s, p);
    s->last_graphed = p->gstate == 1;
    if (p->gstate == 1) {
        FR_CK(cudaGraphLaunch(p->gx, s->st));
    } else {
        int at = 0;
        if ((why = plan_enqueue(s, p, cancel, &at)) != FR_CANCEL_NONE) {
            fr_err_setc(err, fr_cancel_reason_code(why), "%s: node %s: stopped before the node: %s",
                        m->path, snode(s, at)->name, fr_cancel_reason_name(why));
            return -1;
        }
    }
    FR_CK(cudaStreamSynchronize(s->st));
    p->runs++;
    for (int i = 0; i < n_out; i++) {
        const int v = m->outputs[i].value;
        const ox_t *t = &p->v[v];
        out[i].rank = t->rank;
        memcpy(out[i].dims, t->d, sizeof out[i].dims);
        if (p->red_rows[i]) out[i].dims[t->rank - 1] = 2;
        out[i].data = p->hout[i] ? p->hout[i] : p->outconv[i] ? p->outconv[i] : (float *)t->p;
    }
    return 0;
}
