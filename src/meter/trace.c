/* trace.c — traceparent parsing, OTLP/JSON spans built with cJSON, the batching exporter. See
 * trace.h.
 *
 * OTLP/JSON encoding (OTLP spec, "JSON Protobuf Encoding"): traceId/spanId are lowercase hex
 * strings, 64-bit integers (times, intValue) are decimal strings, enums are numbers. cJSON
 * builds and prints the documents (escaping included); strings are made valid UTF-8 first.
 * The exporter thread owns the curl handle; a failed POST (connection refused, timeout, non-2xx)
 * drops that batch and is logged once per run of failures, so a dead collector costs nothing but
 * the traces.
 */
#include "meter/trace.h"

#include <cjson/cJSON.h>
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

/* ---- OTLP/JSON through cJSON ---------------------------------------------------------------- */

/* A string value as cJSON will print it: JSON text must be UTF-8, so a string that is not valid
 * UTF-8 has each byte >= 0x80 replaced by U+FFFD (cJSON escapes the control characters). */
static cJSON *utf8_string(const char *s) {
    if (!s) s = "";
    size_t n = strlen(s);
    if (fr_utf8_valid(s, n)) return cJSON_CreateString(s);
    fr_buf b = {0};
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) fr_buf_puts(&b, "\xef\xbf\xbd");
        else fr_buf_append(&b, p, 1);
    }
    cJSON *v = cJSON_CreateString(fr_buf_cstr(&b));
    fr_buf_free(&b);
    return v;
}

#define OOM() fr_panic(__FILE__, __LINE__, "cJSON: out of memory")

static void add(cJSON *obj, const char *key, cJSON *v) {
    if (!v || !cJSON_AddItemToObject(obj, key, v)) OOM();
}

static cJSON *hex_string(const uint8_t *b, size_t n) {
    char h[33];
    fr_meter_hex(b, n, h);
    return cJSON_CreateString(h);
}

/* Unix seconds as the decimal string of nanoseconds OTLP/JSON wants for a fixed64. */
static cJSON *nanos(double t) {
    if (!(t > 0)) t = 0;
    unsigned long long s = (unsigned long long)t;
    unsigned long long ns = (unsigned long long)llround((t - (double)s) * 1e9);
    if (ns >= 1000000000ULL) { s++; ns -= 1000000000ULL; }
    char d[48];
    snprintf(d, sizeof d, "%llu%09llu", s, ns);
    return cJSON_CreateString(d);
}

cJSON *fr_otlp_span_new(const uint8_t trace_id[16], const uint8_t span_id[8],
                        const uint8_t *parent_id, const char *name, int kind, double t0,
                        double t1) {
    cJSON *sp = cJSON_CreateObject();
    if (!sp) OOM();
    add(sp, "traceId", hex_string(trace_id, 16));
    add(sp, "spanId", hex_string(span_id, 8));
    if (parent_id) add(sp, "parentSpanId", hex_string(parent_id, 8));
    add(sp, "name", utf8_string(name));
    add(sp, "kind", cJSON_CreateNumber(kind));
    add(sp, "startTimeUnixNano", nanos(t0));
    add(sp, "endTimeUnixNano", nanos(t1 < t0 ? t0 : t1));
    add(sp, "attributes", cJSON_CreateArray());
    return sp;
}

/* Appends {"key": key, "value": {<type>: v}} to the span's attributes (v is owned). */
static void attr(cJSON *span, const char *key, const char *type, cJSON *v) {
    cJSON *a = cJSON_CreateObject(), *val = cJSON_CreateObject();
    if (!a || !val) OOM();
    add(a, "key", utf8_string(key));
    add(val, type, v);
    add(a, "value", val);
    if (!cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(span, "attributes"), a))
        fr_panic(__FILE__, __LINE__, "cJSON: a span without attributes");
}

void fr_otlp_attr_str(cJSON *span, const char *key, const char *v) {
    char *m = fr_mask_dup(v ? v : "");
    attr(span, key, "stringValue", utf8_string(m));
    free(m);
}

void fr_otlp_attr_int(cJSON *span, const char *key, long long v) {
    char d[24];
    snprintf(d, sizeof d, "%lld", v); /* int64 is a decimal string in OTLP/JSON */
    attr(span, key, "intValue", cJSON_CreateString(d));
}

void fr_otlp_attr_dbl(cJSON *span, const char *key, double v) {
    attr(span, key, "doubleValue", cJSON_CreateNumber(isfinite(v) ? v : 0));
}

void fr_otlp_attr_bool(cJSON *span, const char *key, bool v) {
    attr(span, key, "boolValue", cJSON_CreateBool(v));
}

void fr_otlp_span_end(cJSON *span, int status, const char *message) {
    cJSON *st = cJSON_CreateObject();
    if (!st) OOM();
    add(st, "code", cJSON_CreateNumber(status));
    if (message && *message) {
        char *m = fr_mask_dup(message);
        add(st, "message", utf8_string(m));
        free(m);
    }
    add(span, "status", st);
}

cJSON *fr_otlp_wrap(const char *service, cJSON *spans) {
    cJSON *root = cJSON_CreateObject(), *rs = cJSON_CreateArray(), *r = cJSON_CreateObject();
    cJSON *res = cJSON_CreateObject(), *rattrs = cJSON_CreateArray(), *sa = cJSON_CreateObject();
    cJSON *sv = cJSON_CreateObject(), *ss = cJSON_CreateArray(), *s1 = cJSON_CreateObject();
    cJSON *scope = cJSON_CreateObject();
    if (!root || !rs || !r || !res || !rattrs || !sa || !sv || !ss || !s1 || !scope)
        OOM();
    add(sa, "key", cJSON_CreateString("service.name"));
    add(sv, "stringValue", utf8_string(service && *service ? service : "frugal"));
    add(sa, "value", sv);
    cJSON_AddItemToArray(rattrs, sa);
    add(res, "attributes", rattrs);
    add(r, "resource", res);
    add(scope, "name", cJSON_CreateString("frugal.meter"));
    add(s1, "scope", scope);
    add(s1, "spans", spans);
    cJSON_AddItemToArray(ss, s1);
    add(r, "scopeSpans", ss);
    cJSON_AddItemToArray(rs, r);
    add(root, "resourceSpans", rs);
    return root;
}

/* ---- exporter -------------------------------------------------------------------------------- */

typedef struct titem {
    struct titem *next; /* FIFO link */
    cJSON *spans;       /* the trace: an array of span objects (owned) */
} titem;

static void titem_free(titem *t) {
    cJSON_Delete(t->spans);
    free(t);
}

/* Appends the unformatted JSON text of root to b and frees root. */
static void print_to(fr_buf *b, cJSON *root) {
    char *txt = cJSON_PrintUnformatted(root);
    if (!txt) OOM();
    fr_buf_puts(b, txt);
    cJSON_free(txt);
    cJSON_Delete(root);
}

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
    fr_buf body = {0}, line = {0};
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
                cJSON *spans = h ? cJSON_Duplicate(t->spans, true) : t->spans;
                if (!h) t->spans = NULL;
                if (!spans) OOM();
                print_to(&line, fr_otlp_wrap(o->service, spans));
                fr_buf_puts(&line, "\n");
                fwrite(line.data, 1, line.len, o->file);
            }
            fflush(o->file);
        }
        if (h) {
            cJSON *all = cJSON_CreateArray(); /* every span of the batch, in order */
            if (!all) OOM();
            for (titem *t = batch; t; t = t->next)
                while (cJSON_GetArraySize(t->spans) > 0)
                    cJSON_AddItemToArray(all, cJSON_DetachItemFromArray(t->spans, 0));
            body.len = 0;
            print_to(&body, fr_otlp_wrap(o->service, all));
            if (post(o, h, body.data, body.len)) ok = n;
            else bad = n;
        } else {
            ok = n;
        }
        while (batch) {
            titem *nx = batch->next;
            titem_free(batch);
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

bool fr_otlp_put(fr_otlp *o, cJSON *spans) {
    if (!o) {
        cJSON_Delete(spans);
        return false;
    }
    titem *t = fr_xmalloc(sizeof *t);
    t->next = NULL;
    t->spans = spans;
    pthread_mutex_lock(&o->mu);
    if (o->qlen >= o->qcap || o->stop) {
        o->dropped++;
        pthread_mutex_unlock(&o->mu);
        titem_free(t);
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
        titem_free(t);
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
