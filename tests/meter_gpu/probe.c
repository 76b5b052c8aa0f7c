/* probe.c — the meter on a real NVIDIA GPU (not part of `make test`: it needs a GPU and its
 * driver). Build from the repository root and run on the GPU host:
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Isrc -I/usr/include/cjson tests/meter_gpu/probe.c \
 *      $(find src/meter -name '*.c') src/base/base.c -o build/meter_probe \
 *      -lsqlite3 -lcurl -lz -lcjson -lm -pthread -ldl
 *   build/meter_probe
 *
 * 1. NVML through the meter's own dlopen path: device names, every field the sampler reads.
 * 2. The energy counter's update period: poll nvmlDeviceGetTotalEnergyConsumption every ~0.2 ms
 *    for 2 s and report the intervals between changes.
 * 3. Counter vs averaged power around a 300 ms burst: the slope of the counter follows the burst
 *    within an update period, nvmlDeviceGetPowerUsage (1-s average on Hopper) lags it.
 * 4. Attribution on real energy: synthetic requests whose steps are GPU kernels (an FMA loop
 *    launched through the CUDA driver API, loaded with dlopen — no nvcc needed), single and
 *    batched, with idle gaps; prints each request's joules and checks attributed + idle =
 *    measured, and the counter against the integrated power gauge.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meter/ledger.h"
#include "meter/meter.h"
#include "meter/sources.h"

/* ---- CUDA driver API through dlopen ---- */
typedef int (*cu_i)(unsigned);
typedef int (*cu_dev)(int *, int);
typedef int (*cu_ctx)(void **, unsigned, int);
typedef int (*cu_mod)(void **, const void *);
typedef int (*cu_fn)(void **, void *, const char *);
typedef int (*cu_alloc)(unsigned long long *, size_t);
typedef int (*cu_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);
typedef int (*cu_sync)(void);

static cu_launch launch;
static cu_sync sync_;
static void *kernel;
static unsigned long long dbuf;

static const char *ptx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry burn(.param .u64 out, .param .u32 iters) {\n"
    "  .reg .f32 %f<5>; .reg .u32 %r<4>; .reg .pred %p; .reg .u64 %rd<3>;\n"
    "  ld.param.u32 %r1, [iters];\n"
    "  mov.f32 %f1, 0f3F800000; mov.f32 %f2, 0f3F000001; mov.f32 %f3, 0f00000000; mov.f32 %f4, 0f3F000000;\n"
    "  mov.u32 %r2, 0;\n"
    "LOOP:\n"
    "  fma.rn.f32 %f3, %f1, %f2, %f3;\n  fma.rn.f32 %f4, %f1, %f2, %f4;\n"
    "  fma.rn.f32 %f1, %f3, %f2, %f1;\n  fma.rn.f32 %f2, %f4, %f1, %f2;\n"
    "  add.u32 %r2, %r2, 1;\n  setp.lt.u32 %p, %r2, %r1;\n  @%p bra LOOP;\n"
    "  ld.param.u64 %rd1, [out];\n  add.f32 %f3, %f3, %f4;\n  st.global.f32 [%rd1], %f3;\n  ret;\n}\n";

static int cuda_init(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return -1;
    cu_i init;
    cu_dev dev;
    cu_ctx ctx;
    cu_mod mod;
    cu_fn fn;
    cu_alloc alloc;
    void *p;
#define L(v, n) p = dlsym(lib, n), memcpy(&v, &p, sizeof p)
    L(init, "cuInit");
    L(dev, "cuDeviceGet");
    L(ctx, "cuCtxCreate_v2");
    L(mod, "cuModuleLoadData");
    L(fn, "cuModuleGetFunction");
    L(alloc, "cuMemAlloc_v2");
    L(launch, "cuLaunchKernel");
    L(sync_, "cuCtxSynchronize");
    int d;
    void *c, *m;
    if (init(0) || dev(&d, 0) || ctx(&c, 0, d) || mod(&m, ptx) || fn(&kernel, m, "burn") || alloc(&dbuf, 64)) return -2;
    return 0;
}

static void burn(unsigned iters) {
    unsigned it = iters;
    void *args[] = {&dbuf, &it};
    launch(kernel, 132 * 16, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    sync_();
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- direct NVML for the fast polls ---- */
typedef int (*nv_energy)(void *, unsigned long long *);
typedef int (*nv_power)(void *, unsigned *);
typedef int (*nv_handle)(unsigned, void **);
typedef int (*nv_init)(void);
static nv_energy energy;
static nv_power power;
static void *gpu;

static int nvml_direct(void) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return -1;
    nv_init in;
    nv_handle h;
    void *p;
    L(in, "nvmlInit_v2");
    L(h, "nvmlDeviceGetHandleByIndex_v2");
    L(energy, "nvmlDeviceGetTotalEnergyConsumption");
    L(power, "nvmlDeviceGetPowerUsage");
    return in() || h(0, &gpu) ? -2 : 0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- rows ---- */
static void on_row(void *ctx, const fr_ledger_row *r) {
    (void)ctx;
    printf("  row %-4s %-8s stages %-16s %8.2f J  gpu %7.3f s  $%.8f  source %s%s\n", r->req_id, r->status, r->stages,
           r->joules, r->occupancy_s, r->usd_total, r->energy_source, r->incomplete ? " INCOMPLETE" : "");
}

int main(void) {
    fr_log_level = FR_LOG_INFO;
    /* 1. fields through the meter's loader */
    char why[256];
    fr_nvml *n = fr_nvml_open("libnvidia-ml.so.1", why, sizeof why);
    printf("1. %s\n", why);
    if (!n) return 1;
    for (int i = 0; i < fr_nvml_count(n); i++) {
        fr_nvml_reading r;
        fr_nvml_read(n, i, &r);
        printf("   gpu%d %s: energy rc %d %llu mJ, power rc %d %.1f W, util rc %d %u%%, mem rc %d %.1f/%.1f GiB, "
               "SM rc %d %u MHz, temp rc %d %u C\n",
               i, fr_nvml_name(n, i), r.energy_rc, r.energy_mj, r.power_rc, r.power_mw / 1000.0, r.util_rc, r.util_gpu,
               r.mem_rc, r.mem_used / 1073741824.0, r.mem_total / 1073741824.0, r.clock_rc, r.sm_mhz, r.temp_rc, r.temp_c);
    }
    fr_nvml_close(n);
    if (nvml_direct() || cuda_init()) {
        printf("no direct NVML or CUDA driver: stopping here\n");
        return 1;
    }
    /* calibrate: iterations for ~100 ms */
    burn(1000);
    double t0 = fr_time_s();
    burn(200000);
    double per = (fr_time_s() - t0) / 200000;
    unsigned it100 = (unsigned)(0.1 / per);
    printf("   kernel: %.3f us per iteration, %u iterations per 100 ms\n", per * 1e6, it100);

    /* 2. update period of the counter, idle and busy */
    for (int busy = 0; busy < 2; busy++) {
        double times[20000];
        int nt = 0;
        unsigned long long last = 0, v;
        energy(gpu, &last);
        t0 = fr_time_s();
        while (fr_time_s() - t0 < 2.0 && nt < 20000) {
            if (busy) {
                unsigned it = it100 / 50; /* 2 ms kernels back to back */
                void *args[] = {&dbuf, &it};
                launch(kernel, 132 * 16, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
            }
            if (energy(gpu, &v) == 0 && v != last) {
                times[nt++] = fr_time_s();
                last = v;
            }
            if (!busy) sleep_s(0.0002);
            else sync_();
        }
        double iv[20000];
        for (int i = 1; i < nt; i++) iv[i - 1] = (times[i] - times[i - 1]) * 1e3;
        qsort(iv, (size_t)(nt - 1), sizeof iv[0], cmp);
        if (nt > 2)
            printf("2. counter changes while %s: %d in 2 s; interval ms min %.1f median %.1f p90 %.1f max %.1f\n",
                   busy ? "busy" : "idle", nt, iv[0], iv[(nt - 1) / 2], iv[(nt - 1) * 9 / 10], iv[nt - 2]);
    }

    /* 3. a 300 ms burst: counter slope vs averaged power, 20 ms resolution */
    printf("3. burst of 300 ms at t = 0.5 s (t s, counter-slope W, NVML power W):\n");
    {
        unsigned long long e0, e1;
        unsigned pw;
        double tb = fr_time_s(), tp = tb;
        energy(gpu, &e0);
        int launched = 0;
        while (fr_time_s() - tb < 2.5) {
            double t = fr_time_s() - tb;
            if (!launched && t >= 0.5) {
                unsigned it = it100 * 3;
                void *args[] = {&dbuf, &it};
                launch(kernel, 132 * 16, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
                launched = 1;
            }
            sleep_s(0.1);
            energy(gpu, &e1);
            power(gpu, &pw);
            double now = fr_time_s();
            printf("   %.2f %7.1f %7.1f\n", now - tb, (double)(e1 - e0) / 1000.0 / (now - tp), pw / 1000.0);
            e0 = e1;
            tp = now;
        }
        sync_();
    }

    /* 4. attribution through the meter on real energy */
    fr_meter_config c;
    fr_meter_config_default(&c);
    c.sample_ms = 20;
    c.cpu_source = 0;
    c.on_row = on_row;
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    if (!m) {
        printf("meter: %s\n", err.msg);
        return 1;
    }
    printf("4. attribution (sampler every %.0f ms):\n", c.sample_ms);
    fr_meter_req_info in = {0};
    in.route = "probe";
    in.modality = "text";
    const char *ids[] = {"A", "B", "C", "D", "E"};
    fr_meter_req *r[5];
    for (int i = 0; i < 5; i++) {
        in.id = ids[i];
        r[i] = fr_meter_request_begin(m, &in);
    }
    int g = fr_meter_dev_gpu(0);
    /* A alone 100 ms; A+B batch 100 ms (B weight 3); idle 500 ms; C 300 ms; D and E share 4 x 50 ms */
    fr_meter_share s1 = {r[0], 1, FR_MSTAGE_PREFILL};
    fr_meter_step *st = fr_meter_step_begin(m, g, &s1, 1);
    burn(it100);
    fr_meter_step_end(m, st);
    fr_meter_share s2[2] = {{r[0], 1, FR_MSTAGE_DECODE}, {r[1], 3, FR_MSTAGE_DECODE}};
    st = fr_meter_step_begin(m, g, s2, 2);
    burn(it100);
    fr_meter_step_end(m, st);
    sleep_s(0.5);
    fr_meter_share s3 = {r[2], 1, FR_MSTAGE_DECODE};
    st = fr_meter_step_begin(m, g, &s3, 1);
    burn(it100 * 3);
    fr_meter_step_end(m, st);
    for (int k = 0; k < 4; k++) {
        fr_meter_share s4[2] = {{r[3], 1, FR_MSTAGE_DECODE}, {r[4], 1, FR_MSTAGE_DECODE}};
        st = fr_meter_step_begin(m, g, s4, 2);
        burn(it100 / 2);
        fr_meter_step_end(m, st);
    }
    for (int i = 0; i < 5; i++) fr_meter_request_end(m, r[i], NULL, NULL);
    sleep_s(0.3);
    fr_meter_flush(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    for (int d = 0; d < t.n_dev; d++)
        printf("   %s (%s): measured %.2f J = attributed %.2f + idle %.2f (diff %.2e)\n", t.name[d],
               fr_meter_source_name(t.source[d]), t.measured_j[d], t.attributed_j[d], t.idle_j[d],
               t.measured_j[d] - t.attributed_j[d] - t.idle_j[d]);
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    printf("   /metrics excerpt:\n");
    for (char *line = strtok(fr_buf_cstr(&b), "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, "frugal_gpu_power_watts{", 23) || !strncmp(line, "frugal_energy_joules_total{", 27) ||
            !strncmp(line, "frugal_idle_energy_joules_total{device=\"gpu0\"", 45))
            printf("     %s\n", line);
    fr_buf_free(&b);
    fr_meter_close(m);
    return 0;
}
