/* ppocr_pages.c — build-cuda/gpu-ppocr: the whole PP-OCR page pipeline (stages/ocr/ppocr.h:
 * detection, crops, classifier, recogniser, CTC, reading order) on real page images, with its
 * networks on the CPU executor and on CUDA (fr_ppocr_cuda_opts), then pages per second with
 * many pages in flight on one GPU.
 *
 *   gpu-ppocr [--threads T[,T2...]] [--cpu-threads C] [--no-cpu] [--seconds S] [--models DIR]
 *             PAGES OUT
 *
 * PAGES holds page images (*.png, *.jpg, *.webp; bench/ocr_eval/gen_invoices.py writes them with
 * their truth as NAME.json beside). For every page the program writes OUT/cpu/NAME.out.json and
 * OUT/cuda/NAME.out.json in the shape of `frugal ocr`'s output ({"fields": ..., "ocr": {"text":
 * ...}, "ocr_ms": ...}), so bench/ocr_eval/score.py scores both readers against the truth. Then:
 *   - "agree" lines: pages whose four fields are the same on both devices, and lines whose text
 *     is identical;
 *   - "pages/s" lines: the CPU with C threads (one engine each, one core each; --no-cpu skips
 *     it), and CUDA with T host threads (one engine each: its own streams, plans and graphs, made
 *     once), after two untimed passes that make every engine's plans and graphs, looping over
 *     the pages for S seconds; with a list of thread counts, one such measurement per count
 *     (the texts of the first count are the ones compared);
 *   - "steps" lines: thread-milliseconds per page of each step of the page pipeline (host steps
 *     and network runs, fr_ppocr_times) in the CPU pass and in each timed CUDA loop.
 * Exit status 1 when a page fails on either device (a decode failure counts), else 0.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "stages/image/image.h"
#include "stages/ocr/fields.h"
#include "stages/ocr/ocr.h"
#include "stages/ocr/ppocr.h"

enum { MAX_PAGES = 4096, MAX_THREADS = 64 };

typedef struct page {
    char name[256];
    fr_image img;
    char *text[2];   /* [0] CPU, [1] CUDA: the text read (malloc'd) */
    fr_fields f[2];  /* the fields of each */
    int n_lines[2];
} page;

typedef struct run_ctx {
    fr_ppocr **eng;   /* one engine per thread, made once: their plans and graphs persist */
    atomic_int slot;  /* the next thread's engine */
    page *pages;
    int n_pages, dev; /* dev: 0 CPU, 1 CUDA (which text / fields slot a pass fills) */
    int keep;         /* 1: store texts and fields (the first pass) */
    double seconds;   /* > 0: loop over the pages until this much time has passed */
    atomic_int next;  /* the next page index (a shared queue) */
    atomic_int done;  /* pages read in the timed loop */
    atomic_int failed;
    pthread_barrier_t *bar;
} run_ctx;

static int is_page(const char *n) {
    const char *d = strrchr(n, '.');
    return d && (!strcmp(d, ".png") || !strcmp(d, ".jpg") || !strcmp(d, ".webp"));
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const page *)a)->name, ((const page *)b)->name);
}

static int load_pages(const char *dir, page *p, int cap) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "gpu-ppocr: cannot open %s\n", dir);
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < cap;)
        if (is_page(e->d_name)) snprintf(p[n++].name, sizeof p[0].name, "%s", e->d_name);
    closedir(d);
    qsort(p, (size_t)n, sizeof *p, cmp_name);
    for (int i = 0; i < n; i++) {
        char path[1024];
        int w = snprintf(path, sizeof path, "%s/%s", dir, p[i].name);
        if (w < 0 || (size_t)w >= sizeof path) {
            fprintf(stderr, "gpu-ppocr: path too long in %s\n", dir);
            return -1;
        }
        fr_err err = {0};
        size_t len = 0;
        char *data = fr_read_file(path, 64u << 20, &len, &err);
        if (!data || fr_img_decode((const uint8_t *)data, len, NULL, NULL, 1, &p[i].img, &err)) {
            fprintf(stderr, "gpu-ppocr: %s: %s\n", path, err.msg);
            free(data);
            return -1;
        }
        free(data);
    }
    return n;
}

/* One page through engine e: the text and fields into the page's slot when keep. */
static int read_page(run_ctx *c, fr_ppocr *e, page *p) {
    fr_ocr_result r;
    fr_err err = {0};
    if (fr_ppocr_run(e, &p->img, NULL, &r, &err) != FR_OCR_OK) {
        fprintf(stderr, "gpu-ppocr: %s on %s: %s\n", p->name, c->dev ? "cuda" : "cpu", err.msg);
        return -1;
    }
    if (c->keep) {
        free(p->text[c->dev]);
        p->text[c->dev] = fr_xstrdup(r.text ? r.text : "");
        p->n_lines[c->dev] = (int)r.n_lines;
        fr_fields_extract(p->text[c->dev], &p->f[c->dev]);
    }
    fr_ocr_result_free(&r);
    return 0;
}

static void *worker(void *v) {
    run_ctx *c = v;
    fr_ppocr *e = c->eng[atomic_fetch_add(&c->slot, 1)];
    if (c->bar) pthread_barrier_wait(c->bar);
    const double t0 = fr_time_s();
    for (;;) {
        int i = atomic_fetch_add(&c->next, 1);
        if (c->seconds > 0) {
            if (fr_time_s() - t0 >= c->seconds) break;
            i %= c->n_pages;
        } else if (i >= c->n_pages) {
            break;
        }
        if (read_page(c, e, &c->pages[i])) {
            atomic_fetch_add(&c->failed, 1);
            continue;
        }
        atomic_fetch_add(&c->done, 1);
    }
    return NULL;
}

/* n engines with opts; NULL (the reason printed) when one cannot be made. */
static fr_ppocr **engines(const fr_ppocr_models *m, const fr_ppocr_opts *o, int n) {
    fr_ppocr **e = fr_xcalloc((size_t)n, sizeof *e);
    for (int i = 0; i < n; i++) {
        fr_err err = {0};
        if (!(e[i] = fr_ppocr_new(m, o, &err))) {
            fprintf(stderr, "gpu-ppocr: engine: %s\n", err.msg);
            for (int k = 0; k < i; k++) fr_ppocr_free(e[k]);
            free(e);
            return NULL;
        }
    }
    return e;
}

/* The engines' step times summed into t (pages into *pages). */
static void times_sum(fr_ppocr **e, int n, double t[FR_PPOCR_T_N], long *pages) {
    memset(t, 0, FR_PPOCR_T_N * sizeof *t);
    *pages = 0;
    for (int i = 0; i < n; i++) {
        double ti[FR_PPOCR_T_N];
        long pi;
        fr_ppocr_times(e[i], ti, &pi);
        for (int k = 0; k < FR_PPOCR_T_N; k++) t[k] += ti[k];
        *pages += pi;
    }
}

/* One line: thread-ms per page of every step between two sums (a: before, b: after). */
static void times_print(const char *what, const double a[FR_PPOCR_T_N], long pa,
                        const double b[FR_PPOCR_T_N], long pb) {
    long np = pb - pa;
    if (np <= 0) return;
    double all = 0;
    printf("gpu-ppocr steps %s (thread-ms per page, %ld pages):", what, np);
    for (int k = 0; k < FR_PPOCR_T_N; k++) {
        double ms = (b[k] - a[k]) * 1e3 / (double)np;
        all += ms;
        printf(" %s %.2f", fr_ppocr_step_name((fr_ppocr_step)k), ms);
    }
    printf(" | all %.2f\n", all);
}

static void engines_free(fr_ppocr **e, int n) {
    for (int i = 0; e && i < n; i++) fr_ppocr_free(e[i]);
    free(e);
}

/* A pass over the pages with n threads on c->eng: once (seconds 0) or looping for seconds. The
 * pages read per second (wall time of the whole pass). */
static double pass(run_ctx *c, int n, double seconds, int keep) {
    pthread_t th[MAX_THREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
    c->bar = &bar;
    c->seconds = seconds;
    c->keep = keep;
    atomic_store(&c->next, 0);
    atomic_store(&c->done, 0);
    atomic_store(&c->slot, 0);
    for (int t = 0; t < n; t++) pthread_create(&th[t], NULL, worker, c);
    pthread_barrier_wait(&bar); /* every thread has its engine */
    const double t0 = fr_time_s();
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    const double wall = fr_time_s() - t0;
    pthread_barrier_destroy(&bar);
    c->bar = NULL;
    return wall > 0 ? atomic_load(&c->done) / wall : 0;
}

static void write_out(const char *dir, const page *p, int dev) {
    char path[1024], base[256];
    snprintf(base, sizeof base, "%s", p->name);
    char *dot = strrchr(base, '.');
    if (dot) *dot = 0;
    int w = snprintf(path, sizeof path, "%s/%s.out.json", dir, base);
    if (w < 0 || (size_t)w >= sizeof path) return;
    cJSON *o = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(o, "fields");
    cJSON_AddStringToObject(f, "invoice_no", p->f[dev].invoice_no);
    cJSON_AddStringToObject(f, "amount", p->f[dev].amount);
    cJSON_AddStringToObject(f, "currency", p->f[dev].currency);
    cJSON_AddStringToObject(f, "date", p->f[dev].date);
    cJSON_AddStringToObject(f, "payee", p->f[dev].payee);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "ocr"), "text",
                            p->text[dev] ? p->text[dev] : "");
    cJSON_AddNumberToObject(o, "ocr_ms", 0);
    char *s = cJSON_Print(o);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(s, fp);
        fclose(fp);
    }
    free(s);
    cJSON_Delete(o);
}

static int same_fields(const fr_fields *a, const fr_fields *b) {
    return !strcmp(a->invoice_no, b->invoice_no) && !strcmp(a->amount, b->amount) &&
           !strcmp(a->date, b->date) && !strcmp(a->payee, b->payee) &&
           !strcmp(a->currency, b->currency);
}

/* Lines of a (split at '\n') also found, identical, in b. */
static int same_lines(const char *a, const char *b, int *total) {
    int same = 0;
    *total = 0;
    while (a && *a) {
        const char *e = strchr(a, '\n');
        size_t n = e ? (size_t)(e - a) : strlen(a);
        (*total)++;
        for (const char *q = b; q && *q;) {
            const char *qe = strchr(q, '\n');
            size_t m = qe ? (size_t)(qe - q) : strlen(q);
            if (m == n && !memcmp(a, q, n)) {
                same++;
                break;
            }
            q = qe ? qe + 1 : NULL;
        }
        a = e ? e + 1 : NULL;
    }
    return same;
}

int main(int argc, char **argv) {
    int threads = 8, cpu_threads = 0, no_cpu = 0, tl[16], ntl = 0;
    double seconds = 10;
    const char *models = NULL, *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            for (char *q = argv[++i]; *q && ntl < 16; q += *q == ',')
                tl[ntl++] = (int)strtol(q, &q, 10);
            threads = ntl ? tl[0] : 0;
        }
        else if (!strcmp(argv[i], "--cpu-threads") && i + 1 < argc) cpu_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) models = argv[++i];
        else if (!strcmp(argv[i], "--no-cpu")) no_cpu = 1;
        else if (!dir) dir = argv[i];
        else if (!out) out = argv[i];
    }
    if (!ntl) tl[ntl++] = threads;
    int bad_t = 0;
    for (int k = 0; k < ntl; k++) bad_t |= tl[k] < 1 || tl[k] > MAX_THREADS;
    if (!dir || !out || bad_t || cpu_threads < 0 || cpu_threads > MAX_THREADS) {
        fprintf(stderr, "usage: gpu-ppocr [--threads T] [--cpu-threads C] [--seconds S] "
                        "[--models DIR] PAGES OUT\n");
        return 2;
    }
    if (!cpu_threads) cpu_threads = FR_MIN(fr_n_cores(), MAX_THREADS);
    static page pages[MAX_PAGES];
    int n = load_pages(dir, pages, MAX_PAGES);
    if (n <= 0) return 1;
    fr_err err = {0};
    fr_ppocr_models *m = fr_ppocr_models_load(models, &err);
    if (!m) {
        fprintf(stderr, "gpu-ppocr: %s\n", err.msg);
        return 1;
    }
    char sub[2][1024];
    mkdir(out, 0755);
    for (int d = 0; d < 2; d++) {
        int w = snprintf(sub[d], sizeof sub[d], "%s/%s", out, d ? "cuda" : "cpu");
        if (w < 0 || (size_t)w >= sizeof sub[d]) return 2;
        mkdir(sub[d], 0755);
    }
    run_ctx c = {.pages = pages, .n_pages = n};
    /* the CPU reference: one pass, one core per engine */
    double cpu_pps = 0;
    int failed = 0;
    if (!no_cpu) {
        fr_ppocr_opts co = fr_ppocr_default_opts();
        if (!(c.eng = engines(m, &co, cpu_threads))) return 1;
        c.dev = 0;
        cpu_pps = pass(&c, cpu_threads, 0, 1);
        double t0[FR_PPOCR_T_N] = {0}, t1[FR_PPOCR_T_N];
        long p1;
        times_sum(c.eng, cpu_threads, t1, &p1);
        times_print("cpu", t0, 0, t1, p1);
        engines_free(c.eng, cpu_threads);
        failed = atomic_load(&c.failed);
    }
    /* CUDA: the engines made (weights uploaded), two untimed passes that make every engine's
     * plans and graphs (the first keeps the texts), then the timed loop */
    fr_ppocr_opts go = fr_ppocr_cuda_opts(0);
    double gpu_pps = 0, t_warm = 0;
    for (int k = 0; k < ntl; k++) {
        const int nt = tl[k];
        double t_make = fr_time_s();
        if (!(c.eng = engines(m, &go, nt))) return 1;
        c.dev = 1;
        double tw = fr_time_s();
        t_make = tw - t_make;
        pass(&c, nt, 0, k == 0);
        pass(&c, nt, 0, 0);
        tw = fr_time_s() - tw;
        failed += atomic_load(&c.failed);
        atomic_store(&c.failed, 0);
        double ta[FR_PPOCR_T_N], tb[FR_PPOCR_T_N];
        long pa, pb;
        times_sum(c.eng, nt, ta, &pa);
        const double pps = pass(&c, nt, seconds, 0);
        times_sum(c.eng, nt, tb, &pb);
        char what[64];
        snprintf(what, sizeof what, "cuda %d threads", nt);
        times_print(what, ta, pa, tb, pb);
        printf("gpu-ppocr %s: %.1f pages/s (engines made in %.1f s, two warm passes %.1f s)\n",
               what, pps, t_make, tw);
        fflush(stdout);
        failed += atomic_load(&c.failed);
        engines_free(c.eng, nt);
        if (pps > gpu_pps) gpu_pps = pps, threads = nt, t_warm = tw;
    }
    int agree = 0, lines = 0, lines_same = 0;
    for (int i = 0; i < n; i++) {
        write_out(sub[0], &pages[i], 0);
        write_out(sub[1], &pages[i], 1);
        agree += same_fields(&pages[i].f[0], &pages[i].f[1]);
        int t = 0;
        lines_same += same_lines(pages[i].text[0], pages[i].text[1], &t);
        lines += t;
    }
    if (!no_cpu)
        printf("gpu-ppocr agree: %d of %d pages with the same five fields on CPU and CUDA; %d of %d "
           "CPU lines read identically on CUDA (%.1f %%)\n",
           agree, n, lines_same, lines, lines ? 100.0 * lines_same / lines : 0.0);
    printf("gpu-ppocr pages/s: CPU %.2f (%d threads, %.3f per thread), CUDA %.1f (best: %d host "
           "threads, %.0f s loop over %d pages after %.1f s of two warm passes; target >= 50: "
           "%s)\n",
           cpu_pps, no_cpu ? 0 : cpu_threads, no_cpu ? 0 : cpu_pps / cpu_threads, gpu_pps,
           threads, seconds, n, t_warm, gpu_pps >= 50 ? "met" : "NOT met");
    printf("gpu-ppocr failures: %d\n", failed);
    for (int i = 0; i < n; i++) {
        fr_image_free(&pages[i].img);
        free(pages[i].text[0]);
        free(pages[i].text[1]);
    }
    fr_ppocr_models_free(m);
    return failed ? 1 : 0;
}
