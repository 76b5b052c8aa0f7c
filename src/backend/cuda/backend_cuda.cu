/* backend_cuda.cu — the CUDA row of the backend table (backend.h) over the CUDA decoder in decoder.cu.
 *
 * The scheduler-facing KV pool is a mirror with no storage: it hands out block ids 1..n-1 of the
 * device pool (block 0 is the decoder's trash block) through the ordinary fr_seq_reserve /
 * fr_seq_release, so the serving engine's block accounting is unchanged.
 */
#include "backend/cuda/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/backend.h"
}

static int cu_init(fr_backend *b, const fr_backend_params *p, fr_err *err) {
    fr_cuda_config cfg = fr_cuda_config_default();
    cfg.device = b->device;
    if (!p->weights || !strcmp(p->weights, "bf16"))
        cfg.weights = FR_CUDA_W_BF16;
    else if (!strcmp(p->weights, "int8"))
        cfg.weights = FR_CUDA_W_INT8;
    else if (!strcmp(p->weights, "int4"))
        cfg.weights = FR_CUDA_W_INT4;
    else {
        fr_err_set(err, "cuda: weight type '%s' is not supported (bf16, int8, int4)", p->weights);
        return -1;
    }
    if (!p->kv || !strcmp(p->kv, "bf16"))
        cfg.kv_int8 = 0;
    else if (!strcmp(p->kv, "int8"))
        cfg.kv_int8 = 1;
    else {
        fr_err_set(err, "cuda: KV cache type '%s' is not supported (bf16, int8)", p->kv);
        return -1;
    }
    if (p->kv_fraction > 0.f) cfg.kv_fraction = p->kv_fraction;
    cfg.kv_bytes = p->kv_bytes;
    cfg.max_tokens = p->max_tokens;
    if (p->max_seqs > 0) cfg.max_seqs = p->max_seqs;
    cfg.max_ctx = p->max_ctx;
    cfg.use_graphs = !p->no_graphs;
    fr_cuda *c = fr_cuda_new(b->model, &cfg, err);
    if (!c) return -1;
    fr_cuda_mem mi;
    fr_cuda_mem_info(c, &mi);
    fr_kv_pool *kv = (fr_kv_pool *)calloc(1, sizeof *kv);
    const int n = mi.kv_blocks;
    if (kv) kv->free_ids = (int *)malloc((size_t)n * sizeof(int));
    if (!kv || !kv->free_ids) {
        free(kv);
        fr_cuda_free(c);
        fr_err_set(err, "cuda: out of host memory");
        return -1;
    }
    kv->n_blocks = n;
    kv->block_size = 16;
    kv->n_layer = b->model->hp.n_layer;
    kv->n_head_kv = b->model->hp.n_head_kv;
    kv->head_dim = b->model->hp.head_dim;
    kv->block_bytes = mi.kv_block_bytes;
    for (int i = 0; i < n - 1; i++) kv->free_ids[i] = n - 1 - i; /* pops 1, 2, ...; never 0 */
    kv->n_free = n - 1;
    b->kv = kv;
    b->impl = c;
    return 0;
}

static void cu_destroy(fr_backend *b) {
    fr_cuda_free((fr_cuda *)b->impl);
    if (b->kv) free(b->kv->free_ids);
    free(b->kv);
}

static int cu_forward(fr_backend *b, const fr_batch *batch, float *logits, fr_err *err) {
    return fr_cuda_forward((fr_cuda *)b->impl, batch, logits, err);
}

static int cu_forward_sample(fr_backend *b, const fr_batch *batch, const fr_sampling *sp, int n_sp,
                             const uint64_t *counters, int32_t *ids, fr_err *err) {
    return fr_cuda_forward_sample((fr_cuda *)b->impl, batch, sp, n_sp, counters, ids, NULL, err);
}

static bool cu_supports(const fr_backend *b, fr_backend_op op) {
    (void)b;
    return op >= 0 && op < FR_BOP_COUNT; /* embedding rows and M-RoPE included (decoder.cu) */
}

static void cu_mem(const fr_backend *b, fr_backend_mem *m) {
    fr_cuda_mem mi;
    fr_cuda_mem_info((const fr_cuda *)b->impl, &mi);
    memset(m, 0, sizeof *m);
    m->total = mi.total;
    m->free = mi.free_now;
    m->weights = mi.weights;
    m->kv = mi.kv;
    m->scratch = mi.scratch;
    m->kv_blocks = mi.kv_blocks;
}

extern "C" const fr_backend_ops fr_backend_cuda_ops = {
    "cuda", cu_init, cu_destroy, cu_forward, cu_forward_sample, cu_supports, cu_mem,
};
