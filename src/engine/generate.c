/* generate.c — see generate.h. A prompt with images is prefilled in the same chunks: each chunk
 * gets its slice of the M-RoPE rows (3, n) and an embedding block (n, n_embd) holding the image
 * rows of its image tokens (embd_use says which rows). */
#include "engine/generate.h"

#include "backend/backend.h"
#include "backend/cpu/vision.h"
#include "backend/cuda/cuda_vision.h"

#include <stdlib.h>
#include <string.h>

#define PREFILL_CHUNK 512

/* The CUDA tower (backend/cuda/vision.cu) is linked only into the CUDA binaries (make cuda):
 * referenced weakly, as backend.c references the CUDA row of the backend table. */
#pragma weak fr_cuda_vision_new
#pragma weak fr_cuda_vision_forward
#pragma weak fr_cuda_vision_free

int fr_generate(const fr_model *m, const int32_t *prompt, size_t n_prompt,
                const fr_sampling *sampling, const fr_gen_params *gp, fr_text_fn on_text,
                void *user, fr_generate_result *res, fr_err *err) {
    return fr_generate_on(m, NULL, prompt, n_prompt, sampling, gp, on_text, user, res, err);
}

int fr_generate_on(const fr_model *m, const fr_generate_device *dev, const int32_t *prompt,
                   size_t n_prompt, const fr_sampling *sampling, const fr_gen_params *gp,
                   fr_text_fn on_text, void *user, fr_generate_result *res, fr_err *err) {
    return fr_generate_mm_on(m, dev, prompt, n_prompt, NULL, sampling, gp, on_text, user, res,
                             err);
}

/* The multimodal input checked against the prompt and the backend; *delta for decode steps. */
static int check_mm(const fr_model *m, const fr_backend *be, const int32_t *prompt,
                    size_t n_prompt, const fr_generate_mm *mm, int32_t *delta, fr_err *err) {
    *delta = 0;
    if (mm->embd) {
        int64_t n_img = 0;
        for (size_t i = 0; i < n_prompt; i++) n_img += prompt[i] == mm->image_token_id;
        if (n_img != mm->n_embd_rows) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%lld image feature rows for %lld image tokens "
                        "in the prompt", (long long)mm->n_embd_rows, (long long)n_img);
            return -1;
        }
        if (!fr_backend_supports(be, FR_BOP_EMBD_INPUT)) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "the %s backend does not take image features yet",
                        fr_backend_name(be));
            return -1;
        }
    }
    if (mm->rope_pos) {
        const int *ms = m->hp.mrope_section;
        if (!ms[0] && !ms[1] && !ms[2]) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "M-RoPE positions for a model without "
                        "mrope_section");
            return -1;
        }
        if (!fr_backend_supports(be, FR_BOP_MROPE)) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "the %s backend does not take M-RoPE positions "
                        "yet", fr_backend_name(be));
            return -1;
        }
        int32_t max = -1;
        for (size_t i = 0; i < 3 * n_prompt; i++) max = FR_MAX(max, mm->rope_pos[i]);
        *delta = max + 1 - (int32_t)n_prompt;
    }
    return 0;
}

int fr_generate_mm_on(const fr_model *m, const fr_generate_device *dev, const int32_t *prompt,
                      size_t n_prompt, const fr_generate_mm *mm, const fr_sampling *sampling,
                      const fr_gen_params *gp, fr_text_fn on_text, void *user,
                      fr_generate_result *res, fr_err *err) {
    static const fr_generate_mm no_mm;
    if (!mm) mm = &no_mm;
    memset(res, 0, sizeof *res);
    fr_backend_kind kind;
    int dev_index;
    if (fr_backend_parse_device(dev ? dev->device : NULL, &kind, &dev_index, err)) return -1;
    if (kind == FR_BACKEND_CUDA && !fr_backend_cuda_linked()) {
        fr_err_set(err, "device '%s': built without CUDA: rebuild with make cuda "
                   "(build-cuda/frugal-cuda)", dev->device);
        return -1;
    }
    if (n_prompt == 0) {
        fr_err_set(err, "the prompt is empty after tokenization");
        return -1;
    }
    int max_tokens = gp->max_tokens < 1 ? 1 : gp->max_tokens;
    int64_t n_ctx64 = (int64_t)n_prompt + max_tokens;
    if (m->hp.n_ctx_train > 0 && n_ctx64 > m->hp.n_ctx_train) {
        fr_err_set(err, "prompt (%zu tokens) + max tokens (%d) exceeds the model's context of %d tokens",
                   n_prompt, max_tokens, m->hp.n_ctx_train);
        return -1;
    }
    int n_ctx = (int)n_ctx64;
    int chunk = (int)FR_MIN((size_t)PREFILL_CHUNK, n_prompt);
    int rc = -1;
    fr_kv_pool *kv = NULL;
    fr_backend *be = NULL;
    fr_seq seq;
    memset(&seq, 0, sizeof seq);
    fr_sampler smp;
    memset(&smp, 0, sizeof smp);
    fr_gen gen;
    bool gen_init = false;
    fr_buf delta = {0};
    float *logits = NULL;
    int32_t *pos = NULL;
    fr_seq **seqs = NULL;
    uint8_t *want = NULL;
    float *embd = NULL;      /* (chunk, n_embd) image rows of a prefill chunk */
    uint8_t *use = NULL;     /* (chunk) */
    int32_t *rpos = NULL;    /* (3, chunk) M-RoPE rows of a prefill chunk */
    int32_t rope_delta = 0; /* M-RoPE positions of decoded tokens: KV position + rope_delta */

    fr_backend_params bp = fr_backend_params_default();
    bp.device = dev && dev->device ? dev->device : "cpu";
    bp.weights = kind == FR_BACKEND_CUDA && dev ? dev->weights : NULL;
    bp.kv = dev ? dev->kv : NULL;
    bp.kv_fraction = dev && dev->kv_fraction > 0 ? dev->kv_fraction : 0.9f;
    bp.max_tokens = chunk;
    bp.max_seqs = 1;
    bp.max_ctx = n_ctx;
    if (mm->rope_pos) { /* pruned prompts keep their original (larger) positions */
        int32_t top = 0;
        for (size_t i = 0; i < 3 * n_prompt; i++) top = FR_MAX(top, mm->rope_pos[i]);
        if ((int64_t)top + 1 + max_tokens > bp.max_ctx) bp.max_ctx = top + 1 + max_tokens;
    }
    if (kind == FR_BACKEND_CPU) /* exactly the sequence's blocks, as before the backend */
        bp.kv_bytes = (size_t)((n_ctx + 15) / 16) * 2 * (size_t)m->hp.n_layer * 16 *
                      (size_t)m->hp.n_head_kv * (size_t)m->hp.head_dim * sizeof(float);
    /* weights are passed only to CUDA, which copies them: the model is not written */
    be = fr_backend_new((fr_model *)(uintptr_t)m, &bp, err);
    if (!be) goto out;
    kv = fr_backend_kv(be);
    if (fr_seq_reserve(&seq, kv, n_ctx)) {
        fr_err_set(err, "KV cache too small for %d positions", n_ctx);
        goto out;
    }
    if (check_mm(m, be, prompt, n_prompt, mm, &rope_delta, err)) goto out;
    int n_vocab = m->hp.n_vocab, E = m->hp.n_embd;
    logits = fr_xmalloc(sizeof(float) * (size_t)n_vocab);        /* (n_vocab) */
    pos = fr_xmalloc(sizeof(int32_t) * (size_t)chunk);            /* (chunk) */
    seqs = fr_xmalloc(sizeof(fr_seq *) * (size_t)chunk);          /* (chunk) */
    want = fr_xcalloc((size_t)chunk, 1);                          /* (chunk) */
    if (mm->embd) {
        embd = fr_xmalloc(sizeof(float) * (size_t)chunk * E);
        use = fr_xmalloc((size_t)chunk);
    }
    if (mm->rope_pos) rpos = fr_xmalloc(sizeof(int32_t) * 3 * (size_t)chunk);
    for (int i = 0; i < chunk; i++) seqs[i] = &seq;
    double t0 = fr_time_s();
    const float *next_row = mm->embd; /* the next image token's feature row */
    for (size_t off = 0; off < n_prompt; off += (size_t)chunk) {
        int n = (int)FR_MIN((size_t)chunk, n_prompt - off);
        for (int i = 0; i < n; i++) {
            pos[i] = (int32_t)(off + (size_t)i);
            want[i] = off + (size_t)i == n_prompt - 1;
            if (embd) {
                use[i] = prompt[off + i] == mm->image_token_id;
                if (use[i]) {
                    memcpy(embd + (size_t)i * E, next_row, sizeof(float) * (size_t)E);
                    next_row += E;
                }
            }
            for (int r = 0; rpos && r < 3; r++)
                rpos[r * n + i] = mm->rope_pos[r * n_prompt + off + i];
        }
        fr_batch b = {.n_tokens = n, .tokens = prompt + off, .pos = pos, .seqs = seqs,
                      .logits = want, .embd = embd, .embd_use = use, .rope_pos = rpos};
        if (fr_backend_forward(be, &b, logits, err)) goto out;
    }
    res->prefill_s = fr_time_s() - t0;
    if (mm->last_logits) memcpy(mm->last_logits, logits, sizeof(float) * (size_t)n_vocab);

    fr_sampler_init(&smp, sampling, n_vocab);
    fr_gen_init(&gen, m, gp);
    gen_init = true;
    res->ids = fr_xmalloc(sizeof(int32_t) * (size_t)max_tokens);
    double t1 = fr_time_s();
    for (;;) {
        int id = fr_sample(&smp, logits);
        res->ids[res->n_ids++] = id;
        delta.len = 0;
        fr_finish f = fr_gen_push(&gen, id, &delta);
        if (on_text && delta.len) on_text(delta.data, delta.len, user);
        if (f != FR_FINISH_NONE) {
            res->finish = f;
            break;
        }
        int32_t p = (int32_t)(n_prompt + (size_t)res->n_ids - 1), tok = id;
        int32_t r3[3] = {p + rope_delta, p + rope_delta, p + rope_delta};
        fr_seq *sp = &seq;
        uint8_t w = 1;
        fr_batch b = {.n_tokens = 1, .tokens = &tok, .pos = &p, .seqs = &sp, .logits = &w,
                      .rope_pos = mm->rope_pos ? r3 : NULL};
        if (fr_backend_forward(be, &b, logits, err)) goto out;
    }
    res->decode_s = fr_time_s() - t1;
    res->text = fr_xstrdup(fr_buf_cstr(&gen.text));
    rc = 0;
out:
    if (rc) fr_generate_result_free(res);
    fr_buf_free(&delta);
    if (gen_init) fr_gen_free(&gen);
    fr_sampler_free(&smp);
    free(logits);
    free(pos);
    free(seqs);
    free(want);
    free(embd);
    free(use);
    free(rpos);
    if (kv) fr_seq_release(&seq, kv);
    fr_backend_free(be); /* frees the pool */
    return rc;
}

void fr_generate_result_free(fr_generate_result *r) {
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

int fr_generate_vision(const fr_model *m, const fr_generate_device *dev, const float *pixels,
                       int64_t n_patches, const int32_t *grid_thw, int n_images, float *out,
                       fr_err *err) {
    fr_backend_kind kind;
    int dev_index;
    if (fr_backend_parse_device(dev ? dev->device : NULL, &kind, &dev_index, err)) return -1;
    if (kind == FR_BACKEND_CUDA) {
        if (!fr_cuda_vision_new) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "device '%s': built without CUDA: rebuild with "
                        "make cuda (build-cuda/frugal-cuda)", dev->device);
            return -1;
        }
        fr_cuda_vision *cv = fr_cuda_vision_new(m, dev_index, err);
        if (!cv) return -1;
        int rc = fr_cuda_vision_forward(cv, pixels, n_patches, grid_thw, n_images, out, err);
        fr_cuda_vision_free(cv);
        return rc;
    }
    fr_pool *pool = fr_pool_new(0);
    int rc = fr_vision_forward(m, pool, pixels, n_patches, grid_thw, n_images, out, err);
    fr_pool_free(pool);
    return rc;
}
