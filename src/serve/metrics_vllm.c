/* metrics_vllm.c — the vLLM-compatible metric families (vllm:*) beside frugal's own (metrics.h).
 *
 * Autoscalers and routers read vLLM's names: KEDA's examples scale on vllm:num_requests_waiting,
 * the Gateway API Inference Extension's endpoint picker and llm-d's scorers read the queue, the
 * KV-cache usage, the prefix-cache counters and vllm:lora_requests_info. Names, types, label
 * names (model_name, engine = "0": frugal runs one engine per server) and histogram buckets are
 * vLLM's (its v1 PrometheusStatLogger); counters are exposed as NAME_total, as prometheus_client
 * writes them. docs/METRICS.md maps each one to frugal's figure. Bucket bounds are written as
 * Python writes floats ("1.0", "0.25") so that `le` values equal vLLM's.
 */
#include "serve/metrics.h"

#include "meter/prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const double V_TTFT_LE[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                   0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                   20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double V_TPOT_LE[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                   0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double V_LAT_LE[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0, 15.0, 20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

void fr_metrics_init_vllm(fr_metrics *m) {
    fr_hist_init(&m->v_ttft, V_TTFT_LE, (int)FR_ARRAY_LEN(V_TTFT_LE));
    fr_hist_init(&m->v_tpot, V_TPOT_LE, (int)FR_ARRAY_LEN(V_TPOT_LE));
    fr_hist_init(&m->v_e2e, V_LAT_LE, (int)FR_ARRAY_LEN(V_LAT_LE));
    fr_hist_init(&m->v_queue, V_LAT_LE, (int)FR_ARRAY_LEN(V_LAT_LE));
}

/* Called with m->mu held, for a generation request that ended (fr_metrics_generation). */
void fr_metrics_observe_vllm(fr_metrics *m, const fr_req_info *info) {
    if (info->t_first > 0) fr_hist_observe(&m->v_ttft, info->t_first - info->t_arrival);
    /* vLLM observes each inter-token interval; frugal keeps a request's first and last token
     * times only, so each of its n-1 intervals is observed at the request's mean: _sum and
     * _count (hence rate(sum) / rate(count)) equal vLLM's, the buckets are coarser. */
    if (info->t_first > 0 && info->t_end > info->t_first && info->n_generated > 1) {
        double tpot = (info->t_end - info->t_first) / (info->n_generated - 1);
        for (int i = 1; i < info->n_generated; i++) fr_hist_observe(&m->v_tpot, tpot);
    }
    if (info->t_end > 0) fr_hist_observe(&m->v_e2e, info->t_end - info->t_arrival);
    if (info->t_admit > 0) fr_hist_observe(&m->v_queue, info->t_admit - info->t_arrival);
}

/* A bucket bound as Python's repr of a float writes it: 1.0, 0.25, 0.075, 2560.0 (the shortest
 * digits that read back as the same double). */
static void le_str(fr_buf *o, double v) {
    if (v == floor(v) && fabs(v) < 1e15) {
        fr_buf_printf(o, "%.1f", v);
        return;
    }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    fr_buf_puts(o, tmp);
}

/* `{model_name="...",engine="0"` without the closing brace (the caller adds more or closes). */
static void labels_open(fr_buf *o, const char *model) {
    fr_buf_puts(o, "{model_name=\"");
    fr_prom_escape(o, model);
    fr_buf_puts(o, "\",engine=\"0\"");
}

static void gauge_d(fr_buf *o, const char *name, const char *help, const char *model, double v) {
    fr_prom_head(o, name, "gauge", help);
    fr_buf_puts(o, name);
    labels_open(o, model);
    fr_buf_printf(o, "} %.17g\n", v);
}

static void counter_u(fr_buf *o, const char *name, const char *help, const char *model,
                      uint64_t v) {
    fr_prom_head(o, name, "counter", help);
    fr_buf_puts(o, name);
    labels_open(o, model);
    fr_buf_printf(o, "} %llu\n", (unsigned long long)v);
}

static void hist(fr_buf *o, const char *name, const char *help, const char *model,
                 const fr_hist *h) {
    fr_prom_head(o, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->bucket[i];
        fr_buf_printf(o, "%s_bucket", name);
        labels_open(o, model);
        fr_buf_puts(o, ",le=\"");
        if (i < h->n) le_str(o, h->le[i]);
        else fr_buf_puts(o, "+Inf");
        fr_buf_printf(o, "\"} %llu\n", (unsigned long long)cum);
    }
    fr_buf_printf(o, "%s_sum", name);
    labels_open(o, model);
    fr_buf_printf(o, "} %.9g\n", h->sum);
    fr_buf_printf(o, "%s_count", name);
    labels_open(o, model);
    fr_buf_printf(o, "} %llu\n", (unsigned long long)h->count);
}

void fr_metrics_render_vllm(const fr_metrics *m, const fr_engine_stats *st,
                            const fr_metrics_extra *x, fr_buf *o) {
    const char *model = x->model_name;
    int run = 0, wait = 0;
    uint64_t prompt = 0, gen = 0, pre = 0;
    for (int t = 0; t < FR_N_TIERS; t++) {
        run += st->running[t];
        wait += st->waiting[t];
        prompt += st->prompt_tokens[t];
        gen += st->gen_tokens[t];
        pre += st->preempted[t];
    }
    double usage = st->kv_blocks_total > 0 ? (double)st->kv_blocks_used / st->kv_blocks_total : 0;
    gauge_d(o, "vllm:num_requests_running", "Number of requests in model execution batches.",
            model, run);
    gauge_d(o, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", model,
            wait);
    gauge_d(o, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", model,
            usage);
    gauge_d(o, "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
            "vllm:kv_cache_usage_perc instead.", model, usage);
    counter_u(o, "vllm:prefix_cache_queries_total",
              "Prefix cache queries, in terms of number of queried tokens.", model,
              st->prefix_queries);
    counter_u(o, "vllm:prefix_cache_hits_total",
              "Prefix cache hits, in terms of number of cached tokens.", model, st->prefix_hits);
    counter_u(o, "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
              model, pre);
    counter_u(o, "vllm:prompt_tokens_total", "Number of prefill tokens processed.", model, prompt);
    counter_u(o, "vllm:generation_tokens_total", "Number of generation tokens processed.", model,
              gen);
    fr_prom_head(o, "vllm:request_success_total", "counter",
                 "Count of successfully processed requests.");
    uint64_t by[3] = {0, 0, 0}; /* stop, length, abort */
    for (int t = 0; t < FR_N_TIERS; t++) {
        by[0] += st->ended[t][FR_END_STOP];
        by[1] += st->ended[t][FR_END_LENGTH];
        by[2] += st->ended[t][FR_END_CANCELLED] + st->ended[t][FR_END_DEADLINE] +
                 st->ended[t][FR_END_SHUTDOWN] + st->ended[t][FR_END_ERROR];
    }
    static const char *const reason[3] = {"stop", "length", "abort"};
    for (int k = 0; k < 3; k++) {
        fr_buf_puts(o, "vllm:request_success_total");
        labels_open(o, model);
        fr_buf_printf(o, ",finished_reason=\"%s\"} %llu\n", reason[k], (unsigned long long)by[k]);
    }
    hist(o, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
         model, &m->v_ttft);
    hist(o, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
         model, &m->v_tpot);
    hist(o, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
         model, &m->v_e2e);
    hist(o, "vllm:request_queue_time_seconds",
         "Histogram of time spent in WAITING phase for request.", model, &m->v_queue);
    /* the adapters in use (names are [A-Za-z0-9._:/-], nothing to escape); the value is the
     * time of the scrape, as vLLM sets it (set_to_current_time) */
    fr_prom_head(o, "vllm:lora_requests_info", "gauge", "Running stats on lora requests.");
    fr_buf_printf(o, "vllm:lora_requests_info{max_lora=\"%d\",running_lora_adapters=\"%s\","
                     "waiting_lora_adapters=\"%s\"} %.3f\n", x->max_lora,
                  x->lora_running ? x->lora_running : "", x->lora_waiting ? x->lora_waiting : "",
                  (double)time(NULL));
}
