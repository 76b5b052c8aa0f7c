/* bench_onnx.c — the CPU ONNX executor (backend/onnx_exec.h) on the three PP-OCR models.
 *
 *   make build/bench_onnx && build/bench_onnx [--threads N] [--reps R] [--models DIR] [--only det|rec|cls]
 *
 * Cases: det on one page (1, 3, 960, 736), rec on a batch of 8 lines (8, 3, 48, 320), cls on a
 * batch of 8 lines (8, 3, 48, 192). Inputs are a deterministic pattern in [-1, 1]; one warm-up
 * run, then R timed runs (default 5) of fr_onnx_sess_run; prints min and median milliseconds of
 * wall time and of the process's CPU time (all threads: on a shared machine, the CPU time per
 * run is the cost per core that contention inflates least).
 * --threads is the session's n_threads (the executor's own loops); OpenBLAS's threads follow
 * OPENBLAS_NUM_THREADS (set both for a thread count; bench/RESULTS.md gives the commands).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/onnx_exec.h"

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench(const char *dir, const char *file, const int64_t *dims, int threads, int reps) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load(path, &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.n_threads = threads;
    fr_onnx_sess *s = fr_onnx_sess_new(m, &o, &err);
    if (!s) {
        fprintf(stderr, "%s\n", err.msg);
        fr_onnx_model_free(m);
        return -1;
    }
    fr_onnx_arr in = {.rank = 4};
    int64_t n = 1;
    for (int i = 0; i < 4; i++) n *= in.dims[i] = dims[i];
    in.data = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) in.data[i] = (float)((i * 7919 % 2001) - 1000) / 1000.0f;
    fr_onnx_arr out;
    double *t = calloc((size_t)reps, sizeof *t), *cpu = calloc((size_t)reps, sizeof *cpu);
    int rc = 0;
    for (int r = -1; r < reps && rc == 0; r++) {
        const double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        rc = fr_onnx_sess_run(s, &in, 1, &out, 1, NULL, &err);
        if (r >= 0) {
            t[r] = clock_ms(CLOCK_MONOTONIC) - t0;
            cpu[r] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    }
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
    } else {
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
        printf("%-36s (%lld, %lld, %lld, %lld)  threads %d  wall min %7.1f median %7.1f ms  "
               "cpu min %7.1f median %7.1f ms\n", file, (long long)dims[0], (long long)dims[1],
               (long long)dims[2], (long long)dims[3], threads, t[0], t[reps / 2], cpu[0],
               cpu[reps / 2]);
    }
    free(t);
    free(cpu);
    free(in.data);
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    int threads = 1, reps = 5;
    const char *dir = "models/ppocr", *only = "";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--models")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--models DIR] [--only det|rec|cls]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    int rc = 0;
    if (!*only || !strcmp(only, "det"))
        rc |= bench(dir, "ch_PP-OCRv4_det_infer.onnx", (const int64_t[]){1, 3, 960, 736}, threads, reps);
    if (!*only || !strcmp(only, "rec"))
        rc |= bench(dir, "ch_PP-OCRv4_rec_infer.onnx", (const int64_t[]){8, 3, 48, 320}, threads, reps);
    if (!*only || !strcmp(only, "cls"))
        rc |= bench(dir, "ch_ppocr_mobile_v2.0_cls_infer.onnx", (const int64_t[]){8, 3, 48, 192}, threads, reps);
    return rc ? 1 : 0;
}
