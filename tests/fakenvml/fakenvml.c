/* fakenvml.c — a scripted stand-in for libnvidia-ml.so.1, built into $(BUILD)/libfakenvml.so.
 *
 * The meter loads it through its ordinary dlopen path (config meter.nvml_lib or the environment
 * variable FRUGAL_NVML_LIB), so sampling, interpolation and attribution are tested
 * deterministically without a GPU. It exports the NVML symbols the meter uses with the same
 * signatures and return codes (0 success, 3 NOT_SUPPORTED, 15 GPU_IS_LOST, 999 UNKNOWN).
 *
 * Script: the file named by $FAKENVML_SCRIPT, read again at every nvmlInit_v2 (state reset):
 *   count N                    number of GPUs (default 1)
 *   init_fail                  nvmlInit_v2 returns 999
 *   name I TEXT                device name
 *   energy I V V V …           successive nvmlDeviceGetTotalEnergyConsumption results (mJ);
 *                              a token NS / LOST / ERR returns NOT_SUPPORTED / GPU_IS_LOST /
 *                              UNKNOWN for that call; after the list the last token repeats
 *   power I V V …              nvmlDeviceGetPowerUsage (mW), same tokens
 *   rate I WATTS [BASE_MJ]     energy = BASE + WATTS × (monotonic seconds since init) × 1000,
 *                              power = WATTS (real-time tests)
 *   lost_after I N             from the (N+1)-th energy call on, every call on I is GPU_IS_LOST
 *   util I GPU MEM | mem I USED TOTAL | clock I MHZ | temp I C    constants ("NS": unsupported)
 * Lines starting with '#' are comments.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXD 16
#define MAXSEQ 256
#define NS_ (-3LL)
#define LOST_ (-15LL)
#define ERR_ (-999LL)

typedef struct { unsigned int gpu, memory; } util_t;                 /* nvmlUtilization_t */
typedef struct { unsigned long long total, free, used; } mem_t;       /* nvmlMemory_t */

typedef struct fdev {
    char name[64];            /* nvmlDeviceGetName */
    long long energy[MAXSEQ]; /* scripted energy results (mJ or a negative error token) */
    int n_energy, i_energy;   /* its length / the next call's index */
    long long power[MAXSEQ];  /* scripted power results (mW or an error token) */
    int n_power, i_power;     /* its length / the next call's index */
    double rate_w;            /* rate mode: watts */
    long long rate_base;      /* rate mode: mJ at nvmlInit */
    int has_rate;             /* rate mode on */
    int lost_after;           /* energy calls before GPU_IS_LOST; -1: never */
    int energy_calls;         /* energy calls so far */
    long long util_g, util_m, mem_used, mem_total, clock_mhz, temp_c; /* constants; NS_ = unsupported */
} fdev;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards the state below */
static fdev devs[MAXD];  /* scripted devices */
static int ndev = 1;     /* nvmlDeviceGetCount */
static int init_fail;    /* nvmlInit_v2 fails */
static double t_init;    /* monotonic time of nvmlInit_v2 (rate mode) */

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long long tok(const char *s) {
    if (!strcmp(s, "NS")) return NS_;
    if (!strcmp(s, "LOST")) return LOST_;
    if (!strcmp(s, "ERR")) return ERR_;
    return (long long)strtoull(s, NULL, 10);
}

static void load(void) {
    memset(devs, 0, sizeof devs);
    for (int i = 0; i < MAXD; i++) {
        snprintf(devs[i].name, sizeof devs[i].name, "Fake GPU %d", i);
        devs[i].lost_after = -1;
        devs[i].util_g = 50;
        devs[i].util_m = 20;
        devs[i].mem_used = 1ULL << 30;
        devs[i].mem_total = 80ULL << 30;
        devs[i].clock_mhz = 1980;
        devs[i].temp_c = 45;
        devs[i].energy[0] = 0;
        devs[i].n_energy = 1;
        devs[i].power[0] = 100000;
        devs[i].n_power = 1;
    }
    ndev = 1;
    init_fail = 0;
    const char *path = getenv("FAKENVML_SCRIPT");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *w = strtok_r(line, " \t\r\n", &save);
        if (!w || w[0] == '#') continue;
        if (!strcmp(w, "init_fail")) { init_fail = 1; continue; }
        char *a = strtok_r(NULL, " \t\r\n", &save);
        if (!a) continue;
        if (!strcmp(w, "count")) { ndev = atoi(a); if (ndev > MAXD) ndev = MAXD; continue; }
        int i = atoi(a);
        if (i < 0 || i >= MAXD) continue;
        fdev *d = &devs[i];
        char *v;
        if (!strcmp(w, "name")) {
            char *rest = save ? save + strspn(save, " \t") : NULL;
            if (rest) { rest[strcspn(rest, "\r\n")] = 0; snprintf(d->name, sizeof d->name, "%s", rest); }
        } else if (!strcmp(w, "energy") || !strcmp(w, "power")) {
            long long *seq = w[0] == 'e' ? d->energy : d->power;
            int *n = w[0] == 'e' ? &d->n_energy : &d->n_power;
            *n = 0;
            while ((v = strtok_r(NULL, " \t\r\n", &save)) && *n < MAXSEQ) seq[(*n)++] = tok(v);
            if (*n == 0) seq[(*n)++] = 0;
        } else if (!strcmp(w, "rate")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->has_rate = 1;
            d->rate_w = v ? atof(v) : 0;
            v = strtok_r(NULL, " \t\r\n", &save);
            d->rate_base = v ? tok(v) : 0;
        } else if (!strcmp(w, "lost_after")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->lost_after = v ? atoi(v) : 0;
        } else if (!strcmp(w, "util")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->util_g = v ? tok(v) : NS_;
            v = strtok_r(NULL, " \t\r\n", &save);
            d->util_m = v ? tok(v) : 0;
        } else if (!strcmp(w, "mem")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->mem_used = v ? tok(v) : NS_;
            v = strtok_r(NULL, " \t\r\n", &save);
            d->mem_total = v ? tok(v) : 0;
        } else if (!strcmp(w, "clock")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->clock_mhz = v ? tok(v) : NS_;
        } else if (!strcmp(w, "temp")) {
            v = strtok_r(NULL, " \t\r\n", &save);
            d->temp_c = v ? tok(v) : NS_;
        }
    }
    fclose(f);
}

static int code(long long v) { return v == NS_ ? 3 : v == LOST_ ? 15 : v == ERR_ ? 999 : 0; }

static fdev *dev_of(void *h) {
    long i = (long)(size_t)h - 1;
    return i >= 0 && i < ndev ? &devs[i] : NULL;
}

static int is_lost(fdev *d) { return d->lost_after >= 0 && d->energy_calls > d->lost_after; }

int nvmlInit_v2(void) {
    pthread_mutex_lock(&mu);
    load();
    t_init = mono();
    int rc = init_fail ? 999 : 0;
    pthread_mutex_unlock(&mu);
    return rc;
}
int nvmlInit(void) { return nvmlInit_v2(); }
int nvmlShutdown(void) { return 0; }

const char *nvmlErrorString(int rc) {
    switch (rc) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned int *n) { *n = (unsigned int)ndev; return 0; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    if ((int)i >= ndev) return 2;
    *h = (void *)(size_t)(i + 1);
    return 0;
}

int nvmlDeviceGetName(void *h, char *name, unsigned int len) {
    fdev *d = dev_of(h);
    if (!d) return 2;
    snprintf(name, len, "%s", d->name);
    return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj) {
    pthread_mutex_lock(&mu);
    fdev *d = dev_of(h);
    int rc = 2;
    if (d) {
        d->energy_calls++;
        if (is_lost(d)) rc = 15;
        else if (d->has_rate) {
            *mj = (unsigned long long)d->rate_base + (unsigned long long)(d->rate_w * (mono() - t_init) * 1000.0);
            rc = 0;
        } else {
            int i = d->i_energy < d->n_energy ? d->i_energy : d->n_energy - 1;
            d->i_energy++;
            long long v = d->energy[i];
            rc = code(v);
            if (!rc) *mj = (unsigned long long)v;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw) {
    pthread_mutex_lock(&mu);
    fdev *d = dev_of(h);
    int rc = 2;
    if (d) {
        if (is_lost(d)) rc = 15;
        else if (d->has_rate) {
            *mw = (unsigned int)(d->rate_w * 1000.0);
            rc = 0;
        } else {
            int i = d->i_power < d->n_power ? d->i_power : d->n_power - 1;
            d->i_power++;
            long long v = d->power[i];
            rc = code(v);
            if (!rc) *mw = (unsigned int)v;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int nvmlDeviceGetUtilizationRates(void *h, util_t *u) {
    fdev *d = dev_of(h);
    if (!d) return 2;
    if (is_lost(d)) return 15;
    if (d->util_g == NS_) return 3;
    u->gpu = (unsigned int)d->util_g;
    u->memory = (unsigned int)d->util_m;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) {
    fdev *d = dev_of(h);
    if (!d) return 2;
    if (is_lost(d)) return 15;
    if (d->mem_used == NS_) return 3;
    m->used = (unsigned long long)d->mem_used;
    m->total = (unsigned long long)d->mem_total;
    m->free = m->total > m->used ? m->total - m->used : 0;
    return 0;
}

int nvmlDeviceGetClockInfo(void *h, int type, unsigned int *mhz) {
    fdev *d = dev_of(h);
    if (!d || type != 1) return 2;
    if (is_lost(d)) return 15;
    if (d->clock_mhz == NS_) return 3;
    *mhz = (unsigned int)d->clock_mhz;
    return 0;
}

int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *c) {
    fdev *d = dev_of(h);
    if (!d || sensor != 0) return 2;
    if (is_lost(d)) return 15;
    if (d->temp_c == NS_) return 3;
    *c = (unsigned int)d->temp_c;
    return 0;
}
