/* base.h — errors, logging, time, files, memory maps, float conversions.
 *
 * Two tiers of errors (STYLE.md §9):
 *   - FR_ASSERT: a broken invariant of our own code; prints file:line and aborts.
 *   - fr_err: bad input or a per-request failure; a one-line message the caller turns into an
 *     exit status or an HTTP error. Functions that can fail on input take `fr_err *err` (may be
 *     NULL) and return NULL / -1 on failure with err->msg set.
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

/* A one-line error message for bad input. */
typedef struct fr_err {
    char msg[512];
} fr_err;

void fr_err_set(fr_err *err, const char *fmt, ...) FR_PRINTF(2, 3);
/* Prefix an existing message: "ctx: <old message>". */
void fr_err_prefix(fr_err *err, const char *fmt, ...) FR_PRINTF(2, 3);

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
