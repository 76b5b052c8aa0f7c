/* http.c — the HTTP layer of `frugal serve` on libmicrohttpd: routing, auth, limits, the OpenAI
 * endpoints (non-streaming and SSE streaming), client-disconnect detection and graceful shutdown.
 *
 * Connections: the server owns the listening socket; the connection guard (serve/guard.h) accepts,
 * checks each first request head (deadline, size, framing), takes a slot of the request's class
 * (control endpoints, P0, P1, P2) and hands the socket to MHD (MHD_add_connection; MHD has no
 * listening socket of its own). The slot is released when MHD reports the connection closed.
 *
 * Threading: MHD runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so handlers may
 * block. A generation request is parsed, rendered and tokenized on its connection thread, then
 * submitted to the engine, which decides admission at once (429 + Retry-After on refusal). A
 * non-streaming handler then waits on the request's channel (fr_req_wait, 50 ms slices); a
 * streaming response is an MHD callback response whose reader blocks the same way and turns
 * released text into SSE chunks. Between slices both peek at the socket: a client that hung up
 * is detected within ~50 ms even while its request is still queued, and its request is cancelled
 * (the engine frees the blocks at its next step).
 *
 * Every accepted request ends with a response: the engine ends each request exactly once, and
 * shutdown cancels what is left after the grace period, which the handlers turn into a 503 or an
 * SSE error event.
 *
 * Bounded stages: OCR and ASR (POST /v1/assist, and image / audio parts of chat requests) get a
 * cancel check (stage_cancel) that fires when the client hangs up (the socket is peeked at most
 * every 20 ms) or when the shutdown's grace period is over (cancel_all); the stage stops within
 * milliseconds and the request ends with 503 shutting_down, or closes the connection when nobody
 * is left to answer. fr_server_shutdown waits for generation and assist requests through the
 * grace period, then cancels both, so the server stops within grace + 5 s.
 *
 * Metering (docs/METERING.md, "Serving"): a generation request gets a meter account as soon as it
 * is accepted (before validation; its W3C traceparent is continued and returned in the
 * response's `traceparent` header). Until fr_engine_submit returns a request the handler owns the
 * account and closes it on its way out (conn.mr: rejected for 4xx / 503, failed for other 5xx);
 * from then on the engine owns it and closes it when the request ends, which puts the
 * provisional joules and dollars into fr_req_info for the response's `frugal` object.
 *
 * Durability (docs/METERING.md, "Ledger"): closing an account queues the request's ledger row
 * and yields its sequence number; no answer's last bytes go to MHD before that row is committed
 * (the non-streaming body, the SSE stream's final chunk, /v1/assist's reply): the handler waits
 * with fr_meter_ledger_wait (group commit: a few ms) and, when the row is not durable within
 * ledger.commit_wait_ms, answers 503 ledger_unavailable instead and amends the row. While the
 * ledger cannot write, generation work is refused with 503 + Retry-After and /ready says why.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frugal_internal.h"
#include "meter/meter.h"
#include "model/chat.h"
#include "model/tokenizer.h"
#include "serve/lora_reg.h"
#include "serve/api.h"
#include "serve/assist.h"
#include "serve/audio_api.h"
#include "serve/error.h"
#include "serve/media_parts.h"
#include "serve/guard.h"
#include "serve/metrics.h"
#include "serve/serve.h"
#include "serve/toolcall.h"
#include "serve/vlm.h"
#include "model/whisper.h"
#include "stages/asr/whisper_asr.h"

#define WAIT_SLICE_S 0.05
#define KEEPALIVE_S 10.0

struct fr_server {
    const fr_serve_config *cfg; /* settings (caller's) */
    const frugal_model *api;    /* the model as the public API loaded it (caller's) */
    const fr_model *model;      /* the loaded model behind it, for the engine and templates */
    fr_engine *engine;          /* owned */
    fr_meter *meter;            /* owned, or NULL (metering off) */
    fr_assist *assist;          /* POST /v1/assist handler (owned; shared with `frugal assist`) */
    fr_vlm *vlm;                /* images for a vision-language model (owned), or NULL */
    fr_whisper_model *whisper;  /* the audio endpoints' Whisper (owned; --asr-model), or NULL:
                                   pocketsphinx */
    fr_lora_reg *loras;         /* LoRA adapters served by name (owned; serve/lora_reg.h) */
    struct fr_cuda_whisper *whisper_cuda; /* that model on a CUDA device (owned; --asr-device,
                                   else the decoder's device), or NULL: on the CPU */
    const char *tmpl;           /* chat template source, or NULL (chat refused) */
    char *tmpl_owned;           /* template read from a file */
    const char *model_name;     /* id in the API */
    long long created;          /* unix time of start (models list) */
    struct MHD_Daemon *d;       /* HTTP layer (no listening socket of its own) */
    fr_guard *guard;            /* accepts, checks heads, hands connections to d (owned) */
    int lfd;                    /* listening socket until the guard owns it, else -1 */
    int port;                   /* bound port */
    int max_prompt_tokens;      /* effective prompt limit */
    fr_metrics metrics;
    atomic_int connections;     /* open connections */
    atomic_int busy;            /* generation requests not yet fully answered */
    atomic_bool draining;       /* shutdown started: refuse new work */
    atomic_int stage_busy;      /* /v1/assist requests in their handler, chat requests in their
                                   image / audio parts (OCR / ASR before the engine) */
    atomic_bool cancel_all;     /* grace period over: OCR / ASR stages stop (stage_cancel) */
    bool stopped;               /* MHD stopped */
};

/* Per-request state (MHD's con_cls). */
typedef struct conn {
    fr_server *s;
    struct MHD_Connection *mc;
    double t_start;       /* arrival */
    int ep;               /* fr_endpoint */
    int tier;             /* -1 until known */
    int status;           /* status of the queued response (0 = none) */
    int retry_after;      /* seconds for a 429's Retry-After */
    fr_buf body;          /* upload */
    bool too_large;       /* body went over the limit (rest discarded) */
    bool responded;       /* a response is queued */
    bool stream_owned;    /* a stream took over the accounting */
    bool generation;      /* counted in busy */
    bool close;           /* ask the client to close the connection after the response */
    fr_meter_req *mr;     /* meter account while the handler owns it (see the top) */
    char traceparent[56]; /* response traceparent ("" = none) */
} conn;

/* A streaming response (MHD content reader's cls). */
typedef struct stream {
    fr_server *s;
    struct MHD_Connection *mc;
    fr_req *r;
    fr_api_kind kind;
    fr_api_result res;    /* id, model, created, prompt/completion tokens */
    char id[64];
    bool include_usage;
    int phase;            /* 0 role chunk due, 1 streaming, 2 finished, 3 failed */
    fr_buf out;           /* bytes not yet handed to MHD */
    size_t off;           /* handed so far */
    fr_buf text;          /* scratch */
    fr_req_info info;     /* last seen */
    double last_write;    /* for keep-alive comments */
    int ep, tier;
    double t_start;
    int status;           /* for requests_total: 200, or 499 when the client left */
    double deadline_ms;   /* X-Deadline-Ms (for the message) */
    bool return_ids;      /* extension: each chunk carries the ids new since the last */
    int32_t *ids;         /* (max_tokens) ids so far */
    int max_ids;          /* capacity of ids */
    int ids_sent;         /* ids already sent */
    char mid[64];         /* meter account id ("" = not metered) */
    int tool_family;      /* fr_tool_family of a request with tools (0: none): the text is held
                             until the end and sent as tool-call deltas or one content delta */
    cJSON *tools;         /* the request's tools (owned) when tool_family is set */
    fr_buf held;          /* the reply's text so far (tools) */
    size_t released;      /* of it, sent as content already (fr_tool_stream_safe) */
} stream;

/* ---- small helpers ---- */

static int classify(const char *url) {
    if (!strcmp(url, "/v1/chat/completions")) return FR_EP_CHAT;
    if (!strcmp(url, "/v1/completions")) return FR_EP_COMPLETIONS;
    if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) return FR_EP_MODELS;
    if (!strcmp(url, "/health")) return FR_EP_HEALTH;
    if (!strcmp(url, "/ready")) return FR_EP_READY;
    if (!strcmp(url, "/metrics")) return FR_EP_METRICS;
    if (!strcmp(url, "/v1/assist")) return FR_EP_ASSIST;
    if (!strcmp(url, "/v1/audio/transcriptions")) return FR_EP_TRANSCRIPTIONS;
    if (!strcmp(url, "/v1/audio/translations")) return FR_EP_TRANSLATIONS;
    return FR_EP_OTHER;
}

/* The POST endpoints whose handler runs stages on the connection thread (the requests counted
 * in stage_busy and the duration histogram besides generation). */
static bool stage_endpoint(int ep) {
    return ep == FR_EP_ASSIST || ep == FR_EP_TRANSCRIPTIONS || ep == FR_EP_TRANSLATIONS;
}

/* True when the peer has closed its side (or the socket failed). */
static bool client_gone(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    int fd = ci->connect_fd;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char b;
        ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return true;
    }
    return false;
}

/* The cancel check handed to a request's OCR / ASR stages (base.h fr_cancel), on the stack of
 * the connection's thread, which is the only one that calls it. */
typedef struct stage_watch {
    fr_server *s;
    struct MHD_Connection *mc;
    double deadline;       /* fr_time_s() of the request's X-Deadline-Ms, 0 = none */
    double next_peek;      /* fr_time_s() of the next socket peek */
    fr_cancel_reason why;  /* first reason seen (sticky) */
} stage_watch;

static fr_cancel_reason stage_cancel(void *ctx) {
    stage_watch *w = ctx;
    if (w->why) return w->why;
    if (atomic_load(&w->s->cancel_all)) return w->why = FR_CANCEL_SHUTDOWN;
    double now = fr_time_s();
    if (w->deadline > 0 && now >= w->deadline) return w->why = FR_CANCEL_DEADLINE;
    if (now >= w->next_peek) {
        w->next_peek = now + 0.02;
        if (client_gone(w->mc)) w->why = FR_CANCEL_CLIENT_GONE;
    }
    return w->why;
}

/* Queues the response (body malloc'd, taken); hdrs: more header name / value pairs, NULL-ended
 * (NULL: none). */
static enum MHD_Result queue_with(conn *c, int status, const char *ctype, char *body, size_t len,
                                  const char *const *hdrs) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    for (int i = 0; hdrs && hdrs[i] && hdrs[i + 1]; i += 2) MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
    if (status == 429 || status == 503) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", c->retry_after > 0 ? c->retry_after : 1);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (c->traceparent[0]) MHD_add_response_header(r, "traceparent", c->traceparent);
    if (status == 405) {
        const char *allow =
            c->ep == FR_EP_CHAT || c->ep == FR_EP_COMPLETIONS || stage_endpoint(c->ep) ? "POST" : "GET";
        MHD_add_response_header(r, "Allow", allow);
    }
    if (status == 413 || c->close) MHD_add_response_header(r, "Connection", "close");
    c->status = status;
    c->responded = true;
    enum MHD_Result ret = MHD_queue_response(c->mc, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result queue(conn *c, int status, const char *ctype, char *body, size_t len) {
    return queue_with(c, status, ctype, body, len, NULL);
}

static enum MHD_Result send_json(conn *c, int status, char *json) {
    return queue(c, status, "application/json", json, strlen(json));
}

static enum MHD_Result send_error(conn *c, const fr_api_error *e) {
    return send_json(c, e->status, fr_api_error_json(e));
}

static enum MHD_Result fail(conn *c, int status, const char *type, const char *code,
                            const char *param, const char *msg) {
    fr_api_error e;
    fr_api_error_set(&e, status, type, code, param, "%s", msg);
    return send_error(c, &e);
}

static const char *header(conn *c, const char *name) {
    return MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, name);
}

/* ---- metering ---- */

/* Opens the request's account (once): continues an incoming traceparent, records the key's id
 * (never the key), the route and the tier known so far. The modality of a completion is text;
 * a chat request's is set once its body is parsed (meter_set_inputs), "" until then. */
static void meter_begin(conn *c, const fr_api_key *key, int tier) {
    fr_server *s = c->s;
    if (!s->meter || c->mr) return;
    fr_meter_req_info in = {
        .traceparent = header(c, "traceparent"),
        .api_key_id = key ? key->id : NULL,
        .route = c->ep == FR_EP_CHAT ? "chat" : "completions",
        .tier = fr_tier_name(tier >= 0 && tier < FR_N_TIERS ? tier : s->cfg->default_tier),
        .modality = c->ep == FR_EP_COMPLETIONS ? "text" : NULL,
    };
    c->mr = fr_meter_request_begin(s->meter, &in);
    fr_meter_request_traceparent(c->mr, c->traceparent);
}

/* The facts the body gave: the set of inputs (FR_MODALITY_* bits) and the tier. */
static void meter_set_inputs(conn *c, unsigned inputs) {
    if (c->mr) fr_meter_request_set_modality(c->s->meter, c->mr, fr_meter_modality_name(inputs));
}

static void meter_set_tier(conn *c, int tier) {
    if (c->mr) fr_meter_request_set_tier(c->s->meter, c->mr, fr_tier_name(tier));
}

/* Replaces the provisional figures in *info by the settled ones of account `mid` (meter.h,
 * fr_meter_request_final: at once for work on the CPU, after at most one sample period plus one
 * counter period for work on a GPU); keeps the provisional ones when they do not come in time. */
static bool meter_settle(fr_server *s, const char *mid, fr_req_info *info) {
    fr_meter_req_summary sum;
    if (!s->meter || !info->metered || !mid[0] || !fr_meter_request_final(s->meter, mid, &sum))
        return false;
    info->joules = sum.joules;
    info->usd = sum.usd;
    info->energy_estimated = sum.estimated;
    return true;
}

/* Closes an account the handler still owns, by the status of the response it queued (c->status).
 * Returns the ledger row's sequence number (0: no account, no ledger, or the row was refused). */
static uint64_t meter_end_http(conn *c) {
    if (!c->mr) return 0;
    int st = c->status ? c->status : 499;
    fr_meter_req_result res = {.http_status = st, .ttft_s = -1, .slo_met = -1};
    if (st == 499) res.status = FR_REQ_CANCELLED;
    else if (st < 400) res.status = FR_REQ_OK;
    else if (st < 500 || st == 503) res.status = FR_REQ_REJECTED; /* refused, incl. draining */
    else res.status = FR_REQ_FAILED;
    fr_meter_req_summary sum;
    fr_meter_request_end(c->s->meter, c->mr, &res, &sum);
    c->mr = NULL;
    return sum.ledger_seq;
}

/* ---- durability of the ledger row (see the top) ---- */

#define LEDGER_RETRY_AFTER_S 2

/* True once the ledger row of a request the engine ended is durable (or there is nothing to wait
 * for: no meter, no account). Blocks for at most ledger.commit_wait_ms. */
static bool row_durable(fr_server *s, const fr_req_info *info) {
    return !s->meter || !info->metered || fr_meter_ledger_wait(s->meter, info->ledger_seq) == 0;
}

/* The 503 that replaces an answer whose row did not become durable; the row is amended to it. */
static void answer_withheld(fr_server *s, uint64_t seq, fr_api_error *e) {
    char why[300];
    if (fr_meter_ledger_ok(s->meter, why, sizeof why))
        snprintf(why, sizeof why, "the ledger did not commit it within ledger.commit_wait_ms");
    fr_api_error_set(e, 503, "server_error", "ledger_unavailable", NULL,
                     "The request ran but its ledger row could not be made durable (%s), so its "
                     "answer is withheld; retry later.", why);
    fr_meter_ledger_amend(s->meter, seq, 503, e->message);
}

/* Adds {"frugal": {"joules", "usd", "estimated", "final"}} to a JSON object (the response
 * extension); final: the figures are the ledger row's (meter_settle). */
static char *with_frugal(char *json, const fr_req_info *info, bool final) {
    if (!info->metered) return json;
    cJSON *j = cJSON_Parse(json);
    if (!j) return json;
    cJSON *f = cJSON_AddObjectToObject(j, "frugal");
    cJSON_AddNumberToObject(f, "joules", info->joules);
    cJSON_AddNumberToObject(f, "usd", info->usd);
    cJSON_AddBoolToObject(f, "estimated", info->energy_estimated);
    cJSON_AddBoolToObject(f, "final", final);
    char *o = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!o) return json;
    free(json);
    return o;
}

/* The same for the SSE event "data: {...}\n\n" that starts at out->data + at. */
static void sse_with_frugal(fr_buf *out, size_t at, const fr_req_info *info, bool final) {
    if (!info->metered || out->len < at + 8) return;
    char *json = fr_xstrndup(out->data + at + 6, out->len - at - 8);
    json = with_frugal(json, info, final);
    out->len = at;
    fr_buf_puts(out, "data: ");
    fr_buf_puts(out, json);
    fr_buf_puts(out, "\n\n");
    free(json);
}

/* The ledger route of a metered endpoint's path ("chat", "completions", "assist",
 * "transcriptions", "translations"), or NULL for any other path. */
static const char *generation_route(const char *path, size_t len) {
    static const struct { const char *path, *route; } gen[] = {
        {"/v1/chat/completions", "chat"}, {"/v1/completions", "completions"},
        {"/v1/assist", "assist"}, {"/v1/audio/transcriptions", "transcriptions"},
        {"/v1/audio/translations", "translations"}};
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++)
        if (strlen(gen[i].path) == len && !memcmp(path, gen[i].path, len)) return gen[i].route;
    return NULL;
}

/* A ledger row, status rejected, for a generation request refused before a handler opened its
 * account (docs/METERING.md, "Rejections"): the guard's 4xx/503 answers, 401, 413 from the
 * body. tp_out (may be NULL) gets the response's traceparent. */
static void meter_refusal(fr_server *s, const char *route, const fr_api_key *key, int tier,
                          const char *traceparent, int status, char tp_out[56]) {
    if (!s->meter || !route) return;
    bool audio = !strcmp(route, "transcriptions") || !strcmp(route, "translations");
    fr_meter_req_info in = {.traceparent = traceparent,
                            .api_key_id = key ? key->id : NULL,
                            .route = route,
                            .tier = fr_tier_name(tier),
                            .modality = audio ? "audio" : "text"};
    fr_meter_req *mr = fr_meter_request_begin(s->meter, &in);
    if (tp_out) fr_meter_request_traceparent(mr, tp_out);
    fr_meter_req_result res = {.http_status = status, .ttft_s = -1, .slo_met = -1,
                               .status = FR_REQ_REJECTED};
    fr_meter_request_end(s->meter, mr, &res, NULL);
}

/* ---- auth ---- */

typedef enum { AUTH_OK, AUTH_MISSING, AUTH_SCHEME, AUTH_WRONG } auth_result;

/* Finds the key in an Authorization value h[0..len) (NULL = absent). AUTH_OK with *key NULL
 * when no keys are configured. */
static auth_result find_key(const fr_serve_config *cfg, const char *h, size_t len,
                            const fr_api_key **key) {
    *key = NULL;
    if (cfg->n_keys == 0) return AUTH_OK;
    if (!h) return AUTH_MISSING;
    while (len && *h == ' ') h++, len--;
    if (len < 7 || strncasecmp(h, "Bearer ", 7)) return AUTH_SCHEME;
    h += 7, len -= 7;
    while (len && *h == ' ') h++, len--;
    while (len && h[len - 1] == ' ') len--;
    *key = fr_serve_find_key(cfg, h, len);
    return *key ? AUTH_OK : AUTH_WRONG;
}

/* The tier of a request before its body is read: X-Priority (exact P0/P1/P2; anything else is
 * the handler's 400 later) > the key's default > the server's; never better than the key's
 * highest tier. */
static int head_tier(const fr_serve_config *cfg, const fr_api_key *key, const char *xp) {
    int t = key ? key->default_tier : cfg->default_tier;
    int x = xp ? fr_tier_parse(xp) : -1;
    if (x >= 0) t = x;
    if (key && t < key->highest_tier) t = key->highest_tier;
    return t;
}

/* True when no keys are configured or the presented key is one of them (*key set); false after
 * queueing the 401 (its result in *ret; a generation request's gets a ledger row). */
static bool check_auth(conn *c, const char *url, const fr_api_key **key, enum MHD_Result *ret) {
    const fr_serve_config *cfg = c->s->cfg;
    const char *h = header(c, "Authorization");
    auth_result a = find_key(cfg, h, h ? strlen(h) : 0, key);
    if (a == AUTH_OK) return true;
    char tp[56] = "";
    meter_refusal(c->s, generation_route(url, strlen(url)), NULL,
                  head_tier(cfg, NULL, header(c, "X-Priority")), header(c, "traceparent"), 401,
                  tp);
    if (tp[0]) memcpy(c->traceparent, tp, sizeof tp);
    if (a == AUTH_MISSING)
        *ret = fail(c, 401, "invalid_request_error", "missing_api_key", NULL,
                    "Missing API key: send \"Authorization: Bearer KEY\".");
    else if (a == AUTH_SCHEME)
        *ret = fail(c, 401, "invalid_request_error", "invalid_api_key", NULL,
                    "Authorization must use the Bearer scheme.");
    else
        *ret = fail(c, 401, "invalid_request_error", "invalid_api_key", NULL,
                    "Incorrect API key provided.");
    return false;
}

/* ---- simple endpoints ---- */

static bool engine_ready(fr_server *s) {
    if (atomic_load(&s->draining)) return false;
    if (!fr_meter_ledger_ok(s->meter, NULL, 0)) return false; /* it cannot record work */
    fr_engine_stats st;
    fr_engine_stats_get(s->engine, &st);
    return st.alive;
}

/* The connection guard's families (serve/guard.h). */
static void guard_prometheus(fr_guard *g, fr_buf *o) {
    static const char *const cls[FR_GUARD_N_CLASSES] = {"control", "P0", "P1", "P2"};
    fr_guard_stats gs;
    fr_guard_stats_get(g, &gs);
    char line[400];
    fr_buf_puts(o, "# HELP frugal_connections_pending Connections whose request head has not "
                   "arrived yet.\n# TYPE frugal_connections_pending gauge\n");
    snprintf(line, sizeof line, "frugal_connections_pending %d\n", gs.pending);
    fr_buf_puts(o, line);
    fr_buf_puts(o, "# HELP frugal_connection_slots_used Connection slots held, by class.\n"
                   "# TYPE frugal_connection_slots_used gauge\n");
    for (int k = 0; k < FR_GUARD_N_CLASSES; k++) {
        snprintf(line, sizeof line, "frugal_connection_slots_used{class=\"%s\"} %d\n", cls[k],
                 gs.open[k]);
        fr_buf_puts(o, line);
    }
    fr_buf_puts(o, "# HELP frugal_connections_refused_total Connections the guard answered "
                   "itself, by reason (and class for no_slot).\n"
                   "# TYPE frugal_connections_refused_total counter\n");
    for (int k = 0; k < FR_GUARD_N_CLASSES; k++) {
        snprintf(line, sizeof line,
                 "frugal_connections_refused_total{reason=\"no_slot\",class=\"%s\"} %lld\n",
                 cls[k], gs.refused[k]);
        fr_buf_puts(o, line);
    }
    snprintf(line, sizeof line,
             "frugal_connections_refused_total{reason=\"pending_full\",class=\"\"} %lld\n"
             "frugal_connections_refused_total{reason=\"bad_head\",class=\"\"} %lld\n"
             "frugal_connections_refused_total{reason=\"head_timeout\",class=\"\"} %lld\n",
             gs.refused[FR_GUARD_N_CLASSES], gs.head_errors, gs.head_timeouts);
    fr_buf_puts(o, line);
}

/* /ready's 503 body: {"status": "draining" | "not ready", "reason": ...}. */
static char *not_ready_json(fr_server *s) {
    if (atomic_load(&s->draining)) return fr_xstrdup("{\"status\":\"draining\"}");
    char why[300];
    if (fr_meter_ledger_ok(s->meter, why, sizeof why)) snprintf(why, sizeof why, "engine stopped");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", "not ready");
    cJSON_AddStringToObject(j, "reason", why);
    char *o = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return o ? o : fr_xstrdup("{\"status\":\"not ready\"}");
}

static enum MHD_Result do_metrics(conn *c) {
    fr_server *s = c->s;
    fr_engine_stats st;
    fr_engine_stats_get(s->engine, &st);
    fr_metrics_extra x = {.connections = atomic_load(&s->connections), .ready = engine_ready(s),
                          .vision = s->vlm != NULL, .model_name = s->model_name,
                          .max_lora = FR_LORA_REG_MAX};
    if (s->vlm) fr_vlm_stats_get(s->vlm, &x.vision_cache);
    fr_buf lr = {0}, lw = {0};
    fr_engine_lora_in_use(s->engine, &lr, &lw);
    x.lora_running = lr.data, x.lora_waiting = lw.data;
    fr_buf o = {0};
    fr_metrics_render(&s->metrics, &st, &x, &o);
    fr_buf_free(&lr);
    fr_buf_free(&lw);
    guard_prometheus(s->guard, &o);
    if (s->meter) fr_meter_prometheus(s->meter, &o);
    size_t len = o.len;
    return queue(c, 200, "text/plain; version=0.0.4; charset=utf-8", fr_buf_cstr(&o), len);
}

/* The loaded adapters' names (malloc'd array of n; *n set). */
static char (*adapter_names(fr_server *s, int *n))[FR_LORA_MAX_NAME] {
    char(*names)[FR_LORA_MAX_NAME] = fr_xcalloc(FR_LORA_REG_MAX, sizeof *names);
    *n = FR_MIN(FR_LORA_REG_MAX, fr_lora_reg_names(s->loras, names, FR_LORA_REG_MAX));
    return names;
}

static enum MHD_Result do_models(conn *c, const char *url) {
    fr_server *s = c->s;
    int n;
    char(*names)[FR_LORA_MAX_NAME] = adapter_names(s, &n);
    const char *id = strncmp(url, "/v1/models/", 11) ? NULL : url + strlen("/v1/models/");
    int k = -1;
    for (int i = 0; id && i < n && k < 0; i++)
        if (!strcmp(id, names[i])) k = i;
    char *json = !id ? fr_api_models_response(s->model_name, s->created,
                                              (const char(*)[FR_API_MAX_ADAPTER_NAME])names, n)
                 : !strcmp(id, s->model_name) ? fr_api_model_object(s->model_name, NULL, s->created)
                 : k >= 0 ? fr_api_model_object(names[k], s->model_name, s->created)
                          : NULL;
    free(names);
    if (json) return send_json(c, 200, json);
    fr_api_error e;
    fr_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                     "The model '%.200s' does not exist (this server serves '%.200s').", id,
                     s->model_name);
    return send_error(c, &e);
}

/* POST /v1/load_lora_adapter {"lora_name", "lora_path"} and /v1/unload_lora_adapter
 * {"lora_name"} (vLLM's names and answers), when the server runs with lora_runtime_updates. */
static enum MHD_Result do_lora_admin(conn *c, bool load) {
    fr_server *s = c->s;
    if (!s->cfg->lora_runtime_updates)
        return fail(c, 403, "invalid_request_error", "lora_updates_disabled", NULL,
                    "Loading and unloading LoRA adapters at run time is off (start the server "
                    "with --lora-runtime-updates or config \"lora_runtime_updates\": true).");
    cJSON *b = c->body.len <= 65536 ? cJSON_ParseWithLength(c->body.data ? c->body.data : "",
                                                            c->body.len)
                                    : NULL;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(b, "lora_name");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(b, "lora_path");
    enum MHD_Result ret;
    if (!cJSON_IsObject(b) || !cJSON_IsString(nm) || (load && !cJSON_IsString(pa))) {
        ret = fail(c, 400, "invalid_request_error", "invalid_lora_request",
                   !cJSON_IsString(nm) ? "lora_name" : "lora_path",
                   load ? "The body must be a JSON object with string fields lora_name and lora_path."
                        : "The body must be a JSON object with a string field lora_name.");
    } else if (!strcmp(nm->valuestring, s->model_name)) {
        ret = fail(c, 400, "invalid_request_error", "invalid_lora_request", "lora_name",
                   "An adapter may not take the base model's name.");
    } else {
        fr_err err = {0};
        int rc = load ? fr_lora_reg_load(s->loras, nm->valuestring, pa->valuestring, &err)
                      : fr_lora_reg_unload(s->loras, nm->valuestring, &err);
        if (rc) {
            fr_api_error e;
            fr_api_error_from_err(&e, &err, NULL, "lora_name");
            ret = send_error(c, &e);
        } else {
            char msg[300];
            snprintf(msg, sizeof msg, "Success: LoRA adapter '%s' %s successfully.",
                     nm->valuestring, load ? "added" : "removed");
            fr_info("LoRA adapter %s %s", nm->valuestring, load ? "loaded" : "unloaded");
            ret = queue(c, 200, "text/plain; charset=utf-8", fr_xstrdup(msg), strlen(msg));
        }
    }
    cJSON_Delete(b);
    return ret;
}

/* ---- generation ---- */

static uint64_t random_seed(void) {
    static atomic_ullong n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
                 (atomic_fetch_add(&n, 1) * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

static const char *finish_name(fr_end e) { return e == FR_END_LENGTH ? "length" : "stop"; }

/* The error a request that ended without finishing maps to. */
static void end_error(fr_end end, const fr_req_info *info, double deadline_ms, fr_api_error *e) {
    switch (end) {
    case FR_END_DEADLINE:
        fr_api_error_set(e, 504, "timeout_error", "deadline_exceeded", NULL,
                         "The request's deadline (X-Deadline-Ms: %.0f) passed before it finished; "
                         "it was cancelled after %d generated tokens.",
                         deadline_ms, info->n_generated);
        break;
    case FR_END_SHUTDOWN:
        fr_api_error_set(e, 503, "server_error", "shutting_down", NULL,
                         "The server is shutting down; the request was cancelled.");
        break;
    default:
        fr_api_error_set(e, 500, "server_error", "internal_error", NULL, "Generation failed: %s",
                         info->error[0] ? info->error : "internal error");
        break;
    }
}

/* A stream with tools, at its end: the text not yet sent as tool-call deltas, or as one
 * content delta. Returns whether it held calls. */
static bool stream_flush_tools(stream *st) {
    char *content = NULL;
    const char *rest = st->held.data ? st->held.data + st->released : "";
    size_t n = st->held.len - st->released;
    cJSON *calls = fr_tool_parse((fr_tool_family)st->tool_family, rest, n, st->tools,
                                 random_seed(), &content);
    if (calls) fr_api_stream_tool_calls(&st->out, &st->res, content, calls, st->include_usage);
    else if (n)
        fr_api_stream_chunk(&st->out, st->kind, &st->res, false, rest, n, NULL,
                            st->include_usage);
    free(content);
    cJSON_Delete(calls);
    return calls != NULL;
}

static void stream_append_end(stream *st) {
    fr_api_kind k = st->kind;
    st->res.completion_tokens = st->info.n_generated;
    st->res.cached_tokens = st->info.n_cached;
    if (st->info.end == FR_END_STOP || st->info.end == FR_END_LENGTH) {
        bool calls = st->tool_family && stream_flush_tools(st);
        fr_api_stream_chunk(&st->out, k, &st->res, false, NULL, 0,
                            calls ? "tool_calls" : finish_name(st->info.end), st->include_usage);
        if (st->include_usage) {
            size_t at = st->out.len;
            fr_api_stream_usage(&st->out, k, &st->res);
            bool final = meter_settle(st->s, st->mid, &st->info);
            sse_with_frugal(&st->out, at, &st->info, final);
        }
        fr_api_stream_done(&st->out);
    } else {
        fr_api_error e;
        end_error(st->info.end, &st->info, st->deadline_ms, &e);
        fr_api_stream_error(&st->out, &e);
    }
    st->phase = 2;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    for (;;) {
        if (st->off < st->out.len) {
            size_t n = st->out.len - st->off;
            if (n > max) n = max;
            memcpy(buf, st->out.data + st->off, n);
            st->off += n;
            if (st->off == st->out.len) st->off = st->out.len = 0;
            st->last_write = fr_time_s();
            return (ssize_t)n;
        }
        if (st->phase == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->phase == 3) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->phase == 0) {
            if (st->kind == FR_API_CHAT)
                fr_api_stream_chunk(&st->out, st->kind, &st->res, true, NULL, 0, NULL,
                                    st->include_usage);
            st->phase = 1;
            continue;
        }
        st->text.len = 0;
        bool done = fr_req_wait(st->r, &st->text, WAIT_SLICE_S, &st->info);
        int new_ids = 0;
        if (st->return_ids) {
            int n = fr_req_output_ids(st->r, st->ids, st->max_ids);
            new_ids = n - st->ids_sent;
            st->res.token_ids = st->ids + st->ids_sent;
            st->res.n_token_ids = new_ids;
            st->ids_sent = n;
        }
        /* a chunk per wake with new text (or, with return_token_ids, new ids: random-weight
         * models often sample tokens without text, and timing clients count ids) */
        if (st->tool_family && st->text.len) { /* content goes out until a call may start */
            fr_buf_append(&st->held, st->text.data, st->text.len);
            size_t safe = fr_tool_stream_safe((fr_tool_family)st->tool_family, st->held.data,
                                              st->held.len, st->released);
            st->text.len = 0;
            if (safe > st->released) fr_buf_append(&st->text, st->held.data + st->released,
                                                   safe - st->released);
            st->released = safe;
        }
        if (st->text.len || new_ids > 0)
            fr_api_stream_chunk(&st->out, st->kind, &st->res, false,
                                st->text.data ? st->text.data : "", st->text.len, NULL,
                                st->include_usage);
        if (st->return_ids) st->res.n_token_ids = 0; /* the final chunk adds none */
        if (done) {
            if (st->info.end == FR_END_CANCELLED) {
                st->phase = 3;
                st->status = 499;
                continue;
            }
            /* the final chunk only once the row is durable */
            bool ok_end = st->info.end == FR_END_STOP || st->info.end == FR_END_LENGTH;
            if (!row_durable(st->s, &st->info) && ok_end) {
                fr_api_error e;
                answer_withheld(st->s, st->info.ledger_seq, &e);
                fr_api_stream_error(&st->out, &e);
                st->status = 503;
                st->phase = 2;
                continue;
            }
            stream_append_end(st);
            continue;
        }
        if (st->text.len) continue;
        if (client_gone(st->mc)) {
            fr_req_cancel(st->r, FR_END_CANCELLED);
            st->status = 499;
            st->phase = 3;
            continue;
        }
        if (fr_time_s() - st->last_write > KEEPALIVE_S) fr_buf_puts(&st->out, ": keep-alive\n\n");
    }
}

static void stream_free(void *cls) {
    stream *st = cls;
    fr_server *s = st->s;
    fr_req_info info;
    if (!fr_req_wait(st->r, NULL, 0, &info)) {
        fr_req_cancel(st->r, FR_END_CANCELLED); /* the connection went away mid-stream */
        st->status = 499;
    } else {
        const fr_serve_config *cfg = s->cfg;
        fr_metrics_generation(&s->metrics, &info, cfg->ttft_slo_s[info.tier],
                              cfg->tpot_slo_s[info.tier]);
        if (info.end == FR_END_CANCELLED) st->status = 499;
    }
    fr_req_release(st->r);
    fr_metrics_request(&s->metrics, st->ep, st->tier, st->status, fr_time_s() - st->t_start);
    fr_buf_free(&st->out);
    fr_buf_free(&st->text);
    fr_buf_free(&st->held);
    cJSON_Delete(st->tools);
    free(st->ids);
    free(st);
    atomic_fetch_sub(&s->busy, 1);
}

static enum MHD_Result admission_error(conn *c, const fr_admission *adm) {
    fr_api_error e;
    fr_api_error_from_admission(&e, adm);
    if (e.status == 429) c->retry_after = adm->retry_after_s;
    else if (e.status == 503) c->retry_after = 5;
    return send_error(c, &e);
}

/* An X-Deadline-Ms value: milliseconds in 1..86400000 from t_start. False when malformed. */
static bool deadline_parse(const char *xd, double t_start, double *ms, double *deadline) {
    char *end;
    errno = 0;
    double v = strtod(xd, &end);
    while (*end == ' ') end++;
    if (errno || end == xd || *end || !(v >= 1 && v <= 86400000.0)) return false;
    *ms = v;
    *deadline = t_start + v / 1000.0;
    return true;
}

/* X-Deadline-Ms: true with *ms and the absolute *deadline (both 0 without the header); false
 * after queueing the 400 (its result in *ret). */
static bool deadline_header(conn *c, double *ms, double *deadline, enum MHD_Result *ret) {
    *ms = *deadline = 0;
    const char *xd = header(c, "X-Deadline-Ms");
    if (!xd || deadline_parse(xd, c->t_start, ms, deadline)) return true;
    *ret = fail(c, 400, "invalid_request_error", NULL, "X-Deadline-Ms",
                "X-Deadline-Ms must be a number of milliseconds in 1..86400000.");
    return false;
}

/* 503 ledger_unavailable for new work while the ledger cannot write. */
static enum MHD_Result ledger_refusal(conn *c, const char *why) {
    fr_api_error e;
    fr_api_error_set(&e, 503, "server_error", "ledger_unavailable", NULL,
                     "The server cannot record requests right now (%s) and accepts no new work "
                     "until it can; retry later.", why);
    return send_error(c, &e);
}

/* One generation request between its steps (do_generate). */
typedef struct gen_job {
    fr_api_kind kind;
    const fr_api_key *key;
    fr_api_req q;          /* the parsed body */
    char mid[64];          /* meter account id ("" = not metered) */
    char *rendered;        /* chat: the rendered prompt (malloc'd) */
    int32_t *ids;          /* prompt ids (malloc'd) */
    size_t n_ids;
    fr_vlm_prompt vp;      /* a prompt with images: ids, positions, feature rows (n_images 0:
                              none; then ids above are the same as vp.ids, not owned twice) */
    const char *pparam;    /* the body field errors name: "messages" or "prompt" */
    int tier;
    double deadline, deadline_ms;
    int max_tokens;
    fr_tool_family family;  /* tool-call format of the template (tools requests) */
    fr_lora *lora;         /* the adapter "model" names (a reference), or NULL: the base model */
} gen_job;

/* The tier known before the body is parsed (the account of a request refused before that). */
static int pre_body_tier(conn *c, const fr_api_key *key) {
    const fr_serve_config *cfg = c->s->cfg;
    int tier = key ? key->default_tier : cfg->default_tier;
    const char *xp = header(c, "X-Priority");
    if (xp && fr_tier_parse(xp) >= 0) tier = fr_tier_parse(xp);
    if (key && tier < key->highest_tier) tier = key->highest_tier;
    return tier;
}

/* Refuses new work while draining or while the ledger cannot record it (the refusal is
 * metered). Returns true with *ret set when refused. */
static bool refuse_new_work(conn *c, const fr_api_key *key, int pre_tier, enum MHD_Result *ret) {
    fr_server *s = c->s;
    char why[300];
    if (atomic_load(&s->draining)) {
        c->retry_after = 5;
        meter_begin(c, key, pre_tier);
        *ret = fail(c, 503, "server_error", "shutting_down", NULL,
                    "The server is shutting down and accepts no new requests.");
    } else if (!fr_meter_ledger_ok(s->meter, why, sizeof why)) { /* work it could not record */
        c->retry_after = LEDGER_RETRY_AFTER_S;
        meter_begin(c, key, pre_tier);
        *ret = ledger_refusal(c, why);
    } else {
        return false;
    }
    meter_end_http(c);
    return true;
}

/* Opens the account (decoding, OCR and ASR of media parts are stages of it) and parses the body
 * into j->q. Returns false with *ret set (the account closed) on a bad body. */
static bool parse_body(conn *c, gen_job *j, int pre_tier, enum MHD_Result *ret) {
    fr_server *s = c->s;
    const fr_serve_config *cfg = s->cfg;
    meter_begin(c, j->key, pre_tier);
    stage_watch sw = {.s = s, .mc = c->mc};
    fr_cancel media_cancel = {stage_cancel, &sw}; /* image / audio parts' OCR / ASR */
    fr_api_limits lim = {.max_body_bytes = cfg->max_body_bytes,
                         .max_messages = cfg->max_messages,
                         .max_tokens = cfg->max_tokens,
                         .meter = s->meter,
                         .meter_req = c->mr,
                         .cancel = &media_cancel,
                         .max_images = s->vlm ? cfg->vision.max_images : 0,
                         .allow_remote_images = cfg->vision.allow_remote_images,
                         .remote_timeout_s = cfg->vision.remote_timeout_s,
                         .remote_max_bytes = cfg->vision.remote_max_bytes};
    fr_api_error err;
    atomic_fetch_add(&s->stage_busy, 1);
    int prc = fr_api_parse(j->kind, c->body.data ? c->body.data : "", c->body.len, &lim, &j->q,
                           &err);
    atomic_fetch_sub(&s->stage_busy, 1);
    meter_set_inputs(c, j->q.inputs);
    if (prc) {
        *ret = send_error(c, &err);
        meter_end_http(c);
        return false;
    }
    if (c->mr) snprintf(j->mid, sizeof j->mid, "%s", fr_meter_request_id(c->mr));
    return true;
}

/* Tier (header > body > key default > server default; never above the key's highest), the
 * deadline and the model name. Returns false with *ret set. */
static bool request_settings(conn *c, gen_job *j, int pre_tier, enum MHD_Result *ret) {
    fr_server *s = c->s;
    const fr_api_key *key = j->key;
    int tier = key ? key->default_tier : s->cfg->default_tier;
    if (j->q.priority >= 0) tier = j->q.priority;
    const char *xp = header(c, "X-Priority");
    if (xp) {
        tier = fr_tier_parse(xp);
        if (tier < 0) {
            meter_begin(c, key, pre_tier);
            *ret = fail(c, 400, "invalid_request_error", NULL, "X-Priority",
                        "X-Priority must be P0, P1 or P2.");
            return false;
        }
    }
    if (key && tier < key->highest_tier) tier = key->highest_tier;
    j->tier = c->tier = tier;
    meter_set_tier(c, tier);
    if (!deadline_header(c, &j->deadline_ms, &j->deadline, ret)) return false;
    if (j->q.model && strcmp(j->q.model, s->model_name) &&
        !(j->lora = fr_lora_reg_get(s->loras, j->q.model))) {
        fr_api_error err;
        fr_api_error_set(&err, 404, "invalid_request_error", "model_not_found", "model",
                         "The model '%.200s' does not exist (this server serves '%.200s').",
                         j->q.model, s->model_name);
        *ret = send_error(c, &err);
        return false;
    }
    return true;
}

/* The images of a chat for a vision-language model (serve/vlm.h): the encoder (through its
 * cache), the pad expansion, the M-RoPE positions and the pruning; j->ids becomes the expanded
 * prompt. Returns false with *ret set. */
static bool image_prompt(conn *c, gen_job *j, enum MHD_Result *ret) {
    fr_server *s = c->s;
    const fr_serve_vision *vc = &s->cfg->vision;
    fr_vlm_opts o = {.keep_ratio = j->q.keep_ratio > 0 ? j->q.keep_ratio : vc->keep_ratio,
                     .max_image_tokens = j->q.max_image_tokens > 0 ? j->q.max_image_tokens
                                                                   : vc->max_image_tokens,
                     .min_pixels = j->q.min_pixels,
                     .max_pixels = j->q.max_pixels,
                     .time_limit_s = vc->time_limit_s};
    stage_watch sw = {.s = s, .mc = c->mc};
    fr_cancel stop = {stage_cancel, &sw}; /* the client gone, the server shutting down */
    o.cancel = &stop;
    fr_api_error err;
    atomic_fetch_add(&s->stage_busy, 1);
    int rc = fr_vlm_prepare(s->vlm, j->ids, j->n_ids, j->q.images, j->q.n_images, &o, s->meter,
                            c->mr, &j->vp, &err);
    atomic_fetch_sub(&s->stage_busy, 1);
    if (rc) {
        *ret = send_error(c, &err);
        return false;
    }
    free(j->ids);
    j->ids = j->vp.ids;
    j->n_ids = j->vp.n;
    return true;
}

/* The prompt ids: a chat rendered with the template (which holds BOS: tokenized without special
 * tokens, as apply_chat_template(tokenize=True)), a completion prompt as Tokenizer.encode.
 * Returns false with *ret set. */
static bool prompt_ids(conn *c, gen_job *j, enum MHD_Result *ret) {
    fr_server *s = c->s;
    fr_api_error err;
    fr_err ferr = {0};
    const char *text = j->q.prompt;
    bool chat = j->kind == FR_API_CHAT;
    j->pparam = chat ? "messages" : "prompt";
    if (chat) {
        if (!s->tmpl) {
            *ret = fail(c, 400, "invalid_request_error", "no_chat_template", "messages",
                        "This model has no chat template; use /v1/completions or start the "
                        "server with --chat-template.");
            return false;
        }
        const fr_model *m = s->model;
        fr_chat_opts co = {.add_generation_prompt = true,
                           .bos_token = m->bos_token_str ? m->bos_token_str : "",
                           .eos_token = m->eos_token_str ? m->eos_token_str : "",
                           .tools = j->q.tools};
        j->rendered = fr_chat_render(s->tmpl, j->q.messages, &co, &ferr);
        if (!j->rendered) {
            fr_api_error_set(&err, 400, "invalid_request_error", "chat_template_error",
                             "messages", "Cannot render the chat template: %s", ferr.msg);
            *ret = send_error(c, &err);
            return false;
        }
        text = j->rendered;
    }
    /* the public API's tokenizer, whose BOS rule this is (frugal.h) */
    frugal_error terr;
    if (frugal_tokenize(s->api, text, !chat, &j->ids, &j->n_ids, &terr) != FRUGAL_OK) {
        fr_api_error_set(&err, 400, "invalid_request_error", NULL, j->pparam,
                         "Cannot tokenize: %s", terr.message);
        *ret = send_error(c, &err);
        return false;
    }
    if (j->n_ids == 0) {
        *ret = fail(c, 400, "invalid_request_error", NULL, j->pparam, "The prompt is empty.");
        return false;
    }
    if (j->q.n_images) return image_prompt(c, j, ret);
    return true;
}

/* A request with tools: the template's tool-call family (400 when it has none) and, for
 * tool_choice "required" or a named function, the grammar that forces one valid call (its
 * parameters schema checked like response_format's). Returns false with *ret set. */
static bool tool_setup(conn *c, gen_job *j, enum MHD_Result *ret) {
    if (!j->q.tools) return true;
    j->family = fr_tool_family_of(c->s->tmpl);
    fr_api_error err;
    if (j->family == FR_TOOL_NONE) {
        *ret = fail(c, 400, "invalid_request_error", "unsupported_parameter", "tools",
                    "This model's chat template shows no tool-call format (Qwen2.5's "
                    "<tool_call> or Llama-3.1's JSON); \"tools\" cannot be used with it.");
        return false;
    }
    if (j->q.tool_choice < FR_API_TOOLS_REQUIRED) return true;
    fr_err fe = {0};
    j->q.grammar = fr_tool_grammar(j->family, j->q.tools, j->q.tool_name, &fe);
    if (j->q.grammar) return true;
    const char *code = fe.code == FR_ERR_UNSUPPORTED ? "unsupported_schema"
                       : fe.code == FR_ERR_TOO_LARGE ? "schema_too_large"
                                                     : "invalid_schema";
    fr_api_error_set(&err, 400, "invalid_request_error", code, "tools",
                     "Invalid schema for the tools' parameters: %s", fe.msg);
    *ret = send_error(c, &err);
    return false;
}

/* max_tokens against the context: the request's, or the server default that fits. Returns
 * false with *ret set. */
static bool fit_context(conn *c, gen_job *j, enum MHD_Result *ret) {
    fr_server *s = c->s;
    fr_api_error err;
    size_t n = j->n_ids;
    int ctx = fr_engine_max_ctx(s->engine);
    if ((long long)n > s->max_prompt_tokens) {
        fr_api_error_set(&err, 400, "invalid_request_error", "context_length_exceeded", j->pparam,
                         "The prompt has %zu tokens; this server accepts at most %d.", n,
                         s->max_prompt_tokens);
        *ret = send_error(c, &err);
        return false;
    }
    j->max_tokens = fr_api_max_tokens(j->q.max_tokens, s->cfg->default_max_tokens, ctx, n,
                                      j->q.max_tokens < 0 ? j->pparam : "max_tokens", &err);
    if (j->max_tokens < 0) {
        *ret = send_error(c, &err);
        return false;
    }
    return true;
}

/* Hands the request to the engine (which then owns the meter account). Returns the request, or
 * NULL with *ret set (the account stays ours: closed as rejected). */
static fr_req *submit(conn *c, gen_job *j, enum MHD_Result *ret) {
    fr_server *s = c->s;
    fr_req_params p;
    fr_api_req_params_init(&p, j->ids, j->n_ids, j->max_tokens, j->tier, c->t_start, j->deadline);
    fr_api_req_params_apply(&p, &j->q, j->q.has_seed ? j->q.seed : random_seed());
    p.meter = c->mr;
    p.lora = j->lora;
    if (j->vp.n_images) {
        p.img_embd = j->vp.embd;
        p.n_img_rows = j->vp.n_rows;
        p.image_token_id = s->model->hp.image_token_id;
        p.rope_pos = j->vp.rope_pos;
    }
    p.grammar = j->q.grammar;
    fr_admission adm;
    fr_req *r = fr_engine_submit(s->engine, &p, &adm);
    if (!r) {
        *ret = admission_error(c, &adm);
        return NULL;
    }
    j->q.grammar = NULL; /* the engine's now */
    c->mr = NULL; /* the engine's now: it closes the account when the request ends */
    atomic_fetch_add(&s->busy, 1);
    c->generation = true;
    return r;
}

/* Answers with a server-sent event stream that stream_read fills as tokens come. */
static enum MHD_Result start_stream(conn *c, const gen_job *j, fr_req *r,
                                    const fr_api_result *res) {
    fr_server *s = c->s;
    stream *st = fr_xcalloc(1, sizeof *st);
    st->s = s;
    st->mc = c->mc;
    st->r = r;
    st->kind = j->kind;
    fr_api_new_id(st->id, sizeof st->id, j->kind == FR_API_CHAT ? "chatcmpl-" : "cmpl-");
    st->res = *res;
    st->res.id = st->id;
    st->include_usage = j->q.include_usage;
    st->ep = c->ep;
    st->tier = j->tier;
    st->t_start = c->t_start;
    st->status = 200;
    st->deadline_ms = j->deadline_ms;
    st->return_ids = j->q.return_token_ids;
    snprintf(st->mid, sizeof st->mid, "%s", j->mid);
    if (j->q.tools) {
        st->tool_family = j->family;
        st->tools = cJSON_Duplicate(j->q.tools, true);
    }
    if (st->return_ids) {
        st->max_ids = j->max_tokens;
        st->ids = fr_xmalloc((size_t)j->max_tokens * sizeof(int32_t));
    }
    st->last_write = fr_time_s();
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp) {
        c->generation = false; /* stream_free releases busy */
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    if (c->traceparent[0]) MHD_add_response_header(resp, "traceparent", c->traceparent);
    c->stream_owned = true; /* stream_free records the request and releases busy */
    c->generation = false;
    c->status = 200;
    c->responded = true;
    enum MHD_Result ret = MHD_queue_response(c->mc, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* Waits for the whole answer (cancelling when the client leaves) and sends it as one JSON
 * response, or the error the request ended with. */
static enum MHD_Result answer_whole(conn *c, const gen_job *j, fr_req *r, fr_api_result *res) {
    fr_server *s = c->s;
    const fr_serve_config *cfg = s->cfg;
    enum MHD_Result ret;
    fr_api_error err;
    fr_buf out = {0};
    fr_req_info info;
    bool gone = false;
    cJSON *calls = NULL;
    char *content = NULL;
    while (!fr_req_wait(r, &out, WAIT_SLICE_S, &info))
        if (!gone && client_gone(c->mc)) {
            fr_req_cancel(r, FR_END_CANCELLED);
            gone = true;
        }
    fr_metrics_generation(&s->metrics, &info, cfg->ttft_slo_s[j->tier], cfg->tpot_slo_s[j->tier]);
    int32_t *out_ids = NULL;
    if (j->q.return_token_ids && info.n_generated > 0) {
        out_ids = fr_xmalloc((size_t)info.n_generated * sizeof(int32_t));
        int n = fr_req_output_ids(r, out_ids, info.n_generated);
        res->token_ids = out_ids;
        res->n_token_ids = n > 0 ? n : 0;
    }
    fr_req_release(r);
    char id[64];
    bool ok_end = info.end == FR_END_STOP || info.end == FR_END_LENGTH;
    bool durable = info.end == FR_END_CANCELLED || row_durable(s, &info); /* before any answer */
    if (ok_end && !durable) {
        answer_withheld(s, info.ledger_seq, &err);
        c->retry_after = LEDGER_RETRY_AFTER_S;
        ret = send_error(c, &err);
    } else if (ok_end) {
        fr_api_new_id(id, sizeof id, j->kind == FR_API_CHAT ? "chatcmpl-" : "cmpl-");
        res->id = id;
        res->text = out.data ? out.data : "";
        res->text_len = out.len;
        res->finish = finish_name(info.end);
        if (j->q.tools) {
            calls = fr_tool_parse(j->family, res->text, res->text_len, j->q.tools, random_seed(),
                                  &content);
            if (calls) {
                res->tool_calls = calls;
                res->text = content ? content : "";
                res->text_len = content ? strlen(content) : 0;
                res->finish = "tool_calls";
            }
        }
        res->completion_tokens = info.n_generated;
        res->cached_tokens = info.n_cached;
        bool final = meter_settle(s, j->mid, &info);
        ret = send_json(c, 200, with_frugal(j->kind == FR_API_CHAT ? fr_api_chat_response(res)
                                                                   : fr_api_completion_response(res),
                                            &info, final));
    } else if (info.end == FR_END_CANCELLED) {
        c->status = 499;
        ret = MHD_NO; /* nobody to answer: close */
    } else {
        end_error(info.end, &info, j->deadline_ms, &err);
        if (err.status == 503) c->retry_after = 5;
        ret = send_error(c, &err);
    }
    fr_buf_free(&out);
    free(out_ids);
    free(content);
    cJSON_Delete(calls);
    atomic_fetch_sub(&s->busy, 1);
    c->generation = false;
    return ret;
}

/* POST /v1/chat/completions and /v1/completions: refuse new work when draining or unable to
 * record it, parse the body, settle tier / deadline / model, tokenize the prompt, fit
 * max_tokens into the context, submit to the engine, then stream or answer whole. */
static enum MHD_Result do_generate(conn *c, fr_api_kind kind, const fr_api_key *key) {
    enum MHD_Result ret;
    int pre_tier = pre_body_tier(c, key);
    if (refuse_new_work(c, key, pre_tier, &ret)) return ret;
    gen_job j;
    memset(&j, 0, sizeof j);
    j.kind = kind;
    j.key = key;
    if (!parse_body(c, &j, pre_tier, &ret)) return ret;
    fr_req *r = NULL;
    if (request_settings(c, &j, pre_tier, &ret) && tool_setup(c, &j, &ret) &&
        prompt_ids(c, &j, &ret) &&
        fit_context(c, &j, &ret) && (r = submit(c, &j, &ret))) {
        fr_api_result res;
        memset(&res, 0, sizeof res);
        res.model = j.lora ? j.lora->name : c->s->model_name;
        res.created = (long long)time(NULL);
        res.prompt_tokens = (int)j.n_ids;
        res.image_tokens = j.vp.image_tokens;
        res.image_tokens_kept = j.vp.image_tokens_kept;
        ret = j.q.stream ? start_stream(c, &j, r, &res) : answer_whole(c, &j, r, &res);
    }
    meter_end_http(c); /* a request refused before the engine took it */
    if (j.vp.n_images) j.vp.ids = NULL; /* j.ids is that array */
    fr_vlm_prompt_free(&j.vp);
    free(j.ids);
    free(j.rendered);
    fr_api_req_free(&j.q);
    fr_lora_free(j.lora); /* the engine's request holds its own reference */
    return ret;
}

/* ---- assist: the handler `frugal assist` also calls (serve/assist.c, docs/ASSIST.md) ---- */

/* ---- stage doors: /v1/assist and the audio endpoints run their stages on the connection
 * thread, with an account the handler owns from the head to the answer ---- */

/* What a stage door settled before its handler runs. */
typedef struct stage_door {
    const char *route;    /* ledger route */
    const char *modality; /* the account's modality (NULL: set by the handler) */
    int forced;           /* X-Priority's tier within the key's cap, -1 = none */
    int dflt;             /* the key's (or the server's) default tier within the cap */
    int highest;          /* the key's cap (0 = any) */
    double deadline, deadline_ms; /* X-Deadline-Ms (0 = none) */
} stage_door;

/* A refusal before the door's account is opened: its ledger row, then the error. */
static enum MHD_Result door_refuse(conn *c, const stage_door *d, const fr_api_key *key,
                                   int status, const char *type, const char *code,
                                   const char *param, const char *msg) {
    char tp[56] = "";
    meter_refusal(c->s, d->route, key, head_tier(c->s->cfg, key, header(c, "X-Priority")),
                  header(c, "traceparent"), status, tp);
    if (tp[0]) memcpy(c->traceparent, tp, sizeof tp);
    return fail(c, status, type, code, param, msg);
}

/* Refuses new work while draining; reads X-Priority and X-Deadline-Ms (400 when malformed) and
 * settles the tiers into *d and c->tier. Returns false with *ret set (the refusal's row made). */
static bool door_headers(conn *c, const fr_api_key *key, stage_door *d, enum MHD_Result *ret) {
    fr_server *s = c->s;
    if (atomic_load(&s->draining)) {
        c->retry_after = 5;
        *ret = door_refuse(c, d, key, 503, "server_error", "shutting_down", NULL,
                           "The server is shutting down and accepts no new requests.");
        return false;
    }
    const char *xp = header(c, "X-Priority");
    d->forced = -1;
    if (xp && (d->forced = fr_tier_parse(xp)) < 0) {
        *ret = door_refuse(c, d, key, 400, "invalid_request_error", NULL, "X-Priority",
                           "X-Priority must be P0, P1 or P2.");
        return false;
    }
    const char *xd = header(c, "X-Deadline-Ms");
    if (xd && !deadline_parse(xd, c->t_start, &d->deadline_ms, &d->deadline)) {
        *ret = door_refuse(c, d, key, 400, "invalid_request_error", NULL, "X-Deadline-Ms",
                           "X-Deadline-Ms must be a number of milliseconds in 1..86400000.");
        return false;
    }
    d->highest = key ? key->highest_tier : 0;
    d->dflt = key ? key->default_tier : s->cfg->default_tier;
    if (d->forced >= 0 && d->forced < d->highest) d->forced = d->highest; /* the key's cap */
    if (d->dflt < d->highest) d->dflt = d->highest;
    c->tier = d->forced >= 0 ? d->forced : d->dflt;
    return true;
}

/* The door's headers, then its account (route, tier, modality), refused with 503 while the
 * ledger cannot record work. Returns false with *ret set. */
static bool door_open(conn *c, const fr_api_key *key, stage_door *d, enum MHD_Result *ret) {
    fr_server *s = c->s;
    if (!door_headers(c, key, d, ret)) return false;
    if (s->meter && !c->mr) {
        fr_meter_req_info in = {.traceparent = header(c, "traceparent"),
                                .api_key_id = key ? key->id : NULL,
                                .route = d->route,
                                .tier = fr_tier_name(c->tier),
                                .modality = d->modality};
        c->mr = fr_meter_request_begin(s->meter, &in);
        fr_meter_request_traceparent(c->mr, c->traceparent);
    }
    char why[300];
    if (!fr_meter_ledger_ok(s->meter, why, sizeof why)) { /* work it could not record: refused */
        c->retry_after = LEDGER_RETRY_AFTER_S;
        *ret = ledger_refusal(c, why);
        meter_end_http(c);
        return false;
    }
    return true;
}

/* The door's answer: nobody to answer when the client left (close); else the account closed
 * with the status about to be sent, then the body once the row is durable (or the 503 that
 * replaces a success whose row is not). body is taken; hdrs as queue_with's. */
static enum MHD_Result door_answer(conn *c, const stage_watch *sw, int st, const char *ctype,
                                   char *body, size_t len, const char *const *hdrs) {
    fr_server *s = c->s;
    bool metered = c->mr != NULL;
    if (sw->why == FR_CANCEL_CLIENT_GONE) {
        free(body);
        c->status = 499;
        meter_end_http(c);
        return MHD_NO;
    }
    if (st == 503) c->retry_after = 5;
    c->status = st;
    uint64_t seq = meter_end_http(c);
    if (metered && fr_meter_ledger_wait(s->meter, seq) != 0 && st < 400) {
        fr_api_error e;
        answer_withheld(s, seq, &e);
        free(body);
        c->retry_after = LEDGER_RETRY_AFTER_S;
        return send_error(c, &e);
    }
    return queue_with(c, st, ctype, body, len, hdrs);
}

static enum MHD_Result do_assist(conn *c, const fr_api_key *key) {
    fr_server *s = c->s;
    enum MHD_Result r;
    /* the modality is set by the handler once the body is parsed (serve/assist.c) */
    stage_door d = {.route = "assist"};
    if (!door_open(c, key, &d, &r)) return r;
    stage_watch sw = {.s = s, .mc = c->mc};
    fr_assist_call call = {.tier = d.forced, .default_tier = d.dflt, .t_arrival = c->t_start,
                           .meter = c->mr, .highest_tier = d.highest, .deadline = d.deadline,
                           .cancel = {stage_cancel, &sw}};
    char *json = NULL;
    atomic_fetch_add(&s->stage_busy, 1);
    int st = fr_assist_handle(s->assist, c->body.data ? c->body.data : "", c->body.len, &call,
                              &json);
    r = door_answer(c, &sw, st, "application/json", json, strlen(json), NULL);
    atomic_fetch_sub(&s->stage_busy, 1);
    return r;
}

/* The multipart bounds of an audio form: the body limit for the whole, the assist door's audio
 * limit for one part (the recording). */
static fr_mp_limits audio_limits(fr_server *s) {
    size_t body = s->cfg->max_body_bytes;
    size_t audio = fr_assist_config_of(s->assist)->max_audio_bytes;
    return (fr_mp_limits){.max_parts = FR_AUDIO_MAX_PARTS, .max_header_bytes = 4096,
                          .max_part_bytes = audio && audio < body ? audio : body,
                          .max_total_bytes = body};
}

/* X-Frugal-Joules / -Usd / -Estimated / -Final: the reply's figures, for every format (the JSON
 * ones also hold them in "frugal"). vals: 4 x 32 bytes of storage; hdrs: 9 slots. */
static void cost_headers(const fr_audio_cost *cost, char vals[4][32], const char *hdrs[9]) {
    hdrs[0] = NULL;
    if (!cost->metered) return;
    snprintf(vals[0], 32, "%.9g", cost->joules);
    snprintf(vals[1], 32, "%.9g", cost->usd);
    snprintf(vals[2], 32, "%s", cost->estimated ? "true" : "false");
    snprintf(vals[3], 32, "%s", cost->final ? "true" : "false");
    static const char *const names[4] = {"X-Frugal-Joules", "X-Frugal-Usd", "X-Frugal-Estimated",
                                         "X-Frugal-Final"};
    for (int i = 0; i < 4; i++) {
        hdrs[2 * i] = names[i];
        hdrs[2 * i + 1] = vals[i];
    }
    hdrs[8] = NULL;
}

/* POST /v1/audio/transcriptions and /v1/audio/translations (serve/audio_api.h): the stage door
 * (tier, deadline, account with modality audio), the handler, the answer once its row is
 * durable. */
static enum MHD_Result do_audio(conn *c, const fr_api_key *key, fr_audio_task task) {
    fr_server *s = c->s;
    enum MHD_Result r;
    stage_door d = {.route = task == FR_AUDIO_TRANSLATE ? "translations" : "transcriptions",
                    .modality = "audio"};
    if (!door_open(c, key, &d, &r)) return r;
    stage_watch sw = {.s = s, .mc = c->mc, .deadline = d.deadline};
    fr_cancel stop = {stage_cancel, &sw};
    fr_audio_call call = {.task = task, .content_type = header(c, "Content-Type"),
                          .limits = audio_limits(s), .meter = s->meter, .account = c->mr,
                          .cancel = &stop, .whisper = s->whisper,
                          .whisper_cuda = s->whisper_cuda};
    fr_audio_reply rep;
    atomic_fetch_add(&s->stage_busy, 1);
    fr_audio_handle(c->body.data, c->body.len, &call, &rep);
    char vals[4][32];
    const char *hdrs[9];
    cost_headers(&rep.cost, vals, hdrs);
    r = door_answer(c, &sw, rep.status, rep.content_type, rep.body, rep.len, hdrs);
    atomic_fetch_sub(&s->stage_busy, 1);
    return r;
}

/* The ledger row of a generation request refused by the connection layer before a handler ran
 * (its key, if valid, and head tier; the response's traceparent into c). */
static void refusal_row(conn *c, const char *url, int status) {
    const fr_api_key *key = NULL;
    const char *auth = header(c, "Authorization");
    find_key(c->s->cfg, auth, auth ? strlen(auth) : 0, &key);
    char tp[56] = "";
    meter_refusal(c->s, generation_route(url, strlen(url)), key,
                  head_tier(c->s->cfg, key, header(c, "X-Priority")), header(c, "traceparent"),
                  status, tp);
    if (tp[0]) memcpy(c->traceparent, tp, sizeof tp);
}

/* ---- connection slots (serve/guard.h) ---- */

/* A handed-over connection's socket context: its guard slot. */
typedef struct slot {
    int cls;      /* fr_guard_class the slot is held for, -1 = none */
    int requests; /* requests seen on the connection */
} slot;

/* The guard class of a request: the control endpoints, else its head tier. */
static int request_class(const fr_serve_config *cfg, const char *path, size_t len,
                         const char *auth, size_t auth_len, const char *xp) {
    if ((len == 7 && !memcmp(path, "/health", 7)) || (len == 6 && !memcmp(path, "/ready", 6)) ||
        (len == 8 && !memcmp(path, "/metrics", 8)))
        return FR_GUARD_CONTROL;
    const fr_api_key *key = NULL;
    find_key(cfg, auth, auth_len, &key);
    return FR_GUARD_P0 + head_tier(cfg, key, xp);
}

/* True for the second and later requests on a kept-alive connection (the guard saw only the
 * first one's head). Counts the request: call once per request. */
static bool later_request(conn *c, slot **out) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    slot *sl = ci ? ci->socket_context : NULL;
    *out = sl;
    return sl && ++sl->requests > 1;
}

/* Framing facts of a request head as MHD parsed it (for later requests on a connection). */
typedef struct framing {
    int n_host, n_cl, n_te;
    bool bad_byte;    /* a NUL or control byte in a value */
    bool cl_bad;      /* Content-Length not all digits */
    int te_chunked;   /* `chunked` elements in Transfer-Encoding */
    bool te_other;    /* another coding */
} framing;

static enum MHD_Result framing_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size) {
    (void)kind;
    (void)key_size;
    framing *f = cls;
    for (size_t i = 0; value && i < value_size; i++) {
        unsigned char ch = (unsigned char)value[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) f->bad_byte = true;
    }
    if (!strcasecmp(key, "Host")) f->n_host++;
    if (!strcasecmp(key, "Content-Length")) {
        f->n_cl++;
        if (!value_size || value_size > 19 || strspn(value, "0123456789") != value_size)
            f->cl_bad = true;
    }
    if (!strcasecmp(key, "Transfer-Encoding")) {
        f->n_te++;
        const char *v = value ? value : "";
        while (*v) {
            while (*v == ' ' || *v == '\t' || *v == ',') v++;
            size_t n = strcspn(v, ",");
            size_t m = n;
            while (m && (v[m - 1] == ' ' || v[m - 1] == '\t')) m--;
            if (m == 7 && !strncasecmp(v, "chunked", 7)) f->te_chunked++;
            else if (m) f->te_other = true;
            v += n;
        }
    }
    return MHD_YES;
}

/* The guard's framing rules (serve/http_head.h) for a later request on a kept-alive connection,
 * on the fields as MHD parsed them: 0, or the status to refuse with (*msg set). */
static int later_framing_status(conn *c, const char *version, const char **msg) {
    framing f = {0};
    MHD_get_connection_values_n(c->mc, MHD_HEADER_KIND, framing_field, &f);
    bool v11 = version && !strcmp(version, "HTTP/1.1");
    *msg = NULL;
    if (f.bad_byte) *msg = "A header value holds a NUL or another control byte.";
    else if (v11 && f.n_host != 1) *msg = "HTTP/1.1 requests must carry exactly one Host header.";
    else if (f.n_cl > 1 || f.cl_bad) *msg = "Content-Length must be one number, given once.";
    else if (f.n_te && f.n_cl) *msg = "Transfer-Encoding and Content-Length together are ambiguous.";
    else if (f.n_te > 1 || f.te_chunked > 1) *msg = "Transfer-Encoding names chunked more than once.";
    if (*msg) return 400;
    if (f.te_other) {
        *msg = "Only the chunked transfer coding is supported.";
        return 501;
    }
    return 0;
}

/* The first request was classified by the guard; a later one on the same connection moves the
 * slot to its own class, or is refused (false) when that class has no room. */
static bool keepalive_slot_ok(conn *c, const char *url, slot *sl) {
    if (!sl || sl->cls < 0) return true;
    const char *auth = header(c, "Authorization");
    const char *xpv = header(c, "X-Priority");
    int to = request_class(c->s->cfg, url, strlen(url), auth, auth ? strlen(auth) : 0, xpv);
    if (!fr_guard_slot_move(c->s->guard, sl->cls, to)) return false;
    sl->cls = to;
    return true;
}

static fr_guard_class guard_classify(void *cls, const fr_http_head *h) {
    fr_server *s = cls;
    size_t alen = 0, xlen = 0;
    const char *auth = fr_http_head_get(h, "Authorization", &alen);
    const char *xpv = fr_http_head_get(h, "X-Priority", &xlen);
    char xp[8];
    snprintf(xp, sizeof xp, "%.*s", (int)FR_MIN(xlen, sizeof xp - 1), xpv ? xpv : "");
    return request_class(s->cfg, h->path, h->path_len, auth, alen,
                         xpv && xlen < sizeof xp ? xp : NULL);
}

/* The guard answers a request itself: a generation request gets its ledger row. */
static void guard_refused(void *cls, const fr_http_head *h, int status, char tp_out[56]) {
    fr_server *s = cls;
    if (!h->line_done) return; /* no request line: no endpoint, no request to account */
    const char *route = generation_route(h->path, h->path_len);
    if (!route) return;
    size_t alen = 0, xlen = 0, tlen = 0;
    const char *auth = fr_http_head_get(h, "Authorization", &alen);
    const char *xpv = fr_http_head_get(h, "X-Priority", &xlen);
    const char *tpv = fr_http_head_get(h, "traceparent", &tlen);
    const fr_api_key *key = NULL;
    find_key(s->cfg, auth, alen, &key);
    char xp[8], tp[64];
    snprintf(xp, sizeof xp, "%.*s", (int)FR_MIN(xlen, sizeof xp - 1), xpv ? xpv : "");
    snprintf(tp, sizeof tp, "%.*s", (int)FR_MIN(tlen, sizeof tp - 1), tpv ? tpv : "");
    meter_refusal(s, route, key, head_tier(s->cfg, key, xpv && xlen < sizeof xp ? xp : NULL),
                  tpv && tlen < sizeof tp ? tp : NULL, status, tp_out);
}

static bool guard_handoff(void *cls, int fd, const struct sockaddr *addr, socklen_t alen) {
    fr_server *s = cls;
    return MHD_add_connection(s->d, fd, addr, alen) == MHD_YES;
}

/* ---- MHD callbacks ---- */

static enum MHD_Result route(conn *c, const char *url, const char *method) {
    const fr_api_key *key = NULL;
    enum MHD_Result ret;
    if (c->ep != FR_EP_HEALTH && !check_auth(c, url, &key, &ret)) return ret;
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    bool post = !strcmp(method, "POST");
    if (stage_endpoint(c->ep)) {
        if (post && c->ep == FR_EP_ASSIST) return do_assist(c, key);
        if (post) return do_audio(c, key, c->ep == FR_EP_TRANSLATIONS ? FR_AUDIO_TRANSLATE
                                                                      : FR_AUDIO_TRANSCRIBE);
        c->close = false;
        fr_api_error e;
        fr_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                         "Method %.16s is not allowed on %.200s (POST only).", method, url);
        return send_error(c, &e);
    }
    switch (c->ep) {
    case FR_EP_HEALTH:
        if (!get) break;
        return send_json(c, 200, fr_xstrdup("{\"status\":\"ok\"}"));
    case FR_EP_READY:
        if (!get) break;
        if (engine_ready(c->s)) return send_json(c, 200, fr_xstrdup("{\"status\":\"ready\"}"));
        c->retry_after = 5;
        return send_json(c, 503, not_ready_json(c->s));
    case FR_EP_METRICS:
        if (!get) break;
        return do_metrics(c);
    case FR_EP_MODELS:
        if (!get) break;
        return do_models(c, url);
    case FR_EP_CHAT:
    case FR_EP_COMPLETIONS:
        if (!post) break;
        return do_generate(c, c->ep == FR_EP_CHAT ? FR_API_CHAT : FR_API_COMPLETIONS, key);
    default: {
        if (!strcmp(url, "/v1/load_lora_adapter") || !strcmp(url, "/v1/unload_lora_adapter")) {
            if (!post) break;
            return do_lora_admin(c, url[4] == 'l');
        }
        fr_api_error e;
        fr_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL,
                         "Unknown endpoint: %.16s %.200s", method, url);
        return send_error(c, &e);
    }
    }
    fr_api_error e;
    fr_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                     "Method %.16s is not allowed on %.200s.", method, url);
    return send_error(c, &e);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    fr_server *s = cls;
    conn *c = *con_cls;
    if (!c) {
        c = fr_xcalloc(1, sizeof *c);
        c->s = s;
        c->mc = mc;
        c->t_start = fr_time_s();
        c->tier = -1;
        c->ep = classify(url);
        *con_cls = c;
        /* the guard checked this connection's first head (framing, size, Content-Length); a
         * later request on a kept-alive connection gets the same framing rules and must fit
         * its slot's class */
        slot *sl = NULL;
        if (later_request(c, &sl)) {
            /* back from the short wait for a next head (on_completed) to the idle timeout */
            MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT,
                                      (unsigned int)s->cfg->idle_timeout_s);
            const char *why = NULL;
            int fst = later_framing_status(c, version, &why);
            if (fst) {
                c->close = true;
                refusal_row(c, url, fst);
                return fail(c, fst, fst == 501 ? "not_supported_error" : "invalid_request_error",
                            fst == 501 ? "unsupported_transfer_coding" : "bad_framing", NULL, why);
            }
        }
        if (sl && sl->requests > 1 && !keepalive_slot_ok(c, url, sl)) {
            c->retry_after = 1;
            c->close = true;
            refusal_row(c, url, 503);
            char msg[128];
            snprintf(msg, sizeof msg,
                     "Too many concurrent connections for this class (%d in all); retry later.",
                     s->cfg->max_connections);
            return fail(c, 503, "server_error", "too_many_connections", NULL, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!c->responded && fr_time_s() - c->t_start > s->cfg->body_timeout_s) {
            fr_debug("http: body not complete after %.1f s: closing", s->cfg->body_timeout_s);
            c->status = 408;
            return MHD_NO;
        }
        if (!c->responded && !c->too_large) {
            if (c->body.len + *upload_size > s->cfg->max_body_bytes) {
                c->too_large = true;
                fr_buf_free(&c->body);
            } else {
                fr_buf_append(&c->body, upload, *upload_size);
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (c->responded) return MHD_YES;
    if (c->too_large) {
        refusal_row(c, url, 413);
        c->close = true;
        char msg[128];
        snprintf(msg, sizeof msg, "Request body exceeds the limit of %zu bytes.",
                 s->cfg->max_body_bytes);
        return fail(c, 413, "invalid_request_error", "request_too_large", NULL, msg);
    }
    return route(c, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    fr_server *s = cls;
    conn *c = *con_cls;
    /* a kept-alive connection waits for its next head no longer than the guard would */
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && mc)
        MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT,
                                  (unsigned int)ceil(s->cfg->header_timeout_s));
    if (!c) return;
    if (!c->stream_owned) {
        bool gen = c->ep == FR_EP_CHAT || c->ep == FR_EP_COMPLETIONS || stage_endpoint(c->ep);
        fr_metrics_request(&s->metrics, c->ep, c->tier, c->status ? c->status : 499,
                           gen ? fr_time_s() - c->t_start : -1);
    }
    if (c->generation) atomic_fetch_sub(&s->busy, 1);
    meter_end_http(c); /* safety net: every account the handler owns is closed */
    fr_buf_free(&c->body);
    free(c);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe) {
    fr_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&s->connections, 1);
        /* SSE chunks are small writes: without TCP_NODELAY, Nagle's algorithm and the client's
         * delayed ACK hold each one back for up to ~40 ms. */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        int one = 1;
        if (ci) setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        slot *sl = fr_xcalloc(1, sizeof *sl);
        sl->cls = ci ? fr_guard_slot_claim(s->guard, ci->connect_fd) : -1;
        *socket_ctx = sl;
    } else {
        atomic_fetch_sub(&s->connections, 1);
        slot *sl = *socket_ctx;
        if (sl) fr_guard_slot_release(s->guard, sl->cls);
        free(sl);
        *socket_ctx = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    fr_debug("http: %s", msg);
}

/* ---- start / stop ---- */

/* Every connection the guard holds is a descriptor: the soft limit goes up to the hard one. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            fr_debug("file descriptor limit raised from %llu to %llu", (unsigned long long)was,
                     (unsigned long long)rl.rlim_max);
    }
}

/* A non-blocking listening socket on cfg->host:cfg->port; *port gets the bound port. -1 with
 * err on failure. */
static int listen_socket(const fr_serve_config *cfg, int *port, fr_err *err) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, ps, &hints, &ai);
    if (gai || !ai) {
        fr_err_set(err, "cannot resolve host '%s': %s", cfg->host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 4096)) {
        fr_err_set(err, "cannot listen on %s:%d (%s)", cfg->host, cfg->port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    *port = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        *port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

fr_server *fr_server_start(const fr_serve_config *cfg, const frugal_model *model,
                           const frugal_context *dev, fr_err *err) {
    fr_server *s = fr_xcalloc(1, sizeof *s);
    const fr_model *m = frugal_model_impl(model);
    s->lfd = -1;
    s->cfg = cfg;
    s->api = model;
    s->model = m;
    s->model_name = cfg->served_name ? cfg->served_name : m->name ? m->name : "model";
    s->created = (long long)time(NULL);
    fr_metrics_init(&s->metrics);
    atomic_init(&s->connections, 0);
    atomic_init(&s->busy, 0);
    atomic_init(&s->draining, false);
    atomic_init(&s->stage_busy, 0);
    atomic_init(&s->cancel_all, false);
    if (cfg->chat_template) {
        s->tmpl = fr_chat_builtin(cfg->chat_template);
        if (!s->tmpl) {
            if (!fr_path_exists(cfg->chat_template)) {
                fr_err_set(err, "unknown chat template '%s' (built-in: chatml, llama3; or a file)",
                           cfg->chat_template);
                goto fail;
            }
            s->tmpl_owned = fr_read_file(cfg->chat_template, 1u << 20, NULL, err);
            if (!s->tmpl_owned) goto fail;
            s->tmpl = s->tmpl_owned;
        }
    } else {
        s->tmpl = m->chat_template;
    }
    char ledger_path[sizeof ((fr_meter_config *)0)->ledger_path] = ""; /* for the start-up line */
    if (cfg->meter) {
        fr_meter_config mc = cfg->metering; /* defaults + the config file's "metering" */
        if (cfg->meter_config && fr_meter_config_load(&mc, cfg->meter_config, err)) goto fail;
        /* --ledger, else the meter config's ledger.path, else the command's per-server default */
        if (cfg->ledger) snprintf(mc.ledger_path, sizeof mc.ledger_path, "%s", cfg->ledger);
        else if (!mc.ledger_path_set && cfg->ledger_default)
            snprintf(mc.ledger_path, sizeof mc.ledger_path, "%s", cfg->ledger_default);
        memcpy(ledger_path, mc.ledger_path, sizeof ledger_path);
        s->meter = fr_meter_open(&mc, err);
        if (!s->meter) goto fail;
    }
    fr_engine_config ec_in = cfg->engine;
    ec_in.meter = s->meter;
    /* the device the public API chose (NULL: its default, the CPU); CPU weights were the
     * load-time quantisation of the model */
    ec_in.device = NULL;
    ec_in.weights = NULL;
    ec_in.kv_type = NULL;
    if (dev) {
        fr_generate_device d = frugal_context_device(dev);
        ec_in.device = d.device;
        ec_in.weights = d.weights;
        ec_in.kv_type = d.kv;
        ec_in.kv_fraction = d.kv_fraction;
    }
    s->engine = fr_engine_new(m, &ec_in, err);
    if (!s->engine) goto fail;
    if (m->vision) { /* a vision-language model serves images on the chat door */
        if (!fr_engine_takes_images(s->engine)) {
            fr_warn("the %s backend takes no image features: image parts are refused",
                    fr_engine_backend_name(s->engine));
        } else if (!(s->vlm = fr_vlm_new(m, cfg->vision.encoder_cache_bytes, err)) ||
                   fr_vlm_use_device(s->vlm, ec_in.device, err)) { /* the tower on the engine's device */
            goto fail;
        } else {
            fr_vlm_set_background_drop(s->vlm, cfg->vision.background_drop);
        }
    }
    if (cfg->no_vad) setenv("FRUGAL_NO_VAD", "1", 1); /* read where the speech stages start */
    s->loras = fr_lora_reg_new(&m->hp);
    for (int i = 0; i < cfg->n_lora; i++) {
        if (fr_lora_reg_load_spec(s->loras, cfg->lora[i], err)) goto fail;
        fr_info("LoRA adapter %s", cfg->lora[i]);
    }
    if (cfg->asr_model) { /* the audio endpoints' engine */
        if (!(s->whisper = fr_whisper_load(cfg->asr_model, err))) goto fail;
        /* on --asr-device, else the decoder's device (as PP-OCR) */
        const char *adev = cfg->asr_device ? cfg->asr_device : ec_in.device;
        if (fr_whisper_cuda_open(s->whisper, adev, &s->whisper_cuda, err)) {
            fr_err_prefix(err, "--asr-device");
            goto fail;
        }
        fr_info("audio endpoints: Whisper from %s (%s)", cfg->asr_model,
                s->whisper_cuda ? adev : "cpu");
    }
    /* before the media; PP-OCR on the engine's device unless ocr.device says otherwise */
    fr_assist_media_set_ocr(cfg->ocr.engine, cfg->ocr.ppocr_models,
                            cfg->ocr.device ? cfg->ocr.device : ec_in.device);
    s->assist = fr_assist_for_server(s->engine, m, s->tmpl);
    fr_assist_set_meter(s->assist, s->meter);
    fr_assist_set_vlm(s->assist, s->vlm, s->engine);
    const fr_assist_config *acfg = fr_assist_config_of(s->assist); /* chat media parts too */
    fr_api_media_set_bounds(acfg->ocr_time_limit_s, acfg->ocr_max_pixels,
                            acfg->asr_time_limit_s_per_min);
    int ctx = fr_engine_max_ctx(s->engine);
    s->max_prompt_tokens = cfg->max_prompt_tokens > 0 ? FR_MIN(cfg->max_prompt_tokens, ctx - 1)
                                                      : ctx - 1;

    raise_fd_limit();
    s->lfd = listen_socket(cfg, &s->port, err);
    if (s->lfd < 0) goto fail;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                         MHD_USE_NO_LISTEN_SOCKET;
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(cfg->max_connections + 64),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)FR_MAX(64 * 1024, 2 * cfg->max_header_bytes + 16384), MHD_OPTION_END);
    if (!s->d) {
        fr_err_set(err, "cannot start the HTTP layer (libmicrohttpd)");
        goto fail;
    }
    fr_guard_config gc = {.max_connections = cfg->max_connections,
                          .max_pending = cfg->max_pending_connections,
                          .head_timeout_s = cfg->header_timeout_s,
                          .limits = {.max_head_bytes = (size_t)cfg->max_header_bytes,
                                     .max_fields = 100,
                                     .max_body_bytes = cfg->max_body_bytes}};
    for (int k = 0; k < 3; k++) gc.reserved[k] = cfg->reserved_connections[k];
    gc.reserved[FR_GUARD_P2] = 0;
    fr_guard_hooks gh = {.cls = s, .classify = guard_classify, .refused = guard_refused,
                         .handoff = guard_handoff};
    s->guard = fr_guard_start(s->lfd, &gc, &gh, err);
    if (!s->guard) goto fail;
    s->lfd = -1; /* the guard's now */
    fr_guard_config_reserves(&gc);
    const fr_engine_config *ec = fr_engine_cfg(s->engine);
    fr_info("serving %s on %s:%d (%s): auth %s, KV %d blocks x %d tokens, step %d tokens, "
            "chunk %d, %d running max, context %d, prefix cache %s, meter %s",
            s->model_name, cfg->host, s->port, fr_engine_backend_name(s->engine),
            cfg->n_keys ? "on" : "off", ec->kv_blocks,
            ec->block_size, ec->step_tokens, ec->prefill_chunk, ec->max_running, ec->max_ctx,
            ec->prefix_cache ? "on" : "off", !s->meter ? "off" : ledger_path[0] ? ledger_path : "on, no ledger");
    fr_info("connections: %d slots (reserved: control %d, P0 %d, P1 %d), %d pending, head "
            "within %.1f s and %d bytes",
            gc.max_connections, gc.reserved[0], gc.reserved[1], gc.reserved[2], gc.max_pending,
            gc.head_timeout_s, cfg->max_header_bytes);
    return s;
fail:
    if (s->d) MHD_stop_daemon(s->d);
    if (s->lfd >= 0) close(s->lfd);
    fr_assist_free(s->assist);
    fr_vlm_free(s->vlm);
    fr_whisper_cuda_free(s->whisper_cuda);
    fr_whisper_free(s->whisper);
    fr_engine_free(s->engine);
    fr_meter_close(s->meter);
    free(s->tmpl_owned);
    fr_metrics_destroy(&s->metrics);
    free(s);
    return NULL;
}

int fr_server_port(const fr_server *s) { return s->port; }

static int in_flight(fr_server *s) { return atomic_load(&s->busy) + atomic_load(&s->stage_busy); }

void fr_server_shutdown(fr_server *s, double grace_s) {
    if (s->stopped) return;
    /* connections are still accepted while draining: /health and /ready answer (503
     * "draining"), new generation work gets 503 + Retry-After */
    atomic_store(&s->draining, true);
    fr_engine_close(s->engine);
    double t0 = fr_time_s();
    while (in_flight(s) > 0 && fr_time_s() - t0 < grace_s) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* grace over: OCR / ASR stages stop at their next check (a request that slipped past the
     * draining check is caught here too), the engine ends what it still runs */
    atomic_store(&s->cancel_all, true);
    int left = in_flight(s);
    if (left > 0) {
        fr_info("shutdown: grace period over, cancelling %d request(s)", left);
        fr_engine_cancel_all(s->engine, FR_END_SHUTDOWN);
        t0 = fr_time_s();
        /* 4.4 s: serve.c's watchdog ends the process at grace + 4.8 s whatever is left */
        while (in_flight(s) > 0 && fr_time_s() - t0 < 4.4) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (in_flight(s) > 0)
            fr_warn("shutdown: %d request(s) still running 4.4 s after the cancel", in_flight(s));
    }
    fr_guard_stop(s->guard); /* no new connections; what is pending gets 503 */
    MHD_stop_daemon(s->d);
    s->d = NULL;
    fr_guard_free(s->guard);
    s->guard = NULL;
    s->stopped = true;
}

void fr_server_free(fr_server *s) {
    if (!s) return;
    if (!s->stopped) fr_server_shutdown(s, 0);
    fr_assist_free(s->assist);
    fr_vlm_free(s->vlm);
    fr_whisper_cuda_free(s->whisper_cuda);
    fr_whisper_free(s->whisper);
    fr_engine_free(s->engine); /* ends what is left, closing their accounts */
    fr_lora_reg_free(s->loras); /* after the engine: its requests held adapters */
    fr_meter_close(s->meter);  /* then the last sample, the ledger rows, the threads */
    free(s->tmpl_owned);
    fr_metrics_destroy(&s->metrics);
    free(s);
}
