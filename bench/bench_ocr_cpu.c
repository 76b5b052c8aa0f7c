/* bench_ocr_cpu.c — OCR pages per second per CPU core, tesseract against PP-OCR, warm engines in
 * one process: what a server's OCR worker (one engine per core) pays per page.
 *
 *   build/bench_ocr_cpu PAGES [--engine tesseract|ppocr]... [--reps N] [--out DIR]
 *                       [--rec-min-w W] [--limit-side L] [--rec-batch B]
 *                       [--no-steps | --steps-only]
 *
 * PAGES holds page images (*.png, *.jpg, *.webp; bench/ocr_eval/gen_invoices.py writes them). Each
 * engine is a pool of one (fr_ocr_pool_new, the configuration `frugal ocr` uses: tesseract reads
 * eng+chi_sim when chi_sim is installed, PP-OCR detects the script), and each page goes through
 * the real image stage (fr_image_stage_run with force_ocr: decode, density, OCR) from its bytes in
 * memory. One untimed page first (the engine's first run), then every page REPS times; the figure
 * is process CPU seconds (CLOCK_PROCESS_CPUTIME_ID, every thread of the process) per page, and
 * pages/s per core = 1 / that. Run it with OMP_THREAD_LIMIT=1 and OPENBLAS_NUM_THREADS=1 so that
 * each engine stays on one core (the script bench/ocr_cpu.sh does).
 *
 * --out DIR writes DIR/ENGINE/NAME.out.json ({"fields":..., "ocr":{"text":...}}) of the first rep,
 * which bench/ocr_eval/score.py scores against the generator's truth. For PP-OCR the steps of the
 * page pipeline (fr_ppocr_times) are printed from a separate pass over the decoded pages on an
 * engine of its own (--no-steps skips it), with its CPU seconds per page and, with --out, its
 * texts in DIR/ppocr-steps; --rec-min-w, --limit-side and --rec-batch override that engine's settings
 * (fr_ppocr_opts; the pool keeps the defaults), to measure what a setting costs and reads;
 * --steps-only skips the pools and runs that pass alone. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "stages/image/image.h"
#include "stages/ocr/fields.h"
#include "stages/ocr/image_stage.h"
#include "stages/ocr/ocr.h"
#include "stages/ocr/ppocr.h"

enum { MAX_PAGES = 2048 };

typedef struct page {
    char name[256];
    char *data;
    size_t len;
} page;

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const page *)a)->name, ((const page *)b)->name);
}

static int load_pages(const char *dir, page *p, int cap) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "bench_ocr_cpu: cannot open %s\n", dir);
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < cap;) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || (strcmp(dot, ".png") && strcmp(dot, ".jpg") && strcmp(dot, ".webp"))) continue;
        char path[1024];
        int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (w < 0 || (size_t)w >= sizeof path) continue;
        fr_err err = {0};
        p[n].data = fr_read_file(path, 64u << 20, &p[n].len, &err);
        if (!p[n].data) {
            fprintf(stderr, "bench_ocr_cpu: %s: %s\n", path, err.msg);
            continue;
        }
        snprintf(p[n].name, sizeof p[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(p, (size_t)n, sizeof *p, by_name);
    return n;
}

static void write_out(const char *dir, const char *name, const char *text) {
    char path[1024], base[256];
    snprintf(base, sizeof base, "%s", name);
    char *dot = strrchr(base, '.');
    if (dot) *dot = 0;
    int w = snprintf(path, sizeof path, "%s/%s.out.json", dir, base);
    if (w < 0 || (size_t)w >= sizeof path) return;
    fr_fields f;
    fr_fields_extract(text, &f);
    cJSON *o = cJSON_CreateObject(), *fo = cJSON_AddObjectToObject(o, "fields");
    cJSON_AddStringToObject(fo, "invoice_no", f.invoice_no);
    cJSON_AddStringToObject(fo, "amount", f.amount);
    cJSON_AddStringToObject(fo, "currency", f.currency);
    cJSON_AddStringToObject(fo, "date", f.date);
    cJSON_AddStringToObject(fo, "payee", f.payee);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "ocr"), "text", text);
    char *s = cJSON_Print(o);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(s, fp);
        fclose(fp);
    }
    free(s);
    cJSON_Delete(o);
}

/* The PP-OCR steps over the pages, decoded to gray as the image stage does, on one engine with
 * opts o (with out: the texts into out/ppocr-steps/NAME.out.json). */
static void ppocr_steps(const fr_ppocr_opts *o, const page *pages, int n, const char *out) {
    fr_err err = {0};
    char odir[1024] = "";
    if (out) {
        snprintf(odir, sizeof odir, "%s/ppocr-steps", out);
        mkdir(out, 0755), mkdir(odir, 0755);
    }
    fr_image *gray = fr_xcalloc((size_t)n, sizeof *gray);
    for (int i = 0; i < n; i++)
        if (fr_img_decode((const uint8_t *)pages[i].data, pages[i].len, NULL, NULL, 1, &gray[i], &err))
            fprintf(stderr, "  %s: %s\n", pages[i].name, err.msg);
    fr_ppocr_models *m = fr_ppocr_models_load(NULL, &err);
    fr_ppocr *e = m ? fr_ppocr_new(m, o, &err) : NULL;
    if (!e) {
        fprintf(stderr, "bench_ocr_cpu: ppocr steps: %s\n", err.msg);
        if (m) fr_ppocr_models_free(m);
        for (int i = 0; i < n; i++) fr_image_free(&gray[i]);
        free(gray);
        return;
    }
    const double c0 = cpu_s();
    for (int i = 0; i < n; i++) {
        fr_ocr_result r;
        if (!gray[i].pix || fr_ppocr_run(e, &gray[i], NULL, &r, &err) != FR_OCR_OK) continue;
        if (odir[0]) write_out(odir, pages[i].name, r.text ? r.text : "");
        fr_ocr_result_free(&r);
    }
    const double cpu = cpu_s() - c0;
    double t[FR_PPOCR_T_N], sum = 0;
    long np = 0;
    fr_ppocr_times(e, t, &np);
    printf("ppocr steps (thread ms per page, %ld pages):", np);
    for (int k = 0; k < FR_PPOCR_T_N; k++) {
        printf(" %s %.1f", fr_ppocr_step_name((fr_ppocr_step)k), np ? 1e3 * t[k] / np : 0);
        sum += t[k];
    }
    printf(" | total %.1f; CPU %.3f s/page (rec_min_w %u, limit_side %d, rec_batch %d)\n",
           np ? 1e3 * sum / np : 0, np ? cpu / np : 0, o->rec_min_w, o->det.limit_side,
           o->rec_batch);
    fr_ppocr_free(e);
    fr_ppocr_models_free(m);
    for (int i = 0; i < n; i++) fr_image_free(&gray[i]);
    free(gray);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *engines[4];
    int n_eng = 0, reps = 1, steps = 1, steps_only = 0, rec_min_w = 0, limit_side = 0, rec_batch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--engine") && i + 1 < argc && n_eng < 4) engines[n_eng++] = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--rec-min-w") && i + 1 < argc) rec_min_w = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--limit-side") && i + 1 < argc) limit_side = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rec-batch") && i + 1 < argc) rec_batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-steps")) steps = 0;
        else if (!strcmp(argv[i], "--steps-only")) steps_only = 1;
        else if (!dir && argv[i][0] != '-') dir = argv[i];
        else dir = NULL, i = argc;
    }
    if (!dir || reps < 1 || reps > 100 || rec_min_w < 0 || limit_side < 0 || rec_batch < 0 || rec_batch > 64) {
        fprintf(stderr, "usage: bench_ocr_cpu PAGES [--engine tesseract|ppocr]... [--reps N] "
                        "[--out DIR] [--rec-min-w W] [--limit-side L] [--rec-batch B] [--no-steps | --steps-only]\n");
        return 2;
    }
    if (!n_eng) engines[n_eng++] = "tesseract", engines[n_eng++] = "ppocr";
    static page pages[MAX_PAGES];
    const int n = load_pages(dir, pages, MAX_PAGES);
    if (n <= 0) return 1;
    fr_ppocr_opts po = fr_ppocr_default_opts();
    if (rec_min_w) po.rec_min_w = (uint32_t)rec_min_w;
    if (limit_side) po.det.limit_side = limit_side;
    if (rec_batch) po.rec_batch = rec_batch;
    int rc = 0;
    for (int k = 0; k < n_eng; k++) {
        fr_err err = {0};
        fr_ocr_cfg oc = {0};
        if (fr_ocr_kind_parse(engines[k], &oc.kind, &err)) {
            fprintf(stderr, "bench_ocr_cpu: %s\n", err.msg);
            return 2;
        }
        char tdir[512];
        oc.lang = fr_ocr_tessdata_dir(&(fr_ocr_cfg){.lang = "chi_sim"}, tdir, sizeof tdir)
                      ? "eng+chi_sim"
                      : "eng";
        if (steps_only) {
            if (oc.kind == FR_OCR_KIND_PPOCR) ppocr_steps(&po, pages, n, out);
            continue;
        }
        fr_ocr_pool *pool = fr_ocr_pool_new(&oc, 1, &err);
        if (!pool) {
            fprintf(stderr, "bench_ocr_cpu: %s: %s\n", engines[k], err.msg);
            rc = 1;
            continue;
        }
        char odir[1024] = "";
        if (out) {
            mkdir(out, 0755);
            snprintf(odir, sizeof odir, "%s/%s", out, engines[k]);
            mkdir(odir, 0755);
        }
        fr_image_stage_cfg sc = {.force_ocr = true};
        fr_image_stage_result res;
        if (!fr_image_stage_run(pool, (const uint8_t *)pages[0].data, pages[0].len, NULL, &sc, &res,
                                &err))
            fr_image_stage_result_free(&res); /* the untimed first page */
        int failed = 0;
        double c0 = cpu_s(), w0 = fr_time_s();
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < n; i++) {
                if (fr_image_stage_run(pool, (const uint8_t *)pages[i].data, pages[i].len, NULL,
                                       &sc, &res, &err)) {
                    if (!r) fprintf(stderr, "  %s: %s\n", pages[i].name, err.msg);
                    failed++;
                    continue;
                }
                if (!r && odir[0]) write_out(odir, pages[i].name, res.ocr.text ? res.ocr.text : "");
                fr_image_stage_result_free(&res);
            }
        const double cpu = cpu_s() - c0, wall = fr_time_s() - w0, done = (double)n * reps - failed;
        printf("%s: %d pages x %d reps, %d failed: CPU %.3f s/page = %.2f pages/s per core; "
               "wall %.3f s/page\n",
               engines[k], n, reps, failed, done > 0 ? cpu / done : 0,
               cpu > 0 ? done / cpu : 0, done > 0 ? wall / done : 0);
        fr_ocr_pool_free(pool);
        if (steps && oc.kind == FR_OCR_KIND_PPOCR) ppocr_steps(&po, pages, n, out);
        rc |= failed > 0;
    }
    for (int i = 0; i < n; i++) free(pages[i].data);
    return rc;
}
