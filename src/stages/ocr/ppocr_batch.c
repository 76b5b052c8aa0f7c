/* ppocr_batch.c — the recogniser shared by the engines of one device: text lines of many pages
 * in one run (fr_ppocr_recq, see ppocr.h).
 *
 * Design: engines submit jobs (the lines of one page, each prepared at its own width bucket) to
 * one queue. Whoever finds no leader running becomes the leader and runs batches until its own
 * job is done; the others wait. A batch is the first pending line of the oldest job and up to
 * rec_batch - 1 more pending lines of the same width from any job, oldest first, in one run
 * padded to fr_ppocr_batch_rows rows, so the pages in flight fill each other's runs and every
 * line runs at its own width. Oldest first keeps every job moving while new ones arrive. A
 * waiter polls its cancel check every few milliseconds; a stopped job drops its pending lines,
 * waits for its lines in flight (one run) and leaves. The session is used only by the leader,
 * so one session serves every engine.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stages/ocr/ppocr.h"
#include "stages/ocr/ppocr_net.h"

enum { LINE_PENDING = 0, LINE_FLIGHT = 1, LINE_DONE = 2 };

typedef struct rq_job {
    int n;                 /* lines */
    float *const *x;       /* (n) inputs (3, 48, w[i]), the submitter's */
    const uint32_t *w;     /* (n) their widths */
    float **path;          /* (n) out: malloc'd (T[i], 2) greedy paths */
    int *T;                /* (n) out: steps */
    uint8_t *state;        /* (n) LINE_* */
    int left;              /* lines not LINE_DONE */
    int flight;            /* lines LINE_FLIGHT */
    int rc;                /* 0, or FR_OCR_FAILED with err */
    fr_err err;
    struct rq_job *next;   /* the queue, oldest first */
} rq_job;

struct fr_ppocr_recq {
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* broadcast when lines finish or the leader leaves */
    rq_job *head, *tail;
    int leader;            /* a thread is running batches */
    net_sess rec;          /* used by the leader only */
    fr_ppocr_opts o;
    float *in;             /* the leader's batch input */
    size_t in_cap;
    long runs, lines, rows;
};

fr_ppocr_recq *fr_ppocr_recq_new(const fr_ppocr_models *m, const fr_ppocr_opts *o, fr_err *err) {
    fr_ppocr_recq *q = fr_xcalloc(1, sizeof *q);
    q->o = *o;
    q->o.rec_queue = NULL;
    if (q->o.rec_batch < 1) q->o.rec_batch = 1;
    if (fr_ppocr_net_new(&q->o, fr_ppocr_models_rec(m), 1, &q->rec, err)) {
        fr_err_prefix(err, "PP-OCR shared recogniser");
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    return q;
}

void fr_ppocr_recq_free(fr_ppocr_recq *q) {
    if (!q) return;
    fr_ppocr_net_free(&q->rec);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->in);
    free(q);
}

void fr_ppocr_recq_stats(fr_ppocr_recq *q, long *runs, long *lines, long *rows) {
    pthread_mutex_lock(&q->mu);
    *runs = q->runs, *lines = q->lines, *rows = q->rows;
    pthread_mutex_unlock(&q->mu);
}

static void unlink_job(fr_ppocr_recq *q, rq_job *j) {
    rq_job **pp = &q->head, *prev = NULL;
    while (*pp && *pp != j) prev = *pp, pp = &(*pp)->next;
    if (!*pp) return;
    *pp = j->next;
    if (q->tail == j) q->tail = prev;
}

/* Under mu: the next batch into jb[] / li[] (job and line of each row); its count (0: none). */
static int pick_batch(fr_ppocr_recq *q, rq_job **jb, int *li) {
    uint32_t w = 0;
    int k = 0;
    for (rq_job *j = q->head; j && k < q->o.rec_batch; j = j->next)
        for (int i = 0; i < j->n && k < q->o.rec_batch; i++) {
            if (j->state[i] != LINE_PENDING) continue;
            if (!k) w = j->w[i];
            if (j->w[i] != w) continue;
            j->state[i] = LINE_FLIGHT;
            j->flight++;
            jb[k] = j, li[k] = i, k++;
        }
    return k;
}

/* Under mu, returns under mu: one batch of k rows run with mu released, its paths handed out. */
static void run_batch(fr_ppocr_recq *q, rq_job **jb, const int *li, int k) {
    const uint32_t w = jb[0]->w[li[0]];
    const int rows = fr_ppocr_batch_rows(&q->o, q->o.rec_batch, k);
    const size_t per = (size_t)3 * FR_PPOCR_REC_H * w;
    pthread_mutex_unlock(&q->mu);
    if (per * (size_t)rows > q->in_cap) {
        free(q->in);
        q->in_cap = per * (size_t)rows;
        q->in = fr_xmalloc(q->in_cap * sizeof *q->in);
    }
    for (int r = 0; r < k; r++) memcpy(q->in + per * (size_t)r, jb[r]->x[li[r]], per * sizeof *q->in);
    memset(q->in + per * (size_t)k, 0, per * (size_t)(rows - k) * sizeof *q->in);
    fr_onnx_arr out;
    fr_err err = {0};
    int rc = fr_ppocr_net_run(&q->rec, "rec", q->in, rows, FR_PPOCR_REC_H, w, &out, NULL, &err);
    if (!rc && (out.rank != 3 || out.dims[0] != rows || out.dims[1] < 1 ||
                out.dims[2] != (q->rec.gpu ? 2 : out.dims[2]))) {
        fr_err_setc(&err, FR_ERR_INTERNAL, "PP-OCR rec: unexpected output of rank %d", out.rank);
        rc = FR_OCR_FAILED;
    }
    const int T = rc ? 0 : (int)out.dims[1], C = rc ? 0 : (int)out.dims[2];
    float **paths = fr_xcalloc((size_t)k, sizeof *paths);
    for (int r = 0; r < k && !rc; r++) {
        paths[r] = fr_xmalloc(2 * (size_t)T * sizeof **paths);
        const float *o = out.data + (size_t)r * T * C;
        if (q->rec.gpu) memcpy(paths[r], o, 2 * (size_t)T * sizeof **paths);
        else fr_ppocr_best_path(o, T, C, paths[r]);
    }
    pthread_mutex_lock(&q->mu);
    q->runs++, q->lines += k, q->rows += rows;
    for (int r = 0; r < k; r++) {
        rq_job *j = jb[r];
        j->state[li[r]] = LINE_DONE;
        j->flight--, j->left--;
        if (rc) {
            if (!j->rc) j->rc = FR_OCR_FAILED, j->err = err;
            free(paths[r]);
        } else {
            j->path[li[r]] = paths[r], j->T[li[r]] = T;
        }
    }
    free(paths);
    pthread_cond_broadcast(&q->cv);
}

/* Under mu: job j stopped: its pending lines dropped, then a wait for its lines in flight. */
static void drop_job(fr_ppocr_recq *q, rq_job *j) {
    for (int i = 0; i < j->n; i++)
        if (j->state[i] == LINE_PENDING) j->state[i] = LINE_DONE, j->left--;
    while (j->flight) pthread_cond_wait(&q->cv, &q->mu);
}

int fr_ppocr_recq_run(fr_ppocr_recq *q, int n, float *const *x, const uint32_t *w,
                      const fr_cancel *cancel, float **path, int *T, fr_err *err) {
    rq_job j = {.n = n, .x = x, .w = w, .path = path, .T = T, .left = n};
    j.state = fr_xcalloc((size_t)n + 1, 1);
    rq_job **jb = fr_xcalloc((size_t)q->o.rec_batch, sizeof *jb);
    int *li = fr_xcalloc((size_t)q->o.rec_batch, sizeof *li);
    memset(path, 0, (size_t)n * sizeof *path);
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = &j;
    else q->head = &j;
    q->tail = &j;
    while (j.left) {
        if (fr_cancel_check(cancel)) {
            drop_job(q, &j);
            rc = FR_OCR_STOPPED;
            break;
        }
        if (!q->leader) {
            q->leader = 1;
            int k;
            while (j.left && !fr_cancel_check(cancel) && (k = pick_batch(q, jb, li)))
                run_batch(q, jb, li, k);
            q->leader = 0;
            pthread_cond_broadcast(&q->cv);
            continue;
        }
        struct timespec ts; /* wait in 5 ms slices: the cancel check is polled */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    }
    unlink_job(q, &j);
    pthread_mutex_unlock(&q->mu);
    if (!rc && j.rc) {
        rc = j.rc;
        *err = j.err;
    }
    if (rc)
        for (int i = 0; i < n; i++) free(path[i]), path[i] = NULL;
    free(li);
    free(jb);
    free(j.state);
    return rc;
}
