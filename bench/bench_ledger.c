/* bench_ledger.c — the cost of the ledger's durability (docs/METERING.md, "Ledger").
 *
 * Three modes:
 *   throughput  producers queue requests as the server does (a provisional row, then its final
 *               row with 4 stage cells) as fast as the bounded queue takes them, without waiting;
 *               reports committed requests/s (each = 1 insert + 1 update + 4 cell inserts).
 *   latency     open-loop arrivals at --rate per second (exponential gaps, 64 client threads):
 *               each queues its provisional row, waits for it to be committed
 *               (fr_ledger_wait: what a response waits for), then queues the final row; reports
 *               p50/p90/p99/max of queue-to-durable.
 *   server URL  closed loop against a running `frugal serve`: --clients connections each send
 *               POST /v1/completions (max_tokens 1, non-streaming) back to back for --seconds;
 *               reports requests/s and p50/p99 latency (run it with the ledger on and off: the
 *               difference is what the durability costs a request end to end).
 *
 * Build and run: sh bench/bench_ledger.sh (it builds this against build/libfrugal.a).
 *   build/bench_ledger throughput --db F [--sync normal|full] [--seconds S] [--threads T]
 *   build/bench_ledger latency --db F --rate R [--sync normal|full] [--seconds S]
 *   build/bench_ledger server --url http://127.0.0.1:PORT [--clients C] [--seconds S]
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/flags.h"
#include "meter/ledger.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double p) {
    if (n <= 0) return NAN;
    long i = (long)ceil(p / 100.0 * (double)n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ---- options --------------------------------------------------------------------------------- */

typedef struct opts {
    const char *mode, *db, *url;
    int sync_full, threads, clients;
    double seconds, rate;
} opts;

static fr_ledger *open_ledger(const opts *o) {
    remove(o->db);
    char aux[1100];
    snprintf(aux, sizeof aux, "%s-wal", o->db);
    remove(aux);
    snprintf(aux, sizeof aux, "%s-shm", o->db);
    remove(aux);
    fr_ledger_config lc = {.path = o->db, .queue = 4096, .sync_full = o->sync_full != 0};
    fr_err err = {0};
    fr_ledger *l = fr_ledger_open(&lc, &err);
    if (!l) fprintf(stderr, "bench_ledger: %s\n", err.msg);
    return l;
}

/* A row shaped like the server's (ids, route, tier, stages, 4 cells). */
static void make_row(fr_ledger_row *r, fr_ledger_cell *cells, long i) {
    memset(r, 0, sizeof *r);
    snprintf(r->req_id, sizeof r->req_id, "req-%016lx", (unsigned long)i * 2654435761u);
    snprintf(r->trace_id, sizeof r->trace_id, "%016lx%016lx", (unsigned long)i, (unsigned long)~i);
    snprintf(r->api_key_id, sizeof r->api_key_id, "key-1a2b3c4d");
    snprintf(r->route, sizeof r->route, "chat");
    snprintf(r->tier, sizeof r->tier, "P1");
    snprintf(r->modality, sizeof r->modality, "text");
    snprintf(r->stages, sizeof r->stages, "queue,prefill,decode");
    snprintf(r->status, sizeof r->status, "ok");
    snprintf(r->features, sizeof r->features, "{}");
    snprintf(r->energy_source, sizeof r->energy_source, "cpu:estimated");
    r->http_status = 200;
    r->tokens_in = 40;
    r->tokens_out = 64;
    r->t_start = 1.8e9 + (double)i * 1e-3;
    r->t_end = r->t_start + 0.5;
    r->latency_s = 0.5;
    r->ttft_s = 0.05;
    r->slo_met = 1;
    r->joules = 1.25;
    r->incomplete = true;
    static const fr_meter_stage st[4] = {FR_MSTAGE_QUEUE, FR_MSTAGE_PREFILL, FR_MSTAGE_DECODE,
                                         FR_MSTAGE_RESPOND};
    for (int k = 0; k < 4; k++)
        cells[k] = (fr_ledger_cell){"cpu", st[k], 0.1, 0.3, 0.1};
    snprintf(cells[0].device, sizeof cells[0].device, "%s", "");
}

/* ---- throughput ------------------------------------------------------------------------------ */

typedef struct prod {
    fr_ledger *l;
    double until;
    long id0, n;
    long refused; /* puts refused (queue full) and retried */
} prod;

static uint64_t put_retry(fr_ledger *l, const fr_ledger_row *r, uint64_t ref, bool final, long *refused) {
    for (;;) {
        uint64_t s = final ? fr_ledger_put_final(l, ref, r) : fr_ledger_put_seq(l, r);
        if (s) return s;
        (*refused)++;
        sleep_s(50e-6);
    }
}

static void *producer(void *arg) {
    prod *p = arg;
    fr_ledger_row r;
    fr_ledger_cell cells[4];
    for (long i = 0; now_s() < p->until; i++) {
        make_row(&r, cells, p->id0 + i);
        uint64_t seq = put_retry(p->l, &r, 0, false, &p->refused);
        r.incomplete = false;
        r.cells = cells;
        r.n_cells = 4;
        put_retry(p->l, &r, seq, true, &p->refused);
        p->n++;
    }
    return NULL;
}

static int run_throughput(const opts *o) {
    fr_ledger *l = open_ledger(o);
    if (!l) return 1;
    int nt = o->threads > 0 ? o->threads : 2;
    prod *p = calloc((size_t)nt, sizeof *p);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    double t0 = now_s();
    for (int i = 0; i < nt; i++) {
        p[i] = (prod){l, t0 + o->seconds, (long)i * 100000000L, 0, 0};
        pthread_create(&th[i], NULL, producer, &p[i]);
    }
    long n = 0, refused = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        n += p[i].n;
        refused += p[i].refused;
    }
    fr_ledger_flush(l);
    double dt = now_s() - t0;
    long committed = fr_ledger_committed(l);
    fr_ledger_close(l);
    printf("throughput  sync=%s threads=%d: %ld requests (insert + update + 4 cells each) committed "
           "in %.2f s = %.0f requests/s; %ld puts found the queue full and retried\n",
           o->sync_full ? "full" : "normal", nt, committed, dt, (double)committed / dt, refused);
    free(p);
    free(th);
    return committed == n ? 0 : 1;
}

/* ---- latency --------------------------------------------------------------------------------- */

#define LAT_THREADS 64

typedef struct lat {
    fr_ledger *l;
    double t0, until, rate; /* per-thread rate */
    unsigned seed;
    long id0;
    double *v;             /* samples (seconds) */
    long n, cap, failed;
} lat;

static void *latency_client(void *arg) {
    lat *c = arg;
    fr_ledger_row r;
    fr_ledger_cell cells[4];
    double t = c->t0;
    for (long i = 0;; i++) {
        double u = (rand_r(&c->seed) + 1.0) / ((double)RAND_MAX + 2.0);
        t += -log(u) / c->rate;
        if (t >= c->until) break;
        sleep_s(t - now_s());
        make_row(&r, cells, c->id0 + i);
        double a = now_s();
        uint64_t seq = fr_ledger_put_seq(c->l, &r);
        if (!seq || fr_ledger_wait(c->l, seq, 10.0)) {
            c->failed++;
            continue;
        }
        double b = now_s();
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 1024;
            c->v = realloc(c->v, (size_t)c->cap * sizeof *c->v);
        }
        c->v[c->n++] = b - a;
        r.incomplete = false;
        r.cells = cells;
        r.n_cells = 4;
        fr_ledger_put_final(c->l, seq, &r);
    }
    return NULL;
}

static int run_latency(const opts *o) {
    fr_ledger *l = open_ledger(o);
    if (!l) return 1;
    lat *c = calloc(LAT_THREADS, sizeof *c);
    pthread_t th[LAT_THREADS];
    double t0 = now_s() + 0.05;
    for (int i = 0; i < LAT_THREADS; i++) {
        c[i] = (lat){.l = l, .t0 = t0, .until = t0 + o->seconds, .rate = o->rate / LAT_THREADS,
                     .seed = 12345u + (unsigned)i, .id0 = (long)i * 100000000L};
        pthread_create(&th[i], NULL, latency_client, &c[i]);
    }
    long n = 0, failed = 0;
    for (int i = 0; i < LAT_THREADS; i++) {
        pthread_join(th[i], NULL);
        n += c[i].n;
        failed += c[i].failed;
    }
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    long k = 0;
    for (int i = 0; i < LAT_THREADS; i++) {
        memcpy(v + k, c[i].v, (size_t)c[i].n * sizeof *v);
        k += c[i].n;
        free(c[i].v);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    fr_ledger_close(l);
    printf("latency     sync=%s rate=%.0f/s: %ld requests (%.0f/s achieved), queue-to-durable "
           "p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms; %ld failed\n",
           o->sync_full ? "full" : "normal", o->rate, n, (double)n / o->seconds, pct(v, n, 50) * 1e3,
           pct(v, n, 90) * 1e3, pct(v, n, 99) * 1e3, n ? v[n - 1] * 1e3 : NAN, failed);
    free(v);
    free(c);
    return failed ? 1 : 0;
}

/* ---- server ---------------------------------------------------------------------------------- */

typedef struct cli {
    const char *host, *port;
    double until;
    double *v;
    long n, cap, errors;
} cli;

/* One POST /v1/completions on its own connection: the HTTP status, or -1. */
static int one_request(const char *host, const char *port) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai) || !ai) return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    static const char body[] = "{\"prompt\":\"Once upon a time\",\"max_tokens\":1}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     host, sizeof body - 1, body);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    char buf[8192];
    size_t got = 0;
    ssize_t k;
    while ((k = read(fd, buf + got, sizeof buf - 1 - got)) > 0) {
        got += (size_t)k;
        if (got >= sizeof buf - 1) got = 16; /* keep the status line, drop the rest */
    }
    close(fd);
    buf[got] = 0;
    int status = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    return status;
}

static void *server_client(void *arg) {
    cli *c = arg;
    while (now_s() < c->until) {
        double a = now_s();
        int st = one_request(c->host, c->port);
        double b = now_s();
        if (st != 200) {
            c->errors++;
            continue;
        }
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 1024;
            c->v = realloc(c->v, (size_t)c->cap * sizeof *c->v);
        }
        c->v[c->n++] = b - a;
    }
    return NULL;
}

static int run_server(const opts *o) {
    char host[256], port[16];
    if (sscanf(o->url, "http://%255[^:/]:%15[0-9]", host, port) != 2) {
        fprintf(stderr, "bench_ledger: --url must be http://HOST:PORT\n");
        return 2;
    }
    int nc = o->clients > 0 ? o->clients : 8;
    cli *c = calloc((size_t)nc, sizeof *c);
    pthread_t *th = calloc((size_t)nc, sizeof *th);
    double t0 = now_s();
    for (int i = 0; i < nc; i++) {
        c[i] = (cli){.host = host, .port = port, .until = t0 + o->seconds};
        pthread_create(&th[i], NULL, server_client, &c[i]);
    }
    long n = 0, errors = 0;
    for (int i = 0; i < nc; i++) {
        pthread_join(th[i], NULL);
        n += c[i].n;
        errors += c[i].errors;
    }
    double dt = now_s() - t0;
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    long k = 0;
    for (int i = 0; i < nc; i++) {
        memcpy(v + k, c[i].v, (size_t)c[i].n * sizeof *v);
        k += c[i].n;
        free(c[i].v);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("server      clients=%d: %ld requests in %.1f s = %.1f requests/s, latency p50 %.2f ms, "
           "p99 %.2f ms; %ld not 200\n",
           nc, n, dt, (double)n / dt, pct(v, n, 50) * 1e3, pct(v, n, 99) * 1e3, errors);
    free(v);
    free(c);
    free(th);
    return 0;
}

int main(int argc, char **argv) {
    opts o = {.db = "bench-ledger.db", .seconds = 5, .threads = 2, .clients = 8, .rate = 1000};
    if (argc < 2) {
        fprintf(stderr, "usage: bench_ledger throughput|latency|server [--db F] [--sync normal|full] "
                        "[--seconds S] [--threads T] [--rate R] [--url U] [--clients C]\n");
        return 2;
    }
    o.mode = argv[1];
    const char *sync = "normal";
    fr_flags f; /* base/flags.h, after the mode */
    fr_flags_init(&f, "bench_ledger", argc - 1, argv + 1);
    while (fr_flags_next(&f)) {
        if (fr_flag_str(&f, "--db", &o.db) || fr_flag_str(&f, "--sync", &sync) ||
            fr_flag_double(&f, "--seconds", 0.001, 1e6, &o.seconds) ||
            fr_flag_int(&f, "--threads", 1, 1024, &o.threads) ||
            fr_flag_double(&f, "--rate", 0.001, 1e9, &o.rate) || fr_flag_str(&f, "--url", &o.url) ||
            fr_flag_int(&f, "--clients", 1, 100000, &o.clients))
            continue;
        return fr_flags_unknown(&f);
    }
    if (f.rc) return f.rc;
    if (strcmp(sync, "normal") && strcmp(sync, "full")) return fr_flags_fail(&f, "--sync must be normal or full");
    o.sync_full = !strcmp(sync, "full");
    fr_log_level = FR_LOG_ERROR; /* throughput fills the queue on purpose: no "queue full" lines */
    if (!strcmp(o.mode, "throughput")) return run_throughput(&o);
    if (!strcmp(o.mode, "latency")) return run_latency(&o);
    if (!strcmp(o.mode, "server") && o.url) return run_server(&o);
    fprintf(stderr, "bench_ledger: unknown mode %s (or server without --url)\n", o.mode);
    return 2;
}
