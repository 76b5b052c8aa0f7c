/* cpu_energy.c — the host CPU's energy: RAPL package counters, else an estimate.
 *
 * RAPL: every top-level powercap zone "intel-rapl:N" (AMD's RAPL driver uses the same names)
 * whose `name` starts with "package" is read from <root>/intel-rapl:N/energy_uj; the counter
 * wraps at max_energy_range_uj, so a decrease adds (max − old + new). Sub-zones (intel-rapl:N:M,
 * core/uncore/dram) are parts of the package and are not added. Since Linux 5.10 energy_uj is
 * readable by root only (CVE-2020-8694); an unreadable counter means the estimate.
 *
 * Estimate: process CPU time (CLOCK_PROCESS_CPUTIME_ID, all threads) × watts per busy core.
 * It counts only this process's work and nothing of the idle host, and everything derived from
 * it is labelled "estimated".
 */
#include "meter/sources.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PKG 16

typedef struct rapl_pkg {
    char path[640];     /* …/energy_uj */
    uint64_t max_uj;    /* wrap range */
    uint64_t last_uj;   /* last raw value */
} rapl_pkg;

struct fr_cpu_energy {
    fr_meter_source src;   /* FR_MSRC_RAPL or FR_MSRC_ESTIMATED */
    int n_pkg;             /* RAPL packages */
    rapl_pkg pkg[MAX_PKG]; /* their counters */
    double acc_j;          /* unfolded cumulative joules */
    double watts_per_core; /* estimate */
    double cpu0_s;         /* CPU time at open (estimate) */
};

double fr_process_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Read one unsigned decimal from a small sysfs file. */
static int read_u64(const char *path, uint64_t *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *end;
    if (!n || buf[0] < '0' || buf[0] > '9') return -1;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf) return -1;
    *v = x;
    return 0;
}

static int read_str(const char *path, char *out, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t k = fread(out, 1, n - 1, f);
    fclose(f);
    out[k] = 0;
    while (k && (out[k - 1] == '\n' || out[k - 1] == ' ')) out[--k] = 0;
    return 0;
}

static int cmp_pkg(const void *a, const void *b) {
    return strcmp(((const rapl_pkg *)a)->path, ((const rapl_pkg *)b)->path);
}

static int rapl_open(fr_cpu_energy *c, const char *root, char *why, size_t why_n) {
    DIR *d = opendir(root);
    if (!d) {
        snprintf(why, why_n, "no powercap at %s", root);
        return -1;
    }
    struct dirent *e;
    int unreadable = 0;
    while ((e = readdir(d)) && c->n_pkg < MAX_PKG) {
        const char *nm = e->d_name;
        if (strncmp(nm, "intel-rapl:", 11) || strchr(nm + 11, ':') || !nm[11]) continue;
        char p[640], name[64] = "";
        snprintf(p, sizeof p, "%s/%s/name", root, nm);
        if (read_str(p, name, sizeof name) == 0 && strncmp(name, "package", 7)) continue;
        rapl_pkg *k = &c->pkg[c->n_pkg];
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, nm);
        if (read_u64(p, &k->max_uj) || k->max_uj == 0) {
            unreadable++;
            continue;
        }
        snprintf(k->path, sizeof k->path, "%s/%s/energy_uj", root, nm);
        if (read_u64(k->path, &k->last_uj)) {
            unreadable++;
            continue;
        }
        c->n_pkg++;
    }
    closedir(d);
    if (c->n_pkg == 0) {
        snprintf(why, why_n, unreadable ? "RAPL counters under %s are not readable (root only?)"
                                        : "no RAPL package zone under %s", root);
        return -1;
    }
    qsort(c->pkg, (size_t)c->n_pkg, sizeof c->pkg[0], cmp_pkg);
    snprintf(why, why_n, "RAPL: %d package%s under %s", c->n_pkg, c->n_pkg == 1 ? "" : "s", root);
    return 0;
}

fr_cpu_energy *fr_cpu_energy_open(const char *root, int mode, double watts_per_core, char *why,
                                  size_t why_n) {
    fr_cpu_energy *c = fr_xcalloc(1, sizeof *c);
    c->watts_per_core = watts_per_core;
    char rwhy[512] = "";
    if (mode != 2 && rapl_open(c, root, rwhy, sizeof rwhy) == 0) {
        c->src = FR_MSRC_RAPL;
        snprintf(why, why_n, "%s", rwhy);
        return c;
    }
    if (mode == 1) {
        snprintf(why, why_n, "%s", rwhy);
        free(c);
        return NULL;
    }
    c->src = FR_MSRC_ESTIMATED;
    c->n_pkg = 0;
    c->cpu0_s = fr_process_cpu_s();
    snprintf(why, why_n, "CPU energy estimated as process CPU time x %.2f W/core%s%s%s",
             watts_per_core, rwhy[0] ? " (" : "", rwhy, rwhy[0] ? ")" : "");
    return c;
}

int fr_cpu_energy_read(fr_cpu_energy *c, double *joules) {
    if (c->src == FR_MSRC_ESTIMATED) {
        c->acc_j = (fr_process_cpu_s() - c->cpu0_s) * c->watts_per_core;
        *joules = c->acc_j;
        return 0;
    }
    int rc = 0;
    for (int i = 0; i < c->n_pkg; i++) {
        rapl_pkg *k = &c->pkg[i];
        uint64_t v;
        if (read_u64(k->path, &v)) {
            rc = -1;
            continue;
        }
        uint64_t d = v >= k->last_uj ? v - k->last_uj : (k->max_uj - k->last_uj) + v;
        if (v > k->max_uj) d = 0; /* nonsense reading: ignore */
        c->acc_j += (double)d * 1e-6;
        k->last_uj = v;
    }
    *joules = c->acc_j;
    return rc;
}

fr_meter_source fr_cpu_energy_source(const fr_cpu_energy *c) { return c->src; }

void fr_cpu_energy_close(fr_cpu_energy *c) { free(c); }
