/* whisper.h (backend/cpu) — the Whisper encoder and decoder in fp32 on the CPU: the reference
 * every other Whisper path is checked against (HF's WhisperForConditionalGeneration, eager).
 *
 * Usage:
 *   float *enc = malloc(n_audio_ctx * d * 4);
 *   fr_whisper_encode(m, mel, enc);                      // mel (n_mels, 3000)
 *   fr_whisper_cross *x = fr_whisper_cross_new(m, enc);  // K/V of every cross-attention
 *   fr_whisper_kv *kv = fr_whisper_kv_new(m);            // self-attention cache of one sequence
 *   fr_whisper_decode(m, x, kv, prompt, n, logits);      // logits of the last token (n_vocab)
 *   fr_whisper_decode(m, x, kv, &next, 1, logits);       // one more step
 *   fr_whisper_kv_free(kv); fr_whisper_cross_free(x);
 * The model is read-only; a kv (and its scratch) belongs to one thread at a time; a cross may be
 * shared by the sequences (beams) that decode the same audio.
 *
 * The computation (HF's modeling_whisper.py):
 *   encoder: x = gelu(conv1(mel)) (kernel 3, padding 1); x = gelu(conv2(x)) (stride 2), as
 *            (n_audio_ctx, d); x += positions; per block x += attn(ln1(x)); x += fc2(gelu(fc1(
 *            ln2(x)))); x = ln_post(x)
 *   decoder: x = tok_emb[t] + pos[p]; per block x += self_attn(ln1(x)) (causal, over the cache);
 *            x += cross_attn(ln2(x), enc); x += mlp(ln3(x)); logits = ln(x) . tok_emb^T
 *   attention: q = (x Wq^T + bq) / sqrt(head_dim); k = x Wk^T (no bias); v = x Wv^T + bv;
 *              softmax(q k^T) v per head, then out_proj. LayerNorm eps 1e-5, exact (erf) GELU.
 * Matrix products go through OpenBLAS (cblas_sgemm).
 */
#ifndef FRUGAL_CPU_WHISPER_H
#define FRUGAL_CPU_WHISPER_H

#include <stdbool.h>

#include "model/whisper.h"

/* The encoder output of one 30 s window: mel (n_mels, 2 * n_audio_ctx) -> out (n_audio_ctx,
 * n_audio_state). Cannot fail (aborts on out of memory). */
void fr_whisper_encode(const fr_whisper_model *m, const float *mel, float *out);

/* Cross-attention keys and values of every decoder layer for one encoder output. */
typedef struct fr_whisper_cross {
    float *k; /* (n_text_layer, n_audio_ctx, d) */
    float *v; /* (n_text_layer, n_audio_ctx, d) */
} fr_whisper_cross;
fr_whisper_cross *fr_whisper_cross_new(const fr_whisper_model *m, const float *enc);
void fr_whisper_cross_free(fr_whisper_cross *c);

/* The self-attention cache of one sequence, with its scratch. */
typedef struct fr_whisper_kv {
    float *k, *v;   /* (n_text_layer, n_text_ctx, d) */
    int n;          /* positions filled */
    int cap;        /* n_text_ctx */
    float *scratch; /* the decoder's activations for up to cap tokens (private) */
} fr_whisper_kv;
fr_whisper_kv *fr_whisper_kv_new(const fr_whisper_model *m);
void fr_whisper_kv_free(fr_whisper_kv *kv);
/* dst = src's first src->n positions (same model). */
void fr_whisper_kv_copy(const fr_whisper_model *m, fr_whisper_kv *dst, const fr_whisper_kv *src);

/* Append n tokens (positions kv->n .. kv->n + n - 1) and write logits: of the last token
 * (n_vocab floats) or, when all, of each token (n, n_vocab). Returns 0, or -1 with err
 * (FR_ERR_BAD_REQUEST) when the positions would pass n_text_ctx or a token is out of range. */
int fr_whisper_decode(const fr_whisper_model *m, const fr_whisper_cross *c, fr_whisper_kv *kv,
                      const int *tokens, int n, float *logits, bool all, fr_err *err);

#endif
