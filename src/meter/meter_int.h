/* meter_int.h — state shared between meter.c (accounting) and prom.c (exposition). Internal. */
#ifndef FRUGAL_METER_INT_H
#define FRUGAL_METER_INT_H

#include "meter/meter.h"

/* ---- configuration internals (config.c, config_legacy.c) ---- */
bool fr_meter_name_ok(const char *s, size_t max); /* [A-Za-z0-9_.-]+, shorter than max */
int fr_meter_parse_num(const char *v, double *out); /* a whole finite decimal number */
int fr_meter_slo_put(fr_meter_config *c, const char *tier, double latency_s, fr_err *err);
int fr_meter_arm_put(fr_meter_config *c, const char *arm, double weight, const char *options,
                     fr_err *err);
int fr_meter_config_check(const fr_meter_config *c, fr_err *err); /* cross-key rules */
/* The deprecated `key = value` syntax (config_legacy.c); "line N: …" errors. */
int fr_meter_config_parse_legacy(fr_meter_config *c, const char *text, size_t len, fr_err *err);

#define FR_PROM_MAX_ROUTES 64 /* more distinct routes fold into route="other" */
#define FR_PROM_MAX_TIERS 16  /* more distinct tiers fold into tier="other" */
#define FR_PROM_NBUCKETS 12   /* joules-per-request histogram buckets (last = +Inf) */

extern const double fr_prom_buckets[FR_PROM_NBUCKETS - 1];

/* Aggregates of one route. */
typedef struct fr_prom_route {
    char name[64];                 /* route label */
    double usd[FR_COST_N];         /* cost by component */
    double j_sum;                  /* histogram sum (joules incl. amortised idle) */
    long bucket[FR_PROM_NBUCKETS]; /* histogram counts (non-cumulative) */
    long n_status[4];              /* requests by fr_meter_status */
} fr_prom_route;

/* SLO counts of one tier. */
typedef struct fr_prom_tier {
    char name[32];   /* tier label */
    long met;        /* requests that met their target */
    long missed;     /* requests that missed it */
} fr_prom_tier;

/* A consistent copy of everything /metrics shows. */
typedef struct fr_meter_prom {
    int n_dev;                                   /* devices */
    char dev[FR_METER_MAX_DEV][16];              /* names */
    fr_meter_source src[FR_METER_MAX_DEV];       /* sources */
    double power_w[FR_METER_MAX_DEV];            /* NVML power (NaN: none) */
    double util[FR_METER_MAX_DEV];               /* GPU utilisation 0..1 (NaN: none) */
    double mem_used[FR_METER_MAX_DEV];           /* bytes (NaN: none) */
    double sm_hz[FR_METER_MAX_DEV];              /* SM clock Hz (NaN: none) */
    double temp_c[FR_METER_MAX_DEV];             /* °C (NaN: none) */
    double measured_j[FR_METER_MAX_DEV];         /* measured total */
    double idle_j[FR_METER_MAX_DEV];             /* idle total */
    double stage_j[FR_METER_MAX_DEV][FR_MSTAGE_COUNT]; /* attributed by stage */
    double idle_amortised_j;                     /* idle charged to requests */
    double stage_s[FR_MSTAGE_COUNT];             /* step wall seconds of closed requests */
    long stage_n[FR_MSTAGE_COUNT];               /* closed requests that ran the stage */
    int n_routes;                                /* routes used */
    fr_prom_route routes[FR_PROM_MAX_ROUTES];    /* per route */
    int n_tiers;                                 /* tiers used */
    fr_prom_tier tiers[FR_PROM_MAX_TIERS];       /* per tier */
    long ledger_rows, ledger_dropped;            /* ledger counters */
    long traces_exported, traces_dropped;        /* exporter counters */
} fr_meter_prom;

/* Copy the aggregates under the meter's lock. */
void fr_meter_prom_snapshot(fr_meter *m, fr_meter_prom *p);
/* Format a snapshot (prom.c). */
void fr_meter_prom_format(const fr_meter_prom *p, fr_buf *out);

#endif
