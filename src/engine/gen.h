/* gen.h — the per-request generation state shared by `frugal generate` and the serving engine:
 * turns sampled token ids into released text, and decides when generation ends (EOS, stop
 * strings, max tokens).
 *
 * Text is released as soon as it can no longer be part of a stop string: a suffix that is a
 * prefix of some stop string is held back until the next token decides it. Multi-byte UTF-8
 * characters split across tokens are released whole (fr_detok). EOS tokens produce no text.
 *
 *   fr_gen g; fr_gen_init(&g, model, &params);
 *   for (;;) { int id = sample(...); fr_finish f = fr_gen_push(&g, id, &delta); send(delta);
 *              if (f != FR_FINISH_NONE) break; }
 *   fr_gen_free(&g);
 */
#ifndef FRUGAL_GEN_H
#define FRUGAL_GEN_H

#include "model/model.h"
#include "model/tokenizer.h"

typedef enum fr_finish {
    FR_FINISH_NONE = 0, /* keep going */
    FR_FINISH_STOP,     /* EOS token or a stop string */
    FR_FINISH_LENGTH,   /* max_tokens reached */
} fr_finish;

#define FR_GEN_MAX_STOP 8

typedef struct fr_gen_params {
    int max_tokens;          /* >= 1 */
    const char *stop[FR_GEN_MAX_STOP]; /* stop strings (copied at init); NULL-terminated or n_stop */
    int n_stop;
    bool ignore_eos;         /* keep generating through EOS (benchmarks, golden tests) */
    bool skip_special;       /* do not print special tokens' text (default true) */
} fr_gen_params;
fr_gen_params fr_gen_params_default(void); /* max_tokens 256, no stop, skip_special */

typedef struct fr_gen {
    const fr_model *model;
    fr_gen_params p;         /* stop strings point at copies owned here */
    char *stop_copy[FR_GEN_MAX_STOP];
    size_t max_stop_len;
    fr_detok detok;          /* partial UTF-8 between tokens */
    fr_buf held;             /* decoded text not yet released (may start a stop string) */
    fr_buf text;             /* all released text so far */
    int n_generated;         /* tokens pushed, EOS included */
    fr_finish finish;
} fr_gen;

void fr_gen_init(fr_gen *g, const fr_model *m, const fr_gen_params *p);
/* True when `id` ends generation for this model (its EOS ids / the tokenizer's EOS). */
bool fr_gen_is_eos(const fr_model *m, int id);
/* Feed one sampled token; appends releasable text to *delta (may be nothing). Returns the
 * finish state; once it is not NONE, everything releasable has been appended. */
fr_finish fr_gen_push(fr_gen *g, int id, fr_buf *delta);
void fr_gen_free(fr_gen *g);

#endif
