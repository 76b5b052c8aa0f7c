/* fuzz_gguf.c — libFuzzer harness for the GGUF reader (src/model/gguf.c) and the GGUF model
 * loader on top of it (src/model/model.c: hyperparameters, vocabulary, tensor mapping, F16/BF16/
 * K-quant conversion).
 *
 * The input is the whole file image, copied to a buffer of exactly its size so that AddressSanitizer
 * sees any read past the end. A successful parse must yield tensors that lie inside the buffer (the
 * harness touches each tensor's first and last byte) and getters that never fail on a parsed file
 * in ways other than a typed error. Then fr_model_load_gguf_buffer runs on the same bytes; it must
 * return a model or NULL with a one-line message naming the file, never crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1; /* quiet */
    return 0;
}

static volatile uint8_t sink;

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
    free(buf);
    return 0;
}
