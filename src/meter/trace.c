/* trace.c — traceparent parsing, OTLP/JSON span writing, the batching exporter. See trace.h.
 *
 * OTLP/JSON encoding (OTLP spec, "JSON Protobuf Encoding"): traceId/spanId are lowercase hex
 * strings, 64-bit integers (times, intValue) are decimal strings, enums are numbers.
 * The exporter thread owns the curl handle; a failed POST (connection refused, timeout, non-2xx)
 * drops that batch and is logged once per run of failures, so a dead collector costs nothing but
 * the traces.
 */
#include "meter/trace.h"

#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mask.h"

/* ---- traceparent ----------------------------------------------------------------------------- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* uppercase is invalid per the spec */
}

static int hexbytes(const char *s, uint8_t *out, size_t n) {
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) {
        int h = hexval(s[2 * i]), l = hexval(s[2 * i + 1]);
        if (h < 0 || l < 0) return -1;
        out[i] = (uint8_t)(h << 4 | l);
        nonzero |= out[i] != 0;
    }
    return nonzero ? 0 : 1;
}

int fr_traceparent_parse(const char *s, size_t n, fr_traceparent *out) {
    if (!s) return -1;
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n < 55) return -1;
    uint8_t ver;
    if (hexbytes(s, &ver, 1) < 0) return -1;
    if (ver == 0xff) return -1;
    if (ver == 0 && n != 55) return -1;
    if (ver != 0 && n > 55 && s[55] != '-') return -1;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-') return -1;
    fr_traceparent t;
    t.version = ver;
    if (hexbytes(s + 3, t.trace_id, 16)) return -1;
    if (hexbytes(s + 36, t.parent_id, 8)) return -1;
    if (hexbytes(s + 53, &t.flags, 1) < 0) return -1;
    *out = t;
    return 0;
}

void fr_meter_hex(const uint8_t *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

void fr_traceparent_format(const uint8_t trace_id[16], const uint8_t span_id[8], uint8_t flags,
                           char out[56]) {
    char t[33], p[17], f[3];
    fr_meter_hex(trace_id, 16, t);
    fr_meter_hex(span_id, 8, p);
    fr_meter_hex(&flags, 1, f);
    snprintf(out, 56, "00-%s-%s-%s", t, p, f);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

void fr_meter_json_str(fr_buf *b, const char *s) {
    if (!s) s = "";
    bool utf8 = fr_utf8_valid(s, strlen(s)); /* else bytes >= 0x80 become U+FFFD */
    fr_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c >= 0x80 && !utf8) {
            fr_buf_puts(b, "\\ufffd");
            continue;
        }
        if (c == '"') fr_buf_puts(b, "\\\"");
        else if (c == '\\') fr_buf_puts(b, "\\\\");
        else if (c == '\n') fr_buf_puts(b, "\\n");
        else if (c == '\r') fr_buf_puts(b, "\\r");
        else if (c == '\t') fr_buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) fr_buf_printf(b, "\\u%04x", c);
        else fr_buf_append(b, p, 1);
    }
    fr_buf_puts(b, "\"");
}

static void nanos(fr_buf *b, double t) {
    if (!(t > 0)) t = 0;
    unsigned long long s = (unsigned long long)t;
    unsigned long long ns = (unsigned long long)llround((t - (double)s) * 1e9);
    if (ns >= 1000000000ULL) { s++; ns -= 1000000000ULL; }
    fr_buf_printf(b, "\"%llu%09llu\"", s, ns);
}

void fr_otlp_span_begin(fr_buf *b, const uint8_t trace_id[16], const uint8_t span_id[8],
                        const uint8_t *parent_id, const char *name, int kind, double t0, double t1) {
    char t[33], s[17], p[17];
    fr_meter_hex(trace_id, 16, t);
    fr_meter_hex(span_id, 8, s);
    fr_buf_printf(b, "{\"traceId\":\"%s\",\"spanId\":\"%s\",", t, s);
    if (parent_id) {
        fr_meter_hex(parent_id, 8, p);
        fr_buf_printf(b, "\"parentSpanId\":\"%s\",", p);
    }
    fr_buf_puts(b, "\"name\":");
    fr_meter_json_str(b, name);
    fr_buf_printf(b, ",\"kind\":%d,\"startTimeUnixNano\":", kind);
    nanos(b, t0);
    fr_buf_puts(b, ",\"endTimeUnixNano\":");
    nanos(b, t1 < t0 ? t0 : t1);
    fr_buf_puts(b, ",\"attributes\":[");
}

static void attr_key(fr_buf *b, const char *key) {
    if (b->len && b->data[b->len - 1] != '[') fr_buf_puts(b, ",");
    fr_buf_puts(b, "{\"key\":");
    fr_meter_json_str(b, key);
    fr_buf_puts(b, ",\"value\":{");
}

void fr_otlp_attr_str(fr_buf *b, const char *key, const char *v) {
    attr_key(b, key);
    fr_buf_puts(b, "\"stringValue\":");
    char *m = fr_mask_dup(v ? v : "");
    fr_meter_json_str(b, m);
    free(m);
    fr_buf_puts(b, "}}");
}

void fr_otlp_attr_int(fr_buf *b, const char *key, long long v) {
    attr_key(b, key);
    fr_buf_printf(b, "\"intValue\":\"%lld\"}}", v);
}

void fr_otlp_attr_dbl(fr_buf *b, const char *key, double v) {
    attr_key(b, key);
    if (!isfinite(v)) v = 0;
    fr_buf_printf(b, "\"doubleValue\":%.17g}}", v);
}

void fr_otlp_attr_bool(fr_buf *b, const char *key, bool v) {
    attr_key(b, key);
    fr_buf_printf(b, "\"boolValue\":%s}}", v ? "true" : "false");
}

void fr_otlp_span_end(fr_buf *b, int status, const char *message) {
    fr_buf_printf(b, "],\"status\":{\"code\":%d", status);
    if (message && *message) {
        fr_buf_puts(b, ",\"message\":");
        char *m = fr_mask_dup(message);
        fr_meter_json_str(b, m);
        free(m);
    }
    fr_buf_puts(b, "}}");
}

void fr_otlp_wrap(fr_buf *out, const char *service, const char *spans, size_t len) {
    fr_buf_puts(out, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                     "\"value\":{\"stringValue\":");
    fr_meter_json_str(out, service ? service : "frugal");
    fr_buf_puts(out, "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"frugal.meter\"},\"spans\":[");
    fr_buf_append(out, spans, len);
    fr_buf_puts(out, "]}]}]}");
}

/* ---- exporter -------------------------------------------------------------------------------- */

typedef struct titem {
    struct titem *next; /* FIFO link */
    size_t len;         /* bytes of spans */
    char spans[];       /* comma-separated span objects */
} titem;

struct fr_otlp {
    char url[600];         /* full …/v1/traces URL or "" */
    FILE *file;            /* JSON-lines sink or NULL */
    char service[64];      /* service.name */
    int qcap, batch;       /* bounds */
    double flush_s, timeout_ms; /* timings */
    pthread_t thr;         /* exporter thread */
    pthread_mutex_t mu;    /* guards below */
    pthread_cond_t cv, cv_done; /* work / progress */
    titem *head, *tail;    /* queue */
    int qlen;              /* queued traces */
    bool stop, flush_req;  /* close / flush requested */
    unsigned long long enq, done; /* traces queued / handled */
    long exported, dropped;/* counters */
    bool failing;          /* last POST failed (log once per run of failures) */
};

static size_t discard(char *p, size_t s, size_t n, void *u) {
    (void)p;
    (void)u;
    return s * n;
}

static bool post(fr_otlp *o, CURL *h, const char *body, size_t len) {
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, o->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)o->timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdr);
    bool ok = rc == CURLE_OK && code >= 200 && code < 300;
    if (!ok && !o->failing)
        fr_warn("trace: export to %s failed (%s, HTTP %ld); dropping batches until it recovers",
                o->url, rc == CURLE_OK ? "bad status" : curl_easy_strerror(rc), code);
    if (ok && o->failing) fr_info("trace: export to %s recovered", o->url);
    o->failing = !ok;
    return ok;
}

static void *exporter(void *arg) {
    fr_otlp *o = arg;
    CURL *h = o->url[0] ? curl_easy_init() : NULL;
    fr_buf body = {0}, line = {0}, joined = {0};
    pthread_mutex_lock(&o->mu);
    for (;;) {
        /* wait for a full batch, a flush, a stop, or the oldest trace to be flush_s old */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        double w = o->flush_s;
        dl.tv_sec += (time_t)w;
        dl.tv_nsec += (long)((w - floor(w)) * 1e9);
        if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
        while (!o->stop && !o->flush_req && o->qlen < o->batch) {
            if (pthread_cond_timedwait(&o->cv, &o->mu, &dl)) break; /* timed out */
        }
        if (!o->head) {
            o->flush_req = false;
            pthread_cond_broadcast(&o->cv_done);
            if (o->stop) break;
            continue;
        }
        titem *batch = o->head, *last = o->head;
        int n = 1;
        while (n < o->batch && last->next) { last = last->next; n++; }
        o->head = last->next;
        if (!o->head) o->tail = NULL;
        last->next = NULL;
        o->qlen -= n;
        pthread_mutex_unlock(&o->mu);

        long ok = 0, bad = 0;
        if (o->file) {
            for (titem *t = batch; t; t = t->next) {
                line.len = 0;
                fr_otlp_wrap(&line, o->service, t->spans, t->len);
                fr_buf_puts(&line, "\n");
                fwrite(line.data, 1, line.len, o->file);
            }
            fflush(o->file);
        }
        if (h) {
            joined.len = 0;
            for (titem *t = batch; t; t = t->next) {
                if (joined.len) fr_buf_puts(&joined, ",");
                fr_buf_append(&joined, t->spans, t->len);
            }
            body.len = 0;
            fr_otlp_wrap(&body, o->service, joined.data ? joined.data : "", joined.len);
            if (post(o, h, body.data, body.len)) ok = n;
            else bad = n;
        } else {
            ok = n;
        }
        while (batch) {
            titem *nx = batch->next;
            free(batch);
            batch = nx;
        }
        pthread_mutex_lock(&o->mu);
        o->exported += ok;
        o->dropped += bad;
        o->done += (unsigned long long)n;
        pthread_cond_broadcast(&o->cv_done);
    }
    pthread_mutex_unlock(&o->mu);
    if (h) curl_easy_cleanup(h);
    fr_buf_free(&body);
    fr_buf_free(&line);
    fr_buf_free(&joined);
    return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

fr_otlp *fr_otlp_open(const fr_otlp_config *c, fr_err *err) {
    bool has_url = c->url && c->url[0], has_file = c->file && c->file[0];
    if (!has_url && !has_file) return NULL;
    fr_otlp *o = fr_xcalloc(1, sizeof *o);
    if (has_url) {
        size_t n = strlen(c->url);
        while (n && c->url[n - 1] == '/') n--;
        const char *suffix = "/v1/traces";
        bool has_path = n >= strlen(suffix) && !strncmp(c->url + n - strlen(suffix), suffix, strlen(suffix));
        if (n + strlen(suffix) + 1 > sizeof o->url) {
            fr_err_set(err, "trace.otlp_url too long");
            free(o);
            return NULL;
        }
        snprintf(o->url, sizeof o->url, "%.*s%s", (int)n, c->url, has_path ? "" : suffix);
        pthread_once(&curl_once, curl_init);
    }
    if (has_file) {
        o->file = fopen(c->file, "a");
        if (!o->file) {
            fr_err_set(err, "trace file %s: cannot open for appending", c->file);
            free(o);
            return NULL;
        }
    }
    snprintf(o->service, sizeof o->service, "%s", c->service && c->service[0] ? c->service : "frugal");
    o->qcap = c->queue > 0 ? c->queue : 1024;
    o->batch = c->batch > 0 ? c->batch : 64;
    o->flush_s = (c->flush_ms > 0 ? c->flush_ms : 1000) / 1000.0;
    o->timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : 2000;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    pthread_cond_init(&o->cv_done, NULL);
    if (pthread_create(&o->thr, NULL, exporter, o)) {
        fr_err_set(err, "trace: cannot start the exporter thread");
        if (o->file) fclose(o->file);
        free(o);
        return NULL;
    }
    return o;
}

bool fr_otlp_put(fr_otlp *o, const char *spans, size_t len) {
    if (!o) return false;
    titem *t = fr_xmalloc(sizeof *t + len + 1);
    t->next = NULL;
    t->len = len;
    memcpy(t->spans, spans, len);
    t->spans[len] = 0;
    pthread_mutex_lock(&o->mu);
    if (o->qlen >= o->qcap || o->stop) {
        o->dropped++;
        pthread_mutex_unlock(&o->mu);
        free(t);
        return false;
    }
    if (o->tail) o->tail->next = t;
    else o->head = t;
    o->tail = t;
    o->qlen++;
    o->enq++;
    if (o->qlen >= o->batch) pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return true;
}

void fr_otlp_flush(fr_otlp *o) {
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    unsigned long long target = o->enq;
    while (o->done < target) {
        o->flush_req = true;
        pthread_cond_signal(&o->cv);
        pthread_cond_wait(&o->cv_done, &o->mu);
    }
    pthread_mutex_unlock(&o->mu);
}

void fr_otlp_close(fr_otlp *o) {
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    o->stop = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thr, NULL);
    for (titem *t = o->head; t;) {
        titem *nx = t->next;
        free(t);
        t = nx;
    }
    if (o->file) fclose(o->file);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    pthread_cond_destroy(&o->cv_done);
    free(o);
}

long fr_otlp_exported(fr_otlp *o) {
    if (!o) return 0;
    pthread_mutex_lock(&o->mu);
    long v = o->exported;
    pthread_mutex_unlock(&o->mu);
    return v;
}

long fr_otlp_dropped(fr_otlp *o) {
    if (!o) return 0;
    pthread_mutex_lock(&o->mu);
    long v = o->dropped;
    pthread_mutex_unlock(&o->mu);
    return v;
}
