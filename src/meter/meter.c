/* meter.c — sampling, attribution and request accounts. See meter.h for the model.
 *
 * Energy curve. Each device keeps knots (t, E) of its cumulative energy in joules; E between
 * knots is linear. For NVML's energy counter a knot is added only when the counter changed (or
 * after max_stale_ms): the counter itself updates every 20–100 ms, so a repeated value means "no
 * news", not "no energy", and using it as a knot would credit zero joules to the steps of that
 * gap and a burst to the next ones. With a knot at every change, a joule is placed at most one
 * counter period late and is never lost or counted twice. nvmlDeviceGetPowerUsage — a 1-second
 * average on Hopper — is only a gauge, never used for attribution, except on a GPU whose counter
 * is NOT_SUPPORTED, where power × time is the only signal (source "nvml-power").
 *
 * Accounting pass (after every sample, under the lock). For each device, from its frontier F to
 * its newest knot T: the steps overlapping [F, T] cut it into elementary intervals; each
 * interval's energy E(b) − E(a) is split equally between the steps running in it (and each step's
 * part by its shares); an interval with no step is idle. A sweep computes G(t), the energy per
 * running step accumulated since F, so a step's energy is G(end) − G(start): O(k log k) for k
 * steps. Then F = T. Steps are timestamped inside the lock, so a step can never start before a
 * frontier already passed. Per device, attributed + idle = E(T) − E(first knot) exactly.
 *
 * Host occupancy (for depreciation and labour) is attributed the same way with time in place of
 * energy on the capacity devices (the GPUs, or the CPU when there is no GPU), divided by their
 * number: Σ requests + idle = wall time.
 *
 * A device that disappears (NVML_ERROR_GPU_IS_LOST, or no new knot for stall_s) is frozen at its
 * last knot; the rest of its steps is "unmeasured" and their requests are marked incomplete.
 *
 * Idle amortisation (policy "amortise"): idle joules and host-seconds go into 1-second buckets;
 * the requests closed by a pass take the buckets of the last idle_window_s in proportion to their
 * attributed energy (equally when all are zero); older buckets expire as unamortised idle.
 */
#include "meter/meter.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/mask.h"
#include "meter/ledger.h"
#include "meter/meter_int.h"
#include "meter/sources.h"
#include "meter/trace.h"

const double fr_prom_buckets[FR_PROM_NBUCKETS - 1] = {0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 500, 1000};

/* ---- names ----------------------------------------------------------------------------------- */

static const char *stage_names[FR_MSTAGE_COUNT] = {"decode_media", "asr", "ocr", "vision",
                                                   "nlu", "budget", "queue", "prefill",
                                                   "decode", "respond", "other"};

const char *fr_meter_stage_name(fr_meter_stage s) {
    return (unsigned)s < FR_MSTAGE_COUNT ? stage_names[s] : "other";
}

int fr_meter_stage_from_name(const char *name) {
    for (int i = 0; i < FR_MSTAGE_COUNT; i++)
        if (name && !strcmp(name, stage_names[i])) return i;
    return -1;
}

const char *fr_meter_source_name(fr_meter_source s) {
    static const char *n[] = {"none", "nvml-energy", "nvml-power", "rapl", "estimated", "lost"};
    return (unsigned)s < FR_ARRAY_LEN(n) ? n[s] : "none";
}

const char *fr_meter_modality_name(unsigned inputs) {
    static const char *n[8] = {"text",       "text",        "image",       "image+text",
                               "audio",      "audio+text",  "audio+image", "audio+image+text"};
    return n[inputs & 7];
}

const char *fr_meter_status_name(fr_meter_status s) {
    static const char *n[] = {"ok", "rejected", "cancelled", "failed"};
    return (unsigned)s < 4 ? n[s] : "failed";
}

/* ---- state ----------------------------------------------------------------------------------- */

typedef struct knot {
    double t; /* meter clock seconds */
    double e; /* cumulative joules */
} knot;

struct fr_meter_step {
    fr_meter_step *next; /* in its device's list */
    int dev;             /* device index, FR_METER_DEV_NONE, or >= n_dev (unmeasured) */
    double t0, t1;       /* begin / end (t1 valid when ended) */
    bool ended;          /* step_end was called */
    double total_share;  /* Σ shares */
    int n;               /* shares */
    fr_meter_share *sh;  /* copies */
};

struct fr_meter_req {
    fr_meter_req *prev, *next;    /* open accounts (or the ready list) */
    char id[64];                  /* request id */
    char key_id[64];              /* API key id */
    char arm[32];                 /* A/B arm */
    int arm_idx;                  /* index in cfg.arms or -1 */
    char route[64];               /* route */
    char tier[32];                /* tier */
    char modality[32];            /* modality */
    char features[500];           /* JSON object body ("k":v,…) without braces */
    char error[256];              /* masked error text */
    uint8_t trace_id[16];         /* trace */
    uint8_t parent_id[8];         /* incoming parent span */
    bool has_parent;              /* parent_id valid */
    uint8_t span_id[8];           /* root span */
    uint8_t flags;                /* trace flags */
    double t_begin, t_end;        /* meter clock */
    int pending;                  /* steps naming it, not yet fully accounted */
    bool ended;                   /* request_end called */
    fr_meter_req_result res;      /* outcome (error points to `error`) */
    double j[FR_METER_MAX_DEV][FR_MSTAGE_COUNT];        /* attributed joules */
    double busy[FR_METER_MAX_DEV][FR_MSTAGE_COUNT];     /* attributed device-seconds */
    double wall[FR_METER_MAX_DEV + 1][FR_MSTAGE_COUNT]; /* step wall time; [0] = no device */
    double st_first[FR_MSTAGE_COUNT], st_last[FR_MSTAGE_COUNT]; /* stage span */
    double st_share[FR_MSTAGE_COUNT];  /* Σ shares (tokens, pixels, seconds) */
    unsigned st_steps[FR_MSTAGE_COUNT];/* steps per stage */
    uint32_t dev_used;            /* bit d: a step on device d */
    double idle_j, idle_s;        /* amortised idle joules / host-seconds */
    bool incomplete;              /* some step time unmeasured */
    uint64_t ledger_seq;          /* its provisional ledger row (0: none, or refused) */
};

typedef struct mdev {
    char name[16];            /* "cpu", "gpu0" */
    fr_meter_source src;      /* current source */
    int nvml_idx;             /* NVML index, -1 for the CPU */
    bool capacity;            /* counts for host occupancy */
    knot *k;                  /* knots, oldest first */
    int kn, kcap;             /* used / allocated */
    double frontier;          /* accounted up to */
    bool started;             /* at least one knot */
    uint64_t raw;             /* last raw NVML counter (mJ) */
    double raw_t;             /* its time */
    bool have_raw;            /* raw valid */
    double acc_j;             /* unfolded cumulative joules */
    double w_last;            /* power between the last two knots (W), for provisional figures */
    double power_w, util, mem_used, sm_hz, temp_c; /* gauges (NaN unknown) */
    fr_meter_step *steps;     /* steps not fully accounted */
    double measured_j, attributed_j, idle_j;       /* totals */
    double stage_j[FR_MSTAGE_COUNT];               /* attributed by stage */
    double win_t0, win_measured, win_attr, win_idle, win_busy; /* ledger energy window */
    int err_run;              /* consecutive failed reads */
    bool warned_reset;        /* counter reset logged */
} mdev;

/* The figures of a closed request once they are final (fr_meter_request_final). */
typedef struct fin_entry {
    char id[64];              /* request id ("" = free slot) */
    fr_meter_req_summary sum; /* its final figures */
} fin_entry;
#define FIN_RING 1024

struct fr_meter {
    fr_meter_config cfg;      /* configuration (env overrides applied) */
    pthread_mutex_t mu;       /* accounting state */
    pthread_mutex_t sample_mu;/* serialises sampling */
    pthread_mutex_t cpu_mu;   /* serialises reads of the CPU source (sampler, settle_cpu) */
    pthread_cond_t fin_cv;    /* a request's figures became final (under mu) */
    fin_entry *fin;           /* (FIN_RING) the last closed requests' final figures */
    long fin_n;               /* entries ever written */
    pthread_cond_t cv;        /* sampler sleep / stop */
    pthread_t thr;            /* sampler */
    bool thr_on, stop;        /* thread running / stop requested */
    double epoch_off;         /* unix = epoch_off + clock */
    fr_nvml *nvml;            /* NULL: no GPU */
    fr_cpu_energy *cpu;       /* CPU source */
    int n_dev;                /* devices */
    int n_cap;                /* capacity devices */
    double stall_s;           /* no knot for this long = lost */
    mdev dev[FR_METER_MAX_DEV];
    fr_meter_req *open;       /* open accounts */
    fr_meter_req *ready;      /* ended and fully accounted, to finalise */
    long n_open, n_closed;    /* counters */
    double unmeasured_s;      /* step-seconds without a reading */
    /* idle amortisation */
    double *bucket_j, *bucket_s; /* ring of 1-s buckets */
    int nb;                   /* ring size */
    long b_head;              /* absolute index of the newest bucket */
    double idle_amortised_j, idle_expired_j; /* charged / expired */
    double last_energy_flush; /* clock of the last ledger energy rows */
    uint64_t rng;             /* xorshift state for ids */
    fr_ledger *ledger;        /* NULL: none */
    fr_otlp *otlp;            /* NULL: none */
    fr_meter_prom *prom;      /* aggregates (under mu) */
    pthread_mutex_t fin_mu;   /* serialises finalisation (keeps ledger order) */
};

double fr_meter_now(const fr_meter *m) {
    return m->cfg.clock ? m->cfg.clock(m->cfg.clock_ctx) : fr_time_s();
}

static uint64_t rnd(fr_meter *m) { /* under mu */
    uint64_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return m->rng = x;
}

static void rnd_bytes(fr_meter *m, uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd(m);
        for (size_t j = 0; j < 8 && i + j < n; j++) b[i + j] = (uint8_t)(v >> (8 * j));
    }
    bool nz = false;
    for (size_t i = 0; i < n; i++) nz |= b[i] != 0;
    if (!nz) b[0] = 1;
}

static void copy_str(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src ? src : "");
    fr_mask_inplace(dst);
}

/* ---- curve ----------------------------------------------------------------------------------- */

static void push_knot(mdev *d, double t, double e) {
    if (d->kn && t <= d->k[d->kn - 1].t) return;
    if (d->kn) d->w_last = (e - d->k[d->kn - 1].e) / (t - d->k[d->kn - 1].t);
    if (d->kn == d->kcap) {
        d->kcap = d->kcap ? d->kcap * 2 : 64;
        d->k = fr_xrealloc(d->k, (size_t)d->kcap * sizeof *d->k);
    }
    d->k[d->kn++] = (knot){t, e};
    if (!d->started) {
        d->started = true;
        d->frontier = t;
        d->win_t0 = t;
    }
}

static double curve(const mdev *d, double t) {
    const knot *k = d->k;
    int n = d->kn;
    if (n == 0) return 0;
    if (t <= k[0].t) return k[0].e;
    if (t >= k[n - 1].t) return k[n - 1].e;
    int lo = 0, hi = n - 1; /* k[lo].t <= t < k[hi].t */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (k[mid].t <= t) lo = mid;
        else hi = mid;
    }
    double f = (t - k[lo].t) / (k[hi].t - k[lo].t);
    return k[lo].e + f * (k[hi].e - k[lo].e);
}

static double last_knot_t(const mdev *d) { return d->kn ? d->k[d->kn - 1].t : -INFINITY; }

/* Current power from the last two knots (W), for provisional numbers. The accounting pass drops
 * the knots it has passed, so the power is kept when each knot is added. */
static double slope(const mdev *d) { return d->w_last > 0 ? d->w_last : 0; }

/* ---- idle pool ------------------------------------------------------------------------------- */

static void pool_advance(fr_meter *m, long idx) {
    if (!m->nb) return;
    if (m->b_head < 0) {
        m->b_head = idx;
        return;
    }
    while (m->b_head < idx) {
        m->b_head++;
        int slot = (int)(((m->b_head % m->nb) + m->nb) % m->nb); /* the oldest bucket drops out */
        m->idle_expired_j += m->bucket_j[slot];
        m->bucket_j[slot] = 0;
        m->bucket_s[slot] = 0;
    }
}

/* Add idle energy j and host-seconds s spread evenly over [a, b] to the 1-s buckets. */
static void pool_add(fr_meter *m, double a, double b, double j, double s) {
    if (m->cfg.idle_policy != FR_IDLE_AMORTISE || !m->nb) return;
    if (!(b > a)) a = b - 1e-9;
    pool_advance(m, (long)floor(b));
    double rj = j / (b - a), rs = s / (b - a);
    double live = (double)(m->b_head - m->nb + 1); /* start of the oldest live bucket */
    if (a < live) { /* already outside the window */
        double e = b < live ? b : live;
        m->idle_expired_j += rj * (e - a);
        a = e;
    }
    while (a < b) {
        long k = (long)floor(a);
        double e = (double)(k + 1) < b ? (double)(k + 1) : b;
        int slot = (int)(((k % m->nb) + m->nb) % m->nb);
        m->bucket_j[slot] += rj * (e - a);
        m->bucket_s[slot] += rs * (e - a);
        a = e;
    }
}

/* Spread the pool over the ready list (under mu). */
static void pool_distribute(fr_meter *m, double now) {
    if (m->cfg.idle_policy != FR_IDLE_AMORTISE || !m->ready || !m->nb) return;
    pool_advance(m, (long)floor(now));
    double pj = 0, ps = 0;
    for (int i = 0; i < m->nb; i++) {
        pj += m->bucket_j[i];
        ps += m->bucket_s[i];
        m->bucket_j[i] = m->bucket_s[i] = 0;
    }
    if (pj == 0 && ps == 0) return;
    double tot = 0;
    int n = 0;
    for (fr_meter_req *r = m->ready; r; r = r->next, n++)
        for (int d = 0; d < FR_METER_MAX_DEV; d++)
            for (int s = 0; s < FR_MSTAGE_COUNT; s++) tot += r->j[d][s];
    for (fr_meter_req *r = m->ready; r; r = r->next) {
        double mine = 0;
        for (int d = 0; d < FR_METER_MAX_DEV; d++)
            for (int s = 0; s < FR_MSTAGE_COUNT; s++) mine += r->j[d][s];
        double f = tot > 0 ? mine / tot : 1.0 / n;
        r->idle_j += pj * f;
        r->idle_s += ps * f;
    }
    m->idle_amortised_j += pj;
}

/* ---- steps and requests (under mu) ---------------------------------------------------------- */

static void req_ready(fr_meter *m, fr_meter_req *r) {
    /* unlink from open, push to ready (FIFO order is kept by appending) */
    if (r->prev) r->prev->next = r->next;
    else m->open = r->next;
    if (r->next) r->next->prev = r->prev;
    m->n_open--;
    r->prev = NULL;
    r->next = NULL;
    fr_meter_req **p = &m->ready;
    while (*p) p = &(*p)->next;
    *p = r;
}

static void finish_step(fr_meter *m, fr_meter_step *s, bool unmeasured) {
    for (int i = 0; i < s->n; i++) {
        fr_meter_req *r = s->sh[i].req;
        if (unmeasured) r->incomplete = true;
        if (--r->pending == 0 && r->ended) req_ready(m, r);
    }
    free(s->sh);
    free(s);
}

/* Record the wall-time side of a step (at its end). */
static void step_walltime(fr_meter *m, fr_meter_step *s) {
    double dur = s->t1 - s->t0;
    int slot = s->dev >= 0 && s->dev < m->n_dev ? s->dev + 1 : 0;
    for (int i = 0; i < s->n; i++) {
        fr_meter_req *r = s->sh[i].req;
        int st = s->sh[i].stage;
        r->wall[slot][st] += dur;
        if (r->st_steps[st] == 0 || s->t0 < r->st_first[st]) r->st_first[st] = s->t0;
        if (r->st_steps[st] == 0 || s->t1 > r->st_last[st]) r->st_last[st] = s->t1;
        r->st_steps[st]++;
        r->st_share[st] += s->sh[i].share;
    }
}

typedef struct ev {
    double t; /* time */
    int d;    /* +1 start, −1 end */
} ev;

static int cmp_ev(const void *a, const void *b) {
    double x = ((const ev *)a)->t, y = ((const ev *)b)->t;
    return x < y ? -1 : x > y;
}

/* index of t in sorted unique pts (exact match guaranteed) */
static int find_pt(const double *pts, int n, double t) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (pts[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void account_device(fr_meter *m, int di) {
    mdev *d = &m->dev[di];
    double F = d->frontier, T = last_knot_t(d);
    if (d->started && T > F) {
        /* active steps */
        int ns = 0;
        for (fr_meter_step *s = d->steps; s; s = s->next) ns++;
        ev *e = fr_xmalloc(((size_t)ns * 2 + 2) * sizeof *e);
        double *sa = fr_xmalloc(((size_t)ns + 1) * sizeof *sa), *sb = fr_xmalloc(((size_t)ns + 1) * sizeof *sb);
        int ne = 0, i = 0;
        for (fr_meter_step *s = d->steps; s; s = s->next, i++) {
            double a = s->t0 > F ? s->t0 : F;
            double b = s->ended ? (s->t1 < T ? s->t1 : T) : T;
            sa[i] = a;
            sb[i] = b;
            if (b > a) {
                e[ne++] = (ev){a, +1};
                e[ne++] = (ev){b, -1};
            }
        }
        e[ne++] = (ev){F, 0};
        e[ne++] = (ev){T, 0};
        qsort(e, (size_t)ne, sizeof *e, cmp_ev);
        double *pts = fr_xmalloc((size_t)ne * sizeof *pts);
        double *G = fr_xmalloc((size_t)ne * sizeof *G), *H = fr_xmalloc((size_t)ne * sizeof *H);
        int np = 0, active = 0;
        double g = 0, h = 0, ep = curve(d, F);
        for (int k = 0; k < ne;) {
            double t = e[k].t;
            if (np > 0) { /* close the interval [pts[np-1], t] with the count before t */
                double et = curve(d, t), dE = et - ep, dt = t - pts[np - 1];
                if (active > 0) {
                    g += dE / active;
                    h += dt / active;
                    d->win_busy += dt;
                } else {
                    d->idle_j += dE;
                    d->win_idle += dE;
                    pool_add(m, pts[np - 1], t, dE, d->capacity ? dt / m->n_cap : 0);
                }
                ep = et;
            }
            pts[np] = t;
            G[np] = g;
            H[np] = h;
            np++;
            while (k < ne && e[k].t == t) active += e[k++].d;
        }
        double dm = curve(d, T) - curve(d, F);
        d->measured_j += dm;
        d->win_measured += dm;
        i = 0;
        for (fr_meter_step *s = d->steps; s; s = s->next, i++) {
            if (!(sb[i] > sa[i])) continue;
            int ia = find_pt(pts, np, sa[i]), ib = find_pt(pts, np, sb[i]);
            double ej = G[ib] - G[ia], hs = H[ib] - H[ia];
            if (s->total_share > 0) {
                for (int q = 0; q < s->n; q++) {
                    double f = s->sh[q].share / s->total_share;
                    fr_meter_req *r = s->sh[q].req;
                    int st = s->sh[q].stage;
                    r->j[di][st] += ej * f;
                    r->busy[di][st] += hs * f;
                    d->stage_j[st] += ej * f;
                }
                d->attributed_j += ej;
                d->win_attr += ej;
            } else { /* a step serving nobody (warm-up): its energy is overhead, reported as idle */
                d->idle_j += ej;
                d->win_idle += ej;
                pool_add(m, sa[i], sb[i], ej, d->capacity ? hs / m->n_cap : 0);
            }
        }
        free(e);
        free(sa);
        free(sb);
        free(pts);
        free(G);
        free(H);
        d->frontier = T;
        /* drop knots before the one at or below the frontier */
        int keep = 0;
        while (keep + 1 < d->kn && d->k[keep + 1].t <= T) keep++;
        if (keep > 0) {
            memmove(d->k, d->k + keep, (size_t)(d->kn - keep) * sizeof *d->k);
            d->kn -= keep;
        }
    }
    /* retire steps fully accounted; on a dead device, everything that has ended */
    bool dead = d->src == FR_MSRC_LOST || d->src == FR_MSRC_NONE;
    fr_meter_step **pp = &d->steps;
    while (*pp) {
        fr_meter_step *s = *pp;
        if (s->ended && (s->t1 <= d->frontier || dead)) {
            *pp = s->next;
            if (dead && s->t1 > d->frontier) {
                double from = s->t0 > d->frontier ? s->t0 : d->frontier;
                m->unmeasured_s += s->t1 - from;
                finish_step(m, s, true);
            } else {
                finish_step(m, s, false);
            }
        } else {
            pp = &s->next;
        }
    }
}

/* ---- sampling -------------------------------------------------------------------------------- */

typedef struct reading {
    double t;            /* sample time */
    bool ok;             /* energy valid */
    double j;            /* cpu: cumulative joules */
    fr_nvml_reading nv;  /* gpu */
} reading;

static void mark_lost(fr_meter *m, mdev *d, const char *why) {
    if (d->src == FR_MSRC_LOST) return;
    d->src = FR_MSRC_LOST;
    fr_warn("meter: %s lost (%s): energy after %.3f s is unmeasured; its requests are marked "
            "incomplete", d->name, why, last_knot_t(d));
    (void)m;
}

/* Apply one reading (under mu). force: add a knot even if the counter did not move. */
static void apply(fr_meter *m, int di, const reading *rd, bool force) {
    mdev *d = &m->dev[di];
    double t = rd->t;
    if (d->src == FR_MSRC_LOST || d->src == FR_MSRC_NONE) return;
    if (d->nvml_idx < 0) { /* CPU: exact at sample time, a knot every sample */
        if (rd->ok) push_knot(d, t, rd->j);
        return;
    }
    const fr_nvml_reading *r = &rd->nv;
    d->power_w = r->power_rc == FR_NVML_SUCCESS ? r->power_mw / 1000.0 : NAN;
    d->util = r->util_rc == FR_NVML_SUCCESS ? r->util_gpu / 100.0 : NAN;
    d->mem_used = r->mem_rc == FR_NVML_SUCCESS ? (double)r->mem_used : NAN;
    d->sm_hz = r->clock_rc == FR_NVML_SUCCESS ? r->sm_mhz * 1e6 : NAN;
    d->temp_c = r->temp_rc == FR_NVML_SUCCESS ? (double)r->temp_c : NAN;
    if (r->energy_rc == FR_NVML_ERROR_GPU_IS_LOST) {
        mark_lost(m, d, "NVML_ERROR_GPU_IS_LOST");
        return;
    }
    bool energy_ok = r->energy_rc == FR_NVML_SUCCESS;
    bool unsupported = r->energy_rc == FR_NVML_ERROR_NOT_SUPPORTED || r->energy_rc == FR_NVML_NOT_LOADED;
    if (d->src == FR_MSRC_NVML_ENERGY && energy_ok) {
        if (d->have_raw && t <= d->raw_t) return;
        d->err_run = 0;
        if (!d->have_raw) {
            d->have_raw = true;
            d->raw = r->energy_mj;
            d->raw_t = t;
            push_knot(d, t, d->acc_j);
            return;
        }
        bool reset;
        double dmj = fr_nvml_counter_delta_mj(d->raw, r->energy_mj, t - d->raw_t, m->cfg.gpu_max_watts, &reset);
        if (reset && !d->warned_reset) {
            d->warned_reset = true;
            fr_warn("meter: %s energy counter went back from %llu to %llu mJ (driver reload?)",
                    d->name, (unsigned long long)d->raw, (unsigned long long)r->energy_mj);
        }
        bool moved = r->energy_mj != d->raw;
        d->acc_j += dmj / 1000.0;
        d->raw = r->energy_mj;
        d->raw_t = t;
        if (moved || force || t - last_knot_t(d) >= m->cfg.max_stale_ms / 1000.0) push_knot(d, t, d->acc_j);
        return;
    }
    if (d->src == FR_MSRC_NVML_ENERGY && unsupported && !d->have_raw) {
        if (r->power_rc == FR_NVML_SUCCESS) {
            d->src = FR_MSRC_NVML_POWER;
            fr_warn("meter: %s: total-energy counter not supported; integrating the (averaged) "
                    "power reading instead", d->name);
        } else {
            d->src = FR_MSRC_NONE;
            fr_warn("meter: %s: neither energy counter nor power reading supported: its energy "
                    "is reported as unmeasured", d->name);
            return;
        }
    }
    if (d->src == FR_MSRC_NVML_POWER) {
        if (r->power_rc != FR_NVML_SUCCESS) {
            if (d->err_run++ == 0) fr_warn("meter: %s: power read failed: %d", d->name, r->power_rc);
            return;
        }
        d->err_run = 0;
        if (d->have_raw) {
            if (t <= d->raw_t) return;
            d->acc_j += d->power_w * (t - d->raw_t);
        }
        d->have_raw = true;
        d->raw_t = t;
        push_knot(d, t, d->acc_j);
        return;
    }
    /* a transient error: no knot this time */
    if (d->err_run++ == 0)
        fr_warn("meter: %s: energy read failed: %s", d->name, fr_nvml_error(m->nvml, r->energy_rc));
}

/* Read every device (no lock: sources are only touched here, under sample_mu). */
static void read_all(fr_meter *m, reading *rd) {
    for (int i = 0; i < m->n_dev; i++) {
        mdev *d = &m->dev[i];
        double t0 = fr_meter_now(m);
        if (d->nvml_idx < 0) {
            pthread_mutex_lock(&m->cpu_mu);
            t0 = fr_meter_now(m);
            rd[i].ok = fr_cpu_energy_read(m->cpu, &rd[i].j) == 0;
            rd[i].t = (t0 + fr_meter_now(m)) / 2;
            pthread_mutex_unlock(&m->cpu_mu);
            continue;
        } else if (d->src != FR_MSRC_LOST && d->src != FR_MSRC_NONE) {
            fr_nvml_read(m->nvml, d->nvml_idx, &rd[i].nv);
        }
        rd[i].t = (t0 + fr_meter_now(m)) / 2;
    }
}

static void finalise_ready(fr_meter *m, fr_meter_req *list);

static void flush_energy_rows(fr_meter *m, double now, bool force) {
    if (!m->ledger) return;
    if (!force && now - m->last_energy_flush < m->cfg.energy_flush_s) return;
    m->last_energy_flush = now;
    for (int i = 0; i < m->n_dev; i++) {
        mdev *d = &m->dev[i];
        if (!d->started || d->frontier <= d->win_t0) continue;
        fr_ledger_energy e;
        memset(&e, 0, sizeof e);
        e.t_start = m->epoch_off + d->win_t0;
        e.t_end = m->epoch_off + d->frontier;
        snprintf(e.device, sizeof e.device, "%s", d->name);
        snprintf(e.source, sizeof e.source, "%s", fr_meter_source_name(d->src));
        e.measured_j = d->win_measured;
        e.attributed_j = d->win_attr;
        e.idle_j = d->win_idle;
        e.busy_s = d->win_busy;
        fr_ledger_put_energy(m->ledger, &e);
        d->win_t0 = d->frontier;
        d->win_measured = d->win_attr = d->win_idle = d->win_busy = 0;
    }
}

/* One sample + pass + finalisation. force: knot every device now. */
static void sample_and_account(fr_meter *m, bool force, bool force_energy_rows) {
    reading rd[FR_METER_MAX_DEV];
    memset(rd, 0, sizeof rd);
    pthread_mutex_lock(&m->sample_mu);
    read_all(m, rd);
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_dev; i++) apply(m, i, &rd[i], force);
    double now = fr_meter_now(m);
    for (int i = 0; i < m->n_dev; i++) {
        mdev *d = &m->dev[i];
        if (d->started && d->src != FR_MSRC_LOST && d->src != FR_MSRC_NONE && now - last_knot_t(d) > m->stall_s)
            mark_lost(m, d, "no new reading");
        account_device(m, i);
    }
    flush_energy_rows(m, now, force_energy_rows);
    pool_distribute(m, now);
    fr_meter_req *list = m->ready;
    m->ready = NULL;
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_unlock(&m->sample_mu);
    finalise_ready(m, list);
}

void fr_meter_tick(fr_meter *m) { sample_and_account(m, false, false); }

static void *sampler(void *arg) {
    fr_meter *m = arg;
    double period = m->cfg.sample_ms / 1000.0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        long ns = (long)(period * 1e9);
        next.tv_sec += ns / 1000000000L;
        next.tv_nsec += ns % 1000000000L;
        if (next.tv_nsec >= 1000000000L) { next.tv_sec++; next.tv_nsec -= 1000000000L; }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec + 1) next = now; /* fell far behind: do not burst */
        while (!m->stop) {
            if (pthread_cond_timedwait(&m->cv, &m->mu, &next)) break;
        }
        if (m->stop) break;
        pthread_mutex_unlock(&m->mu);
        sample_and_account(m, false, false);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- open / close ---------------------------------------------------------------------------- */

fr_meter *fr_meter_open(const fr_meter_config *cfg, fr_err *err) {
    fr_meter *m = fr_xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    const char *e = getenv("FRUGAL_NVML_LIB");
    if (e && *e) snprintf(m->cfg.nvml_lib, sizeof m->cfg.nvml_lib, "%s", e);
    e = getenv("FRUGAL_RAPL_ROOT");
    if (e && *e) snprintf(m->cfg.rapl_root, sizeof m->cfg.rapl_root, "%s", e);
    if (m->cfg.max_stale_ms <= 0) m->cfg.max_stale_ms = 1000;
    if (m->cfg.gpu_max_watts <= 0) m->cfg.gpu_max_watts = 1500;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->sample_mu, NULL);
    pthread_mutex_init(&m->fin_mu, NULL);
    pthread_mutex_init(&m->cpu_mu, NULL);
    m->fin = fr_xcalloc(FIN_RING, sizeof *m->fin);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_cond_init(&m->fin_cv, &ca);
    pthread_condattr_destroy(&ca);
    m->prom = fr_xcalloc(1, sizeof *m->prom);
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = 0;
    m->rng = seed ^ (uint64_t)(fr_time_s() * 1e9) ^ (uint64_t)(uintptr_t)m;
    if (!m->rng) m->rng = 0x9e3779b97f4a7c15ULL;

    /* clock */
    if (m->cfg.clock) {
        m->epoch_off = m->cfg.epoch_at_zero;
    } else {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        m->epoch_off = (double)rt.tv_sec + rt.tv_nsec * 1e-9 - fr_time_s();
    }

    /* devices: CPU first */
    char why[600];
    m->cpu = fr_cpu_energy_open(m->cfg.rapl_root, m->cfg.cpu_source, m->cfg.cpu_watts_per_core, why, sizeof why);
    if (!m->cpu) { /* RAPL required but absent: fall back loudly rather than report zero */
        fr_warn("meter: cpu: %s; using the estimate", why);
        m->cpu = fr_cpu_energy_open(m->cfg.rapl_root, 2, m->cfg.cpu_watts_per_core, why, sizeof why);
    }
    fr_info("meter: cpu: %s", why);
    mdev *c = &m->dev[0];
    snprintf(c->name, sizeof c->name, "cpu");
    c->src = fr_cpu_energy_source(m->cpu);
    c->nvml_idx = -1;
    c->power_w = c->util = c->mem_used = c->sm_hz = c->temp_c = NAN;
    m->n_dev = 1;
    if (m->cfg.nvml) {
        m->nvml = fr_nvml_open(m->cfg.nvml_lib, why, sizeof why);
        if (!m->nvml) fr_info("meter: no GPU energy source: %s", why);
        else fr_info("meter: %s", why);
    }
    for (int i = 0; i < fr_nvml_count(m->nvml); i++) {
        mdev *d = &m->dev[m->n_dev++];
        snprintf(d->name, sizeof d->name, "gpu%d", i);
        d->src = FR_MSRC_NVML_ENERGY;
        d->nvml_idx = i;
        d->capacity = true;
        d->power_w = d->util = d->mem_used = d->sm_hz = d->temp_c = NAN;
    }
    if (m->n_dev == 1) c->capacity = true;
    fr_cost_resolve_host(&m->cfg.cost, m->n_dev - 1); /* the counts the default hardware rate uses */
    for (int i = 0; i < m->n_dev; i++) m->n_cap += m->dev[i].capacity;
    double period = m->cfg.sample_ms > 0 ? m->cfg.sample_ms / 1000.0 : 0.1;
    m->stall_s = fmax(10.0, fmax(20 * period, 5 * m->cfg.max_stale_ms / 1000.0));
    if (m->cfg.idle_policy == FR_IDLE_AMORTISE) {
        m->nb = (int)ceil(m->cfg.idle_window_s);
        if (m->nb < 1) m->nb = 1;
        m->bucket_j = fr_xcalloc((size_t)m->nb, sizeof(double));
        m->bucket_s = fr_xcalloc((size_t)m->nb, sizeof(double));
    }
    m->b_head = -1;

    /* sinks */
    if (m->cfg.ledger_path[0]) {
        fr_buf dump = {0};
        fr_meter_config_dump(&m->cfg, &dump);
        fr_ledger_config lc = {.path = m->cfg.ledger_path,
                               .queue = m->cfg.ledger_queue,
                               .sync_full = m->cfg.ledger_sync_full,
                               .retention_days = m->cfg.retention_days,
                               .retention_rows = m->cfg.retention_rows,
                               .config_dump = fr_buf_cstr(&dump),
                               .on_commit = NULL,
                               .ctx = NULL};
        m->ledger = fr_ledger_open(&lc, err);
        fr_buf_free(&dump);
        if (!m->ledger) {
            fr_meter_close(m);
            return NULL;
        }
    }
    fr_otlp_config oc = {m->cfg.otlp_url, m->cfg.trace_file, m->cfg.service_name, m->cfg.trace_queue,
                         m->cfg.trace_batch, m->cfg.trace_flush_ms, m->cfg.trace_timeout_ms};
    fr_err e2 = {0};
    m->otlp = fr_otlp_open(&oc, &e2);
    if (!m->otlp && e2.msg[0]) {
        fr_err_set(err, "%s", e2.msg);
        fr_meter_close(m);
        return NULL;
    }

    /* baseline knots, then the thread */
    sample_and_account(m, true, false);
    m->last_energy_flush = fr_meter_now(m);
    if (m->cfg.sample_ms > 0) {
        if (pthread_create(&m->thr, NULL, sampler, m) == 0) m->thr_on = true;
        else fr_warn("meter: cannot start the sampler thread; sampling only on flush");
    }
    return m;
}

void fr_meter_flush(fr_meter *m) {
    sample_and_account(m, true, true);
    if (m->ledger) fr_ledger_flush(m->ledger);
    if (m->otlp) fr_otlp_flush(m->otlp);
}

void fr_meter_close(fr_meter *m) {
    if (!m) return;
    if (m->thr_on) {
        pthread_mutex_lock(&m->mu);
        m->stop = true;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thr, NULL);
        m->thr_on = false;
    }
    /* end every running step and every open account */
    pthread_mutex_lock(&m->mu);
    double now = fr_meter_now(m);
    for (int i = 0; i < m->n_dev; i++)
        for (fr_meter_step *s = m->dev[i].steps; s; s = s->next)
            if (!s->ended) {
                s->ended = true;
                s->t1 = now;
                step_walltime(m, s);
            }
    fr_meter_req *r = m->open;
    while (r) {
        fr_meter_req *nx = r->next;
        if (!r->ended) {
            r->ended = true;
            r->t_end = now;
            r->res.status = FR_REQ_CANCELLED;
            r->res.http_status = 499;
            r->res.ttft_s = -1;
            r->res.slo_met = -1;
            snprintf(r->error, sizeof r->error, "meter closed before the request ended");
            r->res.error = r->error;
            if (r->pending == 0) req_ready(m, r);
        }
        r = nx;
    }
    pthread_mutex_unlock(&m->mu);
    if (m->cpu) sample_and_account(m, true, true);
    /* whatever is still pending (dead devices, steps past the last knot) is unmeasured */
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_dev; i++) {
        mdev *d = &m->dev[i];
        while (d->steps) {
            fr_meter_step *s = d->steps;
            d->steps = s->next;
            double from = s->t0 > d->frontier ? s->t0 : d->frontier;
            if (s->t1 > from) m->unmeasured_s += s->t1 - from;
            finish_step(m, s, s->t1 > d->frontier);
        }
    }
    pool_distribute(m, fr_meter_now(m));
    fr_meter_req *list = m->ready;
    m->ready = NULL;
    pthread_mutex_unlock(&m->mu);
    finalise_ready(m, list);
    if (m->ledger) fr_ledger_close(m->ledger);
    fr_otlp_close(m->otlp);
    fr_nvml_close(m->nvml);
    if (m->cpu) fr_cpu_energy_close(m->cpu);
    for (int i = 0; i < m->n_dev; i++) free(m->dev[i].k);
    free(m->bucket_j);
    free(m->bucket_s);
    free(m->prom);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->sample_mu);
    pthread_mutex_destroy(&m->fin_mu);
    pthread_mutex_destroy(&m->cpu_mu);
    pthread_cond_destroy(&m->cv);
    pthread_cond_destroy(&m->fin_cv);
    free(m->fin);
    free(m);
}

/* ---- requests -------------------------------------------------------------------------------- */

fr_meter_req *fr_meter_request_begin(fr_meter *m, const fr_meter_req_info *info) {
    fr_meter_req_info none;
    if (!info) {
        memset(&none, 0, sizeof none);
        info = &none;
    }
    fr_meter_req *r = fr_xcalloc(1, sizeof *r);
    copy_str(r->key_id, sizeof r->key_id, info->api_key_id);
    copy_str(r->route, sizeof r->route, info->route);
    copy_str(r->tier, sizeof r->tier, info->tier);
    copy_str(r->modality, sizeof r->modality, info->modality);
    fr_traceparent tp;
    bool cont = info->traceparent && fr_traceparent_parse(info->traceparent, strlen(info->traceparent), &tp) == 0;
    pthread_mutex_lock(&m->mu);
    r->t_begin = fr_meter_now(m);
    if (cont) {
        memcpy(r->trace_id, tp.trace_id, 16);
        memcpy(r->parent_id, tp.parent_id, 8);
        r->has_parent = true;
        r->flags = tp.flags;
    } else {
        rnd_bytes(m, r->trace_id, 16);
        r->flags = 1;
    }
    rnd_bytes(m, r->span_id, 8);
    if (info->id && info->id[0]) {
        copy_str(r->id, sizeof r->id, info->id);
    } else {
        uint8_t b[8];
        char h[17];
        rnd_bytes(m, b, 8);
        fr_meter_hex(b, 8, h);
        snprintf(r->id, sizeof r->id, "req-%s", h);
    }
    r->arm_idx = -1;
    if (info->arm && info->arm[0]) {
        copy_str(r->arm, sizeof r->arm, info->arm);
        for (int i = 0; i < m->cfg.n_arms; i++)
            if (!strcmp(m->cfg.arms[i].name, r->arm)) r->arm_idx = i;
    } else if (m->cfg.n_arms) {
        char th[33];
        fr_meter_hex(r->trace_id, 16, th);
        const fr_meter_arm *a = fr_meter_ab_assign(&m->cfg, info->sticky_key ? info->sticky_key : th);
        snprintf(r->arm, sizeof r->arm, "%s", a->name);
        r->arm_idx = (int)(a - m->cfg.arms);
    }
    r->next = m->open;
    if (m->open) m->open->prev = r;
    m->open = r;
    m->n_open++;
    pthread_mutex_unlock(&m->mu);
    return r;
}

void fr_meter_request_set_route(fr_meter *m, fr_meter_req *r, const char *route) {
    pthread_mutex_lock(&m->mu);
    copy_str(r->route, sizeof r->route, route);
    pthread_mutex_unlock(&m->mu);
}

void fr_meter_request_set_modality(fr_meter *m, fr_meter_req *r, const char *modality) {
    pthread_mutex_lock(&m->mu);
    copy_str(r->modality, sizeof r->modality, modality);
    pthread_mutex_unlock(&m->mu);
}

void fr_meter_request_set_tier(fr_meter *m, fr_meter_req *r, const char *tier) {
    pthread_mutex_lock(&m->mu);
    copy_str(r->tier, sizeof r->tier, tier);
    pthread_mutex_unlock(&m->mu);
}

void fr_meter_request_set_feature(fr_meter *m, fr_meter_req *r, const char *key, double v) {
    if (!key || !isfinite(v)) return;
    char k[64];
    size_t n = 0;
    for (const char *p = key; *p && n < sizeof k - 1; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')
            k[n++] = *p;
    k[n] = 0;
    if (!n) return;
    pthread_mutex_lock(&m->mu);
    size_t len = strlen(r->features);
    int w = snprintf(r->features + len, sizeof r->features - len, "%s\"%s\":%.9g", len ? "," : "", k, v);
    if (w < 0 || (size_t)w >= sizeof r->features - len) r->features[len] = 0; /* full: dropped */
    pthread_mutex_unlock(&m->mu);
}

const char *fr_meter_request_arm(const fr_meter_req *r) { return r->arm; }
const char *fr_meter_request_id(const fr_meter_req *r) { return r->id; }

const char *fr_meter_request_arm_options(const fr_meter *m, const fr_meter_req *r) {
    return r->arm_idx >= 0 ? m->cfg.arms[r->arm_idx].options : "";
}

void fr_meter_request_traceparent(const fr_meter_req *r, char out[56]) {
    fr_traceparent_format(r->trace_id, r->span_id, r->flags, out);
}

static double req_joules(const fr_meter_req *r) {
    double j = 0;
    for (int d = 0; d < FR_METER_MAX_DEV; d++)
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) j += r->j[d][s];
    return j;
}

static double req_occupancy(const fr_meter *m, const fr_meter_req *r, int stage) {
    double o = 0;
    for (int d = 0; d < m->n_dev; d++) {
        if (!m->dev[d].capacity) continue;
        for (int s = 0; s < FR_MSTAGE_COUNT; s++)
            if (stage < 0 || s == stage) o += r->busy[d][s];
    }
    return m->n_cap ? o / m->n_cap : 0;
}

/* Reads the CPU source now and settles the CPU's accounting up to that knot (under mu; takes
 * cpu_mu first, released before mu is taken). Steps that ended on the CPU before the call are
 * fully attributed afterwards, so their requests' CPU figures are final. */
static void settle_cpu_locked(fr_meter *m) {
    mdev *d = &m->dev[0];
    if (!m->cpu || (d->src != FR_MSRC_RAPL && d->src != FR_MSRC_ESTIMATED)) return;
    pthread_mutex_unlock(&m->mu);
    double e = 0;
    pthread_mutex_lock(&m->cpu_mu);
    double t0 = fr_meter_now(m);
    bool ok = fr_cpu_energy_read(m->cpu, &e) == 0;
    double t = (t0 + fr_meter_now(m)) / 2;
    pthread_mutex_unlock(&m->cpu_mu);
    pthread_mutex_lock(&m->mu);
    if (ok) push_knot(d, t, e); /* ignored when the sampler has pushed a later knot meanwhile */
    account_device(m, 0);
}

/* The request's figures now (under mu): accounted energy + the unaccounted part of its steps at
 * the devices' current power, split between the steps running there. Final when every step of
 * the request is accounted and no idle remains to be amortised onto it. */
static void summarise(fr_meter *m, const fr_meter_req *r, fr_meter_req_summary *sum) {
    double j = req_joules(r), occ = req_occupancy(m, r, -1);
    bool est = false, inc = r->incomplete;
    for (int di = 0; di < m->n_dev; di++) {
        mdev *d = &m->dev[di];
        if (!(r->dev_used >> di & 1)) continue;
        est |= d->src == FR_MSRC_ESTIMATED;
        inc |= d->src == FR_MSRC_LOST || d->src == FR_MSRC_NONE;
        double w = slope(d), now = r->ended ? r->t_end : fr_meter_now(m);
        for (fr_meter_step *s = d->steps; s; s = s->next) {
            double end = s->ended ? s->t1 : now, from = s->t0 > d->frontier ? s->t0 : d->frontier;
            if (end <= from || s->total_share <= 0) continue;
            /* steps that ran at the same time as this one share the device's power (the
             * settled attribution splits the same way); sequential steps do not */
            double mid = 0.5 * (from + end);
            int running = 0;
            for (fr_meter_step *t = d->steps; t; t = t->next) {
                double t_end = t->ended ? t->t1 : now;
                running += t->t0 <= mid && t_end >= mid;
            }
            if (running < 1) running = 1;
            for (int q = 0; q < s->n; q++)
                if (s->sh[q].req == r) {
                    double f = s->sh[q].share / s->total_share / running;
                    j += w * (end - from) * f;
                    if (d->capacity && m->n_cap) occ += (end - from) * f / m->n_cap;
                }
        }
    }
    double parts[FR_COST_N];
    sum->joules = j;
    sum->usd = fr_cost_price(&m->cfg.cost, j, occ, parts);
    sum->estimated = est;
    sum->incomplete = inc;
    sum->final = r->pending == 0 && m->cfg.idle_policy == FR_IDLE_REPORT;
}

/* Records a closed request's final figures for fr_meter_request_final (under mu). */
static void fin_put(fr_meter *m, const char *id, const fr_meter_req_summary *sum) {
    fin_entry *f = &m->fin[m->fin_n++ % FIN_RING];
    snprintf(f->id, sizeof f->id, "%s", id);
    f->sum = *sum;
    f->sum.final = true;
    pthread_cond_broadcast(&m->fin_cv);
}

void fr_meter_request_peek(fr_meter *m, fr_meter_req *r, fr_meter_req_summary *sum) {
    pthread_mutex_lock(&m->mu);
    settle_cpu_locked(m);
    summarise(m, r, sum);
    pthread_mutex_unlock(&m->mu);
}

static void fill_row(const fr_meter *m, const fr_meter_req *r, fr_ledger_row *out);

/* Queue the provisional ledger row of a request that has just ended, with the figures of its
 * response (under mu, so it is queued before its final row can be; ledger.h has the two steps). */
static void put_provisional(fr_meter *m, fr_meter_req *r, const fr_meter_req_summary *sum) {
    fr_ledger_row row;
    fill_row(m, r, &row);
    row.joules = sum->joules;
    row.estimated = sum->estimated;
    row.incomplete = true; /* provisional: the final figures replace these */
    row.occupancy_s = req_occupancy(m, r, -1);
    row.usd_total = fr_cost_price(&m->cfg.cost, row.joules, row.occupancy_s, row.usd);
    r->ledger_seq = fr_ledger_put_seq(m->ledger, &row);
}

void fr_meter_request_end(fr_meter *m, fr_meter_req *r, const fr_meter_req_result *res,
                          fr_meter_req_summary *sum) {
    fr_meter_req_summary local;
    if (!sum && m->ledger) sum = &local; /* the provisional row carries the figures */
    pthread_mutex_lock(&m->mu);
    if (sum) settle_cpu_locked(m); /* before `ended`: the pass cannot finalise r under us */
    r->t_end = fr_meter_now(m);
    r->ended = true;
    if (res) r->res = *res;
    else r->res.ttft_s = -1, r->res.slo_met = -1;
    copy_str(r->error, sizeof r->error, res ? res->error : NULL);
    r->res.error = r->error;
    if (sum) {
        summarise(m, r, sum);
        if (sum->final) fin_put(m, r->id, sum);
    }
    if (m->ledger) put_provisional(m, r, sum);
    if (sum) sum->ledger_seq = r->ledger_seq;
    if (r->pending == 0) req_ready(m, r);
    pthread_mutex_unlock(&m->mu);
}

double fr_meter_final_wait_s(const fr_meter *m) {
    if (m->cfg.final_wait_ms >= 0) return m->cfg.final_wait_ms / 1000.0;
    return 2 * (m->cfg.sample_ms > 0 ? m->cfg.sample_ms : 100) / 1000.0 + 0.1;
}

bool fr_meter_request_final(fr_meter *m, const char *id, fr_meter_req_summary *sum) {
    if (!id || !id[0]) return false;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    double w = fr_meter_final_wait_s(m);
    long ns = dl.tv_nsec + (long)((w - floor(w)) * 1e9);
    dl.tv_sec += (time_t)floor(w) + ns / 1000000000L;
    dl.tv_nsec = ns % 1000000000L;
    bool found = false, wait = w > 0;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        long lo = m->fin_n > FIN_RING ? m->fin_n - FIN_RING : 0;
        for (long i = m->fin_n - 1; i >= lo && !found; i--)
            if (!strcmp(m->fin[i % FIN_RING].id, id)) {
                *sum = m->fin[i % FIN_RING].sum;
                found = true;
            }
        if (found || !wait || pthread_cond_timedwait(&m->fin_cv, &m->mu, &dl)) break;
    }
    pthread_mutex_unlock(&m->mu);
    return found;
}

int fr_meter_ledger_wait(fr_meter *m, uint64_t seq) {
    if (!m || !m->ledger) return 0;
    return fr_ledger_wait(m->ledger, seq, m->cfg.ledger_wait_ms / 1000.0);
}

void fr_meter_ledger_amend(fr_meter *m, uint64_t seq, int http_status, const char *error) {
    if (!m || !m->ledger || !seq) return;
    char e[256];
    copy_str(e, sizeof e, error);
    fr_ledger_amend(m->ledger, seq, fr_meter_status_name(FR_REQ_FAILED), http_status, e);
}

bool fr_meter_ledger_ok(fr_meter *m, char *why, size_t n) {
    if (!m || !m->ledger) return true;
    return fr_ledger_healthy(m->ledger, why, n);
}

/* ---- steps ----------------------------------------------------------------------------------- */

fr_meter_step *fr_meter_step_begin(fr_meter *m, int device, const fr_meter_share *shares, int n) {
    fr_meter_step *s = fr_xcalloc(1, sizeof *s);
    s->n = n > 0 ? n : 0;
    s->sh = s->n ? fr_xmalloc((size_t)s->n * sizeof *s->sh) : NULL;
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        if (!shares[i].req) continue;
        s->sh[k] = shares[i];
        if (!(s->sh[k].share >= 0) || !isfinite(s->sh[k].share)) s->sh[k].share = 0;
        if ((unsigned)s->sh[k].stage >= FR_MSTAGE_COUNT) s->sh[k].stage = FR_MSTAGE_OTHER;
        s->total_share += s->sh[k].share;
        k++;
    }
    s->n = k;
    s->dev = device;
    pthread_mutex_lock(&m->mu);
    s->t0 = fr_meter_now(m);
    for (int i = 0; i < s->n; i++) {
        fr_meter_req *r = s->sh[i].req;
        r->pending++;
        if (device >= 0 && device < FR_METER_MAX_DEV) r->dev_used |= 1u << device;
    }
    if (device >= 0 && device < m->n_dev) {
        s->next = m->dev[device].steps;
        m->dev[device].steps = s;
    }
    pthread_mutex_unlock(&m->mu);
    return s;
}

fr_meter_step *fr_meter_stage_begin(fr_meter *m, fr_meter_req *r, fr_meter_stage stage, int device) {
    fr_meter_share sh = {r, 1.0, stage};
    return fr_meter_step_begin(m, device, &sh, 1);
}

void fr_meter_step_end(fr_meter *m, fr_meter_step *s) {
    if (!s) return;
    pthread_mutex_lock(&m->mu);
    s->t1 = fr_meter_now(m);
    s->ended = true;
    step_walltime(m, s);
    if (s->dev < 0 || s->dev >= m->n_dev) { /* time only, or a device with no meter */
        bool unmeasured = s->dev != FR_METER_DEV_NONE;
        if (unmeasured) m->unmeasured_s += s->t1 - s->t0;
        finish_step(m, s, unmeasured);
    } else {
        mdev *d = &m->dev[s->dev];
        if (d->src == FR_MSRC_LOST || d->src == FR_MSRC_NONE) account_device(m, s->dev); /* retires it */
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- finalisation (no meter lock held) ------------------------------------------------------ */

/* Index of a label value in a bounded table; the last slot is reserved for "other". */
static int prom_slot(char *names, size_t stride, size_t size, int *n, int max, const char *name) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(names + (size_t)i * stride, name)) return i;
    if (*n < max - 1) {
        snprintf(names + (size_t)*n * stride, size, "%s", name);
        return (*n)++;
    }
    for (int i = 0; i < *n; i++)
        if (!strcmp(names + (size_t)i * stride, "other")) return i;
    snprintf(names + (size_t)*n * stride, size, "other");
    return (*n)++;
}

static int prom_route(fr_meter_prom *p, const char *route) {
    return prom_slot(p->routes[0].name, sizeof p->routes[0], sizeof p->routes[0].name, &p->n_routes, FR_PROM_MAX_ROUTES,
                     route[0] ? route : "unknown");
}

static int prom_tier(fr_meter_prom *p, const char *tier) {
    return prom_slot(p->tiers[0].name, sizeof p->tiers[0], sizeof p->tiers[0].name, &p->n_tiers, FR_PROM_MAX_TIERS,
                     tier[0] ? tier : "default");
}

static void build_trace(fr_meter *m, const fr_meter_req *r, const fr_ledger_row *row, cJSON *spans) {
    double off = m->epoch_off;
    cJSON *b = fr_otlp_span_new(r->trace_id, r->span_id, r->has_parent ? r->parent_id : NULL, "request", 2,
                                off + r->t_begin, off + r->t_end);
    fr_otlp_attr_str(b, "frugal.request.id", r->id);
    fr_otlp_attr_str(b, "frugal.modality", r->modality);
    fr_otlp_attr_str(b, "frugal.route", r->route);
    fr_otlp_attr_str(b, "frugal.tier", r->tier);
    if (r->arm[0]) fr_otlp_attr_str(b, "frugal.arm", r->arm);
    fr_otlp_attr_str(b, "frugal.status", row->status);
    fr_otlp_attr_int(b, "http.response.status_code", r->res.http_status);
    fr_otlp_attr_int(b, "gen_ai.usage.input_tokens", r->res.tokens_in);
    fr_otlp_attr_int(b, "gen_ai.usage.output_tokens", r->res.tokens_out);
    fr_otlp_attr_dbl(b, "frugal.joules", row->joules + row->joules_idle);
    fr_otlp_attr_dbl(b, "frugal.joules.idle", row->joules_idle);
    fr_otlp_attr_dbl(b, "frugal.usd", row->usd_total);
    for (int c = 0; c < FR_COST_N; c++) {
        char k[48];
        snprintf(k, sizeof k, "frugal.usd.%s", fr_cost_component_name((fr_cost_component)c));
        fr_otlp_attr_dbl(b, k, row->usd[c]);
    }
    fr_otlp_attr_str(b, "frugal.energy.source", row->energy_source);
    fr_otlp_attr_bool(b, "frugal.energy.estimated", row->estimated);
    if (row->incomplete) fr_otlp_attr_bool(b, "frugal.energy.incomplete", true);
    if (row->slo_met >= 0) fr_otlp_attr_bool(b, "frugal.slo.met", row->slo_met == 1);
    fr_otlp_span_end(b, r->res.status == FR_REQ_OK ? 0 : 2, r->res.status == FR_REQ_OK ? NULL : r->error);
    cJSON_AddItemToArray(spans, b);
    for (int st = 0; st < FR_MSTAGE_COUNT; st++) {
        if (!r->st_steps[st]) continue;
        uint8_t sid[8];
        pthread_mutex_lock(&m->mu);
        rnd_bytes(m, sid, 8);
        pthread_mutex_unlock(&m->mu);
        double j = 0;
        for (int d = 0; d < FR_METER_MAX_DEV; d++) j += r->j[d][st];
        double parts[FR_COST_N];
        double usd = fr_cost_price(&m->cfg.cost, j, req_occupancy(m, r, st), parts);
        b = fr_otlp_span_new(r->trace_id, sid, r->span_id, fr_meter_stage_name((fr_meter_stage)st), 1,
                             off + r->st_first[st], off + r->st_last[st]);
        fr_otlp_attr_str(b, "frugal.modality", r->modality);
        fr_otlp_attr_str(b, "frugal.route", r->route);
        fr_otlp_attr_str(b, "frugal.tier", r->tier);
        fr_otlp_attr_str(b, "frugal.stage", fr_meter_stage_name((fr_meter_stage)st));
        if (st == FR_MSTAGE_PREFILL || st == FR_MSTAGE_DECODE)
            fr_otlp_attr_int(b, "frugal.tokens", (long long)llround(r->st_share[st]));
        else
            fr_otlp_attr_dbl(b, "frugal.share", r->st_share[st]);
        fr_otlp_attr_int(b, "frugal.steps", r->st_steps[st]);
        fr_otlp_attr_dbl(b, "frugal.joules", j);
        fr_otlp_attr_dbl(b, "frugal.usd", usd);
        fr_otlp_span_end(b, 0, NULL);
        cJSON_AddItemToArray(spans, b);
    }
}

/* The fields of a request's ledger row known once it has ended (everything but its cells, energy
 * and money). Under mu, or with r out of every list (finalisation). */
static void fill_row(const fr_meter *m, const fr_meter_req *r, fr_ledger_row *out) {
    fr_ledger_row row; /* the body below fills `row` */
    memset(&row, 0, sizeof row);
    snprintf(row.req_id, sizeof row.req_id, "%s", r->id);
    fr_meter_hex(r->trace_id, 16, row.trace_id);
    snprintf(row.api_key_id, sizeof row.api_key_id, "%s", r->key_id);
    snprintf(row.arm, sizeof row.arm, "%s", r->arm);
    snprintf(row.route, sizeof row.route, "%s", r->route);
    snprintf(row.tier, sizeof row.tier, "%s", r->tier);
    snprintf(row.modality, sizeof row.modality, "%s", r->modality);
    /* stages run, in the order they first started */
    int order[FR_MSTAGE_COUNT], no = 0;
    for (int st = 0; st < FR_MSTAGE_COUNT; st++) {
        if (!r->st_steps[st]) continue;
        int k = no++;
        while (k > 0 && r->st_first[order[k - 1]] > r->st_first[st]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = st;
    }
    size_t sl = 0;
    for (int i = 0; i < no; i++) {
        int w = snprintf(row.stages + sl, sizeof row.stages - sl, "%s%s", sl ? "," : "",
                         fr_meter_stage_name((fr_meter_stage)order[i]));
        if (w > 0 && (size_t)w < sizeof row.stages - sl) sl += (size_t)w;
    }
    snprintf(row.status, sizeof row.status, "%s", fr_meter_status_name(r->res.status));
    row.http_status = r->res.http_status;
    snprintf(row.error, sizeof row.error, "%s", r->error);
    snprintf(row.features, sizeof row.features, "{%s}", r->features);
    row.tokens_in = r->res.tokens_in;
    row.tokens_out = r->res.tokens_out;
    row.t_start = m->epoch_off + r->t_begin;
    row.t_end = m->epoch_off + r->t_end;
    row.latency_s = r->t_end - r->t_begin;
    row.ttft_s = r->res.ttft_s;
    row.slo_met = r->res.slo_met;
    if (row.slo_met < 0)
        for (int i = 0; i < m->cfg.n_slo; i++)
            if (!strcmp(m->cfg.slo[i].tier, r->tier)) /* not served = not met */
                row.slo_met = r->res.status == FR_REQ_OK && row.latency_s <= m->cfg.slo[i].latency_s;
    size_t el = 0;
    for (int d = 0; d < m->n_dev; d++) {
        if (!(r->dev_used >> d & 1)) continue;
        const mdev *dv = &m->dev[d];
        row.estimated |= dv->src == FR_MSRC_ESTIMATED;
        int w = snprintf(row.energy_source + el, sizeof row.energy_source - el, "%s%s:%s", el ? "," : "",
                         dv->name, fr_meter_source_name(dv->src));
        if (w > 0 && (size_t)w < sizeof row.energy_source - el) el += (size_t)w;
    }
    row.incomplete = r->incomplete;
    *out = row;
}

static void finalise_one(fr_meter *m, fr_meter_req *r) {
    fr_ledger_row row;
    fr_ledger_cell cells[FR_METER_MAX_DEV * FR_MSTAGE_COUNT + FR_MSTAGE_COUNT];
    int nc = 0;
    fill_row(m, r, &row);
    for (int st = 0; st < FR_MSTAGE_COUNT; st++) {
        for (int slot = 0; slot <= m->n_dev; slot++) {
            double sec = r->wall[slot][st];
            double j = slot ? r->j[slot - 1][st] : 0;
            double busy = slot && m->dev[slot - 1].capacity && m->n_cap ? r->busy[slot - 1][st] / m->n_cap : 0;
            if (sec == 0 && j == 0 && busy == 0) continue;
            fr_ledger_cell *c = &cells[nc++];
            snprintf(c->device, sizeof c->device, "%s", slot ? m->dev[slot - 1].name : "");
            c->stage = (fr_meter_stage)st;
            c->seconds = sec;
            c->joules = j;
            c->occupancy_s = busy;
            if (st == FR_MSTAGE_QUEUE) row.queue_s += sec;
        }
    }
    row.cells = cells;
    row.n_cells = nc;
    row.joules = req_joules(r);
    row.joules_idle = r->idle_j;
    row.occupancy_s = req_occupancy(m, r, -1) + r->idle_s;
    row.usd_total = fr_cost_price(&m->cfg.cost, row.joules + row.joules_idle, row.occupancy_s, row.usd);

    fr_meter_req_summary fsum = {.joules = row.joules + row.joules_idle, .usd = row.usd_total,
                                 .estimated = row.estimated, .incomplete = row.incomplete};

    if (m->cfg.on_row) m->cfg.on_row(m->cfg.on_row_ctx, &row);
    if (m->ledger) fr_ledger_put_final(m->ledger, r->ledger_seq, &row); /* completes the provisional row */
    if (m->otlp) {
        cJSON *spans = cJSON_CreateArray();
        if (!spans) fr_panic(__FILE__, __LINE__, "cJSON: out of memory");
        build_trace(m, r, &row, spans);
        fr_otlp_put(m->otlp, spans); /* the exporter owns the spans now */
    }

    pthread_mutex_lock(&m->mu);
    fin_put(m, r->id, &fsum);
    fr_meter_prom *p = m->prom;
    fr_prom_route *pr = &p->routes[prom_route(p, r->route)];
    for (int c = 0; c < FR_COST_N; c++) pr->usd[c] += row.usd[c];
    double jt = row.joules + row.joules_idle;
    pr->j_sum += jt;
    int bi = 0;
    while (bi < FR_PROM_NBUCKETS - 1 && jt > fr_prom_buckets[bi]) bi++;
    pr->bucket[bi]++;
    pr->n_status[r->res.status & 3]++;
    for (int st = 0; st < FR_MSTAGE_COUNT; st++) {
        if (!r->st_steps[st]) continue;
        p->stage_n[st]++;
        for (int slot = 0; slot <= m->n_dev; slot++) p->stage_s[st] += r->wall[slot][st];
    }
    if (row.slo_met >= 0) {
        fr_prom_tier *pt = &p->tiers[prom_tier(p, r->tier)];
        if (row.slo_met) pt->met++;
        else pt->missed++;
    }
    m->n_closed++;
    pthread_mutex_unlock(&m->mu);
}

static void finalise_ready(fr_meter *m, fr_meter_req *list) {
    if (!list) return;
    pthread_mutex_lock(&m->fin_mu);
    while (list) {
        fr_meter_req *nx = list->next;
        finalise_one(m, list);
        free(list);
        list = nx;
    }
    pthread_mutex_unlock(&m->fin_mu);
}

/* ---- totals / prometheus ----------------------------------------------------------------------- */

void fr_meter_get_totals(fr_meter *m, fr_meter_totals *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&m->mu);
    t->n_dev = m->n_dev;
    t->frontier_s = INFINITY;
    for (int i = 0; i < m->n_dev; i++) {
        const mdev *d = &m->dev[i];
        snprintf(t->name[i], sizeof t->name[i], "%s", d->name);
        t->source[i] = d->src;
        t->measured_j[i] = d->measured_j;
        t->attributed_j[i] = d->attributed_j;
        t->idle_j[i] = d->idle_j;
        if (d->started && d->frontier < t->frontier_s) t->frontier_s = d->frontier;
    }
    t->idle_amortised_j = m->idle_amortised_j;
    t->unmeasured_s = m->unmeasured_s;
    t->requests_open = m->n_open;
    t->requests_closed = m->n_closed;
    pthread_mutex_unlock(&m->mu);
    if (m->ledger) {
        t->ledger_rows = fr_ledger_committed(m->ledger);
        t->ledger_dropped = fr_ledger_dropped(m->ledger);
    }
    t->traces_exported = fr_otlp_exported(m->otlp);
    t->traces_dropped = fr_otlp_dropped(m->otlp);
}

void fr_meter_prom_snapshot(fr_meter *m, fr_meter_prom *p) {
    pthread_mutex_lock(&m->mu);
    *p = *m->prom;
    p->n_dev = m->n_dev;
    for (int i = 0; i < m->n_dev; i++) {
        const mdev *d = &m->dev[i];
        snprintf(p->dev[i], sizeof p->dev[i], "%s", d->name);
        p->src[i] = d->src;
        p->power_w[i] = d->power_w;
        p->util[i] = d->util;
        p->mem_used[i] = d->mem_used;
        p->sm_hz[i] = d->sm_hz;
        p->temp_c[i] = d->temp_c;
        p->measured_j[i] = d->measured_j;
        p->idle_j[i] = d->idle_j;
        memcpy(p->stage_j[i], d->stage_j, sizeof d->stage_j);
    }
    p->idle_amortised_j = m->idle_amortised_j;
    pthread_mutex_unlock(&m->mu);
    if (m->ledger) {
        p->ledger_rows = fr_ledger_committed(m->ledger);
        p->ledger_dropped = fr_ledger_dropped(m->ledger);
    }
    p->traces_exported = fr_otlp_exported(m->otlp);
    p->traces_dropped = fr_otlp_dropped(m->otlp);
}

void fr_meter_prometheus(fr_meter *m, fr_buf *out) {
    fr_meter_prom *p = fr_xmalloc(sizeof *p);
    fr_meter_prom_snapshot(m, p);
    fr_meter_prom_format(p, out);
    free(p);
}
