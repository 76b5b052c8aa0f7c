/* ocr_cmds.c — command-line front ends of the image/OCR stage.
 *
 *   frugal ocr FILE [--engine ppocr|tesseract] [--models DIR] [--type MEDIA] [--lang L]
 *                   [--threshold T] [--force-ocr] [--binarize N]
 *       decodes the image, prints one JSON object: format, size, density, route decision, OCR
 *       lines with confidence (and quads with ppocr), the engine, extracted fields, timings.
 *       No --engine: ppocr when its models are installed (models/ppocr of the data root, or
 *       --models), tesseract otherwise.
 *   frugal gen-docs --out DIR [--n N] [--lang eng|chi_sim|both] [--seed S] [--clean]
 *       writes N synthetic invoices/receipts per language (PNG, or JPEG when the document has a
 *       JPEG round trip) and a ground-truth JSON next to each.
 *   frugal eval-ocr [--n N] [--lang eng|chi_sim|both] [--threads T] [--seed S] [--clean]
 *                   [--engine ppocr|tesseract] [--models DIR] [--verbose]
 *       renders N documents per language, OCRs them on T threads (one engine each; tesseract
 *       unless --engine), extracts the fields and prints field accuracy per language (all4: the
 *       invoice number, amount, date and payee; all5: and the currency), pages/s, per-page time,
 *       and the density separation between the documents and synthetic photo-like images.
 * Design: argument parsing and reporting only; the work is in src/stages/image and src/stages/ocr. */
#include "tools/ocr_cmds.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/flags.h"
#include "base/mask.h"
#include "stages/image/density.h"
#include "stages/image/image.h"
#include "stages/ocr/docgen.h"
#include "stages/ocr/fields.h"
#include "stages/ocr/image_stage.h"
#include "stages/ocr/ocr.h"

/* {"invoice_no":..,"amount":..,"currency":..,"date":..,"payee":..} as read from the OCR text. */
static cJSON *fields_json(const fr_fields *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "invoice_no", f->invoice_no);
    cJSON_AddStringToObject(o, "amount", f->amount);
    cJSON_AddStringToObject(o, "currency", f->currency);
    cJSON_AddStringToObject(o, "date", f->date);
    cJSON_AddStringToObject(o, "payee", f->payee);
    return o;
}

/* The pool for `frugal ocr`: the engine asked for, or the default (ppocr when its models are
 * present, falling back to tesseract with a warning when they cannot be run). NULL with err. */
static fr_ocr_pool *ocr_pool(fr_ocr_cfg *oc, bool asked, fr_err *err) {
    fr_ocr_pool *p = fr_ocr_pool_new(oc, 1, err);
    if (p || asked || oc->kind != FR_OCR_KIND_PPOCR) return p;
    fprintf(stderr, "ocr: ppocr unavailable (%s); using tesseract\n", err->msg);
    oc->kind = FR_OCR_KIND_TESSERACT;
    memset(err, 0, sizeof *err);
    return fr_ocr_pool_new(oc, 1, err);
}

int fr_cmd_ocr(int argc, char **argv) {
    const char *file = NULL, *type = NULL, *engine = NULL;
    fr_ocr_cfg oc = {0};
    fr_image_stage_cfg sc = {0};
    fr_flags fl;
    fr_flags_init(&fl, "ocr", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf("usage: frugal ocr FILE [--engine ppocr|tesseract] [--models DIR] "
                   "[--device cpu|cuda|cuda:N] [--type MEDIA] [--lang eng|chi_sim|eng+chi_sim] "
                   "[--threshold T] [--force-ocr] [--binarize 0|1|2]\n"
                   "  no --engine: ppocr when its models are installed (--models DIR, default "
                   "models/ppocr of the data root), else tesseract\n"
                   "  --device: where ppocr's networks run (cuda needs frugal-cuda)\n"
                   "  --lang, --binarize: tesseract only; no --lang: eng+chi_sim when the "
                   "chi_sim model is installed, else eng (ppocr detects the script itself)\n");
            return 0;
        }
        if (fr_flag_str(&fl, "--type", &type) || fr_flag_str(&fl, "--lang", &oc.lang) ||
            fr_flag_str(&fl, "--engine", &engine) || fr_flag_str(&fl, "--models", &oc.ppocr_dir) ||
            fr_flag_str(&fl, "--device", &oc.device) ||
            fr_flag_float(&fl, "--threshold", 0, 2, &sc.threshold) ||
            fr_flag_int(&fl, "--binarize", 0, 2, &oc.binarize) ||
            fr_flag_switch(&fl, "--force-ocr", &sc.force_ocr))
            continue;
        if (fr_flags_positional(&fl) && !file) file = fl.arg;
        else return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    if (!file) {
        fprintf(stderr, "usage: frugal ocr FILE [options]\n");
        return 2;
    }
    /* no --lang: read both scripts in one pass (eng+chi_sim) when the Chinese model is
     * installed, so a Chinese page needs no flag; eng alone otherwise */
    char dir[512];
    if (!oc.lang)
        oc.lang = fr_ocr_tessdata_dir(&(fr_ocr_cfg){.lang = "chi_sim", .tessdata = oc.tessdata},
                                      dir, sizeof dir)
                      ? "eng+chi_sim"
                      : "eng";
    fr_err err = {0};
    if (engine && fr_ocr_kind_parse(engine, &oc.kind, &err)) {
        fprintf(stderr, "ocr: --engine: %s\n", err.msg);
        return 2;
    }
    if (!engine) oc.kind = fr_ocr_kind_default(oc.ppocr_dir);
    size_t len = 0;
    char *data = fr_read_file(file, FR_IMG_DEFAULT_MAX_BYTES + 1, &len, &err);
    if (!data) {
        fprintf(stderr, "ocr: %s\n", err.msg);
        return 1;
    }
    fr_ocr_pool *pool = ocr_pool(&oc, engine != NULL, &err);
    if (!pool) {
        fprintf(stderr, "ocr: %s\n", err.msg);
        free(data);
        return 1;
    }
    fr_image_stage_result res;
    int rc = fr_image_stage_run(pool, (const uint8_t *)data, len, type, &sc, &res, &err);
    free(data);
    if (rc) {
        fprintf(stderr, "ocr: %s: %s\n", file, err.msg);
        fr_ocr_pool_free(pool);
        return 1;
    }
    if (res.ocr_on) { /* card numbers and IBANs never printed in clear (base/mask.h) */
        if (res.ocr.text) fr_mask_inplace(res.ocr.text);
        for (size_t i = 0; i < res.ocr.n_lines; i++)
            if (res.ocr.lines[i].text) fr_mask_inplace(res.ocr.lines[i].text);
    }
    cJSON *out = fr_image_stage_json(&res);
    if (res.ocr_on) {
        fr_fields f;
        fr_fields_extract(res.ocr.text, &f);
        cJSON_AddItemToObject(out, "fields", fields_json(&f));
    }
    char *s = cJSON_PrintUnformatted(out);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(out);
    fr_image_stage_result_free(&res);
    fr_ocr_pool_free(pool);
    return 0;
}

/* --help: the usage on stdout, status 0; anything else unknown: the error and the usage on
 * stderr, status 2. */
static int help_or_unknown(fr_flags *fl, const char *usage) {
    bool help = fr_flag_help(fl);
    if (!help) fr_flags_unknown(fl);
    fputs(usage, help ? stdout : stderr);
    return help ? 0 : 2;
}

static int parse_langs(const char *s, bool langs[2]) {
    langs[0] = !strcmp(s, "eng") || !strcmp(s, "both");
    langs[1] = !strcmp(s, "chi_sim") || !strcmp(s, "both");
    return langs[0] || langs[1] ? 0 : -1;
}

int fr_cmd_gen_docs(int argc, char **argv) {
    const char *dir = NULL, *lang = "both";
    int n = 10;
    uint64_t seed = 1;
    bool clean = false;
    fr_flags fl;
    fr_flags_init(&fl, "gen-docs", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_str(&fl, "--out", &dir) || fr_flag_int(&fl, "--n", 1, 1 << 20, &n) ||
            fr_flag_str(&fl, "--lang", &lang) || fr_flag_u64(&fl, "--seed", &seed) ||
            fr_flag_switch(&fl, "--clean", &clean))
            continue;
        return help_or_unknown(&fl, "usage: frugal gen-docs --out DIR [--n N] "
                                    "[--lang eng|chi_sim|both] [--seed S] [--clean]\n");
    }
    if (fl.rc) return fl.rc;
    bool langs[2];
    if (!dir || n <= 0 || parse_langs(lang, langs)) {
        fprintf(stderr, "usage: frugal gen-docs --out DIR [--n N] [--lang eng|chi_sim|both]\n");
        return 2;
    }
    fr_err derr = {0};
    if (fr_mkdir_p(dir, 0755, &derr)) {
        fprintf(stderr, "gen-docs: %s\n", derr.msg);
        return 1;
    }
    for (int l = 0; l < 2; l++) {
        if (!langs[l]) continue;
        for (int i = 0; i < n; i++) {
            fr_doc_opts o;
            uint64_t s = seed * 1000003ull + (uint64_t)i * 2 + (uint64_t)l;
            if (clean) fr_doc_opts_clean(&o, s), o.chinese = l == 1;
            else fr_doc_opts_random(&o, l == 1, s);
            int q = o.jpeg_quality;
            o.jpeg_quality = 0; /* the file itself carries the JPEG artefacts */
            fr_image img;
            fr_doc_truth t;
            fr_err err = {0};
            fr_buf b = {0};
            if (fr_doc_render(&o, &img, &t, &err) ||
                fr_img_encode(&img, q ? FR_IMG_JPEG : FR_IMG_PNG, q, &b, &err)) {
                fprintf(stderr, "gen-docs: %s\n", err.msg);
                return 1;
            }
            o.jpeg_quality = q;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s-%04d.%s", dir, l ? "zh" : "en", i, q ? "jpg" : "png");
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(b.data, 1, b.len, f) != b.len) {
                fprintf(stderr, "gen-docs: cannot write %s\n", path);
                if (f) fclose(f);
                return 1;
            }
            fclose(f);
            fr_buf_free(&b);
            fr_doc_truth_json(&o, &t, &b);
            snprintf(path, sizeof path, "%s/%s-%04d.json", dir, l ? "zh" : "en", i);
            f = fopen(path, "wb");
            if (!f) {
                fprintf(stderr, "gen-docs: cannot write %s\n", path);
                return 1;
            }
            fprintf(f, "%s\n", fr_buf_cstr(&b));
            fclose(f);
            fr_buf_free(&b);
            fr_image_free(&img);
        }
    }
    return 0;
}

/* ---- eval-ocr --------------------------------------------------------------------------------- */

typedef struct eval_doc {
    fr_doc_opts opts;  /* how it was rendered */
    fr_doc_truth truth; /* ground truth */
    fr_image img;      /* rendered page (gray) */
    fr_fields got;     /* extracted fields */
    float density;     /* text-density score */
    double ocr_ms;     /* OCR wall time */
    double cpu_ms;     /* OCR CPU time of the worker thread (robust on a shared machine) */
    bool ok;           /* OCR succeeded */
    int index;         /* its number in its language (gen-docs names it so: en-0007) */
} eval_doc;

typedef struct eval_ctx {
    eval_doc *docs;      /* all documents */
    int n;               /* count */
    int next;            /* next index to take (guarded by mu) */
    pthread_mutex_t mu;  /* guards next */
    fr_ocr_cfg cfg[2];   /* per language */
    const char *err;     /* first engine error (static message) */
} eval_ctx;

static void *eval_worker(void *arg) {
    eval_ctx *c = arg;
    fr_ocr_engine *eng[2] = {NULL, NULL};
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int i = c->next++;
        pthread_mutex_unlock(&c->mu);
        if (i >= c->n) break;
        eval_doc *d = &c->docs[i];
        int l = d->opts.chinese;
        fr_err err = {0};
        if (!eng[l] && !(eng[l] = fr_ocr_engine_new(&c->cfg[l], &err))) {
            c->err = "cannot create the OCR engine (language data installed?)";
            continue;
        }
        fr_ocr_result r;
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        int rc = fr_ocr_run(eng[l], &d->img, &r, &err);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        d->cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
        if (rc == 0) {
            fr_fields_extract(r.text, &d->got);
            d->ocr_ms = r.ms;
            d->ok = true;
            fr_ocr_result_free(&r);
        }
    }
    fr_ocr_engine_free(eng[0]);
    fr_ocr_engine_free(eng[1]);
    return NULL;
}

int fr_cmd_eval_ocr(int argc, char **argv) {
    const char *lang = "both", *tl[2] = {"eng", "chi_sim"}, *engine = NULL, *models = NULL;
    int n = 20, threads = fr_n_cores();
    uint64_t seed = 7;
    bool clean = false, verbose = false;
    fr_flags fl;
    fr_flags_init(&fl, "eval-ocr", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_int(&fl, "--n", 1, 1 << 20, &n) || fr_flag_str(&fl, "--lang", &lang) ||
            fr_flag_int(&fl, "--threads", 1, 256, &threads) || fr_flag_u64(&fl, "--seed", &seed) ||
            fr_flag_str(&fl, "--eng-model", &tl[0]) || fr_flag_str(&fl, "--chi-model", &tl[1]) ||
            fr_flag_str(&fl, "--engine", &engine) || fr_flag_str(&fl, "--models", &models) ||
            fr_flag_switch(&fl, "--clean", &clean) || fr_flag_switch(&fl, "--verbose", &verbose))
            continue;
        return help_or_unknown(&fl, "usage: frugal eval-ocr [--n N] [--lang eng|chi_sim|both] "
                                    "[--threads T] [--seed S] [--clean] [--eng-model L] "
                                    "[--chi-model L] [--engine ppocr|tesseract] [--models DIR] "
                                    "[--verbose]\n");
    }
    if (fl.rc) return fl.rc;
    fr_ocr_kind kind = 0; /* tesseract, as before the flag */
    if (engine) {
        fr_err kerr = {0};
        if (fr_ocr_kind_parse(engine, &kind, &kerr)) {
            fprintf(stderr, "eval-ocr: --engine: %s\n", kerr.msg);
            return 2;
        }
    }
    bool langs[2];
    if (n <= 0 || threads <= 0 || parse_langs(lang, langs)) {
        fprintf(stderr, "eval-ocr: bad --n / --threads / --lang\n");
        return 2;
    }
    setenv("OMP_THREAD_LIMIT", "1", 0); /* one core per engine; before tesseract starts */
    eval_ctx c = {0};
    c.docs = fr_xcalloc((size_t)n * 2, sizeof *c.docs);
    pthread_mutex_init(&c.mu, NULL);
    c.cfg[0].lang = tl[0];
    c.cfg[1].lang = tl[1];
    for (int l = 0; l < 2; l++) c.cfg[l].kind = kind, c.cfg[l].ppocr_dir = models;
    for (int l = 0; l < 2; l++) {
        if (!langs[l]) continue;
        for (int i = 0; i < n; i++) {
            eval_doc *d = &c.docs[c.n];
            d->index = i;
            uint64_t s = seed * 1000003ull + (uint64_t)i * 2 + (uint64_t)l;
            if (clean) fr_doc_opts_clean(&d->opts, s), d->opts.chinese = l == 1;
            else fr_doc_opts_random(&d->opts, l == 1, s);
            fr_err err = {0};
            if (fr_doc_render(&d->opts, &d->img, &d->truth, &err)) {
                fprintf(stderr, "eval-ocr: %s\n", err.msg);
                return 1;
            }
            fr_density den;
            fr_density_measure(&d->img, &den);
            d->density = den.score;
            c.n++;
        }
    }
    /* OCR */
    double t0 = fr_time_s();
    pthread_t th[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, eval_worker, &c);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double wall = fr_time_s() - t0;
    if (c.err) {
        fprintf(stderr, "eval-ocr: %s\n", c.err);
        return 1;
    }
    printf("eval-ocr: %d documents per language, %s, seed %llu, %d threads\n", n,
           clean ? "clean" : "degraded (100-150 dpi, +-3 deg, noise, JPEG)",
           (unsigned long long)seed, threads);
    printf("%-8s %6s %9s %8s %8s %8s %8s %8s %8s %10s %10s\n", "lang", "docs", "invoice#", "amount",
           "date", "payee", "all4", "currency", "all5", "ms/page", "cpu-ms/pg");
    float dmin_doc = 1;
    double cpu_all = 0;
    for (int l = 0; l < 2; l++) {
        if (!langs[l]) continue;
        int cnt = 0, hit[7] = {0};
        double ms = 0, cpu = 0;
        for (int i = 0; i < c.n; i++) {
            eval_doc *d = &c.docs[i];
            if (d->opts.chinese != (l == 1)) continue;
            cnt++;
            ms += d->ocr_ms;
            cpu += d->cpu_ms;
            cpu_all += d->cpu_ms;
            if (d->density < dmin_doc) dmin_doc = d->density;
            char a[128], b[128];
            fr_fields_norm_id(d->got.invoice_no, a, sizeof a);
            fr_fields_norm_id(d->truth.invoice_no, b, sizeof b);
            bool h0 = !strcmp(a, b);
            bool h1 = !strcmp(d->got.amount, d->truth.amount);
            bool h2 = !strcmp(d->got.date, d->truth.date);
            fr_fields_norm_payee(d->got.payee, a, sizeof a);
            fr_fields_norm_payee(d->truth.payee, b, sizeof b);
            bool h3 = !strcmp(a, b);
            bool h4 = !strcmp(d->got.currency, d->truth.currency);
            hit[0] += h0, hit[1] += h1, hit[2] += h2, hit[3] += h3, hit[4] += h0 && h1 && h2 && h3;
            hit[5] += h4, hit[6] += h0 && h1 && h2 && h3 && h4;
            if (verbose && !(h0 && h1 && h2 && h3 && h4))
                fprintf(stderr, "miss %s-%04d %s dpi %d rot %.1f noise %.0f q %d: inv [%s|%s] "
                                "amt [%s|%s] cur [%s|%s] date [%s|%s] payee [%s|%s]\n",
                        l ? "zh" : "en", d->index, d->opts.receipt ? "receipt" : "invoice",
                        d->opts.dpi, d->opts.rotate_deg, d->opts.noise, d->opts.jpeg_quality,
                        d->got.invoice_no, d->truth.invoice_no, d->got.amount, d->truth.amount,
                        d->got.currency, d->truth.currency, d->got.date, d->truth.date,
                        d->got.payee, d->truth.payee);
        }
        printf("%-8s %6d %8.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %10.1f %10.1f\n",
               tl[l], cnt, 100.0 * hit[0] / cnt, 100.0 * hit[1] / cnt, 100.0 * hit[2] / cnt,
               100.0 * hit[3] / cnt, 100.0 * hit[4] / cnt, 100.0 * hit[5] / cnt,
               100.0 * hit[6] / cnt, ms / cnt, cpu / cnt);
    }
    printf("throughput: %.2f pages/s on %d threads (%.1f ms wall per page); %.2f pages/s per "
           "core from CPU time\n", c.n / wall, threads, wall * 1e3 / c.n, 1e3 * c.n / cpu_all);
    /* density separation */
    float pmax = 0, psum = 0, dsum = 0;
    int np = 0;
    double dms = 0;
    for (int k = 0; k < FR_DOC_PHOTO_KINDS; k++)
        for (int s = 0; s < 8; s++) {
            fr_image ph;
            fr_doc_photo(k, 1000 + 37 * (uint32_t)s, 750 + 23 * (uint32_t)s, (uint64_t)(k * 100 + s), &ph);
            fr_density den;
            struct timespec c0, c1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            fr_density_measure(&ph, &den);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            dms += (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
            if (den.score > pmax) pmax = den.score;
            psum += den.score;
            np++;
            fr_image_free(&ph);
        }
    for (int i = 0; i < c.n; i++) dsum += c.docs[i].density;
    printf("density: documents min %.3f mean %.3f; photo-like (%d) max %.3f mean %.3f; margin "
           "%.3f; default threshold %.2f; %.2f CPU-ms per ~0.8 MP photo\n",
           dmin_doc, dsum / c.n, np, pmax, psum / np, dmin_doc - pmax,
           FR_DENSITY_DEFAULT_THRESHOLD, dms / np);
    for (int i = 0; i < c.n; i++) fr_image_free(&c.docs[i].img);
    free(c.docs);
    pthread_mutex_destroy(&c.mu);
    return 0;
}
