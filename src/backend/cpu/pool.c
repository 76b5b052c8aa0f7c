/* pool.c — a small persistent thread pool: n-1 pthreads plus the calling thread.
 *
 * A decode step dispatches a few hundred short jobs (one per matmul), so a dispatch must be cheap:
 * the caller publishes (fn, ctx) and bumps a generation counter; workers spin on the counter for
 * a while (FR_POOL_SPIN pause loops, some 50-100 µs) before falling back to a condition variable. The
 * caller runs its own share (ith = 0) and then spins until every worker has finished.
 * fr_pool_run must be called from one thread at a time (the decoder's engine thread).
 */
#include "backend/cpu/cpu.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define FR_POOL_SPIN 2000

struct fr_pool {
    int n;                    /* threads, caller included */
    pthread_t *th;            /* (n - 1) worker threads */
    fr_pool_fn fn;            /* current job */
    void *ctx;                /* its argument */
    atomic_uint gen;          /* bumped once per job */
    atomic_int pending;       /* workers still running the current job */
    atomic_int stop;          /* set to end the workers */
    pthread_mutex_t mu;       /* guards sleeping on cv */
    pthread_cond_t cv;        /* workers sleep here after spinning */
    struct fr_pool_arg *args; /* (n - 1) per-worker start arguments */
};

typedef struct fr_pool_arg {
    fr_pool *p;
    int ith; /* 1..n-1 */
} fr_pool_arg;

static void *worker(void *arg) {
    fr_pool_arg *a = arg;
    fr_pool *p = a->p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            if (++spins < FR_POOL_SPIN) {
                _mm_pause();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->ctx, a->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

fr_pool *fr_pool_new(int n_threads) {
    if (n_threads <= 0) n_threads = fr_n_cores();
    fr_pool *p = fr_xcalloc(1, sizeof *p);
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = fr_xcalloc((size_t)n_threads, sizeof(pthread_t));
    p->args = fr_xcalloc((size_t)n_threads, sizeof(fr_pool_arg));
    for (int i = 1; i < n_threads; i++) {
        p->args[i - 1] = (fr_pool_arg){p, i};
        if (pthread_create(&p->th[i - 1], NULL, worker, &p->args[i - 1]) != 0) {
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void fr_pool_free(fr_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p->args);
    free(p);
}

int fr_pool_size(const fr_pool *p) { return p ? p->n : 1; }

void fr_pool_run(fr_pool *p, fr_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < FR_POOL_SPIN) _mm_pause();
        else sched_yield();
    }
}
