/* test_meter_load.c — the energy invariant under concurrent load (real clock, sampler thread,
 * two fake GPUs drawing 300 W and 150 W, the CPU estimate), a ledger row for every accepted
 * request whatever its outcome, and idle amortisation. */
#include <pthread.h>
#include <sqlite3.h>
#include <time.h>

#include "meter/ledger.h"
#include "meter_util.h"
#include "t.h"

#define THREADS 8
#define PER_THREAD 120

static pthread_mutex_t rows_mu = PTHREAD_MUTEX_INITIALIZER;
static long rows_seen;
static double rows_joules, rows_idle, rows_usd;
static long status_seen[4];

static void on_row(void *ctx, const fr_ledger_row *r) {
    (void)ctx;
    pthread_mutex_lock(&rows_mu);
    rows_seen++;
    rows_joules += r->joules;
    rows_idle += r->joules_idle;
    rows_usd += r->usd_total;
    for (int s = 0; s < 4; s++)
        if (!strcmp(r->status, fr_meter_status_name((fr_meter_status)s))) status_seen[s]++;
    pthread_mutex_unlock(&rows_mu);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void spin_us(long us) {
    double t0 = fr_time_s();
    volatile double x = 0;
    while ((fr_time_s() - t0) * 1e6 < (double)us) x += 1e-9;
}

typedef struct worker {
    fr_meter *m; /* meter */
    int id;      /* thread number */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    static const char *routes[] = {"chat", "support.billing", "support.card"};
    static const char *tiers[] = {"interactive", "batch"};
    static const char *mods[] = {"text", "image+text", "audio"};
    unsigned seed = (unsigned)w->id * 2654435761u;
    for (int i = 0; i < PER_THREAD; i++) {
        char id[32];
        snprintf(id, sizeof id, "t%d-%d", w->id, i);
        fr_meter_req_info in = {0};
        in.id = id;
        in.route = routes[i % 3];
        in.tier = tiers[(i / 3) % 2];
        in.modality = mods[(i + w->id) % 3];
        in.api_key_id = "key-42";
        fr_meter_req *r = fr_meter_request_begin(w->m, &in);
        int outcome = (i + w->id) % 10; /* 0..6 ok, 7 rejected, 8 cancelled, 9 failed */
        if (outcome == 7) {
            fr_meter_req_result res = {FR_REQ_REJECTED, 429, "rate limited", 0, 0, -1, -1};
            fr_meter_request_end(w->m, r, &res, NULL);
            continue;
        }
        fr_meter_step *q = fr_meter_stage_begin(w->m, r, FR_MSTAGE_QUEUE, FR_METER_DEV_NONE);
        sleep_us(100);
        fr_meter_step_end(w->m, q);
        fr_meter_step *o = fr_meter_stage_begin(w->m, r, FR_MSTAGE_OCR, FR_METER_DEV_CPU);
        spin_us(150);
        fr_meter_step_end(w->m, o);
        /* a second request of the same thread shares some engine steps (a batch) */
        fr_meter_req *r2 = fr_meter_request_begin(w->m, &in);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            fr_meter_share sh[2] = {{r, k == 0 ? 64.0 : 1.0, k == 0 ? FR_MSTAGE_PREFILL : FR_MSTAGE_DECODE},
                                    {r2, 1.0 + (seed >> 28), FR_MSTAGE_DECODE}};
            fr_meter_step *s = fr_meter_step_begin(w->m, fr_meter_dev_gpu(k % 2), sh, k % 2 ? 2 : 1);
            sleep_us(200 + (long)(seed >> 24));
            fr_meter_step_end(w->m, s);
        }
        fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 64, 3, 0.01, -1};
        if (outcome == 8) res.status = FR_REQ_CANCELLED, res.http_status = 499;
        if (outcome == 9) res.status = FR_REQ_FAILED, res.http_status = 500, res.error = "decoder failed";
        fr_meter_request_end(w->m, r, &res, NULL);
        fr_meter_req_result res2 = {FR_REQ_OK, 200, NULL, 1, 3, -1, -1};
        fr_meter_request_end(w->m, r2, &res2, NULL);
    }
    return NULL;
}

static long count_rows(const char *db, const char *where) {
    sqlite3 *h;
    long n = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM requests %s", where);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = (long)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

TEST(invariant_under_concurrent_load) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, "count 2\nrate 0 300 5000\nrate 1 150\n");
    c.clock = NULL;
    c.sample_ms = 5;
    c.on_row = on_row;
    char db[400];
    snprintf(db, sizeof db, "%s/ledger.db", dir);
    snprintf(c.ledger_path, sizeof c.ledger_path, "%s", db);
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    CHECK(m != NULL);
    if (!m) return;
    double t0 = fr_time_s();
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){m, i};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    sleep_us(20000); /* some idle at the end */
    fr_meter_flush(m);
    double wall = fr_time_s() - t0;
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    fr_meter_close(m);

    long rejected = 0, total = 0;
    for (int id = 0; id < THREADS; id++)
        for (int i = 0; i < PER_THREAD; i++) {
            bool rej = (i + id) % 10 == 7;
            rejected += rej;
            total += rej ? 1 : 2;
        }
    CHECK_EQ_INT(rows_seen, total);
    CHECK_EQ_INT(t.requests_open, 0);
    CHECK_EQ_INT(t.requests_closed, total);
    double measured = 0, attributed = 0, idle = 0;
    for (int d = 0; d < t.n_dev; d++) {
        CHECK_NEAR(t.attributed_j[d] + t.idle_j[d], t.measured_j[d], 1e-9 * (1 + t.measured_j[d]));
        measured += t.measured_j[d];
        attributed += t.attributed_j[d];
        idle += t.idle_j[d];
    }
    /* the invariant over the run, through the per-request numbers: within 1 % */
    CHECK(fabs(rows_joules + idle - measured) <= 0.01 * measured);
    CHECK_NEAR(rows_joules, attributed, 1e-6 * attributed);
    CHECK_NEAR(t.unmeasured_s, 0, 0);
    /* the fake GPUs draw 300 W and 150 W: measured ≈ power × wall (the window starts at open) */
    CHECK(t.measured_j[1] > 0.9 * 300 * (wall - 0.05) && t.measured_j[1] < 1.1 * 300 * wall);
    CHECK(t.measured_j[2] > 0.9 * 150 * (wall - 0.05) && t.measured_j[2] < 1.1 * 150 * wall);
    CHECK(t.attributed_j[1] > 0 && t.idle_j[1] > 0);
    CHECK(rows_usd > 0);
    /* every accepted request has a row, whatever became of it */
    CHECK_EQ_INT(t.ledger_rows, total);
    CHECK_EQ_INT(t.ledger_dropped, 0);
    CHECK_EQ_INT(count_rows(db, ""), total);
    CHECK_EQ_INT(count_rows(db, "WHERE status='rejected'"), rejected);
    CHECK_EQ_INT(count_rows(db, "WHERE status='rejected' AND http_status=429 AND joules=0"), rejected);
    CHECK_EQ_INT(count_rows(db, "WHERE status='cancelled'"), status_seen[FR_REQ_CANCELLED]);
    CHECK_EQ_INT(count_rows(db, "WHERE status='failed' AND error='decoder failed'"), status_seen[FR_REQ_FAILED]);
    CHECK(status_seen[FR_REQ_CANCELLED] > 0 && status_seen[FR_REQ_FAILED] > 0);
    long staged = count_rows(db, "WHERE status='ok' AND stages='queue,ocr,prefill,decode'");
    CHECK(staged > 0);
    CHECK_EQ_INT(staged, count_rows(db, "WHERE status='ok' AND stages LIKE 'queue%'"));
}

/* Idle amortisation, deterministic: 10 W constant; r1 runs [1, 2], r2 [2, 3], both end at 3.
 * Idle [0, 1] = 10 J is spread over r1 and r2 in proportion to their energy (10 J each). */
static double amort_idle[8];
static int amort_n;
static void on_row_amort(void *ctx, const fr_ledger_row *r) {
    (void)ctx;
    if (amort_n < 8) amort_idle[amort_n++] = r->joules_idle;
}

TEST(idle_amortisation_policy) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, "energy 0 0 10000 20000 30000 40000 50000 60000\n");
    c.idle_policy = FR_IDLE_AMORTISE;
    c.idle_window_s = 60;
    c.cpu_watts_per_core = 0; /* only the GPU counts here */
    c.on_row = on_row_amort;
    amort_n = 0;
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    fr_meter_req_info in = {0};
    fr_meter_req *r1 = fr_meter_request_begin(m, &in), *r2 = fr_meter_request_begin(m, &in);
    mu_now = 1;
    fr_meter_tick(m);
    fr_meter_step *s = fr_meter_stage_begin(m, r1, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 2;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    s = fr_meter_stage_begin(m, r2, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 3;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    fr_meter_request_end(m, r1, NULL, NULL);
    fr_meter_request_end(m, r2, NULL, NULL);
    mu_now = 4;
    fr_meter_tick(m); /* [3, 4] idle 10 J more, before the requests close */
    CHECK_EQ_INT(amort_n, 2);
    CHECK_NEAR(amort_idle[0], 10, 1e-9);
    CHECK_NEAR(amort_idle[1], 10, 1e-9);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.idle_amortised_j, 20, 1e-9);
    CHECK_NEAR(t.idle_j[1], 20, 1e-9);
    /* 100 s later: idle older than the 60 s window is not charged to the next request */
    fr_meter_request_begin(m, &in);
    mu_now = 104;
    fr_meter_tick(m);
    fr_meter_req *r3 = fr_meter_request_begin(m, &in);
    s = fr_meter_stage_begin(m, r3, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 105;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    fr_meter_request_end(m, r3, NULL, NULL);
    mu_now = 106;
    fr_meter_tick(m);
    CHECK_EQ_INT(amort_n, 3);
    fr_meter_get_totals(m, &t);
    /* [4, 104] drew 10 J of idle (0.1 W); at the pass at t = 106 the window is [47, 107), so
     * r3 is charged 57 s × 0.1 W and the older 4.3 J expired unamortised */
    CHECK_NEAR(amort_idle[2], 5.7, 1e-9);
    CHECK_NEAR(t.idle_amortised_j, 25.7, 1e-9);
    fr_meter_close(m);
}

int main(void) {
    fr_log_level = FR_LOG_WARN;
    return t_main();
}
