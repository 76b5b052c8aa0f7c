/* loadgen.c — open-loop load generator for `frugal serve` (or any OpenAI-compatible server).
 *
 * Requests arrive as a Poisson process at --rate per second (exponential gaps from a seeded
 * generator), independently of how fast the server answers (open loop: a slow server builds a
 * queue instead of slowing the arrivals). Each request picks a tier from --mix, a prompt length
 * and an output length from uniform ranges, and is sent as a streaming request
 * (stream_options.include_usage, ignore_eos so the output length is the one drawn) on its own
 * connection and thread. It records:
 *   TTFT  time from sending to the first chunk carrying generated tokens (the server's
 *         return_token_ids extension puts the new ids in every chunk, so tokens without text,
 *         common with random-weight models, are timed too; other servers: chunks with text);
 *   TPOT  (time of the last token chunk - TTFT) / (completion_tokens - 1);
 *   the status (200, 429 with Retry-After, other).
 * The report gives per tier and overall: sent, completed, refused (429), failed, throughput
 * (completed requests/s, output tokens/s), goodput (completed requests/s whose TTFT and TPOT meet
 * the tier's SLO), and p50/p90/p99 of TTFT and TPOT.
 *
 * Build: sh bench/loadgen.sh (plain C11 + pthreads + libm, no other dependency).
 * Usage: build/loadgen --url http://127.0.0.1:8080 --rate 4 --duration 30 [options], see --help.
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NT 3

typedef struct opts {
    char host[256];       /* server host */
    char port[16];        /* server port */
    const char *model;    /* "model" field */
    const char *key;      /* Bearer key or NULL */
    bool chat;            /* /v1/chat/completions instead of /v1/completions */
    double rate;          /* arrivals per second */
    double duration;      /* seconds of arrivals */
    int max_requests;     /* stop after this many arrivals (0 = duration only) */
    double mix[NT];       /* tier probabilities */
    int pmin, pmax;       /* prompt length in words */
    int omin, omax;       /* output tokens */
    double ttft_slo[NT];  /* seconds */
    double tpot_slo[NT];  /* seconds */
    uint64_t seed;
    double timeout;       /* per request, seconds */
} opts;

typedef struct result {
    int tier;
    int status;           /* HTTP status, 0 = connection failure */
    double t_send;        /* seconds since start */
    double ttft, tpot;    /* seconds; < 0 = not measured */
    int prompt_tokens, completion_tokens;
    bool complete;        /* saw [DONE] */
} result;

typedef struct job {
    const opts *o;
    result *res;
    char *body;           /* request body (owned) */
    double t0;            /* global start (monotonic) */
} job;

static atomic_int in_flight;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* xoshiro-style splitmix generator: reproducible arrivals and lengths */
static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }
static int unif_int(int lo, int hi) { return hi <= lo ? lo : lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

static const char *WORDS[] = {"bank", "card", "transfer", "balance", "account", "payment", "refund",
                              "the", "my", "please", "why", "is", "fee", "rate", "pending",
                              "declined", "limit", "cash", "top", "up", "money", "exchange",
                              "how", "long", "does", "it", "take", "to", "arrive", "today"};

static char *make_body(const opts *o, int words, int out_tokens) {
    size_t cap = (size_t)words * 12 + 512;
    char *b = malloc(cap);
    if (!b) return NULL;
    char *prompt = malloc((size_t)words * 12 + 16);
    if (!prompt) {
        free(b);
        return NULL;
    }
    size_t n = 0;
    for (int i = 0; i < words; i++)
        n += (size_t)sprintf(prompt + n, "%s%s", i ? " " : "",
                             WORDS[rnd() % (sizeof WORDS / sizeof WORDS[0])]);
    prompt[n] = 0;
    if (o->chat)
        snprintf(b, cap,
                 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,\"stream\":true,"
                 "\"return_token_ids\":true,\"stream_options\":{\"include_usage\":true}}",
                 o->model, prompt, out_tokens);
    else
        snprintf(b, cap,
                 "{\"model\":\"%s\",\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,"
                 "\"ignore_eos\":true,\"stream\":true,\"return_token_ids\":true,"
                 "\"stream_options\":{\"include_usage\":true}}",
                 o->model, prompt, out_tokens);
    free(prompt);
    return b;
}

static int connect_to(const opts *o) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(o->host, o->port, &hints, &ai) || !ai) return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct timeval tv = {(time_t)o->timeout, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}

static int json_int(const char *s, const char *key) {
    const char *p = strstr(s, key);
    return p ? atoi(p + strlen(key)) : -1;
}

/* One SSE event's data: true when it carries generated tokens (ids or text). */
static bool event_has_tokens(const char *d, bool chat) {
    const char *ids = strstr(d, "\"token_ids\":[");
    if (ids) return ids[13] != ']';
    const char *k = chat ? "\"content\":\"" : "\"text\":\"";
    const char *p = strstr(d, k);
    return p && p[strlen(k)] != '"';
}

static void *run_job(void *arg) {
    job *j = arg;
    const opts *o = j->o;
    result *r = j->res;
    r->ttft = r->tpot = -1;
    double t_send = now_s();
    r->t_send = t_send - j->t0;
    int fd = connect_to(o);
    if (fd < 0) goto out;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      "X-Priority: P%d\r\nContent-Length: %zu\r\nConnection: close\r\n%s%s%s\r\n",
                      o->chat ? "/v1/chat/completions" : "/v1/completions", o->host, r->tier,
                      strlen(j->body), o->key ? "Authorization: Bearer " : "", o->key ? o->key : "",
                      o->key ? "\r\n" : "");
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) != hl ||
        send(fd, j->body, strlen(j->body), MSG_NOSIGNAL) != (ssize_t)strlen(j->body)) {
        close(fd);
        goto out;
    }
    size_t cap = 1 << 16, len = 0, scan = 0;
    char *buf = malloc(cap);
    bool headers_done = false;
    double t_last = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0) break;
        double t = now_s();
        len += (size_t)n;
        buf[len] = 0;
        if (!headers_done) {
            char *e = strstr(buf, "\r\n\r\n");
            if (!e) continue;
            headers_done = true;
            r->status = atoi(buf + 9);
            scan = (size_t)(e + 4 - buf);
            if (r->status != 200) break;
        }
        /* events are separated by a blank line; chunked framing lines are skipped */
        for (;;) {
            char *d = strstr(buf + scan, "data: ");
            if (!d) break;
            char *end = strstr(d, "\n\n");
            if (!end) break;
            *end = 0;
            if (!strncmp(d + 6, "[DONE]", 6)) r->complete = true;
            else if (strstr(d, "\"usage\":{")) {
                r->prompt_tokens = json_int(d, "\"prompt_tokens\":");
                r->completion_tokens = json_int(d, "\"completion_tokens\":");
            } else if (event_has_tokens(d, o->chat)) {
                if (r->ttft < 0) r->ttft = t - t_send;
                t_last = t;
            }
            *end = '\n';
            scan = (size_t)(end + 2 - buf);
        }
        if (r->complete) break;
    }
    free(buf);
    close(fd);
    if (r->complete && r->ttft >= 0 && r->completion_tokens > 1)
        r->tpot = (t_last - t_send - r->ttft) / (r->completion_tokens - 1);
out:
    free(j->body);
    free(j);
    atomic_fetch_sub(&in_flight, 1);
    return NULL;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
    if (n == 0) return NAN;
    int i = (int)floor(p / 100.0 * n);
    if (i >= n) i = n - 1;
    return v[i];
}

static void parse_triple(const char *s, double out[NT]) {
    char *e;
    for (int t = 0; t < NT; t++) {
        out[t] = strtod(s, &e);
        if (*e != ',') break;
        s = e + 1;
    }
}
static void parse_range(const char *s, int *lo, int *hi) {
    char *e;
    *lo = (int)strtol(s, &e, 10);
    *hi = *e == ':' ? (int)strtol(e + 1, NULL, 10) : *lo;
    if (*hi < *lo) *hi = *lo;
}

static void usage(void) {
    puts("usage: loadgen --url http://HOST:PORT [options]\n"
         "  --rate R            arrivals per second (Poisson; default 2)\n"
         "  --duration S        seconds of arrivals (default 20)\n"
         "  --requests N        stop after N arrivals (default: duration only)\n"
         "  --mix a,b,c         share of P0,P1,P2 (default 0.2,0.3,0.5)\n"
         "  --prompt MIN:MAX    prompt length in words, uniform (default 16:128)\n"
         "  --output MIN:MAX    output tokens, uniform (default 16:64)\n"
         "  --ttft-slo a,b,c    TTFT targets of P0,P1,P2 in seconds (default 0.2,1,10)\n"
         "  --tpot-slo a,b,c    TPOT targets in seconds (default 0.05,0.1,0.5)\n"
         "  --model NAME        model field (default qwen2-tiny)\n"
         "  --key KEY           Bearer API key\n"
         "  --chat              use /v1/chat/completions (default /v1/completions)\n"
         "  --seed N            random seed (default 1)\n"
         "  --timeout S         per-request receive timeout (default 300)");
}

int main(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    snprintf(o.host, sizeof o.host, "127.0.0.1");
    snprintf(o.port, sizeof o.port, "8080");
    o.model = "qwen2-tiny";
    o.rate = 2;
    o.duration = 20;
    o.mix[0] = 0.2, o.mix[1] = 0.3, o.mix[2] = 0.5;
    o.pmin = 16, o.pmax = 128, o.omin = 16, o.omax = 64;
    o.ttft_slo[0] = 0.2, o.ttft_slo[1] = 1, o.ttft_slo[2] = 10;
    o.tpot_slo[0] = 0.05, o.tpot_slo[1] = 0.1, o.tpot_slo[2] = 0.5;
    o.seed = 1;
    o.timeout = 300;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--chat")) {
            o.chat = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "loadgen: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--url")) {
            const char *h = strstr(v, "://");
            h = h ? h + 3 : v;
            const char *c = strrchr(h, ':');
            size_t hl = c ? (size_t)(c - h) : strcspn(h, "/");
            snprintf(o.host, sizeof o.host, "%.*s", (int)hl, h);
            if (c) snprintf(o.port, sizeof o.port, "%.*s", (int)strcspn(c + 1, "/"), c + 1);
        } else if (!strcmp(a, "--rate")) o.rate = atof(v);
        else if (!strcmp(a, "--duration")) o.duration = atof(v);
        else if (!strcmp(a, "--requests")) o.max_requests = atoi(v);
        else if (!strcmp(a, "--mix")) parse_triple(v, o.mix);
        else if (!strcmp(a, "--prompt")) parse_range(v, &o.pmin, &o.pmax);
        else if (!strcmp(a, "--output")) parse_range(v, &o.omin, &o.omax);
        else if (!strcmp(a, "--ttft-slo")) parse_triple(v, o.ttft_slo);
        else if (!strcmp(a, "--tpot-slo")) parse_triple(v, o.tpot_slo);
        else if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--key")) o.key = v;
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--timeout")) o.timeout = atof(v);
        else {
            fprintf(stderr, "loadgen: unknown option %s\n", a);
            return 2;
        }
    }
    if (!(o.rate > 0) || o.omin < 1 || o.pmin < 1) {
        fprintf(stderr, "loadgen: --rate, --prompt and --output must be positive\n");
        return 2;
    }
    double msum = o.mix[0] + o.mix[1] + o.mix[2];
    if (!(msum > 0)) msum = 1, o.mix[0] = 1;
    rng_state = o.seed;

    int cap = o.max_requests > 0 ? o.max_requests : (int)(o.rate * o.duration * 1.5 + 64);
    result *res = calloc((size_t)cap, sizeof *res);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    double t0 = now_s(), next = 0;
    int n = 0;
    for (; n < cap; n++) {
        next += -log(1.0 - unif()) / o.rate;
        if (o.max_requests == 0 && next > o.duration) break;
        double u = unif() * msum;
        int tier = u < o.mix[0] ? 0 : u < o.mix[0] + o.mix[1] ? 1 : 2;
        int words = unif_int(o.pmin, o.pmax), out = unif_int(o.omin, o.omax);
        job *j = calloc(1, sizeof *j);
        j->o = &o;
        j->res = &res[n];
        j->t0 = t0;
        j->body = make_body(&o, words, out);
        res[n].tier = tier;
        double wait = t0 + next - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
            nanosleep(&ts, NULL);
        }
        atomic_fetch_add(&in_flight, 1);
        pthread_t th;
        if (pthread_create(&th, &attr, run_job, j) != 0) {
            atomic_fetch_sub(&in_flight, 1);
            free(j->body);
            free(j);
            res[n].status = 0;
        }
    }
    double t_arrivals = now_s() - t0;
    while (atomic_load(&in_flight) > 0 && now_s() - t0 < t_arrivals + o.timeout) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double wall = now_s() - t0;

    printf("# loadgen: %s:%s %s, rate %.2f/s, %d requests over %.1f s (arrivals %.1f s), mix "
           "%.2f/%.2f/%.2f, prompt %d..%d words, output %d..%d tokens, seed %llu\n",
           o.host, o.port, o.chat ? "chat" : "completions", o.rate, n, wall, t_arrivals,
           o.mix[0] / msum, o.mix[1] / msum, o.mix[2] / msum, o.pmin, o.pmax, o.omin, o.omax,
           (unsigned long long)o.seed);
    printf("%-4s %5s %5s %5s %5s %8s %9s %8s %8s %8s %8s %8s %8s %8s\n", "tier", "sent", "ok",
           "429", "fail", "req/s", "out_tok/s", "goodput", "ttft50", "ttft90", "ttft99", "tpot50",
           "tpot90", "tpot99");
    double *tt = malloc(sizeof(double) * (size_t)(n + 1)), *tp = malloc(sizeof(double) * (size_t)(n + 1));
    for (int t = -1; t < NT; t++) {
        int sent = 0, ok = 0, r429 = 0, failed = 0, good = 0, ntt = 0, ntp = 0;
        long long out_tok = 0;
        for (int i = 0; i < n; i++) {
            result *r = &res[i];
            if (t >= 0 && r->tier != t) continue;
            sent++;
            if (r->status == 429) {
                r429++;
                continue;
            }
            if (r->status != 200 || !r->complete) {
                failed++;
                continue;
            }
            ok++;
            out_tok += r->completion_tokens;
            if (r->ttft >= 0) tt[ntt++] = r->ttft;
            if (r->tpot >= 0) tp[ntp++] = r->tpot;
            if (r->ttft >= 0 && r->ttft <= o.ttft_slo[r->tier] &&
                (r->tpot < 0 || r->tpot <= o.tpot_slo[r->tier]))
                good++;
        }
        qsort(tt, (size_t)ntt, sizeof *tt, cmp_d);
        qsort(tp, (size_t)ntp, sizeof *tp, cmp_d);
        char name[8];
        snprintf(name, sizeof name, t < 0 ? "all" : "P%d", t);
        printf("%-4s %5d %5d %5d %5d %8.2f %9.1f %8.2f %8.3f %8.3f %8.3f %8.4f %8.4f %8.4f\n", name,
               sent, ok, r429, failed, ok / wall, out_tok / wall, good / wall, pct(tt, ntt, 50),
               pct(tt, ntt, 90), pct(tt, ntt, 99), pct(tp, ntp, 50), pct(tp, ntp, 90),
               pct(tp, ntp, 99));
    }
    printf("# goodput = completed requests/s meeting their tier's TTFT (%.3g/%.3g/%.3g s) and "
           "TPOT (%.3g/%.3g/%.3g s) targets; times in seconds\n",
           o.ttft_slo[0], o.ttft_slo[1], o.ttft_slo[2], o.tpot_slo[0], o.tpot_slo[1],
           o.tpot_slo[2]);
    free(tt);
    free(tp);
    if (atomic_load(&in_flight) == 0) free(res); /* else a late thread may still write to it */
    return 0;
}
