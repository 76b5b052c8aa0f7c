/* audit.h — analyses over a ledger: the cost audit (window → modality × stage heatmap →
 * bottleneck → ranked savings), A/B comparison with confidence intervals, and the ROI table of
 * two measured configurations. The `frugal audit` / `frugal roi` commands (src/tools/meter_cmds.c)
 * are thin wrappers around these functions.
 *
 * Money is recomputed from joules and host-seconds with one cost model (the configuration the
 * ledger recorded in meta('config'), or one given by the caller), so every table adds up.
 */
#ifndef FRUGAL_METER_AUDIT_H
#define FRUGAL_METER_AUDIT_H

#include <stdbool.h>
#include <stdio.h>

#include "meter/meter.h"

#define FR_AUDIT_MAX_DEV 17
#define FR_AUDIT_MAX_MOD 16
#define FR_AUDIT_COLS (FR_MSTAGE_COUNT + 1) /* stages + amortised idle */
#define FR_AUDIT_MAX_CAND 8

/* One request as the audit sees it. */
typedef struct fr_audit_req {
    long id;                          /* ledger row id */
    char trace_id[33];                /* trace */
    char arm[32], route[64], tier[32], modality[32], status[16]; /* labels */
    double t_start, t_end, latency_s; /* unix seconds / seconds */
    double joules, joules_idle;       /* attributed / amortised idle */
    double occupancy_s;               /* host-seconds incl. amortised idle */
    int slo_met;                      /* 1, 0, −1 unknown */
    long tokens_in, tokens_out;       /* tokens */
    bool estimated, incomplete;       /* energy quality flags */
    double ocr_density;               /* feature ocr_text_density, NaN when absent */
    double sec[FR_MSTAGE_COUNT];      /* wall seconds per stage (all devices) */
    double j[FR_MSTAGE_COUNT];        /* joules per stage */
    double occ[FR_MSTAGE_COUNT];      /* host-seconds per stage */
} fr_audit_req;

typedef struct fr_audit_opts {
    double since, until;          /* unix seconds; 0 = open */
    const fr_meter_config *config;/* cost model / thresholds; NULL: the ledger's own */
} fr_audit_opts;

typedef struct fr_audit {
    char path[512];                /* ledger file */
    fr_meter_config cfg;           /* cost model and thresholds in use */
    bool cfg_from_ledger;          /* cfg came from meta('config') */
    bool host_counted_here;        /* cost.gpus / cost.cpus were not recorded: counted at load */
    int n;                         /* requests */
    fr_audit_req *r;               /* requests, by id */
    bool has_energy;               /* the energy table had rows in the window */
    double e_t0, e_t1;             /* its span */
    int n_dev;                     /* devices in it */
    char dev[FR_AUDIT_MAX_DEV][16];        /* names */
    char dev_src[FR_AUDIT_MAX_DEV][24];    /* sources */
    double dev_measured[FR_AUDIT_MAX_DEV]; /* measured joules */
    double dev_idle[FR_AUDIT_MAX_DEV];     /* idle joules */
    long n_traces, n_spans, traces_matched;/* from a traces file, when given */
} fr_audit;

int fr_audit_load(fr_audit *a, const char *ledger, const fr_audit_opts *o, fr_err *err);
/* Read OTLP JSON lines (one export request per line) and match their traces to ledger rows. */
int fr_audit_load_traces(fr_audit *a, const char *path, fr_err *err);
void fr_audit_free(fr_audit *a);

typedef struct fr_audit_candidate {
    char id[32];       /* stable key: skip_vision, idle_energy, idle_capacity, waste, cooling */
    char text[512];    /* one-line explanation with the evidence */
    double usd;        /* estimated savings over the window */
    double usd_year;   /* the same per year at the window's rate */
    double joules;     /* energy saved over the window (0 when not energy) */
} fr_audit_candidate;

typedef struct fr_audit_report {
    double t0, t1, window_s;       /* collection window */
    long n, n_status[4];           /* requests by fr_meter_status */
    double measured_j, idle_j;     /* energy table (or request sums) */
    double amortised_j;            /* idle charged to requests */
    double usd_total;              /* Σ request $ */
    double usd_part[FR_COST_N];    /* by component */
    double usd_idle_energy;        /* unamortised idle energy priced */
    double usd_idle_capacity;      /* host time no request used, priced */
    int n_mod;                     /* modalities */
    char mod[FR_AUDIT_MAX_MOD][32];/* names, by $ descending */
    long mod_n[FR_AUDIT_MAX_MOD];  /* requests per modality */
    double sec[FR_AUDIT_MAX_MOD][FR_AUDIT_COLS]; /* wall seconds */
    double j[FR_AUDIT_MAX_MOD][FR_AUDIT_COLS];   /* joules */
    double usd[FR_AUDIT_MAX_MOD][FR_AUDIT_COLS]; /* dollars */
    double tot_sec, tot_j, tot_usd;              /* sums over the heatmap */
    int bot_mod, bot_stage;        /* bottleneck modality / stage by $ */
    int bot_cell_mod, bot_cell_stage; /* the largest $ cell */
    int lat_stage;                 /* stage with the largest time share */
    int n_cand;                    /* candidates, ranked */
    fr_audit_candidate cand[FR_AUDIT_MAX_CAND];
    bool any_estimated, any_incomplete; /* quality flags */
} fr_audit_report;

void fr_audit_compute(const fr_audit *a, fr_audit_report *r);
const char *fr_audit_col_name(int col); /* stage name, or "idle" */
void fr_audit_print(const fr_audit *a, const fr_audit_report *r, FILE *f);
int fr_audit_write_html(const fr_audit *a, const fr_audit_report *r, const char *path,
                        const char *png_name, fr_err *err);
int fr_audit_write_png(const fr_audit_report *r, const char *path, fr_err *err);
/* The heatmap image in memory (malloc'd PNG bytes). */
unsigned char *fr_audit_png(const fr_audit_report *r, size_t *len);

/* ---- A/B ------------------------------------------------------------------------------------- */

typedef struct fr_ab_arm {
    char name[32];           /* arm */
    long n, n_ok, n_slo;     /* requests, ok ones, with an SLO verdict */
    double usd_1k, usd_1k_ci[2];   /* $ per 1,000 requests, 95 % t interval */
    double j_req, j_req_ci[2];     /* joules per request, 95 % t interval */
    double p50, p50_ci[2];         /* latency of ok requests, 95 % bootstrap interval */
    double p99, p99_ci[2];
    double slo, slo_ci[2];         /* SLO attainment, 95 % Wilson interval */
} fr_ab_arm;

typedef struct fr_ab_diff {
    double usd_1k, usd_1k_ci[2]; /* arm − baseline, Welch */
    double j_req, j_req_ci[2];   /* Welch */
    double p50, p50_ci[2];       /* bootstrap */
    double p99, p99_ci[2];       /* bootstrap */
    double slo, slo_ci[2];       /* Newcombe */
} fr_ab_diff;

typedef struct fr_ab_report {
    int n_arms;                        /* arms compared; [0] is the baseline */
    fr_ab_arm arm[FR_METER_MAX_ARMS];  /* per arm */
    fr_ab_diff diff[FR_METER_MAX_ARMS];/* arm[i] − arm[0] (diff[0] unused) */
    int boot;                          /* bootstrap resamples */
    bool estimated;                    /* some of the energy is an estimate */
} fr_ab_report;

/* Compare `arms` (NULL: every arm in the ledger, sorted by name). */
int fr_audit_ab(const fr_audit *a, const char *const *arms, int n_arms, fr_ab_report *r, fr_err *err);
void fr_audit_ab_print(const fr_ab_report *r, FILE *f);

/* ---- ROI ------------------------------------------------------------------------------------- */

typedef struct fr_roi_side {
    char label[64];        /* column title */
    double window_s;       /* measured window */
    long n;                /* requests (of the arm) */
    double frac;           /* the arm's share of the ledger's requests (1 without an arm) */
    double qps;            /* requests per second the configuration served (whole host) */
    double sla;            /* SLO attainment (NaN when no request had an SLO: printed "n/a") */
    long n_slo;            /* requests with an SLO verdict */
    double j_req;          /* joules per request (incl. idle share) */
    double power_w;        /* average IT power of the configuration */
    double dep_yr, elec_yr, cool_yr, labour_yr, tco_yr; /* TCO per year, $ */
    double usd_req;        /* TCO / requests per year */
    bool estimated;        /* some of the energy is an estimate */
} fr_roi_side;

/* Measure a configuration from an audit (arm NULL: everything). */
int fr_roi_measure(const fr_audit *a, const char *arm, const char *label, fr_roi_side *s, fr_err *err);
void fr_roi_print(const fr_roi_side *a, const fr_roi_side *b, FILE *f);

/* ---- statistics (exposed for tests) ---------------------------------------------------------- */

double fr_meter_stat_t_quantile(double p, double df);           /* Student t inverse CDF */
double fr_meter_stat_percentile(double *v, int n, double q);     /* sorts v; linear (type 7) */
void fr_meter_stat_wilson(long k, long n, double z, double ci[2]);

/* ---- PNG ------------------------------------------------------------------------------------- */

/* Encode 8-bit RGB rows (w × h × 3 bytes, no padding) as PNG through libpng. Returns malloc'd
 * bytes and their count in *len, or NULL (sizes outside 1..16384, or libpng refused: logged). */
unsigned char *fr_meter_png_encode(const unsigned char *rgb, int w, int h, size_t *len);

#endif
