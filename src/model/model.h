/* model.h — the in-memory model: hyperparameters, weight tensors, tokenizer, chat template.
 *
 * A model is loaded once (fr_model_load) and then shared read-only by every request and thread.
 * Weights point into memory-mapped files where the stored dtype is one the CPU backend computes
 * with directly (F32, Q8_0, Q4_0); other dtypes (F16, BF16, and GGUF's Q4_K/Q5_K/Q6_K, which are
 * dequantised) are converted once at load into F32 buffers the model owns. Norm weights, biases
 * and rope_freq_factors are always F32 after load. The backend therefore only ever sees F32,
 * Q8_0 and Q4_0 tensors.
 *
 * Sources (see model.c for the loader, safetensors.c / gguf.c / hfconfig.c for the parsers):
 *   - an HF folder: config.json (+ generation_config.json, tokenizer_config.json,
 *     chat_template.jinja), model.safetensors or model.safetensors.index.json + shards,
 *     tokenizer.json;
 *   - a GGUF v3 (or v2) file with architecture "qwen2" or "llama".
 * Every tensor's shape is checked against the hyperparameters at load.
 *
 * Layout convention (same as GGUF / ggml): ne[0] is the innermost (contiguous) dimension. A linear
 * layer y = W x with W of HF shape [out, in] has ne[0] = in, ne[1] = out, rows of `in` elements.
 */
#ifndef FRUGAL_MODEL_H
#define FRUGAL_MODEL_H

#include "base/base.h"

typedef enum fr_dtype {
    FR_DTYPE_F32 = 0,
    FR_DTYPE_F16,
    FR_DTYPE_BF16,
    FR_DTYPE_Q8_0, /* GGUF Q8_0: blocks of 32: f16 scale d, 32 x int8; x = q * d */
    FR_DTYPE_Q4_0, /* GGUF Q4_0: blocks of 32: f16 d, 16 bytes; lo nibble = elem j, hi = j+16;
                      x = (q - 8) * d */
    FR_DTYPE_Q4_K, /* GGUF K-quants, super-blocks of 256 elements in ggml's layouts (144, 176 and
                      210 bytes): kept in their blocks, rows dequantised where they are used */
    FR_DTYPE_Q5_K,
    FR_DTYPE_Q6_K,
    FR_DTYPE_COUNT
} fr_dtype;

/* Bytes for a row of n elements (n must be a multiple of the block size for quantised types). */
size_t fr_dtype_row_size(fr_dtype t, int64_t n);
int fr_dtype_block(fr_dtype t); /* elements per block: 1 for float types */
const char *fr_dtype_name(fr_dtype t);
/* n elements (a multiple of the block) of type t at src as F32 into dst: F32, F16, BF16 and the
 * GGUF block types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K: ggml's reference dequantisation). 0, or -1 for
 * another type. */
int fr_dtype_to_f32(fr_dtype t, const void *src, float *dst, int64_t n);

#define FR_MAX_DIMS 4
typedef struct fr_tensor {
    const char *name;      /* canonical name (GGUF style, e.g. "blk.3.attn_q.weight"), or NULL */
    fr_dtype dtype;        /* storage type of data */
    int n_dims;            /* 1..4; 0 = absent tensor (e.g. no bias) */
    int64_t ne[FR_MAX_DIMS]; /* elements per dimension, ne[0] innermost; unused dims are 1 */
    const void *data;      /* n_dims > 0: points at nbytes of storage (mmap or owned) */
    size_t nbytes;
} fr_tensor;

static inline bool fr_tensor_present(const fr_tensor *t) { return t->n_dims > 0 && t->data; }
static inline int64_t fr_tensor_nelem(const fr_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->ne[i];
    return t->n_dims ? n : 0;
}

typedef enum fr_arch { FR_ARCH_QWEN2 = 0, FR_ARCH_LLAMA = 1 } fr_arch;

typedef struct fr_hparams {
    fr_arch arch;
    int n_vocab;        /* rows of tok_embd */
    int n_embd;         /* hidden size */
    int n_layer;
    int n_head;         /* query heads */
    int n_head_kv;      /* key/value heads (GQA when < n_head) */
    int head_dim;       /* usually n_embd / n_head */
    int n_ff;           /* FFN inner size */
    int n_ctx_train;    /* max_position_embeddings */
    float rms_eps;
    float rope_theta;
    bool rope_interleaved; /* true: rotate adjacent pairs (GGUF llama layout: Q/K rows permuted
                              by the converter); false: rotate halves (HF, GGUF qwen2) */
    bool tied_embeddings;  /* output projection = tok_embd */
    int bos_id, eos_id;    /* -1 when absent */
    int eos_ids[4];        /* extra end ids (generation_config eos list, the tokenizer's eos_token,
                              GGUF eot/eom ids), never equal to eos_id; -1 padded */
    int mrope_section[3];  /* M-RoPE (Qwen2-VL / Qwen2.5-VL): rotary frequency pairs driven by the
                              temporal, height and width position (sum = head_dim/2); all 0 =
                              plain RoPE */
    int image_token_id;    /* <|image_pad|>, or -1 when the model has no vision */
    int video_token_id;    /* <|video_pad|>, or -1 */
    int vision_start_id;   /* <|vision_start|>, or -1 */
    int vision_end_id;     /* <|vision_end|>, or -1 */
} fr_hparams;

/* Append id to hp->eos_ids unless it is negative, equal to hp->eos_id or already listed; an id
 * that finds the list full is dropped. Cannot fail. */
void fr_hparams_add_eos(fr_hparams *hp, int id);

typedef struct fr_layer {
    fr_tensor attn_norm; /* (n_embd) */
    fr_tensor wq, wk, wv; /* (n_head*head_dim, n_embd), (n_head_kv*head_dim, n_embd) x2 */
    fr_tensor bq, bk, bv; /* biases (Qwen2) or absent */
    fr_tensor wo;         /* (n_embd, n_head*head_dim) */
    fr_tensor ffn_norm;   /* (n_embd) */
    fr_tensor w_gate, w_up; /* (n_ff, n_embd) */
    fr_tensor w_down;       /* (n_embd, n_ff) */
} fr_layer;

typedef struct fr_weights {
    fr_tensor tok_embd;    /* (n_vocab, n_embd) */
    fr_tensor output_norm; /* (n_embd) */
    fr_tensor output;      /* (n_vocab, n_embd); same storage as tok_embd when tied */
    fr_layer *layers;      /* n_layer entries */
    float *rope_freq_factors; /* head_dim/2 divisors of each rotary frequency (llama3 scaling,
                                 GGUF rope_freqs), or NULL for none */
} fr_weights;

struct fr_tokenizer;
struct fr_vision; /* model/vision.h */

typedef struct fr_model {
    char *path;            /* what the user passed */
    char *name;            /* short name for /v1/models and logs */
    fr_hparams hp;
    fr_weights w;
    struct fr_tokenizer *tok;
    struct fr_vision *vision; /* the vision tower (model/vision.h), or NULL for a text-only model */
    char *chat_template;   /* Jinja source from the checkpoint, or NULL */
    char *bos_token_str;   /* bos_token for chat templates (tokenizer_config.json / GGUF vocab), or
                              NULL */
    char *eos_token_str;   /* eos_token for chat templates, or NULL */
    const char *arch_name; /* "qwen2" or "llama" (static string) */
    int64_t n_params;      /* parameters (elements of all distinct weight tensors) */
    /* storage (private to the loader) */
    fr_mmap *maps;
    int n_maps;
    void **owned;          /* buffers the loader allocated (converted tensors) */
    int n_owned, cap_owned;
    double load_seconds;
    size_t weight_bytes;   /* bytes of weights the backend will read per token */
} fr_model;

/* Load a model from an HF folder (config.json + safetensors + tokenizer.json) or a .gguf file.
 * Returns NULL with a one-line message naming the file and the problem. */
fr_model *fr_model_load(const char *path, fr_err *err);
void fr_model_free(fr_model *m);

/* Take ownership of a malloc'd buffer (freed with the model). */
void fr_model_own(fr_model *m, void *p);

/* Load a GGUF model from a buffer the caller keeps alive (and frees) after fr_model_free; `name`
 * is used in messages. fr_model_load uses it on the file's memory map; tests and the fuzzer use it
 * directly. */
fr_model *fr_model_load_gguf_buffer(const uint8_t *data, size_t size, const char *name,
                                    fr_err *err);

#endif
