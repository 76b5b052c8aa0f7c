/* base.h — errors, logging, time, files, memory maps, float conversions.
 *
 * Two tiers of errors:
 *   - FR_ASSERT: a broken invariant of our own code; prints file:line and aborts.
 *   - fr_err: bad input or a per-request failure; a one-line message the caller turns into an
 *     exit status or an HTTP error, and a code (fr_err_code) that says what kind of failure it
 *     is. Functions that can fail on input take `fr_err *err` (may be NULL) and return NULL / -1
 *     on failure with err->msg and err->code set.
 */
#ifndef FRUGAL_BASE_H
#define FRUGAL_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FR_ASSERT(x)                                                                     \
    do {                                                                                 \
        if (!(x)) fr_panic(__FILE__, __LINE__, "assertion failed: %s", #x);              \
    } while (0)

#if defined(__GNUC__)
#define FR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define FR_NORETURN __attribute__((noreturn))
#else
#define FR_PRINTF(a, b)
#define FR_NORETURN
#endif

#define FR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FR_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* What kind of failure an fr_err is. The code that raises the error knows it and sets it; the
 * layers above decide on it (the HTTP layer maps it to a status, src/serve/error.h) and never
 * read the message text, which is for people. A zeroed fr_err is FR_ERR_INTERNAL. */
typedef enum fr_err_code {
    FR_ERR_INTERNAL = 0,    /* our side failed (out of memory, a library error, a bug) */
    FR_ERR_BAD_REQUEST,     /* malformed input: corrupt or truncated data, a bad field value */
    FR_ERR_TOO_LARGE,       /* input over a limit (bytes, pixels, seconds, channels, budget) */
    FR_ERR_UNSUPPORTED,     /* a media type or format we do not take, or one that disagrees
                               with the bytes */
    FR_ERR_NOT_FOUND,       /* a named model, file or resource does not exist */
    FR_ERR_UNAVAILABLE,     /* cannot serve now: not ready, overloaded, shutting down, the
                               ledger cannot write; retrying later may work */
    FR_ERR_TIMEOUT,         /* a time limit or the request's deadline passed */
    FR_ERR_CANCELLED,       /* the client went away */
} fr_err_code;
#define FR_ERR_N_CODES (FR_ERR_CANCELLED + 1)

/* A one-line error message for bad input or a failed request, with its kind. */
typedef struct fr_err {
    char msg[512];    /* one line for people (never parsed) */
    fr_err_code code; /* the kind of failure (FR_ERR_INTERNAL when set by fr_err_set) */
} fr_err;

/* Sets the message and the code FR_ERR_INTERNAL. err may be NULL (nothing happens). */
void fr_err_set(fr_err *err, const char *fmt, ...) FR_PRINTF(2, 3);
/* Sets the message and the code. err may be NULL. */
void fr_err_setc(fr_err *err, fr_err_code code, const char *fmt, ...) FR_PRINTF(3, 4);
/* Prefix an existing message: "ctx: <old message>"; the code is kept. */
void fr_err_prefix(fr_err *err, const char *fmt, ...) FR_PRINTF(2, 3);
/* "internal", "bad_request", "too_large", "unsupported_media", "not_found", "unavailable",
 * "timeout", "cancelled" (a static string; "internal" for a value out of range). */
const char *fr_err_code_name(fr_err_code code);

FR_NORETURN void fr_panic(const char *file, int line, const char *fmt, ...) FR_PRINTF(3, 4);

enum fr_log_level { FR_LOG_DEBUG = 0, FR_LOG_INFO = 1, FR_LOG_WARN = 2, FR_LOG_ERROR = 3 };
extern int fr_log_level; /* messages below this level are dropped; default INFO, env FRUGAL_LOG */
void fr_log(int level, const char *fmt, ...) FR_PRINTF(2, 3);
#define fr_info(...) fr_log(FR_LOG_INFO, __VA_ARGS__)
#define fr_warn(...) fr_log(FR_LOG_WARN, __VA_ARGS__)
#define fr_debug(...) fr_log(FR_LOG_DEBUG, __VA_ARGS__)

/* Monotonic seconds. */
double fr_time_s(void);

/* Allocation that aborts on OOM: only for sizes our own code bounds. Sizes that come from input
 * must be checked against a cap before calling. */
void *fr_xmalloc(size_t n);
void *fr_xcalloc(size_t n, size_t sz);
void *fr_xrealloc(void *p, size_t n);
char *fr_xstrdup(const char *s);
char *fr_xstrndup(const char *s, size_t n);

/* Read a whole file (at most `max` bytes, else an error naming the file). Returns a malloc'd,
 * NUL-terminated buffer; *len gets the byte count (without the NUL). */
char *fr_read_file(const char *path, size_t max, size_t *len, fr_err *err);

/* A read-only memory map of a whole file. */
typedef struct fr_mmap {
    const uint8_t *data; /* mapped bytes, NULL for an empty file */
    size_t size;         /* file size in bytes */
} fr_mmap;
int fr_mmap_open(fr_mmap *m, const char *path, fr_err *err);
void fr_mmap_close(fr_mmap *m);

bool fr_path_is_dir(const char *path);
bool fr_path_exists(const char *path);
/* path join into a malloc'd string */
char *fr_path_join(const char *dir, const char *name);

/* mkdir -p: creates path and every missing parent (mode for the new ones, e.g. 0755). 0 when
 * the folder exists afterwards, -1 with err naming the part that could not be made. */
int fr_mkdir_p(const char *path, unsigned mode, fr_err *err);
/* mkdir -p of the folder a file path lives in ("a/b/c.bin" → "a/b"; no folder part: nothing). */
int fr_mkdir_parent(const char *file, unsigned mode, fr_err *err);

/* Shipped data files (models/, reply templates, dashboards, docs, data/) are found relative to
 * the data root, never the working directory. The root is, first match wins:
 *   1. $FRUGAL_DATA_DIR (taken as is);
 *   2. <prefix>/share/frugal when the executable is <prefix>/bin/<name> (`make install`);
 *   3. the source tree the executable was built in: the nearest of its folder's parent and
 *      grandparent that holds models/ (build/frugal → the repo root; build/tests/t → the same);
 *   4. otherwise <exe folder>/../share/frugal, so errors name a real place to put the files.
 * The executable is read from /proc/self/exe once; the result is cached (thread-safe). */
const char *fr_data_dir(void);
/* fr_data_dir()/rel as a malloc'd string; an absolute rel is returned as a copy. */
char *fr_data_path(const char *rel);

/* A cancel check that long stages (OCR, ASR) call between units of work. fn returns
 * FR_CANCEL_NONE to go on, or the reason to stop; it must be cheap and thread-safe. */
typedef enum fr_cancel_reason {
    FR_CANCEL_NONE = 0,
    FR_CANCEL_CLIENT_GONE, /* the client hung up */
    FR_CANCEL_SHUTDOWN,    /* the server is shutting down */
    FR_CANCEL_DEADLINE,    /* the request's own deadline (X-Deadline-Ms) passed */
    FR_CANCEL_TIMEOUT,     /* the stage's time limit passed (set by the stage itself) */
} fr_cancel_reason;
typedef struct fr_cancel {
    fr_cancel_reason (*fn)(void *ctx); /* NULL = never cancelled */
    void *ctx;                         /* passed to fn */
} fr_cancel;
static inline fr_cancel_reason fr_cancel_check(const fr_cancel *c) {
    return c && c->fn ? c->fn(c->ctx) : FR_CANCEL_NONE;
}
/* "client_gone", "shutting_down", "deadline_exceeded", "timeout" ("" for NONE). */
const char *fr_cancel_reason_name(fr_cancel_reason r);
/* The error code of a stage stopped for r: CLIENT_GONE → FR_ERR_CANCELLED, SHUTDOWN →
 * FR_ERR_UNAVAILABLE, DEADLINE and TIMEOUT → FR_ERR_TIMEOUT (NONE → FR_ERR_INTERNAL). */
fr_err_code fr_cancel_reason_code(fr_cancel_reason r);

/* Number of online CPU cores (>= 1). */
int fr_n_cores(void);

/* IEEE half and bfloat16 conversions. */
float fr_f16_to_f32(uint16_t h);
uint16_t fr_f32_to_f16(float f);
static inline float fr_bf16_to_f32(uint16_t b) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)b << 16;
    return v.f;
}
uint16_t fr_f32_to_bf16(float f); /* round to nearest even */

/* A growable byte buffer. */
typedef struct fr_buf {
    char *data;
    size_t len, cap;
} fr_buf;
void fr_buf_append(fr_buf *b, const void *p, size_t n);
void fr_buf_puts(fr_buf *b, const char *s);
void fr_buf_printf(fr_buf *b, const char *fmt, ...) FR_PRINTF(2, 3);
void fr_buf_free(fr_buf *b);
/* NUL-terminate (without counting it) and return data. */
char *fr_buf_cstr(fr_buf *b);

/* Validate UTF-8 (no overlongs, no surrogates). */
bool fr_utf8_valid(const char *s, size_t n);

#endif
