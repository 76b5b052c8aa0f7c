/* ledger.h — the per-request ledger: SQLite in WAL mode, written by one writer thread.
 *
 * fr_ledger_put* never block: they copy the row into a bounded queue (full queue = the row is
 * counted as dropped and logged, the only way a row can be lost short of a crash before commit).
 * The writer commits whatever is queued in one transaction, so a kill -9 loses at most the rows
 * of the transaction in flight and never corrupts the file (SQLite's WAL guarantees; tested).
 * Every text field is passed through fr_ledger_mask_digits before it is queued.
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
/* Queue a row (deep copy). False when the queue is full (counted in dropped). */
bool fr_ledger_put(fr_ledger *l, const fr_ledger_row *row);
bool fr_ledger_put_energy(fr_ledger *l, const fr_ledger_energy *e);
/* Wait until everything queued before the call is committed. */
void fr_ledger_flush(fr_ledger *l);
/* Flush and close. */
void fr_ledger_close(fr_ledger *l);
long fr_ledger_committed(fr_ledger *l); /* request rows committed by this handle */
long fr_ledger_dropped(fr_ledger *l);   /* rows refused (queue full) or failed to write */

/* Mask card / account numbers in place: a run of 12 or more digits (single spaces or dashes
 * between digits allowed) keeps its last 4 digits, the others become '*'. Returns the number of
 * runs masked. */
int fr_ledger_mask_digits(char *s);

/* Create the schema in an open database (also used by tests loading fixtures). */
struct sqlite3;
int fr_ledger_schema(struct sqlite3 *db, fr_err *err);

#endif
