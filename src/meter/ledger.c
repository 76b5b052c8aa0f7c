/* ledger.c — SQLite ledger with a writer thread and a bounded queue. See ledger.h.
 *
 * Durability: journal_mode=WAL; synchronous=NORMAL by default (a committed transaction survives
 * the process being killed; only an OS crash or power loss can lose the last transactions),
 * FULL by option (fsync at every commit). The writer takes everything queued, writes it in one
 * transaction (group commit) and repeats; busy_timeout covers readers such as `frugal audit`.
 * Retention runs in the writer after a commit at most once a minute.
 */
#include "meter/ledger.h"

#include <ctype.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mask.h"

typedef struct item {
    struct item *next;   /* FIFO link */
    int kind;            /* 0 request row, 1 energy row */
    fr_ledger_row row;   /* kind 0 (cells owned) */
    fr_ledger_energy en; /* kind 1 */
} item;

struct fr_ledger {
    sqlite3 *db;               /* used by the writer thread only after open */
    pthread_t thr;             /* writer */
    pthread_mutex_t mu;        /* guards the fields below */
    pthread_cond_t cv_work;    /* writer waits for items / stop */
    pthread_cond_t cv_done;    /* flushers wait for commits */
    item *head, *tail;         /* queue */
    int qlen, qcap;            /* length, bound */
    bool stop;                 /* close requested */
    unsigned long long enq, done; /* items queued / items written (or failed) */
    long committed;            /* request rows committed */
    long dropped;              /* rows refused or failed */
    long rows_in_db;           /* requests rows in the file (for on_commit) */
    fr_ledger_config cfg;      /* copy (strings not kept) */
    double last_retention;     /* unix time of the last retention pass */
    sqlite3_stmt *ins_req, *ins_cell, *ins_energy; /* prepared statements */
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

static int write_row(fr_ledger *l, const fr_ledger_row *r) {
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
    if (sqlite3_step(s) != SQLITE_DONE) return -1;
    sqlite3_int64 id = sqlite3_last_insert_rowid(l->db);
    for (int k = 0; k < r->n_cells; k++) {
        sqlite3_stmt *c = l->ins_cell;
        sqlite3_reset(c);
        sqlite3_bind_int64(c, 1, id);
        bind_text(c, 2, r->cells[k].device);
        bind_text(c, 3, fr_meter_stage_name(r->cells[k].stage));
        sqlite3_bind_double(c, 4, r->cells[k].seconds);
        sqlite3_bind_double(c, 5, r->cells[k].joules);
        sqlite3_bind_double(c, 6, r->cells[k].occupancy_s);
        if (sqlite3_step(c) != SQLITE_DONE) return -1;
    }
    return 0;
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
    return sqlite3_step(s) == SQLITE_DONE ? 0 : -1;
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
    if (it->kind == 0) free(it->row.cells);
    free(it);
}

static void *writer(void *arg) {
    fr_ledger *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->head && !l->stop) pthread_cond_wait(&l->cv_work, &l->mu);
        if (!l->head && l->stop) break;
        item *batch = l->head;
        int n = l->qlen;
        l->head = l->tail = NULL;
        l->qlen = 0;
        pthread_mutex_unlock(&l->mu);

        long nreq = 0, failed = 0;
        for (item *it = batch; it; it = it->next) nreq += it->kind == 0;
        bool ok = exec(l->db, "BEGIN") == SQLITE_OK;
        for (item *it = batch; it && ok; it = it->next) {
            int rc = it->kind == 0 ? write_row(l, &it->row) : write_energy(l, &it->en);
            if (rc) {
                fr_warn("ledger: insert failed: %s", sqlite3_errmsg(l->db));
                failed += it->kind == 0;
            }
        }
        if (ok && l->cfg.on_commit) l->cfg.on_commit(l->cfg.ctx, 0, l->rows_in_db + nreq - failed);
        if (ok && exec(l->db, "COMMIT") != SQLITE_OK) {
            exec(l->db, "ROLLBACK");
            ok = false;
        }
        if (!ok) failed = nreq;
        pthread_mutex_lock(&l->mu);
        l->committed += nreq - failed;
        l->dropped += failed;
        l->rows_in_db += nreq - failed;
        l->done += (unsigned long long)n;
        long rows = l->rows_in_db;
        pthread_mutex_unlock(&l->mu);
        if (ok && l->cfg.on_commit) l->cfg.on_commit(l->cfg.ctx, 1, rows);
        while (batch) {
            item *nx = batch->next;
            free_item(batch);
            batch = nx;
        }
        retention(l);
        pthread_mutex_lock(&l->mu);
        pthread_cond_broadcast(&l->cv_done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
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
    if (sqlite3_prepare_v2(db, ins_req, -1, &l->ins_req, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO request_stages VALUES(?,?,?,?,?,?)", -1, &l->ins_cell, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO energy VALUES(?,?,?,?,?,?,?,?)", -1, &l->ins_energy, NULL) != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s", c->path, sqlite3_errmsg(db));
        sqlite3_finalize(l->ins_req);
        sqlite3_finalize(l->ins_cell);
        sqlite3_finalize(l->ins_energy);
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
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_done, NULL);
    if (pthread_create(&l->thr, NULL, writer, l)) {
        fr_err_set(err, "ledger: cannot start the writer thread");
        sqlite3_finalize(l->ins_req);
        sqlite3_finalize(l->ins_cell);
        sqlite3_finalize(l->ins_energy);
        sqlite3_close(db);
        free(l);
        return NULL;
    }
    return l;
}

static void mask_field(char *s) { fr_ledger_mask_digits(s); }

static bool enqueue(fr_ledger *l, item *it) {
    pthread_mutex_lock(&l->mu);
    if (l->qlen >= l->qcap || l->stop) {
        l->dropped++;
        long d = l->dropped;
        pthread_mutex_unlock(&l->mu);
        if ((d & (d - 1)) == 0) fr_warn("ledger: queue full, %ld row(s) dropped so far", d);
        free_item(it);
        return false;
    }
    if (l->tail) l->tail->next = it;
    else l->head = it;
    l->tail = it;
    l->qlen++;
    l->enq++;
    pthread_cond_signal(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    return true;
}

bool fr_ledger_put(fr_ledger *l, const fr_ledger_row *row) {
    item *it = fr_xcalloc(1, sizeof *it);
    it->kind = 0;
    it->row = *row;
    it->row.cells = NULL;
    if (row->n_cells > 0) {
        it->row.cells = fr_xmalloc((size_t)row->n_cells * sizeof *row->cells);
        memcpy(it->row.cells, row->cells, (size_t)row->n_cells * sizeof *row->cells);
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
    return enqueue(l, it);
}

bool fr_ledger_put_energy(fr_ledger *l, const fr_ledger_energy *e) {
    item *it = fr_xcalloc(1, sizeof *it);
    it->kind = 1;
    it->en = *e;
    it->en.device[sizeof it->en.device - 1] = it->en.source[sizeof it->en.source - 1] = 0;
    return enqueue(l, it);
}

void fr_ledger_flush(fr_ledger *l) {
    pthread_mutex_lock(&l->mu);
    unsigned long long target = l->enq;
    while (l->done < target) pthread_cond_wait(&l->cv_done, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

void fr_ledger_close(fr_ledger *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thr, NULL);
    sqlite3_finalize(l->ins_req);
    sqlite3_finalize(l->ins_cell);
    sqlite3_finalize(l->ins_energy);
    sqlite3_close(l->db);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_done);
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
