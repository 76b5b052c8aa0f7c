/* guard.h — the connection guard of `frugal serve`: accept, then classify, then hand over.
 *
 * The server owns the listening socket; one guard thread (epoll) accepts every connection and
 * keeps it, at the cost of a small struct and no thread, until its request head has arrived.
 * It only peeks at the bytes (MSG_PEEK), so the HTTP layer (libmicrohttpd, started without a
 * listening socket) later reads the same request from the start. For each head it:
 *
 *   1. parses it strictly and within a size cap (serve/http_head.h): a malformed head or framing
 *      is answered at once (400, 411, 413, 431, 501, 505), a head not complete within
 *      head_timeout_s gets 408;
 *   2. asks the server's classify hook for the connection's class: the control endpoints
 *      (/health, /ready, /metrics), or the request's tier P0, P1, P2;
 *   3. takes a slot of that class, or answers 503 + Retry-After when there is none;
 *   4. hands the socket to the HTTP layer (the handoff hook).
 *
 * Slots: max_connections in all; reserved[k] of them only class k or a better one may use, so a
 * class may hold at most max_connections - (reserves of the classes better than it). A P2 flood
 * therefore leaves the P1, P0 and control reserves free; the control endpoints can always get a
 * slot unless every slot is taken. A slot is held from the handoff until the HTTP layer reports
 * the connection closed (fr_guard_slot_claim at its start, fr_guard_slot_release at its end);
 * a kept-alive connection whose next request is of another class moves its slot
 * (fr_guard_slot_move) or is refused.
 *
 * Pending connections (head not complete) are capped at max_pending: a new one over the cap
 * pushes the oldest pending one out with a 503. Every refusal is an HTTP response followed by a
 * lingering close (the rest of the input is read and dropped for up to 2 s), so the client reads
 * the answer instead of a reset. Accepting stops for 50 ms when the process is out of file
 * descriptors: the kernel's backlog holds the connections, none is accepted and dropped.
 *
 * Threads: the hooks run on the guard thread. fr_guard_slot_* may be called from any thread.
 */
#ifndef FRUGAL_SERVE_GUARD_H
#define FRUGAL_SERVE_GUARD_H

#include <sys/socket.h>

#include "base/base.h"
#include "serve/http_head.h"

typedef enum fr_guard_class {
    FR_GUARD_CONTROL = 0, /* /health, /ready, /metrics */
    FR_GUARD_P0,
    FR_GUARD_P1,
    FR_GUARD_P2,
    FR_GUARD_N_CLASSES
} fr_guard_class;

typedef struct fr_guard_hooks {
    void *cls; /* passed to every hook */
    /* The class of a connection whose first request head is h (valid). */
    fr_guard_class (*classify)(void *cls, const fr_http_head *h);
    /* The guard is about to answer `status` itself (h->line_done says whether the request line,
     * hence the path, is known). May write the response's traceparent (55 chars + NUL) into
     * traceparent_out; leaves it "" otherwise. */
    void (*refused)(void *cls, const fr_http_head *h, int status, char traceparent_out[56]);
    /* Takes over the socket (its slot is taken). False when it could not: the socket is closed
     * either way. */
    bool (*handoff)(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen);
} fr_guard_hooks;

typedef struct fr_guard_config {
    int max_connections;                /* slots in all (>= 1) */
    int reserved[FR_GUARD_N_CLASSES];   /* per class (the last is unused), see the top */
    int max_pending;                    /* connections waiting for their head */
    double head_timeout_s;              /* a head must be complete within this */
    fr_http_limits limits;              /* head size, fields, body size */
} fr_guard_config;

typedef struct fr_guard fr_guard;

/* Fills reserved[] entries that are < 0 from max_connections (control max(1, n/32), P0
 * max(1, n/8), P1 n/16) and lowers them so every class keeps at least one slot. */
void fr_guard_config_reserves(fr_guard_config *c);

/* Starts the guard thread on a listening, non-blocking socket (the guard closes it when it
 * stops). NULL with err on failure (the socket is not closed then). */
fr_guard *fr_guard_start(int listen_fd, const fr_guard_config *cfg, const fr_guard_hooks *hooks,
                         fr_err *err);
/* Stops the thread, answers what is pending with 503, closes the listening socket. The slot
 * functions stay usable (connections already handed over close later). Idempotent. */
void fr_guard_stop(fr_guard *g);
/* Stops (if not yet) and frees. */
void fr_guard_free(fr_guard *g);

/* At the start of a handed-over connection: the class its slot was taken for (then owned by
 * the caller), or -1 when the socket was not handed over by the guard. */
int fr_guard_slot_claim(fr_guard *g, int fd);
/* Gives a claimed slot back (when the connection closes). */
void fr_guard_slot_release(fr_guard *g, int cls);
/* Moves a claimed slot to class `to`; false (slot unchanged) when `to` has no room. */
bool fr_guard_slot_move(fr_guard *g, int from, int to);

typedef struct fr_guard_stats {
    int open[FR_GUARD_N_CLASSES]; /* slots held per class */
    int pending;                  /* connections waiting for their head */
    long long refused[FR_GUARD_N_CLASSES + 1]; /* 503s over the limit per class; [N] = pushed
                                                  out of the pending queue */
    long long head_errors;        /* heads answered 4xx/5xx by the parser */
    long long head_timeouts;      /* 408s */
} fr_guard_stats;
void fr_guard_stats_get(fr_guard *g, fr_guard_stats *st);

#endif
