/* ledger.h — the per-request ledger: SQLite in WAL mode, written by one writer thread.
 *
 * Durability (docs/METERING.md, "Ledger"): every queued item gets a sequence number, increasing
 * in queue order. The writer takes everything queued, writes it in one transaction (group
 * commit: rows that arrive while a commit runs go into the next one) and publishes the highest
 * committed sequence number. A caller that must not answer before its row is in the file waits
 * with fr_ledger_wait(seq): once it returns 0 the row survives the process being killed (the WAL
 * write() has returned; with synchronous=full it was also fsync'ed and survives power loss).
 * A transaction that fails (disk full, I/O error) is rolled back and its rows go back to the
 * head of the queue: the writer retries with a backoff (10 ms doubling to 1 s) until a commit
 * succeeds, and fr_ledger_healthy is false meanwhile. The queue is bounded: a put refused when
 * it is full returns 0 (counted in dropped); nothing waits for room.
 *
 * A request's row is written in two steps: fr_ledger_put_seq at the end of the request, with the
 * provisional energy and cost the response carries, `incomplete` = 1 and no stage cells; then
 * fr_ledger_put_final once its energy is accounted (≤ one meter sample later), which updates that
 * row's energy, cost, stages, energy source and flags and adds its (device, stage) cells. A
 * process killed in between leaves the provisional row. fr_ledger_amend changes a row's outcome
 * (a response withheld because the row was not durable in time is recorded as the 503 it became).
 * Every text field is passed through the masker (base/mask.h) before it is queued.
 *
 * Thread safety: every function may be called from any thread; puts copy the row and take the
 * ledger's mutex for O(1) work; only fr_ledger_wait, fr_ledger_flush and fr_ledger_close block.
 *
 * Tables (docs/METERING.md has the column meanings):
 *   meta(key, value)                      schema version, configuration snapshot
 *   requests(...)                          one row per accepted request
 *   request_stages(request, device, stage, seconds, joules, occupancy_s)
 *   energy(t_start, t_end, device, source, measured_j, attributed_j, idle_j, busy_s)
 */
#ifndef FRUGAL_METER_LEDGER_H
#define FRUGAL_METER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meter/meter.h"

#define FR_LEDGER_SCHEMA_VERSION 1

/* One (device, stage) cell of a request: device "" = time only (queueing). */
typedef struct fr_ledger_cell {
    char device[16];      /* "cpu", "gpu0", "" */
    fr_meter_stage stage; /* stage */
    double seconds;       /* wall time of the request's steps of this stage on this device */
    double joules;        /* energy attributed to the request there */
    double occupancy_s;   /* host-seconds attributed there (priced as depreciation + labour) */
} fr_ledger_cell;

typedef struct fr_ledger_row {
    char req_id[64];        /* request id */
    char trace_id[33];      /* 32 lowercase hex */
    char api_key_id[64];    /* key id, never the key */
    char arm[32];           /* A/B arm or "" */
    char route[64];         /* route */
    char tier[32];          /* tier */
    char modality[32];      /* modality */
    char stages[192];       /* stages run, comma-separated, pipeline order */
    char status[16];        /* ok | rejected | cancelled | failed */
    int http_status;        /* HTTP status sent */
    char error[256];        /* free text, masked */
    char features[512];     /* JSON object of numeric features ("{}" when none) */
    char energy_source[160];/* "gpu0:nvml-energy,cpu:estimated" — devices the request touched */
    long tokens_in;         /* prompt tokens */
    long tokens_out;        /* generated tokens */
    double t_start;         /* unix seconds */
    double t_end;           /* unix seconds */
    double latency_s;       /* t_end − t_start */
    double ttft_s;          /* time to first token, −1 unknown */
    double queue_s;         /* time in the queue stage */
    int slo_met;            /* 1, 0, −1 unknown */
    double joules;          /* attributed energy (all devices, all stages) */
    double joules_idle;     /* amortised idle energy charged to the request */
    double occupancy_s;     /* host-seconds used (priced as depreciation + labour) */
    double usd[FR_COST_N];  /* energy, cooling, depreciation, labour */
    double usd_total;       /* their sum */
    bool estimated;         /* some of the energy is an estimate */
    bool incomplete;        /* a device had no reading for part of the request */
    int n_cells;            /* entries in cells */
    fr_ledger_cell *cells;  /* (device, stage) breakdown; copied by fr_ledger_put */
} fr_ledger_row;

/* One device's energy over an accounting window. */
typedef struct fr_ledger_energy {
    double t_start, t_end;  /* unix seconds */
    char device[16];        /* "cpu", "gpu0" */
    char source[24];        /* fr_meter_source_name */
    double measured_j;      /* E(t_end) − E(t_start) */
    double attributed_j;    /* given to steps */
    double idle_j;          /* nothing running */
    double busy_s;          /* seconds with at least one step running */
} fr_ledger_energy;

typedef struct fr_ledger_config {
    const char *path;       /* SQLite file */
    int queue;              /* bounded queue length */
    bool sync_full;         /* synchronous=FULL instead of NORMAL */
    double retention_days;  /* 0 = keep forever */
    long retention_rows;    /* 0 = no limit */
    const char *config_dump;/* stored in meta('config') when not NULL */
    /* writer callback around each transaction: phase 0 before COMMIT with the row count the file
     * will hold if it succeeds, phase 1 after COMMIT with the committed count (tests) */
    void (*on_commit)(void *ctx, int phase, long rows);
    void *ctx;              /* argument of on_commit */
} fr_ledger_config;

typedef struct fr_ledger fr_ledger;

fr_ledger *fr_ledger_open(const fr_ledger_config *c, fr_err *err);
/* Queue a request row (deep copy). Returns its sequence number (> 0), or 0 when the queue is
 * full or the ledger is closing (counted in dropped). */
uint64_t fr_ledger_put_seq(fr_ledger *l, const fr_ledger_row *row);
/* fr_ledger_put_seq(l, row) != 0 */
bool fr_ledger_put(fr_ledger *l, const fr_ledger_row *row);
/* Queue the final figures of the row queued as `seq` (see the top): its energy, money, stages,
 * energy source, estimated / incomplete and its cells. When that row is not in the file (seq 0:
 * it was refused) the final row is inserted whole. Returns this item's sequence number or 0. */
uint64_t fr_ledger_put_final(fr_ledger *l, uint64_t seq, const fr_ledger_row *row);
/* Queue a change of the outcome of the row queued as `seq`: status, http_status and error
 * (masked). Returns this item's sequence number or 0. */
uint64_t fr_ledger_amend(fr_ledger *l, uint64_t seq, const char *status, int http_status,
                         const char *error);
bool fr_ledger_put_energy(fr_ledger *l, const fr_ledger_energy *e);
/* Wait until the item numbered `seq` is committed: 0 when it is, -1 when seq is 0 or timeout_s
 * passed first (the item stays queued and is still written when the writer can). */
int fr_ledger_wait(fr_ledger *l, uint64_t seq, double timeout_s);
/* Wait until everything queued before the call is committed, or until a commit attempt made
 * after the call has failed (so it never waits on a failing disk for long). */
void fr_ledger_flush(fr_ledger *l);
/* Flush and close. Rows still unwritten after 2 s of failing commits are dropped (counted and
 * logged). */
void fr_ledger_close(fr_ledger *l);
/* True when the last commit succeeded (or none was needed yet) and the queue has room; else
 * false with a one-line reason in why (when why is not NULL). */
bool fr_ledger_healthy(fr_ledger *l, char *why, size_t n);
long fr_ledger_committed(fr_ledger *l); /* request rows inserted by this handle */
long fr_ledger_dropped(fr_ledger *l);   /* rows refused (queue full) or given up at close */

/* Mask card numbers and IBANs in place: fr_mask_inplace (base/mask.h: Luhn-valid cards keep
 * their last 4 digits, valid IBANs their country code and last 4). Returns the number masked. */
int fr_ledger_mask_digits(char *s);

/* Create the schema in an open database (also used by tests loading fixtures). */
struct sqlite3;
int fr_ledger_schema(struct sqlite3 *db, fr_err *err);

#endif
