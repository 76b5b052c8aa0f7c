/* test_meter_export.c — what leaves the meter: traceparent parsing and continuation, OTLP/HTTP
 * JSON to a collector (a local stub) and to a JSON-lines file, a dead collector that costs a
 * request nothing, the Prometheus exposition (checked by `promtool check metrics`), the Grafana
 * dashboard, the configuration parser, the cost model and A/B assignment. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "meter/ledger.h"
#include "meter/trace.h"
#include "meter_util.h"
#include "t.h"

static const char *TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(traceparent_valid_and_invalid) {
    fr_traceparent t;
    CHECK_EQ_INT(fr_traceparent_parse(TP, strlen(TP), &t), 0);
    CHECK_EQ_INT(t.version, 0);
    CHECK_EQ_INT(t.trace_id[0], 0x4b);
    CHECK_EQ_INT(t.parent_id[7], 0xb7);
    CHECK_EQ_INT(t.flags, 1);
    char out[56];
    fr_traceparent_format(t.trace_id, t.parent_id, t.flags, out);
    CHECK_STR(out, TP);
    const char *ws = "  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\t";
    CHECK_EQ_INT(fr_traceparent_parse(ws, strlen(ws), &t), 0);
    CHECK_EQ_INT(t.flags, 0);
    const char *future = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-whatever";
    CHECK_EQ_INT(fr_traceparent_parse(future, strlen(future), &t), 0);
    CHECK_EQ_INT(t.version, 0xcc);
    static const char *bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* zero parent */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* v00 with more */
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  /* no '-' after */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z",
        "0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) CHECK_EQ_INT(fr_traceparent_parse(bad[i], strlen(bad[i]), &t), -1);
    CHECK_EQ_INT(fr_traceparent_parse(NULL, 0, &t), -1);
}

/* The value object of attribute `key` in a span (NULL when absent). */
static cJSON *attr(cJSON *span, const char *key) {
    cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(span, "attributes")) {
        cJSON *k = cJSON_GetObjectItem(a, "key");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) return cJSON_GetObjectItem(a, "value");
    }
    return NULL;
}

/* One OTLP/JSON ExportTraceServiceRequest built by the span helpers and printed by cJSON parses
 * back with every field where the OTLP JSON encoding puts it, with the JSON types it requires
 * (ids hex, int64 and times as decimal strings, doubles as numbers), and strings that were not
 * valid UTF-8 or held quotes and control characters come back as valid JSON strings. */
TEST(otlp_document_parses_back) {
    static const uint8_t tid[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                    0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
    static const uint8_t sid[8] = {0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    static const uint8_t cid[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cJSON *spans = cJSON_CreateArray();
    cJSON *root = fr_otlp_span_new(tid, sid, NULL, "request", 2, 1700000000.25, 1700000001.5);
    fr_otlp_attr_str(root, "frugal.route", "a \"q\"\n\x01\x7f caf\xc3\xa9");
    fr_otlp_attr_str(root, "frugal.bad", "bad\xff");
    fr_otlp_attr_int(root, "http.response.status_code", -42);
    fr_otlp_attr_dbl(root, "frugal.joules", 12.5);
    fr_otlp_attr_dbl(root, "frugal.nan", NAN);
    fr_otlp_attr_bool(root, "frugal.energy.estimated", true);
    fr_otlp_span_end(root, 2, "boom");
    cJSON_AddItemToArray(spans, root);
    cJSON *child = fr_otlp_span_new(tid, cid, sid, "ocr\xff", 1, 5, 4); /* end before start: clamped */
    fr_otlp_span_end(child, 0, NULL);
    cJSON_AddItemToArray(spans, child);
    cJSON *doc = fr_otlp_wrap("svc", spans);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    CHECK(text && fr_utf8_valid(text, strlen(text)));
    for (const char *p = text; p && *p; p++) CHECK((unsigned char)*p >= 0x20);
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECK(j != NULL);
    if (!j) return;
    cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "resourceSpans"), 0);
    cJSON *ra = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rs, "resource"), "attributes"), 0);
    CHECK_STR(cJSON_GetObjectItem(ra, "key")->valuestring, "service.name");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(ra, "value"), "stringValue")->valuestring, "svc");
    cJSON *ss = cJSON_GetArrayItem(cJSON_GetObjectItem(rs, "scopeSpans"), 0);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(ss, "scope"), "name")->valuestring, "frugal.meter");
    cJSON *sp = cJSON_GetObjectItem(ss, "spans");
    CHECK_EQ_INT(cJSON_GetArraySize(sp), 2);
    cJSON *r = cJSON_GetArrayItem(sp, 0), *c = cJSON_GetArrayItem(sp, 1);
    CHECK_STR(cJSON_GetObjectItem(r, "traceId")->valuestring, "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK_STR(cJSON_GetObjectItem(r, "spanId")->valuestring, "00f067aa0ba902b7");
    CHECK(cJSON_GetObjectItem(r, "parentSpanId") == NULL);
    CHECK_STR(cJSON_GetObjectItem(r, "name")->valuestring, "request");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r, "kind")) && cJSON_GetObjectItem(r, "kind")->valueint == 2);
    CHECK_STR(cJSON_GetObjectItem(r, "startTimeUnixNano")->valuestring, "1700000000250000000");
    CHECK_STR(cJSON_GetObjectItem(r, "endTimeUnixNano")->valuestring, "1700000001500000000");
    CHECK_STR(cJSON_GetObjectItem(attr(r, "frugal.route"), "stringValue")->valuestring,
              "a \"q\"\n\x01\x7f caf\xc3\xa9");
    const char *bad = cJSON_GetObjectItem(attr(r, "frugal.bad"), "stringValue")->valuestring;
    CHECK(!strncmp(bad, "bad", 3) && fr_utf8_valid(bad, strlen(bad))); /* the masker's choice */
    cJSON *iv = cJSON_GetObjectItem(attr(r, "http.response.status_code"), "intValue");
    CHECK(cJSON_IsString(iv) && !strcmp(iv->valuestring, "-42"));
    cJSON *dv = cJSON_GetObjectItem(attr(r, "frugal.joules"), "doubleValue");
    CHECK(cJSON_IsNumber(dv) && dv->valuedouble == 12.5);
    CHECK(cJSON_GetObjectItem(attr(r, "frugal.nan"), "doubleValue")->valuedouble == 0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(attr(r, "frugal.energy.estimated"), "boolValue")));
    cJSON *st = cJSON_GetObjectItem(r, "status");
    CHECK_EQ_INT(cJSON_GetObjectItem(st, "code")->valueint, 2);
    CHECK_STR(cJSON_GetObjectItem(st, "message")->valuestring, "boom");
    CHECK_STR(cJSON_GetObjectItem(c, "name")->valuestring, "ocr\xef\xbf\xbd"); /* not UTF-8: U+FFFD */
    CHECK_STR(cJSON_GetObjectItem(c, "parentSpanId")->valuestring, "00f067aa0ba902b7");
    CHECK_STR(cJSON_GetObjectItem(c, "endTimeUnixNano")->valuestring, "5000000000");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(c, "attributes")), 0);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "status"), "message") == NULL);
    cJSON_Delete(j);
}

/* Random mutations of valid headers: never a crash, and whatever parses round-trips. */
TEST(traceparent_mutation_fuzz) {
    unsigned s = 12345;
    char buf[80];
    int valid = 0;
    for (int it = 0; it < 200000; it++) {
        size_t n = strlen(TP);
        memcpy(buf, TP, n + 1);
        int muts = 1 + (int)((s = s * 1103515245u + 12345u) >> 29);
        for (int k = 0; k < muts; k++) {
            s = s * 1103515245u + 12345u;
            size_t pos = (s >> 8) % (n + 1);
            int op = (int)((s >> 4) & 3);
            char ch = "0123456789abcdefABZ- \t\x00\xff"[(s >> 16) % 24];
            if (op == 0 && pos < n) buf[pos] = ch;
            else if (op == 1 && n < sizeof buf - 2) { memmove(buf + pos + 1, buf + pos, n - pos + 1); buf[pos] = ch; n++; }
            else if (op == 2 && n > 0 && pos < n) { memmove(buf + pos, buf + pos + 1, n - pos); n--; }
        }
        fr_traceparent t;
        if (fr_traceparent_parse(buf, n, &t) == 0) {
            valid++;
            CHECK(t.version != 0xff);
            if (t.version == 0) {
                char out[56];
                fr_traceparent_format(t.trace_id, t.parent_id, t.flags, out);
                size_t b = 0;
                while (buf[b] == ' ' || buf[b] == '\t') b++;
                CHECK(!memcmp(out, buf + b, 55));
            }
        }
    }
    CHECK(valid > 0);
}

/* ---- a stub OTLP collector ---- */

typedef struct collector {
    int fd;                 /* listening socket */
    int port;               /* its port */
    _Atomic int stop;       /* ask the thread to stop */
    pthread_mutex_t mu;     /* guards below */
    int posts;              /* requests received */
    int spans, roots;       /* spans / root spans received */
    char path[64];          /* last request path */
    char ctype[64];         /* last content type */
    char service[64];       /* service.name seen */
} collector;

static void handle(collector *c, int fd) {
    char *buf = malloc(1 << 22);
    size_t n = 0;
    long clen = -1;
    char *body = NULL;
    while (n < (1 << 22) - 1) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) break;
        ssize_t k = read(fd, buf + n, (1 << 22) - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        buf[n] = 0;
        if (!body && (body = strstr(buf, "\r\n\r\n"))) {
            body += 4;
            char *cl = strcasestr(buf, "Content-Length:");
            clen = cl ? atol(cl + 15) : 0;
        }
        if (body && (long)(n - (size_t)(body - buf)) >= clen) break;
    }
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    if (write(fd, resp, strlen(resp)) < 0) {}
    if (body) {
        pthread_mutex_lock(&c->mu);
        c->posts++;
        sscanf(buf, "POST %63s", c->path);
        char *ct = strcasestr(buf, "Content-Type:");
        if (ct) sscanf(ct + 13, " %63[^\r\n]", c->ctype);
        cJSON *j = cJSON_Parse(body);
        cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "resourceSpans"), 0);
        cJSON *attr = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rs, "resource"), "attributes"), 0);
        cJSON *sv = cJSON_GetObjectItem(cJSON_GetObjectItem(attr, "value"), "stringValue");
        if (cJSON_IsString(sv)) snprintf(c->service, sizeof c->service, "%s", sv->valuestring);
        cJSON *spans = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rs, "scopeSpans"), 0), "spans");
        cJSON *sp;
        cJSON_ArrayForEach(sp, spans) {
            c->spans++;
            cJSON *nm = cJSON_GetObjectItem(sp, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "request")) c->roots++;
        }
        cJSON_Delete(j);
        pthread_mutex_unlock(&c->mu);
    }
    free(buf);
}

static void *collector_main(void *arg) {
    collector *c = arg;
    while (!c->stop) {
        struct pollfd p = {c->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(c->fd, NULL, NULL);
        if (fd < 0) continue;
        handle(c, fd);
        close(fd);
    }
    return NULL;
}

static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 16)) return -1;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    *port = ntohs(a.sin_port);
    return fd;
}

static void run_requests(fr_meter *m, int n, const char *traceparent) {
    for (int i = 0; i < n; i++) {
        fr_meter_req_info in = {0};
        in.route = "chat";
        in.tier = "interactive";
        in.modality = "text";
        in.traceparent = traceparent;
        fr_meter_req *r = fr_meter_request_begin(m, &in);
        fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_NLU, FR_METER_DEV_CPU);
        fr_meter_step_end(m, s);
        fr_meter_share sh = {r, 12, FR_MSTAGE_PREFILL};
        s = fr_meter_step_begin(m, fr_meter_dev_gpu(0), &sh, 1);
        fr_meter_step_end(m, s);
        fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 12, 4, 0.01, -1};
        fr_meter_request_end(m, r, &res, NULL);
    }
}

TEST(otlp_http_export_batches_to_a_collector) {
    collector c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    c.fd = listen_any(&c.port);
    CHECK(c.fd >= 0);
    pthread_t th;
    pthread_create(&th, NULL, collector_main, &c);
    const char *dir = mu_tmpdir();
    fr_meter_config cfg;
    mu_config(&cfg, dir, "count 1\nrate 0 200\n");
    cfg.clock = NULL;
    cfg.sample_ms = 10;
    snprintf(cfg.otlp_url, sizeof cfg.otlp_url, "http://127.0.0.1:%d/", c.port);
    cfg.trace_batch = 4;
    cfg.trace_flush_ms = 50;
    snprintf(cfg.service_name, sizeof cfg.service_name, "frugal-test");
    fr_err err;
    fr_meter *m = fr_meter_open(&cfg, &err);
    CHECK(m != NULL);
    if (m) {
        run_requests(m, 10, NULL);
        fr_meter_flush(m);
        fr_meter_totals t;
        fr_meter_get_totals(m, &t);
        CHECK_EQ_INT(t.traces_exported, 10);
        CHECK_EQ_INT(t.traces_dropped, 0);
        fr_meter_close(m);
    }
    c.stop = 1;
    pthread_join(th, NULL);
    close(c.fd);
    CHECK_EQ_INT(c.roots, 10);
    CHECK_EQ_INT(c.spans, 30); /* request + nlu + prefill */
    CHECK(c.posts >= 3);       /* batches of at most 4 */
    CHECK_STR(c.path, "/v1/traces");
    CHECK_STR(c.ctype, "application/json");
    CHECK_STR(c.service, "frugal-test");
}

TEST(dead_collector_never_blocks_a_request) {
    int port = 0;
    int fd = listen_any(&port);
    close(fd); /* nothing listens there now */
    const char *dir = mu_tmpdir();
    fr_meter_config cfg;
    mu_config(&cfg, dir, "count 1\nrate 0 200\n");
    cfg.clock = NULL;
    cfg.sample_ms = 10;
    snprintf(cfg.otlp_url, sizeof cfg.otlp_url, "http://127.0.0.1:%d", port);
    cfg.trace_batch = 2;
    cfg.trace_flush_ms = 20;
    cfg.trace_timeout_ms = 1000; /* a blocking export would cost a request >= 1 s */
    fr_err err;
    fr_meter *m = fr_meter_open(&cfg, &err);
    CHECK(m != NULL);
    if (!m) return;
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        double t0 = fr_time_s();
        run_requests(m, 1, NULL);
        double dt = fr_time_s() - t0;
        if (dt > worst) worst = dt;
    }
    CHECK(worst < 0.25);
    fr_meter_flush(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK_EQ_INT(t.traces_exported, 0);
    CHECK_EQ_INT(t.traces_dropped, 20);
    fr_meter_close(m);
}

TEST(jsonl_traces_continue_an_incoming_traceparent) {
    const char *dir = mu_tmpdir();
    fr_meter_config cfg;
    mu_config(&cfg, dir, "count 1\nenergy 0 0 10000 20000\n");
    char path[400];
    snprintf(path, sizeof path, "%s/traces.jsonl", dir);
    snprintf(cfg.trace_file, sizeof cfg.trace_file, "%s", path);
    cfg.cpu_watts_per_core = 0;
    fr_err err;
    fr_meter *m = fr_meter_open(&cfg, &err);
    fr_meter_req_info in = {0};
    in.id = "tp-1";
    in.route = "support.card";
    in.tier = "batch";
    in.modality = "image";
    in.traceparent = TP;
    fr_meter_req *r = fr_meter_request_begin(m, &in);
    char out[56];
    fr_meter_request_traceparent(r, out);
    CHECK(!strncmp(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36));
    CHECK(strncmp(out + 36, "00f067aa0ba902b7", 16) != 0); /* our own span id */
    CHECK(!strcmp(out + 52, "-01"));
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_OCR, fr_meter_dev_gpu(0));
    mu_now = 1;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    fr_meter_req_result res = {FR_REQ_FAILED, 500, "boom", 0, 0, -1, -1};
    fr_meter_request_end(m, r, &res, NULL);
    fr_meter_req_info in2 = {0};
    in2.traceparent = "garbage";
    fr_meter_req *r2 = fr_meter_request_begin(m, &in2);
    fr_meter_request_end(m, r2, NULL, NULL);
    mu_now = 2;
    fr_meter_flush(m);
    fr_meter_close(m);
    size_t n;
    char *text = fr_read_file(path, 1 << 20, &n, NULL);
    CHECK(text != NULL);
    if (!text) return;
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        lines++;
        cJSON *j = cJSON_Parse(line);
        CHECK(j != NULL);
        cJSON *spans = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
                                                                  cJSON_GetObjectItem(j, "resourceSpans"), 0),
                                                              "scopeSpans"), 0),
                                           "spans");
        cJSON *root = cJSON_GetArrayItem(spans, 0);
        cJSON *id = cJSON_GetObjectItem(attr(root, "frugal.request.id"), "stringValue");
        if (id && !strcmp(id->valuestring, "tp-1")) {
            CHECK_EQ_INT(cJSON_GetArraySize(spans), 2);
            CHECK_STR(cJSON_GetObjectItem(root, "traceId")->valuestring, "4bf92f3577b34da6a3ce929d0e0e4736");
            CHECK_STR(cJSON_GetObjectItem(root, "parentSpanId")->valuestring, "00f067aa0ba902b7");
            char sid[17];
            memcpy(sid, out + 36, 16);
            sid[16] = 0;
            CHECK_STR(cJSON_GetObjectItem(root, "spanId")->valuestring, sid);
            CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "status"), "code")->valueint, 2);
            CHECK_STR(cJSON_GetObjectItem(attr(root, "frugal.route"), "stringValue")->valuestring, "support.card");
            CHECK_STR(cJSON_GetObjectItem(attr(root, "frugal.modality"), "stringValue")->valuestring, "image");
            CHECK_STR(cJSON_GetObjectItem(attr(root, "frugal.tier"), "stringValue")->valuestring, "batch");
            CHECK_NEAR(cJSON_GetObjectItem(attr(root, "frugal.joules"), "doubleValue")->valuedouble, 10, 1e-9);
            CHECK(attr(root, "frugal.usd") != NULL);
            CHECK(attr(root, "gen_ai.usage.output_tokens") != NULL);
            CHECK_STR(cJSON_GetObjectItem(root, "startTimeUnixNano")->valuestring, "1700000000000000000");
            CHECK_STR(cJSON_GetObjectItem(root, "endTimeUnixNano")->valuestring, "1700000001000000000");
            cJSON *ocr = cJSON_GetArrayItem(spans, 1);
            CHECK_STR(cJSON_GetObjectItem(ocr, "name")->valuestring, "ocr");
            CHECK_STR(cJSON_GetObjectItem(ocr, "parentSpanId")->valuestring, sid);
            CHECK_NEAR(cJSON_GetObjectItem(attr(ocr, "frugal.joules"), "doubleValue")->valuedouble, 10, 1e-9);
        } else {
            CHECK(cJSON_GetObjectItem(root, "parentSpanId") == NULL); /* invalid header: new trace */
            CHECK(strcmp(cJSON_GetObjectItem(root, "traceId")->valuestring, "4bf92f3577b34da6a3ce929d0e0e4736"));
        }
        cJSON_Delete(j);
    }
    CHECK_EQ_INT(lines, 2);
    free(text);
}

/* ---- Prometheus ---- */

static int run_cmd(const char *cmd, char *out, size_t n) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t k = fread(out, 1, n - 1, p);
    out[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static fr_meter *metrics_meter(const char *dir) {
    fr_meter_config cfg;
    mu_config(&cfg, dir, "count 2\nenergy 0 0 50000 150000 300000\nenergy 1 NS\npower 1 NS\nutil 0 NS\n");
    fr_meter_config_set(&cfg, "slo.interactive", "0.5", NULL);
    cfg.cost.hw_usd_per_hour = 10;
    fr_err err;
    fr_meter *m = fr_meter_open(&cfg, &err);
    static const char *routes[] = {"chat", "support \"card\"", "back\\slash\nline", "bad\xff\xfeutf8"};
    for (int i = 0; i < 12; i++) {
        fr_meter_req_info in = {0};
        in.route = routes[i % 4];
        in.tier = i % 2 ? "interactive" : "batch";
        fr_meter_req *r = fr_meter_request_begin(m, &in);
        fr_meter_share sh = {r, 1 + i, i % 2 ? FR_MSTAGE_DECODE : FR_MSTAGE_PREFILL};
        fr_meter_step *s = fr_meter_step_begin(m, fr_meter_dev_gpu(0), &sh, 1);
        mu_now += 0.25;
        fr_meter_step_end(m, s);
        fr_meter_tick(m);
        fr_meter_req_result res = {i == 10 ? FR_REQ_FAILED : FR_REQ_OK, 200, NULL, 1, 1, -1, -1};
        fr_meter_request_end(m, r, &res, NULL);
    }
    mu_now += 1;
    fr_meter_tick(m);
    return m;
}

TEST(prometheus_exposition_passes_promtool) {
    const char *dir = mu_tmpdir();
    fr_meter *m = metrics_meter(dir);
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    fr_meter_close(m);
    const char *txt = fr_buf_cstr(&b);
    CHECK(strstr(txt, "# TYPE frugal_gpu_power_watts gauge\n") != NULL);
    CHECK(strstr(txt, "frugal_gpu_power_watts{device=\"gpu0\"} 100\n") != NULL);
    CHECK(strstr(txt, "frugal_gpu_power_watts{device=\"gpu1\"}") == NULL); /* NOT_SUPPORTED */
    CHECK(strstr(txt, "frugal_energy_source_info{device=\"gpu1\",source=\"none\"} 1") != NULL);
    CHECK(strstr(txt, "# TYPE frugal_energy_joules_total counter\n") != NULL);
    CHECK(strstr(txt, "frugal_energy_joules_total{device=\"gpu0\",stage=\"prefill\",source=\"nvml-energy\"}") != NULL);
    CHECK(strstr(txt, "frugal_idle_energy_joules_total{device=\"gpu0\",source=\"nvml-energy\"}") != NULL);
    CHECK(strstr(txt, "frugal_cost_usd_total{route=\"chat\",component=\"depreciation\"}") != NULL);
    CHECK(strstr(txt, "frugal_cost_usd_total{route=\"support \\\"card\\\"\",component=\"energy\"}") != NULL);
    CHECK(strstr(txt, "route=\"back\\\\slash\\nline\"") != NULL);
    CHECK(strstr(txt, "# TYPE frugal_request_energy_joules histogram\n") != NULL);
    CHECK(strstr(txt, "frugal_request_energy_joules_count{route=\"chat\"} 3\n") != NULL);
    CHECK(strstr(txt, "frugal_request_energy_joules_bucket{route=\"chat\",le=\"+Inf\"} 3\n") != NULL);
    CHECK(strstr(txt, "frugal_route_requests_total{route=\"back\\\\slash\\nline\",status=\"failed\"} 1\n") != NULL);
    CHECK(strstr(txt, "route=\"bad??utf8\"") != NULL); /* invalid UTF-8 never reaches a label */
    CHECK(strstr(txt, "frugal_slo_attainment_ratio{tier=\"interactive\"} 1\n") != NULL);
    CHECK(strstr(txt, "frugal_slo_requests_total{tier=\"interactive\",result=\"met\"} 6\n") != NULL);
    char file[400];
    snprintf(file, sizeof file, "%s/metrics.txt", dir);
    mu_write(file, txt);
    char cmd[600], out[8192];
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        printf("  (promtool not installed: `promtool check metrics` skipped)\n");
    } else {
        snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", file);
        int rc = run_cmd(cmd, out, sizeof out);
        CHECK_EQ_INT(rc, 0);
        CHECK_STR(out, ""); /* no lint complaint either */
    }
    fr_buf_free(&b);
}

TEST(dashboard_charts_metrics_that_exist) {
    size_t n;
    char *json = fr_read_file("dashboards/frugal.json", 1 << 20, &n, NULL);
    CHECK(json != NULL);
    if (!json) return;
    cJSON *d = cJSON_Parse(json);
    CHECK(d != NULL);
    const char *dir = mu_tmpdir();
    fr_meter *m = metrics_meter(dir);
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    fr_meter_close(m);
    const char *txt = fr_buf_cstr(&b);
    int exprs = 0;
    bool power = false, jreq = false, usd = false, slo = false;
    cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(d, "panels")) {
        const char *title = cJSON_GetObjectItem(p, "title")->valuestring;
        power |= strstr(title, "power") != NULL;
        jreq |= strstr(title, "Energy per request") != NULL;
        usd |= strstr(title, "Cost per 1,000") != NULL;
        slo |= strstr(title, "SLO") != NULL;
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(p, "targets")) {
            const char *e = cJSON_GetObjectItem(t, "expr")->valuestring;
            exprs++;
            for (const char *q = strstr(e, "frugal_"); q; q = strstr(q + 1, "frugal_")) {
                char name[96];
                size_t k = 0;
                while ((q[k] == '_' || (q[k] >= 'a' && q[k] <= 'z')) && k < sizeof name - 1) name[k] = q[k], k++;
                name[k] = 0;
                char pat[110];
                snprintf(pat, sizeof pat, "\n%s{", name);
                char pat2[110];
                snprintf(pat2, sizeof pat2, "# TYPE %s ", name);
                bool found = strstr(txt, pat) || strstr(txt, pat2);
                if (!found) fprintf(stderr, "  dashboard uses %s, not exported\n", name);
                CHECK(found);
            }
        }
    }
    CHECK(exprs >= 8);
    CHECK(power && jreq && usd && slo);
    cJSON_Delete(d);
    free(json);
    fr_buf_free(&b);
}

/* ---- configuration, cost, A/B ---- */

/* The same settings as the JSON sections (the one format) and as the deprecated `key = value`
 * text, which is still read for one release. */
static const char *CONFIG_JSON =
    "{\n"
    "  \"meter\": {\"sample_ms\": 50, \"nvml_lib\": \"/opt/nvidia/libnvidia-ml.so.1\",\n"
    "            \"cpu_source\": \"estimate\", \"idle_policy\": \"amortise\", \"nvml\": false},\n"
    "  \"cost\": {\"usd_per_kwh\": 0.09, \"pue\": 1.2, \"hw_purchase_usd\": 300000,\n"
    "           \"hw_residual_usd\": 30000, \"labour_usd_per_month\": 2000, \"host_share\": 0.5},\n"
    "  \"ledger\": {\"path\": \"/var/lib/frugal/ledger.db\", \"synchronous\": \"full\",\n"
    "             \"retention_days\": 90, \"retention_rows\": 5000000000},\n"
    "  \"slo\": {\"interactive\": 2, \"batch\": 60},\n"
    "  \"ab\": {\"control\": 3, \"vision_off\": {\"weight\": 1, \"options\": \"pipeline.vision=off\"},\n"
    "         \"hashed\": {\"weight\": 2, \"options\": \"tag=#7\"}}\n"
    "}\n";
static const char *CONFIG_LEGACY =
    "# frugal metering\n"
    "[meter]\n"
    "sample_ms = 50   # faster\n"
    "nvml_lib = \"/opt/nvidia/libnvidia-ml.so.1\"\n"
    "cpu_source = estimate\n"
    "idle_policy = amortise\n"
    "nvml = off\n"
    "[cost]\n"
    "usd_per_kwh = 0.09\n"
    "pue = 1.2\n"
    "hw_purchase_usd = 300000\n"
    "hw_residual_usd = 30000\n"
    "labour_usd_per_month = 2000\n"
    "host_share = 0.5\n"
    "[ledger]\n"
    "path = /var/lib/frugal/ledger.db\n"
    "synchronous = full\n"
    "retention_days = 90\n"
    "retention_rows = 5000000000\n"
    "[slo]\n"
    "interactive = 2\n"
    "batch = 60\n"
    "[ab]\n"
    "control = 3\n"
    "vision_off = 1 | pipeline.vision=off\n"
    "hashed = \"2 | tag=#7\"   # a '#' inside quotes is kept\n";

TEST(config_json_sections_and_open_families) {
    fr_meter_config c;
    fr_meter_config_default(&c);
    fr_err err = {0};
    CHECK_EQ_INT(fr_meter_config_parse(&c, CONFIG_JSON, strlen(CONFIG_JSON), &err), 0);
    CHECK_STR(err.msg, "");
    CHECK_NEAR(c.sample_ms, 50, 0);
    CHECK(!c.nvml);
    CHECK_STR(c.nvml_lib, "/opt/nvidia/libnvidia-ml.so.1");
    CHECK_EQ_INT(c.cpu_source, 2);
    CHECK(c.idle_policy == FR_IDLE_AMORTISE);
    CHECK_NEAR(c.cost.pue, 1.2, 0);
    CHECK_NEAR(c.cost.host_share, 0.5, 0);
    CHECK_STR(c.ledger_path, "/var/lib/frugal/ledger.db");
    CHECK(c.ledger_path_set);
    CHECK(c.ledger_sync_full);
    CHECK(c.retention_rows == 5000000000L);
    CHECK_EQ_INT(c.n_slo, 2);
    CHECK_STR(c.slo[1].tier, "batch");
    CHECK_NEAR(c.slo[1].latency_s, 60, 0);
    CHECK_EQ_INT(c.n_arms, 3);
    CHECK_STR(c.arms[1].name, "vision_off");
    CHECK_STR(c.arms[1].options, "pipeline.vision=off");
    CHECK_STR(c.arms[2].options, "tag=#7");
    /* the dump is JSON, and dump → parse → dump is a fixed point */
    fr_buf d1 = {0}, d2 = {0}, d3 = {0};
    fr_meter_config_dump(&c, &d1);
    CHECK(d1.len > 0 && d1.data[0] == '{');
    fr_meter_config c2;
    fr_meter_config_default(&c2);
    CHECK_EQ_INT(fr_meter_config_parse(&c2, d1.data, d1.len, &err), 0);
    fr_meter_config_dump(&c2, &d2);
    CHECK_STR(fr_buf_cstr(&d1), fr_buf_cstr(&d2));
    /* the deprecated syntax reads to the same configuration */
    fr_meter_config c3;
    fr_meter_config_default(&c3);
    CHECK_EQ_INT(fr_meter_config_parse(&c3, CONFIG_LEGACY, strlen(CONFIG_LEGACY), &err), 0);
    fr_meter_config_dump(&c3, &d3);
    CHECK_STR(fr_buf_cstr(&d1), fr_buf_cstr(&d3));
    fr_buf_free(&d1);
    fr_buf_free(&d2);
    fr_buf_free(&d3);
    /* a file in the deprecated syntax still loads, with a warning in the log */
    char path[400], logp[400];
    snprintf(path, sizeof path, "%s/legacy.conf", mu_tmpdir());
    snprintf(logp, sizeof logp, "%s/legacy.log", mu_tmpdir());
    mu_write(path, CONFIG_LEGACY);
    fflush(stderr);
    int saved = dup(2), logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(logfd, 2);
    int level = fr_log_level;
    fr_log_level = FR_LOG_WARN;
    fr_meter_config_default(&c3);
    int rc = fr_meter_config_load(&c3, path, &err);
    fr_log_level = level;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(logfd);
    CHECK_EQ_INT(rc, 0);
    CHECK_NEAR(c3.cost.pue, 1.2, 0);
    char *log = fr_read_file(logp, 1 << 16, NULL, NULL);
    CHECK(log && strstr(log, "legacy.conf: the `key = value` meter syntax is deprecated") != NULL);
    free(log);
    /* the example shipped in docs/ loads */
    fr_meter_config_default(&c);
    CHECK_EQ_INT(fr_meter_config_load(&c, "docs/metering.example.json", &err), 0);
    CHECK_STR(c.ledger_path, "frugal-ledger.db");
    CHECK_EQ_INT(c.n_slo, 2);
    CHECK_NEAR(c.cost.hw_purchase_usd, 300000, 0);
    /* defaults */
    fr_meter_config_default(&c);
    CHECK_NEAR(c.cost.pue, 1.58, 0);
    CHECK_NEAR(c.cost.usd_per_kwh, 0.1241, 0);
    CHECK_NEAR(c.cost.hw_depreciation_years, 5, 0);
    CHECK_NEAR(c.sample_ms, 100, 0);
}

TEST(config_errors_name_the_line) {
    static const struct { const char *text, *msg; } cases[] = {
        {"{\"pue\": 1.4}", "line 1: pue: unknown section (meter, cost, ledger, trace, audit, slo, ab)"},
        {"{\"cost\": {\n  \"pue\": 0.9\n}}", "line 2: cost.pue: must be a number in 1..10"},
        {"{\"cost\": {\"usd_per_kwh\": \"0.1\"}}", "line 1: cost.usd_per_kwh: must be a number in 0..100"},
        {"{\"cost\": {\"pue\": 1.4,\n \"pue\": 1.5}}", "line 2: pue: key given twice in one object"},
        {"{\"cost\": {\"peu\": 1.4}}", "line 1: cost.peu: unknown key"},
        {"{\"cost\": 3}", "line 1: cost: must be an object"},
        {"{\"cost\": {\"pue\": 1.4}", "line 1:21: not valid JSON here"},
        {"{\"cost\": {}} x", "line 1:14: text after the end of the JSON object"},
        {"{\"meter\": {\n\n \"nvml\": \"on\"}}", "line 3: meter.nvml: must be true or false"},
        {"{\"meter\": {\"cpu_source\": \"gpu\"}}",
         "line 1: meter.cpu_source: must be one of \"auto\", \"rapl\", \"estimate\""},
        {"{\"ledger\": {\"queue\": 1.5}}", "line 1: ledger.queue: must be an integer in 1..4194304"},
        {"{\"slo\": {\"interactive\": -1}}", "line 1: slo.interactive: must be a number in 1e-09..86400"},
        {"{\"slo\": {\"a b\": 1}}", "line 1: slo.a b: bad tier name 'a b'"},
        {"{\"ab\": {\"a\": \"zero\"}}",
         "line 1: ab.a: must be a weight or {\"weight\": w, \"options\": \"...\"}"},
        {"{\"ab\": {\"a\": {\"options\": \"x\"}}}", "line 1: ab.a: needs a \"weight\""},
        {"{\"cost\": {\"hw_purchase_usd\": 10, \"hw_residual_usd\": 20}}",
         "line 1: cost: cost.hw_residual_usd (20) exceeds cost.hw_purchase_usd (10)"},
        /* the deprecated syntax keeps its own messages */
        {"pue = 1.4\n", "line 1: unknown key 'pue'"},
        {"[cost]\npue = 0.9\n", "line 2: cost.pue: '0.9' is not a number in [1, 10]"},
        {"[cost]\nusd_per_kwh = 0x10\n", "line 2: cost.usd_per_kwh: '0x10' is not a number in [0, 100]"},
        {"[cost\n", "line 1: bad section header"},
        {"just words\n", "line 1: expected key = value"},
        {"[meter]\nnvml = maybe\n", "line 2: meter.nvml: 'maybe' is not on/off"},
        {"[meter]\nnvml_lib = a\"b\n", "line 2: a quote inside a value"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        fr_meter_config c;
        fr_meter_config_default(&c);
        fr_err err = {0};
        CHECK_EQ_INT(fr_meter_config_parse(&c, cases[i].text, strlen(cases[i].text), &err), -1);
        CHECK_STR(err.msg, cases[i].msg);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    }
    char big[6000];
    memset(big, 'a', sizeof big);
    fr_meter_config c;
    fr_meter_config_default(&c);
    fr_err err;
    CHECK_EQ_INT(fr_meter_config_parse(&c, big, sizeof big, &err), -1);
    CHECK(strstr(err.msg, "longer than") != NULL);
    const char nul[] = "{\"cost\": {\"pue\": 1\0.5}}";
    CHECK_EQ_INT(fr_meter_config_parse(&c, nul, sizeof nul - 1, &err), -1);
    CHECK_STR(err.msg, "line 1:19: a NUL byte in the text");
    /* a file names itself and the line */
    char path[400];
    snprintf(path, sizeof path, "%s/bad-meter.json", mu_tmpdir());
    mu_write(path, "{\n  \"trace\": {\n    \"batch\": 0\n  }\n}\n");
    CHECK_EQ_INT(fr_meter_config_load(&c, path, &err), -1);
    char want[500];
    snprintf(want, sizeof want, "%s:3: trace.batch: must be an integer in 1..4096", path);
    CHECK_STR(err.msg, want);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_meter_config_load(&c, "/nonexistent/meter.json", &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
}

TEST(cost_model_components) {
    fr_cost_model c = {0.10, 1.5, 0, 300000, 5, 30000, 3000, 0.5, 0, 0, 0, 0};
    double parts[FR_COST_N];
    const double year = 365.25 * 86400;
    double total = fr_cost_price(&c, 3.6e6, 3600, parts); /* 1 kWh, one host-hour */
    CHECK_NEAR(parts[FR_COST_ENERGY], 0.10, 1e-15);
    CHECK_NEAR(parts[FR_COST_COOLING], 0.05, 1e-15);
    CHECK_NEAR(parts[FR_COST_DEPRECIATION], 270000.0 / (5 * year) * 0.5 * 3600, 1e-12);
    CHECK_NEAR(parts[FR_COST_LABOUR], 3000.0 * 12 / year * 0.5 * 3600, 1e-12);
    CHECK_NEAR(total, parts[0] + parts[1] + parts[2] + parts[3], 1e-15);
    c.hw_usd_per_hour = 2.5; /* a rental rate wins over the purchase fields */
    fr_cost_price(&c, 0, 3600, parts);
    CHECK_NEAR(parts[FR_COST_DEPRECIATION], 1.25, 1e-12);
    CHECK_STR(fr_cost_component_name(FR_COST_LABOUR), "labour");
}

/* Without a rental rate or a purchase price the host's devices are priced at the default list
 * prices: a GPU host by the GPU-hour, a CPU-only host by the vCPU-hour; never $0. */
TEST(default_cost_model_prices_the_host) {
    fr_meter_config d;
    fr_meter_config_default(&d);
    fr_cost_model c = d.cost;
    CHECK(c.hw_usd_per_hour == 0 && c.hw_purchase_usd == 0);
    CHECK(c.gpu_usd_per_hour > 1 && c.cpu_usd_per_hour > 0.01 && c.usd_per_kwh > 0.05);
    fr_cost_resolve_host(&c, 0);
    CHECK(c.gpus == 0 && c.cpus >= 1);
    double parts[FR_COST_N];
    fr_cost_price(&c, 0, 3600, parts);
    CHECK_NEAR(parts[FR_COST_DEPRECIATION], c.cpus * c.cpu_usd_per_hour, 1e-12);
    char basis[96];
    fr_cost_hw_basis(&c, basis, sizeof basis);
    CHECK(strstr(basis, "vCPU") != NULL);
    c = d.cost;
    fr_cost_resolve_host(&c, 8);
    fr_cost_price(&c, 0, 3600, parts);
    CHECK_NEAR(parts[FR_COST_DEPRECIATION], 8 * 4.916, 1e-9);
    fr_cost_hw_basis(&c, basis, sizeof basis);
    CHECK_STR(basis, "8 GPUs x $4.9160/h list price");
    c.gpus = 2; /* a configured count wins over the one found */
    fr_cost_resolve_host(&c, 8);
    CHECK(c.gpus == 2);
}

TEST(ab_assignment_is_sticky_and_weighted) {
    fr_meter_config c;
    fr_meter_config_default(&c);
    CHECK(fr_meter_ab_assign(&c, "x") == NULL);
    fr_meter_config_set(&c, "ab.control", "3", NULL);
    fr_meter_config_set(&c, "ab.vision_off", "1 | pipeline.vision=off", NULL);
    int n_b = 0;
    for (int i = 0; i < 20000; i++) {
        char key[32];
        snprintf(key, sizeof key, "conv-%d", i);
        const fr_meter_arm *a = fr_meter_ab_assign(&c, key);
        CHECK(a == fr_meter_ab_assign(&c, key));
        n_b += a == &c.arms[1];
    }
    CHECK(n_b > 4700 && n_b < 5300); /* 25 % */
    const char *dir = mu_tmpdir();
    fr_meter_config mc;
    mu_config(&mc, dir, NULL);
    mc.arms[0] = c.arms[0];
    mc.arms[1] = c.arms[1];
    mc.n_arms = 2;
    fr_err err;
    fr_meter *m = fr_meter_open(&mc, &err);
    fr_meter_req_info in = {0};
    in.sticky_key = "conv-7";
    fr_meter_req *r = fr_meter_request_begin(m, &in);
    CHECK_STR(fr_meter_request_arm(r), fr_meter_ab_assign(&c, "conv-7")->name);
    CHECK_STR(fr_meter_request_arm_options(m, r), fr_meter_ab_assign(&c, "conv-7")->options);
    in.arm = "vision_off";
    fr_meter_req *r2 = fr_meter_request_begin(m, &in);
    CHECK_STR(fr_meter_request_arm_options(m, r2), "pipeline.vision=off");
    fr_meter_request_end(m, r, NULL, NULL);
    fr_meter_request_end(m, r2, NULL, NULL);
    fr_meter_close(m);
}

int main(void) {
    fr_log_level = FR_LOG_ERROR;
    return t_main();
}
