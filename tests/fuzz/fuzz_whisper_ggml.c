/* fuzz_whisper_ggml.c — libFuzzer harness for the whisper.cpp ggml loader (src/model/whisper.c).
 *
 * The first input byte picks the mode. Even: the rest is a whole .bin image (copied to a buffer of
 * exactly its size). Odd: a valid random model (tests/whisper_synth.h, F32 or F16 by bit 1, n_mels
 * 1..4) is written first and the rest of the input is a list of edits (4-byte little-endian
 * offset, 1 byte value, applied modulo the file size) followed by a cut length taken from the
 * last 4 bytes, so the fuzzer reaches the tensor table without having to find a valid file. A
 * load that succeeds must give tensors inside the weight block, a vocabulary layout inside
 * n_vocab and token bytes inside the text table; a failure must be one line naming the file with
 * a code other than FR_ERR_INTERNAL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/whisper.h"
#include "../whisper_synth.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

static void check(const fr_whisper_model *m) {
    const fr_whisper_vocab *v = &m->vocab;
    const float *lo = m->arena, *hi = m->arena + m->arena_floats;
    const float *ptrs[] = {m->conv1_w, m->conv2_b, m->enc_pos, m->tok_emb, m->dec_pos, m->dec_ln_b,
                           m->proj, m->enc[0].fc2_b, m->dec[m->hp.n_text_layer - 1].cross.o_b};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (!ptrs[i] || ptrs[i] < lo || ptrs[i] >= hi) abort();
    if (v->eot != v->n_text || v->ts_begin + 1501 != m->hp.n_vocab || v->n_lang < 1) abort();
    size_t len, total = 0;
    for (int i = 0; i < v->n_text; i++) {
        if (!fr_whisper_token_bytes(m, i, &len)) abort();
        total += len;
    }
    if (v->text_off && total != v->text_off[v->n_text]) abort();
    if (fr_whisper_token_bytes(m, v->eot, &len)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t *buf;
    size_t n;
    if (!(data[0] & 1)) {
        n = size - 1;
        buf = malloc(n ? n : 1);
        if (n) memcpy(buf, data + 1, n);
    } else {
        synth_cfg c = {.n_text = 5, .n_lang = 1, .d = 4, .n_head = 2, .n_enc = 1, .n_dec = 1,
                       .n_mels = 1 + (data[0] >> 2) % 4, .f16 = (data[0] >> 1) & 1, .seed = 3};
        buf = synth_ggml(&c, &n);
        size_t i = 1;
        for (; i + 5 <= size - (size >= 5 ? 4 : 0); i += 5) {
            uint32_t off;
            memcpy(&off, data + i, 4);
            buf[off % n] = data[i + 4];
        }
        if (size >= 9) {
            uint32_t cut;
            memcpy(&cut, data + size - 4, 4);
            if (cut % 4 == 0) n = cut % (n + 1);
        }
    }
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load_ggml_buffer(buf, n, "fuzz.bin", &err);
    if (m) {
        check(m);
        fr_whisper_free(m);
    } else {
        if (!err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "fuzz.bin", 8) != 0) abort();
        if (err.code == FR_ERR_INTERNAL) abort();
    }
    free(buf);
    return 0;
}
