/* meter_util.h — helpers shared by the tests/test_meter*.c programs: a settable clock, scratch
 * directories, the fake NVML library and its scripts. */
#ifndef FRUGAL_TEST_METER_UTIL_H
#define FRUGAL_TEST_METER_UTIL_H

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meter/meter.h"

/* A clock the test moves by hand. */
static double mu_now;
static double mu_clock(void *ctx) {
    (void)ctx;
    return mu_now;
}

/* Scratch directories, removed at exit unless FRUGAL_KEEP_TMP is set. */
static char mu_dirs[64][256];
static int mu_ndirs;
static int mu_rm1(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}
static void mu_cleanup(void) {
    if (getenv("FRUGAL_KEEP_TMP")) return;
    for (int i = 0; i < mu_ndirs; i++) nftw(mu_dirs[i], mu_rm1, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh scratch directory under $TMPDIR (or /tmp). */
static inline const char *mu_tmpdir(void) {
    static char dir[256];
    const char *t = getenv("TMPDIR");
    if (!t || !*t || strlen(t) > 200) t = "/tmp";
    snprintf(dir, sizeof dir, "%s/frugal-meter-XXXXXX", t);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    if (mu_ndirs == 0) atexit(mu_cleanup);
    if (mu_ndirs < 64) snprintf(mu_dirs[mu_ndirs++], sizeof mu_dirs[0], "%s", dir);
    return dir;
}

static inline void mu_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        abort();
    }
    fputs(text, f);
    fclose(f);
}

/* Path of the fake NVML: next to the test's build folder ($BUILD/libfakenvml.so, found from
 * /proc/self/exe = $BUILD/tests/<prog>), else built here with cc -shared. */
static inline const char *mu_fakenvml(void) {
    static char path[1024 + 64];
    if (path[0]) return path;
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *s = strrchr(exe, '/');
        if (s) {
            *s = 0;
            s = strrchr(exe, '/');
            if (s) {
                *s = 0;
                snprintf(path, sizeof path, "%s/libfakenvml.so", exe);
                if (access(path, R_OK) == 0) return path;
            }
        }
    }
    const char *b = getenv("BUILD");
    if (!b || !*b || strlen(b) > 512) b = "build";
    snprintf(path, sizeof path, "%s/libfakenvml.so", b);
    if (access(path, R_OK) == 0) return path;
    const char *dir = mu_tmpdir();
    snprintf(path, sizeof path, "%s/libfakenvml.so", dir);
    char cmd[sizeof path + 160];
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -O1 -fPIC -shared -o %s tests/fakenvml/fakenvml.c -pthread", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot build the fake NVML\n");
        abort();
    }
    return path;
}

/* A configuration for deterministic tests: hand clock, no thread, fake NVML with `script`, CPU
 * from a powercap root that does not exist (so: estimated), no ledger, no traces. */
static inline void mu_config(fr_meter_config *c, const char *dir, const char *script) {
    fr_meter_config_default(c);
    c->sample_ms = 0;
    c->clock = mu_clock;
    c->epoch_at_zero = 1700000000.0;
    const char *lib = mu_fakenvml();
    if (strlen(lib) >= sizeof c->nvml_lib) abort();
    memcpy(c->nvml_lib, lib, strlen(lib) + 1);
    snprintf(c->rapl_root, sizeof c->rapl_root, "%s/no-powercap", dir);
    c->cpu_source = 2;
    char sp[320];
    snprintf(sp, sizeof sp, "%s/nvml.script", dir);
    mu_write(sp, script ? script : "count 0\n");
    setenv("FAKENVML_SCRIPT", sp, 1);
    unsetenv("FRUGAL_NVML_LIB");
    unsetenv("FRUGAL_RAPL_ROOT");
    mu_now = 0;
}

#endif
