/* onnx_exec.c — the CPU ONNX executor (backend/onnx_exec.h): session preparation, per-run
 * shape inference and planning, and the schedule.
 *
 * Session creation, once per model:
 *   1. one step per node, in the loader's topological order; Constant nodes are values already;
 *   2. constant folding: a node whose inputs are all constants is run now and its output
 *      becomes a constant of the session (the Casts of paddle2onnx's fill_constant shapes);
 *   3. batch normalisation folded into the convolution before it, when the convolution's only
 *      reader is the BN and both have constant parameters: w' = w * s, b' = (b - mean) * s + beta
 *      with s = gamma / sqrt(var + eps) per output channel;
 *   4. activations fused into the Conv / ConvTranspose / BatchNormalization that feeds them:
 *      Relu, Clip (constant bounds), x * HardSigmoid(x), x * Sigmoid(x), and paddle's hardswish
 *      Div(Mul(x, Clip(Add(x, a), lo, hi)), e), each only when the intermediate values have no
 *      other reader and are not graph outputs. The fused arithmetic is the unfused one in the
 *      same order, so fusion changes no bit of the result;
 *   5. the last step reading each value, so a run frees every tensor right after it.
 *
 * A run:
 *   1. the inputs are checked against the graph's declared ranks and fixed dimensions;
 *   2. planning: every step infers its output shape from its inputs' (the op's dry call); a step
 *      whose inputs are all known before the run (constants, Shape outputs and their int64
 *      arithmetic) is computed right there, which folds the shape subgraphs of this input size.
 *      The other steps are simulated in order, adding each output and scratch buffer and
 *      removing the inputs read for the last time, which gives the run's peak work memory; over
 *      opts.max_bytes the run stops with TOO_LARGE before anything is computed;
 *   3. the remaining steps run in order, polling cancel between them; Reshape and Squeeze take
 *      over their input's buffer when it is read for the last time.
 * Buffers are malloc'd and freed along the schedule (glibc reuses the freed blocks); outputs stay
 * until the next run.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/onnx_ops.h"
#include "backend/onnx_exec.h"

#define OX_DEFAULT_MAX_BYTES ((size_t)2 << 30)
#define OX_FOLD_MAX_BYTES ((int64_t)64 << 20) /* larger constant results are computed per run */

struct fr_onnx_sess {
    const fr_onnx_model *m;
    fr_onnx_sess_opts o;
    fr_pool *pool;       /* NULL for one thread */
    int nv, ns;
    ox_t *kv;            /* (nv) constants: the model's and the folded ones; p NULL otherwise */
    uint8_t *kown;       /* (nv) kv[i].p owned by the session */
    ox_step *steps;      /* (ns) one per node */
    int *cons_off, *cons; /* CSR: steps reading value v are cons[cons_off[v] .. cons_off[v+1]) */
    uint8_t *is_out;     /* (nv) a graph output */
    int *last;           /* (nv) the last step reading v (INT_MAX for graph outputs, -1: none) */
    /* per run */
    ox_t *v;             /* (nv) the tensors of the run */
    uint8_t *own;        /* (nv) v[i].p malloc'd by the run */
    uint8_t *rt;         /* (ns) the step computes at run time (its inputs need the data) */
    int8_t *sc_on;       /* (n_scopes) the If branch runs: 1, 0, -1 not decided yet */
    int64_t *scr;        /* (ns) the step's scratch floats in this run */
    float **outconv;     /* (n_outputs) int64 outputs converted to float */
#define OX_BUF_KEEP 64
    char *free_blk[OX_BUF_KEEP]; /* freed large run buffers kept for reuse (buf_get) */
    size_t free_cap[OX_BUF_KEEP], free_bytes;
    int n_free;
    int64_t empty[8];    /* the data of constants with no elements */
};

fr_onnx_sess_opts fr_onnx_sess_default_opts(void) {
    return (fr_onnx_sess_opts){.n_threads = 0, .max_bytes = OX_DEFAULT_MAX_BYTES};
}

static size_t ox_bytes(const ox_t *t) { return (size_t)t->n * (t->dt == FR_ONNX_DTYPE_I64 ? 8 : 4); }

static const fr_onnx_node *snode(const fr_onnx_sess *s, const ox_step *st) {
    return &s->m->nodes[st->node];
}

/* The input tensors of step st in the tensor table tab (NULL for omitted inputs). */
static int gather(const fr_onnx_sess *s, const ox_step *st, ox_t *tab, ox_t **in) {
    const fr_onnx_node *n = snode(s, st);
    for (int k = 0; k < n->n_in; k++) in[k] = n->in[k] >= 0 ? &tab[n->in[k]] : NULL;
    return n->n_in;
}

/* Run buffers. Large ones are kept in the session for the next steps and runs (each fresh
 * mapping of a large block costs page faults and zeroing in the kernel, which was a third of
 * det's time); a block records its capacity in a 64-byte header, which also keeps the data
 * 64-byte aligned. Small blocks go straight to malloc. */
#define OX_BUF_HDR 64
#define OX_BUF_POOLED ((size_t)64 << 10)

static void *buf_get(fr_onnx_sess *s, size_t bytes) {
    const size_t need = bytes + OX_BUF_HDR;
    int best = -1;
    if (need >= OX_BUF_POOLED)
        for (int i = 0; i < s->n_free; i++)
            if (s->free_cap[i] >= need && (best < 0 || s->free_cap[i] < s->free_cap[best])) best = i;
    char *b;
    if (best >= 0) {
        b = s->free_blk[best];
        s->free_bytes -= s->free_cap[best];
        s->free_blk[best] = s->free_blk[--s->n_free];
        s->free_cap[best] = s->free_cap[s->n_free];
    } else {
        b = aligned_alloc(OX_BUF_HDR, (need + OX_BUF_HDR - 1) / OX_BUF_HDR * OX_BUF_HDR);
        if (!b) return NULL;
        *(size_t *)b = need;
    }
    return b + OX_BUF_HDR;
}

static void buf_put(fr_onnx_sess *s, void *p) {
    if (!p) return;
    char *b = (char *)p - OX_BUF_HDR;
    const size_t cap = *(size_t *)b;
    /* keep at most OX_BUF_KEEP blocks and, in all, no more than the run's memory cap */
    if (cap < OX_BUF_POOLED || s->n_free == OX_BUF_KEEP || s->free_bytes + cap > s->o.max_bytes) {
        free(b);
        return;
    }
    s->free_blk[s->n_free] = b;
    s->free_cap[s->n_free++] = cap;
    s->free_bytes += cap;
}

/* ---------------------------------------------------------------- session creation */

/* Static checks of attributes a run could not get past, so sess_new refuses them. */
static int check_node(fr_onnx_sess *s, ox_ctx *c, const fr_onnx_node *n) {
    if (n->op != FR_ONNX_OP_Constant && n->op != FR_ONNX_OP_If && !ox_op_get(n->op))
        return ox_fail(c, n, FR_ERR_UNSUPPORTED, "op not implemented");
    for (int k = 1; k < n->n_out && n->op != FR_ONNX_OP_LSTM && n->op != FR_ONNX_OP_If; k++) {
        const int v = n->out[k];
        if (s->is_out[v] || s->cons_off[v + 1] > s->cons_off[v])
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "output %d is used; only the first is computed", k);
    }
    switch (n->op) {
    case FR_ONNX_OP_Resize:
        if (strcmp(ox_attr_s(n, "mode", "nearest"), "nearest") ||
            strcmp(ox_attr_s(n, "coordinate_transformation_mode", "half_pixel"), "asymmetric") ||
            strcmp(ox_attr_s(n, "nearest_mode", "round_prefer_floor"), "floor"))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED,
                           "only mode nearest, coordinate_transformation_mode asymmetric, nearest_mode floor");
        break;
    case FR_ONNX_OP_Cast: {
        const int64_t to = ox_attr_i(n, "to", 0);
        if (to != 1 && to != 6 && to != 7 && to != 9)
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "cast to element type %lld", (long long)to);
        break;
    }
    case FR_ONNX_OP_Conv:
    case FR_ONNX_OP_ConvTranspose:
    case FR_ONNX_OP_MaxPool:
    case FR_ONNX_OP_AveragePool: {
        const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "auto_pad %s", ap);
        int cnt;
        if (ox_attr_ints(n, "kernel_shape", &cnt) && cnt != 2 && !(cnt == 1 && n->op == FR_ONNX_OP_Conv))
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "only 2-D kernels (1-D for Conv), not %d-D", cnt);
        break;
    }
    default: break;
    }
    return 0;
}

static void build_consumers(fr_onnx_sess *s) {
    const fr_onnx_model *m = s->m;
    free(s->cons_off);
    free(s->cons);
    s->cons_off = fr_xcalloc((size_t)s->nv + 1, sizeof(int));
    int total = 0;
    for (int i = 0; i < s->ns; i++) {
        if (s->steps[i].skip) continue;
        const fr_onnx_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) s->cons_off[n->in[k] + 1]++, total++;
    }
    for (int v = 0; v < s->nv; v++) s->cons_off[v + 1] += s->cons_off[v];
    s->cons = fr_xcalloc((size_t)total + 1, sizeof(int));
    int *fill = fr_xcalloc((size_t)s->nv, sizeof(int));
    for (int i = 0; i < s->ns; i++) {
        if (s->steps[i].skip) continue;
        const fr_onnx_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v < 0) continue;
            /* a step reading v twice (Mul(x, x)) is listed twice */
            s->cons[s->cons_off[v] + fill[v]++] = i;
        }
    }
    free(fill);
}

static int n_cons(const fr_onnx_sess *s, int v) { return s->cons_off[v + 1] - s->cons_off[v]; }

/* Runs every step whose inputs are all constants; its output becomes a session constant. */
static int fold_constants(fr_onnx_sess *s, ox_ctx *c) {
    for (int i = 0; i < s->ns; i++) {
        ox_step *st = &s->steps[i];
        if (st->skip) continue;
        const fr_onnx_node *n = snode(s, st);
        ox_t *in[FR_ONNX_MAX_IO];
        if (n->scope > 0 || n->n_out > 1 || n->op == FR_ONNX_OP_If) continue; /* per run */
        const int n_in = gather(s, st, s->kv, in);
        int all = 1;
        for (int k = 0; k < n_in; k++)
            if (in[k] && !in[k]->p) all = 0;
        if (!all || n_in == 0) continue;
        ox_t out = {0};
        int64_t scratch = 0;
        if (ox_op_get(n->op)(c, st, in, n_in, &out, &scratch, 1)) return -1;
        if ((int64_t)ox_bytes(&out) + scratch * 4 > OX_FOLD_MAX_BYTES) continue;
        out.p = fr_xmalloc(ox_bytes(&out) ? ox_bytes(&out) : 1);
        c->scratch = scratch ? fr_xmalloc((size_t)scratch * 4) : NULL;
        const int rc = out.n ? ox_op_get(n->op)(c, st, in, n_in, &out, &scratch, 0) : 0;
        free(c->scratch);
        c->scratch = NULL;
        if (rc) {
            free(out.p);
            return -1;
        }
        s->kv[st->out] = out;
        s->kown[st->out] = 1;
        st->skip = 1;
    }
    return 0;
}

/* The only step reading v, or -1 (several readers, none, or v is a graph output). */
static int sole_reader(const fr_onnx_sess *s, int v) {
    if (s->is_out[v] || n_cons(s, v) != 1) return -1;
    return s->cons[s->cons_off[v]];
}

static int is_op(const fr_onnx_sess *s, int step, fr_onnx_op op) {
    return step >= 0 && !s->steps[step].skip && s->m->nodes[step].op == op;
}

/* A float scalar constant, or NAN. */
static float kscalar(const fr_onnx_sess *s, int v) {
    if (v < 0 || !s->kv[v].p || s->kv[v].dt != FR_ONNX_DTYPE_F32 || s->kv[v].n != 1) return NAN;
    return *(const float *)s->kv[v].p;
}

/* Constant bounds of a Clip step into lo, hi; -1 when not constant. */
static int clip_bounds(const fr_onnx_sess *s, int step, float *lo, float *hi) {
    const fr_onnx_node *n = &s->m->nodes[step];
    *lo = -INFINITY;
    *hi = INFINITY;
    if (s->m->opset < 11) {
        *lo = ox_attr_f(n, "min", -INFINITY);
        *hi = ox_attr_f(n, "max", INFINITY);
        return 0;
    }
    for (int k = 1; k <= 2 && k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const float v = kscalar(s, n->in[k]);
        if (isnan(v)) return -1;
        *(k == 1 ? lo : hi) = v;
    }
    return 0;
}

static void fold_bn(fr_onnx_sess *s) {
    for (int i = 0; i < s->ns; i++) {
        ox_step *st = &s->steps[i];
        const fr_onnx_node *n = snode(s, st);
        if (st->skip || n->op != FR_ONNX_OP_Conv || n->n_in < 2 || n->in[1] < 0) continue;
        const ox_t *w = &s->kv[n->in[1]];
        const ox_t *b = n->n_in > 2 && n->in[2] >= 0 ? &s->kv[n->in[2]] : NULL;
        if (!w->p || w->dt != FR_ONNX_DTYPE_F32 || w->rank != 4 || (b && (!b->p || b->n != w->d[0])))
            continue;
        const int j = sole_reader(s, st->out);
        if (!is_op(s, j, FR_ONNX_OP_BatchNormalization) || s->m->nodes[j].scope != n->scope) continue;
        const fr_onnx_node *bn = &s->m->nodes[j];
        if (bn->n_in < 5 || bn->in[0] != st->out) continue;
        const float *p[4] = {NULL, NULL, NULL, NULL};
        int ok = 1;
        for (int k = 0; k < 4; k++) {
            const int v = bn->in[k + 1];
            if (v < 0 || !s->kv[v].p || s->kv[v].dt != FR_ONNX_DTYPE_F32 || s->kv[v].n != w->d[0]) ok = 0;
            else p[k] = s->kv[v].p;
        }
        int used = 0; /* BN's extra outputs (training mode) must be unused */
        for (int k = 1; k < bn->n_out; k++) used |= s->is_out[bn->out[k]] || n_cons(s, bn->out[k]);
        if (!ok || used) continue;
        const float eps = ox_attr_f(bn, "epsilon", 1e-5f);
        const int64_t M = w->d[0], per = w->n / M;
        float *nw = fr_xmalloc((size_t)w->n * sizeof *nw), *nb = fr_xmalloc((size_t)M * sizeof *nb);
        for (int64_t o = 0; o < M; o++) {
            const float sc = p[0][o] / sqrtf(p[3][o] + eps);
            for (int64_t k = 0; k < per; k++) nw[o * per + k] = ((const float *)w->p)[o * per + k] * sc;
            nb[o] = ((b ? ((const float *)b->p)[o] : 0.0f) - p[2][o]) * sc + p[1][o];
        }
        free(st->w);
        free(st->b);
        st->w = nw;
        st->b = nb;
        memcpy(st->wdims, w->d, sizeof st->wdims);
        st->out = bn->out[0];
        s->steps[j].skip = 1;
    }
}

/* The other input of a two-input step than v (-1 when neither or both are v). */
static int other_in(const fr_onnx_sess *s, int step, int v) {
    const fr_onnx_node *n = &s->m->nodes[step];
    if (n->n_in != 2) return -1;
    if (n->in[0] == v && n->in[1] != v) return n->in[1];
    if (n->in[1] == v && n->in[0] != v) return n->in[0];
    return -1;
}

/* A float constant of one value and rank <= 1 (broadcasting it changes no shape), or NAN. */
static float kscalar1(const fr_onnx_sess *s, int v) {
    if (v < 0 || s->kv[v].rank > 1) return NAN;
    return kscalar(s, v);
}

/* The epilogue instruction for step r applied to its input c (one elementwise node with c as
 * its only non-constant input); 0, or -1 when r is not such a node. */
static int ep_ins_of(const fr_onnx_sess *s, int r, int c, ox_ep_ins *ins) {
    if (r < 0 || s->steps[r].skip) return -1;
    const fr_onnx_node *n = &s->m->nodes[r];
    const int pc = s->m->values[c].producer; /* fused only within one scope */
    if (pc < 0 || s->m->nodes[pc].scope != n->scope) return -1;
    if (n->n_in < 1 || n->in[0] < 0) return -1;
    float lo, hi;
    switch (n->op) {
    case FR_ONNX_OP_Relu:
    case FR_ONNX_OP_Sigmoid:
        if (n->in[0] != c) return -1;
        *ins = (ox_ep_ins){n->op == FR_ONNX_OP_Relu ? OX_EP_RELU : OX_EP_SIGMOID, 0, 0};
        return 0;
    case FR_ONNX_OP_HardSigmoid:
        if (n->in[0] != c) return -1;
        *ins = (ox_ep_ins){OX_EP_HSIG, ox_attr_f(n, "alpha", 0.2f), ox_attr_f(n, "beta", 0.5f)};
        return 0;
    case FR_ONNX_OP_Clip:
        if (n->in[0] != c || clip_bounds(s, r, &lo, &hi)) return -1;
        *ins = (ox_ep_ins){OX_EP_CLIP, lo, hi};
        return 0;
    case FR_ONNX_OP_Add:
    case FR_ONNX_OP_Mul:
    case FR_ONNX_OP_Sub:
    case FR_ONNX_OP_Div: {
        const int k = other_in(s, r, c);
        const float a = kscalar1(s, k);
        if (isnan(a)) return -1;
        const int first = n->in[0] == c; /* c op k, else k op c */
        ox_ep_op op = n->op == FR_ONNX_OP_Add ? OX_EP_ADDK : n->op == FR_ONNX_OP_Mul ? OX_EP_MULK
                    : n->op == FR_ONNX_OP_Sub ? (first ? OX_EP_SUBK : OX_EP_RSUBK)
                                              : (first ? OX_EP_DIVK : OX_EP_RDIVK);
        *ins = (ox_ep_ins){op, a, 0};
        return 0;
    }
    default: return -1;
    }
}

/* Grows the epilogue of step st from its output: single-reader elementwise nodes with constant
 * scalars, and x * f(x) where f is such a chain read only by the Mul. The fused nodes are
 * skipped and st writes the last one's output. */
static void fuse_epilogue(fr_onnx_sess *s, ox_step *st) {
    ox_epi *e = &st->epi;
    for (;;) {
        const int c = st->out;
        if (s->is_out[c]) return;
        const int nc = n_cons(s, c);
        ox_ep_ins ins;
        if (nc == 1) {
            const int r = s->cons[s->cons_off[c]];
            if (e->n >= OX_EP_MAX || ep_ins_of(s, r, c, &ins)) return;
            e->ins[e->n++] = ins;
            s->steps[r].skip = 1;
            st->out = s->m->nodes[r].out[0];
            continue;
        }
        if (nc != 2) return;
        /* x * f(x): one reader is the Mul, the other starts the chain f */
        int done = 0;
        for (int pass = 0; pass < 2 && !done; pass++) {
            const int mul = s->cons[s->cons_off[c] + pass], g = s->cons[s->cons_off[c] + 1 - pass];
            if (mul == g || !is_op(s, mul, FR_ONNX_OP_Mul) ||
                s->m->nodes[mul].scope != snode(s, st)->scope)
                continue;
            const int t_end = other_in(s, mul, c); /* the value f(x) the Mul reads */
            ox_epi chain = {0};
            chain.ins[chain.n++] = (ox_ep_ins){OX_EP_SAVE, 0, 0};
            int cur = c, step = g, ok = 0, fused[OX_EP_MAX], nf = 0;
            while (chain.n < OX_EP_MAX - 1 && !ep_ins_of(s, step, cur, &ins)) {
                chain.ins[chain.n++] = ins;
                fused[nf++] = step;
                cur = s->m->nodes[step].out[0];
                if (cur == t_end) {
                    ok = sole_reader(s, cur) == mul;
                    break;
                }
                step = sole_reader(s, cur);
            }
            if (!ok || e->n + chain.n + 1 > OX_EP_MAX) continue;
            chain.ins[chain.n++] = (ox_ep_ins){OX_EP_MULSAVED, 0, 0};
            for (int k = 0; k < chain.n; k++) e->ins[e->n++] = chain.ins[k];
            for (int k = 0; k < nf; k++) s->steps[fused[k]].skip = 1;
            s->steps[mul].skip = 1;
            st->out = s->m->nodes[mul].out[0];
            done = 1;
        }
        if (!done) return;
        /* the consumer lists of the skipped nodes are stale but no longer read: the next
           round looks only at readers of st->out, which are live steps */
    }
}

static void fuse_activations(fr_onnx_sess *s) {
    for (int i = 0; i < s->ns; i++) {
        ox_step *st = &s->steps[i];
        const fr_onnx_op op = snode(s, st)->op;
        if (!st->skip && (op == FR_ONNX_OP_Conv || op == FR_ONNX_OP_ConvTranspose ||
                          op == FR_ONNX_OP_BatchNormalization))
            fuse_epilogue(s, st);
    }
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

fr_onnx_sess *fr_onnx_sess_new(const fr_onnx_model *m, const fr_onnx_sess_opts *opts, fr_err *err) {
    fr_onnx_sess *s = fr_xcalloc(1, sizeof *s);
    s->m = m;
    s->o = opts ? *opts : fr_onnx_sess_default_opts();
    if (s->o.n_threads <= 0) s->o.n_threads = fr_n_cores();
    if (s->o.max_bytes == 0) s->o.max_bytes = OX_DEFAULT_MAX_BYTES;
    s->nv = m->n_values;
    s->ns = m->n_nodes;
    s->kv = fr_xcalloc((size_t)s->nv + 1, sizeof *s->kv);
    s->kown = fr_xcalloc((size_t)s->nv + 1, 1);
    s->is_out = fr_xcalloc((size_t)s->nv + 1, 1);
    s->last = fr_xcalloc((size_t)s->nv + 1, sizeof(int));
    s->v = fr_xcalloc((size_t)s->nv + 1, sizeof *s->v);
    s->own = fr_xcalloc((size_t)s->nv + 1, 1);
    s->steps = fr_xcalloc((size_t)s->ns + 1, sizeof *s->steps);
    s->rt = fr_xcalloc((size_t)s->ns + 1, 1);
    s->sc_on = fr_xcalloc((size_t)m->n_scopes + 1, 1);
    s->scr = fr_xcalloc((size_t)s->ns + 1, sizeof *s->scr);
    s->outconv = fr_xcalloc((size_t)m->n_outputs + 1, sizeof *s->outconv);
    ox_ctx c = {m, NULL, err, NULL};
    for (int v = 0; v < s->nv; v++) {
        const fr_onnx_tensor *k = m->values[v].konst;
        if (!k) continue;
        ox_t *t = &s->kv[v];
        t->dt = k->dtype;
        t->rank = k->rank;
        memcpy(t->d, k->dims, sizeof t->d);
        t->n = k->n;
        t->p = k->data ? k->data : s->empty; /* a constant with no elements still has data */
    }
    for (int i = 0; i < m->n_outputs; i++) s->is_out[m->outputs[i].value] = 1;
    for (int i = 0; i < s->ns; i++) {
        const fr_onnx_node *n = &m->nodes[i];
        s->steps[i].node = i;
        s->steps[i].out = n->n_out > 0 ? n->out[0] : -1;
        s->steps[i].skip = n->op == FR_ONNX_OP_Constant;
        if (n->n_out < 1) {
            ox_fail(&c, n, FR_ERR_BAD_REQUEST, "no output");
            goto fail;
        }
    }
    build_consumers(s);
    for (int i = 0; i < s->ns; i++)
        if (check_node(s, &c, &m->nodes[i])) goto fail;
    if (fold_constants(s, &c)) goto fail;
    build_consumers(s);
    fold_bn(s);
    build_consumers(s);
    fuse_activations(s);
    build_consumers(s);
    for (int v = 0; v < s->nv; v++) {
        s->last[v] = -1;
        if (n_cons(s, v)) {
            qsort(s->cons + s->cons_off[v], (size_t)n_cons(s, v), sizeof(int), cmp_int);
            s->last[v] = s->cons[s->cons_off[v + 1] - 1];
        }
        if (s->is_out[v]) s->last[v] = INT_MAX;
    }
    if (s->o.n_threads > 1) s->pool = fr_pool_new(s->o.n_threads);
    return s;
fail:
    fr_onnx_sess_free(s);
    return NULL;
}

const ox_step *ox_sess_steps(const fr_onnx_sess *s, const ox_t **konst) { *konst = s->kv; return s->steps; }

/* ---------------------------------------------------------------- a run */

static void run_release(fr_onnx_sess *s) {
    for (int v = 0; v < s->nv; v++) {
        if (s->own[v]) buf_put(s, s->v[v].p);
        s->own[v] = 0;
        s->v[v] = (ox_t){0};
    }
    for (int i = 0; i < s->m->n_outputs; i++) {
        free(s->outconv[i]);
        s->outconv[i] = NULL;
    }
}

void fr_onnx_sess_free(fr_onnx_sess *s) {
    if (!s) return;
    run_release(s);
    for (int v = 0; v < s->nv; v++)
        if (s->kown[v]) free(s->kv[v].p);
    for (int i = 0; i < s->ns; i++) {
        free(s->steps[i].w);
        free(s->steps[i].b);
    }
    for (int i = 0; i < s->n_free; i++) free(s->free_blk[i]);
    fr_pool_free(s->pool);
    free(s->kv);
    free(s->kown);
    free(s->is_out);
    free(s->last);
    free(s->v);
    free(s->own);
    free(s->steps);
    free(s->rt);
    free(s->sc_on);
    free(s->scr);
    free(s->outconv);
    free(s->cons_off);
    free(s->cons);
    free(s);
}

static int check_inputs(fr_onnx_sess *s, const fr_onnx_arr *in, int n_in, int n_out, fr_err *err) {
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
        ox_t *t = &s->v[io->value];
        if (ox_set_shape(t, io->dtype, in[i].rank, in[i].dims)) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: input %s has over %lld elements", m->path, name,
                        (long long)FR_ONNX_MAX_ELEMS);
            return -1;
        }
        if (io->dtype == FR_ONNX_DTYPE_I64) {
            if (t->n > FR_ONNX_MAX_I64_INPUT || !in[i].idata) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: int64 input %s needs idata of at most %d values",
                            m->path, name, FR_ONNX_MAX_I64_INPUT);
                return -1;
            }
            t->p = (void *)in[i].idata;
            continue;
        }
        if (!in[i].data && t->n) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: input %s has no data", m->path, name);
            return -1;
        }
        t->p = in[i].data ? in[i].data : (float *)s->empty;
    }
    return 0;
}

/* The value output k of step st writes (the first is the step's, which fusion may move). */
static int out_val(const fr_onnx_sess *s, const ox_step *st, int k) {
    return k == 0 ? st->out : snode(s, st)->out[k];
}

static int n_outs(const fr_onnx_sess *s, const ox_step *st) {
    const fr_onnx_node *n = snode(s, st);
    return n->n_out > 1 ? n->n_out : 1;
}

/* Whether scope sc runs in this run: 1 / 0, or -1 with err set when an If's condition is not
 * known at planning. Decided once per run (s->sc_on), the enclosing scopes first. */
static int scope_on(fr_onnx_sess *s, ox_ctx *c, int sc) {
    if (sc == 0) return 1;
    if (s->sc_on[sc] >= 0) return s->sc_on[sc];
    const fr_onnx_scope *p = &s->m->scopes[sc];
    const int up = scope_on(s, c, p->parent);
    if (up <= 0) return up < 0 ? -1 : (s->sc_on[sc] = 0);
    const fr_onnx_node *n = &s->m->nodes[p->node];
    const ox_t *cond = n->in[0] >= 0 ? &s->v[n->in[0]] : NULL;
    if (!cond || !cond->p || cond->n != 1)
        return ox_fail(c, n, FR_ERR_UNSUPPORTED,
                       "the condition must be one value known before the run (a constant, a "
                       "shape or an int64 input)");
    const int yes = cond->dt == FR_ONNX_DTYPE_I64 ? *(const int64_t *)cond->p != 0
                                                   : *(const float *)cond->p != 0.0f;
    return s->sc_on[sc] = (int8_t)(p->then ? yes : !yes);
}

/* The value an If's output k takes in this run: the selected branch's. */
static int if_src(fr_onnx_sess *s, const fr_onnx_node *n, int k) {
    const ox_t *cond = &s->v[n->in[0]];
    const int yes = cond->dt == FR_ONNX_DTYPE_I64 ? *(const int64_t *)cond->p != 0
                                                   : *(const float *)cond->p != 0.0f;
    return n->in[(yes ? 1 : 1 + n->n_out) + k];
}

/* The dry call of step i: output shapes into outs, scratch floats; whether every input is known
 * (then the step is computed at planning). An If's outputs are its selected branch's. */
static int plan_dry(fr_onnx_sess *s, ox_ctx *c, int i, ox_t *outs, int64_t *scratch, int *known) {
    ox_step *st = &s->steps[i];
    const fr_onnx_node *n = snode(s, st);
    *scratch = 0;
    *known = 1;
    if (n->op == FR_ONNX_OP_If) {
        const ox_t *cond = n->in[0] >= 0 ? &s->v[n->in[0]] : NULL;
        if (!cond || !cond->p || cond->n != 1)
            return ox_fail(c, n, FR_ERR_UNSUPPORTED, "the condition is not known before the run");
        for (int k = 0; k < n->n_out; k++) {
            const ox_t *src = &s->v[if_src(s, n, k)];
            if (!src->p) *known = 0;
            outs[k] = *src;
            outs[k].p = NULL;
        }
        return 0;
    }
    ox_t *in[FR_ONNX_MAX_IO];
    const int n_in = gather(s, st, s->v, in);
    for (int k = 0; k < n_in; k++) /* Shape needs only its input's shape */
        if (in[k] && !in[k]->p && n->op != FR_ONNX_OP_Shape) *known = 0;
    return ox_op_get(n->op)(c, st, in, n_in, outs, scratch, 1);
}

/* Computes step i (outputs allocated in outs[k].p, scratch in c->scratch). */
static int step_compute(fr_onnx_sess *s, ox_ctx *c, int i, ox_t *outs, int64_t *scratch) {
    ox_step *st = &s->steps[i];
    const fr_onnx_node *n = snode(s, st);
    if (n->op == FR_ONNX_OP_If) {
        for (int k = 0; k < n->n_out; k++) {
            const ox_t *src = &s->v[if_src(s, n, k)];
            if (outs[k].n) memcpy(outs[k].p, src->p, ox_bytes(src));
        }
        return 0;
    }
    ox_t *in[FR_ONNX_MAX_IO];
    const int n_in = gather(s, st, s->v, in);
    int any = 0; /* an empty output has nothing to compute */
    for (int k = 0; k < n_outs(s, st); k++) any |= outs[k].n != 0;
    return any ? ox_op_get(n->op)(c, st, in, n_in, outs, scratch, 0) : 0;
}

/* Allocates the outputs of step i and its scratch; -1 with err set when out of memory. */
static int step_alloc(fr_onnx_sess *s, ox_ctx *c, int i, ox_t *outs, int64_t scratch) {
    const int no = n_outs(s, &s->steps[i]);
    int ok = 1;
    for (int k = 0; k < no; k++) ok &= (outs[k].p = buf_get(s, ox_bytes(&outs[k]))) != NULL;
    c->scratch = scratch ? buf_get(s, (size_t)scratch * 4) : NULL;
    if (ok && (!scratch || c->scratch)) return 0;
    for (int k = 0; k < no; k++) buf_put(s, outs[k].p);
    buf_put(s, c->scratch);
    c->scratch = NULL;
    fr_err_setc(c->err, FR_ERR_INTERNAL, "%s: out of memory at node %s", s->m->path,
                snode(s, &s->steps[i])->name);
    return -1;
}

/* Planning: shapes of every step, the steps computable before the run computed, the peak of
 * the rest simulated and checked against max_bytes. Steps of If branches not selected are
 * left out of the run. */
static int run_plan(fr_onnx_sess *s, ox_ctx *c) {
    const size_t cap = s->o.max_bytes;
    size_t planned = 0, live = 0, peak = 0;
    uint8_t *counted = fr_xcalloc((size_t)s->nv + 1, 1);
    memset(s->sc_on, 0xff, (size_t)s->m->n_scopes);
    int rc = -1;
    for (int i = 0; i < s->ns; i++) {
        ox_step *st = &s->steps[i];
        s->rt[i] = 0;
        if (st->skip) continue;
        const fr_onnx_node *n = snode(s, st);
        const int on = scope_on(s, c, n->scope);
        if (on < 0) goto done;
        if (!on) continue;
        ox_t outs[FR_ONNX_MAX_IO];
        memset(outs, 0, sizeof outs);
        int64_t scratch = 0;
        int known;
        if (plan_dry(s, c, i, outs, &scratch, &known)) goto done;
        const int no = n_outs(s, st);
        size_t ob = 0;
        for (int k = 0; k < no; k++) ob += ox_bytes(&outs[k]);
        const size_t sb = (size_t)scratch * 4;
        s->rt[i] = !known;
        s->scr[i] = scratch;
        if (known) {
            if (planned + ob + sb > cap) {
                ox_fail(c, n, FR_ERR_TOO_LARGE, "the run needs over %zu bytes of work memory", cap);
                goto done;
            }
            planned += ob;
            if (step_alloc(s, c, i, outs, scratch)) goto done;
            const int erc = step_compute(s, c, i, outs, &scratch);
            buf_put(s, c->scratch);
            c->scratch = NULL;
            for (int k = 0; k < no; k++) {
                s->v[out_val(s, st, k)] = outs[k];
                s->own[out_val(s, st, k)] = 1;
            }
            if (erc) goto done;
            continue;
        }
        for (int k = 0; k < no; k++) {
            outs[k].p = NULL;
            s->v[out_val(s, st, k)] = outs[k];
            counted[out_val(s, st, k)] = 1;
        }
        live += ob;
        if (live + sb > peak) peak = live + sb;
        if (planned + peak > cap) {
            ox_fail(c, n, FR_ERR_TOO_LARGE, "the run needs over %zu bytes of work memory", cap);
            goto done;
        }
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v >= 0 && counted[v] && s->last[v] == i) {
                live -= ox_bytes(&s->v[v]);
                counted[v] = 0;
            }
        }
    }
    rc = 0;
done:
    free(counted);
    return rc;
}

/* Reshape / Squeeze / Unsqueeze / Identity keep the buffer of an input read for the last time. */
static int take_over(fr_onnx_sess *s, int i) {
    const ox_step *st = &s->steps[i];
    const fr_onnx_node *n = snode(s, st);
    const int x0 = n->n_in > 0 ? n->in[0] : -1;
    if (!(n->op == FR_ONNX_OP_Reshape || n->op == FR_ONNX_OP_Squeeze ||
          n->op == FR_ONNX_OP_Unsqueeze || n->op == FR_ONNX_OP_Identity) ||
        x0 < 0 || !s->own[x0] || s->last[x0] != i || x0 == st->out)
        return 0;
    s->v[st->out].p = s->v[x0].p;
    s->own[x0] = 0;
    s->v[x0].p = NULL;
    s->own[st->out] = 1;
    return 1;
}

static int run_steps(fr_onnx_sess *s, ox_ctx *c, const fr_cancel *cancel) {
    for (int i = 0; i < s->ns; i++) {
        ox_step *st = &s->steps[i];
        if (st->skip || !s->rt[i]) continue;
        const fr_onnx_node *n = snode(s, st);
        const fr_cancel_reason why = fr_cancel_check(cancel);
        if (why != FR_CANCEL_NONE)
            return ox_fail(c, n, fr_cancel_reason_code(why), "stopped before the node: %s",
                           fr_cancel_reason_name(why));
        if (take_over(s, i)) continue;
        const int no = n_outs(s, st);
        ox_t outs[FR_ONNX_MAX_IO];
        for (int k = 0; k < no; k++) outs[k] = s->v[out_val(s, st, k)];
        int64_t scratch = s->scr[i];
        if (step_alloc(s, c, i, outs, scratch)) return -1;
        for (int k = 0; k < no; k++) {
            s->v[out_val(s, st, k)].p = outs[k].p;
            s->own[out_val(s, st, k)] = 1;
        }
        const int rc = step_compute(s, c, i, outs, &scratch);
        buf_put(s, c->scratch);
        c->scratch = NULL;
        if (rc) return -1;
        for (int k = 0; k < n->n_in; k++) {
            const int v = n->in[k];
            if (v >= 0 && s->own[v] && s->last[v] == i) {
                buf_put(s, s->v[v].p);
                s->v[v].p = NULL;
                s->own[v] = 0;
            }
        }
    }
    return 0;
}

int fr_onnx_sess_run(fr_onnx_sess *s, const fr_onnx_arr *in, int n_in, fr_onnx_arr *out,
                     int n_out, const fr_cancel *cancel, fr_err *err) {
    const fr_onnx_model *m = s->m;
    run_release(s);
    for (int v = 0; v < s->nv; v++)
        if (s->kv[v].p) s->v[v] = s->kv[v];
    ox_ctx c = {m, s->pool, err, NULL};
    if (check_inputs(s, in, n_in, n_out, err)) {
        run_release(s);
        return -1;
    }
    /* the plan sees the float inputs' shapes only: what it computes depends on no float input
       data (small int64 control inputs are read) */
    for (int i = 0; i < n_in; i++)
        if (m->inputs[i].dtype == FR_ONNX_DTYPE_F32) s->v[m->inputs[i].value].p = NULL;
    const int prc = run_plan(s, &c);
    for (int i = 0; i < n_in; i++)
        if (m->inputs[i].dtype == FR_ONNX_DTYPE_F32)
            s->v[m->inputs[i].value].p = in[i].data ? in[i].data : (float *)s->empty;
    if (prc || run_steps(s, &c, cancel)) {
        run_release(s);
        return -1;
    }
    for (int i = 0; i < n_out; i++) {
        const ox_t *t = &s->v[m->outputs[i].value];
        out[i].rank = t->rank;
        memcpy(out[i].dims, t->d, sizeof out[i].dims);
        if (t->dt == FR_ONNX_DTYPE_I64) {
            s->outconv[i] = fr_xmalloc((size_t)(t->n ? t->n : 1) * sizeof(float));
            for (int64_t k = 0; k < t->n; k++) s->outconv[i][k] = (float)((const int64_t *)t->p)[k];
            out[i].data = s->outconv[i];
        } else {
            out[i].data = t->p;
        }
    }
    return 0;
}
