/* fuzz_lora.c — libFuzzer harness for the LoRA adapter loader (src/model/lora.c) without the file
 * system: the input is a 2-byte little-endian length L, then L bytes of adapter_config.json, then
 * the adapter_model.safetensors image. The model is the tiny Qwen2 fixture's shape (2 layers,
 * hidden 64, 4 heads / 2 KV heads of 16, FFN 160). A load that succeeds must hold only
 * projections of the model's sides with rank r <= FR_LORA_MAX_RANK and finite-size weights; a
 * failure must be one line with a code other than FR_ERR_INTERNAL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/lora.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t L = (size_t)data[0] | (size_t)data[1] << 8;
    if (L > size - 2) L = size - 2;
    const char *cfg = (const char *)data + 2;
    const uint8_t *st = data + 2 + L;
    const size_t st_len = size - 2 - L;
    /* each part in a buffer of exactly its size, so a read past either end is caught */
    char *c = malloc(L ? L : 1);
    uint8_t *s = malloc(st_len ? st_len : 1);
    memcpy(c, cfg, L);
    memcpy(s, st, st_len);
    fr_hparams hp = {0};
    hp.n_layer = 2, hp.n_embd = 64, hp.n_head = 4, hp.n_head_kv = 2, hp.head_dim = 16;
    hp.n_ff = 160;
    fr_err err = {0};
    fr_lora *a = fr_lora_parse(c, L, s, st_len, "fuzz", &hp, &err);
    if (a) {
        size_t bytes = 0;
        for (int l = 0; l < a->n_layer; l++)
            for (int m = 0; m < FR_LORA_N; m++) {
                const fr_lora_mat *x = fr_lora_get(a, l, (fr_lora_mod)m);
                if (!x) continue;
                if (x->r < 1 || x->r > FR_LORA_MAX_RANK || x->in < 1 || x->out < 1 || !x->b) abort();
                bytes += ((size_t)x->r * x->in + (size_t)x->out * x->r) * sizeof(float);
                volatile float sink = x->a[(size_t)x->r * x->in - 1] + x->b[(size_t)x->out * x->r - 1];
                (void)sink;
            }
        if (bytes != a->bytes || bytes == 0) abort();
        fr_lora_free(a);
    } else {
        if (err.code == FR_ERR_INTERNAL || !err.msg[0] || strchr(err.msg, '\n')) abort();
    }
    free(c);
    free(s);
    return 0;
}
