/* vision.h — the vision tower of a Qwen2-VL / Qwen2.5-VL model: hyperparameters and weights.
 *
 * Loaded with the text model (fr_model_load) from the same HF folder (the `vision_config` of
 * config.json, tensors under `visual.` or `model.visual.`), or from llama.cpp's split files (the
 * text GGUF of architecture qwen2vl plus its `mmproj` GGUF of architecture clip, projector type
 * qwen2vl_merger or qwen2.5vl_merger). m->vision is NULL for a text-only model.
 *
 * The tower (HF's Qwen2VisionTransformerPretrainedModel / Qwen2_5_VisionTransformerPretrainedModel):
 *   x = patches (n_patches, C*T*P*P) . patch_w^T                    (n_patches, hidden)
 *   per block b: x += attn(norm1(x)) with the 2D rotary embedding, over the whole image when b is
 *                a full-attention block (Qwen2-VL: all), else within windows of
 *                window_size/patch/merge merged units (Qwen2.5-VL);
 *                x += mlp(norm2(x))  (Qwen2-VL: LayerNorm + fc2(quick_gelu(fc1)); Qwen2.5-VL:
 *                RMSNorm + down(silu(gate) * up), all with biases)
 *   merger: norm(x) grouped by merge x merge units (n_patches/merge^2, hidden*merge^2),
 *           mlp2(gelu(mlp0(.)))                                    (n_tokens, out_hidden)
 * The forward pass is in backend/cpu/vision.h.
 *
 * All vision weights are F32 after load (converted from F16/BF16/quantised storage), with the
 * layout of model.h (ne[0] innermost: a linear layer W of HF shape [out, in] has ne = {in, out}).
 */
#ifndef FRUGAL_VISION_H
#define FRUGAL_VISION_H

#include "model/model.h"

typedef enum fr_vision_kind {
    FR_VISION_QWEN2VL = 0,  /* Qwen2-VL: LayerNorm, quick_gelu MLP, full attention everywhere */
    FR_VISION_QWEN25VL = 1, /* Qwen2.5-VL: RMSNorm, SwiGLU MLP, window attention */
} fr_vision_kind;

#define FR_VISION_MAX_DEPTH 256 /* blocks accepted at load */

typedef struct fr_vision_hparams {
    fr_vision_kind kind;
    int depth;          /* transformer blocks */
    int hidden;         /* embedding width (Qwen2.5-VL hidden_size, Qwen2-VL embed_dim) */
    int n_head;         /* attention heads */
    int head_dim;       /* hidden / n_head (even; the rotary table uses head_dim/4 frequencies) */
    int n_ff;           /* MLP inner width (intermediate_size, or embed_dim * mlp_ratio) */
    int in_chans;       /* image channels (3) */
    int patch;          /* patch edge in pixels (14) */
    int temporal;       /* temporal patch size (frames per patch, 2) */
    int merge;          /* spatial merge size (2): merge x merge patches become one LLM token */
    int window_size;    /* window edge in pixels (Qwen2.5-VL, 112); 0 = no window attention */
    int out_hidden;     /* merger output width = the LLM's n_embd */
    int tokens_per_second; /* video temporal position scale (Qwen2.5-VL), 0 when absent */
    float eps;          /* norm epsilon of the blocks and the merger (1e-6) */
    float rope_theta;   /* base of the 2D rotary embedding (10000) */
    bool fullatt[FR_VISION_MAX_DEPTH]; /* block b attends over the whole image (Qwen2-VL: every
                                          block; Qwen2.5-VL: fullatt_block_indexes) */
    bool has_norm_stats; /* image_mean/std below come from the file (GGUF mmproj) */
    float image_mean[3], image_std[3]; /* the mmproj's normalisation, when has_norm_stats */
} fr_vision_hparams;

/* Patch dimension: C * T * P * P (a row of pixel values, HF's processor layout). */
static inline int64_t fr_vision_patch_dim(const fr_vision_hparams *h) {
    return (int64_t)h->in_chans * h->temporal * h->patch * h->patch;
}

typedef struct fr_vision_block {
    fr_tensor norm1_w, norm1_b; /* (hidden); the biases only for LayerNorm (Qwen2-VL) */
    fr_tensor qkv_w;            /* (3*hidden, hidden): rows q, then k, then v */
    fr_tensor qkv_b;            /* (3*hidden) */
    fr_tensor proj_w, proj_b;   /* (hidden, hidden), (hidden) */
    fr_tensor norm2_w, norm2_b; /* (hidden) */
    fr_tensor gate_w, gate_b;   /* (n_ff, hidden), (n_ff): Qwen2.5-VL only */
    fr_tensor up_w, up_b;       /* (n_ff, hidden), (n_ff): up_proj, or fc1 (Qwen2-VL) */
    fr_tensor down_w, down_b;   /* (hidden, n_ff), (hidden): down_proj, or fc2 (Qwen2-VL) */
} fr_vision_block;

typedef struct fr_vision {
    fr_vision_hparams hp;
    fr_tensor patch_w;          /* (hidden, C*T*P*P): the Conv3d kernel, rows of c, t, y, x */
    fr_vision_block *blocks;    /* depth entries */
    fr_tensor merger_ln_w;      /* (hidden) ln_q */
    fr_tensor merger_ln_b;      /* (hidden) LayerNorm bias (Qwen2-VL), else absent */
    fr_tensor merger_fc1_w, merger_fc1_b; /* mlp.0: (hidden*merge^2, hidden*merge^2) */
    fr_tensor merger_fc2_w, merger_fc2_b; /* mlp.2: (out_hidden, hidden*merge^2) */
    int64_t n_params;           /* elements of all vision tensors */
} fr_vision;

/* Attach the vision tower of llama.cpp's mmproj GGUF at `path` to a loaded text model (a qwen2vl
 * GGUF, whose fr_model_load finds an mmproj next to it by itself). The projector's output width
 * must equal the text model's. Returns 0, or -1 with err (the model is left unchanged). */
int fr_vision_load_mmproj(fr_model *m, const char *path, fr_err *err);
/* The same from an mmproj image in memory that the caller keeps alive until fr_model_free (tensors
 * may point into it); `name` is used in messages (the fuzzer's entry). */
int fr_vision_load_mmproj_buffer(fr_model *m, const uint8_t *data, size_t size,
                                 const char *name, fr_err *err);

#endif
