/* backend.h — one table of operations so the same serving engine (engine/engine.h) runs the
 * decoder on the CPU (backend/cpu/decoder.h) or on a CUDA GPU (backend/cuda/cuda_backend.h).
 *
 *   fr_backend_params p = fr_backend_params_default();
 *   p.device = "cuda:0";                       (or "cpu"; fr_backend_parse_device checks it)
 *   fr_backend *be = fr_backend_new(model, &p, &err);
 *   fr_kv_pool *kv = fr_backend_kv(be);        block accounting: fr_seq_reserve(&seq, kv, n)
 *   fr_backend_forward(be, &batch, logits, &err);            batch rules: backend/batch.h
 *   fr_backend_forward_sample(be, &batch, sp, n_sp, counters, ids, &err);  sampling where the
 *                                              logits are (on the device for CUDA)
 *   fr_backend_free(be);
 *
 * The KV pool returned by fr_backend_kv is the scheduler's view of the cache: on the CPU it is the
 * decoder's pool itself; on CUDA it holds no storage (k = v = NULL) and only hands out block ids of
 * the device pool (block 0 stays reserved), so fr_seq_reserve / fr_seq_release / n_free work the
 * same for both. Sizing: CPU takes kv_bytes; CUDA takes kv_fraction of the device memory left after
 * weights and scratch (or kv_bytes when set).
 *
 * The CUDA implementation is linked in only when the CUDA objects are (the binaries `make cuda`
 * builds, e.g. build-cuda/frugal-cuda): the CPU build references it weakly and
 * fr_backend_new("cuda") then fails with a clear message.
 */
#ifndef FRUGAL_BACKEND_H
#define FRUGAL_BACKEND_H

#include "backend/batch.h"
#include "backend/kv.h"
#include "backend/sampler.h"
#include "model/model.h"

typedef enum fr_backend_kind { FR_BACKEND_CPU = 0, FR_BACKEND_CUDA = 1 } fr_backend_kind;

typedef enum fr_backend_op {
    FR_BOP_FORWARD = 0,     /* fr_backend_forward */
    FR_BOP_DEVICE_SAMPLING, /* sampling runs next to the logits (no logits copy) */
    FR_BOP_WEIGHTS_INT8,    /* weight-only 8-bit matrices */
    FR_BOP_WEIGHTS_INT4,    /* weight-only 4-bit matrices */
    FR_BOP_KV_INT8,         /* 8-bit KV cache */
    FR_BOP_GRAPHS,          /* captured decode steps */
    FR_BOP_EMBD_INPUT,      /* batches with embedding rows (fr_batch.embd: image features) */
    FR_BOP_MROPE,           /* batches with M-RoPE positions (fr_batch.rope_pos) */
    FR_BOP_LORA,            /* batches with LoRA adapters (fr_batch.lora) */
    FR_BOP_COUNT
} fr_backend_op;

typedef struct fr_backend_params {
    const char *device;  /* "cpu" (default), "cuda", "cuda:N" */
    const char *weights; /* CPU: NULL/"f32"/"q8"/"q4" (fr_model_quantize, changes the model);
                            CUDA: NULL/"bf16", "int8", "int4" */
    const char *kv;      /* NULL/"bf16" (CPU: f32), "int8" (CUDA only) */
    float kv_fraction;   /* CUDA: share of the free device memory for the KV pool (0 -> 0.9) */
    size_t kv_bytes;     /* CPU: pool bytes (0 -> enough for max_seqs x max_ctx); CUDA: exact
                            bytes when > 0 */
    int max_tokens;      /* tokens per forward (0 -> 512) */
    int max_seqs;        /* sequences per decode step (0 -> 64) */
    int max_ctx;         /* positions per sequence (0 -> min(n_ctx_train, 8192)) */
    int n_threads;       /* CPU worker threads (0 -> one per core) */
    int no_graphs;       /* CUDA: launch decode steps eagerly */
} fr_backend_params;

typedef struct fr_backend_mem {
    size_t total, free;  /* device (CUDA) or 0 (CPU) */
    size_t weights, kv, scratch;
    int kv_blocks;
} fr_backend_mem;

typedef struct fr_backend fr_backend;

typedef struct fr_backend_ops {
    const char *name;
    int (*init)(fr_backend *b, const fr_backend_params *p, fr_err *err);
    void (*destroy)(fr_backend *b);
    int (*forward)(fr_backend *b, const fr_batch *batch, float *logits, fr_err *err);
    /* may be NULL: the generic path runs forward and fr_sample on the host */
    int (*forward_sample)(fr_backend *b, const fr_batch *batch, const fr_sampling *sp, int n_sp,
                          const uint64_t *counters, int32_t *ids, fr_err *err);
    bool (*supports)(const fr_backend *b, fr_backend_op op);
    void (*mem)(const fr_backend *b, fr_backend_mem *m);
} fr_backend_ops;

struct fr_backend {
    const fr_backend_ops *ops;
    fr_backend_kind kind;
    int device;           /* CUDA ordinal */
    fr_model *model;      /* not owned */
    fr_kv_pool *kv;       /* block accounting (and CPU storage) */
    void *impl;           /* fr_decoder (CPU) or fr_cuda (CUDA) */
    float *logits;        /* generic sampling scratch: (max_tokens, n_vocab) */
    fr_sampler *samplers; /* generic sampling: one per row */
    int max_tokens;
};

fr_backend_params fr_backend_params_default(void);
/* "cpu" -> CPU; "cuda" -> CUDA device 0; "cuda:N" -> device N. Returns 0 or -1 with err. */
int fr_backend_parse_device(const char *s, fr_backend_kind *kind, int *index, fr_err *err);
/* True when the CUDA backend is linked into this binary. */
bool fr_backend_cuda_linked(void);

/* The model must outlive the backend (the CPU decoder reads its weights; CUDA copies them, and
 * the caller may free the host weights afterwards only if nothing else uses the model). */
fr_backend *fr_backend_new(fr_model *m, const fr_backend_params *p, fr_err *err);
void fr_backend_free(fr_backend *b);
static inline fr_kv_pool *fr_backend_kv(fr_backend *b) { return b->kv; }
int fr_backend_forward(fr_backend *b, const fr_batch *batch, float *logits, fr_err *err);
/* Forward, then one id per token with logits[i] = 1: sp has n_sp entries (1 = shared by all
 * rows); counters (or NULL) number the draws of each row (device sampling is deterministic in
 * (seed, counter, row); the host path keeps a sampler per row seeded from sp). */
int fr_backend_forward_sample(fr_backend *b, const fr_batch *batch, const fr_sampling *sp, int n_sp,
                              const uint64_t *counters, int32_t *ids, fr_err *err);
bool fr_backend_supports(const fr_backend *b, fr_backend_op op);
void fr_backend_mem_info(const fr_backend *b, fr_backend_mem *m);
const char *fr_backend_name(const fr_backend *b);

/* The operation tables (the CUDA one only exists in CUDA-enabled binaries). */
extern const fr_backend_ops fr_backend_cpu_ops;

#endif
