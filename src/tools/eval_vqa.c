/* eval_vqa.c — `frugal eval-vqa` (eval_vqa.h says what it measures). */
#include "tools/eval_vqa.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/flags.h"
#include "base/num.h"
#include "engine/generate.h"
#include "meter/meter.h"
#include "meter/sources.h"
#include "model/tokenizer.h"
#include "model/vision.h"
#include "stages/vision/prune.h"
#include "tools/vl_sample.h"
#include "tools/vqa_score.h"

#define MAX_SETTINGS 32
#define ANLS_TAU 0.5

typedef enum setting_kind { SET_PRUNE = 0, SET_DOWNSAMPLE } setting_kind;

/* One row of the table. */
typedef struct setting {
    setting_kind kind;
    double keep_ratio;    /* (0, 1] */
    int64_t budget;       /* max image tokens, or FR_VISION_PRUNE_NO_BUDGET */
    /* sums over the samples */
    int n, n_scored;
    double em, anls, latency_s, joules, tokens, kept;
    cJSON *preds;         /* [{id, text, exact, anls}] */
} setting;

typedef struct eval_ctx {
    const fr_model *m;
    fr_pool *pool;
    fr_cpu_energy *energy;
    int max_tokens;
} eval_ctx;

static double joules_now(fr_cpu_energy *e) {
    double j = 0;
    if (e && fr_cpu_energy_read(e, &j)) j = 0;
    return j;
}

/* The question's token embeddings (m, E) and weights (0 for stop words). */
static int question_embd(const fr_model *m, const char *q, float **embd, float **w, int64_t *n,
                         fr_err *err) {
    int32_t *ids = NULL;
    size_t nid = 0;
    if (fr_tokenize(m->tok, q, strlen(q), false, &ids, &nid, err)) return -1;
    const int E = m->hp.n_embd;
    const fr_tensor *te = &m->w.tok_embd;
    *embd = fr_xmalloc((nid ? nid : 1) * (size_t)E * sizeof(float));
    *w = fr_xmalloc((nid ? nid : 1) * sizeof(float));
    for (size_t i = 0; i < nid; i++) {
        fr_cpu_dequantize_row(te->dtype, fr_cpu_row_ptr(te, ids[i]), *embd + i * E, E);
        char piece[64];
        int len = fr_token_bytes(m->tok, ids[i], piece, sizeof piece);
        (*w)[i] = len >= 0 && fr_vision_prune_is_stopword(piece, (size_t)len) ? 0.0f : 1.0f;
    }
    free(ids);
    *n = (int64_t)nid;
    return 0;
}

/* The prompt with image i's tokens cut to k[i]: ids2, rope2 (3, n2), feat2 (sum k, E). */
typedef struct cut_prompt {
    int32_t *ids, *rope;
    float *feat;
    int n;
    int64_t n_img;
} cut_prompt;

static void cut_free(cut_prompt *c) {
    free(c->ids);
    free(c->rope);
    free(c->feat);
    memset(c, 0, sizeof *c);
}

static int cut(const eval_ctx *c, const fr_vl_prompt *p, const setting *s, const float *qe,
               const float *qw, int64_t qm, cut_prompt *out, fr_err *err) {
    const fr_model *m = c->m;
    const int E = m->hp.n_embd, merge = m->vision->hp.merge, img = m->hp.image_token_id;
    int64_t ntok[FR_VL_SAMPLE_MAX_IMAGES], k[FR_VL_SAMPLE_MAX_IMAGES], total = 0;
    for (int i = 0; i < p->n_images; i++) {
        const int32_t *g = p->grid_thw + 3 * i;
        ntok[i] = (int64_t)g[0] * (g[1] / merge) * (g[2] / merge);
    }
    fr_vision_prune_params pp = fr_vision_prune_default_params();
    pp.keep_ratio = s->keep_ratio;
    pp.max_image_tokens = s->budget;
    if (fr_vision_prune_keep_counts(ntok, p->n_images, &pp, k, err)) return -1;
    for (int i = 0; i < p->n_images; i++) total += k[i];
    memset(out, 0, sizeof *out);
    int n2 = p->n - (int)(p->n_img - total);
    out->ids = fr_xmalloc((size_t)n2 * sizeof(int32_t));
    out->rope = fr_xmalloc(3 * (size_t)n2 * sizeof(int32_t));
    out->feat = fr_xmalloc((size_t)(total ? total : 1) * E * sizeof(float));
    out->n = n2;
    out->n_img = total;
    int64_t *kept = fr_xmalloc((size_t)p->n_img * sizeof(int64_t));
    int32_t *pos = fr_xmalloc(3 * (size_t)p->n_img * sizeof(int32_t));
    int32_t *kpos = fr_xmalloc(3 * (size_t)p->n_img * sizeof(int32_t));
    int rc = 0, o = 0, image = 0;
    int64_t frow = 0, orow = 0; /* feature rows read / written */
    for (int i = 0; i < p->n && !rc;) {
        if (p->ids[i] != img) {
            out->ids[o] = p->ids[i];
            for (int r = 0; r < 3; r++) out->rope[r * n2 + o] = p->rope_pos[r * p->n + i];
            o++, i++;
            continue;
        }
        /* image `image`: ntok tokens from prompt index i */
        const int64_t nt = ntok[image], kk = k[image];
        const int32_t *g = p->grid_thw + 3 * image;
        for (int64_t j = 0; j < nt; j++)
            for (int r = 0; r < 3; r++) pos[r * nt + j] = p->rope_pos[r * p->n + i + j];
        const float *f = p->feat + (size_t)frow * E;
        float *dst = out->feat + (size_t)orow * E;
        if (s->kind == SET_PRUNE) {
            fr_vision_prune_params one = fr_vision_prune_default_params();
            one.max_image_tokens = kk;
            fr_vision_prune_input in = {.feat = f, .n = nt, .d = E, .pos = pos, .query = qm ? qe : NULL,
                                        .query_w = qw, .m = qm};
            int64_t got = fr_vision_prune_select(&in, &one, kept, kpos, NULL, NULL, err);
            if (got != kk) rc = -1;
            else fr_vision_prune_gather(f, nt, E, kept, kk, dst);
        } else {
            int64_t got = fr_vision_downsample_pool(f, E, pos, g[0], g[1] / merge, g[2] / merge,
                                                    kk, dst, kpos, err);
            if (got != kk) rc = -1;
        }
        for (int64_t j = 0; j < kk && !rc; j++) {
            out->ids[o] = img;
            for (int r = 0; r < 3; r++) out->rope[r * n2 + o] = kpos[r * kk + j];
            o++;
        }
        i += (int)nt;
        frow += nt;
        orow += kk;
        image++;
    }
    free(kept);
    free(pos);
    free(kpos);
    if (rc) cut_free(out);
    return rc;
}

/* One sample under one setting: generate, score, add to the sums. */
static int run_setting(const eval_ctx *c, const fr_vl_sample *smp, const fr_vl_prompt *p,
                       double vision_j, setting *s, const float *qe, const float *qw, int64_t qm,
                       fr_err *err) {
    double t0 = fr_time_s(), j0 = joules_now(c->energy);
    cut_prompt cp;
    if (cut(c, p, s, qe, qw, qm, &cp, err)) return -1;
    fr_generate_mm mm = {.embd = cp.feat, .n_embd_rows = cp.n_img,
                         .image_token_id = c->m->hp.image_token_id, .rope_pos = cp.rope};
    fr_sampling sp = fr_sampling_default();
    sp.temperature = 0;
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = c->max_tokens;
    fr_generate_result res = {0};
    int rc = fr_generate_mm_on(c->m, NULL, cp.ids, (size_t)cp.n, &mm, &sp, &gp, NULL, NULL, &res,
                               err);
    double dt = fr_time_s() - t0, dj = joules_now(c->energy) - j0;
    if (!rc) {
        const char *text = res.text ? res.text : "";
        s->n++;
        s->latency_s += p->vision_s + dt;
        s->joules += vision_j + dj;
        s->tokens += (double)p->n_img;
        s->kept += (double)cp.n_img;
        cJSON *pj = cJSON_CreateObject();
        cJSON_AddStringToObject(pj, "id", smp->id);
        cJSON_AddStringToObject(pj, "text", text);
        cJSON_AddNumberToObject(pj, "image_tokens_kept", (double)cp.n_img);
        if (smp->n_answers) {
            bool em = fr_vqa_exact(text, (const char *const *)smp->answers, smp->n_answers);
            double an = fr_anls(text, (const char *const *)smp->answers, smp->n_answers, ANLS_TAU);
            s->n_scored++;
            s->em += em;
            s->anls += an;
            cJSON_AddBoolToObject(pj, "exact", em);
            cJSON_AddNumberToObject(pj, "anls", an);
        }
        cJSON_AddItemToArray(s->preds, pj);
    }
    fr_generate_result_free(&res);
    cut_free(&cp);
    return rc;
}

/* "1,0.5,0.25" -> values; 0 or -1 (message printed). */
static int parse_list(const char *what, const char *arg, double lo, double hi, bool integer,
                      double *out, int *n) {
    char *copy = fr_xstrdup(arg), *save = NULL;
    *n = 0;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
        double v;
        if (*n == MAX_SETTINGS / 2 || !fr_parse_double(t, lo, hi, &v) ||
            (integer && v != floor(v))) {
            fprintf(stderr, "frugal eval-vqa: %s: bad value '%s' (%s in [%g, %g], at most %d)\n",
                    what, t, integer ? "integers" : "numbers", lo, hi, MAX_SETTINGS / 2);
            rc = -1;
        } else {
            out[(*n)++] = v;
        }
    }
    free(copy);
    if (!rc && *n == 0) {
        fprintf(stderr, "frugal eval-vqa: %s: empty list\n", what);
        rc = -1;
    }
    return rc;
}

static const char *USAGE =
    "usage: frugal eval-vqa --model DIR --data FILE.jsonl [options]\n"
    "  --model DIR          Qwen2-VL / Qwen2.5-VL model folder (required)\n"
    "  --data FILE          JSON lines {\"image\": PATH|[PATHS] or \"pixel_values\": NPY with\n"
    "                       \"grid_thw\", \"question\": TEXT, \"answers\": [TEXT, ...]} (required)\n"
    "  --keep-ratios LIST   visual-token keep ratios (default 1,0.5,0.25,0.1)\n"
    "  --budgets LIST       per-request image-token budgets (default none)\n"
    "  --no-baseline        skip plain downsampling to the same token counts\n"
    "  --max-tokens N       tokens to generate per answer (default 16)\n"
    "  --max-samples N      first N samples only\n"
    "  --threads N          CPU threads of the vision tower (default: one per core)\n"
    "  --json               one JSON object (with every prediction) instead of the table\n"
    "  --quiet              no progress lines\n";

static void setting_name(const setting *s, char *b, size_t n) {
    if (s->budget != FR_VISION_PRUNE_NO_BUDGET)
        snprintf(b, n, "%s budget %lld", s->kind == SET_PRUNE ? "prune" : "downsample",
                 (long long)s->budget);
    else
        snprintf(b, n, "%s keep %.3g", s->kind == SET_PRUNE ? "prune" : "downsample",
                 s->keep_ratio);
}

static cJSON *report_json(const setting *st, int n_set, const char *model, int n_samples,
                          const char *source) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddNumberToObject(j, "samples", n_samples);
    cJSON_AddStringToObject(j, "energy_source", source);
    cJSON_AddNumberToObject(j, "anls_threshold", ANLS_TAU);
    for (int i = 0; i < n_set; i++) {
        const setting *s = &st[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "method", s->kind == SET_PRUNE ? "prune" : "downsample");
        if (s->budget != FR_VISION_PRUNE_NO_BUDGET)
            cJSON_AddNumberToObject(o, "max_image_tokens", (double)s->budget);
        else
            cJSON_AddNumberToObject(o, "keep_ratio", s->keep_ratio);
        double n = s->n ? s->n : 1, ns = s->n_scored ? s->n_scored : 1;
        cJSON_AddNumberToObject(o, "samples_scored", s->n_scored);
        cJSON_AddNumberToObject(o, "image_tokens", s->tokens / n);
        cJSON_AddNumberToObject(o, "image_tokens_kept", s->kept / n);
        if (s->n_scored) {
            cJSON_AddNumberToObject(o, "exact_match", s->em / ns);
            cJSON_AddNumberToObject(o, "anls", s->anls / ns);
        } else {
            cJSON_AddNullToObject(o, "exact_match");
            cJSON_AddNullToObject(o, "anls");
        }
        cJSON_AddNumberToObject(o, "latency_ms", 1e3 * s->latency_s / n);
        cJSON_AddNumberToObject(o, "joules", s->joules / n);
        cJSON_AddItemReferenceToObject(o, "predictions", s->preds);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_AddItemToObject(j, "settings", arr);
    return j;
}

static void report_table(const setting *st, int n_set, int n_samples, const char *source) {
    printf("eval-vqa: %d samples; energy: %s\n", n_samples, source);
    printf("%-24s %9s %9s %8s %7s %11s %10s\n", "setting", "tokens", "kept", "EM %", "ANLS",
           "latency ms", "J/sample");
    for (int i = 0; i < n_set; i++) {
        const setting *s = &st[i];
        char name[64], em[16] = "-", an[16] = "-";
        setting_name(s, name, sizeof name);
        double n = s->n ? s->n : 1;
        if (s->n_scored) {
            snprintf(em, sizeof em, "%.1f", 100 * s->em / s->n_scored);
            snprintf(an, sizeof an, "%.3f", s->anls / s->n_scored);
        }
        printf("%-24s %9.1f %9.1f %8s %7s %11.1f %10.3f\n", name, s->tokens / n, s->kept / n, em,
               an, 1e3 * s->latency_s / n, s->joules / n);
    }
}

int fr_cmd_eval_vqa(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *ratios = "1,0.5,0.25,0.1", *budgets = NULL;
    int max_tokens = 16, max_samples = 0, threads = 0;
    bool json = false, quiet = false, no_base = false;
    fr_flags f;
    fr_flags_init(&f, "eval-vqa", argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) return fputs(USAGE, stdout), 0;
        else if (fr_flag_str(&f, "--model", &model)) continue;
        else if (fr_flag_str(&f, "--data", &data)) continue;
        else if (fr_flag_str(&f, "--keep-ratios", &ratios)) continue;
        else if (fr_flag_str(&f, "--budgets", &budgets)) continue;
        else if (fr_flag_int(&f, "--max-tokens", 1, 4096, &max_tokens)) continue;
        else if (fr_flag_int(&f, "--max-samples", 1, 1 << 30, &max_samples)) continue;
        else if (fr_flag_int(&f, "--threads", 1, 1024, &threads)) continue;
        else if (fr_flag_switch(&f, "--json", &json)) continue;
        else if (fr_flag_switch(&f, "--quiet", &quiet)) continue;
        else if (fr_flag_switch(&f, "--no-baseline", &no_base)) continue;
        else return fr_flags_unknown(&f);
    }
    if (f.rc) return f.rc;
    if (!model || !data) {
        fprintf(stderr, "frugal eval-vqa: --model and --data are required\n");
        return 2;
    }
    double rv[MAX_SETTINGS], bv[MAX_SETTINGS];
    int nr = 0, nb = 0;
    if (parse_list("--keep-ratios", ratios, 1e-6, 1, false, rv, &nr)) return 2;
    if (budgets && parse_list("--budgets", budgets, 1, 1 << 20, true, bv, &nb)) return 2;
    setting st[MAX_SETTINGS * 2];
    int n_set = 0;
    for (int base = 0; base <= !no_base; base++) {
        for (int i = 0; i < nr; i++)
            st[n_set++] = (setting){.kind = base ? SET_DOWNSAMPLE : SET_PRUNE, .keep_ratio = rv[i],
                                    .budget = FR_VISION_PRUNE_NO_BUDGET};
        for (int i = 0; i < nb; i++)
            st[n_set++] = (setting){.kind = base ? SET_DOWNSAMPLE : SET_PRUNE, .keep_ratio = 1,
                                    .budget = (int64_t)bv[i]};
    }
    for (int i = 0; i < n_set; i++) st[i].preds = cJSON_CreateArray();

    fr_err err = {0};
    fr_vl_sample *samples = NULL;
    int n = 0, rc = 1;
    fr_model *m = NULL;
    fr_meter_config mc;
    fr_meter_config_default(&mc);
    char why[600];
    eval_ctx c = {.max_tokens = max_tokens};
    c.energy = fr_cpu_energy_open(mc.rapl_root, 0, mc.cpu_watts_per_core, why, sizeof why);
    const char *source = c.energy ? fr_meter_source_name(fr_cpu_energy_source(c.energy)) : "none";
    if (fr_vl_samples_load(data, max_samples, &samples, &n, &err)) goto out;
    if (!(m = fr_model_load(model, &err))) goto out;
    if (!m->vision) {
        fr_err_setc(&err, FR_ERR_UNSUPPORTED, "%s: model has no vision tower", model);
        goto out;
    }
    c.m = m;
    c.pool = fr_pool_new(threads);
    double t_start = fr_time_s();
    for (int i = 0; i < n; i++) {
        fr_vl_prompt p;
        double j0 = joules_now(c.energy);
        if (fr_vl_prompt_build(m, c.pool, &samples[i], &p, &err)) {
            fr_err_prefix(&err, "sample %s", samples[i].id);
            goto out;
        }
        double vision_j = joules_now(c.energy) - j0;
        float *qe = NULL, *qw = NULL;
        int64_t qm = 0;
        int bad = question_embd(m, samples[i].question, &qe, &qw, &qm, &err);
        for (int k = 0; k < n_set && !bad; k++)
            bad = run_setting(&c, &samples[i], &p, vision_j, &st[k], qe, qw, qm, &err);
        free(qe);
        free(qw);
        fr_vl_prompt_free(&p);
        if (bad) {
            fr_err_prefix(&err, "sample %s", samples[i].id);
            goto out;
        }
        if (!quiet) {
            double el = fr_time_s() - t_start;
            fprintf(stderr, "eval-vqa: %d/%d %s (eta %.0f s)\n", i + 1, n, samples[i].id,
                    el / (i + 1) * (n - i - 1));
        }
    }
    if (json) {
        cJSON *j = report_json(st, n_set, model, n, source);
        char *s = cJSON_PrintUnformatted(j);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        report_table(st, n_set, n, source);
    }
    rc = 0;
out:
    if (rc) fprintf(stderr, "frugal eval-vqa: %s (%s)\n", err.msg, fr_err_code_name(err.code));
    for (int i = 0; i < n_set; i++) cJSON_Delete(st[i].preds);
    fr_pool_free(c.pool);
    fr_cpu_energy_close(c.energy);
    fr_model_free(m);
    for (int i = 0; i < n; i++) fr_vl_sample_free(&samples[i]);
    free(samples);
    return rc;
}
