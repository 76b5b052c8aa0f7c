/* final.c — what the response's final `frugal` figure costs (docs/METERING.md, "Response figures").
 *
 *   1. CPU only (the estimate source, no NVML): the time of fr_meter_request_end with a summary
 *      (it reads the CPU source and settles the CPU's accounting) against one without a summary
 *      (what the handler's own refusals pay), over N requests of one 1 ms CPU step each, with the
 *      sampler running at 100 ms. Every summary must be final.
 *   2. One GPU (the fake NVML library in rate mode, 300 W, a counter that moves at every read):
 *      the wait in fr_meter_request_final after a 20 ms GPU step, per sample period.
 *
 * Usage: final N_CPU N_GPU FAKENVML_LIB SCRIPT_DIR   (bench/meter/run.sh builds and runs it)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meter/meter.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void busy(double s) {
    double t0 = fr_time_s();
    volatile double x = 0;
    while (fr_time_s() - t0 < s) x += 1;
}

static void cpu_part(int n) {
    fr_meter_config c;
    fr_meter_config_default(&c);
    c.nvml = false;
    c.cpu_source = 2; /* the estimate: the same on every machine */
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    if (!m) {
        fprintf(stderr, "meter: %s\n", err.msg);
        exit(1);
    }
    double *with = malloc((size_t)n * sizeof *with), *without = malloc((size_t)n * sizeof *without);
    int n_final = 0;
    for (int i = 0; i < 2 * n; i++) {
        fr_meter_req *r = fr_meter_request_begin(m, NULL);
        fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_NLU, FR_METER_DEV_CPU);
        busy(0.001);
        fr_meter_step_end(m, s);
        fr_meter_req_result res = {.status = FR_REQ_OK, .http_status = 200, .ttft_s = -1, .slo_met = -1};
        fr_meter_req_summary sum;
        double t0 = fr_time_s();
        fr_meter_request_end(m, r, &res, i % 2 ? NULL : &sum);
        double dt = fr_time_s() - t0;
        if (i % 2) without[i / 2] = dt;
        else {
            with[i / 2] = dt;
            n_final += sum.final && sum.joules > 0;
        }
    }
    printf("cpu: %d requests: request_end with summary p50 %.2f us, p99 %.2f us; without p50 %.2f us, "
           "p99 %.2f us; %d of %d summaries final and > 0 J\n",
           n, 1e6 * pct(with, n, 0.5), 1e6 * pct(with, n, 0.99), 1e6 * pct(without, n, 0.5),
           1e6 * pct(without, n, 0.99), n_final, n);
    free(with);
    free(without);
    fr_meter_close(m);
}

static void gpu_part(int n, double sample_ms, const char *lib, const char *dir) {
    char script[512];
    snprintf(script, sizeof script, "%s/nvml.script", dir);
    FILE *f = fopen(script, "w");
    if (!f) {
        perror(script);
        exit(1);
    }
    fputs("count 1\nname 0 Fake\nrate 0 300 1000000\n", f);
    fclose(f);
    setenv("FAKENVML_SCRIPT", script, 1);
    fr_meter_config c;
    fr_meter_config_default(&c);
    c.sample_ms = sample_ms;
    c.cpu_source = 2;
    snprintf(c.nvml_lib, sizeof c.nvml_lib, "%s", lib);
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    if (!m) {
        fprintf(stderr, "meter: %s\n", err.msg);
        exit(1);
    }
    double *w = malloc((size_t)n * sizeof *w), dev = 0;
    int n_final = 0;
    for (int i = 0; i < n; i++) {
        fr_meter_req *r = fr_meter_request_begin(m, NULL);
        char id[64];
        snprintf(id, sizeof id, "%s", fr_meter_request_id(r));
        fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
        busy(0.02);
        fr_meter_step_end(m, s);
        fr_meter_req_result res = {.status = FR_REQ_OK, .http_status = 200, .ttft_s = -1, .slo_met = -1};
        fr_meter_req_summary sum, fin;
        fr_meter_request_end(m, r, &res, &sum);
        double t0 = fr_time_s();
        bool ok = fr_meter_request_final(m, id, &fin);
        w[i] = fr_time_s() - t0;
        if (ok) {
            n_final++;
            dev += fabs(sum.joules - fin.joules) / fin.joules;
            if (getenv("BENCH_VERBOSE") && i < 5) printf("  provisional %.4f J, final %.4f J\n", sum.joules, fin.joules);
        }
    }
    printf("gpu (300 W, sample %.0f ms, bound %.0f ms): %d requests: final figure waited p50 %.1f ms, "
           "p99 %.1f ms, max %.1f ms; %d final; provisional vs final |diff| mean %.2f %%\n",
           sample_ms, 1e3 * fr_meter_final_wait_s(m), n, 1e3 * pct(w, n, 0.5), 1e3 * pct(w, n, 0.99),
           1e3 * pct(w, n, 1.0), n_final, n_final ? 100 * dev / n_final : 0);
    free(w);
    fr_meter_close(m);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: final N_CPU N_GPU FAKENVML_LIB SCRIPT_DIR\n");
        return 2;
    }
    fr_log_level = FR_LOG_WARN;
    cpu_part(atoi(argv[1]));
    gpu_part(atoi(argv[2]), 100, argv[3], argv[4]);
    gpu_part(atoi(argv[2]), 20, argv[3], argv[4]);
    return 0;
}
