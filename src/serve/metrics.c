/* metrics.c — Prometheus counters, histograms and the text exposition (see metrics.h). */
#include "serve/metrics.h"

#include "meter/prom.h"

#include <string.h>

static const double LAT_LE[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                2.5,   5,    10,    30,   60,  120, 300};
static const double TPOT_LE[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.05,
                                 0.1,   0.2,    0.5,   1,    2};

const char *fr_endpoint_label(int ep) {
    static const char *names[FR_EP_COUNT] = {"/v1/chat/completions", "/v1/completions",
                                             "/v1/models", "/health", "/ready", "/metrics",
                                             "/v1/assist", "/v1/audio/transcriptions",
                                             "/v1/audio/translations", "other"};
    return ep >= 0 && ep < FR_EP_COUNT ? names[ep] : "other";
}

void fr_hist_init(fr_hist *h, const double *le, int n) {
    memset(h, 0, sizeof *h);
    h->le = le;
    h->n = n > FR_HIST_MAX ? FR_HIST_MAX : n;
}

void fr_hist_observe(fr_hist *h, double v) {
    if (!(v >= 0)) v = 0;
    int i = 0;
    while (i < h->n && v > h->le[i]) i++;
    h->bucket[i]++;
    h->sum += v;
    h->count++;
}

void fr_metrics_init(fr_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    int nl = (int)FR_ARRAY_LEN(LAT_LE), nt = (int)FR_ARRAY_LEN(TPOT_LE);
    for (int t = 0; t < FR_N_TIERS; t++) {
        fr_hist_init(&m->duration[t], LAT_LE, nl);
        fr_hist_init(&m->queue[t], LAT_LE, nl);
        fr_hist_init(&m->ttft[t], LAT_LE, nl);
        fr_hist_init(&m->tpot[t], TPOT_LE, nt);
    }
    fr_metrics_init_vllm(m);
}

void fr_metrics_destroy(fr_metrics *m) { pthread_mutex_destroy(&m->mu); }

void fr_metrics_request(fr_metrics *m, int ep, int tier, int status, double duration_s) {
    if (ep < 0 || ep >= FR_EP_COUNT) ep = FR_EP_OTHER;
    if (tier < -1 || tier >= FR_N_TIERS) tier = -1;
    if (status < 0 || status > 999) status = 0;
    pthread_mutex_lock(&m->mu);
    fr_req_series *s = NULL;
    for (int i = 0; i < m->n_series; i++)
        if (m->series[i].ep == ep && m->series[i].tier == tier && m->series[i].status == status) {
            s = &m->series[i];
            break;
        }
    if (!s && m->n_series < FR_METRICS_MAX_SERIES) {
        s = &m->series[m->n_series++];
        s->ep = (uint8_t)ep;
        s->tier = (int8_t)tier;
        s->status = (int16_t)status;
        s->n = 0;
    }
    if (s) s->n++;
    if (tier >= 0 && duration_s >= 0) fr_hist_observe(&m->duration[tier], duration_s);
    pthread_mutex_unlock(&m->mu);
}

void fr_metrics_generation(fr_metrics *m, const fr_req_info *info, double ttft_slo_s,
                           double tpot_slo_s) {
    int t = info->tier;
    if (t < 0 || t >= FR_N_TIERS) return;
    pthread_mutex_lock(&m->mu);
    if (info->t_admit > 0) fr_hist_observe(&m->queue[t], info->t_admit - info->t_arrival);
    double ttft = -1, tpot = -1;
    if (info->t_first > 0) {
        ttft = info->t_first - info->t_arrival;
        fr_hist_observe(&m->ttft[t], ttft);
    }
    if (info->t_first > 0 && info->t_end > info->t_first && info->n_generated > 1) {
        tpot = (info->t_end - info->t_first) / (info->n_generated - 1);
        fr_hist_observe(&m->tpot[t], tpot);
    }
    fr_metrics_observe_vllm(m, info);
    if (info->end == FR_END_STOP || info->end == FR_END_LENGTH) {
        bool ok = ttft >= 0 && ttft <= ttft_slo_s && (tpot < 0 || tpot <= tpot_slo_s);
        if (ok) m->slo_met[t]++;
        else m->slo_missed[t]++;
    }
    pthread_mutex_unlock(&m->mu);
}


static void hist(fr_buf *o, const char *name, const char *help, const fr_hist *h) {
    fr_prom_head(o, name, "histogram", help);
    for (int t = 0; t < FR_N_TIERS; t++) {
        uint64_t cum = 0;
        for (int i = 0; i < h[t].n; i++) {
            cum += h[t].bucket[i];
            fr_buf_printf(o, "%s_bucket{tier=\"%s\",le=\"%g\"} %llu\n", name, fr_tier_name(t),
                          h[t].le[i], (unsigned long long)cum);
        }
        cum += h[t].bucket[h[t].n];
        fr_buf_printf(o, "%s_bucket{tier=\"%s\",le=\"+Inf\"} %llu\n", name, fr_tier_name(t),
                      (unsigned long long)cum);
        fr_buf_printf(o, "%s_sum{tier=\"%s\"} %.9g\n", name, fr_tier_name(t), h[t].sum);
        fr_buf_printf(o, "%s_count{tier=\"%s\"} %llu\n", name, fr_tier_name(t),
                      (unsigned long long)h[t].count);
    }
}

static void per_tier_u64(fr_buf *o, const char *name, const char *type, const char *help,
                         const uint64_t *v) {
    fr_prom_head(o, name, type, help);
    for (int t = 0; t < FR_N_TIERS; t++)
        fr_buf_printf(o, "%s{tier=\"%s\"} %llu\n", name, fr_tier_name(t), (unsigned long long)v[t]);
}

static void per_tier_int(fr_buf *o, const char *name, const char *help, const int *v) {
    fr_prom_head(o, name, "gauge", help);
    for (int t = 0; t < FR_N_TIERS; t++)
        fr_buf_printf(o, "%s{tier=\"%s\"} %d\n", name, fr_tier_name(t), v[t]);
}

/* The vision encoder cache (serve/vlm.h, stages/vision/cache.h). */
static void render_vision_cache(fr_buf *o, const fr_vlm_stats *c) {
    fr_prom_head(o, "frugal_vision_cache_hits_total", "counter",
                 "Images whose encoder output was found in the vision encoder cache (no ViT run).");
    fr_buf_printf(o, "frugal_vision_cache_hits_total %llu\n", (unsigned long long)c->hits);
    fr_prom_head(o, "frugal_vision_cache_misses_total", "counter",
                 "Images looked up in the vision encoder cache and not found.");
    fr_buf_printf(o, "frugal_vision_cache_misses_total %llu\n", (unsigned long long)c->misses);
    fr_prom_head(o, "frugal_vision_cache_evictions_total", "counter",
                 "Entries dropped from the vision encoder cache to make room (LRU).");
    fr_buf_printf(o, "frugal_vision_cache_evictions_total %llu\n",
                  (unsigned long long)c->evictions);
    fr_prom_head(o, "frugal_vision_cache_entries", "gauge", "Images held by the vision encoder cache.");
    fr_buf_printf(o, "frugal_vision_cache_entries %lld\n", (long long)c->entries);
    fr_prom_head(o, "frugal_vision_cache_bytes", "gauge", "Bytes held by the vision encoder cache.");
    fr_buf_printf(o, "frugal_vision_cache_bytes %zu\n", c->bytes);
    fr_prom_head(o, "frugal_vision_cache_capacity_bytes", "gauge",
                 "Byte budget of the vision encoder cache.");
    fr_buf_printf(o, "frugal_vision_cache_capacity_bytes %zu\n", c->budget);
}

void fr_metrics_render(fr_metrics *m, const fr_engine_stats *st, const fr_metrics_extra *x,
                       fr_buf *o) {
    pthread_mutex_lock(&m->mu);
    fr_prom_head(o, "frugal_requests_total", "counter",
         "HTTP requests answered, by endpoint, tier and status code (499: client went away).");
    for (int i = 0; i < m->n_series; i++) {
        const fr_req_series *s = &m->series[i];
        fr_buf_printf(o, "frugal_requests_total{endpoint=\"%s\",tier=\"%s\",status=\"%d\"} %llu\n",
                      fr_endpoint_label(s->ep), s->tier >= 0 ? fr_tier_name(s->tier) : "none",
                      s->status, (unsigned long long)s->n);
    }
    hist(o, "frugal_request_duration_seconds",
         "Generation request duration from arrival to the last byte, by tier.", m->duration);
    hist(o, "frugal_queue_time_seconds",
         "Time from arrival to first admission into the running batch, by tier.", m->queue);
    hist(o, "frugal_time_to_first_token_seconds", "Time from arrival to the first token, by tier.",
         m->ttft);
    hist(o, "frugal_time_per_output_token_seconds",
         "Mean time per output token after the first, per request, by tier.", m->tpot);
    per_tier_u64(o, "frugal_slo_met_total", "counter",
                 "Completed requests that met their tier's TTFT and TPOT targets.", m->slo_met);
    per_tier_u64(o, "frugal_slo_missed_total", "counter",
                 "Completed requests that missed their tier's TTFT or TPOT target.", m->slo_missed);
    if (x && x->model_name) fr_metrics_render_vllm(m, st, x, o);
    pthread_mutex_unlock(&m->mu);

    per_tier_int(o, "frugal_requests_running", "Sequences in the running batch.", st->running);
    per_tier_int(o, "frugal_requests_waiting", "Requests queued (new or preempted).", st->waiting);
    fr_prom_head(o, "frugal_kv_blocks_used", "gauge",
                 "KV cache blocks held by sequences (cached blocks none holds count as free).");
    fr_buf_printf(o, "frugal_kv_blocks_used %d\n", st->kv_blocks_used);
    fr_prom_head(o, "frugal_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.");
    fr_buf_printf(o, "frugal_kv_blocks_capacity %d\n", st->kv_blocks_total);
    fr_prom_head(o, "frugal_kv_block_size_tokens", "gauge", "Tokens per KV cache block.");
    fr_buf_printf(o, "frugal_kv_block_size_tokens %d\n", st->block_size);
    fr_prom_head(o, "frugal_kv_usage_ratio", "gauge", "Fraction of KV cache blocks in use.");
    fr_buf_printf(o, "frugal_kv_usage_ratio %.6f\n",
                  st->kv_blocks_total ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0);
    per_tier_u64(o, "frugal_prompt_tokens_total", "counter",
                 "Prompt tokens of requests admitted to the running batch.", st->prompt_tokens);
    per_tier_u64(o, "frugal_generation_tokens_total", "counter", "Tokens generated.",
                 st->gen_tokens);
    per_tier_u64(o, "frugal_requests_preempted_total", "counter",
                 "Preemptions (blocks freed, recomputed later); a request may count several.",
                 st->preempted);
    fr_prom_head(o, "frugal_requests_rejected_total", "counter",
         "Requests refused at admission, by tier and reason.");
    for (int t = 0; t < FR_N_TIERS; t++)
        for (int a = 1; a < FR_ADMIT_COUNT; a++)
            fr_buf_printf(o, "frugal_requests_rejected_total{tier=\"%s\",reason=\"%s\"} %llu\n",
                          fr_tier_name(t), fr_admit_name((fr_admit)a),
                          (unsigned long long)st->rejected[t][a]);
    fr_prom_head(o, "frugal_requests_cancelled_total", "counter",
         "Requests ended before finishing, by tier and reason.");
    static const struct { fr_end e; const char *label; } cancel_reasons[] = {
        {FR_END_CANCELLED, "client_disconnect"}, {FR_END_DEADLINE, "deadline"},
        {FR_END_SHUTDOWN, "shutdown"}, {FR_END_ERROR, "error"}};
    for (int t = 0; t < FR_N_TIERS; t++)
        for (size_t i = 0; i < FR_ARRAY_LEN(cancel_reasons); i++)
            fr_buf_printf(o, "frugal_requests_cancelled_total{tier=\"%s\",reason=\"%s\"} %llu\n",
                          fr_tier_name(t), cancel_reasons[i].label,
                          (unsigned long long)st->ended[t][cancel_reasons[i].e]);
    fr_prom_head(o, "frugal_requests_finished_total", "counter",
         "Requests that finished generating, by tier and finish reason.");
    for (int t = 0; t < FR_N_TIERS; t++) {
        fr_buf_printf(o, "frugal_requests_finished_total{tier=\"%s\",reason=\"stop\"} %llu\n",
                      fr_tier_name(t), (unsigned long long)st->ended[t][FR_END_STOP]);
        fr_buf_printf(o, "frugal_requests_finished_total{tier=\"%s\",reason=\"length\"} %llu\n",
                      fr_tier_name(t), (unsigned long long)st->ended[t][FR_END_LENGTH]);
    }
    fr_prom_head(o, "frugal_engine_steps_total", "counter", "Decoder steps run by the engine.");
    fr_buf_printf(o, "frugal_engine_steps_total %llu\n", (unsigned long long)st->steps);
    fr_prom_head(o, "frugal_engine_step_tokens_total", "counter",
         "Tokens processed by decoder steps (prefill, recompute and decode).");
    fr_buf_printf(o, "frugal_engine_step_tokens_total %llu\n", (unsigned long long)st->step_tokens);
    fr_prom_head(o, "frugal_engine_busy_seconds_total", "counter", "Time spent in decoder steps.");
    fr_buf_printf(o, "frugal_engine_busy_seconds_total %.6f\n", st->step_seconds);
    fr_prom_head(o, "frugal_recomputed_tokens_total", "counter",
         "Cached tokens thrown away by preemption (to be recomputed).");
    fr_buf_printf(o, "frugal_recomputed_tokens_total %llu\n",
                  (unsigned long long)st->recomputed_tokens);
    fr_prom_head(o, "frugal_prefix_cache_enabled", "gauge",
                 "1 when prompts share the KV blocks of prefixes computed before.");
    fr_buf_printf(o, "frugal_prefix_cache_enabled %d\n", st->prefix_cache ? 1 : 0);
    fr_prom_head(o, "frugal_prefix_cache_query_tokens_total", "counter",
                 "Prompt tokens looked up in the prefix cache (first admission of a request).");
    fr_buf_printf(o, "frugal_prefix_cache_query_tokens_total %llu\n",
                  (unsigned long long)st->prefix_queries);
    fr_prom_head(o, "frugal_prefix_cache_hit_tokens_total", "counter",
                 "Prompt tokens found in the prefix cache (their K/V not computed).");
    fr_buf_printf(o, "frugal_prefix_cache_hit_tokens_total %llu\n",
                  (unsigned long long)st->prefix_hits);
    fr_prom_head(o, "frugal_prefix_cache_evictions_total", "counter",
                 "Cached KV blocks taken back for new content (least recently released first).");
    fr_buf_printf(o, "frugal_prefix_cache_evictions_total %llu\n",
                  (unsigned long long)st->prefix_evictions);
    fr_prom_head(o, "frugal_kv_blocks_cached", "gauge",
                 "KV cache blocks published in the prefix cache, held or not.");
    fr_buf_printf(o, "frugal_kv_blocks_cached %d\n", st->kv_blocks_cached);
    fr_prom_head(o, "frugal_http_connections", "gauge", "Open HTTP connections.");
    fr_buf_printf(o, "frugal_http_connections %d\n", x ? x->connections : 0);
    fr_prom_head(o, "frugal_ready", "gauge", "1 when the model is loaded and the engine accepts work.");
    fr_buf_printf(o, "frugal_ready %d\n", x && x->ready ? 1 : 0);
    if (x && x->vision) render_vision_cache(o, &x->vision_cache);
}
