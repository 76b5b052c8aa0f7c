/* decoder.cu — the CUDA decoder behind cuda_backend.h (the serving engine is src/engine/).
 *
 * Start-up: weights are uploaded once (qkv fused into one matrix [q; k; v], gate/up fused with
 * rows interleaved so the SwiGLU can live in the GEMV epilogue), then every scratch buffer for
 * max_tokens tokens is allocated, then the KV pool takes kv_fraction of what is left. Steps never
 * allocate.
 *
 * One forward (per layer): rmsnorm -> qkv linear -> rope + KV store -> attention -> o linear
 * (accumulated into the residual) -> rmsnorm -> gate/up linear with SwiGLU -> down linear
 * (accumulated); then the final norm over the wanted rows only and the LM head. The qkv rows are
 * stored in pair order (pair_order) so RoPE can sit in a GEMV epilogue. With cfg.fuse (the
 * default), decode steps of few rows (bf16 <= 4, INT <= 8) run each linear layer as one streamed
 * kernel with its neighbours fused (frk_gemv_stream: norm -> qkv -> rope + KV store; o +
 * residual; norm -> gate/up -> SwiGLU; down + residual; norm -> LM head), 5 kernels a layer, each
 * in the configuration of plan.cu for its product and the weight format.
 * Otherwise "linear" picks:
 *   bf16 weights, <= 4 rows: own GEMV (k_gemv.cu); more rows: cuBLAS bf16 GEMM (fp32 accumulate,
 *   beta = 1 for the residual add);
 *   int8/int4 weights, <= 64 rows: tensor-core GEMV; more: dequantise to bf16 scratch + cuBLAS.
 * Attention: a run of tokens of one sequence (prefill) uses the tensor-core prefill kernel; any
 * other batch uses the paged decode kernel, split over the context (flash-decoding) when the batch
 * alone would not fill the GPU; up to 4 decode tokens with the bf16 cache take the cluster kernel
 * (plan.cu's size per weight format) unless cfg.attn_cluster is 0.
 *
 * Settings: everything that can differ between two decoders lives in its fr_cuda (cfg, after the
 * environment's off-switches are applied at creation); nothing here is process-wide.
 *
 * Inputs of a step (token ids, positions, token -> sequence, wanted rows, int8 KV segments, block
 * tables) are packed on the host into one pinned buffer and sent with one copy; every kernel reads
 * them at fixed device addresses, which is what lets a decode step be captured once per batch
 * bucket and replayed (cudaGraphLaunch) with new inputs. A bucket pads the batch with dummy tokens
 * (token 0, position 0) whose block table points at the reserved block 0.
 *
 * Multimodal batches (batch.h): embd rows are copied from the host over the token embeddings
 * right after frk_embed (one copy per run of used rows; such a step runs eagerly, not from a
 * graph). A batch with rope_pos sends its three position rows (in_d + off_rpos) and computes
 * each layer's qkv unfused: rmsnorm -> linear -> frk_mrope_kv (k_mrope.cu: per-section angles,
 * KV slot = pos), so the positions of the rotation (prompt t/h/w, or KV position + the
 * sequence's rope delta when decoding after an image) need not equal the KV slot; attention and
 * the other linear layers are the text path's. Decode steps with rope_pos have their own graphs
 * (graphs_mm, same buckets). Text batches take none of these branches: their kernels and
 * launches are unchanged.
 */
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

#include <math.h>
#include <string.h>

static_assert(FRK_TL_W == FR_CUDA_TRACE_W, "one timeline record size");

#define NBUCKETS 12
#define MAX_ALLOCS 512

struct dmat {
    void *w;       /* bf16 [M][K] or packed */
    uint32_t *sz;  /* int: scale words */
    int M, K;
};
struct dlayer {
    float *attn_norm, *ffn_norm, *bqkv; /* bqkv NULL without biases */
    dmat qkv, o, gu, down;
};

struct fr_cuda {
    fr_hparams hp;
    fr_cuda_config cfg;
    int wbits; /* 16, 8, 4 */
    int dev, n_sm;
    cudaStream_t st;
    cublasHandle_t cub;
    char name[256];
    void *allocs[MAX_ALLOCS];
    int n_allocs;
    /* weights */
    uint16_t *tok_embd;
    dmat out;
    float *out_norm;
    dlayer *L;
    double *inv_freq;
    float *cos_tab, *sin_tab; /* [max_ctx][D/2] */
    /* KV */
    void *kc, *vc;
    float *ksc, *vsc;
    int n_blocks;
    size_t kv_block_bytes;
    /* sizes */
    int MT, MS, bt_stride, max_split, nq, nk;
    int attn_cluster; /* the decode attention's cluster size (plan.cu), 0 with cfg.attn_cluster off */
    size_t weight_bytes, scratch_bytes, kv_bytes;
    /* scratch (device) */
    float *x;        /* [MT][E] residual stream */
    uint16_t *xn;    /* [MT][E] normed bf16 */
    float *qkv;      /* [MT][nq + 2 nk] */
    uint16_t *qb;    /* [MT][nq] roped q */
    uint16_t *attn;  /* [MT][nq] attention output */
    float *gu;       /* [MT][2F] (GEMM path) */
    uint16_t *act;   /* [MT][F] */
    float *logits;   /* [MT][V] */
    uint16_t *kvnew; /* [MT][2 nk] (int8 KV) */
    float *part;     /* [MS][H][max_split][D + 2] */
    uint16_t *wdq;   /* int weights: bf16 [max M*K] for prefill GEMMs */
    unsigned long long *trace; /* cfg.trace: timeline probes, FRK_TL_W words per launch slot */
    int trace_slot;            /* next slot while run_layers records a step */
    size_t wdq_elems;
    int32_t *ids;    /* [MT] */
    frk_sample_params *sp_d; /* [MT] */
    /* inputs: device + pinned host mirror, int32 words */
    int32_t *in_d, *in_h;
    size_t in_words;
    int off_tok, off_pos, off_seq, off_out, off_seg, off_seg0, off_rows, off_bt;
    int off_rpos;    /* M-RoPE rows [3][plan T] (t, h, w; room for 3 MT), after the block
                      * tables; sent only for batches that carry rope_pos */
    /* pinned outputs */
    float *logits_h;
    int logits_h_rows;
    int32_t *ids_h;
    frk_sample_params *sp_h;
    /* two sets of the pinned buffers above (in_h, ids_h, sp_h point into the current one), so a
     * step can be prepared while the previous one's copies are still queued (fr_cuda_submit);
     * per set the step it carries: its event, its wanted rows */
    int32_t *in_hb[2], *ids_hb[2];
    frk_sample_params *sp_hb[2];
    cudaEvent_t ev[2];
    int *wrows[2];
    int n_want[2];
    int n_flight, flight0; /* steps submitted and not collected; the set of the oldest */
    int fed_rows;          /* rows a fed step may have: the last step's sampled rows, in in_d */
    int cur;               /* the set the next step uses */
    /* host batch analysis */
    fr_seq **seq_list;
    int *seq_cnt;
    cudaGraphExec_t graphs[NBUCKETS];
    cudaGraphExec_t graphs_mm[NBUCKETS]; /* the same buckets for decode steps with M-RoPE rows */
    int bucket_size[NBUCKETS];
    int n_buckets;
    fr_cuda_stats stats;
};

/* ------------------------------------------------------------------ small helpers */
static int dalloc(fr_cuda *c, void **p, size_t bytes, size_t *acct, fr_err *err) {
    *p = NULL;
    if (bytes == 0) bytes = 16;
    FR_DEV_ASSERT(c->n_allocs < MAX_ALLOCS);
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fr_err_set(err, "cuda: cannot allocate %.1f MiB of device memory (%s)", bytes / 1048576.0,
                   cudaGetErrorString(e));
        *p = NULL;
        return -1;
    }
    c->allocs[c->n_allocs++] = *p;
    if (acct) *acct += bytes;
    return 0;
}
#define DALLOC(ptr, bytes, acct)                                                           \
    do {                                                                                   \
        void *p_;                                                                          \
        if (dalloc(c, &p_, (bytes), (acct), err)) return -1;                              \
        (ptr) = (decltype(ptr))p_;                                                         \
    } while (0)

extern "C" fr_cuda_config fr_cuda_config_default(void) {
    fr_cuda_config c;
    memset(&c, 0, sizeof c);
    c.device = 0;
    c.weights = FR_CUDA_W_BF16;
    c.kv_int8 = 0;
    c.kv_fraction = 0.9f;
    c.max_tokens = 512;
    c.max_seqs = 64;
    c.max_ctx = 0;
    c.use_graphs = 1;
    c.prefill_mma = 1;
    c.fuse = 1;
    c.attn_cluster = 1;
    c.trace = 0;
    return c;
}

/* The environment's off-switch `name` ("0" or "1", nothing else) into *v when set. */
static int env_switch(const char *name, int *v, fr_err *err) {
    const char *e = getenv(name);
    if (!e) return 0;
    if (!strcmp(e, "0") || !strcmp(e, "1")) {
        *v = e[0] == '1';
        return 0;
    }
    fr_err_set(err, "cuda: %s=\"%.40s\" is not 0 or 1", name, e);
    return -1;
}
/* The documented off-switches (docs/CUDA.md) over cfg. */
static int env_switches(fr_cuda_config *cfg, fr_err *err) {
    return env_switch("FRUGAL_CUDA_GRAPHS", &cfg->use_graphs, err) ||
           env_switch("FRUGAL_CUDA_FUSE", &cfg->fuse, err) ||
           env_switch("FRUGAL_CUDA_ATTN_CLUSTER", &cfg->attn_cluster, err) ||
           env_switch("FRUGAL_CUDA_PREFILL_MMA", &cfg->prefill_mma, err);
}

extern "C" int fr_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

static int alloc_dmat(fr_cuda *c, dmat *d, int M, int K, fr_err *err) {
    d->M = M;
    d->K = K;
    d->sz = NULL;
    if (c->wbits == 16) {
        DALLOC(d->w, (size_t)M * K * 2, &c->weight_bytes);
    } else {
        DALLOC(d->w, frk_quant_bytes(M, K, c->wbits), &c->weight_bytes);
        DALLOC(d->sz, frk_quant_sz_count(M, K) * 4, &c->weight_bytes);
    }
    return 0;
}


/* ------------------------------------------------------------------ creation */
static fr_cuda *decoder_create(const fr_hparams *hp, const fr_cuda_config *cfg_in, fr_err *err) {
    fr_cuda_config cfg = cfg_in ? *cfg_in : fr_cuda_config_default();
    const int D = hp->head_dim;
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->n_head / hp->n_head_kv > 8) {
        fr_err_set(err, "cuda: %d query heads over %d KV heads is not supported (group <= 8)",
                   hp->n_head, hp->n_head_kv);
        return NULL;
    }
    if (!(D == 8 || D == 16 || D == 32 || D == 64 || D == 128 || D == 256)) {
        fr_err_set(err, "cuda: head_dim %d is not supported (8..256, a power of two)", D);
        return NULL;
    }
    if (hp->n_embd % 8 || hp->n_ff % 8) {
        fr_err_set(err, "cuda: hidden size %d and FFN size %d must be multiples of 8", hp->n_embd,
                   hp->n_ff);
        return NULL;
    }
    if (env_switches(&cfg, err)) return NULL;
    cfg.use_graphs = cfg.use_graphs != 0;
    cfg.fuse = cfg.fuse != 0;
    cfg.attn_cluster = cfg.attn_cluster != 0;
    cfg.prefill_mma = cfg.prefill_mma != 0;
    int n_dev = fr_cuda_device_count();
    if (n_dev <= 0) {
        fr_err_set(err, "cuda: no CUDA device is present");
        return NULL;
    }
    if (cfg.device < 0 || cfg.device >= n_dev) {
        fr_err_set(err, "cuda: device %d does not exist (%d present)", cfg.device, n_dev);
        return NULL;
    }
    fr_cuda *c = (fr_cuda *)calloc(1, sizeof *c);
    if (!c) {
        fr_err_set(err, "cuda: out of host memory");
        return NULL;
    }
    c->hp = *hp;
    if (cfg.max_tokens <= 0) cfg.max_tokens = 512;
    if (cfg.max_seqs <= 0) cfg.max_seqs = 64;
    if (cfg.max_seqs > cfg.max_tokens) cfg.max_seqs = cfg.max_tokens;
    if (cfg.max_ctx <= 0) cfg.max_ctx = hp->n_ctx_train > 0 ? FR_MIN(hp->n_ctx_train, 8192) : 8192;
    if (cfg.kv_fraction <= 0.f || cfg.kv_fraction > 0.98f) cfg.kv_fraction = 0.9f;
    c->cfg = cfg;
    c->wbits = cfg.weights == FR_CUDA_W_INT8 ? 8 : cfg.weights == FR_CUDA_W_INT4 ? 4 : 16;
    c->attn_cluster = cfg.attn_cluster ? frk_plan_attn_cluster(c->wbits) : 0;
    c->dev = cfg.device;
    FR_CK(cudaSetDevice(c->dev));
    cudaDeviceProp prop;
    FR_CK(cudaGetDeviceProperties(&prop, c->dev));
    snprintf(c->name, sizeof c->name, "%.200s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
    c->n_sm = prop.multiProcessorCount;
    FR_CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    FR_CKB(cublasCreate(&c->cub));
    FR_CKB(cublasSetStream(c->cub, c->st));
    c->MT = cfg.max_tokens;
    c->MS = cfg.max_seqs;
    c->bt_stride = (cfg.max_ctx + FRK_BLOCK - 1) / FRK_BLOCK;
    c->max_split = 64; /* partials allocated for this many; the most splits of a token's keys */
    c->nq = hp->n_head * D;
    c->nk = hp->n_head_kv * D;
    /* buckets 1, 2, 4, ... and max_seqs */
    for (int b = 1; b < c->MS && c->n_buckets < NBUCKETS - 1; b *= 2) c->bucket_size[c->n_buckets++] = b;
    c->bucket_size[c->n_buckets++] = c->MS;
    return c;
}

static int alloc_weights(fr_cuda *c, bool share_embd_out, fr_err *err) {
    const fr_hparams *hp = &c->hp;
    const int E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab;
    DALLOC(c->tok_embd, (size_t)V * E * 2, &c->weight_bytes);
    DALLOC(c->out_norm, (size_t)E * 4, &c->weight_bytes);
    if (share_embd_out && c->wbits == 16) {
        c->out.w = c->tok_embd;
        c->out.M = V;
        c->out.K = E;
    } else if (alloc_dmat(c, &c->out, V, E, err)) {
        return -1;
    }
    c->L = (dlayer *)calloc((size_t)hp->n_layer, sizeof(dlayer));
    if (!c->L) {
        fr_err_set(err, "cuda: out of host memory");
        return -1;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        dlayer *L = &c->L[l];
        DALLOC(L->attn_norm, (size_t)E * 4, &c->weight_bytes);
        DALLOC(L->ffn_norm, (size_t)E * 4, &c->weight_bytes);
        if (alloc_dmat(c, &L->qkv, c->nq + 2 * c->nk, E, err) ||
            alloc_dmat(c, &L->o, E, c->nq, err) || alloc_dmat(c, &L->gu, 2 * F, E, err) ||
            alloc_dmat(c, &L->down, E, F, err))
            return -1;
    }
    /* rope inverse frequencies and cos/sin tables (filled by set_inv_freq) */
    DALLOC(c->inv_freq, (size_t)(hp->head_dim / 2) * sizeof(double), &c->weight_bytes);
    DALLOC(c->cos_tab, (size_t)c->cfg.max_ctx * (hp->head_dim / 2) * sizeof(float), &c->weight_bytes);
    DALLOC(c->sin_tab, (size_t)c->cfg.max_ctx * (hp->head_dim / 2) * sizeof(float), &c->weight_bytes);
    return 0;
}

static void set_inv_freq(fr_cuda *c, const float *freq_factors) {
    const fr_hparams *hp = &c->hp;
    const int half = hp->head_dim / 2;
    double *inv = (double *)malloc((size_t)half * sizeof(double));
    for (int i = 0; i < half; i++) {
        double v = pow((double)hp->rope_theta, -2.0 * i / hp->head_dim);
        if (freq_factors) v /= freq_factors[i];
        if (c->cfg.rope_freq_bf16) v = fr_bf16_to_f32(fr_f32_to_bf16((float)v));
        inv[i] = v;
    }
    FR_CK(cudaMemcpy(c->inv_freq, inv, (size_t)half * sizeof(double), cudaMemcpyHostToDevice));
    /* the CPU decoder's table: angle and cos/sin in double, stored as float */
    const size_t n = (size_t)c->cfg.max_ctx * half;
    float *ct = (float *)malloc(n * sizeof(float)), *st = (float *)malloc(n * sizeof(float));
    FR_DEV_ASSERT(ct && st);
    for (int p = 0; p < c->cfg.max_ctx; p++)
        for (int i = 0; i < half; i++) {
            const double a = (double)p * inv[i];
            ct[(size_t)p * half + i] = (float)cos(a);
            st[(size_t)p * half + i] = (float)sin(a);
        }
    FR_CK(cudaMemcpy(c->cos_tab, ct, n * sizeof(float), cudaMemcpyHostToDevice));
    FR_CK(cudaMemcpy(c->sin_tab, st, n * sizeof(float), cudaMemcpyHostToDevice));
    free(ct);
    free(st);
    free(inv);
}

static int alloc_scratch(fr_cuda *c, fr_err *err) {
    const fr_hparams *hp = &c->hp;
    const size_t MT = (size_t)c->MT, E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab;
    const size_t W = (size_t)c->nq + 2 * c->nk;
    size_t *a = &c->scratch_bytes;
    DALLOC(c->x, MT * E * 4, a);
    DALLOC(c->xn, MT * FR_MAX(E, F) * 2, a);
    DALLOC(c->qkv, MT * W * 4, a);
    DALLOC(c->qb, MT * c->nq * 2, a);
    DALLOC(c->attn, MT * c->nq * 2, a);
    DALLOC(c->gu, MT * 2 * F * 4, a);
    DALLOC(c->act, MT * F * 2, a);
    DALLOC(c->logits, MT * V * 4, a);
    if (c->cfg.kv_int8) DALLOC(c->kvnew, MT * 2 * c->nk * 2, a);
    DALLOC(c->part, (size_t)c->MS * hp->n_head * c->max_split * (hp->head_dim + 2) * 4, a);
    if (c->wbits != 16) {
        c->wdq_elems = FR_MAX(FR_MAX(W * E, (size_t)E * c->nq), FR_MAX(2 * F * E, E * F));
        DALLOC(c->wdq, c->wdq_elems * 2, a);
    }
    DALLOC(c->ids, MT * 4, a);
    DALLOC(c->sp_d, MT * sizeof(frk_sample_params), a);
    if (c->cfg.trace) DALLOC(c->trace, (size_t)FRK_TL_W * (6 * hp->n_layer + 1) * 8, a);
    /* cuBLAS workspace (set explicitly so graph capture never allocates) */
    void *ws;
    DALLOC(ws, 32u << 20, a);
    FR_CKB(cublasSetWorkspace(c->cub, ws, 32u << 20));
    /* inputs */
    c->off_tok = 0;
    c->off_pos = c->MT;
    c->off_seq = 2 * c->MT;
    c->off_out = 3 * c->MT;
    c->off_seg = 4 * c->MT;
    c->off_seg0 = 8 * c->MT;
    c->off_rows = 9 * c->MT;
    c->off_bt = 10 * c->MT;
    c->off_rpos = 10 * c->MT + c->MT * c->bt_stride;
    c->in_words = (size_t)c->off_rpos + (size_t)3 * c->MT;
    DALLOC(c->in_d, c->in_words * 4, a);
    FR_CK(cudaMemset(c->in_d, 0, c->in_words * 4));
    FR_CK(cudaMemset(c->x, 0, MT * E * 4));
    FR_CK(cudaMemset(c->xn, 0, MT * FR_MAX(E, F) * 2));
    FR_CK(cudaMemset(c->attn, 0, MT * c->nq * 2));
    FR_CK(cudaMemset(c->act, 0, MT * F * 2));
    for (int i = 0; i < 2; i++) {
        if (cudaMallocHost((void **)&c->in_hb[i], c->in_words * 4) != cudaSuccess) goto host_oom;
        memset(c->in_hb[i], 0, c->in_words * 4);
        if (cudaMallocHost((void **)&c->ids_hb[i], MT * 4) != cudaSuccess) goto host_oom;
        if (cudaMallocHost((void **)&c->sp_hb[i], MT * sizeof(frk_sample_params)) != cudaSuccess) goto host_oom;
        c->wrows[i] = (int *)calloc(MT, sizeof(int));
        if (!c->wrows[i]) goto host_oom;
        FR_CK(cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming));
    }
    c->in_h = c->in_hb[0];
    c->ids_h = c->ids_hb[0];
    c->sp_h = c->sp_hb[0];
    c->logits_h_rows = (int)FR_MIN((size_t)c->MS, (size_t)FR_MAX(1, (int)((64u << 20) / (V * 4))));
    if (c->logits_h_rows < 1) c->logits_h_rows = 1;
    if (cudaMallocHost((void **)&c->logits_h, (size_t)c->logits_h_rows * V * 4) != cudaSuccess) goto host_oom;
    c->seq_list = (fr_seq **)calloc(MT + (size_t)c->MS, sizeof(fr_seq *));
    c->seq_cnt = (int *)calloc(MT + (size_t)c->MS, sizeof(int));
    if (!c->seq_list || !c->seq_cnt) goto host_oom;
    return 0;
host_oom:
    cudaGetLastError();
    fr_err_set(err, "cuda: cannot allocate pinned host buffers");
    return -1;
}

static int alloc_kv(fr_cuda *c, fr_err *err) {
    const fr_hparams *hp = &c->hp;
    const size_t per_head_block = (size_t)FRK_BLOCK * hp->head_dim;
    const size_t elem = c->cfg.kv_int8 ? 1 : 2;
    const size_t heads = (size_t)hp->n_layer * hp->n_head_kv;
    c->kv_block_bytes = 2 * heads * per_head_block * elem + (c->cfg.kv_int8 ? 2 * heads * 4 : 0);
    size_t bytes = c->cfg.kv_bytes;
    if (!bytes) {
        size_t fr = 0, tot = 0;
        FR_CK(cudaMemGetInfo(&fr, &tot));
        bytes = (size_t)((double)fr * c->cfg.kv_fraction);
    }
    long nb = (long)(bytes / c->kv_block_bytes);
    if (nb > INT32_MAX / 2) nb = INT32_MAX / 2;
    if (nb < 2) {
        fr_err_set(err, "cuda: no room for the KV cache (%.1f MiB available, %.2f MiB per block)",
                   bytes / 1048576.0, c->kv_block_bytes / 1048576.0);
        return -1;
    }
    c->n_blocks = (int)nb;
    const size_t pool = (size_t)nb * heads * per_head_block * elem;
    DALLOC(c->kc, pool, &c->kv_bytes);
    DALLOC(c->vc, pool, &c->kv_bytes);
    if (c->cfg.kv_int8) {
        DALLOC(c->ksc, (size_t)nb * heads * 4, &c->kv_bytes);
        DALLOC(c->vsc, (size_t)nb * heads * 4, &c->kv_bytes);
        FR_CK(cudaMemset(c->ksc, 0, heads * 4));
        FR_CK(cudaMemset(c->vsc, 0, heads * 4));
    }
    /* block 0 is the trash block for padding rows: give it defined contents */
    FR_CK(cudaMemset(c->kc, 0, heads * per_head_block * elem));
    FR_CK(cudaMemset(c->vc, 0, heads * per_head_block * elem));
    return 0;
}

extern "C" void fr_cuda_free(fr_cuda *c) {
    if (!c) return;
    cudaSetDevice(c->dev);
    cudaStreamSynchronize(c->st);
    for (int i = 0; i < NBUCKETS; i++)
        if (c->graphs[i]) cudaGraphExecDestroy(c->graphs[i]);
    for (int i = 0; i < NBUCKETS; i++)
        if (c->graphs_mm[i]) cudaGraphExecDestroy(c->graphs_mm[i]);
    for (int i = 0; i < c->n_allocs; i++) cudaFree(c->allocs[i]);
    for (int i = 0; i < 2; i++) {
        if (c->in_hb[i]) cudaFreeHost(c->in_hb[i]);
        if (c->ids_hb[i]) cudaFreeHost(c->ids_hb[i]);
        if (c->sp_hb[i]) cudaFreeHost(c->sp_hb[i]);
        if (c->ev[i]) cudaEventDestroy(c->ev[i]);
        free(c->wrows[i]);
    }
    if (c->logits_h) cudaFreeHost(c->logits_h);
    if (c->cub) cublasDestroy(c->cub);
    if (c->st) cudaStreamDestroy(c->st);
    free(c->L);
    free(c->seq_list);
    free(c->seq_cnt);
    free(c);
}

/* ------------------------------------------------------------------ weights from a model */
/* A malloc'd F32 copy of a tensor (F32 / Q8_0 / Q4_0 / the K-quants), or NULL with err. */
static float *tensor_f32(const fr_tensor *t, fr_err *err) {
    const int64_t n = fr_tensor_nelem(t);
    float *o = (float *)malloc((size_t)n * sizeof(float));
    if (!o) {
        fr_err_set(err, "cuda: out of host memory converting %s", t->name ? t->name : "tensor");
        return NULL;
    }
    if (t->dtype == FR_DTYPE_F32) {
        memcpy(o, t->data, (size_t)n * 4);
    } else if (t->dtype == FR_DTYPE_Q8_0) {
        const uint8_t *p = (const uint8_t *)t->data;
        for (int64_t b = 0; b < n / 32; b++, p += 34) {
            uint16_t d16;
            memcpy(&d16, p, 2);
            const float d = fr_f16_to_f32(d16);
            for (int j = 0; j < 32; j++) o[b * 32 + j] = (float)(int8_t)p[2 + j] * d;
        }
    } else if (t->dtype == FR_DTYPE_Q4_0) {
        const uint8_t *p = (const uint8_t *)t->data;
        for (int64_t b = 0; b < n / 32; b++, p += 18) {
            uint16_t d16;
            memcpy(&d16, p, 2);
            const float d = fr_f16_to_f32(d16);
            for (int j = 0; j < 16; j++) {
                o[b * 32 + j] = (float)((p[2 + j] & 0xF) - 8) * d;
                o[b * 32 + j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
            }
        }
    } else if (fr_dtype_to_f32(t->dtype, t->data, o, n) == 0) { /* K-quants, F16, BF16 */
    } else {
        fr_err_set(err, "cuda: tensor %s has dtype %d, which the CUDA backend does not take",
                   t->name ? t->name : "?", (int)t->dtype);
        free(o);
        return NULL;
    }
    return o;
}

static int upload_vec(float *dst, const fr_tensor *t, int n, fr_err *err) {
    if (!fr_tensor_present(t) || fr_tensor_nelem(t) != n) {
        fr_err_set(err, "cuda: tensor %s missing or of the wrong size", t->name ? t->name : "?");
        return -1;
    }
    float *f = tensor_f32(t, err);
    if (!f) return -1;
    FR_CK(cudaMemcpy(dst, f, (size_t)n * 4, cudaMemcpyHostToDevice));
    free(f);
    return 0;
}

/* Rows [0, n_pair) of f [.][K] (the q and k heads of the fused qkv matrix) into pair order: within
 * each head of D rows, rotation pair i (rows i and i + D/2 when the model rotates halves) becomes
 * rows 2i, 2i + 1, so one epilogue thread sees both values it rotates (frk_gemv_stream's ROPE
 * mode; frk_rope_kv with pair_rows). Interleaved models already have that order. */
static int pair_order(const fr_hparams *hp, float *f, int n_pair, int K) {
    const int D = hp->head_dim, half = D / 2;
    if (hp->rope_interleaved) return 0;
    float *tmp = (float *)malloc((size_t)D * K * sizeof(float));
    if (!tmp) return -1;
    for (int h0 = 0; h0 + D <= n_pair; h0 += D) {
        float *head = f + (size_t)h0 * K;
        memcpy(tmp, head, (size_t)D * K * sizeof(float));
        for (int i = 0; i < half; i++) {
            memcpy(head + (size_t)(2 * i) * K, tmp + (size_t)i * K, (size_t)K * sizeof(float));
            memcpy(head + (size_t)(2 * i + 1) * K, tmp + (size_t)(i + half) * K, (size_t)K * sizeof(float));
        }
    }
    free(tmp);
    return 0;
}

/* Upload a fused matrix built from n sources (rows concatenated, or interleaved row by row when
 * interleave = 1 for 2 sources of equal rows); the first n_pair rows are put in pair order. */
static int upload_mat(fr_cuda *c, dmat *d, const fr_tensor *const *src, int nsrc, int interleave,
                      int n_pair, fr_err *err) {
    const int M = d->M, K = d->K;
    float *f = (float *)malloc((size_t)M * K * sizeof(float));
    if (!f) {
        fr_err_set(err, "cuda: out of host memory");
        return -1;
    }
    int row = 0;
    for (int s = 0; s < nsrc; s++) {
        const fr_tensor *t = src[s];
        if (!fr_tensor_present(t) || t->ne[0] != K) {
            fr_err_set(err, "cuda: tensor %s missing or of the wrong shape", t->name ? t->name : "?");
            free(f);
            return -1;
        }
        const int rows = (int)t->ne[1];
        float *tf = tensor_f32(t, err);
        if (!tf) {
            free(f);
            return -1;
        }
        for (int r = 0; r < rows; r++) {
            const int dst = interleave ? 2 * r + s : row + r;
            if (dst >= M) break;
            memcpy(f + (size_t)dst * K, tf + (size_t)r * K, (size_t)K * 4);
        }
        row += rows;
        free(tf);
    }
    if (row != M) {
        fr_err_set(err, "cuda: fused matrix has %d rows, expected %d", row, M);
        free(f);
        return -1;
    }
    if (n_pair && pair_order(&c->hp, f, n_pair, K)) {
        free(f);
        fr_err_set(err, "cuda: out of host memory");
        return -1;
    }
    if (c->wbits == 16) {
        uint16_t *h = (uint16_t *)malloc((size_t)M * K * 2);
        if (!h) {
            free(f);
            fr_err_set(err, "cuda: out of host memory");
            return -1;
        }
        for (size_t i = 0; i < (size_t)M * K; i++) h[i] = fr_f32_to_bf16(f[i]);
        FR_CK(cudaMemcpy(d->w, h, (size_t)M * K * 2, cudaMemcpyHostToDevice));
        free(h);
    } else {
        const int NG = (K + FRK_GROUP - 1) / FRK_GROUP;
        uint8_t *q = (uint8_t *)malloc((size_t)M * NG * FRK_GROUP);
        uint16_t *s = (uint16_t *)malloc((size_t)M * NG * 2);
        uint8_t *z = (uint8_t *)malloc((size_t)M * NG);
        void *pk = malloc(frk_quant_bytes(M, K, c->wbits));
        uint32_t *sz = (uint32_t *)malloc(frk_quant_sz_count(M, K) * 4);
        if (!q || !s || !z || !pk || !sz) {
            free(q), free(s), free(z), free(pk), free(sz), free(f);
            fr_err_set(err, "cuda: out of host memory");
            return -1;
        }
        frk_quant_rows(f, M, K, c->wbits, q, s, z);
        frk_quant_pack(q, s, z, M, K, c->wbits, pk, sz);
        FR_CK(cudaMemcpy(d->w, pk, frk_quant_bytes(M, K, c->wbits), cudaMemcpyHostToDevice));
        FR_CK(cudaMemcpy(d->sz, sz, frk_quant_sz_count(M, K) * 4, cudaMemcpyHostToDevice));
        free(q), free(s), free(z), free(pk), free(sz);
    }
    free(f);
    return 0;
}

static int upload_model(fr_cuda *c, const fr_model *m, fr_err *err) {
    const fr_hparams *hp = &c->hp;
    const int E = hp->n_embd, V = hp->n_vocab;
    const fr_weights *w = &m->w;
    /* embedding table: bf16 */
    {
        if (!fr_tensor_present(&w->tok_embd) || w->tok_embd.ne[0] != E || w->tok_embd.ne[1] != V) {
            fr_err_set(err, "cuda: token embedding missing or of the wrong shape");
            return -1;
        }
        float *f = tensor_f32(&w->tok_embd, err);
        if (!f) return -1;
        uint16_t *h = (uint16_t *)malloc((size_t)V * E * 2);
        if (!h) {
            free(f);
            fr_err_set(err, "cuda: out of host memory");
            return -1;
        }
        for (size_t i = 0; i < (size_t)V * E; i++) h[i] = fr_f32_to_bf16(f[i]);
        FR_CK(cudaMemcpy(c->tok_embd, h, (size_t)V * E * 2, cudaMemcpyHostToDevice));
        free(h);
        free(f);
    }
    if (c->out.w != c->tok_embd) {
        const fr_tensor *o = fr_tensor_present(&w->output) ? &w->output : &w->tok_embd;
        if (upload_mat(c, &c->out, &o, 1, 0, 0, err)) return -1;
    }
    if (upload_vec(c->out_norm, &w->output_norm, E, err)) return -1;
    for (int l = 0; l < hp->n_layer; l++) {
        const fr_layer *ly = &w->layers[l];
        dlayer *L = &c->L[l];
        if (upload_vec(L->attn_norm, &ly->attn_norm, E, err) ||
            upload_vec(L->ffn_norm, &ly->ffn_norm, E, err))
            return -1;
        const fr_tensor *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
        const fr_tensor *gu[2] = {&ly->w_gate, &ly->w_up};
        const fr_tensor *wo = &ly->wo, *wd = &ly->w_down;
        if (upload_mat(c, &L->qkv, qkv, 3, 0, c->nq + c->nk, err) ||
            upload_mat(c, &L->o, &wo, 1, 0, 0, err) || upload_mat(c, &L->gu, gu, 2, 1, 0, err) ||
            upload_mat(c, &L->down, &wd, 1, 0, 0, err))
            return -1;
        if (fr_tensor_present(&ly->bq)) {
            const int W = c->nq + 2 * c->nk;
            float *b = (float *)malloc((size_t)W * 4);
            const fr_tensor *bs[3] = {&ly->bq, &ly->bk, &ly->bv};
            const int n[3] = {c->nq, c->nk, c->nk};
            int off = 0;
            for (int i = 0; i < 3; i++) {
                if (!fr_tensor_present(bs[i]) || fr_tensor_nelem(bs[i]) != n[i]) {
                    free(b);
                    fr_err_set(err, "cuda: layer %d: q/k/v biases incomplete", l);
                    return -1;
                }
                float *f = tensor_f32(bs[i], err);
                if (!f) {
                    free(b);
                    return -1;
                }
                memcpy(b + off, f, (size_t)n[i] * 4);
                free(f);
                off += n[i];
            }
            DALLOC(L->bqkv, (size_t)W * 4, &c->weight_bytes);
            FR_CK(cudaMemcpy(L->bqkv, b, (size_t)W * 4, cudaMemcpyHostToDevice));
            free(b);
        }
    }
    set_inv_freq(c, w->rope_freq_factors);
    return 0;
}

extern "C" fr_cuda *fr_cuda_new(const fr_model *m, const fr_cuda_config *cfg, fr_err *err) {
    fr_cuda *c = decoder_create(&m->hp, cfg, err);
    if (!c) return NULL;
    const bool shared = m->w.output.data == m->w.tok_embd.data || !fr_tensor_present(&m->w.output);
    if (alloc_weights(c, shared, err) || upload_model(c, m, err) ||
        alloc_scratch(c, err) || alloc_kv(c, err)) {
        fr_cuda_free(c);
        return NULL;
    }
    FR_CK(cudaDeviceSynchronize());
    return c;
}

extern "C" fr_cuda *fr_cuda_new_random(const fr_hparams *hp, const fr_cuda_config *cfg,
                                       uint64_t seed, fr_err *err) {
    fr_cuda *c = decoder_create(hp, cfg, err);
    if (!c) return NULL;
    if (alloc_weights(c, hp->tied_embeddings, err)) {
        fr_cuda_free(c);
        return NULL;
    }
    const int E = hp->n_embd;
    cudaStream_t st = c->st;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    frk_fill_bf16(c->tok_embd, (size_t)hp->n_vocab * E, 1.0f, 0.f, s++, st);
    frk_fill_f32(c->out_norm, (size_t)E, 0.1f, 1.0f, s++, st);
    auto fill = [&](dmat *d) {
        const float amp = sqrtf(3.f / (float)d->K);
        if (c->wbits == 16)
            frk_fill_bf16((uint16_t *)d->w, (size_t)d->M * d->K, amp, 0.f, s++, st);
        else
            frk_quant_random(d->w, d->sz, d->M, d->K, c->wbits, amp, s++, st);
    };
    if (c->out.w != c->tok_embd) fill(&c->out);
    for (int l = 0; l < hp->n_layer; l++) {
        dlayer *L = &c->L[l];
        frk_fill_f32(L->attn_norm, (size_t)E, 0.1f, 1.0f, s++, st);
        frk_fill_f32(L->ffn_norm, (size_t)E, 0.1f, 1.0f, s++, st);
        fill(&L->qkv);
        fill(&L->o);
        fill(&L->gu);
        fill(&L->down);
    }
    set_inv_freq(c, NULL);
    FR_CK(cudaStreamSynchronize(st));
    if (alloc_scratch(c, err) || alloc_kv(c, err)) {
        fr_cuda_free(c);
        return NULL;
    }
    FR_CK(cudaDeviceSynchronize());
    return c;
}

/* ------------------------------------------------------------------ linear layers */
static void gemm_bf16(fr_cuda *c, const void *W, int M, int K, const uint16_t *in, int T,
                      float *out, float beta) {
    const float alpha = 1.f;
    FR_CKB(cublasGemmEx(c->cub, CUBLAS_OP_T, CUBLAS_OP_N, M, T, K, &alpha, W, CUDA_R_16BF, K, in,
                        CUDA_R_16BF, K, &beta, out, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
}

/* out = W in (STORE), out += W in (ACC), or out = swiglu(W in) (SWIGLU, bf16 [T][M/2]). */
static void linear(fr_cuda *c, const dmat *W, const uint16_t *in, int T, void *out, int mode) {
    const int M = W->M, K = W->K;
    const int ldo = mode == FRK_OUT_SWIGLU ? M / 2 : M;
    cudaStream_t st = c->st;
    if (T <= 0) return;
    const void *Wb = W->w;
    if (c->wbits != 16) {
        if (T <= 64 || (size_t)M * K > c->wdq_elems) {
            for (int t0 = 0; t0 < T; t0 += 64) {
                const int n = FR_MIN(64, T - t0);
                void *o = mode == FRK_OUT_SWIGLU ? (void *)((uint16_t *)out + (size_t)t0 * ldo)
                                                 : (void *)((float *)out + (size_t)t0 * ldo);
                frk_gemv_q(W->w, W->sz, M, K, c->wbits, in + (size_t)t0 * K, K, n, o, ldo, mode, st);
            }
            return;
        }
        frk_dequant_q(W->w, W->sz, M, K, c->wbits, c->wdq, st);
        Wb = c->wdq;
    } else if (T <= 4) {
        frk_gemv_bf16((const uint16_t *)W->w, M, K, in, K, T, out, ldo, mode, st);
        return;
    }
    if (mode == FRK_OUT_SWIGLU) {
        gemm_bf16(c, Wb, M, K, in, T, c->gu, 0.f);
        frk_swiglu(c->gu, T, M / 2, (uint16_t *)out, st);
    } else {
        gemm_bf16(c, Wb, M, K, in, T, (float *)out, mode == FRK_OUT_ACC ? 1.f : 0.f);
    }
}

/* ------------------------------------------------------------------ one forward */
typedef struct plan {
    int T;       /* rows computed (bucket size for graphs) */
    int S;       /* block-table rows used (sequences + padding rows) */
    int n_out;   /* logits rows computed */
    int n_seg;   /* int8 KV segments */
    int prefill; /* single-sequence run: tensor-core prefill attention */
    int pos0;
    int n_split;
    int bucket;  /* index into graphs (graphs_mm when mrope), or -1 */
    int mrope;   /* 1: the batch carries M-RoPE rows (in_d + off_rpos): qkv through frk_mrope_kv */
    const float *embd;       /* host (T, E) rows replacing token embeddings where embd_use, or NULL */
    const uint8_t *embd_use; /* (T) or NULL = every row */
} plan;

static int split_for(const fr_cuda *c, int T) {
    if (T > c->MS) return 1;
    int s = (4 * c->n_sm + c->hp.n_head_kv * T - 1) / (c->hp.n_head_kv * T);
    if (s < 1) s = 1;
    if (s > c->max_split) s = c->max_split;
    return s;
}

/* The streamed, fused linear layer when it applies (fuse on, few rows, shapes supported): input
 * bf16 rows `in`, or the RMSNorm (weight nw) of residual rows xf (rows: optional gather); output
 * as linear(), or mode ROPE with *ra; the kernel configuration of product `prod` (frk_product)
 * from plan.cu. Returns 0 when it did not apply (the caller runs the separate kernels). */
static int stream_linear(fr_cuda *c, const dmat *W, const uint16_t *in, const float *xf,
                         const float *nw, const int32_t *rows, int T, void *out, int mode,
                         const frk_rope_args *ra, int prod) {
    if (!c->cfg.fuse || !frk_gemv_stream_supported(W->M, W->K, c->wbits, T)) return 0;
    frk_gemv_args g;
    memset(&g, 0, sizeof g);
    g.W = W->w;
    g.sz = W->sz;
    g.M = W->M;
    g.K = W->K;
    g.bits = c->wbits;
    g.x = in;
    g.ldx = W->K;
    g.xf = xf;
    g.nw = nw;
    g.rows = rows;
    g.eps = c->hp.rms_eps;
    g.nb = T;
    g.out = out;
    g.ldo = mode == FRK_OUT_SWIGLU ? W->M / 2 : W->M;
    g.mode = mode;
    if (ra) g.rope = *ra;
    if (c->trace) g.trace = c->trace + FRK_TL_W * c->trace_slot;
    g.plan = *frk_plan_stream(c->wbits, prod);
    frk_gemv_stream(&g, c->st);
    return 1;
}

static void run_layers(fr_cuda *c, const plan *pl) {
    const fr_hparams *hp = &c->hp;
    cudaStream_t st = c->st;
    const int T = pl->T, E = hp->n_embd;
    const int32_t *d_tok = c->in_d + c->off_tok, *d_pos = c->in_d + c->off_pos;
    const int32_t *d_seq = c->in_d + c->off_seq, *d_out = c->in_d + c->off_out;
    const int32_t *d_seg = c->in_d + c->off_seg, *d_seg0 = c->in_d + c->off_seg0;
    const int32_t *d_rows = c->in_d + c->off_rows;
    const int32_t *d_bt = c->in_d + c->off_bt;
    frk_embed(c->tok_embd, d_tok, T, E, c->x, st);
    if (pl->embd) /* image rows over their tokens' embeddings: one copy per run of used rows */
        for (int i = 0; i < T;) {
            if (pl->embd_use && !pl->embd_use[i]) {
                i++;
                continue;
            }
            int j = i + 1;
            while (j < T && (!pl->embd_use || pl->embd_use[j])) j++;
            FR_CK(cudaMemcpyAsync(c->x + (size_t)i * E, pl->embd + (size_t)i * E,
                                  (size_t)(j - i) * E * 4, cudaMemcpyHostToDevice, st));
            i = j;
        }
    /* timeline slots (fused path): per layer qkv, attention, combine, o, gate/up, down; then the
     * LM head. A product that does not stream leaves its slot untouched. */
    c->trace_slot = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        const dlayer *L = &c->L[l];
        frk_rope_args ra;
        memset(&ra, 0, sizeof ra);
        ra.qkv = c->qkv;
        ra.bias = L->bqkv;
        ra.pos = d_pos;
        ra.tok_seq = d_seq;
        ra.block_tables = d_bt;
        ra.inv_freq = c->inv_freq;
        ra.cos_tab = c->cos_tab;
        ra.sin_tab = c->sin_tab;
        ra.T = T;
        ra.H = hp->n_head;
        ra.Hkv = hp->n_head_kv;
        ra.D = hp->head_dim;
        ra.interleaved = hp->rope_interleaved;
        ra.bt_stride = c->bt_stride;
        ra.layer = l;
        ra.n_layer = hp->n_layer;
        ra.qout = c->qb;
        ra.pair_rows = 1;
        if (c->cfg.kv_int8) {
            ra.kvnew = c->kvnew;
        } else {
            ra.kc = (uint16_t *)c->kc;
            ra.vc = (uint16_t *)c->vc;
        }
        /* norm -> qkv -> rope + KV store */
        c->trace_slot = 6 * l;
        if (pl->mrope) { /* M-RoPE rows: the separate kernels, the text path's stay as they are */
            frk_rmsnorm(c->x, L->attn_norm, NULL, T, E, hp->rms_eps, c->xn, st);
            linear(c, &L->qkv, c->xn, T, c->qkv, FRK_OUT_STORE);
            frk_mrope_kv(&ra, c->in_d + c->off_rpos, T, hp->mrope_section, st);
        } else if (!stream_linear(c, &L->qkv, NULL, c->x, L->attn_norm, NULL, T, NULL, FRK_OUT_ROPE, &ra, FRK_P_QKV)) {
            frk_rmsnorm(c->x, L->attn_norm, NULL, T, E, hp->rms_eps, c->xn, st);
            linear(c, &L->qkv, c->xn, T, c->qkv, FRK_OUT_STORE);
            frk_rope_kv(&ra, st);
        }
        if (c->cfg.kv_int8)
            frk_kv_store_i8(c->kvnew, d_seg, d_seg0, d_rows, pl->n_seg, d_bt, c->bt_stride, l, hp->n_layer,
                            hp->n_head_kv, hp->head_dim, (int8_t *)c->kc, (int8_t *)c->vc, c->ksc,
                            c->vsc, st);
        frk_attn_args aa;
        memset(&aa, 0, sizeof aa);
        aa.q = c->qb;
        aa.kc = c->kc;
        aa.vc = c->vc;
        aa.kscale = c->ksc;
        aa.vscale = c->vsc;
        aa.pos = d_pos;
        aa.tok_seq = d_seq;
        aa.block_tables = d_bt;
        aa.T = T;
        aa.H = hp->n_head;
        aa.Hkv = hp->n_head_kv;
        aa.D = hp->head_dim;
        aa.bt_stride = c->bt_stride;
        aa.layer = l;
        aa.n_layer = hp->n_layer;
        aa.kv_int8 = c->cfg.kv_int8;
        aa.n_split = pl->n_split;
        aa.part = c->part;
        aa.out = c->attn;
        aa.trace = c->trace ? c->trace + FRK_TL_W * (6 * l + 1) : NULL;
        aa.cluster = c->attn_cluster;
        if (pl->prefill)
            frk_attention_prefill(&aa, pl->pos0, st);
        else
            frk_attention(&aa, st);
        c->trace_slot = 6 * l + 3;
        if (!stream_linear(c, &L->o, c->attn, NULL, NULL, NULL, T, c->x, FRK_OUT_ACC, NULL, FRK_P_O))
            linear(c, &L->o, c->attn, T, c->x, FRK_OUT_ACC);
        c->trace_slot = 6 * l + 4;
        if (!stream_linear(c, &L->gu, NULL, c->x, L->ffn_norm, NULL, T, c->act, FRK_OUT_SWIGLU, NULL, FRK_P_GU)) {
            frk_rmsnorm(c->x, L->ffn_norm, NULL, T, E, hp->rms_eps, c->xn, st);
            linear(c, &L->gu, c->xn, T, c->act, FRK_OUT_SWIGLU);
        }
        c->trace_slot = 6 * l + 5;
        if (!stream_linear(c, &L->down, c->act, NULL, NULL, NULL, T, c->x, FRK_OUT_ACC, NULL, FRK_P_DOWN))
            linear(c, &L->down, c->act, T, c->x, FRK_OUT_ACC);
    }
    c->trace_slot = 6 * hp->n_layer;
    if (!stream_linear(c, &c->out, NULL, c->x, c->out_norm, d_out, pl->n_out, c->logits, FRK_OUT_STORE, NULL, FRK_P_HEAD)) {
        frk_rmsnorm(c->x, c->out_norm, d_out, pl->n_out, E, hp->rms_eps, c->xn, st);
        linear(c, &c->out, c->xn, pl->n_out, c->logits, FRK_OUT_STORE);
    }
}

/* Check the batch, fill the pinned inputs, choose the plan. */
static int prepare(fr_cuda *c, const fr_batch *b, plan *pl, int *n_wanted, fr_err *err) {
    const fr_hparams *hp = &c->hp;
    const int T = b->n_tokens;
    if (T < 1 || T > c->MT) {
        fr_err_set(err, "cuda: batch of %d tokens (1..%d allowed)", T, c->MT);
        return -1;
    }
    int32_t *tok = c->in_h + c->off_tok, *pos = c->in_h + c->off_pos, *seq = c->in_h + c->off_seq;
    int32_t *out = c->in_h + c->off_out, *seg = c->in_h + c->off_seg, *seg0 = c->in_h + c->off_seg0;
    int32_t *rows = c->in_h + c->off_rows, *bt = c->in_h + c->off_bt;
    int S = 0;
    for (int i = 0; i < T; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab) {
            fr_err_set(err, "token id %d out of range (vocabulary %d)", b->tokens[i], hp->n_vocab);
            return -1;
        }
        fr_seq *s = b->seqs[i];
        int j = 0;
        while (j < S && c->seq_list[j] != s) j++;
        if (j == S) {
            c->seq_list[S] = s;
            c->seq_cnt[S] = 0;
            S++;
        }
        const int want = s->n_pos + c->seq_cnt[j];
        if (b->pos[i] != want) {
            fr_err_set(err, "position mismatch: token %d has position %d, the sequence expects %d", i,
                       b->pos[i], want);
            return -1;
        }
        c->seq_cnt[j]++;
        tok[i] = b->tokens[i];
        pos[i] = b->pos[i];
        seq[i] = j;
    }
    for (int j = 0; j < S; j++) {
        const fr_seq *s = c->seq_list[j];
        const int need = s->n_pos + c->seq_cnt[j];
        const int nb = (need + FRK_BLOCK - 1) / FRK_BLOCK;
        if (need > c->cfg.max_ctx || nb > c->bt_stride) {
            fr_err_set(err, "sequence of %d positions exceeds the context of %d", need, c->cfg.max_ctx);
            return -1;
        }
        if (s->n_blocks < nb) {
            fr_err_set(err, "cache blocks not reserved: %d positions need %d blocks, %d reserved",
                       need, nb, s->n_blocks);
            return -1;
        }
        for (int i = 0; i < nb; i++) {
            const int id = s->blocks[i];
            if (id < 1 || id >= c->n_blocks) {
                fr_err_set(err, "block id %d outside the device pool (1..%d)", id, c->n_blocks - 1);
                return -1;
            }
            bt[(size_t)j * c->bt_stride + i] = id;
        }
    }
    const int *ms = hp->mrope_section;
    if (b->rope_pos && !ms[0] && !ms[1] && !ms[2]) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "batch has M-RoPE positions but the model has no "
                    "mrope_section");
        return -1;
    }
    for (int i = 0; b->rope_pos && i < 3 * T; i++)
        if (b->rope_pos[i] < 0 || b->rope_pos[i] >= c->cfg.max_ctx) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "token %d: M-RoPE position %d outside 0..%d",
                        i % T, b->rope_pos[i], c->cfg.max_ctx - 1);
            return -1;
        }
    int nw = 0;
    for (int i = 0; i < T; i++)
        if (!b->logits || b->logits[i]) nw++;
    *n_wanted = nw;
    memset(pl, 0, sizeof *pl);
    pl->bucket = -1;
    pl->mrope = b->rope_pos != NULL;
    bool embd_rows = false; /* some row takes an image row: host copies, so no graph */
    for (int i = 0; b->embd && i < T && !embd_rows; i++) embd_rows = !b->embd_use || b->embd_use[i];
    if (embd_rows) {
        pl->embd = b->embd;
        pl->embd_use = b->embd_use;
    }
    if (c->cfg.use_graphs && S == T && T <= c->MS && !embd_rows) {
        int k = 0;
        while (c->bucket_size[k] < T) k++;
        pl->bucket = k;
    }
    if (pl->bucket >= 0) {
        const int Tp = c->bucket_size[pl->bucket];
        for (int i = T; i < Tp; i++) { /* padding rows -> trash block 0 */
            tok[i] = 0;
            pos[i] = 0;
            seq[i] = S + (i - T);
            bt[(size_t)(S + i - T) * c->bt_stride] = 0;
        }
        for (int i = 0; i < Tp; i++) {
            out[i] = i;
            seg[4 * i + 0] = seq[i];
            seg[4 * i + 1] = pos[i] / FRK_BLOCK;
            seg[4 * i + 2] = pos[i] % FRK_BLOCK;
            seg[4 * i + 3] = 1;
            seg0[i] = i;
            rows[i] = i;
        }
        pl->T = Tp;
        pl->S = S + (Tp - T);
        pl->n_out = Tp;
        pl->n_seg = Tp;
        pl->n_split = split_for(c, Tp);
    } else {
        int n = 0;
        for (int i = 0; i < T; i++)
            if (!b->logits || b->logits[i]) out[n++] = i;
        /* int8 KV segments: per sequence, its new tokens grouped by cache block (the rows of a
         * sequence need not be adjacent in the batch) */
        int ns = 0, nr = 0;
        for (int j = 0; j < S; j++) {
            int cur_blk = -1;
            for (int i = 0; i < T; i++) {
                if (seq[i] != j) continue;
                if (pos[i] / FRK_BLOCK != cur_blk) {
                    cur_blk = pos[i] / FRK_BLOCK;
                    seg[4 * ns + 0] = j;
                    seg[4 * ns + 1] = cur_blk;
                    seg[4 * ns + 2] = pos[i] % FRK_BLOCK;
                    seg[4 * ns + 3] = 0;
                    seg0[ns] = nr;
                    ns++;
                }
                seg[4 * (ns - 1) + 3]++;
                rows[nr++] = i;
            }
        }
        pl->T = T;
        pl->S = S;
        pl->n_out = n;
        pl->n_seg = ns;
        pl->prefill = S == 1 && T > 1 && c->cfg.prefill_mma &&
                      frk_attention_prefill_supported(hp->head_dim, hp->n_head / hp->n_head_kv,
                                                      c->cfg.kv_int8);
        pl->pos0 = pos[0];
        pl->n_split = pl->prefill ? 1 : split_for(c, T);
    }
    if (pl->mrope) { /* rows t, h, w of the pl->T computed rows; padding rows at position 0 */
        int32_t *rp = c->in_h + c->off_rpos;
        for (int r = 0; r < 3; r++) {
            memcpy(rp + (size_t)r * pl->T, b->rope_pos + (size_t)r * T, (size_t)T * 4);
            memset(rp + (size_t)r * pl->T + T, 0, (size_t)(pl->T - T) * 4);
        }
    }
    return 0;
}

/* The pinned inputs from word `from` on (0: all; off_pos: all but the tokens) to the device. */
static void upload_inputs(fr_cuda *c, const plan *pl, int from = 0) {
    const size_t words = (size_t)c->off_bt + (size_t)pl->S * c->bt_stride - from;
    FR_CK(cudaMemcpyAsync(c->in_d + from, c->in_h + from, words * 4, cudaMemcpyHostToDevice, c->st));
    if (pl->mrope)
        FR_CK(cudaMemcpyAsync(c->in_d + c->off_rpos, c->in_h + c->off_rpos, (size_t)3 * pl->T * 4,
                              cudaMemcpyHostToDevice, c->st));
}

static void execute(fr_cuda *c, const plan *pl) {
    if (pl->bucket >= 0) {
        cudaGraphExec_t *g = pl->mrope ? &c->graphs_mm[pl->bucket] : &c->graphs[pl->bucket];
        if (!*g) {
            cudaGraph_t graph;
            FR_CK(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
            run_layers(c, pl);
            FR_CK(cudaStreamEndCapture(c->st, &graph));
            FR_CK(cudaGraphInstantiate(g, graph, 0));
            FR_CK(cudaGraphDestroy(graph));
            c->stats.graph_captures++;
        }
        FR_CK(cudaGraphLaunch(*g, c->st));
        c->stats.graph_replays++;
    } else {
        run_layers(c, pl);
    }
}

static void finish(fr_cuda *c, const fr_batch *b) {
    /* advance the sequences (each appeared seq_cnt times) */
    int S = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        fr_seq *s = b->seqs[i];
        int j = 0;
        while (j < S && c->seq_list[j] != s) j++;
        if (j == S) S++;
    }
    for (int j = 0; j < S; j++) c->seq_list[j]->n_pos += c->seq_cnt[j];
    c->stats.forwards++;
    c->stats.tokens += b->n_tokens;
}

/* Device row of the k-th wanted token. */
static int wanted_row(const fr_cuda *c, const fr_batch *b, const plan *pl, int k) {
    if (pl->bucket < 0) return k; /* compacted */
    int n = 0;
    for (int i = 0; i < b->n_tokens; i++)
        if (!b->logits || b->logits[i]) {
            if (n == k) return i;
            n++;
        }
    FR_DEV_ASSERT(0);
    return 0;
}

static void copy_logits(fr_cuda *c, const fr_batch *b, const plan *pl, int nw, float *dst) {
    const size_t V = (size_t)c->hp.n_vocab;
    for (int k0 = 0; k0 < nw; k0 += c->logits_h_rows) {
        const int n = FR_MIN(c->logits_h_rows, nw - k0);
        for (int k = 0; k < n; k++) {
            const int r = wanted_row(c, b, pl, k0 + k);
            FR_CK(cudaMemcpyAsync(c->logits_h + (size_t)k * V, c->logits + (size_t)r * V, V * 4,
                                  cudaMemcpyDeviceToHost, c->st));
        }
        FR_CK(cudaStreamSynchronize(c->st));
        memcpy(dst + (size_t)k0 * V, c->logits_h, (size_t)n * V * 4);
    }
}

extern "C" int fr_cuda_forward(fr_cuda *c, const fr_batch *b, float *logits_out, fr_err *err) {
    plan pl;
    int nw = 0;
    if (c->n_flight) {
        fr_err_set(err, "cuda: steps in flight (collect them first)");
        return -1;
    }
    c->fed_rows = 0;
    if (prepare(c, b, &pl, &nw, err)) return -1;
    upload_inputs(c, &pl);
    execute(c, &pl);
    if (logits_out && nw) copy_logits(c, b, &pl, nw, logits_out);
    FR_CK(cudaStreamSynchronize(c->st));
    finish(c, b);
    return 0;
}

/* Queue one step (see fr_cuda_submit): inputs from the current pinned set, the forward, the
 * sampling, the ids back into the set's pinned ids; *plp and *nwp describe the step. */
static int submit_step(fr_cuda *c, const fr_batch *b, const fr_sampling *sp, int n_sp,
                       const uint64_t *counters, int feed, int pipelined, plan *plp, int *nwp, fr_err *err) {
    plan &pl = *plp;
    int nw = 0;
    if (c->n_flight >= 2) {
        fr_err_set(err, "cuda: two steps already in flight (collect one first)");
        return -1;
    }
    const int set = c->cur;
    c->in_h = c->in_hb[set];
    c->ids_h = c->ids_hb[set];
    c->sp_h = c->sp_hb[set];
    if (feed && b->n_tokens != c->fed_rows) {
        fr_err_set(err, "cuda: fed step of %d rows after a step that sampled %d rows for it", b->n_tokens,
                   c->fed_rows);
        return -1;
    }
    if (prepare(c, b, &pl, &nw, err)) return -1;
    if (feed && nw != b->n_tokens) {
        fr_err_set(err, "cuda: a fed step samples every row");
        return -1;
    }
    /* fed: the tokens come from the previous step's ids, already in the device inputs */
    upload_inputs(c, &pl, feed ? c->off_pos : 0);
    if (c->trace)
        FR_CK(cudaMemsetAsync(c->trace, 0xFF, (size_t)FRK_TL_W * (6 * c->hp.n_layer + 1) * 8, c->st));
    execute(c, &pl);
    /* sample over the computed rows (all bucket rows, or the compacted wanted rows) */
    const int R = pl.n_out;
    bool greedy = true;
    for (int k = 0; k < nw; k++) {
        const fr_sampling *p = &sp[n_sp == 1 ? 0 : k];
        if (p->temperature > 0.f && p->top_k != 1) greedy = false;
    }
    if (greedy) {
        frk_argmax(c->logits, R, c->hp.n_vocab, c->ids, c->st);
    } else {
        for (int r = 0; r < R; r++) {
            frk_sample_params q;
            memset(&q, 0, sizeof q);
            c->sp_h[r] = q;
        }
        for (int k = 0; k < nw; k++) {
            const fr_sampling *p = &sp[n_sp == 1 ? 0 : k];
            const int r = wanted_row(c, b, &pl, k);
            frk_sample_params q;
            q.temperature = p->temperature;
            q.top_k = p->top_k;
            q.top_p = p->top_p;
            q.min_p = p->min_p;
            q.seed = p->seed;
            q.counter = counters ? counters[k] : 0;
            c->sp_h[r] = q;
        }
        FR_CK(cudaMemcpyAsync(c->sp_d, c->sp_h, (size_t)R * sizeof(frk_sample_params),
                              cudaMemcpyHostToDevice, c->st));
        frk_sample(c->logits, R, c->hp.n_vocab, c->sp_d, c->ids, c->st);
    }
    /* fr_cuda_submit: a next step may be fed from these ids (row i's token = row i's id; every
     * row sampled, so the first n_tokens computed rows are the batch's rows in order) */
    c->fed_rows = 0;
    if (pipelined && nw == b->n_tokens) {
        FR_CK(cudaMemcpyAsync(c->in_d + c->off_tok, c->ids, (size_t)nw * 4, cudaMemcpyDeviceToDevice, c->st));
        c->fed_rows = nw;
    }
    FR_CK(cudaMemcpyAsync(c->ids_h, c->ids, (size_t)R * 4, cudaMemcpyDeviceToHost, c->st));
    FR_CK(cudaEventRecord(c->ev[set], c->st));
    for (int k = 0; k < nw; k++) c->wrows[set][k] = wanted_row(c, b, &pl, k);
    c->n_want[set] = nw;
    if (c->n_flight == 0) c->flight0 = set;
    c->n_flight++;
    c->cur = set ^ 1;
    finish(c, b);
    *nwp = nw;
    return 0;
}

extern "C" int fr_cuda_submit(fr_cuda *c, const fr_batch *b, const fr_sampling *sp, int n_sp,
                              const uint64_t *counters, int feed, fr_err *err) {
    plan pl;
    int nw = 0;
    return submit_step(c, b, sp, n_sp, counters, feed, 1, &pl, &nw, err);
}

extern "C" int fr_cuda_collect(fr_cuda *c, int32_t *ids_out, fr_err *err) {
    if (c->n_flight == 0) {
        fr_err_set(err, "cuda: no step in flight");
        return -1;
    }
    const int set = c->flight0;
    FR_CK(cudaEventSynchronize(c->ev[set]));
    for (int k = 0; k < c->n_want[set]; k++) ids_out[k] = c->ids_hb[set][c->wrows[set][k]];
    c->flight0 ^= 1;
    c->n_flight--;
    return c->n_want[set];
}

extern "C" int fr_cuda_forward_sample(fr_cuda *c, const fr_batch *b, const fr_sampling *sp,
                                      int n_sp, const uint64_t *counters, int32_t *ids_out,
                                      float *logits_out, fr_err *err) {
    if (c->n_flight) {
        fr_err_set(err, "cuda: steps in flight (collect them first)");
        return -1;
    }
    plan pl;
    int nw = 0;
    if (submit_step(c, b, sp, n_sp, counters, 0, 0, &pl, &nw, err)) return -1;
    if (logits_out && nw) copy_logits(c, b, &pl, nw, logits_out);
    return fr_cuda_collect(c, ids_out, err) < 0 ? -1 : 0;
}

extern "C" void fr_cuda_sync(fr_cuda *c) { FR_CK(cudaStreamSynchronize(c->st)); }

extern "C" int fr_cuda_trace_read(fr_cuda *c, unsigned long long *out, int max_words) {
    if (!c->trace) return 0;
    const int n = FR_MIN(max_words, FRK_TL_W * (6 * c->hp.n_layer + 1));
    FR_CK(cudaStreamSynchronize(c->st));
    FR_CK(cudaMemcpy(out, c->trace, (size_t)n * 8, cudaMemcpyDeviceToHost));
    return n;
}
extern "C" int fr_cuda_trace_slots(const fr_cuda *c) { return c->trace ? 6 * c->hp.n_layer + 1 : 0; }

extern "C" void fr_cuda_get_config(const fr_cuda *c, fr_cuda_config *out) { *out = c->cfg; }
extern "C" void fr_cuda_mem_info(const fr_cuda *c, fr_cuda_mem *o) {
    memset(o, 0, sizeof *o);
    FR_CK(cudaSetDevice(c->dev));
    FR_CK(cudaMemGetInfo(&o->free_now, &o->total));
    o->weights = c->weight_bytes;
    o->kv = c->kv_bytes;
    o->scratch = c->scratch_bytes;
    o->kv_blocks = c->n_blocks;
    o->kv_block_bytes = c->kv_block_bytes;
}
extern "C" const char *fr_cuda_device_name(const fr_cuda *c) { return c->name; }
extern "C" const fr_hparams *fr_cuda_hparams(const fr_cuda *c) { return &c->hp; }
extern "C" void fr_cuda_get_stats(const fr_cuda *c, fr_cuda_stats *s) { *s = c->stats; }
