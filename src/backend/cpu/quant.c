/* quant.c — fr_model_quantize: weight-only quantisation of a loaded model into the CPU's own q8
 * or q4 formats (layouts in backend/cpu/cpu.h).
 *
 * Every F32 matrix (2-D tensor with rows a multiple of 32 long) is converted: attention and FFN
 * projections and the token embedding / output matrix. Tied embeddings share one converted buffer
 * (the decoder gathers embedding rows by dequantising one row). Norms and biases stay F32. The new
 * buffers belong to the model (fr_model_own) and are advised as huge pages where the kernel
 * supports it (fewer TLB misses while streaming weights). m->weight_bytes is recomputed as the
 * bytes of every matrix the decoder streams per token (embedding rows excluded, unless tied).
 */
#include "backend/cpu/quant.h"

#include "backend/cpu/cpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct qctx {
    const float *src;   /* (rows, n) */
    uint8_t *dst;       /* rows of stride bytes */
    fr_dtype t;
    int64_t n, rows;
    size_t stride;
    atomic_llong next;  /* next row block */
} qctx;

static void q_worker(void *arg, int ith, int nth) {
    qctx *c = arg;
    (void)ith;
    (void)nth;
    for (;;) {
        int64_t r0 = atomic_fetch_add(&c->next, 64);
        if (r0 >= c->rows) break;
        int64_t r1 = r0 + 64 < c->rows ? r0 + 64 : c->rows;
        for (int64_t r = r0; r < r1; r++)
            fr_cpu_quantize_row(c->t, c->src + r * c->n, c->dst + (size_t)r * c->stride, c->n);
    }
}

/* The F32 source is no longer needed: give its memory back. A loader-owned buffer is freed (its
 * slot in m->owned cleared); pages of a memory-mapped file are dropped from the page tables (the
 * mapping stays valid, nothing reads it again). Keeps peak RSS near the quantised size. */
static bool still_used(const fr_model *m, const void *data, size_t nbytes) {
    const uint8_t *lo = data, *hi = lo + nbytes;
    int n = 0;
    const fr_weights *W = &m->w;
    const fr_tensor *top[] = {&W->tok_embd, &W->output_norm, &W->output};
    for (size_t i = 0; i < FR_ARRAY_LEN(top); i++) {
        const uint8_t *p = top[i]->data;
        if (fr_tensor_present(top[i]) && p >= lo && p < hi) n++;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        const fr_layer *L = &W->layers[l];
        const fr_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk, &L->bv,
                                 &L->wo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++) {
            const uint8_t *p = ts[i]->data;
            if (fr_tensor_present(ts[i]) && p >= lo && p < hi) n++;
        }
    }
    return n > 0; /* called after the converted tensor moved to its new buffer */
}

static void release_source(fr_model *m, const void *data, size_t nbytes) {
    if (still_used(m, data, nbytes)) return;
    for (int i = 0; i < m->n_owned; i++)
        if (m->owned[i] == data) {
            free(m->owned[i]);
            m->owned[i] = NULL;
            return;
        }
    for (int i = 0; i < m->n_maps; i++) {
        const uint8_t *b = m->maps[i].data, *p = data;
        if (!b || p < b || p + nbytes > b + m->maps[i].size) continue;
        uintptr_t pg = 4096, lo = ((uintptr_t)p + pg - 1) / pg * pg, hi = ((uintptr_t)p + nbytes) / pg * pg;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

static bool convertible(const fr_tensor *w) {
    return fr_tensor_present(w) && w->dtype == FR_DTYPE_F32 && w->n_dims == 2 &&
           w->ne[0] % FR_QK == 0 && w->ne[0] / FR_QK <= 1024;
}

/* Convert w (and `alias`, a tensor sharing its storage, e.g. the tied output) to dtype t. */
static int convert(fr_model *m, fr_tensor *w, fr_tensor *alias, fr_dtype t, fr_pool *pool,
                   fr_err *err) {
    size_t stride = fr_cpu_row_bytes(t, w->ne[0]), bytes = stride * (size_t)w->ne[1];
    void *buf = NULL;
    size_t align = bytes >= (4u << 20) ? (2u << 20) : 64;
    if (posix_memalign(&buf, align, (bytes + align - 1) / align * align) != 0 || !buf) {
        fr_err_set(err, "quantize: out of memory for %s (%zu bytes)", w->name ? w->name : "tensor",
                   bytes);
        return -1;
    }
#ifdef MADV_HUGEPAGE
    if (align > 64) madvise(buf, (bytes + align - 1) / align * align, MADV_HUGEPAGE);
#endif
    qctx c = {.src = w->data, .dst = buf, .t = t, .n = w->ne[0], .rows = w->ne[1],
              .stride = stride};
    atomic_init(&c.next, 0);
    fr_pool_run(pool, q_worker, &c);
    fr_model_own(m, buf);
    const void *old = w->data;
    size_t old_bytes = w->nbytes;
    w->dtype = t;
    w->data = buf;
    w->nbytes = bytes;
    if (alias) {
        const char *name = alias->name;
        *alias = *w;
        alias->name = name;
    }
    release_source(m, old, old_bytes);
    return 0;
}

int fr_model_quantize(fr_model *m, const char *kind, fr_err *err) {
    fr_dtype t;
    if (!kind || !strcmp(kind, "none") || !strcmp(kind, "f32")) return 0;
    if (!strcmp(kind, "q8")) t = FR_DTYPE_Q8;
    else if (!strcmp(kind, "q4")) t = FR_DTYPE_Q4;
    else {
        fr_err_set(err, "quantize: unknown kind '%s' (q8 or q4)", kind);
        return -1;
    }
    fr_pool *pool = fr_pool_new(0);
    int rc = 0;
    fr_weights *W = &m->w;
    bool tied = fr_tensor_present(&W->output) && W->output.data == W->tok_embd.data;
    if (convertible(&W->tok_embd))
        rc = convert(m, &W->tok_embd, tied ? &W->output : NULL, t, pool, err);
    if (!rc && !tied && convertible(&W->output)) rc = convert(m, &W->output, NULL, t, pool, err);
    for (int l = 0; l < m->hp.n_layer && !rc; l++) {
        fr_layer *L = &W->layers[l];
        fr_tensor *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(mats) && !rc; i++)
            if (convertible(mats[i])) rc = convert(m, mats[i], NULL, t, pool, err);
    }
    fr_pool_free(pool);
    if (rc) return -1;
    /* bytes streamed per decoded token */
    size_t wb = 0;
    const fr_tensor *out = fr_tensor_present(&W->output) ? &W->output : &W->tok_embd;
    wb += out->nbytes;
    for (int l = 0; l < m->hp.n_layer; l++) {
        fr_layer *L = &W->layers[l];
        const fr_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk, &L->bv,
                                 &L->wo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++)
            if (fr_tensor_present(ts[i])) wb += ts[i]->nbytes;
    }
    wb += W->output_norm.nbytes;
    m->weight_bytes = wb;
    return 0;
}
