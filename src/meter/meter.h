/* meter.h — energy and money per request: the API the engine, the pipeline stages and the server
 * call. See docs/METERING.md for the wiring and the reasoning behind each choice.
 *
 * Design:
 *   - Devices. Device 0 is the host CPU (RAPL package energy when readable, else an estimate from
 *     process CPU time × watts per core, always labelled "estimated"). Devices 1..n are the GPUs
 *     NVML reports (NVML is loaded at run time with dlopen; no library = no GPU device).
 *   - A sampler thread reads every device's cumulative energy every `sample_ms` and appends a knot
 *     (time, joules) to the device's curve E(t). Between knots E is linear.
 *   - Work is recorded as steps: fr_meter_step_begin(device, shares[]) … fr_meter_step_end(). A
 *     share names a request, its weight (tokens for an engine step, pixels for OCR, audio seconds
 *     for ASR, 1 for anything else) and the stage it counts as for that request.
 *   - After every sample an accounting pass advances each device's frontier to its newest knot:
 *     the energy E(b)-E(a) of every interval between step boundaries is split equally between
 *     the steps running in it and inside a step by share; an interval with no step is idle energy.
 *     So attributed + idle = measured, device by device, by construction.
 *   - A request's account is closed by fr_meter_request_end(), which queues its provisional
 *     ledger row at once (the figures of the response); once its last step is accounted (≤ one
 *     sample period later) the meter prices it (cost model), completes that row with the final
 *     figures, writes its trace and adds it to the Prometheus aggregates — all off the caller's
 *     thread.
 *
 * Thread safety: every function may be called from any thread; one mutex guards the accounting
 * state and is held for O(1) work per call (plus O(shares) in step_begin). Nothing here blocks on
 * disk or network: the ledger and the trace exporter have their own threads and bounded queues;
 * only fr_meter_ledger_wait (the server's handlers), fr_meter_flush and fr_meter_close wait.
 */
#ifndef FRUGAL_METER_H
#define FRUGAL_METER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct fr_ledger_row; /* meter/ledger.h */

/* ---- stages ---------------------------------------------------------------------------------- */

/* The stages a request can pass through, in pipeline order (these are the trace span names). */
typedef enum fr_meter_stage {
    FR_MSTAGE_DECODE_MEDIA = 0, /* decode images / audio from the request body */
    FR_MSTAGE_ASR,              /* speech to text; share = audio seconds */
    FR_MSTAGE_OCR,              /* text from images; share = pixels */
    FR_MSTAGE_VISION,           /* vision encoder; share = pixels (or image tokens) */
    FR_MSTAGE_NLU,              /* intent / routing classifier */
    FR_MSTAGE_BUDGET,           /* token budget / policy decision */
    FR_MSTAGE_QUEUE,            /* waiting for admission (time only, no device) */
    FR_MSTAGE_PREFILL,          /* engine steps processing prompt tokens; share = tokens */
    FR_MSTAGE_DECODE,           /* engine steps generating tokens; share = tokens */
    FR_MSTAGE_RESPOND,          /* serialising / streaming the response */
    FR_MSTAGE_OTHER,            /* anything else */
    FR_MSTAGE_COUNT
} fr_meter_stage;

const char *fr_meter_stage_name(fr_meter_stage s); /* "decode_media", "asr", … */
int fr_meter_stage_from_name(const char *name);    /* -1 when unknown */

/* ---- devices --------------------------------------------------------------------------------- */

#define FR_METER_MAX_GPUS 16
#define FR_METER_MAX_DEV (1 + FR_METER_MAX_GPUS)
#define FR_METER_DEV_NONE (-1) /* a time-only step (queueing): no energy */
#define FR_METER_DEV_CPU 0
/* The meter device of NVML GPU `i` (NVML order = PCI bus order; run CUDA with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA ordinals agree). */
static inline int fr_meter_dev_gpu(int i) { return 1 + i; }

/* Where a device's energy comes from. */
typedef enum fr_meter_source {
    FR_MSRC_NONE = 0,       /* no reading possible: energy on it is reported as unmeasured */
    FR_MSRC_NVML_ENERGY,    /* nvmlDeviceGetTotalEnergyConsumption (primary) */
    FR_MSRC_NVML_POWER,     /* power × time (the counter is NOT_SUPPORTED; 1-s averaged power) */
    FR_MSRC_RAPL,           /* /sys/class/powercap intel-rapl package counters */
    FR_MSRC_ESTIMATED,      /* process CPU time × watts per core: an estimate */
    FR_MSRC_LOST,           /* the device disappeared: energy after its last sample is unmeasured */
} fr_meter_source;
const char *fr_meter_source_name(fr_meter_source s); /* "nvml-energy", …, "estimated", "lost" */

/* ---- configuration --------------------------------------------------------------------------- */

#define FR_METER_MAX_TIERS 8
#define FR_METER_MAX_ARMS 8

/* The cost model (docs/METERING.md documents each default and its source). */
typedef struct fr_cost_model {
    double usd_per_kwh;           /* electricity price */
    double pue;                   /* power usage effectiveness: facility / IT energy */
    double hw_usd_per_hour;       /* hardware as a rental rate for the host; 0: the next fields */
    double hw_purchase_usd;       /* purchase price of the host; 0: the per-device prices below */
    double hw_depreciation_years; /* straight-line depreciation period */
    double hw_residual_usd;       /* value left at the end of the period */
    double labour_usd_per_month;  /* operations labour for the host */
    double host_share;            /* share of the host this replica uses, (0, 1] */
    /* without a rental rate or a purchase price, the host's devices at list prices: */
    double gpu_usd_per_hour;      /* list price of one GPU-hour (a host with GPUs) */
    double cpu_usd_per_hour;      /* list price of one vCPU-hour (a host without GPUs) */
    double gpus;                  /* GPUs of the host; 0: the GPUs the meter found */
    double cpus;                  /* vCPUs of the host; 0: the online CPUs at meter start */
} fr_cost_model;

/* One SLO target: requests of `tier` meet it when latency <= latency_s. */
typedef struct fr_meter_slo {
    char tier[32];    /* tier name */
    double latency_s; /* end-to-end latency target */
} fr_meter_slo;

/* One A/B arm: a weight and an opaque option string the engine / pipeline interpret. */
typedef struct fr_meter_arm {
    char name[32];     /* arm name recorded in the ledger */
    double weight;     /* relative traffic weight, > 0 */
    char options[256]; /* e.g. "pipeline.vision=off engine.max_batch=32" */
} fr_meter_arm;

typedef enum fr_meter_idle_policy {
    FR_IDLE_REPORT = 0, /* idle energy is reported on its own only */
    FR_IDLE_AMORTISE,   /* idle energy of the last idle_window_s is spread over the next requests */
} fr_meter_idle_policy;

typedef struct fr_meter_config {
    /* sampling */
    double sample_ms;          /* sampler period; 0 = no thread (tests drive fr_meter_tick) */
    double max_stale_ms;       /* an unchanged energy counter becomes a knot after this long */
    bool nvml;                 /* try NVML at all */
    char nvml_lib[512];        /* library path; env FRUGAL_NVML_LIB overrides */
    char rapl_root[512];       /* sysfs powercap root; env FRUGAL_RAPL_ROOT overrides */
    int cpu_source;            /* 0 auto (RAPL else estimate), 1 RAPL only, 2 estimate only */
    double cpu_watts_per_core; /* estimate: watts per fully busy core */
    double gpu_max_watts;      /* plausibility bound for counter deltas (wrap vs reset) */
    double final_wait_ms;      /* longest wait for a GPU request's final figure (-1: 2 sample
                                * periods + 100 ms; 0: never wait, send the extrapolated one) */
    /* idle */
    fr_meter_idle_policy idle_policy; /* report or amortise */
    double idle_window_s;             /* amortise: idle older than this is not charged */
    double energy_flush_s;            /* period of the ledger's per-device energy rows */
    /* money */
    fr_cost_model cost; /* prices */
    /* SLOs */
    fr_meter_slo slo[FR_METER_MAX_TIERS]; /* per-tier latency targets */
    int n_slo;                            /* entries used */
    /* A/B */
    fr_meter_arm arms[FR_METER_MAX_ARMS]; /* arms, assignment by hash of a sticky key */
    int n_arms;                           /* entries used; 0 = no experiment */
    /* ledger */
    char ledger_path[512];  /* SQLite file; "" = no ledger */
    int ledger_queue;       /* bounded queue of rows waiting for the writer */
    bool ledger_sync_full;  /* PRAGMA synchronous=FULL (survives power loss) vs NORMAL */
    double ledger_wait_ms;  /* longest wait for a response's row to commit (then 503) */
    bool ledger_path_set;   /* ledger.path was given (even ""): the server's default is off */
    double retention_days;  /* delete rows older than this; 0 = keep */
    long retention_rows;    /* keep at most this many newest rows; 0 = no limit */
    /* traces */
    char otlp_url[512];     /* OTLP/HTTP collector, e.g. http://host:4318 ("" = off) */
    char trace_file[512];   /* JSON-lines file of OTLP export requests ("" = off) */
    int trace_queue;        /* bounded queue of finished traces */
    int trace_batch;        /* traces per export request */
    double trace_flush_ms;  /* longest wait before a partial batch is sent */
    double trace_timeout_ms;/* HTTP timeout per export */
    char service_name[64];  /* OTLP resource service.name */
    /* audit */
    double audit_ocr_density;  /* OCR text density above which vision is deemed unnecessary */
    double audit_target_pue;   /* PUE an efficient facility reaches (savings candidate) */
    /* called on the meter's thread with every closed request's final row (before it is queued
     * for the ledger); the row is valid during the call only. NULL: none */
    void (*on_row)(void *ctx, const struct fr_ledger_row *row);
    void *on_row_ctx; /* argument of on_row */
    /* test hooks: a clock replacing fr_time_s and the wall-clock epoch of its zero */
    double (*clock)(void *ctx); /* NULL: fr_time_s */
    void *clock_ctx;            /* argument of clock */
    double epoch_at_zero;       /* with a test clock: unix time of clock()=0; else ignored */
} fr_meter_config;

void fr_meter_config_default(fr_meter_config *c);
/* Parses a metering configuration: a JSON object of sections (docs/METERING.md), or, while it is
 * deprecated, the older `key = value` text. Unknown keys and malformed or out-of-range values
 * are errors naming the line ("line N: …"). */
int fr_meter_config_parse(fr_meter_config *c, const char *text, size_t len, fr_err *err);
/* The same from a file; messages start with "<path>:<line>"; the older syntax logs a warning. */
int fr_meter_config_load(fr_meter_config *c, const char *path, fr_err *err);
/* Applies the JSON object `obj` of document d (base/conf.h) on top of c: the sections "meter",
 * "cost", "ledger", "trace", "audit", "slo", "ab". `prefix` names obj's place in a larger file
 * in messages ("" or e.g. "metering."). -1 with err "<file>:<line>: <key>: …". */
struct fr_conf_doc;
struct cJSON;
int fr_meter_config_apply(fr_meter_config *c, const struct fr_conf_doc *d, const struct cJSON *obj,
                          const char *prefix, fr_err *err);
/* Set one key ("cost.pue", "meter.sample_ms", "slo.P0", "ab.arm" = "weight [| options]") from a
 * string, with the same ranges. */
int fr_meter_config_set(fr_meter_config *c, const char *key, const char *value, fr_err *err);
/* Writes the effective configuration as the JSON that fr_meter_config_parse reads back (stored
 * in the ledger's meta table). */
void fr_meter_config_dump(const fr_meter_config *c, fr_buf *out);

/* ---- cost ------------------------------------------------------------------------------------ */

typedef enum fr_cost_component {
    FR_COST_ENERGY = 0,   /* IT energy × $/kWh */
    FR_COST_COOLING,      /* energy $ × (PUE − 1) */
    FR_COST_DEPRECIATION, /* hardware (depreciation or rental) × occupancy */
    FR_COST_LABOUR,       /* ops labour × occupancy */
    FR_COST_N
} fr_cost_component;
const char *fr_cost_component_name(fr_cost_component c);

/* Hardware and labour cost of the replica's share of the host per second. The hardware rate is
 * the first that applies: hw_usd_per_hour; (hw_purchase_usd − residual) over the depreciation
 * period; gpus × gpu_usd_per_hour when the host has GPUs; cpus × cpu_usd_per_hour. */
double fr_cost_hw_usd_per_s(const fr_cost_model *c);
/* Which of those applies, in words ("8 GPUs x $4.916/h list price", …), into out. */
void fr_cost_hw_basis(const fr_cost_model *c, char *out, size_t n);
/* Fills gpus / cpus left at 0 with the counts of this host (n_gpus found by the meter). */
void fr_cost_resolve_host(fr_cost_model *c, int n_gpus);
double fr_cost_labour_usd_per_s(const fr_cost_model *c);
/* Price `joules` of IT energy and `occupancy_s` host-seconds. out[FR_COST_N]; returns the total. */
double fr_cost_price(const fr_cost_model *c, double joules, double occupancy_s, double *out);

/* ---- the meter ------------------------------------------------------------------------------- */

typedef struct fr_meter fr_meter;
typedef struct fr_meter_req fr_meter_req;   /* one request's account (owned by the meter) */
typedef struct fr_meter_step fr_meter_step; /* one running step (owned by the meter) */

/* Opens the sources (logs once what was found), the ledger and the trace exporter, and starts the
 * sampler thread. Returns NULL with err set only for a bad configuration or an unopenable ledger;
 * missing NVML / RAPL are not errors. */
fr_meter *fr_meter_open(const fr_meter_config *cfg, fr_err *err);
/* Takes a last sample, closes every ended request (rows written, traces exported), stops the
 * threads. Requests not ended are closed as "cancelled". */
void fr_meter_close(fr_meter *m);

/* Test / manual mode: one sample of every device plus an accounting pass. */
void fr_meter_tick(fr_meter *m);
/* Sample now, account everything up to now, and wait until rows and traces of ended requests
 * are handed to the ledger / exporter queues and the ledger has committed them. */
void fr_meter_flush(fr_meter *m);

/* ---- requests ------------------------------------------------------------------------------- */

typedef struct fr_meter_req_info {
    const char *id;          /* request id; NULL: generated */
    const char *traceparent; /* incoming W3C traceparent header, or NULL: new trace */
    const char *api_key_id;  /* id of the API key — never the key itself */
    const char *arm;         /* A/B arm; NULL: assigned by hash of sticky_key when arms exist */
    const char *sticky_key;  /* conversation id for sticky arm assignment; NULL: the trace id */
    const char *route;       /* e.g. "chat", "support.billing" (may be set later) */
    const char *tier;        /* e.g. "interactive", "batch" */
    const char *modality;    /* e.g. "text", "image", "audio", "image+text" */
} fr_meter_req_info;

typedef enum fr_meter_status {
    FR_REQ_OK = 0,
    FR_REQ_REJECTED,  /* refused at admission (rate limit, budget, validation) */
    FR_REQ_CANCELLED, /* client went away / cancelled */
    FR_REQ_FAILED,    /* internal error */
} fr_meter_status;
const char *fr_meter_status_name(fr_meter_status s);

typedef struct fr_meter_req_result {
    fr_meter_status status; /* outcome */
    int http_status;        /* e.g. 200, 429 */
    const char *error;      /* free text (masked before storage), or NULL */
    long tokens_in;         /* prompt tokens */
    long tokens_out;        /* generated tokens */
    double ttft_s;          /* time to first token, < 0 when unknown */
    int slo_met;            /* 1 / 0, or -1: decide from the tier's configured latency target */
} fr_meter_req_result;

/* What the caller can put into its response. The CPU's energy is read at the moment the summary
 * is taken, so a request that ran only on the CPU gets its final figure at once (final = true:
 * the ledger row will say the same joules and dollars). Energy on a GPU since its last counter
 * knot is extrapolated at the device's current power (final = false); fr_meter_request_final
 * waits (bounded) for the settled figure. */
typedef struct fr_meter_req_summary {
    double joules;        /* attributed energy (+ amortised idle once settled, policy "amortise") */
    double usd;           /* total cost */
    bool estimated;       /* some energy came from an estimate */
    bool incomplete;      /* a device had no reading for part of the request */
    bool final;           /* equal to the ledger row's joules + joules_idle and usd_total */
    uint64_t ledger_seq;  /* the request's ledger row, for fr_meter_ledger_wait (0: none/refused) */
} fr_meter_req_summary;

/* The request's set of inputs, as a bit set, and its name in the ledger, traces and audit. The
 * names list the inputs in a fixed (alphabetical) order joined by '+': "text", "image", "audio",
 * "image+text", "audio+text", "audio+image", "audio+image+text"; 0 is "text" (a request with no
 * input at all is refused before it runs anything). */
enum {
    FR_MODALITY_TEXT = 1u << 0,  /* text (prompt, messages, question, ticket, history) */
    FR_MODALITY_IMAGE = 1u << 1, /* an image (image_url part, assist "image") */
    FR_MODALITY_AUDIO = 1u << 2, /* audio (input_audio part, assist "audio") */
};
const char *fr_meter_modality_name(unsigned inputs);

/* Opens a request's account; never NULL. The handle stays valid until fr_meter_request_end. */
fr_meter_req *fr_meter_request_begin(fr_meter *m, const fr_meter_req_info *info);
/* Later facts: route after NLU, a numeric feature for the audit ("ocr_text_density", 0.8). */
void fr_meter_request_set_route(fr_meter *m, fr_meter_req *r, const char *route);
void fr_meter_request_set_feature(fr_meter *m, fr_meter_req *r, const char *key, double value);
/* The modality once the body is parsed (the account is opened before; fr_meter_modality_name),
 * and the tier once the body has named it. */
void fr_meter_request_set_modality(fr_meter *m, fr_meter_req *r, const char *modality);
void fr_meter_request_set_tier(fr_meter *m, fr_meter_req *r, const char *tier);
/* The figures of an account still open, for a response built before fr_meter_request_end (the
 * assist door): the CPU is read now, so the steps already ended on it are settled. */
void fr_meter_request_peek(fr_meter *m, fr_meter_req *r, fr_meter_req_summary *sum);
/* The request's arm (assigned at begin) and its options string ("" when none). */
const char *fr_meter_request_arm(const fr_meter_req *r);
const char *fr_meter_request_arm_options(const fr_meter *m, const fr_meter_req *r);
/* The traceparent to send downstream / return to the client (55 chars + NUL). */
void fr_meter_request_traceparent(const fr_meter_req *r, char out[56]);
const char *fr_meter_request_id(const fr_meter_req *r);
/* Closes the account. `r` must not be used afterwards (steps still running keep it alive
 * internally). `sum` may be NULL. */
void fr_meter_request_end(fr_meter *m, fr_meter_req *r, const fr_meter_req_result *res,
                          fr_meter_req_summary *sum);
/* The settled figures of the request with id `id` (fr_meter_request_id) once it is closed: at
 * once when its summary at fr_meter_request_end was final, else as soon as its ledger row is
 * made (the next counter knot after its last step, <= one sample period plus one counter
 * period later), waiting at most fr_meter_final_wait_s(m). Returns true with *sum (final =
 * true), or false when the row was not made in time (or the id is unknown / too old: the last
 * 1024 closed requests are kept); *sum is left alone then. */
bool fr_meter_request_final(fr_meter *m, const char *id, fr_meter_req_summary *sum);
/* The longest fr_meter_request_final waits: meter.final_wait_ms, by default 2 sample periods +
 * 100 ms (a counter period). */
double fr_meter_final_wait_s(const fr_meter *m);

/* ---- durability of the ledger row ------------------------------------------------------------ */

/* fr_meter_request_end queues the request's ledger row (never waiting on disk) and returns its
 * number in sum->ledger_seq. A caller that must not answer before the row is durable (the
 * server, before a response's last byte) waits here: 0 when it is committed or there is no
 * ledger; -1 when the row was refused (queue full) or not committed within ledger.commit_wait_ms
 * (it is still written when the disk allows). */
int fr_meter_ledger_wait(fr_meter *m, uint64_t seq);
/* Records in the request's row (after fr_meter_ledger_wait failed) that its answer was replaced
 * by `http_status` with `error`: status "failed". */
void fr_meter_ledger_amend(fr_meter *m, uint64_t seq, int http_status, const char *error);
/* True when the ledger writes (or there is none); false while commits fail or its queue is
 * full, with a one-line reason in why. New generation work is refused meanwhile. */
bool fr_meter_ledger_ok(fr_meter *m, char *why, size_t n);

/* ---- steps ----------------------------------------------------------------------------------- */

typedef struct fr_meter_share {
    fr_meter_req *req;    /* the request served */
    double share;         /* its weight in the step (tokens, pixels, audio seconds, 1), >= 0 */
    fr_meter_stage stage; /* the stage this counts as for that request */
} fr_meter_share;

/* A step on `device` (fr_meter_dev_gpu(i), FR_METER_DEV_CPU or FR_METER_DEV_NONE) serving
 * `n` shares (copied). Timestamps are taken inside; returns the handle for step_end. */
fr_meter_step *fr_meter_step_begin(fr_meter *m, int device, const fr_meter_share *shares, int n);
void fr_meter_step_end(fr_meter *m, fr_meter_step *s);
/* One-request convenience: a pipeline stage of request r on device with weight 1. */
fr_meter_step *fr_meter_stage_begin(fr_meter *m, fr_meter_req *r, fr_meter_stage stage, int device);

/* ---- A/B ------------------------------------------------------------------------------------- */

/* Deterministic arm for a sticky key (FNV-1a 64 of the key mod total weight); NULL when the
 * configuration has no arms. */
const fr_meter_arm *fr_meter_ab_assign(const fr_meter_config *c, const char *key);

/* ---- totals, metrics ------------------------------------------------------------------------- */

typedef struct fr_meter_totals {
    int n_dev;                          /* devices (cpu + gpus) */
    char name[FR_METER_MAX_DEV][16];    /* "cpu", "gpu0", … */
    fr_meter_source source[FR_METER_MAX_DEV];
    double measured_j[FR_METER_MAX_DEV];   /* E(frontier) − E(first knot) */
    double attributed_j[FR_METER_MAX_DEV]; /* energy given to requests' steps */
    double idle_j[FR_METER_MAX_DEV];       /* energy with no step running (+ unshared steps) */
    double idle_amortised_j;               /* part of the idle energy charged to requests */
    double unmeasured_s;                   /* step-seconds on devices without a reading */
    double frontier_s;                     /* accounted up to this clock time (min over devices) */
    long requests_open, requests_closed;   /* accounts */
    long ledger_rows, ledger_dropped;      /* rows committed / dropped (queue full) */
    long traces_exported, traces_dropped;  /* traces sent / dropped */
} fr_meter_totals;
void fr_meter_get_totals(fr_meter *m, fr_meter_totals *t);

/* Appends the Prometheus text exposition of every meter metric to `out` (the server's /metrics
 * handler calls this after its own metrics). */
void fr_meter_prometheus(fr_meter *m, fr_buf *out);

/* The meter's clock (the test clock when configured). */
double fr_meter_now(const fr_meter *m);

#endif
