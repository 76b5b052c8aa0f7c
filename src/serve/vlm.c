/* vlm.c — see vlm.h. One request's images go through the cache, the image stage, the
 * preprocessing and the tower one after the other on the request's own thread (the HTTP
 * connection's); the tower's matrix products use OpenBLAS's threads. The question that guides the
 * pruning is the prompt's text after the last image (the user's words; template tokens and stop
 * words weigh 0), embedded with the model's token embedding. */
#include "serve/vlm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/vision.h"
#include "backend/cuda/cuda_vision.h"
#include "meter/meter.h"
#include "model/mrope.h"
#include "model/tokenizer.h"
#include "model/vision.h"
#include "serve/error.h"
#include "stages/image/image.h"
#include "stages/image/vlproc.h"
#include "stages/vision/bgdrop.h"
#include "stages/vision/cache.h"
#include "stages/vision/prune.h"

/* The CUDA tower (backend/cuda/vision.cu) is linked only into the CUDA binaries (make cuda):
 * referenced weakly, as backend.c references the CUDA row of the backend table. */
#pragma weak fr_cuda_vision_new
#pragma weak fr_cuda_vision_forward_kept
#pragma weak fr_cuda_vision_free

struct fr_vlm {
    const fr_model *m;      /* the model (borrowed) */
    fr_vl_proc_cfg proc;    /* the model's processor config */
    fr_vision_cache *cache; /* encoder cache, or NULL */
    bool bg_drop;           /* drop document background units before the tower */
    fr_cuda_vision *cv;     /* the tower on a CUDA device (fr_vlm_use_device), or NULL: CPU */
    int cv_dev;             /* that device's index (the vision stage is metered on it) */
    pthread_mutex_t cv_mu;  /* one request at a time through cv (its stream and buffers) */
};

fr_vlm *fr_vlm_new(const fr_model *m, size_t cache_bytes, fr_err *err) {
    if (!m->vision || m->hp.image_token_id < 0) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s has no vision tower", m->path);
        return NULL;
    }
    fr_vlm *v = fr_xcalloc(1, sizeof *v);
    v->m = m;
    if (fr_vl_proc_cfg_load(m->path, &v->proc, err)) {
        free(v);
        return NULL;
    }
    if (v->proc.merge != m->vision->hp.merge || v->proc.patch != m->vision->hp.patch ||
        v->proc.temporal != m->vision->hp.temporal) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: the processor config's patch %d / merge %d / "
                    "temporal %d differ from the vision tower's %d / %d / %d", m->path,
                    v->proc.patch, v->proc.merge, v->proc.temporal, m->vision->hp.patch,
                    m->vision->hp.merge, m->vision->hp.temporal);
        free(v);
        return NULL;
    }
    if (m->vision->hp.out_hidden != m->hp.n_embd) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: the vision tower's output width %d differs from "
                    "the language model's hidden size %d", m->path, m->vision->hp.out_hidden,
                    m->hp.n_embd);
        free(v);
        return NULL;
    }
    if (cache_bytes && !(v->cache = fr_vision_cache_new(cache_bytes, err))) {
        free(v);
        return NULL;
    }
    return v;
}

void fr_vlm_set_background_drop(fr_vlm *v, bool on) { v->bg_drop = on; }

int fr_vlm_use_device(fr_vlm *v, const char *device, fr_err *err) {
    fr_backend_kind kind;
    int idx;
    if (fr_backend_parse_device(device, &kind, &idx, err)) return -1;
    if (kind != FR_BACKEND_CUDA || v->cv) return 0;
    if (!fr_cuda_vision_new) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "device '%s': built without CUDA", device);
        return -1;
    }
    if (!(v->cv = fr_cuda_vision_new(v->m, idx, err))) return -1;
    v->cv_dev = idx;
    pthread_mutex_init(&v->cv_mu, NULL);
    return 0;
}

void fr_vlm_free(fr_vlm *v) {
    if (!v) return;
    if (v->cv) {
        fr_cuda_vision_free(v->cv);
        pthread_mutex_destroy(&v->cv_mu);
    }
    fr_vision_cache_free(v->cache);
    free(v);
}

void fr_vlm_stats_get(fr_vlm *v, fr_vlm_stats *out) {
    memset(out, 0, sizeof *out);
    if (!v || !v->cache) return;
    fr_vision_cache_stats s;
    fr_vision_cache_stats_get(v->cache, &s);
    out->hits = s.hits, out->misses = s.misses, out->evictions = s.evictions;
    out->inserts = s.inserts, out->entries = s.entries, out->bytes = s.bytes;
    out->budget = s.budget;
}

void fr_vlm_prompt_free(fr_vlm_prompt *p) {
    free(p->ids);
    free(p->rope_pos);
    free(p->embd);
    memset(p, 0, sizeof *p);
}

/* One image's features and grid, from the cache or computed: rows for the n_rows tokens the
 * tower ran on, of the grid's n_tok (fewer when background units were dropped: bg says which). */
typedef struct img_feat {
    const fr_vision_entry *hit; /* cache reference, or NULL */
    float *own;                 /* computed rows when not cached (malloc'd) */
    uint8_t *own_bg;            /* computed mask when not cached (malloc'd), or NULL */
    int64_t n_tok;              /* tokens of the grid */
    int64_t n_rows;             /* rows computed (== n_tok when nothing was dropped) */
    int32_t grid[3];
} img_feat;

static const float *feat_rows(const img_feat *f) { return f->hit ? f->hit->feat : f->own; }
/* 1 for the tokens with a row; NULL when every token has one. */
static const uint8_t *feat_bg(const img_feat *f) { return f->hit ? f->hit->keep : f->own_bg; }

static void img_feat_free(img_feat *f) {
    fr_vision_entry_release(f->hit);
    free(f->own);
    free(f->own_bg);
    memset(f, 0, sizeof *f);
}

static int image_fail(fr_api_error *err, fr_err *e, const char *param) {
    fr_err_prefix(e, "%s", param);
    const char *code = e->code == FR_ERR_TOO_LARGE    ? "image_too_large"
                       : e->code == FR_ERR_UNSUPPORTED ? "unsupported_media_type"
                       : e->code == FR_ERR_BAD_REQUEST ? "invalid_image"
                                                       : NULL;
    fr_api_error_from_err(err, e, code, param);
    return -1;
}

/* The document background units of one preprocessed image (bgdrop.h): f->own_bg and f->n_rows
 * when some are dropped, left alone otherwise. */
static int background(const fr_vlm *v, const fr_vl_pixels *px, img_feat *f, fr_err *e) {
    fr_vision_bg_params bp = fr_vision_bg_default_params();
    const fr_vision_hparams *hp = &v->m->vision->hp;
    bp.channels = hp->in_chans, bp.temporal = hp->temporal, bp.patch = hp->patch;
    bp.merge = hp->merge;
    int64_t *kept = fr_xmalloc(sizeof(int64_t) * (size_t)f->n_tok);
    int64_t k = fr_vision_bg_select(px->data, px->n_patches, px->patch_dim, px->grid_t,
                                    px->grid_h, px->grid_w, &bp, kept, NULL, e);
    if (k < 0) {
        free(kept);
        return -1;
    }
    if (k < f->n_tok) {
        f->own_bg = fr_xcalloc((size_t)f->n_tok, 1);
        for (int64_t i = 0; i < k; i++) f->own_bg[kept[i]] = 1;
        f->n_rows = k;
    }
    free(kept);
    return 0;
}

/* The vision stage's stop check: the request's own, then the stage's time limit. */
typedef struct stage_stop {
    const fr_cancel *outer;
    double deadline; /* fr_time_s(); 0 = none */
} stage_stop;

static fr_cancel_reason stage_stop_check(void *ctx) {
    const stage_stop *s = ctx;
    fr_cancel_reason r = fr_cancel_check(s->outer);
    if (r == FR_CANCEL_NONE && s->deadline > 0 && fr_time_s() > s->deadline) r = FR_CANCEL_TIMEOUT;
    return r;
}

/* Decode (alpha dropped, EXIF orientation applied, as PIL), preprocess and encode one image
 * (cfg: the request's processor settings; stop: polled by the tower). */
static int encode_image(fr_vlm *v, const fr_api_image *im, const fr_vl_proc_cfg *cfg,
                        const fr_cancel *stop, img_feat *f, fr_api_error *err) {
    fr_err e = {0};
    fr_image rgb = {0};
    fr_vl_pixels px = {0};
    int rc = -1;
    if (fr_img_decode_flags(im->data, im->len, im->mime[0] ? im->mime : NULL, NULL, 3,
                            FR_IMG_DECODE_ALPHA_DROP, &rgb, &e) ||
        fr_vl_preprocess(&rgb, cfg, &px, &e)) {
        if (e.code == FR_ERR_INTERNAL) e.code = FR_ERR_BAD_REQUEST; /* a decoder's complaint */
        image_fail(err, &e, im->param);
        goto out;
    }
    f->grid[0] = px.grid_t, f->grid[1] = px.grid_h, f->grid[2] = px.grid_w;
    f->n_tok = fr_vision_n_tokens(&v->m->vision->hp, f->grid, 1);
    if (f->n_tok < 1) {
        fr_err_setc(&e, FR_ERR_TOO_LARGE, "grid %dx%dx%d is beyond the vision tower's limits",
                    f->grid[0], f->grid[1], f->grid[2]);
        image_fail(err, &e, im->param);
        goto out;
    }
    f->n_rows = f->n_tok;
    if (v->bg_drop && background(v, &px, f, &e)) {
        image_fail(err, &e, im->param);
        goto out;
    }
    f->own = fr_xmalloc(sizeof(float) * (size_t)f->n_rows * (size_t)v->m->vision->hp.out_hidden);
    int vrc;
    if (v->cv) { /* the CUDA tower (one request at a time), the same kept units */
        pthread_mutex_lock(&v->cv_mu);
        vrc = fr_cuda_vision_forward_kept(v->cv, px.data, px.n_patches, f->grid, 1, f->own_bg,
                                          f->own, &e);
        pthread_mutex_unlock(&v->cv_mu);
    } else {
        vrc = fr_vision_forward_kept(v->m, NULL, px.data, px.n_patches, f->grid, 1, f->own_bg,
                                     stop, f->own, &e);
    }
    if (vrc) {
        image_fail(err, &e, im->param);
        goto out;
    }
    rc = 0;
out:
    fr_image_free(&rgb);
    fr_vl_pixels_free(&px);
    return rc;
}

/* Features of every image: the cache, else computed and put there. */
static int image_features(fr_vlm *v, const fr_api_image *images, int n_images,
                          const fr_vl_proc_cfg *cfg, const fr_cancel *stop, img_feat *f,
                          int *hits, fr_api_error *err) {
    fr_err e = {0};
    for (int i = 0; i < n_images; i++) {
        /* the image stage's header checks (declared type, limits) also for a cached image */
        fr_img_info info;
        if (fr_img_probe(images[i].data, images[i].len,
                         images[i].mime[0] ? images[i].mime : NULL, NULL, &info, &e)) {
            if (e.code == FR_ERR_INTERNAL) e.code = FR_ERR_BAD_REQUEST;
            return image_fail(err, &e, images[i].param);
        }
        fr_vision_key key;
        bool keyed = v->cache && !fr_vision_key_make(&key, images[i].data, images[i].len,
                                                     cfg->min_pixels, cfg->max_pixels, &e);
        if (keyed && (f[i].hit = fr_vision_cache_get(v->cache, &key))) {
            f[i].n_tok = f[i].hit->n_all;
            f[i].n_rows = f[i].hit->n;
            for (int k = 0; k < 3; k++) f[i].grid[k] = f[i].hit->grid_thw[k];
            (*hits)++;
            continue;
        }
        if (encode_image(v, &images[i], cfg, stop, &f[i], err)) return -1;
        int g[3] = {f[i].grid[0], f[i].grid[1], f[i].grid[2]};
        if (keyed && fr_vision_cache_put_kept(v->cache, &key, f[i].own, f[i].n_rows,
                                              v->m->vision->hp.out_hidden, g, f[i].own_bg,
                                              f[i].n_tok, &e) < 0)
            fr_warn("vision: encoder cache: %s", e.msg); /* the request goes on uncached */
    }
    return 0;
}

/* The question's embeddings: the prompt's tokens after the last image (q_ids), weight 0 for
 * special tokens and stop words. *m_out rows of (m, n_embd) into *q (malloc'd), weights into
 * *w. */
static void question(const fr_model *m, const int32_t *ids, size_t n, float **q, float **w,
                     int64_t *m_out) {
    size_t start = n;
    for (size_t i = n; i-- > 0;)
        if (ids[i] == m->hp.image_token_id || ids[i] == m->hp.vision_end_id) {
            start = i + 1;
            break;
        }
    int64_t k = (int64_t)(n - start);
    *m_out = k;
    *q = k ? fr_xmalloc(sizeof(float) * (size_t)k * (size_t)m->hp.n_embd) : NULL;
    *w = k ? fr_xmalloc(sizeof(float) * (size_t)k) : NULL;
    if (!k) return;
    fr_ref_embed(*q, &m->w.tok_embd, ids + start, (int)k);
    for (int64_t i = 0; i < k; i++) {
        size_t len = 0;
        const char *piece = fr_token_data(m->tok, ids[start + i], &len);
        bool special = piece && len >= 2 && piece[0] == '<' && piece[1] == '|';
        (*w)[i] = !piece || special || fr_vision_prune_is_stopword(piece, len) ? 0.0f : 1.0f;
    }
}

/* Which image tokens stay: keep[i] for each of the n_img_tok image tokens in prompt order. The
 * background units dropped before the tower are out; pruning chooses among the others (ratio and
 * budget count those). */
static int choose_kept(const fr_vlm *v, const img_feat *f, int n_images, const int32_t *ids,
                       size_t n, const fr_vlm_opts *o, uint8_t *keep,
                       int64_t *n_kept, fr_api_error *err) {
    int64_t total = 0, rows = 0;
    for (int i = 0; i < n_images; i++) {
        const uint8_t *bg = feat_bg(&f[i]);
        for (int64_t u = 0; u < f[i].n_tok; u++) keep[total + u] = bg ? bg[u] : 1;
        total += f[i].n_tok;
        rows += f[i].n_rows;
    }
    *n_kept = rows;
    bool prune = o->keep_ratio < 1 || (o->max_image_tokens > 0 && o->max_image_tokens < rows);
    if (!prune) return 0;
    fr_err e = {0};
    fr_vision_prune_params pp = fr_vision_prune_default_params();
    pp.keep_ratio = o->keep_ratio;
    pp.max_image_tokens = o->max_image_tokens > 0 ? o->max_image_tokens
                                                  : FR_VISION_PRUNE_NO_BUDGET;
    int64_t *n_tok = fr_xmalloc(sizeof(int64_t) * (size_t)n_images);
    int64_t *k_img = fr_xmalloc(sizeof(int64_t) * (size_t)n_images);
    for (int i = 0; i < n_images; i++) n_tok[i] = f[i].n_rows;
    float *q = NULL, *qw = NULL;
    int64_t m = 0, *kept = NULL;
    int rc = -1;
    if (fr_vision_prune_keep_counts(n_tok, n_images, &pp, k_img, &e)) goto bad;
    question(v->m, ids, n, &q, &qw, &m);
    kept = fr_xmalloc(sizeof(int64_t) * (size_t)total);
    memset(keep, 0, (size_t)total);
    *n_kept = 0;
    int64_t base = 0;
    for (int i = 0; i < n_images; i++) {
        int64_t nt = f[i].n_rows;
        fr_vision_prune_params pi = pp;
        pi.keep_ratio = 1.0;
        pi.max_image_tokens = k_img[i];
        fr_vision_prune_input in = {.feat = feat_rows(&f[i]), .n = nt,
                                    .d = v->m->vision->hp.out_hidden, .pos = NULL,
                                    .query = q, .query_w = qw, .m = m};
        int64_t k = fr_vision_prune_select(&in, &pi, kept, NULL, NULL, NULL, &e);
        if (k < 0) goto bad;
        const uint8_t *bg = feat_bg(&f[i]);
        if (!bg) {
            for (int64_t j = 0; j < k; j++) keep[base + kept[j]] = 1;
        } else { /* row r is the image's r-th token with a row */
            int64_t r = 0, j = 0;
            for (int64_t u = 0; u < f[i].n_tok && j < k; u++)
                if (bg[u] && r++ == kept[j]) keep[base + u] = 1, j++;
        }
        *n_kept += k;
        base += f[i].n_tok;
    }
    rc = 0;
    goto out;
bad:
    fr_err_prefix(&e, "pruning");
    fr_api_error_from_err(err, &e, e.code == FR_ERR_BAD_REQUEST ? "invalid_image_input" : NULL,
                          NULL);
out:
    free(n_tok);
    free(k_img);
    free(q);
    free(qw);
    free(kept);
    return rc;
}

/* The expanded prompt with the dropped image tokens taken out: ids, positions, rows. */
static void assemble(const fr_vlm *v, const img_feat *f, int n_images, const int32_t *ids,
                     size_t n, const int32_t *rpos, const uint8_t *keep, int64_t n_kept,
                     fr_vlm_prompt *out) {
    const int E = v->m->vision->hp.out_hidden;
    int64_t total = 0;
    for (int i = 0; i < n_images; i++) total += f[i].n_tok;
    size_t n_out = n - (size_t)(total - n_kept);
    out->ids = fr_xmalloc(sizeof(int32_t) * n_out);
    out->rope_pos = fr_xmalloc(sizeof(int32_t) * 3 * n_out);
    out->embd = fr_xmalloc(sizeof(float) * (size_t)(n_kept ? n_kept : 1) * (size_t)E);
    size_t o = 0;
    int64_t tok = 0, row = 0;
    int img = 0;
    int64_t in_img = 0, in_row = 0; /* token index and feature row within image img */
    for (size_t i = 0; i < n; i++) {
        bool is_img = ids[i] == v->m->hp.image_token_id;
        if (is_img) {
            bool k = keep[tok++];
            const uint8_t *bg = feat_bg(&f[img]);
            if (k) {
                memcpy(out->embd + (size_t)row * E, feat_rows(&f[img]) + (size_t)in_row * E,
                       sizeof(float) * (size_t)E);
                row++;
            }
            if (!bg || bg[in_img]) in_row++;
            if (++in_img == f[img].n_tok) img++, in_img = 0, in_row = 0;
            if (!k) continue;
        }
        out->ids[o] = ids[i];
        for (int r = 0; r < 3; r++) out->rope_pos[(size_t)r * n_out + o] = rpos[(size_t)r * n + i];
        o++;
    }
    FR_ASSERT(o == n_out && row == n_kept);
    out->n = n_out;
    out->n_rows = (int)n_kept;
    out->image_tokens = total;
    out->image_tokens_kept = n_kept;
}

int fr_vlm_prepare(fr_vlm *v, const int32_t *raw, size_t n_raw, const fr_api_image *images,
                   int n_images, const fr_vlm_opts *opts, fr_meter *meter, fr_meter_req *mreq,
                   fr_vlm_prompt *out, fr_api_error *err) {
    memset(out, 0, sizeof *out);
    const fr_model *m = v->m;
    fr_err e = {0};
    fr_vl_proc_cfg cfg = v->proc;
    fr_vl_proc_override ov = {.min_pixels = opts->min_pixels, .max_pixels = opts->max_pixels};
    if (fr_vl_proc_cfg_apply(&cfg, &ov, &e)) {
        fr_api_error_from_err(err, &e, "invalid_image_input", "mm_processor_kwargs");
        return -1;
    }
    int n_ph = 0;
    for (size_t i = 0; i < n_raw; i++) n_ph += raw[i] == m->hp.image_token_id;
    if (n_ph != n_images) {
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_image_input", "messages",
                         "the rendered prompt holds %d image placeholders for %d images (the "
                         "text must not contain the image token)", n_ph, n_images);
        return -1;
    }
    double t0 = fr_time_s();
    int mdev = v->cv ? fr_meter_dev_gpu(v->cv_dev) : FR_METER_DEV_CPU;
    fr_meter_step *st =
        meter && mreq ? fr_meter_stage_begin(meter, mreq, FR_MSTAGE_VISION, mdev) : NULL;
    img_feat *f = fr_xcalloc((size_t)n_images + 1, sizeof *f);
    int32_t *grid = fr_xcalloc((size_t)n_images * 3 + 1, sizeof(int32_t));
    int32_t *ids = NULL, *rpos = NULL;
    uint8_t *keep = NULL;
    size_t n = 0;
    int rc = -1;
    stage_stop ss = {opts->cancel, opts->time_limit_s > 0 ? t0 + opts->time_limit_s : 0};
    fr_cancel stop = {stage_stop_check, &ss};
    if (image_features(v, images, n_images, &cfg, &stop, f, &out->cache_hits, err)) goto out;
    for (int i = 0; i < n_images; i++)
        for (int k = 0; k < 3; k++) grid[3 * i + k] = f[i].grid[k];
    if (fr_vl_expand_pads(raw, n_raw, m->hp.image_token_id, grid, n_images, m->vision->hp.merge,
                          (size_t)INT32_MAX / 4, &ids, &n, &e)) {
        fr_api_error_from_err(err, &e, "invalid_image_input", "messages");
        goto out;
    }
    rpos = fr_xmalloc(sizeof(int32_t) * 3 * n);
    int32_t delta;
    if (fr_vl_rope_index(ids, n, m->hp.image_token_id, grid, n_images, m->vision->hp.merge,
                         rpos, &delta, &e)) {
        fr_api_error_from_err(err, &e, "invalid_image_input", "messages");
        goto out;
    }
    int64_t total = 0, kept = 0;
    for (int i = 0; i < n_images; i++) total += f[i].n_tok;
    keep = fr_xmalloc((size_t)total + 1);
    if (choose_kept(v, f, n_images, ids, n, opts, keep, &kept, err)) goto out;
    assemble(v, f, n_images, ids, n, rpos, keep, kept, out);
    out->n_images = n_images;
    rc = 0;
out:
    if (st) fr_meter_step_end(meter, st);
    out->vision_s = fr_time_s() - t0;
    for (int i = 0; i < n_images; i++) img_feat_free(&f[i]);
    free(f);
    free(grid);
    free(ids);
    free(rpos);
    free(keep);
    if (rc) fr_vlm_prompt_free(out);
    return rc;
}
