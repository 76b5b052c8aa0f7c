/* slowloris.c — how much slow clients delay everyone else on a running `frugal serve`.
 *
 *   build/slowloris --port N [--slow 1000] [--interval 2] [--samples 400] [--p0-samples 100]
 *                   [--key KEY]
 *
 * Measures, one request at a time on a fresh connection each (Connection: close), the latency of
 * GET /health and of a P0 completion (1 token), first alone, then while --slow connections each
 * send one byte of an endless request head every --interval seconds (round-robin from one
 * thread). Prints p50 / p90 / p99 / max per phase and how many slow connections the server
 * answered or closed meanwhile (the guard holds them until its head deadline: start the server
 * with a long `limits.header_timeout_s`, as bench/slowloris.sh does). Raises its own
 * RLIMIT_NOFILE to the hard limit.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_port = 8080;
static const char *g_key;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int xconnect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* One request; its latency in ms, or -1 when it failed (no 200 within 10 s). */
static double one(const char *req) {
    double t0 = now_s();
    int fd = xconnect();
    if (fd < 0) return -1;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        close(fd);
        return -1;
    }
    char buf[4096];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0) break;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
        if (got >= sizeof buf - 1) got = 12; /* keep the status line only */
    }
    close(fd);
    buf[got] = 0;
    return got >= 12 && !strncmp(buf + 9, "200", 3) ? (now_s() - t0) * 1000 : -1;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n) {
    int ok = 0;
    for (int i = 0; i < n; i++)
        if (v[i] >= 0) v[ok++] = v[i];
    if (!ok) {
        printf("%-28s all %d failed\n", what, n);
        return;
    }
    qsort(v, (size_t)ok, sizeof *v, cmp_d);
#define P(q) v[(int)((q) * (ok - 1) + 0.5)]
    printf("%-28s n %4d  failed %3d  p50 %7.2f  p90 %7.2f  p99 %7.2f  max %7.2f ms\n", what, ok,
           n - ok, P(0.5), P(0.9), P(0.99), v[ok - 1]);
#undef P
}

typedef struct slow {
    int *fd;
    int n;
    double interval;
    atomic_bool stop;
    long long bytes;
} slow;

static void *drip(void *arg) {
    slow *s = arg;
    double per = s->interval / s->n; /* seconds between two bytes */
    double next = now_s();
    for (int i = 0; !atomic_load(&s->stop); i = (i + 1) % s->n) {
        if (s->fd[i] >= 0 && send(s->fd[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) s->bytes++;
        next += per;
        double d = next - now_s();
        if (d > 0) {
            struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void measure(const char *phase, int n_health, int n_p0) {
    char health[] = "GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n";
    const char *body = "{\"prompt\":\"Hi\",\"max_tokens\":1,\"temperature\":0}";
    char p0[512];
    snprintf(p0, sizeof p0,
             "POST /v1/completions HTTP/1.1\r\nHost: b\r\nConnection: close\r\nX-Priority: P0\r\n"
             "%s%s%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             g_key ? "Authorization: Bearer " : "", g_key ? g_key : "", g_key ? "\r\n" : "",
             strlen(body), body);
    double *h = calloc((size_t)n_health, sizeof *h), *q = calloc((size_t)n_p0, sizeof *q);
    for (int i = 0; i < n_health; i++) h[i] = one(health);
    for (int i = 0; i < n_p0; i++) q[i] = one(p0);
    char name[64];
    snprintf(name, sizeof name, "/health, %s", phase);
    report(name, h, n_health);
    snprintf(name, sizeof name, "P0 completion, %s", phase);
    report(name, q, n_p0);
    free(h);
    free(q);
}

int main(int argc, char **argv) {
    int n_slow = 1000, n_health = 400, n_p0 = 100;
    double interval = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) g_port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--slow")) n_slow = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--interval")) interval = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--samples")) n_health = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--p0-samples")) n_p0 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--key")) g_key = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (n_slow < 1 || n_health < 1 || n_p0 < 1 || interval <= 0) return 2;
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (int i = 0; i < 20; i++) one("GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n");
    measure("alone", n_health, n_p0);
    slow s = {.fd = calloc((size_t)n_slow, sizeof(int)), .n = n_slow, .interval = interval};
    int opened = 0;
    const char *start = "GET /health HTTP/1.1\r\nHost: b\r\nX-Slow: ";
    for (int i = 0; i < n_slow; i++) {
        s.fd[i] = xconnect();
        if (s.fd[i] >= 0 && send(s.fd[i], start, strlen(start), MSG_NOSIGNAL) > 0) opened++;
    }
    pthread_t th;
    pthread_create(&th, NULL, drip, &s);
    struct timespec warm = {(time_t)interval + 1, 0};
    nanosleep(&warm, NULL); /* every slow connection has dripped a byte */
    char phase[64];
    snprintf(phase, sizeof phase, "%d slow", opened);
    measure(phase, n_health, n_p0);
    atomic_store(&s.stop, true);
    pthread_join(th, NULL);
    int answered = 0;
    for (int i = 0; i < n_slow; i++) {
        struct pollfd p = {.fd = s.fd[i], .events = POLLIN};
        if (s.fd[i] >= 0 && poll(&p, 1, 0) > 0) answered++;
        if (s.fd[i] >= 0) close(s.fd[i]);
    }
    printf("slow connections: %d opened, %lld header bytes dripped (one per connection every "
           "%.1f s), %d answered or closed by the server meanwhile\n",
           opened, s.bytes, interval, answered);
    free(s.fd);
    return 0;
}
