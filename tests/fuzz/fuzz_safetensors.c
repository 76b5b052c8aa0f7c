/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader (src/model/safetensors.c)
 * and, on the same bytes, the config.json parser (src/model/hfconfig.c).
 *
 * The input is a whole .safetensors image, copied to a buffer of exactly its size. A successful
 * parse must give tensors whose data lies inside the buffer with nbytes = elements x dtype size,
 * names that are found again by lookup, and shapes within FR_ST_MAX_DIMS; a failure must be one line
 * that names the file. The bytes are also fed to fr_hf_config_parse as config.json text (JSON
 * fuzzing for free: safetensors headers are JSON too).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/hfconfig.h"
#include "model/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    fr_st_file f;
    fr_err err = {0};
    if (fr_st_parse(&f, "fuzz.safetensors", buf, size, &err) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const fr_st_tensor *t = &f.tensors[i];
            if (t->data < buf || t->data + t->nbytes > buf + size) abort();
            if (t->n_dims < 0 || t->n_dims > FR_ST_MAX_DIMS) abort();
            int64_t n = 1;
            for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
            if (n != t->n_elem) abort();
            if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
            if (fr_st_find(&f, t->name) != t) abort();
        }
        fr_st_close(&f);
    } else if (!strstr(err.msg, "fuzz.safetensors") || strchr(err.msg, '\n')) {
        abort();
    }
    fr_hf_config c;
    memset(&err, 0, sizeof err);
    if (fr_hf_config_parse(&c, (const char *)buf, size, "config.json", &err) == 0) {
        if (c.hp.n_embd < 1 || c.hp.n_head < 1 || c.hp.n_head % c.hp.n_head_kv ||
            c.hp.head_dim % 2 || c.hp.head_dim < 2)
            abort();
        fr_hf_config_free(&c);
    } else if (!strstr(err.msg, "config.json") || strchr(err.msg, '\n')) {
        abort();
    }
    free(buf);
    return 0;
}
