/* backend.c — see backend.h. The CPU implementation only calls the CPU decoder's API
 * (backend/cpu/decoder.h) and the CPU quantiser (backend/cpu/quant.h); the CUDA implementation
 * lives in backend/cuda/backend_cuda.cu and is referenced weakly, so the CPU build never needs
 * CUDA. */
#include "backend/backend.h"

#include "backend/cpu/decoder.h"
#include "backend/cpu/quant.h"

#include <stdlib.h>
#include <string.h>

/* defined in backend/cuda/backend_cuda.cu when the CUDA objects are linked */
extern const fr_backend_ops fr_backend_cuda_ops __attribute__((weak));

fr_backend_params fr_backend_params_default(void) {
    fr_backend_params p;
    memset(&p, 0, sizeof p);
    p.device = "cpu";
    p.kv_fraction = 0.9f;
    return p;
}

bool fr_backend_cuda_linked(void) { return &fr_backend_cuda_ops != NULL; }

int fr_backend_parse_device(const char *s, fr_backend_kind *kind, int *index, fr_err *err) {
    *index = 0;
    if (!s || !*s || !strcmp(s, "cpu")) {
        *kind = FR_BACKEND_CPU;
        return 0;
    }
    if (!strncmp(s, "cuda", 4) && (s[4] == 0 || s[4] == ':')) {
        *kind = FR_BACKEND_CUDA;
        if (s[4] == ':') {
            const char *d = s + 5;
            char *end = NULL;
            long v = strtol(d, &end, 10);
            if (!*d || *end || v < 0 || v > 255) {
                fr_err_set(err, "bad device '%s' (expected cpu, cuda or cuda:N)", s);
                return -1;
            }
            *index = (int)v;
        }
        return 0;
    }
    fr_err_set(err, "unknown device '%s' (expected cpu, cuda or cuda:N)", s);
    return -1;
}

/* ---------------------------------------------------------------- CPU */
static int cpu_init(fr_backend *b, const fr_backend_params *p, fr_err *err) {
    fr_model *m = b->model;
    if (p->kv && strcmp(p->kv, "bf16") && strcmp(p->kv, "f32")) {
        fr_err_set(err, "cpu: KV cache type '%s' is not supported (f32 only)", p->kv);
        return -1;
    }
    if (p->weights && strcmp(p->weights, "f32") && strcmp(p->weights, "none") &&
        fr_model_quantize(m, p->weights, err))
        return -1;
    const int max_ctx = p->max_ctx > 0 ? p->max_ctx
                                       : (m->hp.n_ctx_train > 0 ? FR_MIN(m->hp.n_ctx_train, 8192) : 8192);
    const int max_seqs = p->max_seqs > 0 ? p->max_seqs : 64;
    fr_decoder_opts o;
    memset(&o, 0, sizeof o);
    o.n_threads = p->n_threads;
    b->impl = fr_decoder_new_opts(m, b->max_tokens, max_ctx, &o, err);
    if (!b->impl) return -1;
    int n_blocks;
    if (p->kv_bytes)
        n_blocks = fr_kv_pool_blocks_for_bytes(&m->hp, 16, p->kv_bytes);
    else
        n_blocks = max_seqs * ((max_ctx + 15) / 16);
    b->kv = n_blocks > 0 ? fr_kv_pool_new(&m->hp, n_blocks, 16) : NULL;
    if (!b->kv) {
        fr_err_set(err, "cpu: cannot allocate a KV pool of %d blocks", n_blocks);
        fr_decoder_free(b->impl);
        b->impl = NULL;
        return -1;
    }
    return 0;
}
static void cpu_destroy(fr_backend *b) {
    fr_decoder_free(b->impl);
    fr_kv_pool_free(b->kv);
}
static int cpu_forward(fr_backend *b, const fr_batch *batch, float *logits, fr_err *err) {
    return fr_decoder_forward(b->impl, b->kv, batch, logits, err);
}
static bool cpu_supports(const fr_backend *b, fr_backend_op op) {
    (void)b;
    return op == FR_BOP_FORWARD || op == FR_BOP_WEIGHTS_INT8 || op == FR_BOP_WEIGHTS_INT4 ||
           op == FR_BOP_EMBD_INPUT || op == FR_BOP_MROPE || op == FR_BOP_LORA;
}
static void cpu_mem(const fr_backend *b, fr_backend_mem *m) {
    memset(m, 0, sizeof *m);
    m->weights = b->model->weight_bytes;
    m->kv = (size_t)b->kv->n_blocks * b->kv->block_bytes;
    m->kv_blocks = b->kv->n_blocks;
}
const fr_backend_ops fr_backend_cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .destroy = cpu_destroy,
    .forward = cpu_forward,
    .forward_sample = NULL,
    .supports = cpu_supports,
    .mem = cpu_mem,
};

/* ---------------------------------------------------------------- common */
fr_backend *fr_backend_new(fr_model *m, const fr_backend_params *p_in, fr_err *err) {
    fr_backend_params p = p_in ? *p_in : fr_backend_params_default();
    fr_backend_kind kind;
    int dev;
    if (fr_backend_parse_device(p.device, &kind, &dev, err)) return NULL;
    const fr_backend_ops *ops = &fr_backend_cpu_ops;
    if (kind == FR_BACKEND_CUDA) {
        if (!fr_backend_cuda_linked()) {
            fr_err_set(err, "this binary was built without CUDA support (build with make cuda)");
            return NULL;
        }
        ops = &fr_backend_cuda_ops;
    }
    fr_backend *b = fr_xcalloc(1, sizeof *b);
    b->ops = ops;
    b->kind = kind;
    b->device = dev;
    b->model = m;
    b->max_tokens = p.max_tokens > 0 ? p.max_tokens : 512;
    p.max_tokens = b->max_tokens;
    if (ops->init(b, &p, err)) {
        free(b);
        return NULL;
    }
    return b;
}

void fr_backend_free(fr_backend *b) {
    if (!b) return;
    b->ops->destroy(b);
    if (b->samplers) {
        for (int i = 0; i < b->max_tokens; i++) fr_sampler_free(&b->samplers[i]);
        free(b->samplers);
    }
    free(b->logits);
    free(b);
}

/* A batch with LoRA adapters on a backend that cannot apply them: UNSUPPORTED. */
static int lora_refused(const fr_backend *b, const fr_batch *batch, fr_err *err) {
    if (!batch->lora || b->ops->supports(b, FR_BOP_LORA)) return 0;
    for (int i = 0; i < batch->n_tokens; i++)
        if (batch->lora[i]) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "the %s backend does not apply LoRA adapters",
                        b->ops->name);
            return -1;
        }
    return 0;
}

int fr_backend_forward(fr_backend *b, const fr_batch *batch, float *logits, fr_err *err) {
    if (lora_refused(b, batch, err)) return -1;
    return b->ops->forward(b, batch, logits, err);
}

int fr_backend_forward_sample(fr_backend *b, const fr_batch *batch, const fr_sampling *sp, int n_sp,
                              const uint64_t *counters, int32_t *ids, fr_err *err) {
    if (lora_refused(b, batch, err)) return -1;
    if (b->ops->forward_sample) return b->ops->forward_sample(b, batch, sp, n_sp, counters, ids, err);
    const int V = b->model->hp.n_vocab;
    if (batch->n_tokens > b->max_tokens) {
        fr_err_set(err, "batch of %d tokens (at most %d)", batch->n_tokens, b->max_tokens);
        return -1;
    }
    if (!b->logits) {
        b->logits = fr_xmalloc((size_t)b->max_tokens * V * sizeof(float));
        b->samplers = fr_xcalloc((size_t)b->max_tokens, sizeof(fr_sampler));
    }
    if (b->ops->forward(b, batch, b->logits, err)) return -1;
    int k = 0;
    for (int i = 0; i < batch->n_tokens; i++) {
        if (batch->logits && !batch->logits[i]) continue;
        const fr_sampling *p = &sp[n_sp == 1 ? 0 : k];
        fr_sampling q = *p;
        q.seed = p->seed ^ (counters ? counters[k] * 0x9e3779b97f4a7c15ull : 0);
        fr_sampler_free(&b->samplers[k]);
        fr_sampler_init(&b->samplers[k], &q, V);
        ids[k] = fr_sample(&b->samplers[k], b->logits + (size_t)k * V);
        k++;
    }
    return 0;
}

bool fr_backend_supports(const fr_backend *b, fr_backend_op op) { return b->ops->supports(b, op); }
void fr_backend_mem_info(const fr_backend *b, fr_backend_mem *m) { b->ops->mem(b, m); }
const char *fr_backend_name(const fr_backend *b) { return b->ops->name; }
