/* test_meter_ledger.c — the SQLite ledger: columns of every outcome, masking, retention, a full
 * queue that never blocks, a writer killed with SIGKILL mid-load (no corruption, no lost
 * committed row), waiting for a row to be durable, the provisional row completed by its final
 * one (and amended), and a file that cannot be written (RLIMIT_FSIZE): rows kept, retried in
 * order, written once it can. */
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "meter/ledger.h"
#include "meter_util.h"
#include "t.h"

static sqlite3 *db_open(const char *path) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "open %s: %s\n", path, sqlite3_errmsg(h));
        sqlite3_close(h);
        return NULL;
    }
    return h;
}

/* First column of the first row as text (static buffer), or "" */
static const char *q1(sqlite3 *h, const char *sql) {
    static char out[16384];
    out[0] = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(h));
        return out;
    }
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}

static long qn(sqlite3 *h, const char *sql) { return atol(q1(h, sql)); }

TEST(mask_card_and_account_numbers) {
    char a[] = "card 4111 1111 1111 1111 was declined";
    CHECK_EQ_INT(fr_ledger_mask_digits(a), 1);
    CHECK_STR(a, "card **** **** **** 1111 was declined");
    char b[] = "4111111111111111";
    fr_ledger_mask_digits(b);
    CHECK_STR(b, "************1111");
    char c[] = "acct 12345678901 order 2024-01-15";
    CHECK_EQ_INT(fr_ledger_mask_digits(c), 0); /* 11 digits, and a date: kept */
    CHECK_STR(c, "acct 12345678901 order 2024-01-15");
    char d[] = "IBAN DE89 3704 0044 0532 0130 00, ref 5555-5555-5555-4444.";
    CHECK_EQ_INT(fr_ledger_mask_digits(d), 2);
    CHECK_STR(d, "IBAN DE** **** **** **** **30 00, ref ****-****-****-4444.");
    char e[] = "123456789012 5555-4444-3333-2222"; /* not a card: too short, fails Luhn (kept) */
    CHECK_EQ_INT(fr_ledger_mask_digits(e), 0);
    CHECK_STR(e, "123456789012 5555-4444-3333-2222");
    char f[] = "";
    CHECK_EQ_INT(fr_ledger_mask_digits(f), 0);
}

static fr_meter_req *req(fr_meter *m, const char *id, const char *route) {
    fr_meter_req_info in = {0};
    in.id = id;
    in.route = route;
    in.tier = "interactive";
    in.modality = "image+text";
    in.api_key_id = "kid_7";
    in.arm = "b";
    return fr_meter_request_begin(m, &in);
}

TEST(every_outcome_gets_a_full_row) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, "energy 0 0 100000 200000 300000 400000\n");
    char db[400];
    snprintf(db, sizeof db, "%s/ledger.db", dir);
    snprintf(c.ledger_path, sizeof c.ledger_path, "%s", db);
    c.cost.hw_usd_per_hour = 36;  /* 0.01 $/s */
    c.cost.labour_usd_per_month = 0;
    c.cost.usd_per_kwh = 0.36;    /* 1e-7 $/J */
    c.cost.pue = 1.5;
    c.cpu_watts_per_core = 0;
    fr_meter_config_set(&c, "slo.interactive", "2.5", NULL);
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    CHECK(m != NULL);
    if (!m) return;
    fr_meter_req *ok = req(m, "ok-1", "support.card");
    fr_meter_req *rej = req(m, "rej-1", "support.card");
    fr_meter_req *can = req(m, "can-1", "chat");
    fr_meter_req *fail = req(m, "fail-1", "chat");
    fr_meter_request_set_feature(m, ok, "ocr_text_density", 0.75);
    fr_meter_request_set_feature(m, ok, "bad key!", 1);
    fr_meter_req_result rr = {FR_REQ_REJECTED, 429, "budget exceeded for 4111111111111111", 12, 0, -1, -1};
    fr_meter_request_end(m, rej, &rr, NULL);
    fr_meter_step *q = fr_meter_stage_begin(m, ok, FR_MSTAGE_QUEUE, FR_METER_DEV_NONE);
    mu_now = 0.5;
    fr_meter_step_end(m, q);
    fr_meter_step *o = fr_meter_stage_begin(m, ok, FR_MSTAGE_OCR, FR_METER_DEV_CPU);
    mu_now = 1;
    fr_meter_step_end(m, o);
    fr_meter_tick(m); /* gpu 100 J at t=1 */
    fr_meter_share sh[3] = {{ok, 3, FR_MSTAGE_PREFILL}, {can, 1, FR_MSTAGE_PREFILL}, {fail, 1, FR_MSTAGE_DECODE}};
    fr_meter_step *s = fr_meter_step_begin(m, fr_meter_dev_gpu(0), sh, 3);
    mu_now = 2;
    fr_meter_step_end(m, s);
    fr_meter_tick(m); /* gpu 200 J: the step gets 100 J: ok 60, can 20, fail 20 */
    fr_meter_req_result r_ok = {FR_REQ_OK, 200, NULL, 30, 8, 0.4, -1};
    fr_meter_request_end(m, ok, &r_ok, NULL);
    fr_meter_req_result r_can = {FR_REQ_CANCELLED, 499, NULL, 10, 0, -1, -1};
    fr_meter_request_end(m, can, &r_can, NULL);
    fr_meter_req_result r_fail = {FR_REQ_FAILED, 500, "kernel error on card 4000-0566-5566-5556", 10, 1, -1, 0};
    fr_meter_request_end(m, fail, &r_fail, NULL);
    mu_now = 3;
    fr_meter_flush(m);
    fr_meter_close(m);

    sqlite3 *h = db_open(db);
    CHECK(h != NULL);
    if (!h) return;
    CHECK_STR(q1(h, "PRAGMA journal_mode"), "wal");
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 4);
    CHECK_STR(q1(h, "SELECT group_concat(status, ',') FROM (SELECT status FROM requests ORDER BY req_id)"),
              "cancelled,failed,ok,rejected");
    /* the ok request */
    CHECK_STR(q1(h, "SELECT api_key_id||'|'||arm||'|'||route||'|'||tier||'|'||modality||'|'||stages||'|'||http_status"
                    " FROM requests WHERE req_id='ok-1'"),
              "kid_7|b|support.card|interactive|image+text|queue,ocr,prefill|200");
    CHECK_STR(q1(h, "SELECT tokens_in||'/'||tokens_out||'/'||ttft_s FROM requests WHERE req_id='ok-1'"), "30/8/0.4");
    CHECK_STR(q1(h, "SELECT features FROM requests WHERE req_id='ok-1'"),
              "{\"ocr_text_density\":0.75,\"badkey\":1}");
    CHECK_NEAR(atof(q1(h, "SELECT joules FROM requests WHERE req_id='ok-1'")), 60, 1e-9);
    CHECK_NEAR(atof(q1(h, "SELECT latency_s FROM requests WHERE req_id='ok-1'")), 2, 1e-9);
    CHECK_NEAR(atof(q1(h, "SELECT queue_s FROM requests WHERE req_id='ok-1'")), 0.5, 1e-9);
    CHECK_STR(q1(h, "SELECT slo_met FROM requests WHERE req_id='ok-1'"), "1");
    /* $: energy 60 J × 1e-7 = 6e-6, cooling × 0.5, depreciation 0.01 $/s × 0.6 s of GPU */
    CHECK_NEAR(atof(q1(h, "SELECT usd_energy FROM requests WHERE req_id='ok-1'")), 6e-6, 1e-15);
    CHECK_NEAR(atof(q1(h, "SELECT usd_cooling FROM requests WHERE req_id='ok-1'")), 3e-6, 1e-15);
    CHECK_NEAR(atof(q1(h, "SELECT usd_depreciation FROM requests WHERE req_id='ok-1'")), 0.006, 1e-12);
    CHECK_NEAR(atof(q1(h, "SELECT usd_total FROM requests WHERE req_id='ok-1'")), 0.006009, 1e-12);
    CHECK_STR(q1(h, "SELECT energy_source FROM requests WHERE req_id='ok-1'"), "cpu:estimated,gpu0:nvml-energy");
    CHECK_STR(q1(h, "SELECT estimated FROM requests WHERE req_id='ok-1'"), "1");
    /* per device and stage */
    CHECK_STR(q1(h, "SELECT group_concat(device||':'||stage, ',') FROM (SELECT * FROM request_stages s JOIN"
                    " requests r ON s.request = r.id WHERE r.req_id='ok-1' ORDER BY stage)"),
              "cpu:ocr,gpu0:prefill,:queue");
    CHECK_NEAR(atof(q1(h, "SELECT s.joules FROM request_stages s JOIN requests r ON s.request=r.id"
                          " WHERE r.req_id='ok-1' AND s.stage='prefill'")), 60, 1e-9);
    CHECK_NEAR(atof(q1(h, "SELECT s.occupancy_s FROM request_stages s JOIN requests r ON s.request=r.id"
                          " WHERE r.req_id='ok-1' AND s.stage='prefill'")), 0.6, 1e-9);
    /* the others */
    CHECK_STR(q1(h, "SELECT http_status||'|'||joules||'|'||stages||'|'||ifnull(slo_met,'null') FROM requests"
                    " WHERE req_id='rej-1'"), "429|0.0||0");
    CHECK_STR(q1(h, "SELECT error FROM requests WHERE req_id='rej-1'"), "budget exceeded for ************1111");
    CHECK_NEAR(atof(q1(h, "SELECT joules FROM requests WHERE req_id='can-1'")), 20, 1e-9);
    CHECK_STR(q1(h, "SELECT error||'|'||slo_met FROM requests WHERE req_id='fail-1'"),
              "kernel error on card ****-****-****-5556|0");
    CHECK_STR(q1(h, "SELECT stages FROM requests WHERE req_id='fail-1'"), "decode");
    /* no unmasked number anywhere in the file's text columns */
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests WHERE error GLOB '*[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]*'"), 0);
    /* energy windows and the configuration snapshot */
    CHECK(qn(h, "SELECT count(*) FROM energy WHERE device='gpu0'") >= 1);
    CHECK_NEAR(atof(q1(h, "SELECT sum(measured_j) FROM energy WHERE device='gpu0'")), 300, 1e-9);
    CHECK_NEAR(atof(q1(h, "SELECT sum(attributed_j) + sum(idle_j) FROM energy WHERE device='gpu0'")), 300, 1e-9);
    { /* the snapshot is the JSON configuration: it loads back with the same prices */
        const char *dump = q1(h, "SELECT value FROM meta WHERE key='config'");
        fr_meter_config back;
        fr_meter_config_default(&back);
        fr_err e = {0};
        CHECK(dump[0] == '{');
        CHECK_EQ_INT(fr_meter_config_parse(&back, dump, strlen(dump), &e), 0);
        CHECK_NEAR(back.cost.hw_usd_per_hour, 36, 0);
        CHECK_EQ_INT(back.n_slo, 1);
    }
    CHECK_STR(q1(h, "SELECT value FROM meta WHERE key='schema_version'"), "1");
    sqlite3_close(h);
}

static void fill_row(fr_ledger_row *r, int i, double t_end) {
    memset(r, 0, sizeof *r);
    snprintf(r->req_id, sizeof r->req_id, "r%d", i);
    snprintf(r->status, sizeof r->status, "ok");
    snprintf(r->route, sizeof r->route, "chat");
    r->t_start = t_end - 1;
    r->t_end = t_end;
    r->joules = i;
    r->slo_met = -1;
}

TEST(retention_by_rows_and_by_age) {
    const char *dir = mu_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/ret.db", dir);
    fr_ledger_config lc = {0};
    lc.path = db;
    lc.queue = 100;
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    CHECK(l != NULL);
    if (!l) return;
    double now = (double)time(NULL);
    fr_ledger_cell cell = {"gpu0", FR_MSTAGE_DECODE, 1, 2, 0.5};
    for (int i = 0; i < 12; i++) {
        fr_ledger_row r;
        fill_row(&r, i, i < 3 ? now - 10 * 86400 : now - 60);
        r.cells = &cell;
        r.n_cells = 1;
        CHECK(fr_ledger_put(l, &r));
    }
    fr_ledger_flush(l);
    CHECK_EQ_INT(fr_ledger_committed(l), 12);
    fr_ledger_close(l);
    lc.retention_days = 7; /* the 3 old rows go */
    l = fr_ledger_open(&lc, &err);
    fr_ledger_close(l);
    sqlite3 *h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 9);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM request_stages"), 9);
    sqlite3_close(h);
    lc.retention_days = 0;
    lc.retention_rows = 5; /* keep the 5 newest */
    l = fr_ledger_open(&lc, &err);
    fr_ledger_close(l);
    h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 5);
    CHECK_STR(q1(h, "SELECT group_concat(req_id, ',') FROM requests"), "r7,r8,r9,r10,r11");
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM request_stages"), 5);
    sqlite3_close(h);
}

/* A writer stuck on disk: the queue fills and puts fail at once instead of blocking. */
static sem_t gate;
static void hold_first_commit(void *ctx, int phase, long rows) {
    (void)ctx;
    (void)rows;
    static int once;
    if (phase == 0 && !once) {
        once = 1;
        sem_wait(&gate);
    }
}

TEST(full_queue_never_blocks) {
    const char *dir = mu_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/q.db", dir);
    sem_init(&gate, 0, 0);
    fr_ledger_config lc = {0};
    lc.path = db;
    lc.queue = 8;
    lc.on_commit = hold_first_commit;
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    fr_ledger_row r;
    fill_row(&r, 0, 1e9);
    CHECK(fr_ledger_put(l, &r)); /* taken by the writer, which then waits at the gate */
    double t0 = fr_time_s();
    while (fr_time_s() - t0 < 2) { /* wait until the writer holds it */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        int v;
        sem_getvalue(&gate, &v);
        if (v == 0) break;
    }
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    int accepted = 0, refused = 0;
    t0 = fr_time_s();
    for (int i = 1; i <= 20; i++) {
        fill_row(&r, i, 1e9);
        if (fr_ledger_put(l, &r)) accepted++;
        else refused++;
    }
    double dt = fr_time_s() - t0;
    CHECK_EQ_INT(accepted, 8);
    CHECK_EQ_INT(refused, 12);
    CHECK(dt < 0.5);
    CHECK_EQ_INT(fr_ledger_dropped(l), 12);
    sem_post(&gate);
    fr_ledger_flush(l);
    CHECK_EQ_INT(fr_ledger_committed(l), 9);
    fr_ledger_close(l);
    sem_destroy(&gate);
}

/* ---- kill -9 ---- */

static int kill_pipe = -1;
static void report(void *ctx, int phase, long rows) {
    (void)ctx;
    char line[64];
    int n = snprintf(line, sizeof line, "%d %ld\n", phase, rows);
    if (write(kill_pipe, line, (size_t)n) != n) _exit(3);
}

static void child_writer(const char *db, int fd) {
    kill_pipe = fd;
    fr_ledger_config lc = {0};
    lc.path = db;
    lc.queue = 1024;
    lc.on_commit = report;
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    if (!l) _exit(2);
    fr_ledger_cell cells[3] = {{"gpu0", FR_MSTAGE_PREFILL, 0.1, 5, 0.1},
                               {"gpu0", FR_MSTAGE_DECODE, 0.5, 20, 0.5},
                               {"", FR_MSTAGE_QUEUE, 0.01, 0, 0}};
    for (int i = 0;; i++) {
        fr_ledger_row r;
        fill_row(&r, i, 1e9 + i);
        snprintf(r.error, sizeof r.error, "padding %0200d", i);
        r.cells = cells;
        r.n_cells = 3;
        while (!fr_ledger_put(l, &r)) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        if (i % 16 == 15) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

TEST(kill_9_mid_load_loses_no_committed_row) {
    const char *dir = mu_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/kill.db", dir);
    for (int round = 0; round < 3; round++) {
        remove(db);
        int fds[2];
        CHECK(pipe(fds) == 0);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            child_writer(db, fds[1]);
            _exit(0);
        }
        close(fds[1]);
        FILE *f = fdopen(fds[0], "r");
        long committed = 0, pending = 0;
        int last_phase = 1, p;
        long rows;
        long target = 300 + 400 * round;
        while (fscanf(f, "%d %ld", &p, &rows) == 2) {
            last_phase = p;
            if (p == 1) committed = rows;
            else pending = rows;
            if (committed >= target) break;
        }
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        while (fscanf(f, "%d %ld", &p, &rows) == 2) { /* lines written before it died */
            last_phase = p;
            if (p == 1) committed = rows;
            else pending = rows;
        }
        fclose(f);
        sqlite3 *h = db_open(db);
        CHECK(h != NULL);
        if (!h) return;
        CHECK_STR(q1(h, "PRAGMA integrity_check"), "ok");
        long n = qn(h, "SELECT count(*) FROM requests");
        /* exactly the committed rows, or the transaction that was committing when it died */
        CHECK(n == committed || (last_phase == 0 && n == pending));
        if (!(n == committed || (last_phase == 0 && n == pending)))
            fprintf(stderr, "  rows %ld committed %ld pending %ld\n", n, committed, pending);
        CHECK(n >= target);
        CHECK_EQ_INT(qn(h, "SELECT count(*) FROM request_stages"), 3 * n);
        CHECK_EQ_INT(qn(h, "SELECT count(DISTINCT req_id) FROM requests"), n);
        CHECK_EQ_INT(qn(h, "SELECT max(id) FROM requests"), n);
        sqlite3_close(h);
        /* and the ledger reopens and goes on writing */
        fr_ledger_config lc = {0};
        lc.path = db;
        fr_err err;
        fr_ledger *l = fr_ledger_open(&lc, &err);
        CHECK(l != NULL);
        if (l) {
            fr_ledger_row r;
            fill_row(&r, 999999, 2e9);
            fr_ledger_put(l, &r);
            fr_ledger_close(l);
            h = db_open(db);
            CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), n + 1);
            sqlite3_close(h);
        }
    }
}

/* ---- durability ---- */

static atomic_bool holding; /* while set, each commit waits for a post of gate */
static void hold_until_posted(void *ctx, int phase, long rows) {
    (void)ctx;
    (void)rows;
    if (phase == 0 && atomic_load(&holding)) sem_wait(&gate);
}

TEST(wait_returns_once_committed_and_times_out_while_held) {
    const char *dir = mu_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/w.db", dir);
    sem_init(&gate, 0, 0);
    fr_ledger_config lc = {0};
    lc.path = db;
    lc.on_commit = hold_until_posted; /* the first transaction waits at the gate */
    atomic_store(&holding, true);
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    CHECK(l != NULL);
    if (!l) return;
    fr_ledger_row r;
    fill_row(&r, 1, 1e9);
    uint64_t s1 = fr_ledger_put_seq(l, &r);
    fill_row(&r, 2, 1e9);
    uint64_t s2 = fr_ledger_put_seq(l, &r);
    CHECK(s1 > 0 && s2 == s1 + 1);
    double t0 = fr_time_s();
    CHECK_EQ_INT(fr_ledger_wait(l, s1, 0.2), -1); /* held before COMMIT: not durable */
    double dt = fr_time_s() - t0;
    CHECK(dt >= 0.19 && dt < 2);
    CHECK_EQ_INT(fr_ledger_wait(l, 0, 1), -1);   /* 0 is "refused": never durable */
    atomic_store(&holding, false);
    sem_post(&gate);
    CHECK_EQ_INT(fr_ledger_wait(l, s2, 5), 0);
    CHECK_EQ_INT(fr_ledger_wait(l, s1, 0), 0);
    CHECK(fr_ledger_healthy(l, NULL, 0));
    fr_ledger_close(l);
    sem_destroy(&gate);
    sqlite3 *h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 2);
    sqlite3_close(h);
}

TEST(final_row_completes_the_provisional_one) {
    const char *dir = mu_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/f.db", dir);
    fr_ledger_config lc = {0};
    lc.path = db;
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    CHECK(l != NULL);
    if (!l) return;
    fr_ledger_row r;
    fill_row(&r, 7, 1e9);
    snprintf(r.trace_id, sizeof r.trace_id, "%032d", 7);
    snprintf(r.stages, sizeof r.stages, "queue");
    r.http_status = 200;
    r.incomplete = true;
    r.joules = 1.5;
    uint64_t s7 = fr_ledger_put_seq(l, &r);
    fr_ledger_row f = r; /* the final figures */
    fr_ledger_cell cells[2] = {{"", FR_MSTAGE_QUEUE, 0.1, 0, 0}, {"cpu", FR_MSTAGE_DECODE, 0.4, 2.5, 0.4}};
    f.cells = cells;
    f.n_cells = 2;
    f.joules = 2.5;
    f.incomplete = false;
    snprintf(f.stages, sizeof f.stages, "queue,decode");
    snprintf(f.energy_source, sizeof f.energy_source, "cpu:estimated");
    /* the answer was withheld: amended to 503 before the final figures came */
    CHECK(fr_ledger_amend(l, s7, "failed", 503, "withheld for card 4111111111111111") > 0);
    CHECK(fr_ledger_put_final(l, s7, &f) > 0);
    fill_row(&r, 8, 1e9); /* a row whose provisional step was refused: inserted whole */
    r.cells = cells;
    r.n_cells = 1;
    CHECK(fr_ledger_put_final(l, 0, &r) > 0);
    fr_ledger_flush(l);
    CHECK_EQ_INT(fr_ledger_committed(l), 2);
    fr_ledger_close(l);
    sqlite3 *h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 2);
    CHECK_STR(q1(h, "SELECT stages||'|'||joules||'|'||incomplete||'|'||energy_source||'|'||http_status||'|'||status"
                    " FROM requests WHERE req_id='r7'"), "queue,decode|2.5|0|cpu:estimated|503|failed");
    CHECK_STR(q1(h, "SELECT error FROM requests WHERE req_id='r7'"), "withheld for card ************1111");
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM request_stages s JOIN requests q ON s.request=q.id WHERE q.req_id='r7'"), 2);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM request_stages s JOIN requests q ON s.request=q.id WHERE q.req_id='r8'"), 1);
    sqlite3_close(h);
    /* a new handle does not know the old sequence numbers: the final row finds its provisional
     * row by (trace_id, req_id, t_start) */
    l = fr_ledger_open(&lc, &err);
    fill_row(&r, 9, 1e9);
    snprintf(r.trace_id, sizeof r.trace_id, "%032d", 9);
    r.incomplete = true;
    uint64_t s9 = fr_ledger_put_seq(l, &r);
    fr_ledger_flush(l);
    fr_ledger_close(l);
    l = fr_ledger_open(&lc, &err);
    r.incomplete = false;
    r.joules = 4;
    CHECK(fr_ledger_put_final(l, s9 + 1000, &r) > 0);
    fr_ledger_flush(l);
    fr_ledger_close(l);
    h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests WHERE req_id='r9'"), 1);
    CHECK_STR(q1(h, "SELECT joules||'|'||incomplete FROM requests WHERE req_id='r9'"), "4.0|0");
    sqlite3_close(h);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

TEST(unwritable_file_keeps_rows_and_recovers) {
    const char *dir = mu_tmpdir();
    char db[400], wal[420];
    snprintf(db, sizeof db, "%s/full.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", db);
    fr_ledger_config lc = {0};
    lc.path = db;
    fr_err err;
    fr_ledger *l = fr_ledger_open(&lc, &err);
    CHECK(l != NULL);
    if (!l) return;
    fr_ledger_row r;
    fill_row(&r, 0, 1e9);
    CHECK_EQ_INT(fr_ledger_wait(l, fr_ledger_put_seq(l, &r), 5), 0);
    /* from now on the WAL may not grow: every commit fails with EFBIG (SIGXFSZ ignored) */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)file_size(wal);
    CHECK(file_size(wal) > 0 && setrlimit(RLIMIT_FSIZE, &lim) == 0);
    uint64_t seq[20];
    for (int i = 1; i < 20; i++) {
        fill_row(&r, i, 1e9 + i);
        seq[i] = fr_ledger_put_seq(l, &r);
        CHECK(seq[i] > 0);
    }
    CHECK_EQ_INT(fr_ledger_wait(l, seq[19], 0.3), -1);
    char why[300] = "";
    CHECK(!fr_ledger_healthy(l, why, sizeof why));
    CHECK(strstr(why, "ledger cannot write: disk I/O error") != NULL);
    fr_ledger_flush(l); /* returns after a failed attempt instead of waiting for ever */
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK_EQ_INT(fr_ledger_wait(l, seq[19], 5), 0);
    CHECK(fr_ledger_healthy(l, NULL, 0));
    CHECK_EQ_INT(fr_ledger_committed(l), 20);
    CHECK_EQ_INT(fr_ledger_dropped(l), 0);
    fr_ledger_close(l);
    signal(SIGXFSZ, SIG_DFL);
    sqlite3 *h = db_open(db);
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests"), 20);
    /* kept in order: ids follow the queue */
    CHECK_EQ_INT(qn(h, "SELECT count(*) FROM requests WHERE CAST(substr(req_id, 2) AS INTEGER) + 1 = id"), 20);
    sqlite3_close(h);
}

int main(void) {
    fr_log_level = FR_LOG_WARN;
    signal(SIGPIPE, SIG_IGN);
    return t_main();
}
