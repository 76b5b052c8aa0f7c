/* test_hostile.c — hostile clients against the real server (fr_server_start on a loopback port,
 * the tiny fp32 Qwen2 fixture on the CPU), spoken to through raw sockets with short timeouts so
 * that a hang fails fast:
 *
 *   - every malformed framing answered with its status at once (400/411/413/431/501/505), a NUL
 *     in a header (`Bearer KEY\0junk` included) refused;
 *   - strict X-Priority; a key capped at P2 stays P2 on /v1/assist (header and body);
 *   - /v1/assist bodies as strict as chat (trailing bytes, two objects, a raw NUL), its
 *     X-Deadline-Ms validated and honoured;
 *   - a P2 connection flood: P2 gets 503 + Retry-After over its share, P0 and /health are served;
 *     the pending queue pushes its oldest out with a 503; a head that never completes gets 408;
 *   - 1,000 slowloris connections (one header byte per connection every ~2 s) do not delay
 *     /health or a P0 completion by more than 100 ms (baseline measured in the same run);
 *   - /ready answers 503 "draining" during a graceful shutdown, /health 200, new work 503;
 *   - ledger rows (status rejected) for the generation requests the guard or the auth refused.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "meter_util.h"
#include "serve/serve.h"
#include "t.h"

#define MODEL "tests/fixtures/qwen2-tiny"
#define KEY_GOLD "sk-guard-gold-0001"
#define KEY_BATCH "sk-guard-batch-0002"
#define N_SLOW 1000

/* ---- a raw HTTP client ---- */

static int g_port;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int xconnect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

typedef struct resp {
    int status;      /* 0: closed without an answer, -1: timed out */
    double ms;       /* from the send to the end of the answer */
    fr_buf raw;      /* head + body */
} resp;

/* Reads until the peer closes (every request here says Connection: close, every refusal
 * closes) or timeout_s passes. */
static void read_resp(int fd, double t0, double timeout_s, resp *r) {
    r->status = -1;
    for (;;) {
        double left = timeout_s - (now_s() - t0);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        char buf[8192];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            r->status = 0;
            break;
        }
        fr_buf_append(&r->raw, buf, (size_t)n);
    }
    r->ms = (now_s() - t0) * 1000;
    const char *s = fr_buf_cstr(&r->raw);
    if (!strncmp(s, "HTTP/1.", 7) && strlen(s) > 12) r->status = atoi(s + 9);
}

static resp xreq(const char *raw, size_t len, double timeout_s) {
    resp r = {0};
    int fd = xconnect(g_port);
    if (fd < 0) {
        r.status = -2;
        return r;
    }
    double t0 = now_s();
    ssize_t w = send(fd, raw, len, MSG_NOSIGNAL);
    (void)w;
    read_resp(fd, t0, timeout_s, &r);
    close(fd);
    return r;
}

static resp xreq_s(const char *raw) { return xreq(raw, strlen(raw), 3.0); }

/* Reads one response on a kept-alive connection: its head and Content-Length bytes. */
static int read_one(int fd, double timeout_s) {
    fr_buf b = {0};
    double t0 = now_s();
    int status = -1;
    for (;;) {
        const char *s = b.len ? fr_buf_cstr(&b) : "";
        const char *e = strstr(s, "\r\n\r\n");
        if (e) {
            const char *cl = strcasestr(s, "\r\nContent-Length:");
            size_t want = (size_t)(e + 4 - s) + (cl && cl < e ? (size_t)atol(cl + 17) : 0);
            if (b.len >= want) {
                status = atoi(s + 9);
                break;
            }
        }
        double left = timeout_s - (now_s() - t0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            status = 0;
            break;
        }
        fr_buf_append(&b, buf, (size_t)n);
    }
    fr_buf_free(&b);
    return status;
}

/* A kept-alive connection: a good first request, then `second`; the status of the second. */
static int keepalive_second(const char *second) {
    int fd = xconnect(g_port);
    const char *first = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    ssize_t w = send(fd, first, strlen(first), MSG_NOSIGNAL);
    int st1 = read_one(fd, 3);
    w = send(fd, second, strlen(second), MSG_NOSIGNAL);
    (void)w;
    int st2 = read_one(fd, 3);
    close(fd);
    return st1 == 200 ? st2 : -100 - st1;
}

static const char *resp_body(resp *r) {
    const char *s = fr_buf_cstr(&r->raw);
    const char *b = strstr(s, "\r\n\r\n");
    return b ? b + 4 : "";
}

static bool resp_has_header(resp *r, const char *name) {
    const char *s = fr_buf_cstr(&r->raw);
    const char *end = strstr(s, "\r\n\r\n");
    size_t n = strlen(name);
    for (const char *p = strstr(s, "\r\n"); p && (!end || p < end); p = strstr(p + 2, "\r\n"))
        if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':') return true;
    return false;
}

/* A POST with a JSON body and extra header lines (each ending in \r\n). */
static resp post(const char *path, const char *extra, const char *body, double timeout_s) {
    fr_buf b = {0};
    char head[1024];
    snprintf(head, sizeof head,
             "POST %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json"
             "\r\nContent-Length: %zu\r\n%s\r\n",
             path, strlen(body), extra ? extra : "");
    fr_buf_puts(&b, head);
    fr_buf_puts(&b, body);
    resp r = xreq(b.data, b.len, timeout_s);
    fr_buf_free(&b);
    return r;
}

static resp get(const char *path, const char *extra) {
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s\r\n", path,
             extra ? extra : "");
    return xreq_s(req);
}

#define AUTH_GOLD "Authorization: Bearer " KEY_GOLD "\r\n"
#define AUTH_BATCH "Authorization: Bearer " KEY_BATCH "\r\n"
#define P0_BODY "{\"prompt\":\"Hi\",\"max_tokens\":1,\"temperature\":0}"

/* Waits (up to 10 s) until the server has released the slots of connections the client already
 * closed: the release runs when the server sees the close, a moment after the client does (longer
 * under the sanitizers). True when only the /metrics connection itself (control) and p2 P2 slots
 * are held. */
static bool settle_slots(int p2) {
    char want[200];
    snprintf(want, sizeof want,
             "frugal_connection_slots_used{class=\"control\"} 1\n"
             "frugal_connection_slots_used{class=\"P0\"} 0\n"
             "frugal_connection_slots_used{class=\"P1\"} 0\n"
             "frugal_connection_slots_used{class=\"P2\"} %d\n",
             p2);
    for (int i = 0; i < 200; i++) {
        resp m = get("/metrics", AUTH_GOLD);
        bool ok = strstr(resp_body(&m), want) != NULL;
        fr_buf_free(&m.raw);
        if (ok) return true;
        usleep(50000);
    }
    return false;
}

/* ---- servers ---- */

typedef struct srv {
    fr_serve_config cfg;
    fr_server *s;
    char ledger[300];
} srv;

static frugal_model *g_model; /* loaded through the public API, as `frugal serve` does */

static bool srv_start(srv *v, const char *limits_json) {
    memset(v, 0, sizeof *v);
    fr_serve_config_init(&v->cfg);
    fr_err err = {0};
    v->cfg.model = fr_xstrdup(MODEL);
    v->cfg.port = 0;
    snprintf(v->ledger, sizeof v->ledger, "%s/ledger.db", mu_tmpdir());
    v->cfg.ledger = fr_xstrdup(v->ledger);
    v->cfg.shutdown_grace_s = 10;
    if (fr_serve_config_apply_json(&v->cfg, limits_json, strlen(limits_json), &err)) {
        printf("  config: %s\n", err.msg);
        return false;
    }
    if (fr_serve_keys_parse(&v->cfg, KEY_GOLD " P1 P0\n" KEY_BATCH " P2 P2\n", "keys", false,
                            &err))
        return false;
    frugal_error fe;
    if (!g_model) g_model = frugal_model_load(MODEL, frugal_model_default_params(), &fe);
    if (!g_model) {
        printf("  model: %s\n", fe.message);
        return false;
    }
    v->s = fr_server_start(&v->cfg, g_model, NULL, &err);
    if (!v->s) {
        printf("  server: %s\n", err.msg);
        return false;
    }
    g_port = fr_server_port(v->s);
    return true;
}

static void srv_stop(srv *v) {
    fr_server_free(v->s);
    v->s = NULL;
    fr_serve_config_free(&v->cfg);
}

static long long q1(const char *ledger, const char *sql) {
    sqlite3 *db = NULL;
    long long v = -1;
    if (sqlite3_open_v2(ledger, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- the main server: framing, tiers, assist, slowloris, drain ---- */

static srv g_main;
static bool g_main_up;

static void main_up(void) {
    if (g_main_up) return;
    raise_nofile();
    /* a long head deadline, so that the slow connections stay pending while they are timed */
    g_main_up = srv_start(&g_main, "{\"limits\": {\"header_timeout_s\": 120, "
                                   "\"max_body_bytes\": 65536, \"max_header_bytes\": 8192}}");
}

TEST(framing_answered_at_once) {
    main_up();
    CHECK(g_main_up);
    if (!g_main_up) return;
    static const struct { const char *req; int status; } cases[] = {
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", 400},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 2a\r\n\r\n{}", 400},
        {"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 9000000\r\n\r\n", 413},
        {"GET /health HTTP/1.1\r\n\r\n", 400},
        {"POST /v1/completions HTTP/1.0\r\n\r\n", 411},
        {"GET /health HTTP/2.0\r\nHost: t\r\n\r\n", 505},
        {"GET /health HTTP/1.1\r\nHost: t\r\nX-A: 1\x01\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        resp r = xreq_s(cases[i].req);
        if (r.status != cases[i].status || r.ms > 1000)
            printf("  case %zu: status %d in %.0f ms (want %d at once)\n", i, r.status, r.ms,
                   cases[i].status);
        CHECK_EQ_INT(r.status, cases[i].status);
        CHECK(r.ms < 1000);
        CHECK(strstr(resp_body(&r), "\"error\"") != NULL);
        fr_buf_free(&r.raw);
    }
    /* a NUL in a header value, and in the key: refused, never matched as "Bearer KEY" */
    static const char nul1[] = "GET /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
                               KEY_GOLD "\0junk\r\nConnection: close\r\n\r\n";
    resp r = xreq(nul1, sizeof nul1 - 1, 3);
    CHECK_EQ_INT(r.status, 400);
    CHECK(r.ms < 1000);
    fr_buf_free(&r.raw);
    /* 431: a head over max_header_bytes */
    fr_buf big = {0};
    fr_buf_puts(&big, "POST /v1/completions HTTP/1.1\r\nHost: t\r\nX-Big: ");
    for (int i = 0; i < 9000; i++) fr_buf_puts(&big, "b");
    fr_buf_puts(&big, "\r\n\r\n");
    r = xreq(big.data, big.len, 3);
    CHECK_EQ_INT(r.status, 431);
    fr_buf_free(&r.raw);
    fr_buf_free(&big);
    /* a good chunked request still works, and the server keeps serving */
    const char *ok = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                     AUTH_GOLD "Transfer-Encoding: chunked\r\n\r\n"
                     "2e\r\n{\"prompt\":\"Hi\",\"max_tokens\":1,\"temperature\":0}\r\n0\r\n\r\n";
    r = xreq_s(ok);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    r = get("/v1/models", AUTH_GOLD);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    /* the same rules for a later request on a kept-alive connection (MHD parsed its head) */
    CHECK_EQ_INT(keepalive_second("POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                                  "Transfer-Encoding: gzip\r\n\r\n"), 501);
    CHECK_EQ_INT(keepalive_second("POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                                  "Transfer-Encoding: chunked, chunked\r\n\r\n"), 400);
    CHECK_EQ_INT(keepalive_second("POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                                  "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"), 400);
    CHECK_EQ_INT(keepalive_second("GET /health HTTP/1.1\r\n\r\n"), 400);
    CHECK_EQ_INT(keepalive_second("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
}

TEST(strict_priority_and_tier_caps) {
    main_up();
    if (!g_main_up) return;
    static const char *bad[] = {"p0", "0", "P00", "P3", "P"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char h[128];
        snprintf(h, sizeof h, AUTH_GOLD "X-Priority: %s\r\n", bad[i]);
        resp r = post("/v1/completions", h, P0_BODY, 5);
        CHECK_EQ_INT(r.status, 400);
        fr_buf_free(&r.raw);
        r = post("/v1/assist", h, "{\"text\":\"hello\"}", 5);
        CHECK_EQ_INT(r.status, 400);
        fr_buf_free(&r.raw);
    }
    resp r = post("/v1/completions", AUTH_GOLD, "{\"prompt\":\"Hi\",\"max_tokens\":1,\"priority\":\"p0\"}", 5);
    CHECK_EQ_INT(r.status, 400);
    fr_buf_free(&r.raw);
    r = post("/v1/assist", AUTH_GOLD, "{\"text\":\"hello\",\"priority\":\"P0 \"}", 5);
    CHECK_EQ_INT(r.status, 400);
    fr_buf_free(&r.raw);
    r = post("/v1/completions", AUTH_GOLD "X-Priority: P0\r\n", P0_BODY, 5);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    /* a key capped at P2 asking P0 on /v1/assist runs at P2 (header and body) */
    const char *ways[2][2] = {{AUTH_BATCH "X-Priority: P0\r\n", "{\"text\":\"my card is lost\"}"},
                              {AUTH_BATCH, "{\"text\":\"my card is lost\",\"priority\":\"P0\"}"}};
    for (int w = 0; w < 2; w++) {
        r = post("/v1/assist", ways[w][0], ways[w][1], 20);
        CHECK_EQ_INT(r.status, 200);
        cJSON *j = cJSON_Parse(resp_body(&r));
        const cJSON *route = cJSON_GetObjectItem(j, "route");
        const cJSON *tier = cJSON_GetObjectItem(route, "tier");
        CHECK(cJSON_IsString(tier) && !strcmp(tier->valuestring, "P2"));
        if (!cJSON_IsString(tier)) printf("  assist answer: %.300s\n", resp_body(&r));
        cJSON_Delete(j);
        fr_buf_free(&r.raw);
    }
    /* the gold key may ask P0 */
    r = post("/v1/assist", AUTH_GOLD "X-Priority: P0\r\n", "{\"text\":\"my card is lost\"}", 20);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(resp_body(&r), "\"tier\":\"P0\"") != NULL);
    fr_buf_free(&r.raw);
}

TEST(assist_strict_body_and_deadline) {
    main_up();
    if (!g_main_up) return;
    static const char trailing[] = "{\"text\":\"hello\"} x";
    static const char two[] = "{\"text\":\"hello\"}{\"text\":\"again\"}";
    static const char nul[] = "{\"text\":\"hel\0lo\"}";
    const struct { const char *b; size_t n; } bodies[] = {
        {trailing, sizeof trailing - 1}, {two, sizeof two - 1}, {nul, sizeof nul - 1}};
    for (int i = 0; i < 3; i++) {
        char head[256];
        snprintf(head, sizeof head,
                 "POST /v1/assist HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" AUTH_GOLD
                 "Content-Length: %zu\r\n\r\n",
                 bodies[i].n);
        fr_buf b = {0};
        fr_buf_puts(&b, head);
        fr_buf_append(&b, bodies[i].b, bodies[i].n);
        resp r = xreq(b.data, b.len, 5);
        CHECK_EQ_INT(r.status, 400);
        CHECK(strstr(resp_body(&r), "invalid_json") != NULL);
        fr_buf_free(&r.raw);
        fr_buf_free(&b);
    }
    resp r = post("/v1/assist", AUTH_GOLD "X-Deadline-Ms: soon\r\n", "{\"text\":\"hello\"}", 5);
    CHECK_EQ_INT(r.status, 400);
    CHECK(strstr(resp_body(&r), "X-Deadline-Ms") != NULL);
    fr_buf_free(&r.raw);
    /* a deadline that cannot be met: the body arrives 30 ms after the head, past its 5 ms */
    int fd = xconnect(g_port);
    const char *body = "{\"text\":\"my card is lost\"}";
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/assist HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" AUTH_GOLD
             "X-Deadline-Ms: 5\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    double t0 = now_s();
    ssize_t w = send(fd, head, strlen(head), MSG_NOSIGNAL);
    usleep(30000);
    w = send(fd, body, strlen(body), MSG_NOSIGNAL);
    (void)w;
    resp rd = {0};
    read_resp(fd, t0, 10, &rd);
    close(fd);
    CHECK_EQ_INT(rd.status, 504);
    CHECK(strstr(resp_body(&rd), "deadline_exceeded") != NULL);
    fr_buf_free(&rd.raw);
    r = post("/v1/assist", AUTH_GOLD "X-Deadline-Ms: 60000\r\n", "{\"text\":\"my card is lost\"}", 20);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
}

/* ---- slowloris ---- */

typedef struct slow {
    int fd[N_SLOW];
    int n;
    atomic_bool stop;
    long long bytes;
} slow;

/* One header byte per connection, round-robin, every connection about every 2 s. */
static void *drip(void *arg) {
    slow *sl = arg;
    int i = 0;
    while (!atomic_load(&sl->stop)) {
        for (int k = 0; k < 10 && !atomic_load(&sl->stop); k++, i = (i + 1) % sl->n) {
            if (send(sl->fd[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) sl->bytes++;
        }
        usleep(20000); /* 10 bytes per 20 ms: 500 bytes/s over 1,000 connections */
    }
    return NULL;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

#define N_HEALTH 60
#define N_P0 12

/* Times /health and a P0 completion: p50 and p90 of each, ms. false when a request failed. */
static bool time_requests(double h[3], double p0[3]) {
    double hv[N_HEALTH], pv[N_P0];
    bool ok = true;
    for (int i = 0; i < N_HEALTH; i++) {
        resp r = get("/health", NULL);
        hv[i] = r.ms;
        if (r.status != 200) ok = false;
        fr_buf_free(&r.raw);
    }
    for (int i = 0; i < N_P0; i++) {
        resp r = post("/v1/completions", AUTH_GOLD "X-Priority: P0\r\n", P0_BODY, 10);
        pv[i] = r.ms;
        if (r.status != 200) ok = false;
        fr_buf_free(&r.raw);
    }
    h[0] = pct(hv, N_HEALTH, 0.5), h[1] = pct(hv, N_HEALTH, 0.9), h[2] = pct(hv, N_HEALTH, 0.99);
    p0[0] = pct(pv, N_P0, 0.5), p0[1] = pct(pv, N_P0, 0.9), p0[2] = pct(pv, N_P0, 0.99);
    return ok;
}

TEST(slowloris_1000_connections) {
    main_up();
    if (!g_main_up) return;
    double h0[3], p0[3], h1[3], p1[3];
    for (int i = 0; i < 5; i++) { /* warm-up */
        resp r = post("/v1/completions", AUTH_GOLD "X-Priority: P0\r\n", P0_BODY, 10);
        fr_buf_free(&r.raw);
    }
    CHECK(time_requests(h0, p0));
    static slow sl;
    memset(&sl, 0, sizeof sl);
    for (int i = 0; i < N_SLOW; i++) {
        sl.fd[i] = xconnect(g_port);
        if (sl.fd[i] < 0) break;
        const char *start = "GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        ssize_t w = send(sl.fd[i], start, strlen(start), MSG_NOSIGNAL);
        (void)w;
        sl.n++;
    }
    CHECK_EQ_INT(sl.n, N_SLOW);
    if (sl.n == 0) return;
    pthread_t th;
    pthread_create(&th, NULL, drip, &sl);
    sleep(3); /* every slow connection has sent a byte or two more */
    bool ok = time_requests(h1, p1);
    CHECK(ok);
    /* every slow connection is still open and unanswered: held, not dropped */
    int answered = 0;
    for (int i = 0; i < sl.n; i++) {
        struct pollfd p = {.fd = sl.fd[i], .events = POLLIN};
        if (poll(&p, 1, 0) > 0) answered++;
    }
    atomic_store(&sl.stop, true);
    pthread_join(th, NULL);
    printf("# slowloris: /health p50/p90/p99 %.2f/%.2f/%.2f ms alone, %.2f/%.2f/%.2f ms with %d "
           "slow connections (%lld bytes dripped); P0 completion p50/p90 %.2f/%.2f ms alone, "
           "%.2f/%.2f ms with\n",
           h0[0], h0[1], h0[2], h1[0], h1[1], h1[2], sl.n, sl.bytes, p0[0], p0[1], p1[0], p1[1]);
    CHECK_EQ_INT(answered, 0);
    CHECK(h1[0] <= h0[0] + 100);
    CHECK(h1[1] <= h0[1] + 100);
    CHECK(p1[0] <= p0[0] + 100);
    CHECK(p1[1] <= p0[1] + 100);
    for (int i = 0; i < sl.n; i++) close(sl.fd[i]);
}

/* ---- drain ---- */

typedef struct drain_arg {
    fr_server *s;
} drain_arg;

static void *do_shutdown(void *arg) {
    drain_arg *d = arg;
    fr_server_shutdown(d->s, 10);
    return NULL;
}

TEST(ready_503_while_draining_and_rejection_rows) {
    main_up();
    if (!g_main_up) return;
    /* refusals the guard or the auth answers for generation endpoints (ledger rows below) */
    resp r = post("/v1/completions", NULL, P0_BODY, 5); /* no key: 401 */
    CHECK_EQ_INT(r.status, 401);
    fr_buf_free(&r.raw);
    r = xreq_s("POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 9000000\r\n\r\n");
    CHECK_EQ_INT(r.status, 413);
    fr_buf_free(&r.raw);
    r = xreq_s("POST /v1/assist HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n");
    CHECK_EQ_INT(r.status, 501);
    fr_buf_free(&r.raw);

    /* a long generation keeps the drain going */
    int fd = xconnect(g_port);
    const char *body = "{\"prompt\":\"Once\",\"max_tokens\":480,\"ignore_eos\":true,\"stream\":true}";
    char head[300];
    snprintf(head, sizeof head,
             "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" AUTH_GOLD
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    ssize_t w = send(fd, head, strlen(head), MSG_NOSIGNAL);
    (void)w;
    char buf[512];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 10000) > 0 && recv(fd, buf, sizeof buf, 0) > 0); /* the stream started */
    drain_arg d = {.s = g_main.s};
    pthread_t th;
    pthread_create(&th, NULL, do_shutdown, &d);
    resp rr = {0};
    for (int i = 0; i < 100; i++) {
        rr = get("/ready", AUTH_GOLD);
        if (rr.status == 503) break;
        fr_buf_free(&rr.raw);
        usleep(20000);
    }
    CHECK_EQ_INT(rr.status, 503);
    CHECK(strstr(resp_body(&rr), "draining") != NULL);
    fr_buf_free(&rr.raw);
    r = get("/health", NULL);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    r = post("/v1/completions", AUTH_GOLD, P0_BODY, 5);
    CHECK_EQ_INT(r.status, 503);
    CHECK(resp_has_header(&r, "Retry-After"));
    fr_buf_free(&r.raw);
    close(fd); /* the long stream's client leaves: the drain ends */
    pthread_join(th, NULL);
    srv_stop(&g_main);
    g_main_up = false;
    const char *L = g_main.ledger;
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 401 AND status = "
                       "'rejected' AND route = 'completions'"), 1);
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 413 AND status = "
                       "'rejected' AND route = 'chat'"), 1);
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 501 AND status = "
                       "'rejected' AND route = 'assist'"), 1);
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 431 AND status = "
                       "'rejected'"), 1);
    /* 400s on /v1/completions: 5 framing refusals by the guard and 2 on kept-alive connections
     * (framing_answered_at_once; the Host-less ones were on /health, which has no row), 5 bad
     * X-Priority values and 1 bad body priority (strict_priority_and_tier_caps) */
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 400 AND status = "
                       "'rejected' AND route = 'completions'"), 13);
    /* 400s on /v1/assist: 5 bad X-Priority values and a bad X-Deadline-Ms (refused before the
     * handler), 3 bodies and 1 body priority (refused by the handler) */
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 400 AND status = "
                       "'rejected' AND route = 'assist'"), 10);
    CHECK_EQ_INT(q1(L, "SELECT count(*) FROM requests WHERE http_status = 411 AND status = "
                       "'rejected' AND route = 'completions'"), 1);
}

/* ---- a small server: tier slots, the pending queue, the head deadline ---- */

TEST(p2_flood_does_not_starve_p0) {
    raise_nofile();
    srv v;
    bool up = srv_start(&v, "{\"limits\": {\"max_connections\": 16, \"reserved_connections\": "
                            "{\"control\": 2, \"P0\": 4, \"P1\": 2}, \"max_pending_connections\": 8, "
                            "\"header_timeout_s\": 1}}");
    CHECK(up);
    if (!up) return;
    /* 12 P2 connections that hold their slot (the body never comes): P2 may hold 16-2-4-2 = 8 */
    int fds[12], refused = 0, retry_after = 0;
    resp rs[12];
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < 12; i++) {
        fds[i] = xconnect(g_port);
        const char *h = "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" AUTH_BATCH
                        "X-Priority: P2\r\nContent-Length: 100\r\n\r\n{";
        ssize_t w = send(fds[i], h, strlen(h), MSG_NOSIGNAL);
        (void)w;
        usleep(20000); /* in order */
    }
    for (int i = 0; i < 12; i++) {
        read_resp(fds[i], now_s(), i < 8 ? 0.05 : 2.0, &rs[i]);
        if (rs[i].status == 503) {
            refused++;
            if (resp_has_header(&rs[i], "Retry-After")) retry_after++;
            CHECK(strstr(resp_body(&rs[i]), "too_many_connections") != NULL);
        }
        fr_buf_free(&rs[i].raw);
    }
    CHECK_EQ_INT(refused, 4);
    CHECK_EQ_INT(retry_after, 4);
    resp m = get("/metrics", AUTH_GOLD);
    CHECK(strstr(resp_body(&m), "frugal_connection_slots_used{class=\"P2\"} 8\n") != NULL);
    CHECK(strstr(resp_body(&m),
                 "frugal_connections_refused_total{reason=\"no_slot\",class=\"P2\"} 4\n") != NULL);
    fr_buf_free(&m.raw);
    /* P0 and /health are served at once; P1 still fits (limit 10, 8 held) */
    resp r = post("/v1/completions", AUTH_GOLD "X-Priority: P0\r\n", P0_BODY, 10);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    r = get("/health", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.ms < 1000);
    fr_buf_free(&r.raw);
    CHECK(settle_slots(8)); /* the P0 and /health connections are gone: 8 of P1's 10 are held */
    r = post("/v1/completions", AUTH_GOLD, P0_BODY, 10);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    /* one more P2 still gets 503 */
    r = post("/v1/completions", AUTH_BATCH, P0_BODY, 3);
    CHECK_EQ_INT(r.status, 503);
    fr_buf_free(&r.raw);
    /* nor can P2 come in through a kept-alive connection whose first request was /health: its
     * slot cannot move to the full P2 class */
    char p2[400];
    snprintf(p2, sizeof p2,
             "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" AUTH_BATCH
             "Content-Length: %zu\r\n\r\n%s",
             strlen(P0_BODY), P0_BODY);
    CHECK_EQ_INT(keepalive_second(p2), 503);
    /* while a P0 request on such a connection moves its slot and is served */
    snprintf(p2, sizeof p2,
             "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" AUTH_GOLD
             "X-Priority: P0\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(P0_BODY), P0_BODY);
    CHECK_EQ_INT(keepalive_second(p2), 200);
    for (int i = 0; i < 12; i++) close(fds[i]);
    usleep(200000);

    /* the pending queue (8): a ninth silent connection pushes the oldest out with a 503; the
     * others get 408 when their head deadline (1 s) passes */
    int pend[9];
    for (int i = 0; i < 9; i++) {
        pend[i] = xconnect(g_port);
        usleep(10000);
    }
    resp first = {0};
    read_resp(pend[0], now_s(), 0.8, &first);
    CHECK_EQ_INT(first.status, 503);
    CHECK(strstr(resp_body(&first), "too_many_pending") != NULL);
    fr_buf_free(&first.raw);
    double t0 = now_s();
    resp last = {0};
    read_resp(pend[8], t0, 4, &last);
    CHECK_EQ_INT(last.status, 408);
    CHECK(last.ms < 2500);
    fr_buf_free(&last.raw);
    for (int i = 0; i < 9; i++) close(pend[i]);
    /* a kept-alive connection waits for its next head no longer than the head deadline */
    int ka = xconnect(g_port);
    const char *hreq = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    ssize_t w = send(ka, hreq, strlen(hreq), MSG_NOSIGNAL);
    (void)w;
    CHECK_EQ_INT(read_one(ka, 3), 200);
    t0 = now_s();
    CHECK_EQ_INT(read_one(ka, 6), 0); /* closed */
    CHECK(now_s() - t0 < 3.5);
    close(ka);
    r = get("/health", NULL);
    CHECK_EQ_INT(r.status, 200);
    fr_buf_free(&r.raw);
    srv_stop(&v);
    CHECK_EQ_INT(q1(v.ledger, "SELECT count(*) FROM requests WHERE http_status = 503 AND "
                              "status = 'rejected' AND tier = 'P2' AND route = 'completions'"),
                 6);
}

int main(void) {
    int rc = t_main();
    frugal_model_free(g_model);
    return rc;
}
