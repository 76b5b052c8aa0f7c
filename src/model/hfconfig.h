/* hfconfig.h — the JSON side of an HF model folder: config.json (architecture and
 * hyperparameters, RoPE theta and scaling; for Qwen2-VL / Qwen2.5-VL the text model's fields from
 * text_config (transformers 5) or the top level (older configs), mrope_section from
 * rope_parameters or rope_scaling, the VL token ids and vision_config), generation_config.json (bos/eos ids),
 * tokenizer_config.json (bos_token / eos_token strings, chat_template) and chat_template.jinja.
 *
 * Both the transformers 4 layout (top-level rope_theta, rope_scaling) and the transformers 5 one
 * (rope_parameters) are read. RoPE scaling "default" (or none) and "llama3" are supported; for
 * llama3 the per-frequency divisors are computed here exactly as transformers'
 * _compute_llama3_parameters does. Anything else is an error that names it.
 */
#ifndef FRUGAL_HFCONFIG_H
#define FRUGAL_HFCONFIG_H

#include "model/model.h"

typedef struct fr_hf_config {
    fr_hparams hp;           /* from config.json; n_vocab = vocab_size; bos/eos merged with
                                generation_config.json; rope_interleaved false */
    int tie;                 /* tie_word_embeddings: 1, 0, or -1 when config.json omits it */
    float *rope_freq_factors; /* head_dim/2 llama3 divisors (malloc'd) or NULL */
    char *chat_template;     /* chat_template.jinja or tokenizer_config.json's, or NULL */
    char *bos_token_str;     /* tokenizer_config.json bos_token, or NULL */
    char *eos_token_str;     /* tokenizer_config.json eos_token, or NULL */
    struct fr_vision_hparams *vision; /* Qwen2-VL / Qwen2.5-VL: the vision_config (malloc'd; see
                                         model/vision.h), else NULL */
} fr_hf_config;

/* Parse config.json text (`path` names it in messages). Sets hp, tie and rope_freq_factors.
 * Returns 0 or -1 with err. */
int fr_hf_config_parse(fr_hf_config *c, const char *json, size_t len, const char *path,
                       fr_err *err);
/* Read everything from an HF folder: config.json, then generation_config.json,
 * tokenizer_config.json and chat_template.jinja when present. */
int fr_hf_config_load(fr_hf_config *c, const char *dir, fr_err *err);
void fr_hf_config_free(fr_hf_config *c);

/* The llama3 RoPE divisors (head_dim/2 of them) into out. Returns 0, or -1 when the parameters
 * are invalid. */
int fr_rope_llama3_factors(double theta, int head_dim, double factor, double low_freq_factor,
                           double high_freq_factor, double original_max_pos, float *out);

#endif
