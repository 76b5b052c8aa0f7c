/* base.c — see base.h. */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* base/mask.h, referenced weakly (see fr_log) */
int fr_mask_inplace(char *s) __attribute__((weak));

int fr_log_level = FR_LOG_INFO;

void fr_err_set(fr_err *err, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = FR_ERR_INTERNAL;
}

void fr_err_setc(fr_err *err, fr_err_code code, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
}

const char *fr_err_code_name(fr_err_code code) {
    switch (code) {
    case FR_ERR_INTERNAL: return "internal";
    case FR_ERR_BAD_REQUEST: return "bad_request";
    case FR_ERR_TOO_LARGE: return "too_large";
    case FR_ERR_UNSUPPORTED: return "unsupported_media";
    case FR_ERR_NOT_FOUND: return "not_found";
    case FR_ERR_UNAVAILABLE: return "unavailable";
    case FR_ERR_TIMEOUT: return "timeout";
    case FR_ERR_CANCELLED: return "cancelled";
    }
    return "internal";
}

fr_err_code fr_cancel_reason_code(fr_cancel_reason r) {
    switch (r) {
    case FR_CANCEL_CLIENT_GONE: return FR_ERR_CANCELLED;
    case FR_CANCEL_SHUTDOWN: return FR_ERR_UNAVAILABLE;
    case FR_CANCEL_DEADLINE:
    case FR_CANCEL_TIMEOUT: return FR_ERR_TIMEOUT;
    case FR_CANCEL_NONE: break;
    }
    return FR_ERR_INTERNAL;
}

void fr_err_prefix(fr_err *err, const char *fmt, ...) {
    if (!err) return;
    char pre[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", pre, old); /* bounded: <= 503 bytes */
}

void fr_panic(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "frugal: fatal: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static void log_init_level(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *e = getenv("FRUGAL_LOG");
    if (!e) return;
    if (!strcmp(e, "debug")) fr_log_level = FR_LOG_DEBUG;
    else if (!strcmp(e, "info")) fr_log_level = FR_LOG_INFO;
    else if (!strcmp(e, "warn")) fr_log_level = FR_LOG_WARN;
    else if (!strcmp(e, "error")) fr_log_level = FR_LOG_ERROR;
}

void fr_log(int level, const char *fmt, ...) {
    log_init_level();
    if (level < fr_log_level) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* no card / IBAN in logs: base/mask.c is linked into every program that handles requests
     * (the API, the ledger and the meter call it); the standalone GPU tools (make cuda-tools),
     * which log kernels only, link base.o without it and without utf8proc */
    if (fr_mask_inplace && n > 0 && (size_t)n < sizeof line) fr_mask_inplace(line + n);
    fprintf(stderr, "%s\n", line);
}

double fr_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *fr_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) fr_panic(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
    return p;
}
void *fr_xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) fr_panic(__FILE__, __LINE__, "out of memory (%zu x %zu bytes)", n, sz);
    return p;
}
void *fr_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) fr_panic(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
    return q;
}
char *fr_xstrdup(const char *s) { return fr_xstrndup(s, strlen(s)); }
char *fr_xstrndup(const char *s, size_t n) {
    char *p = fr_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *fr_read_file(const char *path, size_t max, size_t *len, fr_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        fr_err_setc(err, e == ENOENT || e == ENOTDIR ? FR_ERR_NOT_FOUND : FR_ERR_INTERNAL,
                    "%s: cannot open: %s", path, strerror(e));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fr_err_set(err, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((uint64_t)st.st_size > max) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: file too large (%lld bytes, limit %zu)", path, (long long)st.st_size, max);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = fr_xmalloc(n + 1);
    if (n && fread(buf, 1, n, f) != n) {
        fr_err_set(err, "%s: read error", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int fr_mmap_open(fr_mmap *m, const char *path, fr_err *err) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        fr_err_setc(err, e == ENOENT || e == ENOTDIR ? FR_ERR_NOT_FOUND : FR_ERR_INTERNAL,
                    "%s: cannot open: %s", path, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fr_err_set(err, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    m->size = (size_t)st.st_size;
    if (m->size) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fr_err_set(err, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        m->data = p;
    }
    close(fd);
    return 0;
}

void fr_mmap_close(fr_mmap *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

bool fr_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
bool fr_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
char *fr_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = fr_xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int fr_n_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

float fr_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    union { uint32_t u; float f; } v = {u};
    return v.f;
}

uint16_t fr_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {f};
    uint32_t x = v.u, sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

uint16_t fr_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffff) > 0x7f800000) return (uint16_t)((v.u >> 16) | 0x40);
    uint32_t r = 0x7fff + ((v.u >> 16) & 1);
    return (uint16_t)((v.u + r) >> 16);
}

void fr_buf_append(fr_buf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->len + n + 1) c *= 2;
        b->data = fr_xrealloc(b->data, c);
        b->cap = c;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}
void fr_buf_puts(fr_buf *b, const char *s) { fr_buf_append(b, s, strlen(s)); }
void fr_buf_printf(fr_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        fr_buf_append(b, tmp, (size_t)n);
        return;
    }
    char *big = fr_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    fr_buf_append(b, big, (size_t)n);
    free(big);
}
void fr_buf_free(fr_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
char *fr_buf_cstr(fr_buf *b) {
    if (!b->data) fr_buf_append(b, "", 0);
    return b->data;
}

bool fr_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; }
        else return false;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (p[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000)) return false;
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += k + 1;
    }
    return true;
}
