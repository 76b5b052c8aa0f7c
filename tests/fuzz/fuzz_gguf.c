/* fuzz_gguf.c — libFuzzer harness for the GGUF reader (src/model/gguf.c) and the GGUF model
 * loader on top of it (src/model/model.c: hyperparameters, vocabulary, tensor mapping, F16/BF16/
 * K-quant conversion).
 *
 * The input is the whole file image, copied to a buffer of exactly its size so that AddressSanitizer
 * sees any read past the end. A successful parse must yield tensors that lie inside the buffer (the
 * harness touches each tensor's first and last byte) and getters that never fail on a parsed file
 * in ways other than a typed error. Then fr_model_load_gguf_buffer runs on the same bytes; it must
 * return a model or NULL with a one-line message naming the file, never crash. Last the bytes are
 * read as a llama.cpp mmproj (fr_vision_load_mmproj_buffer) onto a text model of width 64, with the
 * same rule; a tower that loads runs once on a one-token image.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "backend/cpu/vision.h"
#include "model/model.h"
#include "model/vision.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1; /* quiet */
    return 0;
}

static volatile uint8_t sink;

/* The same bytes as an mmproj attached to a text model of width 64; a tower that loads runs on
 * one merged token of zero pixels (small towers only) and must not fail. */
static void mmproj(const uint8_t *buf, size_t size) {
    fr_model *t = fr_xcalloc(1, sizeof *t);
    t->name = fr_xstrdup("fuzz");
    t->hp.n_embd = 64;
    fr_err err = {0};
    if (fr_vision_load_mmproj_buffer(t, buf, size, "fuzz.gguf", &err) != 0) {
        if (!strstr(err.msg, "fuzz.gguf") || strchr(err.msg, '\n')) abort();
        fr_model_free(t);
        return;
    }
    const fr_vision_hparams *h = &t->vision->hp;
    if (h->depth < 1 || h->head_dim % 4 || h->head_dim * h->n_head != h->hidden ||
        h->out_hidden != 64 || !t->vision->patch_w.data || !t->vision->blocks[0].qkv_w.data)
        abort();
    int64_t pd = fr_vision_patch_dim(h);
    if (pd * h->hidden < (1 << 20) && (int64_t)h->n_ff * h->hidden < (1 << 20) &&
        (int64_t)h->hidden * h->merge * h->merge < 4096) {
        int32_t grid[3] = {1, h->merge, h->merge};
        float *px = fr_xcalloc((size_t)(pd * h->merge * h->merge), sizeof(float));
        float *out = fr_xcalloc(64, sizeof(float));
        if (fr_vision_forward(t, NULL, px, (int64_t)h->merge * h->merge, grid, 1, out, &err) != 0)
            abort();
        free(px);
        free(out);
    }
    fr_model_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    fr_gguf g;
    fr_err err = {0};
    if (fr_gguf_parse(&g, "fuzz.gguf", buf, size, &err) == 0) {
        for (int64_t i = 0; i < g.n_tensors; i++) {
            const fr_gguf_tensor *t = &g.tensors[i];
            if (t->data < buf || t->data + t->nbytes > buf + size) abort();
            if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
            char name[256];
            size_t n = t->name.n < sizeof name - 1 ? t->name.n : sizeof name - 1;
            memcpy(name, t->name.p, n);
            name[n] = 0;
            if (!memchr(name, 0, n) && n == t->name.n && !fr_gguf_find_tensor(&g, name)) abort();
        }
        for (int64_t i = 0; i < g.n_kv; i++) {
            const fr_gguf_kv *kv = &g.kv[i];
            char key[256];
            if (kv->key.n >= sizeof key || memchr(kv->key.p, 0, kv->key.n)) continue;
            memcpy(key, kv->key.p, kv->key.n);
            key[kv->key.n] = 0;
            int64_t v;
            double d;
            bool b;
            fr_gguf_str s;
            fr_gguf_get_int(&g, key, INT64_MIN, INT64_MAX, &v, &err);
            fr_gguf_get_float(&g, key, &d, &err);
            fr_gguf_get_bool(&g, key, &b, &err);
            if (fr_gguf_get_str(&g, key, &s, &err) == 0 &&
                ((const uint8_t *)s.p < buf || (const uint8_t *)s.p + s.n > buf + size))
                abort();
            const char **sp;
            size_t *sl;
            int64_t cnt;
            if (fr_gguf_get_str_array(&g, key, &sp, &sl, &cnt, &err) == 0) {
                for (int64_t k = 0; k < cnt; k++)
                    if ((const uint8_t *)sp[k] < buf || (const uint8_t *)sp[k] + sl[k] > buf + size)
                        abort();
                free(sp);
                free(sl);
            }
            int32_t *iv;
            if (fr_gguf_get_i32_array(&g, key, &iv, &cnt, &err) == 0) free(iv);
        }
        fr_gguf_free(&g);
    } else if (!strstr(err.msg, "fuzz.gguf") || strchr(err.msg, '\n')) {
        abort();
    }
    memset(&err, 0, sizeof err);
    fr_model *m = fr_model_load_gguf_buffer(buf, size, "fuzz.gguf", &err);
    if (!m && (!strstr(err.msg, "fuzz.gguf") || strchr(err.msg, '\n'))) abort();
    fr_model_free(m);
    mmproj(buf, size);
    free(buf);
    return 0;
}
