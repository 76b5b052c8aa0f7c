/* analyze_heads.c — `frugal analyze heads` (analyze_heads.h says what it computes).
 *
 * One decoder forward per sample over the whole prompt (image features in the image tokens'
 * rows, M-RoPE positions), the probe collecting each head's probabilities over the image tokens
 * for the captured rows: maps (n_layer, n_head, n_rows * n_img). The serving path never sets the
 * probe; this command is the only user.
 */
#include "tools/analyze_heads.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/decoder.h"
#include "backend/kv.h"
#include "base/flags.h"
#include "meter/audit.h"

/* What the probe fills for one sample. */
typedef struct probe_ctx {
    const fr_vl_prompt *p;
    int n_head;
    int n_rows;         /* captured rows */
    const int *row_of;  /* (batch rows) index among captured rows, -1 when not captured */
    float *maps;        /* (n_layer, n_head, n_rows, n_img) */
} probe_ctx;

static void probe_fn(void *user, int layer, int row, int head, const float *p, int n) {
    probe_ctx *c = user;
    int r = c->row_of[row];
    if (r < 0) return;
    int64_t ni = c->p->n_img;
    float *dst = c->maps + (((size_t)layer * c->n_head + head) * c->n_rows + r) * (size_t)ni;
    int64_t k = 0;
    for (int j = 0; j < n && k < ni; j++)
        if (c->p->ids[j] == c->p->ids[c->p->first_img] && j >= c->p->first_img &&
            j <= c->p->last_img)
            dst[k++] = p[j];
}

void fr_heads_result_free(fr_heads_result *r) {
    if (!r) return;
    free(r->sim);
    memset(r, 0, sizeof *r);
}

/* Runs one sample: its maps (n_layer, n_head, n_rows * n_img), malloc'd. */
static float *sample_maps(const fr_model *m, fr_pool *pool, const fr_vl_prompt *p,
                          const fr_heads_opts *o, int *n_rows_out, fr_err *err) {
    const fr_hparams *hp = &m->hp;
    const int n = p->n, E = hp->n_embd;
    int first = o->rows == FR_HEADS_ROWS_TEXT ? p->last_img + 1 : n - 1, n_rows = n - first;
    float *maps = NULL, *embd = NULL, *logits = NULL;
    int32_t *pos = NULL, *row_of = NULL;
    uint8_t *use = NULL, *want = NULL;
    fr_seq **seqs = NULL;
    fr_seq seq = {0};
    fr_kv_pool *kv = NULL;
    fr_decoder_opts dopt = {.n_threads = o->n_threads};
    fr_decoder *d = fr_decoder_new_opts(m, n, n, &dopt, err);
    (void)pool;
    if (!d) return NULL;
    int ok = 0;
    kv = fr_kv_pool_new(hp, (n + 15) / 16, 16);
    if (!kv || fr_seq_reserve(&seq, kv, n)) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "out of memory for the KV cache of %d positions", n);
        goto out;
    }
    maps = calloc((size_t)hp->n_layer * hp->n_head * n_rows * (size_t)p->n_img, sizeof(float));
    embd = calloc((size_t)n * E, sizeof(float));
    logits = malloc((size_t)n_rows * hp->n_vocab * sizeof(float));
    pos = malloc((size_t)n * sizeof *pos);
    row_of = malloc((size_t)n * sizeof *row_of);
    use = malloc((size_t)n);
    want = malloc((size_t)n);
    seqs = malloc((size_t)n * sizeof *seqs);
    if (!maps || !embd || !logits || !pos || !row_of || !use || !want || !seqs) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "out of memory for %d rows of %lld image tokens",
                    n_rows, (long long)p->n_img);
        goto out;
    }
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        pos[i] = i;
        seqs[i] = &seq;
        use[i] = p->ids[i] == m->hp.image_token_id && k < p->n_img;
        if (use[i]) memcpy(embd + (size_t)i * E, p->feat + (size_t)k++ * E, (size_t)E * 4);
        want[i] = i >= first;
        row_of[i] = i >= first ? i - first : -1;
    }
    probe_ctx pc = {.p = p, .n_head = hp->n_head, .n_rows = n_rows, .row_of = row_of, .maps = maps};
    fr_decoder_set_attn_probe(d, probe_fn, &pc);
    fr_batch b = {.n_tokens = n, .tokens = p->ids, .pos = pos, .seqs = seqs, .logits = want,
                  .embd = embd, .embd_use = use, .rope_pos = p->rope_pos};
    if (fr_decoder_forward(d, kv, &b, logits, err)) goto out;
    ok = 1;
    *n_rows_out = n_rows;
out:
    if (kv) fr_seq_release(&seq, kv);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
    free(embd);
    free(logits);
    free(pos);
    free(row_of);
    free(use);
    free(want);
    free(seqs);
    if (!ok) {
        free(maps);
        maps = NULL;
    }
    return maps;
}

/* sim (n_head, n_head) += cosine of the maps (n_head, len) of one layer. */
static void add_cosines(double *sim, const float *maps, int n_head, size_t len) {
    double *norm = malloc((size_t)n_head * sizeof *norm);
    FR_ASSERT(norm);
    for (int h = 0; h < n_head; h++) {
        double s = 0;
        for (size_t i = 0; i < len; i++) s += (double)maps[h * len + i] * maps[h * len + i];
        norm[h] = sqrt(s);
    }
    for (int a = 0; a < n_head; a++)
        for (int b = 0; b < n_head; b++) {
            double dot = 0;
            for (size_t i = 0; i < len; i++) dot += (double)maps[a * len + i] * maps[b * len + i];
            double den = norm[a] * norm[b];
            sim[a * n_head + b] += a == b ? 1.0 : den > 0 ? dot / den : 0.0;
        }
    free(norm);
}

int fr_heads_analyze(const fr_model *m, const fr_vl_sample *samples, int n,
                     const fr_heads_opts *o, fr_heads_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    const fr_hparams *hp = &m->hp;
    if (!hp->mrope_section[0] && !hp->mrope_section[1] && !hp->mrope_section[2]) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "model has no M-RoPE (not a Qwen2-VL model)");
        return -1;
    }
    const int L = hp->n_layer, H = hp->n_head;
    res->n_layer = L;
    res->n_head = H;
    res->sim = calloc((size_t)L * H * H, sizeof(double));
    if (!res->sim) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "out of memory");
        return -1;
    }
    fr_pool *pool = fr_pool_new(o->n_threads);
    double t_start = fr_time_s();
    int rc = 0;
    for (int s = 0; s < n && !rc; s++) {
        double t0 = fr_time_s();
        fr_vl_prompt p;
        if (fr_vl_prompt_build(m, pool, &samples[s], &p, err)) {
            rc = -1;
            fr_err_prefix(err, "sample %s", samples[s].id);
            break;
        }
        int n_rows = 0;
        float *maps = sample_maps(m, pool, &p, o, &n_rows, err);
        if (!maps) {
            rc = -1;
            fr_err_prefix(err, "sample %s", samples[s].id);
        } else {
            size_t len = (size_t)n_rows * (size_t)p.n_img;
            for (int l = 0; l < L; l++)
                add_cosines(res->sim + (size_t)l * H * H, maps + (size_t)l * H * len, H, len);
            res->n_samples++;
            res->image_tokens += p.n_img;
            free(maps);
            if (o->progress) {
                double el = fr_time_s() - t_start;
                fprintf(stderr, "analyze heads: %d/%d %s: %lld image tokens, %d rows, %.2f s "
                        "(eta %.0f s)\n", s + 1, n, samples[s].id, (long long)p.n_img, n_rows,
                        fr_time_s() - t0, el / (s + 1) * (n - s - 1));
            }
        }
        fr_vl_prompt_free(&p);
    }
    fr_pool_free(pool);
    if (rc) {
        fr_heads_result_free(res);
        return -1;
    }
    for (size_t i = 0; i < (size_t)L * H * H; i++) res->sim[i] /= res->n_samples;
    return 0;
}

void fr_heads_layer_counts(const fr_heads_result *r, int layer, double threshold, int *pairs,
                           int *heads) {
    const int H = r->n_head;
    const double *s = r->sim + (size_t)layer * H * H;
    *pairs = *heads = 0;
    for (int a = 0; a < H; a++) {
        bool partner = false;
        for (int b = 0; b < H; b++) {
            if (a == b || s[a * H + b] < threshold) continue;
            partner = true;
            if (a < b) (*pairs)++;
        }
        *heads += partner;
    }
}

/* ------------------------------------------------------------------ output */

/* A colour for v in [0, 1]: dark blue -> teal -> yellow (a viridis-like ramp). */
static void ramp(double v, unsigned char rgb[3]) {
    static const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140},
                                       {94, 201, 98}, {253, 231, 37}};
    v = v < 0 ? 0 : v > 1 ? 1 : v;
    double x = v * 4;
    int i = x >= 4 ? 3 : (int)x;
    double f = x - i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (unsigned char)lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c]));
}

#define CELL 16 /* pixels per head in a heatmap */

static unsigned char *layer_png(const fr_heads_result *r, int l, size_t *len) {
    const int H = r->n_head, W = H * CELL;
    unsigned char *rgb = fr_xmalloc((size_t)W * W * 3);
    for (int y = 0; y < W; y++)
        for (int x = 0; x < W; x++)
            ramp(r->sim[((size_t)l * H + y / CELL) * H + x / CELL], rgb + ((size_t)y * W + x) * 3);
    unsigned char *png = fr_meter_png_encode(rgb, W, W, len);
    free(rgb);
    return png;
}

static int write_bytes(const char *path, const void *p, size_t n, fr_err *err) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        if (f) fclose(f);
        fr_err_setc(err, FR_ERR_INTERNAL, "%s: cannot write", path);
        return -1;
    }
    return 0;
}

static void base64(fr_buf *o, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], i + 1 < n ? tab[v >> 6 & 63] : '=',
                     i + 2 < n ? tab[v & 63] : '='};
        fr_buf_append(o, q, 4);
    }
}

static cJSON *result_json(const fr_heads_result *r, const fr_heads_opts *o, const char *model) {
    const int H = r->n_head;
    cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddNumberToObject(j, "samples", r->n_samples);
    cJSON_AddNumberToObject(j, "image_tokens", (double)r->image_tokens);
    cJSON_AddStringToObject(j, "rows", o->rows == FR_HEADS_ROWS_TEXT ? "text" : "last");
    cJSON_AddNumberToObject(j, "threshold", o->threshold);
    cJSON_AddNumberToObject(j, "n_layer", r->n_layer);
    cJSON_AddNumberToObject(j, "n_head", H);
    int tp = 0, th = 0;
    for (int l = 0; l < r->n_layer; l++) {
        cJSON *lj = cJSON_CreateObject(), *m = cJSON_CreateArray();
        for (int a = 0; a < H; a++)
            cJSON_AddItemToArray(m, cJSON_CreateDoubleArray(r->sim + ((size_t)l * H + a) * H, H));
        int pairs, heads;
        fr_heads_layer_counts(r, l, o->threshold, &pairs, &heads);
        tp += pairs;
        th += heads;
        cJSON_AddNumberToObject(lj, "layer", l);
        cJSON_AddItemToObject(lj, "similarity", m);
        cJSON_AddNumberToObject(lj, "pairs_above", pairs);
        cJSON_AddNumberToObject(lj, "share_pairs_above", H > 1 ? pairs / (H * (H - 1) / 2.0) : 0);
        cJSON_AddNumberToObject(lj, "heads_with_partner", heads);
        cJSON_AddNumberToObject(lj, "share_heads_with_partner", (double)heads / H);
        cJSON_AddItemToArray(layers, lj);
    }
    cJSON_AddItemToObject(j, "layers", layers);
    double all_pairs = (double)r->n_layer * H * (H - 1) / 2.0;
    cJSON_AddNumberToObject(j, "pairs_above", tp);
    cJSON_AddNumberToObject(j, "share_pairs_above", all_pairs > 0 ? tp / all_pairs : 0);
    cJSON_AddNumberToObject(j, "heads_with_partner", th);
    cJSON_AddNumberToObject(j, "share_heads_with_partner", (double)th / (r->n_layer * H));
    return j;
}

int fr_heads_write(const fr_heads_result *r, const fr_heads_opts *o, const char *model,
                   const char *dir, fr_err *err) {
    if (fr_mkdir_p(dir, 0755, err)) return -1;
    cJSON *j = result_json(r, o, model);
    char *text = cJSON_Print(j);
    char *path = fr_path_join(dir, "heads.json");
    int rc = write_bytes(path, text, strlen(text), err);
    free(path);
    free(text);
    fr_buf html = {0};
    fr_buf_printf(&html, "<!doctype html><html><head><meta charset=\"utf-8\"><title>Head "
                  "redundancy</title><style>body{font-family:sans-serif;margin:2em}"
                  "figure{display:inline-block;margin:1em}img{image-rendering:pixelated;"
                  "width:%dpx}td,th{padding:2px 8px;text-align:right}</style></head><body>"
                  "<h1>Attention-head redundancy over image tokens</h1><p>%d samples, %lld "
                  "image tokens, rows: %s, threshold %.3g. Cosine similarity of each pair of "
                  "heads' attention maps over the image tokens, averaged over samples "
                  "(dark 0, yellow 1).</p><table><tr><th>layer</th><th>pairs &ge; "
                  "threshold</th><th>share</th><th>heads with a partner</th><th>share</th></tr>",
                  FR_MAX(160, r->n_head * CELL * 2), r->n_samples, (long long)r->image_tokens,
                  o->rows == FR_HEADS_ROWS_TEXT ? "text" : "last", o->threshold);
    const cJSON *layers = cJSON_GetObjectItem(j, "layers");
    for (int l = 0; l < r->n_layer; l++) {
        const cJSON *lj = cJSON_GetArrayItem(layers, l);
        fr_buf_printf(&html, "<tr><td>%d</td><td>%d</td><td>%.1f %%</td><td>%d</td><td>%.1f "
                      "%%</td></tr>", l, cJSON_GetObjectItem(lj, "pairs_above")->valueint,
                      100 * cJSON_GetObjectItem(lj, "share_pairs_above")->valuedouble,
                      cJSON_GetObjectItem(lj, "heads_with_partner")->valueint,
                      100 * cJSON_GetObjectItem(lj, "share_heads_with_partner")->valuedouble);
    }
    fr_buf_printf(&html, "<tr><th>all</th><th>%d</th><th>%.1f %%</th><th>%d</th><th>%.1f %%</th>"
                  "</tr></table>", cJSON_GetObjectItem(j, "pairs_above")->valueint,
                  100 * cJSON_GetObjectItem(j, "share_pairs_above")->valuedouble,
                  cJSON_GetObjectItem(j, "heads_with_partner")->valueint,
                  100 * cJSON_GetObjectItem(j, "share_heads_with_partner")->valuedouble);
    for (int l = 0; l < r->n_layer && !rc; l++) {
        size_t n = 0;
        unsigned char *png = layer_png(r, l, &n);
        if (!png) {
            fr_err_setc(err, FR_ERR_INTERNAL, "layer %d: PNG encoding failed", l);
            rc = -1;
            break;
        }
        char name[32];
        snprintf(name, sizeof name, "layer_%02d.png", l);
        path = fr_path_join(dir, name);
        rc = write_bytes(path, png, n, err);
        free(path);
        fr_buf_printf(&html, "<figure><img alt=\"layer %d\" src=\"data:image/png;base64,", l);
        base64(&html, png, n);
        fr_buf_printf(&html, "\"><figcaption>layer %d</figcaption></figure>", l);
        free(png);
    }
    fr_buf_puts(&html, "</body></html>\n");
    if (!rc) {
        path = fr_path_join(dir, "index.html");
        rc = write_bytes(path, html.data, html.len, err);
        free(path);
    }
    fr_buf_free(&html);
    cJSON_Delete(j);
    return rc;
}

/* ------------------------------------------------------------------ command */

static const char *USAGE =
    "usage: frugal analyze heads --model DIR --data FILE.jsonl --out DIR [options]\n"
    "  --model DIR        Qwen2-VL / Qwen2.5-VL model folder (required)\n"
    "  --data FILE        JSON lines: {\"image\": PATH|[PATHS] or \"pixel_values\": NPY with\n"
    "                     \"grid_thw\": [[t,h,w],...], \"question\": TEXT} (required)\n"
    "  --out DIR          heads.json, layer_NN.png, index.html (required)\n"
    "  --threshold T      similarity counted as redundant (default 0.9)\n"
    "  --rows last|text   attention rows: the prompt's last position (default) or every\n"
    "                     text position after the image\n"
    "  --max-samples N    first N samples only\n"
    "  --threads N        CPU threads (default: one per core)\n"
    "  --quiet            no progress lines\n";

int fr_cmd_analyze(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "heads")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
            return fputs(USAGE, stdout), 0;
        fprintf(stderr, "frugal analyze: unknown analysis (the one there is: heads)\n%s", USAGE);
        return 2;
    }
    const char *model = NULL, *data = NULL, *out = NULL, *rows = "last";
    fr_heads_opts o = {.threshold = 0.9, .progress = true};
    int max_samples = 0;
    bool quiet = false;
    fr_flags f;
    fr_flags_init(&f, "analyze heads", argc - 1, argv + 1);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) return fputs(USAGE, stdout), 0;
        else if (fr_flag_str(&f, "--model", &model)) continue;
        else if (fr_flag_str(&f, "--data", &data)) continue;
        else if (fr_flag_str(&f, "--out", &out)) continue;
        else if (fr_flag_str(&f, "--rows", &rows)) continue;
        else if (fr_flag_double(&f, "--threshold", -1, 1, &o.threshold)) continue;
        else if (fr_flag_int(&f, "--max-samples", 1, 1 << 30, &max_samples)) continue;
        else if (fr_flag_int(&f, "--threads", 1, 1024, &o.n_threads)) continue;
        else if (fr_flag_switch(&f, "--quiet", &quiet)) continue;
        else return fr_flags_unknown(&f);
    }
    if (f.rc) return f.rc;
    if (!model || !data || !out) {
        fprintf(stderr, "frugal analyze heads: --model, --data and --out are required\n");
        return 2;
    }
    if (!strcmp(rows, "text")) o.rows = FR_HEADS_ROWS_TEXT;
    else if (strcmp(rows, "last")) {
        fprintf(stderr, "frugal analyze heads: --rows must be last or text\n");
        return 2;
    }
    o.progress = !quiet;
    fr_err err = {0};
    fr_vl_sample *samples = NULL;
    int n = 0, rc = 1;
    fr_model *m = NULL;
    fr_heads_result res = {0};
    if (fr_vl_samples_load(data, max_samples, &samples, &n, &err)) goto out;
    if (!(m = fr_model_load(model, &err))) goto out;
    if (fr_heads_analyze(m, samples, n, &o, &res, &err)) goto out;
    if (fr_heads_write(&res, &o, model, out, &err)) goto out;
    int tp = 0, th = 0;
    for (int l = 0; l < res.n_layer; l++) {
        int p, h;
        fr_heads_layer_counts(&res, l, o.threshold, &p, &h);
        tp += p;
        th += h;
    }
    int H = res.n_head;
    printf("analyze heads: %d samples, %d layers x %d heads; pairs >= %.3g: %d of %d (%.1f %%); "
           "heads with a near-duplicate partner: %d of %d (%.1f %%); wrote %s\n", res.n_samples,
           res.n_layer, H, o.threshold, tp, res.n_layer * H * (H - 1) / 2,
           H > 1 ? 100.0 * tp / (res.n_layer * H * (H - 1) / 2.0) : 0.0, th, res.n_layer * H,
           100.0 * th / (res.n_layer * H), out);
    rc = 0;
out:
    if (rc) fprintf(stderr, "frugal analyze heads: %s (%s)\n", err.msg, fr_err_code_name(err.code));
    fr_heads_result_free(&res);
    fr_model_free(m);
    for (int i = 0; i < n; i++) fr_vl_sample_free(&samples[i]);
    free(samples);
    return rc;
}
