/* guard.c — accept-then-classify front of the HTTP server (design in guard.h).
 *
 * One thread, one epoll set: the listening socket (level-triggered), a wake-up eventfd, and
 * every connection the guard still holds, edge-triggered. A held connection is either pending
 * (its head is peeked again each time bytes arrive, into one shared buffer of
 * max_head_bytes + 4 KiB, so the first chunk line of a chunked body can be checked too) or
 * lingering (answered, its write side shut, its input read and dropped until EOF or 2 s). Both
 * kinds sit on FIFO lists in deadline order, so expiry looks at the list heads only.
 *
 * The slot counters are under one mutex; the fd -> class table that carries a slot from the
 * handoff to the HTTP layer's connection start is an array of atomics indexed by fd.
 */
#include "serve/guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "serve/api.h"

#define LINGER_S 2.0
#define PEEK_EXTRA 4096
#define MAX_EVENTS 256
#define MAX_FD_TABLE (1 << 20)

typedef struct gconn {
    int fd;
    bool lingering;         /* answered; waiting for EOF */
    double deadline;        /* head deadline, or end of the linger */
    struct gconn *prev, *next;
    struct sockaddr_storage addr;
    socklen_t alen;
} gconn;

typedef struct glist {
    gconn *head, *tail;
    int n;
} glist;

struct fr_guard {
    fr_guard_config cfg;
    fr_guard_hooks hooks;
    int lfd;                         /* listening socket (owned) */
    int efd;                         /* eventfd: stop */
    int ep;                          /* epoll set */
    pthread_t th;
    bool started;
    char *buf;                       /* peek buffer */
    size_t bufcap;
    glist pending, linger;
    double accept_paused_until;      /* out of fds: accept again after this */
    /* slots */
    pthread_mutex_t mu;
    int open[FR_GUARD_N_CLASSES];
    int open_total;
    int limit[FR_GUARD_N_CLASSES];   /* most slots in use when class k may take one */
    _Atomic signed char *fd_cls;     /* class handed over on fd, or -1 */
    int fd_cap;
    /* stats (guard thread writes, others read) */
    atomic_llong refused[FR_GUARD_N_CLASSES + 1];
    atomic_llong head_errors, head_timeouts;
    atomic_int n_pending;
};

static char listen_tag, wake_tag; /* epoll data for the two non-connection fds */

/* ---- lists ---- */

static void list_push(glist *l, gconn *c) {
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail) l->tail->next = c;
    else l->head = c;
    l->tail = c;
    l->n++;
}

static void list_del(glist *l, gconn *c) {
    if (c->prev) c->prev->next = c->next;
    else l->head = c->next;
    if (c->next) c->next->prev = c->prev;
    else l->tail = c->prev;
    c->prev = c->next = NULL;
    l->n--;
}

static void conn_close(fr_guard *g, gconn *c) {
    list_del(c->lingering ? &g->linger : &g->pending, c);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
    atomic_store(&g->n_pending, g->pending.n);
}

/* ---- answers ---- */

static const char *reason_phrase(int st) {
    switch (st) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* Reads and drops what the client sent so far (so that closing does not reset the connection
 * and destroy the answer before the client reads it). False on EOF or error. */
static bool drain_input(int fd, char *scratch, size_t cap) {
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, scratch, cap, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n < 0 && errno == EINTR) continue;
        return false;
    }
    return true;
}

/* Answers `status` on a pending connection and moves it to the linger list. */
static void answer(fr_guard *g, gconn *c, const fr_http_head *h, int status, const char *code,
                   const char *detail) {
    char tp[56] = "";
    if (g->hooks.refused) g->hooks.refused(g->hooks.cls, h, status, tp);
    fr_api_error e;
    const char *type = status == 503 ? "server_error"
                       : status == 501 || status == 505 ? "not_supported_error"
                                                        : "invalid_request_error";
    fr_api_error_set(&e, status, type, code, NULL, "%s", detail);
    char *body = fr_api_error_json(&e);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n%s%s%s%s\r\n",
                     status, reason_phrase(status), strlen(body),
                     status == 503 ? "Retry-After: 1\r\n" : "", tp[0] ? "traceparent: " : "", tp,
                     tp[0] ? "\r\n" : "");
    fr_buf out = {0};
    fr_buf_append(&out, head, (size_t)n);
    fr_buf_puts(&out, body);
    free(body);
    bool ok = drain_input(c->fd, g->buf, g->bufcap);
    ssize_t w = ok ? send(c->fd, out.data, out.len, MSG_NOSIGNAL | MSG_DONTWAIT) : -1;
    fr_buf_free(&out);
    if (w < 0 || shutdown(c->fd, SHUT_WR)) {
        conn_close(g, c);
        return;
    }
    list_del(&g->pending, c);
    atomic_store(&g->n_pending, g->pending.n);
    c->lingering = true;
    c->deadline = fr_time_s() + LINGER_S;
    list_push(&g->linger, c); /* capped in expire(): no gconn is freed inside an event batch */
}

/* ---- slots ---- */

void fr_guard_config_reserves(fr_guard_config *c) {
    int n = c->max_connections > 0 ? c->max_connections : 1;
    c->max_connections = n;
    const int dflt[3] = {FR_MAX(1, n / 32), FR_MAX(1, n / 8), n / 16};
    for (int k = 0; k < 3; k++)
        if (c->reserved[k] < 0) c->reserved[k] = dflt[k];
    c->reserved[FR_GUARD_P2] = 0;
    /* every class keeps a slot: shrink the reserves from the worst class up */
    for (int k = 2; k >= 0; k--) {
        int sum = c->reserved[0] + c->reserved[1] + c->reserved[2];
        if (sum <= n - 1) break;
        int over = sum - (n - 1);
        int cut = FR_MIN(over, c->reserved[k]);
        c->reserved[k] -= cut;
    }
}

static bool slot_take_locked(fr_guard *g, int cls) {
    if (g->open_total >= g->limit[cls]) return false;
    g->open_total++;
    g->open[cls]++;
    return true;
}

static void slot_give_locked(fr_guard *g, int cls) {
    g->open_total--;
    g->open[cls]--;
}

int fr_guard_slot_claim(fr_guard *g, int fd) {
    if (!g || fd < 0 || fd >= g->fd_cap) return -1;
    return atomic_exchange(&g->fd_cls[fd], (signed char)-1);
}

void fr_guard_slot_release(fr_guard *g, int cls) {
    if (!g || cls < 0 || cls >= FR_GUARD_N_CLASSES) return;
    pthread_mutex_lock(&g->mu);
    slot_give_locked(g, cls);
    pthread_mutex_unlock(&g->mu);
}

bool fr_guard_slot_move(fr_guard *g, int from, int to) {
    if (!g || from == to) return true;
    if (from < 0 || from >= FR_GUARD_N_CLASSES || to < 0 || to >= FR_GUARD_N_CLASSES)
        return false;
    pthread_mutex_lock(&g->mu);
    slot_give_locked(g, from);
    bool ok = slot_take_locked(g, to);
    if (!ok) { /* back as it was, whatever from's limit says now */
        g->open_total++;
        g->open[from]++;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void fr_guard_stats_get(fr_guard *g, fr_guard_stats *st) {
    memset(st, 0, sizeof *st);
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    for (int k = 0; k < FR_GUARD_N_CLASSES; k++) st->open[k] = g->open[k];
    pthread_mutex_unlock(&g->mu);
    st->pending = atomic_load(&g->n_pending);
    for (int k = 0; k <= FR_GUARD_N_CLASSES; k++) st->refused[k] = atomic_load(&g->refused[k]);
    st->head_errors = atomic_load(&g->head_errors);
    st->head_timeouts = atomic_load(&g->head_timeouts);
}

/* ---- the head ---- */

/* Hands a connection whose head is complete and valid over, or answers 503. */
static void admit(fr_guard *g, gconn *c, const fr_http_head *h) {
    int cls = g->hooks.classify(g->hooks.cls, h);
    if ((int)cls < 0 || cls >= FR_GUARD_N_CLASSES) cls = FR_GUARD_P2;
    pthread_mutex_lock(&g->mu);
    bool ok = c->fd < g->fd_cap && slot_take_locked(g, cls);
    pthread_mutex_unlock(&g->mu);
    if (!ok) {
        atomic_fetch_add(&g->refused[cls], 1);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "Too many concurrent connections for this class (%d in all); retry later.",
                 g->cfg.max_connections);
        /* the message must outlive answer(): it is copied into the body there */
        answer(g, c, h, 503, "too_many_connections", msg);
        return;
    }
    int fd = c->fd;
    atomic_store(&g->fd_cls[fd], (signed char)cls);
    list_del(&g->pending, c);
    atomic_store(&g->n_pending, g->pending.n);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, fd, NULL);
    bool handed = g->hooks.handoff(g->hooks.cls, fd, (struct sockaddr *)&c->addr, c->alen);
    free(c);
    if (!handed) {
        int left = atomic_exchange(&g->fd_cls[fd], (signed char)-1);
        if (left >= 0) fr_guard_slot_release(g, left);
    }
}

/* Bytes arrived on a pending connection: peek at the head again. */
static void on_pending(fr_guard *g, gconn *c) {
    ssize_t n;
    do n = recv(c->fd, g->buf, g->bufcap, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) { /* the client left before sending a head: nobody to answer */
        conn_close(g, c);
        return;
    }
    fr_http_head h;
    int r = fr_http_head_parse(g->buf, (size_t)n, &g->cfg.limits, &h);
    if (r == FR_HEAD_MORE) return;
    if (r == FR_HEAD_DONE && h.chunked &&
        fr_http_chunks_check(g->buf + h.head_len, (size_t)n - h.head_len, &g->cfg.limits, &h))
        r = FR_HEAD_BAD;
    if (r == FR_HEAD_BAD) {
        atomic_fetch_add(&g->head_errors, 1);
        answer(g, c, &h, h.status, h.code, h.detail);
        return;
    }
    admit(g, c, &h);
}

static void on_lingering(fr_guard *g, gconn *c) {
    if (!drain_input(c->fd, g->buf, g->bufcap)) conn_close(g, c);
}

/* ---- accept ---- */

static void accept_some(fr_guard *g) {
    double now = fr_time_s();
    if (now < g->accept_paused_until) return;
    for (int i = 0; i < 256; i++) {
        gconn tmp;
        tmp.alen = sizeof tmp.addr;
        int fd = accept4(g->lfd, (struct sockaddr *)&tmp.addr, &tmp.alen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: give the lingering ones back first, then wait */
                if (g->linger.head) {
                    conn_close(g, g->linger.head);
                    continue;
                }
                g->accept_paused_until = now + 0.05;
                fr_debug("guard: out of file descriptors; accepting again in 50 ms");
            }
            return;
        }
        if (g->pending.n >= g->cfg.max_pending && g->pending.head) {
            atomic_fetch_add(&g->refused[FR_GUARD_N_CLASSES], 1);
            fr_http_head none;
            memset(&none, 0, sizeof none);
            answer(g, g->pending.head, &none, 503, "too_many_pending",
                   "Too many connections are waiting to send their request; retry later.");
        }
        gconn *c = fr_xcalloc(1, sizeof *c);
        *c = tmp;
        c->fd = fd;
        c->deadline = now + g->cfg.head_timeout_s;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev)) {
            close(fd);
            free(c);
            continue;
        }
        list_push(&g->pending, c);
        atomic_store(&g->n_pending, g->pending.n);
        /* the head often came with the connection: look at once */
        on_pending(g, c);
    }
}

/* ---- the thread ---- */

static void expire(fr_guard *g, double now) {
    while (g->linger.head &&
           (g->linger.head->deadline <= now || g->linger.n > g->cfg.max_pending))
        conn_close(g, g->linger.head);
    while (g->pending.head && g->pending.head->deadline <= now) {
        gconn *c = g->pending.head;
        /* one last look: the path, for the refused hook */
        ssize_t n = recv(c->fd, g->buf, g->bufcap, MSG_PEEK | MSG_DONTWAIT);
        fr_http_head h;
        memset(&h, 0, sizeof h);
        if (n > 0 && fr_http_head_parse(g->buf, (size_t)n, &g->cfg.limits, &h) == FR_HEAD_DONE) {
            admit(g, c, &h); /* it completed in the last moment */
            continue;
        }
        if (h.status) { /* it went bad in the last moment */
            answer(g, c, &h, h.status, h.code, h.detail);
            continue;
        }
        atomic_fetch_add(&g->head_timeouts, 1);
        if (n == 0) {
            conn_close(g, c);
            continue;
        }
        answer(g, c, &h, 408, "request_timeout",
               "The request head did not arrive within the time limit.");
    }
}

static int next_timeout_ms(fr_guard *g, double now) {
    double t = now + 1.0;
    if (g->pending.head && g->pending.head->deadline < t) t = g->pending.head->deadline;
    if (g->linger.head && g->linger.head->deadline < t) t = g->linger.head->deadline;
    if (g->accept_paused_until > now && g->accept_paused_until < t) t = g->accept_paused_until;
    double ms = (t - now) * 1000.0;
    return ms <= 0 ? 0 : (int)ms + 1;
}

static void *guard_main(void *arg) {
    fr_guard *g = arg;
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        double now = fr_time_s();
        int n = epoll_wait(g->ep, evs, MAX_EVENTS, next_timeout_ms(g, now));
        if (n < 0 && errno != EINTR) {
            fr_warn("guard: epoll_wait: %s", strerror(errno));
            break;
        }
        bool stop = false, do_accept = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &wake_tag) stop = true;
            else if (p == &listen_tag) do_accept = true;
            else {
                gconn *c = p;
                if (c->lingering) on_lingering(g, c);
                else on_pending(g, c);
            }
        }
        if (stop) break;
        /* accept after the batch: a gconn freed above cannot be an event of this batch again */
        if (do_accept || g->accept_paused_until > 0) {
            if (fr_time_s() >= g->accept_paused_until) {
                g->accept_paused_until = 0;
                accept_some(g);
            }
        }
        expire(g, fr_time_s());
    }
    return NULL;
}

/* ---- start / stop ---- */

fr_guard *fr_guard_start(int listen_fd, const fr_guard_config *cfg, const fr_guard_hooks *hooks,
                         fr_err *err) {
    fr_guard *g = fr_xcalloc(1, sizeof *g);
    g->cfg = *cfg;
    fr_guard_config_reserves(&g->cfg);
    if (g->cfg.max_pending < 1) g->cfg.max_pending = 1;
    if (g->cfg.head_timeout_s <= 0) g->cfg.head_timeout_s = 5;
    if (!g->cfg.limits.max_head_bytes) g->cfg.limits.max_head_bytes = 16384;
    g->hooks = *hooks;
    g->lfd = listen_fd;
    g->efd = g->ep = -1;
    pthread_mutex_init(&g->mu, NULL);
    int sum = 0;
    for (int k = 0; k < FR_GUARD_N_CLASSES; k++) {
        g->limit[k] = g->cfg.max_connections - sum;
        sum += g->cfg.reserved[k];
    }
    struct rlimit rl;
    rlim_t cap = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                     ? rl.rlim_cur
                     : MAX_FD_TABLE;
    g->fd_cap = (int)FR_MIN(cap, (rlim_t)MAX_FD_TABLE);
    g->fd_cls = fr_xmalloc((size_t)g->fd_cap * sizeof *g->fd_cls);
    for (int i = 0; i < g->fd_cap; i++) atomic_init(&g->fd_cls[i], (signed char)-1);
    g->bufcap = g->cfg.limits.max_head_bytes + PEEK_EXTRA;
    g->buf = fr_xmalloc(g->bufcap);
    g->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = &listen_tag};
    struct epoll_event we = {.events = EPOLLIN, .data.ptr = &wake_tag};
    if (g->efd < 0 || g->ep < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, listen_fd, &le) ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->efd, &we)) {
        fr_err_set(err, "connection guard: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&g->th, NULL, guard_main, g)) {
        fr_err_set(err, "connection guard: cannot start its thread");
        goto fail;
    }
    g->started = true;
    return g;
fail:
    if (g->ep >= 0) close(g->ep);
    if (g->efd >= 0) close(g->efd);
    free(g->buf);
    free(g->fd_cls);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return NULL;
}

void fr_guard_stop(fr_guard *g) {
    if (!g || g->ep < 0) return;
    if (g->started) {
        uint64_t one = 1;
        ssize_t w = write(g->efd, &one, sizeof one);
        (void)w;
        pthread_join(g->th, NULL);
    }
    close(g->lfd);
    fr_http_head none;
    memset(&none, 0, sizeof none);
    while (g->pending.head) {
        gconn *c = g->pending.head;
        answer(g, c, &none, 503, "shutting_down", "The server is shutting down.");
    }
    while (g->linger.head) conn_close(g, g->linger.head);
    close(g->ep);
    close(g->efd);
    g->ep = g->efd = g->lfd = -1;
    g->started = false;
}

void fr_guard_free(fr_guard *g) {
    if (!g) return;
    if (g->ep >= 0) fr_guard_stop(g);
    free(g->buf);
    free(g->fd_cls);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
