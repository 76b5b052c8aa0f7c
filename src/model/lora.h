/* lora.h — LoRA adapters in PEFT's layout (adapter_config.json + adapter_model.safetensors) for
 * the decoder's projections.
 *
 *   fr_err err = {0};
 *   fr_lora *a = fr_lora_load("adapters/billing", "billing", &model->hp, &err);
 *   ... a request's tokens carry a (fr_batch.lora); the decoder adds
 *       scale * B (A x) to each adapted projection's output ...
 *   fr_lora_free(a);
 *
 * What is read: `r`, `lora_alpha`, `use_rslora` (scale alpha / sqrt(r), else alpha / r) and
 * `target_modules` (q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, as a list, or the
 * string "all-linear"); the tensors base_model.model.model.layers.L.{self_attn,mlp}.M.lora_A /
 * lora_B(.default).weight, F32/F16/BF16, converted to f32 (A (r, in), B (out, r)). What is
 * refused, naming the key (UNSUPPORTED): DoRA (`use_dora`), `bias` other than "none",
 * `fan_in_fan_out`, `modules_to_save`, per-module `rank_pattern` / `alpha_pattern`,
 * `layers_to_transform`, a regular expression in `target_modules`, adapters of the embeddings or
 * the LM head, a rank over FR_LORA_MAX_RANK. Shapes are checked against the model (BAD_REQUEST
 * naming the tensor); a missing file is NOT_FOUND. An adapter is immutable after load and may be
 * shared by threads; `hash` identifies its weights (the prefix cache keys adapted requests by
 * it). It is reference-counted: fr_lora_load gives one reference, fr_lora_ref takes another
 * (a request running with it), fr_lora_free gives one back and frees on the last.
 */
#ifndef FRUGAL_MODEL_LORA_H
#define FRUGAL_MODEL_LORA_H

#include <stdatomic.h>

#include "model/model.h"

#define FR_LORA_MAX_RANK 64
#define FR_LORA_MAX_NAME 128

typedef enum fr_lora_mod {
    FR_LORA_Q,
    FR_LORA_K,
    FR_LORA_V,
    FR_LORA_O,
    FR_LORA_GATE,
    FR_LORA_UP,
    FR_LORA_DOWN,
    FR_LORA_N
} fr_lora_mod;

/* One adapted projection: y += scale * B (A x). */
typedef struct fr_lora_mat {
    int r;          /* rank */
    int in, out;    /* the projection's sides */
    float *a;       /* (r, in), row-major; NULL: this projection is not adapted */
    float *b;       /* (out, r) */
} fr_lora_mat;

typedef struct fr_lora {
    char name[FR_LORA_MAX_NAME]; /* what requests call it ("model": name) */
    char *dir;                   /* where it was loaded from (owned) */
    int rank;                    /* the config's r */
    float alpha, scale;          /* lora_alpha; alpha / r (alpha / sqrt(r) with use_rslora) */
    int n_layer;
    fr_lora_mat *m;              /* (n_layer * FR_LORA_N) */
    uint64_t hash;               /* of the rank, scale and every weight */
    size_t bytes;                /* f32 bytes held */
    atomic_int refs;             /* references (fr_lora_ref / fr_lora_free) */
} fr_lora;

/* Loads the adapter in folder dir for a model of hp, calling it name (at most
 * FR_LORA_MAX_NAME - 1 bytes). NULL with err set (codes above). */
fr_lora *fr_lora_load(const char *dir, const char *name, const fr_hparams *hp, fr_err *err);
/* Another reference to a (thread-safe); returns a. */
fr_lora *fr_lora_ref(const fr_lora *a);
/* Gives one reference back; the last frees (thread-safe). NULL is ignored. */
void fr_lora_free(fr_lora *a);
/* Layer l's projection m, or NULL when the adapter leaves it alone. */
static inline const fr_lora_mat *fr_lora_get(const fr_lora *a, int l, fr_lora_mod m) {
    const fr_lora_mat *x = &a->m[l * FR_LORA_N + m];
    return x->a ? x : NULL;
}
/* "q_proj", ... */
const char *fr_lora_mod_name(fr_lora_mod m);

#endif
