/* assist_load.c — closed-loop load generator for POST /v1/assist: C keep-alive connections (one
 * thread each) send the same request body back to back for D seconds. Reports requests/s, client
 * latency percentiles and server-side latency percentiles (the response's timings_ms.total: from
 * the handler's entry to the response body, i.e. without the HTTP library's own time).
 *
 *   cc -O2 -pthread -o build/assist_load bench/assist/assist_load.c -lm
 *   build/assist_load HOST PORT CONNECTIONS SECONDS BODY_FILE
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXS 4000000

static const char *host;  /* server address */
static int port;          /* server port */
static double dur;        /* seconds */
static char *req;         /* full HTTP request */
static size_t req_len;    /* its length */
static double *lat, *srv; /* samples (ms) */
static long n_lat, n_err; /* sample count, failures */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *worker(void *arg) {
    (void)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return NULL; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static __thread char buf[1 << 16];
    double end = now() + dur;
    while (now() < end) {
        double t0 = now();
        if (write(fd, req, req_len) != (ssize_t)req_len) { n_err++; break; }
        size_t got = 0, need = 0;
        char *body = NULL;
        for (;;) {
            ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
            if (r <= 0) goto out;
            got += (size_t)r;
            buf[got] = 0;
            char *h = strstr(buf, "\r\n\r\n");
            if (h && !need) {
                char *cl = strcasestr(buf, "Content-Length:");
                need = (size_t)(h + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
                body = h + 4;
            }
            if (need && got >= need) break;
        }
        double ms = (now() - t0) * 1e3;
        char *t = strstr(body, "\"total\":");
        pthread_mutex_lock(&mu);
        if (n_lat < MAXS && !strncmp(buf + 9, "200", 3)) {
            lat[n_lat] = ms;
            srv[n_lat] = t ? atof(t + 8) : -1;
            n_lat++;
        } else {
            n_err++;
        }
        pthread_mutex_unlock(&mu);
    }
out:
    close(fd);
    return NULL;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double pct(double *v, long n, double p) { return n ? v[(long)(p * (double)(n - 1))] : 0; }

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: assist_load HOST PORT CONNECTIONS SECONDS BODY_FILE\n");
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    int c = atoi(argv[3]);
    dur = atof(argv[4]);
    FILE *f = fopen(argv[5], "rb");
    if (!f) { perror(argv[5]); return 1; }
    static char body[1 << 20];
    size_t bl = fread(body, 1, sizeof body, f);
    fclose(f);
    req = malloc(bl + 256);
    req_len = (size_t)sprintf(req, "POST /v1/assist HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                              "application/json\r\nContent-Length: %zu\r\n\r\n", host, bl);
    memcpy(req + req_len, body, bl);
    req_len += bl;
    lat = malloc(MAXS * sizeof *lat);
    srv = malloc(MAXS * sizeof *srv);
    pthread_t th[1024];
    double t0 = now();
    for (int i = 0; i < c && i < 1024; i++) pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < c && i < 1024; i++) pthread_join(th[i], NULL);
    double el = now() - t0;
    qsort(lat, (size_t)n_lat, sizeof *lat, cmp);
    qsort(srv, (size_t)n_lat, sizeof *srv, cmp);
    printf("connections %d, %.1f s: %ld ok, %ld errors, %.0f req/s\n", c, el, n_lat, n_err,
           (double)n_lat / el);
    printf("client latency ms: p50 %.3f p90 %.3f p99 %.3f\n", pct(lat, n_lat, .5),
           pct(lat, n_lat, .9), pct(lat, n_lat, .99));
    printf("server-side ms (timings_ms.total): p50 %.3f p90 %.3f p99 %.3f\n", pct(srv, n_lat, .5),
           pct(srv, n_lat, .9), pct(srv, n_lat, .99));
    return 0;
}
