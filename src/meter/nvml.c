/* nvml.c — NVML through dlopen: no build-time dependency on the driver.
 *
 * The library path is the configuration's (default "libnvidia-ml.so.1", FRUGAL_NVML_LIB
 * overrides in fr_meter_open); the test suite points it at build/libfakenvml.so, a scripted
 * stand-in exporting the same symbols, so every line here runs in CI.
 *
 * Signatures (NVML API reference): nvmlReturn_t is an int enum, nvmlDevice_t an opaque pointer.
 *   nvmlInit_v2(void); nvmlShutdown(void); nvmlErrorString(nvmlReturn_t) -> const char*
 *   nvmlDeviceGetCount_v2(unsigned *); nvmlDeviceGetHandleByIndex_v2(unsigned, nvmlDevice_t *)
 *   nvmlDeviceGetName(nvmlDevice_t, char *, unsigned)
 *   nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t, unsigned long long *mJ)   (Volta+)
 *   nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned *mW)
 *   nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *{unsigned gpu, memory})
 *   nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *{unsigned long long total, free, used})
 *   nvmlDeviceGetClockInfo(nvmlDevice_t, nvmlClockType_t (SM = 1), unsigned *MHz)
 *   nvmlDeviceGetTemperature(nvmlDevice_t, nvmlTemperatureSensors_t (GPU = 0), unsigned *C)
 * The _v2 entry points are tried first, then the unversioned ones.
 */
#include "meter/sources.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *nvml_dev;
typedef struct { unsigned int gpu, memory; } nvml_util;
typedef struct { unsigned long long total, free, used; } nvml_mem;

typedef int (*fn_init)(void);
typedef int (*fn_shutdown)(void);
typedef const char *(*fn_errstr)(int);
typedef int (*fn_count)(unsigned int *);
typedef int (*fn_handle)(unsigned int, nvml_dev *);
typedef int (*fn_name)(nvml_dev, char *, unsigned int);
typedef int (*fn_energy)(nvml_dev, unsigned long long *);
typedef int (*fn_power)(nvml_dev, unsigned int *);
typedef int (*fn_util)(nvml_dev, nvml_util *);
typedef int (*fn_mem)(nvml_dev, nvml_mem *);
typedef int (*fn_clock)(nvml_dev, int, unsigned int *);
typedef int (*fn_temp)(nvml_dev, int, unsigned int *);

struct fr_nvml {
    void *lib;                       /* dlopen handle */
    fn_shutdown shutdown;            /* nvmlShutdown */
    fn_errstr errstr;                /* nvmlErrorString (optional) */
    fn_energy energy;                /* optional: absent = NOT_SUPPORTED */
    fn_power power;                  /* optional */
    fn_util util;                    /* optional */
    fn_mem mem;                      /* optional */
    fn_clock clock;                  /* optional */
    fn_temp temp;                    /* optional */
    int n;                           /* devices */
    nvml_dev dev[FR_METER_MAX_GPUS]; /* handles */
    char name[FR_METER_MAX_GPUS][96];/* device names */
};

/* dlsym into a function pointer without the object/function pointer cast warning. */
static void *sym(void *lib, const char *a, const char *b) {
    void *p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    return p;
}
#define LOAD(dst, lib, a, b)                                 \
    do {                                                     \
        void *p_ = sym(lib, a, b);                           \
        memcpy(&(dst), &p_, sizeof p_);                      \
    } while (0)

fr_nvml *fr_nvml_open(const char *path, char *why, size_t why_n) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, why_n, "cannot load %s: %s", path, e ? e : "?");
        return NULL;
    }
    fr_nvml *n = fr_xcalloc(1, sizeof *n);
    n->lib = lib;
    fn_init init;
    fn_count count;
    fn_handle handle;
    fn_name name;
    LOAD(init, lib, "nvmlInit_v2", "nvmlInit");
    LOAD(n->shutdown, lib, "nvmlShutdown", NULL);
    LOAD(n->errstr, lib, "nvmlErrorString", NULL);
    LOAD(count, lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    LOAD(handle, lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    LOAD(name, lib, "nvmlDeviceGetName", NULL);
    LOAD(n->energy, lib, "nvmlDeviceGetTotalEnergyConsumption", NULL);
    LOAD(n->power, lib, "nvmlDeviceGetPowerUsage", NULL);
    LOAD(n->util, lib, "nvmlDeviceGetUtilizationRates", NULL);
    LOAD(n->mem, lib, "nvmlDeviceGetMemoryInfo", NULL);
    LOAD(n->clock, lib, "nvmlDeviceGetClockInfo", NULL);
    LOAD(n->temp, lib, "nvmlDeviceGetTemperature", NULL);
    if (!init || !count || !handle || !n->shutdown) {
        snprintf(why, why_n, "%s lacks nvmlInit/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex", path);
        dlclose(lib);
        free(n);
        return NULL;
    }
    int rc = init();
    if (rc != FR_NVML_SUCCESS) {
        snprintf(why, why_n, "nvmlInit failed: %s", fr_nvml_error(n, rc));
        dlclose(lib);
        free(n);
        return NULL;
    }
    unsigned int cnt = 0;
    rc = count(&cnt);
    if (rc != FR_NVML_SUCCESS || cnt == 0) {
        snprintf(why, why_n, rc ? "nvmlDeviceGetCount failed: %s" : "NVML reports no GPU%s",
                 rc ? fr_nvml_error(n, rc) : "");
        n->shutdown();
        dlclose(lib);
        free(n);
        return NULL;
    }
    if (cnt > FR_METER_MAX_GPUS) cnt = FR_METER_MAX_GPUS;
    for (unsigned int i = 0; i < cnt; i++) {
        rc = handle(i, &n->dev[n->n]);
        if (rc != FR_NVML_SUCCESS) {
            fr_warn("meter: NVML GPU %u: no handle (%s); skipped", i, fr_nvml_error(n, rc));
            continue;
        }
        if (!name || name(n->dev[n->n], n->name[n->n], sizeof n->name[0]) != FR_NVML_SUCCESS)
            n->name[n->n][0] = 0;
        n->name[n->n][sizeof n->name[0] - 1] = 0;
        n->n++;
    }
    if (n->n == 0) {
        snprintf(why, why_n, "no NVML GPU handle could be opened");
        fr_nvml_close(n);
        return NULL;
    }
    snprintf(why, why_n, "NVML %s: %d GPU%s", path, n->n, n->n == 1 ? "" : "s");
    return n;
}

int fr_nvml_count(const fr_nvml *n) { return n ? n->n : 0; }
const char *fr_nvml_name(const fr_nvml *n, int i) { return n && i >= 0 && i < n->n ? n->name[i] : ""; }

const char *fr_nvml_error(const fr_nvml *n, int rc) {
    static _Thread_local char buf[32];
    if (n && n->errstr) {
        const char *s = n->errstr(rc);
        if (s) return s;
    }
    snprintf(buf, sizeof buf, "NVML error %d", rc);
    return buf;
}

void fr_nvml_read(fr_nvml *n, int i, fr_nvml_reading *r) {
    memset(r, 0, sizeof *r);
    nvml_dev d = n->dev[i];
    r->energy_rc = n->energy ? n->energy(d, &r->energy_mj) : FR_NVML_NOT_LOADED;
    if (r->energy_rc == FR_NVML_ERROR_GPU_IS_LOST) { /* nothing else will answer */
        r->power_rc = r->util_rc = r->mem_rc = r->clock_rc = r->temp_rc = FR_NVML_ERROR_GPU_IS_LOST;
        return;
    }
    r->power_rc = n->power ? n->power(d, &r->power_mw) : FR_NVML_NOT_LOADED;
    nvml_util u = {0, 0};
    r->util_rc = n->util ? n->util(d, &u) : FR_NVML_NOT_LOADED;
    r->util_gpu = u.gpu;
    r->util_mem = u.memory;
    nvml_mem m = {0, 0, 0};
    r->mem_rc = n->mem ? n->mem(d, &m) : FR_NVML_NOT_LOADED;
    r->mem_used = m.used;
    r->mem_total = m.total;
    r->clock_rc = n->clock ? n->clock(d, 1 /* NVML_CLOCK_SM */, &r->sm_mhz) : FR_NVML_NOT_LOADED;
    r->temp_rc = n->temp ? n->temp(d, 0 /* NVML_TEMPERATURE_GPU */, &r->temp_c) : FR_NVML_NOT_LOADED;
}

void fr_nvml_close(fr_nvml *n) {
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

double fr_nvml_counter_delta_mj(uint64_t prev, uint64_t cur, double dt_s, double max_w,
                                bool *reset) {
    *reset = false;
    if (cur >= prev) return (double)(cur - prev);
    double bound = 1.5 * max_w * (dt_s > 0 ? dt_s : 0) * 1000.0 + 1000.0;
    if (prev <= 0xFFFFFFFFULL) {
        double d32 = (double)(0x100000000ULL - prev) + (double)cur;
        if (d32 <= bound) return d32;
    }
    uint64_t d64 = cur - prev; /* unsigned: wraps modulo 2^64 */
    if ((double)d64 <= bound) return (double)d64;
    *reset = true;
    return (double)cur <= bound ? (double)cur : 0.0;
}
