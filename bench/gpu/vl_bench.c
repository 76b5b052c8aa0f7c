/* vl_bench.c — gpu-vl-bench: frugal's side of the Qwen2.5-VL benchmark (bench/gpu/vl_bench.sh
 * runs it after HF's side, bench/gpu/vl_hf.py, on the same saved weights).
 *
 *   gpu-vl-bench MODEL_DIR IMG_448 IMG_896 IMG_1344 OUT.csv [PROMPT]
 *
 * One process holds the model: the vision tower (cuda_vision.h) and the text decoder
 * (cuda_backend.h) are uploaded once, as a server holds them, and every figure is a request's
 * path through them on the host's own clock (cudaStreamSynchronize inside the calls):
 *   vit      fr_cuda_vision_forward of one image's pixel values (plan, pixel upload, tower,
 *            features back), mean of 5 after a warm-up, per resolution, with its patch and token
 *            counts; vit_rgb the same from the 8-bit image (fr_cuda_vision_forward_rgb: the
 *            processor's rescale / normalise / patchify on the device);
 *   ttft     one request from the image file's bytes to the first sampled token: decode (image
 *            stage), HF-equal preprocessing (on the device when the image is at its processor
 *            size, else vlproc on the host), encoder-cache lookup, the tower, the chat
 *            template + pads + M-RoPE positions, pruning (query-guided, stages/vision/prune.h) or
 *            plain downsampling (pooling, the baseline) to the kept count, the prefill of the
 *            whole prompt in one batch with on-device greedy sampling; median of 3 after a
 *            warm-up; split into its parts (pre = decode + preprocessing, vit, prune, prefill);
 *   cache    the same request when the encoder cache holds the image (no decode, no tower);
 *   prefix   the same request when, besides, the K/V of the prompt up to the image's end are
 *            still in the sequence's blocks, keyed by the image bytes' hash, the keep ratio and
 *            the question (what a KV prefix cache whose keys include the image hash gives):
 *            only the text after the image is prefilled;
 *   decode   64 greedy tokens after the 896 prompt (M-RoPE decode steps, CUDA graphs): tok/s;
 *   joules   NVML energy of one whole request (896, 100 % kept, 64 tokens), when NVML reads.
 * Lines "csv,frugal,<metric>,<res>,<keep>,<tokens>,<value>,<unit>" go to OUT.csv and stdout; the
 * script joins them with HF's rows into one table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>

#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_vision.h"
#include "base/base.h"
#include "meter/sources.h"
#include "model/chat.h"
#include "model/model.h"
#include "model/mrope.h"
#include "model/tokenizer.h"
#include "model/vision.h"
#include "stages/image/image.h"
#include "stages/image/vlproc.h"
#include "stages/vision/cache.h"
#include "stages/vision/prune.h"

#define MAX_TOK 4096
#define N_DECODE 64

static FILE *csv;
static void row(const char *metric, int res, double keep, long long tokens, double v,
                const char *unit) {
    char line[256];
    snprintf(line, sizeof line, "csv,frugal,%s,%d,%.2f,%lld,%.4f,%s", metric, res, keep, tokens, v,
             unit);
    printf("%s\n", line);
    if (csv) fprintf(csv, "%s\n", line);
    fflush(stdout);
}

typedef struct bench {
    fr_model *m;
    fr_cuda_vision *cv;
    fr_cuda *dec;
    fr_vl_proc_cfg proc;
    float lut[3 * 256];  /* the processor's value table (fr_vl_proc_lut) */
    fr_vision_cache *cache;
    fr_seq seq;
    int32_t *raw;        /* the rendered prompt's ids with one image placeholder */
    size_t n_raw;
    size_t img_at;       /* row of the image placeholder in raw (= the image's first row) */
    float *q, *qw;       /* the question's embeddings (m, E) and weights, for pruning */
    int64_t nq;
    float *embd;         /* (MAX_TOK, E) pinned: the batch's image rows, written in place */
    float *tmp;          /* (MAX_TOK, E) downsampling output */
    uint8_t pfx_digest[32]; /* SHA-256 of the image whose prompt prefix the sequence's K/V hold */
    int32_t pfx_grid[3]; /* and its grid, keep ratio, mode, prefix length (0: none), kept count, */
    double pfx_keep;     /* kept positions */
    int pfx_mode;
    size_t pfx_len;
    int64_t pfx_kept;
    int32_t *pfx_pos;    /* (3, MAX_TOK) */
    fr_nvml *nvml;
} bench;

typedef struct parts {
    double pre, vit, prune, prefill, total; /* ms */
    int64_t n_tok, n_kept;
    int first;
} parts;

static int die(const char *what, const fr_err *e) {
    fprintf(stderr, "gpu-vl-bench: %s: %s\n", what, e->msg);
    return 1;
}

/* The chat-template prompt of one user message holding one image and then the question. */
static int make_prompt(bench *b, const char *question, fr_err *e) {
    const fr_model *m = b->m;
    if (!m->chat_template) {
        fr_err_set(e, "%s has no chat template", m->path);
        return -1;
    }
    cJSON *msgs = cJSON_CreateArray(), *msg = cJSON_CreateObject(), *cont = cJSON_CreateArray();
    cJSON_AddItemToArray(msgs, msg);
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddItemToObject(msg, "content", cont);
    cJSON *im = cJSON_CreateObject();
    cJSON_AddStringToObject(im, "type", "image");
    cJSON_AddItemToArray(cont, im);
    cJSON *tx = cJSON_CreateObject();
    cJSON_AddStringToObject(tx, "type", "text");
    cJSON_AddStringToObject(tx, "text", question);
    cJSON_AddItemToArray(cont, tx);
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "", .tools = NULL};
    char *r = fr_chat_render(m->chat_template, msgs, &co, e);
    cJSON_Delete(msgs);
    if (!r) return -1;
    int rc = fr_tokenize(m->tok, r, strlen(r), false, &b->raw, &b->n_raw, e);
    free(r);
    if (rc) return -1;
    b->img_at = 0;
    while (b->img_at < b->n_raw && b->raw[b->img_at] != m->hp.image_token_id) b->img_at++;
    if (b->img_at == b->n_raw) {
        fr_err_set(e, "the rendered prompt has no image placeholder");
        return -1;
    }
    /* the question's embeddings (as the API's pruning query: special tokens and stop words 0) */
    int32_t *ids = NULL;
    size_t n = 0;
    if (fr_tokenize(m->tok, question, strlen(question), false, &ids, &n, e)) return -1;
    const int E = m->hp.n_embd;
    b->q = malloc(n * (size_t)E * 4);
    b->qw = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        fr_cpu_dequantize_row(m->w.tok_embd.dtype, fr_cpu_row_ptr(&m->w.tok_embd, ids[i]),
                              b->q + i * E, E);
        size_t len = 0;
        const char *piece = fr_token_data(m->tok, ids[i], &len);
        b->qw[i] = fr_tokenizer_is_special(m->tok, ids[i]) || !piece ||
                           fr_vision_prune_is_stopword(piece, len)
                       ? 0.f
                       : 1.f;
    }
    b->nq = (int64_t)n;
    free(ids);
    return 0;
}

/* Features of one image (n_tok, E) into dst (pinned rows of the batch's embd) and its grid:
 * from the cache when use_cache and it holds the bytes, else decoded, preprocessed and encoded
 * (and put in the cache when use_cache). 0, or -1 with e. */
static int features(bench *b, const fr_buf *img, int use_cache, float *dst, int32_t grid[3],
                    int64_t *n_tok, parts *p, fr_err *e) {
    const int E = b->m->hp.n_embd;
    const double t0 = fr_time_s();
    fr_vision_key key;
    if (use_cache) {
        if (fr_vision_key_make(&key, img->data, img->len, b->proc.min_pixels, b->proc.max_pixels, e))
            return -1;
        const fr_vision_entry *hit = fr_vision_cache_get(b->cache, &key);
        if (hit) {
            if (hit->n > MAX_TOK) {
                fr_vision_entry_release(hit);
                fr_err_set(e, "cached image of %lld tokens", (long long)hit->n);
                return -1;
            }
            memcpy(dst, hit->feat, (size_t)hit->n * E * 4);
            for (int k = 0; k < 3; k++) grid[k] = hit->grid_thw[k];
            *n_tok = hit->n;
            fr_vision_entry_release(hit);
            p->pre = (fr_time_s() - t0) * 1e3;
            return 0;
        }
    }
    fr_image rgb = {0};
    fr_vl_pixels px = {0};
    if (fr_img_decode_flags((const uint8_t *)img->data, img->len, NULL, NULL, 3,
                            FR_IMG_DECODE_ALPHA_DROP, &rgb, e))
        return -1;
    /* at its processor size already: rescale / normalise / patchify on the device
     * (fr_cuda_vision_forward_rgb, the processor's own table); else the host preprocessing */
    const int P = b->proc.patch, f = P * b->proc.merge;
    int64_t rh = 0, rw = 0;
    const bool direct = rgb.channels == 3 &&
                        fr_vl_smart_resize(rgb.height, rgb.width, f, b->proc.min_pixels,
                                           b->proc.max_pixels, &rh, &rw, e) == 0 &&
                        rh == rgb.height && rw == rgb.width;
    if (direct) {
        grid[0] = 1, grid[1] = (int32_t)(rh / P), grid[2] = (int32_t)(rw / P);
    } else if (fr_vl_preprocess(&rgb, &b->proc, &px, e)) {
        fr_image_free(&rgb);
        return -1;
    } else {
        grid[0] = px.grid_t, grid[1] = px.grid_h, grid[2] = px.grid_w;
    }
    *n_tok = fr_vl_image_tokens(grid, b->m->vision->hp.merge);
    const double t1 = fr_time_s();
    p->pre = (t1 - t0) * 1e3;
    int rc = -1;
    if (*n_tok < 1 || *n_tok > MAX_TOK)
        fr_err_set(e, "image of %lld tokens", (long long)*n_tok);
    else if (direct)
        rc = fr_cuda_vision_forward_rgb(b->cv, rgb.pix, (int)rh, (int)rw, b->lut, dst, e);
    else
        rc = fr_cuda_vision_forward(b->cv, px.data, px.n_patches, grid, 1, dst, e);
    p->vit = (fr_time_s() - t1) * 1e3;
    fr_image_free(&rgb);
    fr_vl_pixels_free(&px);
    if (rc) return -1;
    if (use_cache) {
        int g[3] = {grid[0], grid[1], grid[2]};
        if (fr_vision_cache_put(b->cache, &key, dst, *n_tok, E, g, e) < 0) return -1;
    }
    return 0;
}

/* One request to its first token. mode 0: prune to keep (ratio), 1: downsample (pool) to the
 * same count. use_cache 0: no cache; 1: the encoder cache; 2: also the KV of the prompt's prefix
 * up to the image's end when the previous request had the same image, question and kept set
 * (its K/V are still in the sequence's blocks: only the text after the image is prefilled).
 * Leaves the sequence prefilled (b->seq, n_pos = prompt) with *rd the rope delta and p->first
 * the first token. The image rows go straight into the pinned embd rows of the batch. */
static int request(bench *b, const fr_buf *img, double keep, int mode, int use_cache, parts *p,
                   int32_t *rd, fr_err *e) {
    const fr_model *m = b->m;
    const int E = m->hp.n_embd, merge = m->vision->hp.merge, img_tok = m->hp.image_token_id;
    memset(p, 0, sizeof *p);
    const double t0 = fr_time_s();
    const size_t at = b->img_at; /* the image's first row (the template's text before it) */
    float *rows = b->embd + at * E;
    int32_t grid[3];
    int64_t nt = 0;
    /* the prefix K/V are keyed by the image bytes' hash (as the encoder cache), the keep ratio
     * and the mode (one question in this program) */
    uint8_t dg[32];
    if (fr_vision_sha256(img->data, img->len, dg, e)) return -1;
    const bool prefix = use_cache == 2 && b->pfx_len > 0 && !memcmp(dg, b->pfx_digest, 32) &&
                        b->pfx_keep == keep && b->pfx_mode == mode;
    if (prefix) { /* a prefix hit needs only the grid: no features, no tower */
        memcpy(grid, b->pfx_grid, sizeof b->pfx_grid);
        nt = fr_vl_image_tokens(grid, merge);
        p->pre = (fr_time_s() - t0) * 1e3;
    } else if (features(b, img, use_cache != 0, rows, grid, &nt, p, e)) {
        return -1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = -1;
    int32_t *rpos = NULL, *kpos = NULL, *ipos = NULL, *cid = NULL, *crp = NULL, *pos = NULL;
    int64_t *kept = NULL;
    fr_seq **sp = NULL;
    uint8_t *use = NULL, *want = NULL;
    if (fr_vl_expand_pads(b->raw, b->n_raw, img_tok, grid, 1, merge, MAX_TOK, &ids, &n, e)) goto out;
    rpos = malloc(3 * n * 4);
    int32_t delta;
    if (fr_vl_rope_index(ids, n, img_tok, grid, 1, merge, rpos, &delta, e)) goto out;
    if (ids[at] != img_tok) {
        fr_err_set(e, "the image does not start at row %zu", at);
        goto out;
    }
    const double tp = fr_time_s();
    fr_vision_prune_params pp = fr_vision_prune_default_params();
    pp.keep_ratio = keep;
    int64_t k = fr_vision_prune_keep_count(nt, &pp, e);
    if (k < 1) goto out;
    kpos = malloc(3 * (size_t)nt * 4);
    ipos = malloc(3 * (size_t)nt * 4); /* the image's positions (3, nt) */
    for (int r = 0; r < 3; r++)
        for (int64_t i = 0; i < nt; i++) ipos[r * nt + i] = rpos[r * n + at + (size_t)i];
    if (prefix) {
        k = b->pfx_kept; /* the kept set is in the cached K/V; only its count matters here */
        memcpy(kpos, b->pfx_pos, 3 * (size_t)k * 4);
    } else if (k == nt) {
        memcpy(kpos, ipos, 3 * (size_t)nt * 4);
    } else if (mode == 0) {
        kept = malloc((size_t)nt * sizeof *kept);
        fr_vision_prune_input in = {.feat = rows, .n = nt, .d = E, .pos = ipos, .query = b->q,
                                    .query_w = b->qw, .m = b->nq};
        k = fr_vision_prune_select(&in, &pp, kept, kpos, NULL, NULL, e);
        for (int64_t j = 0; j < k; j++) /* compact in place: kept[j] >= j */
            if (kept[j] != j) memcpy(rows + (size_t)j * E, rows + (size_t)kept[j] * E, (size_t)E * 4);
    } else {
        k = fr_vision_downsample_pool(rows, E, ipos, grid[0], grid[1] / merge, grid[2] / merge, k,
                                      b->tmp, kpos, e);
        if (k > 0) memcpy(rows, b->tmp, (size_t)k * E * 4);
    }
    if (k < 1) goto out;
    /* the pruned prompt: text rows as they are, the image run shrunk to the k kept tokens */
    const size_t n2 = n - (size_t)nt + (size_t)k;
    cid = malloc(n2 * 4);
    crp = malloc(3 * n2 * 4);
    use = calloc(n2, 1);
    for (size_t i = 0, o = 0; i < n; i++) {
        if (i == at) {
            for (int64_t j = 0; j < k; j++, o++) {
                cid[o] = img_tok, use[o] = 1;
                for (int r = 0; r < 3; r++) crp[r * n2 + o] = kpos[r * k + j];
            }
            i += (size_t)nt - 1;
            continue;
        }
        cid[o] = ids[i];
        for (int r = 0; r < 3; r++) crp[r * n2 + o] = rpos[r * n + i];
        o++;
    }
    int32_t top = 0;
    for (size_t i = 0; i < 3 * n2; i++) top = crp[i] > top ? crp[i] : top;
    *rd = top + 1 - (int32_t)n2;
    p->prune = (fr_time_s() - tp) * 1e3;
    /* prefill rows [s0, n2): all of them, or after the cached prefix (the image and the token
     * closing it); greedy first token on the device */
    const double tf = fr_time_s();
    const size_t s0 = prefix ? b->pfx_len : 0, nb = n2 - s0;
    b->seq.n_pos = (int)s0;
    pos = malloc(nb * 4);
    sp = malloc(nb * sizeof *sp);
    want = calloc(nb, 1);
    int32_t *brp = malloc(3 * nb * 4);
    for (size_t i = 0; i < nb; i++) pos[i] = (int32_t)(s0 + i), sp[i] = &b->seq;
    for (int r = 0; r < 3; r++) memcpy(brp + r * nb, crp + r * n2 + s0, nb * 4);
    want[nb - 1] = 1;
    fr_batch bt = {.n_tokens = (int)nb, .tokens = cid + s0, .pos = pos, .seqs = sp, .logits = want,
                   .embd = s0 ? NULL : b->embd, .embd_use = s0 ? NULL : use, .rope_pos = brp};
    fr_sampling g;
    memset(&g, 0, sizeof g);
    int32_t first = -1;
    rc = fr_cuda_forward_sample(b->dec, &bt, &g, 1, NULL, &first, NULL, e);
    free(brp);
    p->prefill = (fr_time_s() - tf) * 1e3;
    p->total = (fr_time_s() - t0) * 1e3;
    p->n_tok = nt, p->n_kept = k, p->first = first;
    if (rc == 0) { /* what the sequence's blocks now hold: the prefix a next request may reuse */
        memcpy(b->pfx_digest, dg, 32);
        memcpy(b->pfx_grid, grid, sizeof b->pfx_grid);
        b->pfx_keep = keep, b->pfx_mode = mode;
        b->pfx_len = at + (size_t)k + 1, b->pfx_kept = k;
        memcpy(b->pfx_pos, kpos, 3 * (size_t)k * 4);
    } else {
        b->pfx_len = 0;
    }
out:
    free(ids), free(rpos), free(kpos), free(ipos), free(kept), free(cid), free(crp), free(use);
    free(pos), free(sp), free(want);
    return rc;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over 3 timed requests after one warm-up (parts of the median request). */
static int ttft(bench *b, const fr_buf *img, double keep, int mode, int use_cache, parts *out,
                fr_err *e) {
    parts p[4];
    int32_t rd;
    for (int i = 0; i < 4; i++)
        if (request(b, img, keep, mode, use_cache, &p[i], &rd, e)) return -1;
    double t[3] = {p[1].total, p[2].total, p[3].total};
    qsort(t, 3, sizeof t[0], cmp_d);
    for (int i = 1; i < 4; i++)
        if (p[i].total == t[1]) *out = p[i];
    return 0;
}

static double joules(bench *b) {
    if (!b->nvml) return NAN;
    fr_nvml_reading r;
    fr_nvml_read(b->nvml, 0, &r);
    return r.energy_rc == FR_NVML_SUCCESS ? (double)r.energy_mj / 1000.0 : NAN;
}

/* N_DECODE greedy steps after a prefilled request (rope position = KV position + delta). */
static int decode(bench *b, int32_t first, int32_t delta, double *tok_s, fr_err *e) {
    int32_t t = first;
    fr_sampling g;
    memset(&g, 0, sizeof g);
    const double t0 = fr_time_s();
    for (int i = 0; i < N_DECODE; i++) {
        int32_t p = b->seq.n_pos, r3[3] = {p + delta, p + delta, p + delta}, id = -1;
        fr_seq *sp = &b->seq;
        uint8_t w = 1;
        fr_batch bt = {.n_tokens = 1, .tokens = &t, .pos = &p, .seqs = &sp, .logits = &w,
                       .rope_pos = r3};
        if (fr_cuda_forward_sample(b->dec, &bt, &g, 1, NULL, &id, NULL, e)) return -1;
        t = id;
    }
    *tok_s = N_DECODE / (fr_time_s() - t0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("frugal CUDA tools (sm_90)\n");
        return 0;
    }
    if (argc < 6) {
        fprintf(stderr, "usage: gpu-vl-bench MODEL_DIR IMG_448 IMG_896 IMG_1344 OUT.csv [PROMPT]\n");
        return 2;
    }
    const char *question = argc > 6 ? argv[6] : "What is written on the sign in this picture?";
    fr_log_level = FR_LOG_WARN;
    if (fr_cuda_device_count() <= 0) {
        fprintf(stderr, "gpu-vl-bench: no CUDA device\n");
        return 1;
    }
    csv = fopen(argv[5], "a");
    bench b;
    memset(&b, 0, sizeof b);
    fr_err e = {0};
    double t0 = fr_time_s();
    if (!(b.m = fr_model_load(argv[1], &e))) return die("load", &e);
    if (!b.m->vision) {
        fr_err_set(&e, "%s has no vision tower", argv[1]);
        return die("load", &e);
    }
    row("load_s", 0, 0, 0, fr_time_s() - t0, "s");
    t0 = fr_time_s();
    if (!(b.cv = fr_cuda_vision_new(b.m, 0, &e))) return die("vision tower", &e);
    fr_cuda_config cfg = fr_cuda_config_default();
    cfg.max_tokens = MAX_TOK;
    cfg.max_seqs = 1;
    cfg.max_ctx = MAX_TOK + N_DECODE + 16;
    cfg.kv_bytes = (size_t)2 << 30;
    if (!(b.dec = fr_cuda_new(b.m, &cfg, &e))) return die("decoder", &e);
    row("upload_s", 0, 0, 0, fr_time_s() - t0, "s");
    printf("device: %s\n", fr_cuda_device_name(b.dec));
    if (fr_vl_proc_cfg_load(argv[1], &b.proc, &e)) return die("processor config", &e);
    fr_vl_proc_lut(&b.proc, b.lut);
    if (!(b.cache = fr_vision_cache_new((size_t)1 << 30, &e))) return die("cache", &e);
    fr_cuda_mem mi;
    fr_cuda_mem_info(b.dec, &mi);
    b.seq.n_blocks = b.seq.cap_blocks = (cfg.max_ctx + 15) / 16;
    if (b.seq.n_blocks >= mi.kv_blocks) {
        fr_err_set(&e, "KV pool of %d blocks too small", mi.kv_blocks);
        return die("kv", &e);
    }
    b.seq.blocks = malloc((size_t)b.seq.n_blocks * sizeof(int));
    for (int i = 0; i < b.seq.n_blocks; i++) b.seq.blocks[i] = i + 1;
    if (make_prompt(&b, question, &e)) return die("prompt", &e);
    if (cudaMallocHost((void **)&b.embd, (size_t)MAX_TOK * b.m->hp.n_embd * 4) != cudaSuccess) {
        fr_err_set(&e, "cannot allocate %d pinned rows", MAX_TOK);
        return die("embd", &e);
    }
    b.tmp = malloc((size_t)MAX_TOK * b.m->hp.n_embd * 4);
    b.pfx_pos = malloc(3 * (size_t)MAX_TOK * 4);
    char why[256];
    b.nvml = fr_nvml_open("libnvidia-ml.so.1", why, sizeof why);
    if (!b.nvml) fprintf(stderr, "gpu-vl-bench: NVML: %s (no joules)\n", why);

    const int res[3] = {448, 896, 1344};
    fr_buf img[3];
    for (int r = 0; r < 3; r++) {
        memset(&img[r], 0, sizeof img[r]);
        size_t len = 0;
        char *d = fr_read_file(argv[2 + r], (size_t)64 << 20, &len, &e);
        if (!d) return die(argv[2 + r], &e);
        img[r].data = d, img[r].len = len;
    }
    /* 1. the tower alone per resolution */
    for (int r = 0; r < 3; r++) {
        fr_image rgb = {0};
        fr_vl_pixels px = {0};
        if (fr_img_decode_flags((const uint8_t *)img[r].data, img[r].len, NULL, NULL, 3, FR_IMG_DECODE_ALPHA_DROP,
                                &rgb, &e) || fr_vl_preprocess(&rgb, &b.proc, &px, &e))
            return die("preprocess", &e);
        const int32_t grid[3] = {px.grid_t, px.grid_h, px.grid_w};
        const int64_t nt = fr_vl_image_tokens(grid, b.m->vision->hp.merge);
        float *out = b.embd; /* pinned, as a request's rows (features back at full speed) */
        double t = 0;
        for (int it = 0; it < 6; it++) {
            const double a = fr_time_s();
            if (fr_cuda_vision_forward(b.cv, px.data, px.n_patches, grid, 1, out, &e))
                return die("vit", &e);
            if (it) t += fr_time_s() - a;
        }
        row("vit_ms", res[r], 1, nt, t / 5 * 1e3, "ms");
        row("vit_patches", res[r], 1, nt, (double)px.n_patches, "patches");
        if (rgb.width % 28 == 0 && rgb.height % 28 == 0) { /* the 8-bit path, device patchify */
            t = 0;
            for (int it = 0; it < 6; it++) {
                const double a = fr_time_s();
                if (fr_cuda_vision_forward_rgb(b.cv, rgb.pix, (int)rgb.height, (int)rgb.width,
                                               b.lut, out, &e))
                    return die("vit rgb", &e);
                if (it) t += fr_time_s() - a;
            }
            row("vit_rgb_ms", res[r], 1, nt, t / 5 * 1e3, "ms");
        }
        fr_image_free(&rgb);
        fr_vl_pixels_free(&px);
    }
    /* 2. TTFT: 100 % at every resolution; pruning and downsampling at 896 */
    for (int r = 0; r < 3; r++) {
        parts p;
        if (ttft(&b, &img[r], 1.0, 0, 0, &p, &e)) return die("ttft", &e);
        row("ttft_ms", res[r], 1, p.n_kept, p.total, "ms");
        row("ttft_pre_ms", res[r], 1, p.n_kept, p.pre, "ms");
        row("ttft_vit_ms", res[r], 1, p.n_kept, p.vit, "ms");
        row("ttft_prefill_ms", res[r], 1, p.n_kept, p.prefill, "ms");
        row("vit_plus_prefill_ms", res[r], 1, p.n_kept, p.vit + p.prefill, "ms");
    }
    const double keeps[3] = {0.5, 0.25, 0.10};
    for (int i = 0; i < 3; i++)
        for (int mode = 0; mode < 2; mode++) {
            parts p;
            if (ttft(&b, &img[1], keeps[i], mode, 0, &p, &e)) return die("ttft", &e);
            const char *nm = mode ? "ttft_downsample_ms" : "ttft_prune_ms";
            row(nm, 896, keeps[i], p.n_kept, p.total, "ms");
            row(mode ? "downsample_ms" : "prune_ms", 896, keeps[i], p.n_kept, p.prune, "ms");
            row(mode ? "ttft_downsample_prefill_ms" : "ttft_prune_prefill_ms", 896, keeps[i],
                p.n_kept, p.prefill, "ms");
        }
    /* 3. encoder cache: a miss fills it, then hits */
    {
        parts p;
        int32_t rd;
        if (request(&b, &img[1], 1.0, 0, 1, &p, &rd, &e)) return die("cache miss", &e);
        row("ttft_cache_miss_ms", 896, 1, p.n_kept, p.total, "ms");
        if (ttft(&b, &img[1], 1.0, 0, 1, &p, &e)) return die("cache hit", &e);
        row("ttft_cache_hit_ms", 896, 1, p.n_kept, p.total, "ms");
        if (ttft(&b, &img[1], 1.0, 0, 2, &p, &e)) return die("prefix hit", &e);
        row("ttft_prefix_hit_ms", 896, 1, p.n_kept, p.total, "ms");
        if (ttft(&b, &img[1], 0.25, 0, 1, &p, &e)) return die("cache hit", &e);
        row("ttft_cache_hit_ms", 896, 0.25, p.n_kept, p.total, "ms");
        fr_vision_cache_stats st;
        fr_vision_cache_stats_get(b.cache, &st);
        row("cache_hit_rate", 896, 1, 0, (double)st.hits / (double)(st.hits + st.misses), "ratio");
    }
    /* 4. decode and energy of one whole request (896, all tokens kept, 64 tokens) */
    {
        parts p;
        int32_t rd;
        double tps = 0;
        const double j0 = joules(&b), t1 = fr_time_s();
        if (request(&b, &img[1], 1.0, 0, 0, &p, &rd, &e) || decode(&b, p.first, rd, &tps, &e))
            return die("decode", &e);
        const double dt = fr_time_s() - t1, j1 = joules(&b);
        row("decode_tok_s", 896, 1, p.n_kept, tps, "tok/s");
        row("request_s", 896, 1, p.n_kept, dt, "s");
        row("request_joules", 896, 1, p.n_kept, j1 - j0, "J");
        if (request(&b, &img[1], 0.25, 0, 0, &p, &rd, &e) || decode(&b, p.first, rd, &tps, &e))
            return die("decode", &e);
        row("decode_tok_s", 896, 0.25, p.n_kept, tps, "tok/s");
    }
    fr_cuda_stats cs;
    fr_cuda_get_stats(b.dec, &cs);
    printf("decoder: %ld forwards, %ld graph replays, %ld captures\n", cs.forwards,
           cs.graph_replays, cs.graph_captures);
    for (int r = 0; r < 3; r++) free(img[r].data);
    free(b.raw), free(b.q), free(b.qw), free(b.seq.blocks), free(b.tmp), free(b.pfx_pos);
    cudaFreeHost(b.embd);
    fr_vision_cache_free(b.cache);
    fr_cuda_free(b.dec);
    fr_cuda_vision_free(b.cv);
    fr_model_free(b.m);
    if (csv) fclose(csv);
    return 0;
}
