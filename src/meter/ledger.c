/* ledger.c — SQLite ledger with a writer thread, a bounded queue and group commit. See ledger.h.
 *
 * Durability: journal_mode=WAL; synchronous=NORMAL by default: a COMMIT returns once its WAL
 * frames are written (write(2) into the page cache), so a committed transaction survives the
 * process being killed (kill -9, a crash); only an OS crash or power loss can lose the last
 * transactions, never corrupt the file. FULL by option also fsyncs the WAL at every commit
 * (survives power loss; bench/RESULTS.md has the cost of both). The writer takes everything
 * queued, writes it in one transaction (group commit) and repeats; busy_timeout covers readers
 * such as `frugal audit`. A failed transaction (SQLITE_FULL, SQLITE_IOERR, ...) is rolled back,
 * its items go back to the head of the queue in order and are retried after a backoff, so a
 * sequence number is committed exactly when every smaller one is.
 *
 * Final rows find their provisional row through a ring of the last 65,536 (seq, rowid) pairs
 * written (seqs increase along the ring, so lookup is a binary search); one older than the ring is
 * looked up by (trace_id, req_id, t_start). Retention runs in the writer after a commit at most
 * once a minute.
 */
#include "meter/ledger.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mask.h"

enum { ITEM_ROW, ITEM_FINAL, ITEM_AMEND, ITEM_ENERGY };

typedef struct item {
    struct item *next;   /* FIFO link */
    int kind;            /* ITEM_* */
    uint64_t seq;        /* sequence number (queue order) */
    uint64_t ref;        /* FINAL / AMEND: seq of the row they change (0: none) */
    fr_ledger_row row;   /* ROW, FINAL (cells owned); AMEND: status, http_status, error */
    fr_ledger_energy en; /* ENERGY */
} item;

#define RING_CAP 65536 /* (seq, rowid) pairs kept for final rows and amendments */

typedef struct rowref {
    uint64_t seq;      /* sequence number of a ROW item */
    sqlite3_int64 id;  /* its rowid in requests */
} rowref;

struct fr_ledger {
    sqlite3 *db;               /* used by the writer thread only after open */
    pthread_t thr;             /* writer */
    pthread_mutex_t mu;        /* guards the fields below up to cfg */
    pthread_cond_t cv_work;    /* writer waits for items / stop / backoff (CLOCK_MONOTONIC) */
    pthread_cond_t cv_done;    /* waiters wait for commits and failures (CLOCK_MONOTONIC) */
    item *head, *tail;         /* queue */
    int qlen, qcap;            /* length, bound */
    bool stop;                 /* close requested */
    uint64_t next_seq;         /* next sequence number to hand out (first is 1) */
    uint64_t committed_seq;    /* every item numbered <= this is committed */
    unsigned long failures;    /* failed commit attempts so far */
    bool failing;              /* the last attempt failed (until a commit succeeds) */
    char fail_msg[200];        /* why, for fr_ledger_healthy */
    long committed;            /* request rows inserted */
    long dropped;              /* rows refused or given up */
    long rows_in_db;           /* requests rows in the file (for on_commit) */
    fr_ledger_config cfg;      /* copy (strings not kept) */
    /* writer thread only */
    double last_retention;     /* unix time of the last retention pass */
    sqlite3_stmt *ins_req, *ins_cell, *ins_energy; /* prepared statements */
    sqlite3_stmt *upd_final, *upd_amend, *find_row;
    rowref *ring;              /* RING_CAP slots; entries [ring_lo, ring_hi) valid */
    uint64_t ring_lo, ring_hi; /* absolute indices (slot = index % RING_CAP) */
};

static const char *schema_sql =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS requests("
    " id INTEGER PRIMARY KEY, req_id TEXT, trace_id TEXT, api_key_id TEXT, arm TEXT, route TEXT,"
    " tier TEXT, modality TEXT, stages TEXT, status TEXT, http_status INTEGER, error TEXT,"
    " features TEXT, tokens_in INTEGER, tokens_out INTEGER, t_start REAL, t_end REAL,"
    " latency_s REAL, ttft_s REAL, queue_s REAL, slo_met INTEGER, joules REAL, joules_idle REAL,"
    " occupancy_s REAL, usd_energy REAL, usd_cooling REAL, usd_depreciation REAL,"
    " usd_labour REAL, usd_total REAL, energy_source TEXT, estimated INTEGER, incomplete INTEGER);"
    "CREATE INDEX IF NOT EXISTS requests_t_end ON requests(t_end);"
    "CREATE TABLE IF NOT EXISTS request_stages(request INTEGER, device TEXT, stage TEXT,"
    " seconds REAL, joules REAL, occupancy_s REAL);"
    "CREATE INDEX IF NOT EXISTS request_stages_request ON request_stages(request);"
    "CREATE TABLE IF NOT EXISTS energy(t_start REAL, t_end REAL, device TEXT, source TEXT,"
    " measured_j REAL, attributed_j REAL, idle_j REAL, busy_s REAL);"
    "CREATE INDEX IF NOT EXISTS energy_t_end ON energy(t_end);";

int fr_ledger_schema(sqlite3 *db, fr_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(db, schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
        fr_err_set(err, "ledger schema: %s", msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR IGNORE INTO meta VALUES('schema_version','%d')",
             FR_LEDGER_SCHEMA_VERSION);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    return 0;
}

int fr_ledger_mask_digits(char *s) { return fr_mask_inplace(s); }

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fr_warn("ledger: %s: %s", sql, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return rc;
}

static void bind_text(sqlite3_stmt *s, int i, const char *v) { sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT); }

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timespec mono_at(double t) {
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- the (seq, rowid) ring (writer thread) ---------------------------------------------------- */

static void ring_push(fr_ledger *l, uint64_t seq, sqlite3_int64 id) {
    l->ring[l->ring_hi % RING_CAP] = (rowref){seq, id};
    l->ring_hi++;
    if (l->ring_hi - l->ring_lo > RING_CAP) l->ring_lo = l->ring_hi - RING_CAP;
}

/* The rowid written for ROW item `seq`, or 0 when it is not in the ring. */
static sqlite3_int64 ring_find(const fr_ledger *l, uint64_t seq) {
    uint64_t lo = l->ring_lo, hi = l->ring_hi;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (l->ring[mid % RING_CAP].seq < seq) lo = mid + 1;
        else hi = mid;
    }
    if (lo < l->ring_hi && l->ring[lo % RING_CAP].seq == seq) return l->ring[lo % RING_CAP].id;
    return 0;
}

/* ---- writing (writer thread; every function returns an SQLite result code) --------------------- */

static int insert_cells(fr_ledger *l, sqlite3_int64 id, const fr_ledger_row *r) {
    for (int k = 0; k < r->n_cells; k++) {
        sqlite3_stmt *c = l->ins_cell;
        sqlite3_reset(c);
        sqlite3_bind_int64(c, 1, id);
        bind_text(c, 2, r->cells[k].device);
        bind_text(c, 3, fr_meter_stage_name(r->cells[k].stage));
        sqlite3_bind_double(c, 4, r->cells[k].seconds);
        sqlite3_bind_double(c, 5, r->cells[k].joules);
        sqlite3_bind_double(c, 6, r->cells[k].occupancy_s);
        int rc = sqlite3_step(c);
        if (rc != SQLITE_DONE) return rc;
    }
    return SQLITE_OK;
}

static int insert_row(fr_ledger *l, const fr_ledger_row *r, sqlite3_int64 *id_out) {
    sqlite3_stmt *s = l->ins_req;
    sqlite3_reset(s);
    int i = 1;
    bind_text(s, i++, r->req_id);
    bind_text(s, i++, r->trace_id);
    bind_text(s, i++, r->api_key_id);
    bind_text(s, i++, r->arm);
    bind_text(s, i++, r->route);
    bind_text(s, i++, r->tier);
    bind_text(s, i++, r->modality);
    bind_text(s, i++, r->stages);
    bind_text(s, i++, r->status);
    sqlite3_bind_int(s, i++, r->http_status);
    bind_text(s, i++, r->error);
    bind_text(s, i++, r->features[0] ? r->features : "{}");
    sqlite3_bind_int64(s, i++, r->tokens_in);
    sqlite3_bind_int64(s, i++, r->tokens_out);
    sqlite3_bind_double(s, i++, r->t_start);
    sqlite3_bind_double(s, i++, r->t_end);
    sqlite3_bind_double(s, i++, r->latency_s);
    sqlite3_bind_double(s, i++, r->ttft_s);
    sqlite3_bind_double(s, i++, r->queue_s);
    if (r->slo_met < 0) sqlite3_bind_null(s, i++);
    else sqlite3_bind_int(s, i++, r->slo_met);
    sqlite3_bind_double(s, i++, r->joules);
    sqlite3_bind_double(s, i++, r->joules_idle);
    sqlite3_bind_double(s, i++, r->occupancy_s);
    for (int c = 0; c < FR_COST_N; c++) sqlite3_bind_double(s, i++, r->usd[c]);
    sqlite3_bind_double(s, i++, r->usd_total);
    bind_text(s, i++, r->energy_source);
    sqlite3_bind_int(s, i++, r->estimated);
    sqlite3_bind_int(s, i++, r->incomplete);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return rc;
    sqlite3_int64 id = sqlite3_last_insert_rowid(l->db);
    rc = insert_cells(l, id, r);
    if (rc == SQLITE_OK) *id_out = id;
    return rc;
}

/* The rowid of the request row a FINAL / AMEND item refers to, 0 when there is none. */
static int find_ref(fr_ledger *l, const item *it, sqlite3_int64 *id) {
    *id = it->ref ? ring_find(l, it->ref) : 0;
    if (*id || !it->ref || it->kind != ITEM_FINAL) return SQLITE_OK;
    sqlite3_stmt *s = l->find_row; /* older than the ring: by its identity */
    sqlite3_reset(s);
    bind_text(s, 1, it->row.trace_id);
    bind_text(s, 2, it->row.req_id);
    sqlite3_bind_double(s, 3, it->row.t_start);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(s, 0);
    else if (rc != SQLITE_DONE) return rc;
    sqlite3_reset(s);
    return SQLITE_OK;
}

static int write_final(fr_ledger *l, const item *it, long *ins) {
    const fr_ledger_row *r = &it->row;
    sqlite3_int64 id;
    int rc = find_ref(l, it, &id);
    if (rc != SQLITE_OK) return rc;
    if (id) {
        sqlite3_stmt *s = l->upd_final;
        sqlite3_reset(s);
        int i = 1;
        bind_text(s, i++, r->stages);
        sqlite3_bind_double(s, i++, r->queue_s);
        sqlite3_bind_double(s, i++, r->joules);
        sqlite3_bind_double(s, i++, r->joules_idle);
        sqlite3_bind_double(s, i++, r->occupancy_s);
        for (int c = 0; c < FR_COST_N; c++) sqlite3_bind_double(s, i++, r->usd[c]);
        sqlite3_bind_double(s, i++, r->usd_total);
        bind_text(s, i++, r->energy_source);
        sqlite3_bind_int(s, i++, r->estimated);
        sqlite3_bind_int(s, i++, r->incomplete);
        sqlite3_bind_int64(s, i++, id);
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE) return rc;
        if (sqlite3_changes(l->db) > 0) return insert_cells(l, id, r);
    }
    rc = insert_row(l, r, &id); /* its provisional row was refused or is gone: the whole row */
    if (rc == SQLITE_OK) (*ins)++;
    return rc;
}

static int write_amend(fr_ledger *l, const item *it) {
    sqlite3_int64 id;
    int rc = find_ref(l, it, &id);
    if (rc != SQLITE_OK) return rc;
    if (!id) {
        fr_warn("ledger: row %llu to amend (%d %s) is no longer known", (unsigned long long)it->ref,
                it->row.http_status, it->row.status);
        return SQLITE_OK;
    }
    sqlite3_stmt *s = l->upd_amend;
    sqlite3_reset(s);
    bind_text(s, 1, it->row.status);
    sqlite3_bind_int(s, 2, it->row.http_status);
    bind_text(s, 3, it->row.error);
    sqlite3_bind_int64(s, 4, id);
    rc = sqlite3_step(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int write_energy(fr_ledger *l, const fr_ledger_energy *e) {
    sqlite3_stmt *s = l->ins_energy;
    sqlite3_reset(s);
    sqlite3_bind_double(s, 1, e->t_start);
    sqlite3_bind_double(s, 2, e->t_end);
    bind_text(s, 3, e->device);
    bind_text(s, 4, e->source);
    sqlite3_bind_double(s, 5, e->measured_j);
    sqlite3_bind_double(s, 6, e->attributed_j);
    sqlite3_bind_double(s, 7, e->idle_j);
    sqlite3_bind_double(s, 8, e->busy_s);
    int rc = sqlite3_step(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Writes a batch in one transaction. SQLITE_OK when it committed (*ins: request rows inserted);
 * otherwise the error, described in msg, with the transaction rolled back and the ring as before. */
static int write_batch(fr_ledger *l, const item *batch, long *ins, char *msg, size_t mn) {
    uint64_t hi0 = l->ring_hi;
    *ins = 0;
    int rc = sqlite3_exec(l->db, "BEGIN", NULL, NULL, NULL);
    for (const item *it = batch; it && rc == SQLITE_OK; it = it->next) {
        switch (it->kind) {
        case ITEM_ROW: {
            sqlite3_int64 id;
            rc = insert_row(l, &it->row, &id);
            if (rc == SQLITE_OK) {
                ring_push(l, it->seq, id);
                (*ins)++;
            }
            break;
        }
        case ITEM_FINAL: rc = write_final(l, it, ins); break;
        case ITEM_AMEND: rc = write_amend(l, it); break;
        default: rc = write_energy(l, &it->en); break;
        }
    }
    if (rc == SQLITE_OK && l->cfg.on_commit) l->cfg.on_commit(l->cfg.ctx, 0, l->rows_in_db + *ins);
    if (rc == SQLITE_OK) rc = sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int ext = sqlite3_extended_errcode(l->db);
        snprintf(msg, mn, "%s (SQLite error %d)", sqlite3_errmsg(l->db), ext);
        sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL); /* may say "no transaction": fine */
        l->ring_hi = hi0;
        if (l->ring_lo > hi0) l->ring_lo = hi0;
    }
    return rc;
}

static void retention(fr_ledger *l) {
    double now = unix_now();
    if (l->cfg.retention_days <= 0 && l->cfg.retention_rows <= 0) return;
    if (now - l->last_retention < 60 && l->last_retention > 0) return;
    l->last_retention = now;
    char sql[512];
    exec(l->db, "BEGIN");
    if (l->cfg.retention_days > 0) {
        double cut = now - l->cfg.retention_days * 86400.0;
        snprintf(sql, sizeof sql,
                 "DELETE FROM request_stages WHERE request IN (SELECT id FROM requests WHERE t_end < %.6f);"
                 "DELETE FROM requests WHERE t_end < %.6f; DELETE FROM energy WHERE t_end < %.6f;",
                 cut, cut, cut);
        exec(l->db, sql);
    }
    if (l->cfg.retention_rows > 0) {
        snprintf(sql, sizeof sql,
                 "DELETE FROM request_stages WHERE request <= (SELECT id FROM requests ORDER BY id DESC LIMIT 1 OFFSET %ld);"
                 "DELETE FROM requests WHERE id <= (SELECT id FROM requests ORDER BY id DESC LIMIT 1 OFFSET %ld);",
                 l->cfg.retention_rows, l->cfg.retention_rows);
        exec(l->db, sql);
    }
    exec(l->db, "COMMIT");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(l->db, "SELECT count(*) FROM requests", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) l->rows_in_db = (long)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
}


static void free_item(item *it) {
    if (it->kind == ITEM_ROW || it->kind == ITEM_FINAL) free(it->row.cells);
    free(it);
}

static void free_list(item *it) {
    while (it) {
        item *nx = it->next;
        free_item(it);
        it = nx;
    }
}

#define CLOSE_GIVE_UP_S 2.0 /* a closing ledger that still cannot write drops its rows after this */

/* Backoff after a failed attempt (under mu): sleeps `s` seconds unless stop is requested. */
static void backoff_wait(fr_ledger *l, double s) {
    struct timespec ts = mono_at(mono_now() + s);
    while (pthread_cond_timedwait(&l->cv_work, &l->mu, &ts) != ETIMEDOUT) {}
}

static void *writer(void *arg) {
    fr_ledger *l = arg;
    double backoff = 0; /* seconds before the next attempt (0: the last one succeeded) */
    double stop_t = -1; /* when a close found the writer failing */
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->head && !l->stop) pthread_cond_wait(&l->cv_work, &l->mu);
        if (!l->head && l->stop) break;
        if (backoff > 0) backoff_wait(l, backoff);
        item *batch = l->head, *last = l->tail;
        int n = l->qlen;
        l->head = l->tail = NULL;
        l->qlen = 0;
        pthread_mutex_unlock(&l->mu);

        long ins = 0;
        char msg[200];
        int rc = write_batch(l, batch, &ins, msg, sizeof msg);

        pthread_mutex_lock(&l->mu);
        if (rc == SQLITE_OK) {
            if (l->failing)
                fr_info("ledger: writing again after %lu failed attempt(s)", l->failures);
            l->failing = false;
            backoff = 0;
            l->committed_seq = last->seq;
            l->committed += ins;
            l->rows_in_db += ins;
            long rows = l->rows_in_db;
            pthread_cond_broadcast(&l->cv_done);
            pthread_mutex_unlock(&l->mu);
            if (l->cfg.on_commit) l->cfg.on_commit(l->cfg.ctx, 1, rows);
            free_list(batch);
            retention(l);
            pthread_mutex_lock(&l->mu);
            continue;
        }
        /* failed: the batch goes back to the head of the queue, in order, and is retried */
        unsigned long nf = ++l->failures;
        bool first = !l->failing;
        l->failing = true;
        snprintf(l->fail_msg, sizeof l->fail_msg, "%s", msg);
        last->next = l->head;
        if (!l->head) l->tail = last;
        l->head = batch;
        l->qlen += n;
        pthread_cond_broadcast(&l->cv_done);
        backoff = backoff > 0 ? (backoff * 2 < 1.0 ? backoff * 2 : 1.0) : 0.01;
        if (first || (nf & (nf - 1)) == 0)
            fr_warn("ledger: commit failed: %s; %d item(s) kept and retried (attempt %lu)", msg,
                    l->qlen, nf);
        if (l->stop) {
            if (stop_t < 0) stop_t = mono_now();
            if (mono_now() - stop_t > CLOSE_GIVE_UP_S) {
                long lost = 0;
                for (item *it = l->head; it; it = it->next)
                    lost += it->kind == ITEM_ROW || (it->kind == ITEM_FINAL && !it->ref);
                l->dropped += lost;
                fr_warn("ledger: closing with the file still unwritable (%s): %ld request row(s) "
                        "lost", msg, lost);
                free_list(l->head);
                l->head = l->tail = NULL;
                l->qlen = 0;
                break;
            }
        }
    }
    pthread_cond_broadcast(&l->cv_done);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void finalize_stmts(fr_ledger *l) {
    sqlite3_finalize(l->ins_req);
    sqlite3_finalize(l->ins_cell);
    sqlite3_finalize(l->ins_energy);
    sqlite3_finalize(l->upd_final);
    sqlite3_finalize(l->upd_amend);
    sqlite3_finalize(l->find_row);
}

fr_ledger *fr_ledger_open(const fr_ledger_config *c, fr_err *err) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(c->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s", c->path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    char pragmas[128];
    snprintf(pragmas, sizeof pragmas, "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;",
             c->sync_full ? "FULL" : "NORMAL");
    if (sqlite3_exec(db, pragmas, NULL, NULL, &msg) != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s", c->path, msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
        return NULL;
    }
    if (fr_ledger_schema(db, err)) {
        fr_err_prefix(err, "%s", c->path);
        sqlite3_close(db);
        return NULL;
    }
    fr_ledger *l = fr_xcalloc(1, sizeof *l);
    l->db = db;
    l->cfg = *c;
    l->cfg.path = NULL;
    l->cfg.config_dump = NULL;
    l->qcap = c->queue > 0 ? c->queue : 4096;
    if (c->config_dump) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta VALUES('config', ?)", -1, &st, NULL) == SQLITE_OK) {
            bind_text(st, 1, c->config_dump);
            sqlite3_step(st);
            sqlite3_finalize(st);
        }
    }
    static const char *ins_req =
        "INSERT INTO requests(req_id,trace_id,api_key_id,arm,route,tier,modality,stages,status,"
        "http_status,error,features,tokens_in,tokens_out,t_start,t_end,latency_s,ttft_s,queue_s,"
        "slo_met,joules,joules_idle,occupancy_s,usd_energy,usd_cooling,usd_depreciation,usd_labour,"
        "usd_total,energy_source,estimated,incomplete) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
        "?,?,?,?,?,?,?,?,?,?,?,?)";
    static const char *upd_final =
        "UPDATE requests SET stages=?1, queue_s=?2, joules=?3, joules_idle=?4, occupancy_s=?5,"
        " usd_energy=?6, usd_cooling=?7, usd_depreciation=?8, usd_labour=?9, usd_total=?10,"
        " energy_source=?11, estimated=?12, incomplete=?13 WHERE id=?14";
    if (sqlite3_prepare_v2(db, ins_req, -1, &l->ins_req, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO request_stages VALUES(?,?,?,?,?,?)", -1, &l->ins_cell, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO energy VALUES(?,?,?,?,?,?,?,?)", -1, &l->ins_energy, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, upd_final, -1, &l->upd_final, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE requests SET status=?1, http_status=?2, error=?3 WHERE id=?4", -1,
                           &l->upd_amend, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT id FROM requests WHERE trace_id=?1 AND req_id=?2 AND t_start=?3"
                               " ORDER BY id DESC LIMIT 1", -1, &l->find_row, NULL) != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s", c->path, sqlite3_errmsg(db));
        finalize_stmts(l);
        sqlite3_close(db);
        free(l);
        return NULL;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM requests", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) l->rows_in_db = (long)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    retention(l);
    l->ring = fr_xcalloc(RING_CAP, sizeof *l->ring);
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv_work, &ca);
    pthread_cond_init(&l->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&l->thr, NULL, writer, l)) {
        fr_err_set(err, "ledger: cannot start the writer thread");
        finalize_stmts(l);
        sqlite3_close(db);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv_work);
        pthread_cond_destroy(&l->cv_done);
        free(l->ring);
        free(l);
        return NULL;
    }
    return l;
}

static void mask_field(char *s) { fr_ledger_mask_digits(s); }

/* Queue an item: its sequence number, or 0 (item freed, counted in dropped). */
static uint64_t enqueue(fr_ledger *l, item *it) {
    pthread_mutex_lock(&l->mu);
    if (l->qlen >= l->qcap || l->stop) {
        l->dropped++;
        long d = l->dropped;
        bool closing = l->stop;
        pthread_mutex_unlock(&l->mu);
        if ((d & (d - 1)) == 0)
            fr_warn("ledger: %s, %ld row(s) dropped so far", closing ? "closed" : "queue full", d);
        free_item(it);
        return 0;
    }
    it->seq = ++l->next_seq;
    if (l->tail) l->tail->next = it;
    else l->head = it;
    l->tail = it;
    l->qlen++;
    pthread_cond_signal(&l->cv_work);
    uint64_t seq = it->seq;
    pthread_mutex_unlock(&l->mu);
    return seq;
}

/* A deep, bounded, masked copy of a row. */
static item *row_item(const fr_ledger_row *row, int kind) {
    item *it = fr_xcalloc(1, sizeof *it);
    it->kind = kind;
    it->row = *row;
    it->row.cells = NULL;
    if (row->n_cells > 0) {
        it->row.cells = fr_xmalloc((size_t)row->n_cells * sizeof *row->cells);
        memcpy(it->row.cells, row->cells, (size_t)row->n_cells * sizeof *row->cells);
    } else {
        it->row.n_cells = 0;
    }
    fr_ledger_row *r = &it->row;
    r->req_id[sizeof r->req_id - 1] = r->trace_id[sizeof r->trace_id - 1] = 0;
    r->api_key_id[sizeof r->api_key_id - 1] = r->arm[sizeof r->arm - 1] = 0;
    r->route[sizeof r->route - 1] = r->tier[sizeof r->tier - 1] = 0;
    r->modality[sizeof r->modality - 1] = r->stages[sizeof r->stages - 1] = 0;
    r->status[sizeof r->status - 1] = r->error[sizeof r->error - 1] = 0;
    r->features[sizeof r->features - 1] = r->energy_source[sizeof r->energy_source - 1] = 0;
    mask_field(r->req_id);
    mask_field(r->api_key_id);
    mask_field(r->arm);
    mask_field(r->route);
    mask_field(r->tier);
    mask_field(r->modality);
    mask_field(r->error);
    mask_field(r->features);
    return it;
}

uint64_t fr_ledger_put_seq(fr_ledger *l, const fr_ledger_row *row) { return enqueue(l, row_item(row, ITEM_ROW)); }

bool fr_ledger_put(fr_ledger *l, const fr_ledger_row *row) { return fr_ledger_put_seq(l, row) != 0; }

uint64_t fr_ledger_put_final(fr_ledger *l, uint64_t seq, const fr_ledger_row *row) {
    item *it = row_item(row, ITEM_FINAL);
    it->ref = seq;
    return enqueue(l, it);
}

uint64_t fr_ledger_amend(fr_ledger *l, uint64_t seq, const char *status, int http_status,
                         const char *error) {
    if (!seq) return 0;
    item *it = fr_xcalloc(1, sizeof *it);
    it->kind = ITEM_AMEND;
    it->ref = seq;
    snprintf(it->row.status, sizeof it->row.status, "%s", status ? status : "");
    snprintf(it->row.error, sizeof it->row.error, "%s", error ? error : "");
    mask_field(it->row.error);
    it->row.http_status = http_status;
    return enqueue(l, it);
}

bool fr_ledger_put_energy(fr_ledger *l, const fr_ledger_energy *e) {
    item *it = fr_xcalloc(1, sizeof *it);
    it->kind = ITEM_ENERGY;
    it->en = *e;
    it->en.device[sizeof it->en.device - 1] = it->en.source[sizeof it->en.source - 1] = 0;
    return enqueue(l, it) != 0;
}

int fr_ledger_wait(fr_ledger *l, uint64_t seq, double timeout_s) {
    if (!seq) return -1;
    struct timespec ts = mono_at(mono_now() + (timeout_s > 0 ? timeout_s : 0));
    pthread_mutex_lock(&l->mu);
    while (l->committed_seq < seq)
        if (pthread_cond_timedwait(&l->cv_done, &l->mu, &ts) == ETIMEDOUT) break;
    int rc = l->committed_seq >= seq ? 0 : -1;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void fr_ledger_flush(fr_ledger *l) {
    pthread_mutex_lock(&l->mu);
    uint64_t target = l->next_seq;
    unsigned long f0 = l->failures;
    while (l->committed_seq < target && l->failures == f0 && (l->head || !l->stop))
        pthread_cond_wait(&l->cv_done, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

bool fr_ledger_healthy(fr_ledger *l, char *why, size_t n) {
    pthread_mutex_lock(&l->mu);
    bool ok = !l->failing && l->qlen < l->qcap;
    if (!ok && why && n) {
        if (l->failing)
            snprintf(why, n, "ledger cannot write: %s; %d item(s) waiting", l->fail_msg, l->qlen);
        else
            snprintf(why, n, "ledger queue full (%d items waiting)", l->qlen);
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void fr_ledger_close(fr_ledger *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thr, NULL);
    finalize_stmts(l);
    sqlite3_close(l->db);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_done);
    free(l->ring);
    free(l);
}

long fr_ledger_committed(fr_ledger *l) {
    pthread_mutex_lock(&l->mu);
    long v = l->committed;
    pthread_mutex_unlock(&l->mu);
    return v;
}

long fr_ledger_dropped(fr_ledger *l) {
    pthread_mutex_lock(&l->mu);
    long v = l->dropped;
    pthread_mutex_unlock(&l->mu);
    return v;
}
