/* metrics.h — the server's Prometheus metrics: request counters and latency histograms kept here,
 * engine gauges and counters read from fr_engine_stats at scrape time, rendered in the text
 * exposition format (version 0.0.4) that `promtool check metrics` accepts.
 *
 * Names follow Prometheus conventions: base units (seconds), `_total` on counters only, labels
 * with bounded value sets (endpoint = the known paths or "other", tier = P0/P1/P2 or "none",
 * status = the HTTP code). Every function is thread-safe (one mutex).
 *
 * Beside the frugal_* families, the vLLM-compatible vllm:* names that autoscalers and routers
 * read (KEDA, the Gateway API Inference Extension's endpoint picker, llm-d) are rendered by
 * metrics_vllm.c with vLLM's names, types, labels (model_name, engine) and histogram buckets;
 * docs/METRICS.md gives the mapping. Those names contain ':', which `promtool check metrics`
 * reports as a lint finding (vLLM's own exposition draws the same); nothing else may.
 */
#ifndef FRUGAL_SERVE_METRICS_H
#define FRUGAL_SERVE_METRICS_H

#include <pthread.h>

#include "engine/engine.h"
#include "serve/vlm.h"

typedef enum fr_endpoint {
    FR_EP_CHAT = 0,    /* /v1/chat/completions */
    FR_EP_COMPLETIONS, /* /v1/completions */
    FR_EP_MODELS,      /* /v1/models[/id] */
    FR_EP_HEALTH,      /* /health */
    FR_EP_READY,       /* /ready */
    FR_EP_METRICS,     /* /metrics */
    FR_EP_ASSIST,      /* /v1/assist */
    FR_EP_TRANSCRIPTIONS, /* /v1/audio/transcriptions */
    FR_EP_TRANSLATIONS,   /* /v1/audio/translations */
    FR_EP_OTHER,       /* anything else */
    FR_EP_COUNT
} fr_endpoint;
const char *fr_endpoint_label(int ep);

#define FR_HIST_MAX 24
typedef struct fr_hist {
    int n;                          /* finite bucket bounds */
    const double *le;               /* (n) upper bounds, increasing */
    uint64_t bucket[FR_HIST_MAX + 1]; /* observations per bucket (not cumulative); [n] = +Inf */
    double sum;                     /* sum of observations */
    uint64_t count;                 /* observations */
} fr_hist;
void fr_hist_init(fr_hist *h, const double *le, int n);
void fr_hist_observe(fr_hist *h, double v);

#define FR_METRICS_MAX_SERIES 512
typedef struct fr_req_series {
    uint8_t ep;      /* fr_endpoint */
    int8_t tier;     /* 0..2, or -1 = none */
    int16_t status;  /* HTTP status */
    uint64_t n;      /* requests */
} fr_req_series;

typedef struct fr_metrics {
    pthread_mutex_t mu;
    fr_req_series series[FR_METRICS_MAX_SERIES]; /* frugal_requests_total */
    int n_series;
    fr_hist duration[FR_N_TIERS]; /* generation requests: arrival to last byte */
    fr_hist queue[FR_N_TIERS];    /* arrival to first admission into the running batch */
    fr_hist ttft[FR_N_TIERS];     /* arrival to first token */
    fr_hist tpot[FR_N_TIERS];     /* mean time per output token after the first */
    uint64_t slo_met[FR_N_TIERS], slo_missed[FR_N_TIERS]; /* completed requests vs SLO targets */
    /* the vllm:* histograms (all tiers, vLLM's buckets; metrics_vllm.c) */
    fr_hist v_ttft;               /* vllm:time_to_first_token_seconds */
    fr_hist v_tpot;               /* vllm:time_per_output_token_seconds (see docs/METRICS.md) */
    fr_hist v_e2e;                /* vllm:e2e_request_latency_seconds */
    fr_hist v_queue;              /* vllm:request_queue_time_seconds */
} fr_metrics;

void fr_metrics_init(fr_metrics *m);
void fr_metrics_destroy(fr_metrics *m);
/* One finished HTTP request. tier -1 for endpoints without one; duration < 0 = not observed. */
void fr_metrics_request(fr_metrics *m, int ep, int tier, int status, double duration_s);
/* Latencies of a generation request that produced output. ttft/tpot targets decide slo_met. */
void fr_metrics_generation(fr_metrics *m, const fr_req_info *info, double ttft_slo_s,
                           double tpot_slo_s);

typedef struct fr_metrics_extra {
    int connections; /* open HTTP connections */
    bool ready;      /* /ready would answer 200 */
    bool vision;     /* a vision-language model is served: the encoder cache families follow */
    fr_vlm_stats vision_cache; /* its counters */
    const char *model_name; /* served model name: the vllm:* families' model_name label (NULL:
                               those families are left out) */
    const char *lora_running, *lora_waiting; /* adapters in use, comma-separated (NULL: "") */
    int max_lora;           /* adapters the server may hold */
} fr_metrics_extra;
/* The vllm:* families (metrics_vllm.c); called by fr_metrics_render with m->mu held. */
void fr_metrics_init_vllm(fr_metrics *m);
void fr_metrics_observe_vllm(fr_metrics *m, const fr_req_info *info);
void fr_metrics_render_vllm(const fr_metrics *m, const fr_engine_stats *st,
                            const fr_metrics_extra *x, fr_buf *out);

/* Appends the whole exposition. */
void fr_metrics_render(fr_metrics *m, const fr_engine_stats *st, const fr_metrics_extra *x,
                       fr_buf *out);

#endif
