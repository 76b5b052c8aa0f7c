/* vision.c — loading the vision tower of a Qwen2-VL / Qwen2.5-VL model (see vision.h).
 *
 * Two sources:
 *   - an HF folder: the hyperparameters come from config.json's vision_config (hfconfig.c); the
 *     tensors are under `model.visual.` (transformers 5) or `visual.` (the checkpoints Qwen
 *     published), with HF's names (patch_embed.proj, blocks.N.{norm1,attn.qkv,attn.proj,norm2,
 *     mlp.*}, merger.{ln_q,mlp.0,mlp.2}); fr_vision_plan_hf adds them to the text model's job list.
 *   - llama.cpp's mmproj GGUF (architecture "clip", projector qwen2vl_merger / qwen2.5vl_merger):
 *     clip.vision.* metadata and the names v.patch_embd.weight(.1), v.blk.N.{ln1,attn_q,attn_k,
 *     attn_v,attn_out,ln2,ffn_gate,ffn_up,ffn_down}, v.post_ln, mm.0, mm.2. The converter splits
 *     the Conv3d kernel into one Conv2d kernel per frame and the fused qkv into q, k and v; both
 *     are joined again here, so every source ends in the same fr_vision.
 * Every vision tensor is F32 after load. A missing tensor is an error naming it (FR_ERR_NOT_FOUND).
 */
#include "model/vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/loader.h"
#include "model/quote.h"

/* ---- HF ---- */

static void job2(fr_loader *L, fr_tensor *dst, const char *pre, int b, const char *suffix,
                 int64_t in, int64_t out) {
    char name[128], canon[64];
    if (b >= 0) {
        snprintf(name, sizeof name, "%sblocks.%d.%s", pre, b, suffix);
        snprintf(canon, sizeof canon, "v.blk.%d.%s", b, suffix);
    } else {
        snprintf(name, sizeof name, "%s%s", pre, suffix);
        snprintf(canon, sizeof canon, "v.%s", suffix);
    }
    fr_ld_add_job(L, dst, canon, name, out > 0 ? 2 : 1, in, out > 0 ? out : 1, true, true);
}

void fr_vision_plan_hf(fr_loader *L, fr_vision *v) {
    const fr_vision_hparams *h = &v->hp;
    const char *pre = fr_ld_has(L, "model.visual.patch_embed.proj.weight") ? "model.visual."
                                                                            : "visual.";
    int64_t H = h->hidden, F = h->n_ff, M = (int64_t)h->hidden * h->merge * h->merge;
    bool ln = h->kind == FR_VISION_QWEN2VL; /* LayerNorm (with biases) rather than RMSNorm */
    char name[128];
    snprintf(name, sizeof name, "%spatch_embed.proj.weight", pre);
    fr_ld_job *j = fr_ld_add_job(L, &v->patch_w, "v.patch_embd.weight", name, 2,
                                 fr_vision_patch_dim(h), H, true, true);
    j->flatten = true; /* [hidden, C, T, P, P] */
    v->blocks = fr_xcalloc((size_t)h->depth, sizeof *v->blocks);
    for (int b = 0; b < h->depth; b++) {
        fr_vision_block *k = &v->blocks[b];
        job2(L, &k->norm1_w, pre, b, "norm1.weight", H, 0);
        if (ln) job2(L, &k->norm1_b, pre, b, "norm1.bias", H, 0);
        job2(L, &k->qkv_w, pre, b, "attn.qkv.weight", H, 3 * H);
        job2(L, &k->qkv_b, pre, b, "attn.qkv.bias", 3 * H, 0);
        job2(L, &k->proj_w, pre, b, "attn.proj.weight", H, H);
        job2(L, &k->proj_b, pre, b, "attn.proj.bias", H, 0);
        job2(L, &k->norm2_w, pre, b, "norm2.weight", H, 0);
        if (ln) job2(L, &k->norm2_b, pre, b, "norm2.bias", H, 0);
        if (ln) {
            job2(L, &k->up_w, pre, b, "mlp.fc1.weight", H, F);
            job2(L, &k->up_b, pre, b, "mlp.fc1.bias", F, 0);
            job2(L, &k->down_w, pre, b, "mlp.fc2.weight", F, H);
            job2(L, &k->down_b, pre, b, "mlp.fc2.bias", H, 0);
        } else {
            job2(L, &k->gate_w, pre, b, "mlp.gate_proj.weight", H, F);
            job2(L, &k->gate_b, pre, b, "mlp.gate_proj.bias", F, 0);
            job2(L, &k->up_w, pre, b, "mlp.up_proj.weight", H, F);
            job2(L, &k->up_b, pre, b, "mlp.up_proj.bias", F, 0);
            job2(L, &k->down_w, pre, b, "mlp.down_proj.weight", F, H);
            job2(L, &k->down_b, pre, b, "mlp.down_proj.bias", H, 0);
        }
    }
    job2(L, &v->merger_ln_w, pre, -1, "merger.ln_q.weight", H, 0);
    if (ln) job2(L, &v->merger_ln_b, pre, -1, "merger.ln_q.bias", H, 0);
    job2(L, &v->merger_fc1_w, pre, -1, "merger.mlp.0.weight", M, M);
    job2(L, &v->merger_fc1_b, pre, -1, "merger.mlp.0.bias", M, 0);
    job2(L, &v->merger_fc2_w, pre, -1, "merger.mlp.2.weight", M, h->out_hidden);
    job2(L, &v->merger_fc2_b, pre, -1, "merger.mlp.2.bias", h->out_hidden, 0);
}

void fr_vision_finish(fr_vision *v) {
    const fr_tensor *g[] = {&v->patch_w, &v->merger_ln_w, &v->merger_ln_b, &v->merger_fc1_w,
                            &v->merger_fc1_b, &v->merger_fc2_w, &v->merger_fc2_b};
    int64_t n = 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(g); i++) n += fr_tensor_nelem(g[i]);
    for (int b = 0; b < v->hp.depth; b++) {
        const fr_vision_block *k = &v->blocks[b];
        const fr_tensor *t[] = {&k->norm1_w, &k->norm1_b, &k->qkv_w, &k->qkv_b, &k->proj_w,
                                &k->proj_b, &k->norm2_w, &k->norm2_b, &k->gate_w, &k->gate_b,
                                &k->up_w, &k->up_b, &k->down_w, &k->down_b};
        for (size_t i = 0; i < FR_ARRAY_LEN(t); i++) n += fr_tensor_nelem(t[i]);
    }
    v->n_params = n;
}

/* ---- llama.cpp mmproj GGUF ---- */

static int mm_int(const fr_gguf *g, const char *key, int64_t lo, int64_t hi, int def, bool req,
                  int *out, fr_err *err) {
    int64_t x;
    int rc = fr_gguf_get_int(g, key, lo, hi, &x, err);
    if (rc < 0) return -1;
    if (rc == 1 && req) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing metadata '%s'", g->path, key);
        return -1;
    }
    *out = rc == 0 ? (int)x : def;
    return 0;
}

/* An array of 3 floats (image_mean / image_std): 1 absent, 0 read, -1 error. */
static int mm_float3(const fr_gguf *g, const char *key, float *out, fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) return 1;
    if (kv->type != FR_GGUF_ARR || kv->arr_type != FR_GGUF_F32 || kv->arr_n != 3) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: metadata '%s' must be an array of 3 floats",
                    g->path, key);
        return -1;
    }
    memcpy(out, kv->arr, 3 * sizeof(float));
    return 0;
}

/* Hyperparameters from clip.* metadata; the MLP width from the tensors (the converter writes
 * Qwen2-VL's feed_forward_length from the wrong field). */
static int mm_hparams(const fr_gguf *g, const fr_hparams *text, fr_vision_hparams *h,
                      bool *ffn_swapped, fr_err *err) {
    int rc;
    char *arch = fr_gguf_get_strdup(g, "general.architecture", &rc, err);
    if (rc == 1) fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing metadata 'general.architecture'",
                             g->path);
    if (!arch) return -1;
    if (strcmp(arch, "clip")) {
        char q[64];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: architecture '%s' is not an mmproj (expected "
                    "clip)", g->path, fr_quotez(arch, q, sizeof q));
        free(arch);
        return -1;
    }
    free(arch);
    char *pt = fr_gguf_get_strdup(g, "clip.projector_type", &rc, err);
    if (rc == 1) pt = fr_gguf_get_strdup(g, "clip.vision.projector_type", &rc, err);
    if (rc == 1) fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing metadata 'clip.projector_type'",
                             g->path);
    if (!pt) return -1;
    memset(h, 0, sizeof *h);
    if (!strcmp(pt, "qwen2.5vl_merger")) {
        h->kind = FR_VISION_QWEN25VL;
    } else if (!strcmp(pt, "qwen2vl_merger")) {
        h->kind = FR_VISION_QWEN2VL;
    } else {
        char q[64];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: projector type '%s' is not supported "
                    "(supported: qwen2vl_merger, qwen2.5vl_merger)", g->path,
                    fr_quotez(pt, q, sizeof q));
        free(pt);
        return -1;
    }
    free(pt);
    bool has_v = true;
    if (fr_gguf_get_bool(g, "clip.has_vision_encoder", &has_v, err) < 0) return -1;
    if (!has_v) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: the mmproj has no vision encoder", g->path);
        return -1;
    }
    if (mm_int(g, "clip.vision.embedding_length", 1, 1 << 16, 0, true, &h->hidden, err) ||
        mm_int(g, "clip.vision.block_count", 1, FR_VISION_MAX_DEPTH, 0, true, &h->depth, err) ||
        mm_int(g, "clip.vision.attention.head_count", 1, 1024, 0, true, &h->n_head, err) ||
        mm_int(g, "clip.vision.patch_size", 1, 1024, 14, false, &h->patch, err) ||
        mm_int(g, "clip.vision.spatial_merge_size", 1, 64, 2, false, &h->merge, err) ||
        mm_int(g, "clip.vision.projection_dim", 1, 1 << 20, text->n_embd, false, &h->out_hidden,
               err))
        return -1;
    if (h->hidden % h->n_head || (h->hidden / h->n_head) % 4) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision width %d over %d heads must give a head "
                    "dimension that is a multiple of 4", g->path, h->hidden, h->n_head);
        return -1;
    }
    h->head_dim = h->hidden / h->n_head;
    if (h->head_dim > 4096) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision head dimension %d is too large", g->path,
                    h->head_dim);
        return -1;
    }
    double eps = 1e-6;
    if (fr_gguf_get_float(g, "clip.vision.attention.layer_norm_epsilon", &eps, err) < 0) return -1;
    if (!(eps > 0) || !isfinite(eps)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: clip.vision.attention.layer_norm_epsilon must be "
                    "positive", g->path);
        return -1;
    }
    h->eps = (float)eps;
    h->rope_theta = 10000.0f;
    if (h->kind == FR_VISION_QWEN25VL) {
        int pattern;
        if (mm_int(g, "clip.vision.n_wa_pattern", 1, FR_VISION_MAX_DEPTH, 0, true, &pattern, err) ||
            mm_int(g, "clip.vision.window_size", 1, 1 << 16, 112, false, &h->window_size, err))
            return -1;
        if (h->window_size / h->merge / h->patch < 1) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: window size %d is smaller than a merged "
                        "unit (%d pixels)", g->path, h->window_size, h->merge * h->patch);
            return -1;
        }
        /* llama.cpp: a block is full-attention when (il + 1) % n_wa_pattern == 0 */
        for (int b = 0; b < h->depth; b++) h->fullatt[b] = (b + 1) % pattern == 0;
    } else {
        for (int b = 0; b < h->depth; b++) h->fullatt[b] = true;
    }
    if (h->out_hidden != text->n_embd) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: the projector's output width %d differs from the "
                    "text model's embedding width %d", g->path, h->out_hidden, text->n_embd);
        return -1;
    }
    int r1 = mm_float3(g, "clip.vision.image_mean", h->image_mean, err);
    int r2 = r1 < 0 ? -1 : mm_float3(g, "clip.vision.image_std", h->image_std, err);
    if (r1 < 0 || r2 < 0) return -1;
    h->has_norm_stats = r1 == 0 && r2 == 0;
    /* shapes only the tensors tell */
    const fr_gguf_tensor *pe = fr_gguf_find_tensor(g, "v.patch_embd.weight");
    if (!pe) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: tensor 'v.patch_embd.weight' not found", g->path);
        return -1;
    }
    if (pe->n_dims != 4 || pe->ne[0] != h->patch || pe->ne[1] != h->patch || pe->ne[2] > 16 ||
        pe->ne[3] != h->hidden) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor 'v.patch_embd.weight' has shape [%lld, "
                    "%lld, %lld, %lld], expected [%d, %d, channels, %d]", g->path,
                    (long long)pe->ne[0], (long long)pe->ne[1], (long long)pe->ne[2],
                    (long long)pe->ne[3], h->patch, h->patch, h->hidden);
        return -1;
    }
    h->in_chans = (int)pe->ne[2];
    h->temporal = fr_gguf_find_tensor(g, "v.patch_embd.weight.1") ? 2 : 1;
    const fr_gguf_tensor *up = fr_gguf_find_tensor(g, "v.blk.0.ffn_up.weight");
    const fr_gguf_tensor *down = fr_gguf_find_tensor(g, "v.blk.0.ffn_down.weight");
    if (!up) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: tensor 'v.blk.0.ffn_up.weight' not found", g->path);
        return -1;
    }
    /* files of llama.cpp's older conversion script have ffn_up and ffn_down swapped; clip.cpp
     * swaps them back when ffn_down takes the embedding as input; so do we (when unambiguous) */
    *ffn_swapped = down && down->n_dims == 2 && up->n_dims == 2 && down->ne[0] == h->hidden &&
                   up->ne[0] != h->hidden;
    if (*ffn_swapped) up = down;
    if (up->n_dims != 2 || up->ne[0] != h->hidden || up->ne[1] < 1 || up->ne[1] > (1 << 20)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor 'v.blk.0.ffn_up.weight' has shape [%lld, "
                    "%lld], expected [%d, n_ff]", g->path, (long long)up->ne[0],
                    (long long)up->ne[1], h->hidden);
        return -1;
    }
    h->n_ff = (int)up->ne[1];
    return 0;
}

/* The separate pieces the converter wrote, joined after loading. */
typedef struct mm_split {
    fr_tensor patch[2];        /* per frame: (P*P*C... ) ne {P, P, C, hidden} */
    fr_tensor *q, *k, *v;      /* depth x weight (hidden, hidden) */
    fr_tensor *qb, *kb, *vb;   /* depth x bias (hidden) */
    bool ffn_swapped;          /* ffn_up / ffn_down hold each other's matrices (old files) */
} mm_split;

static void mm_job(fr_loader *L, fr_tensor *dst, int b, const char *suffix, int64_t in,
                   int64_t out) {
    char name[96];
    if (b >= 0) snprintf(name, sizeof name, "v.blk.%d.%s", b, suffix);
    else snprintf(name, sizeof name, "%s", suffix);
    fr_ld_add_job(L, dst, name, name, out > 0 ? 2 : 1, in, out > 0 ? out : 1, true, true);
}

static void mm_plan(fr_loader *L, fr_vision *v, mm_split *sp) {
    const fr_vision_hparams *h = &v->hp;
    int64_t H = h->hidden, F = h->n_ff, M = (int64_t)h->hidden * h->merge * h->merge;
    bool ln = h->kind == FR_VISION_QWEN2VL;
    for (int t = 0; t < h->temporal; t++) {
        fr_ld_job *j = fr_ld_add_job(L, &sp->patch[t], "v.patch_embd.weight",
                                     t ? "v.patch_embd.weight.1" : "v.patch_embd.weight", 4,
                                     h->patch, h->patch, true, true);
        j->ne[2] = h->in_chans;
        j->ne[3] = H;
    }
    v->blocks = fr_xcalloc((size_t)h->depth, sizeof *v->blocks);
    for (int b = 0; b < h->depth; b++) {
        fr_vision_block *k = &v->blocks[b];
        mm_job(L, &k->norm1_w, b, "ln1.weight", H, 0);
        if (ln) mm_job(L, &k->norm1_b, b, "ln1.bias", H, 0);
        mm_job(L, &sp->q[b], b, "attn_q.weight", H, H);
        mm_job(L, &sp->k[b], b, "attn_k.weight", H, H);
        mm_job(L, &sp->v[b], b, "attn_v.weight", H, H);
        mm_job(L, &sp->qb[b], b, "attn_q.bias", H, 0);
        mm_job(L, &sp->kb[b], b, "attn_k.bias", H, 0);
        mm_job(L, &sp->vb[b], b, "attn_v.bias", H, 0);
        mm_job(L, &k->proj_w, b, "attn_out.weight", H, H);
        mm_job(L, &k->proj_b, b, "attn_out.bias", H, 0);
        mm_job(L, &k->norm2_w, b, "ln2.weight", H, 0);
        if (ln) mm_job(L, &k->norm2_b, b, "ln2.bias", H, 0);
        if (!ln) {
            mm_job(L, &k->gate_w, b, "ffn_gate.weight", H, F);
            mm_job(L, &k->gate_b, b, "ffn_gate.bias", F, 0);
        }
        const char *up = sp->ffn_swapped ? "ffn_down" : "ffn_up";
        const char *dn = sp->ffn_swapped ? "ffn_up" : "ffn_down";
        char nm[32];
        snprintf(nm, sizeof nm, "%s.weight", up);
        mm_job(L, &k->up_w, b, nm, H, F);
        snprintf(nm, sizeof nm, "%s.bias", up);
        mm_job(L, &k->up_b, b, nm, F, 0);
        snprintf(nm, sizeof nm, "%s.weight", dn);
        mm_job(L, &k->down_w, b, nm, F, H);
        snprintf(nm, sizeof nm, "%s.bias", dn);
        mm_job(L, &k->down_b, b, nm, H, 0);
    }
    mm_job(L, &v->merger_ln_w, -1, "v.post_ln.weight", H, 0);
    if (ln) mm_job(L, &v->merger_ln_b, -1, "v.post_ln.bias", H, 0);
    mm_job(L, &v->merger_fc1_w, -1, "mm.0.weight", M, M);
    mm_job(L, &v->merger_fc1_b, -1, "mm.0.bias", M, 0);
    mm_job(L, &v->merger_fc2_w, -1, "mm.2.weight", M, h->out_hidden);
    mm_job(L, &v->merger_fc2_b, -1, "mm.2.bias", h->out_hidden, 0);
}

/* A new F32 tensor of n_dims / ne owning n floats (zeroed). */
static float *new_f32(fr_model *m, fr_tensor *t, const char *name, int n_dims, int64_t ne0,
                      int64_t ne1) {
    int64_t n = ne0 * ne1;
    float *p = fr_xcalloc((size_t)n, sizeof(float));
    fr_model_own(m, p);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = FR_DTYPE_F32;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = t->ne[3] = 1;
    t->data = p;
    t->nbytes = (size_t)n * sizeof(float);
    return p;
}

/* Join the per-frame patch kernels and the q/k/v pieces into the HF layout; the pieces' own
 * buffers are released. */
static void mm_join(fr_model *m, fr_vision *v, mm_split *sp) {
    const fr_vision_hparams *h = &v->hp;
    int64_t H = h->hidden, PP = (int64_t)h->patch * h->patch, C = h->in_chans, T = h->temporal;
    float *pw = new_f32(m, &v->patch_w, "v.patch_embd.weight", 2, fr_vision_patch_dim(h), H);
    for (int64_t o = 0; o < H; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < T; t++)
                memcpy(pw + ((o * C + c) * T + t) * PP,
                       (const float *)sp->patch[t].data + (o * C + c) * PP, (size_t)PP * 4);
    for (int t = 0; t < T; t++) fr_model_release(m, sp->patch[t].data);
    for (int b = 0; b < h->depth; b++) {
        fr_vision_block *k = &v->blocks[b];
        float *w = new_f32(m, &k->qkv_w, "v.blk.attn_qkv.weight", 2, H, 3 * H);
        float *bb = new_f32(m, &k->qkv_b, "v.blk.attn_qkv.bias", 1, 3 * H, 1);
        const fr_tensor *ws[3] = {&sp->q[b], &sp->k[b], &sp->v[b]};
        const fr_tensor *bs[3] = {&sp->qb[b], &sp->kb[b], &sp->vb[b]};
        for (int i = 0; i < 3; i++) {
            memcpy(w + i * H * H, ws[i]->data, (size_t)(H * H) * 4);
            memcpy(bb + i * H, bs[i]->data, (size_t)H * 4);
            fr_model_release(m, ws[i]->data);
            fr_model_release(m, bs[i]->data);
        }
    }
}

int fr_vision_load_mmproj_buffer(fr_model *m, const uint8_t *data, size_t size,
                                 const char *name, fr_err *err) {
    if (m->vision) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: the model already has a vision tower", name);
        return -1;
    }
    fr_gguf g;
    if (fr_gguf_parse(&g, name, data, size, err) != 0) return -1;
    fr_vision *v = fr_xcalloc(1, sizeof *v);
    fr_loader L = {.m = m, .where = g.path, .gg = &g};
    mm_split sp;
    memset(&sp, 0, sizeof sp);
    int rc = -1;
    if (mm_hparams(&g, &m->hp, &v->hp, &sp.ffn_swapped, err) != 0) goto done;
    size_t d = (size_t)v->hp.depth;
    sp.q = fr_xcalloc(d, sizeof *sp.q);
    sp.k = fr_xcalloc(d, sizeof *sp.k);
    sp.v = fr_xcalloc(d, sizeof *sp.v);
    sp.qb = fr_xcalloc(d, sizeof *sp.qb);
    sp.kb = fr_xcalloc(d, sizeof *sp.kb);
    sp.vb = fr_xcalloc(d, sizeof *sp.vb);
    mm_plan(&L, v, &sp);
    if (fr_ld_run_jobs(&L, size, err) != 0) goto done;
    mm_join(m, v, &sp);
    fr_vision_finish(v);
    m->vision = v;
    v = NULL;
    rc = 0;
done:
    free(L.jobs);
    free(sp.q), free(sp.k), free(sp.v), free(sp.qb), free(sp.kb), free(sp.vb);
    fr_gguf_free(&g);
    if (v) {
        free(v->blocks);
        free(v);
    }
    return rc;
}

int fr_vision_load_mmproj(fr_model *m, const char *path, fr_err *err) {
    fr_mmap map;
    if (fr_mmap_open(&map, path, err) != 0) return -1;
    if (fr_vision_load_mmproj_buffer(m, map.data, map.size, path, err) != 0) {
        fr_mmap_close(&map);
        return -1;
    }
    fr_model_add_map(m, map); /* F32 tensors point into it */
    return 0;
}
