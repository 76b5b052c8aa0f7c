/* test_bound.c — bounded work (docs/OCR.md, docs/ASR.md, docs/SERVING.md "Shutdown"):
 *   - the OCR downscale and pixel budget (a page over budget by more than 2x linear is refused at
 *     once; within 2x it is downscaled and still read);
 *   - ASR stops at its time limit and on a cancel check, between blocks;
 *   - a real `frugal serve` with a 4000x6000 PNG page of text (drawn here with cairo, ~0.5 MB):
 *     /v1/assist ends with 504 ocr_timeout within the configured limit and the server keeps
 *     serving; a client that disconnects stops its OCR at once (the server logs it, timed); SIGTERM
 *     with three such requests in flight: every client gets 503 shutting_down and the process
 *     exits within grace + 5 s.
 * Servers are started with OMP_THREAD_LIMIT=1 on port 0, one per assist configuration. */
#include <arpa/inet.h>
#include <cairo.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "cli_util.h"
#include "t.h"

#include "serve/assist.h"
#include "serve/error.h"
#include "stages/asr/asr.h"
#include "stages/image/density.h"
#include "stages/image/image.h"
#include "stages/ocr/docgen.h"
#include "stages/ocr/ocr.h"

/* fontconfig (through cairo, docgen) keeps process-lifetime caches LeakSanitizer reports */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig\n"; }

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- stage level ------------------------------------------------------------------------------ */

TEST(ocr_downscale_is_an_area_average) {
    uint8_t px[16] = {0, 100, 200, 40, 20, 80, 60, 0, 255, 255, 0, 0, 255, 255, 0, 4};
    fr_image g = {.pix = px, .width = 4, .height = 4, .channels = 1}, o = {0};
    fr_ocr_downscale(&g, 2, 2, &o);
    CHECK_EQ_INT(o.width, 2);
    CHECK_EQ_INT(o.height, 2);
    CHECK_EQ_INT(o.pix[0], 50);  /* (0 + 100 + 20 + 80) / 4 */
    CHECK_EQ_INT(o.pix[1], 75);  /* (200 + 40 + 60 + 0) / 4 */
    CHECK_EQ_INT(o.pix[2], 255);
    CHECK_EQ_INT(o.pix[3], 1);   /* (0 + 0 + 0 + 4) / 4 */
    fr_image_free(&o);
}

TEST(ocr_pixel_budget_downscales_legibly_or_refuses) {
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 11);
    o.dpi = 300; /* A5 at 300 dpi: ~4.4 megapixels */
    fr_image img;
    fr_doc_truth t;
    fr_err err = {0};
    CHECK(fr_doc_render(&o, &img, &t, &err) == 0);
    if (!img.pix) return;
    uint64_t px = (uint64_t)img.width * img.height;
    fr_ocr_engine *e = fr_ocr_engine_new(NULL, &err);
    CHECK(e != NULL);
    if (!e) return;
    /* within 2x linear: downscaled to the budget and read */
    fr_ocr_limits lim = {.max_pixels = px / 3};
    fr_ocr_result r;
    CHECK_EQ_INT(fr_ocr_run_limited(e, &img, &lim, &r, &err), FR_OCR_OK);
    CHECK(r.scale > 0.5 && r.scale < 0.6);
    CHECK(r.text && strstr(r.text, t.invoice_no) != NULL);
    if (r.text && !strstr(r.text, t.invoice_no))
        fprintf(stderr, "  invoice %s not in: %.300s\n", t.invoice_no, r.text);
    fr_ocr_result_free(&r);
    /* beyond 2x: refused before any recognition, with a message naming the budget */
    lim.max_pixels = px / 5;
    double t0 = fr_time_s();
    CHECK_EQ_INT(fr_ocr_run_limited(e, &img, &lim, &r, &err), FR_OCR_OVER_BUDGET);
    CHECK(fr_time_s() - t0 < 0.5);
    CHECK(strstr(err.msg, "pixel budget") != NULL);
    fr_ocr_engine_free(e);
    fr_image_free(&img);
}

static atomic_bool g_stop;
static fr_cancel_reason flag_cancel(void *ctx) {
    (void)ctx;
    return atomic_load(&g_stop) ? FR_CANCEL_SHUTDOWN : FR_CANCEL_NONE;
}
static void *set_stop_later(void *arg) {
    sleep_s(*(double *)arg);
    atomic_store(&g_stop, true);
    return NULL;
}

TEST(asr_stops_at_its_time_limit_and_on_cancel) {
    fr_err err = {0};
    fr_asr *a = fr_asr_new(NULL, &err);
    CHECK(a != NULL); /* the acoustic model is a dependency (scripts/install-deps.sh) */
    if (!a) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    /* 30 s of a voiced, speech-like signal (a gliding harmonic series, amplitude-modulated, with
     * noise): pocketsphinx needs longer than real time for it (120 s of it took 135 s here),
     * unlike plain noise, which it prunes in a fraction of a second */
    size_t n = (size_t)FR_ASR_RATE * 30;
    int16_t *pcm = malloc(n * sizeof *pcm);
    uint32_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        double t = (double)i / FR_ASR_RATE, f0 = 120 + 40 * sin(t * 3.1), env = 0.5 + 0.5 * sin(t * 9);
        double v = 0;
        for (int h = 1; h < 12; h++) v += sin(6.2831853 * f0 * h * t + h) * (h == 3 || h == 7 ? 1.0 : 0.3) / h;
        pcm[i] = (int16_t)(env * 6000 * v + (double)((s >> 16) % 600) - 300);
    }
    fr_asr_limits lim = {.time_limit_s = 0.3};
    fr_asr_result r;
    double t0 = fr_time_s();
    CHECK_EQ_INT(fr_asr_run_limited(a, pcm, n, &lim, &r, &err), FR_ASR_STOPPED);
    double el = fr_time_s() - t0;
    CHECK(el < 1.5);
    CHECK_EQ_INT(r.stopped, FR_CANCEL_TIMEOUT);
    CHECK(strstr(err.msg, "ASR time limit") != NULL);
    fr_asr_result_free(&r);
    /* a cancel check from another thread */
    atomic_store(&g_stop, false);
    fr_cancel c = {flag_cancel, NULL};
    fr_asr_limits lc = {.cancel = &c};
    double after = 0.3;
    pthread_t th;
    pthread_create(&th, NULL, set_stop_later, &after);
    t0 = fr_time_s();
    CHECK_EQ_INT(fr_asr_run_limited(a, pcm, n, &lc, &r, &err), FR_ASR_STOPPED);
    el = fr_time_s() - t0;
    pthread_join(th, NULL);
    CHECK(el < 1.5);
    CHECK_EQ_INT(r.stopped, FR_CANCEL_SHUTDOWN);
    fr_asr_result_free(&r);
    /* no limit: the same decoder still works */
    CHECK_EQ_INT(fr_asr_run(a, pcm, FR_ASR_RATE, &r, &err), 0);
    fr_asr_result_free(&r);
    free(pcm);
    fr_asr_free(a);
}

static fr_cancel_reason always_shutdown(void *ctx) {
    (void)ctx;
    return FR_CANCEL_SHUTDOWN;
}

/* The stages as both doors bind them (serve/media.c): a stopped stage becomes the status and code
 * the request ends with. */
TEST(media_stages_map_their_bounds_to_http_errors) {
    fr_assist_media m;
    fr_assist_media_default(&m);
    CHECK(m.asr != NULL && m.ocr != NULL);
    if (!m.asr || !m.ocr) return;
    /* 20 s of the voiced signal as a WAV */
    uint32_t n = FR_ASR_RATE * 20;
    size_t len = 44 + (size_t)n * 2;
    uint8_t *wav = calloc(1, len);
    memcpy(wav, "RIFF", 4);
    uint32_t v32 = (uint32_t)len - 8;
    memcpy(wav + 4, &v32, 4);
    memcpy(wav + 8, "WAVEfmt ", 8);
    uint32_t fmt[4] = {16, 1 | 1u << 16, FR_ASR_RATE, FR_ASR_RATE * 2};
    memcpy(wav + 16, fmt, 16);
    uint16_t ba[2] = {2, 16};
    memcpy(wav + 32, ba, 4);
    memcpy(wav + 36, "data", 4);
    v32 = n * 2;
    memcpy(wav + 40, &v32, 4);
    for (uint32_t i = 0; i < n; i++) {
        double t = (double)i / FR_ASR_RATE, f0 = 120 + 40 * sin(t * 3.1), env = 0.5 + 0.5 * sin(t * 9);
        double v = 0;
        for (int h = 1; h < 12; h++) v += sin(6.2831853 * f0 * h * t + h) * (h == 3 || h == 7 ? 1.0 : 0.3) / h;
        int16_t sv = (int16_t)(env * 6000 * v);
        memcpy(wav + 44 + (size_t)i * 2, &sv, 2);
    }
    fr_assist_media_err me;
    memset(&me, 0, sizeof me);
    void *au = m.audio_decode(m.ctx, wav, len, "audio/wav", &me);
    CHECK(au != NULL);
    if (au) {
        fr_assist_bound b = {.time_limit_s = 0.3};
        memset(&me, 0, sizeof me);
        double t0 = fr_time_s();
        char *t = m.asr(m.ctx, au, &b, &me);
        CHECK(t == NULL);
        free(t);
        CHECK(fr_time_s() - t0 < 5); /* the decoder's first load included */
        CHECK_EQ_INT(fr_http_status_of(me.err.code), 504);
        CHECK_STR(me.code, "asr_timeout");
        m.audio_free(m.ctx, au);
    }
    free(wav);
    /* OCR at shutdown: 503 shutting_down before any recognition */
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 5);
    fr_image img;
    fr_doc_truth tr;
    fr_err err = {0};
    CHECK(fr_doc_render(&o, &img, &tr, &err) == 0);
    fr_cancel c = {always_shutdown, NULL};
    fr_assist_bound b = {.time_limit_s = 10, .cancel = &c};
    fr_assist_ocr out;
    memset(&out, 0, sizeof out);
    memset(&me, 0, sizeof me);
    CHECK_EQ_INT(m.ocr(m.ctx, &img, &b, &out, &me), -1);
    CHECK_EQ_INT(fr_http_status_of(me.err.code), 503);
    CHECK_STR(me.code, "shutting_down");
    /* over the pixel budget by more than 2x linear: 413 ocr_pixel_budget */
    fr_assist_bound small = {.max_pixels = (uint64_t)img.width * img.height / 5};
    memset(&me, 0, sizeof me);
    CHECK_EQ_INT(m.ocr(m.ctx, &img, &small, &out, &me), -1);
    CHECK_EQ_INT(fr_http_status_of(me.err.code), 413);
    CHECK_STR(me.code, "ocr_pixel_budget");
    fr_image_free(&img);
}

/* ---- a real server ---------------------------------------------------------------------------- */

/* A 4000x6000 page of 56-px text lines (dense: the density stage routes it to OCR), as the body
 * of a /v1/assist request. */
static char *big_page_body(size_t *len) {
    const int W = 4000, H = 6000;
    const double fs = 56;
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_A8, W, H);
    cairo_t *cr = cairo_create(sf);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, fs);
    static const char *const words[] = {"invoice", "amount", "payment", "account", "the", "of",
                                        "transfer", "balance", "card", "statement", "due",
                                        "total", "customer", "reference", "bank", "date"};
    uint32_t seed = 7;
    for (double y = 150; y < H - 150; y += fs * 1.5) {
        char line[400];
        size_t n = 0;
        while (n < 70) {
            seed = seed * 1103515245u + 12345u;
            n += (size_t)snprintf(line + n, sizeof line - n, "%s ", words[(seed >> 16) % 16]);
        }
        cairo_move_to(cr, 150, y);
        cairo_show_text(cr, line);
    }
    cairo_surface_flush(sf);
    fr_image img = {.width = (uint32_t)W, .height = (uint32_t)H, .channels = 1};
    img.pix = malloc((size_t)W * H);
    const uint8_t *d = cairo_image_surface_get_data(sf);
    int stride = cairo_image_surface_get_stride(sf);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) img.pix[(size_t)y * W + x] = (uint8_t)(255 - d[y * stride + x]);
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
    fr_density den;
    fr_density_measure(&img, &den);
    if (den.score < 0.5) fprintf(stderr, "  the page's text density is only %.2f\n", den.score);
    fr_buf png = {0};
    fr_err err = {0};
    if (fr_img_encode(&img, FR_IMG_PNG, 0, &png, &err)) return NULL;
    fr_image_free(&img);
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fr_buf b = {0};
    fr_buf_puts(&b, "{\"image\":\"data:image/png;base64,");
    const uint8_t *p = (const uint8_t *)png.data;
    for (size_t i = 0; i < png.len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < png.len ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < png.len ? p[i + 2] : 0);
        char q[4] = {tbl[v >> 18], tbl[(v >> 12) & 63], i + 1 < png.len ? tbl[(v >> 6) & 63] : '=',
                     i + 2 < png.len ? tbl[v & 63] : '='};
        fr_buf_append(&b, q, 4);
    }
    fr_buf_puts(&b, "\"}");
    fr_buf_free(&png);
    *len = b.len;
    return fr_buf_cstr(&b);
}

typedef struct server {
    pid_t pid;
    int port;
    char dir[64];      /* temp folder: config files, stdout, stderr */
    char err_path[96]; /* its stderr */
} server;

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

/* Starts `frugal serve` on port 0 with the given assist and serve configs. 0, or -1. */
static int server_start(server *sv, const char *assist_json, const char *serve_json) {
    memset(sv, 0, sizeof *sv);
    snprintf(sv->dir, sizeof sv->dir, "/tmp/frugal-bound-XXXXXX");
    if (!mkdtemp(sv->dir)) return -1;
    char acfg[128], scfg[128], out[128], env_a[160];
    snprintf(acfg, sizeof acfg, "%s/assist.json", sv->dir);
    snprintf(scfg, sizeof scfg, "%s/serve.json", sv->dir);
    snprintf(out, sizeof out, "%s/out", sv->dir);
    snprintf(sv->err_path, sizeof sv->err_path, "%s/err", sv->dir);
    write_text(acfg, assist_json);
    write_text(scfg, serve_json);
    snprintf(env_a, sizeof env_a, "FRUGAL_ASSIST_CONFIG=%s", acfg);
    char *envp[] = {env_a, "OMP_THREAD_LIMIT=1", "PATH=/usr/bin:/bin", NULL};
    char model[512];
    snprintf(model, sizeof model, "%s/qwen2-tiny", t_fixtures());
    const char *argv[] = {cli_bin(), "serve", "--model", model, "--port", "0", "--ledger", "",
                          "--config", scfg, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, sv->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&sv->pid, argv[0], &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return -1;
    for (int i = 0; i < 300 && !sv->port; i++) {
        sleep_s(0.05);
        char *s = cli_slurp(out);
        const char *p = strstr(s, "listening on http://");
        const char *colon = p ? strchr(p + 20, ':') : NULL;
        if (colon) sv->port = atoi(colon + 1);
        free(s);
        if (waitpid(sv->pid, NULL, WNOHANG) == sv->pid) return -1;
    }
    return sv->port ? 0 : -1;
}

/* Waits up to limit_s for the server to exit; its wall time from `since`, or -1 (then kills). */
static double server_wait(server *sv, double since, double limit_s, int *status) {
    while (fr_time_s() - since < limit_s) {
        if (waitpid(sv->pid, status, WNOHANG) == sv->pid) {
            sv->pid = 0;
            return fr_time_s() - since;
        }
        sleep_s(0.02);
    }
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, status, 0);
    sv->pid = 0;
    return -1;
}

static void server_stop(server *sv) {
    if (sv->pid) {
        kill(sv->pid, SIGTERM);
        server_wait(sv, fr_time_s(), 20, NULL);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", sv->dir);
    if (system(cmd)) {}
}

/* Opens a connection and sends one request (the body fully written). fd, or -1. */
static int http_send(int port, const char *method, const char *path, const char *body, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    char hdr[256];
    int hn = snprintf(hdr, sizeof hdr,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n", method, path, n);
    if (write(fd, hdr, (size_t)hn) != hn) {
        close(fd);
        return -1;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, body + off, n - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return fd;
}

/* Reads the whole response (until the server closes) within limit_s. The status (0 when the
 * connection ended with no response, -1 on timeout); *resp gets the bytes (malloc'd). */
static int http_read(int fd, double limit_s, char **resp) {
    fr_buf b = {0};
    double t0 = fr_time_s();
    int st = -1;
    for (;;) {
        double left = limit_s - (fr_time_s() - t0);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0) {
            st = 0;
            break;
        }
        fr_buf_append(&b, buf, (size_t)r);
    }
    close(fd);
    fr_buf_append(&b, "", 0);
    if (st == 0 && b.len > 12 && !strncmp(b.data, "HTTP/1.1 ", 9)) st = atoi(b.data + 9);
    if (resp) *resp = fr_buf_cstr(&b);
    else fr_buf_free(&b);
    return st;
}

static int http_get_status(int port, const char *method, const char *path, const char *body,
                           double limit_s, char **resp) {
    int fd = http_send(port, method, path, body, strlen(body));
    if (fd < 0) return -1;
    return http_read(fd, limit_s, resp);
}

static char *g_body;
static size_t g_body_len;

static bool load_body(void) {
    if (!g_body) g_body = big_page_body(&g_body_len);
    CHECK(g_body != NULL);
    return g_body != NULL;
}

TEST(server_big_page_hits_the_ocr_time_limit_and_keeps_serving) {
    if (!load_body()) return;
    server sv;
    CHECK_EQ_INT(server_start(&sv, "{\"ocr_time_limit_s\": 2}", "{}"), 0);
    if (!sv.port) {
        server_stop(&sv);
        return;
    }
    double t0 = fr_time_s();
    int fd = http_send(sv.port, "POST", "/v1/assist", g_body, g_body_len);
    char *resp = NULL;
    int st = http_read(fd, 30, &resp);
    double el = fr_time_s() - t0;
    CHECK_EQ_INT(st, 504);
    CHECK(strstr(resp, "\"code\":\"ocr_timeout\"") != NULL);
    CHECK(strstr(resp, "OCR time limit of 2.0 s") != NULL);
    /* 2 s of OCR plus decode, density and the (uninterruptible) layout analysis, with room for
     * a loaded machine */
    CHECK(el < 2 + 6);
    fprintf(stderr, "  4000x6000 page: %d after %.2f s (limit 2 s)\n", st, el);
    if (st != 504) fprintf(stderr, "  %.300s\n", resp ? resp : "");
    free(resp);
    resp = NULL;
    /* the same page as an image part of a chat request: the server's assist limits apply */
    const char *img = strstr(g_body, "data:image");
    fr_buf chat = {0};
    fr_buf_puts(&chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                       "\"text\":\"read this\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"");
    fr_buf_append(&chat, img, strlen(img) - 2); /* without the closing "} */
    fr_buf_puts(&chat, "\"}}]}],\"max_tokens\":4}");
    t0 = fr_time_s();
    fd = http_send(sv.port, "POST", "/v1/chat/completions", chat.data, chat.len);
    st = http_read(fd, 30, &resp);
    el = fr_time_s() - t0;
    CHECK_EQ_INT(st, 504);
    CHECK(resp && strstr(resp, "\"code\":\"ocr_timeout\"") != NULL);
    CHECK(el < 2 + 6);
    fprintf(stderr, "  the page as a chat image part: %d after %.2f s\n", st, el);
    if (st != 504) fprintf(stderr, "  %.300s\n", resp ? resp : "");
    free(resp);
    resp = NULL;
    fr_buf_free(&chat);
    CHECK_EQ_INT(http_get_status(sv.port, "GET", "/health", "", 5, NULL), 200);
    CHECK_EQ_INT(http_get_status(sv.port, "POST", "/v1/assist",
                                 "{\"text\":\"I still have not received my card\"}", 5, &resp),
                 200);
    CHECK(resp && strstr(resp, "card_arrival") != NULL);
    free(resp);
    server_stop(&sv);
}

/* Seconds until `needle` shows up in the server's stderr (or -1 after limit_s). */
static double wait_log(const server *sv, const char *needle, double limit_s) {
    double t0 = fr_time_s();
    while (fr_time_s() - t0 < limit_s) {
        char *s = cli_slurp(sv->err_path);
        bool hit = strstr(s, needle) != NULL;
        free(s);
        if (hit) return fr_time_s() - t0;
        sleep_s(0.02);
    }
    return -1;
}

TEST(server_disconnect_cancels_ocr_and_sigterm_exits_within_grace) {
    if (!load_body()) return;
    server sv;
    const double grace = 1;
    CHECK_EQ_INT(server_start(&sv, "{\"ocr_time_limit_s\": 120}", "{\"shutdown_grace_s\": 1}"), 0);
    if (!sv.port) {
        server_stop(&sv);
        return;
    }
    /* a client that hangs up mid-OCR: the stage stops at once (not after 120 s) */
    int fd = http_send(sv.port, "POST", "/v1/assist", g_body, g_body_len);
    CHECK(fd >= 0);
    sleep_s(2.5); /* decode + density + into OCR */
    close(fd);
    double gone = wait_log(&sv, "ocr: client_gone", 5);
    fprintf(stderr, "  disconnect → OCR stopped after %.2f s\n", gone);
    /* at most the rest of one page's layout analysis (about 1.2 s on an idle core, several
     * seconds on a loaded 2-core machine), then the next word; a full OCR of the page would take
     * far longer and the limit is 120 s */
    CHECK(gone >= 0 && gone < 6);
    CHECK_EQ_INT(http_get_status(sv.port, "GET", "/health", "", 5, NULL), 200);

    /* SIGTERM with three slow requests in flight */
    int fds[3];
    for (int i = 0; i < 3; i++) fds[i] = http_send(sv.port, "POST", "/v1/assist", g_body, g_body_len);
    sleep_s(2.0);
    double t0 = fr_time_s();
    kill(sv.pid, SIGTERM);
    int status = 0;
    double took = server_wait(&sv, t0, grace + 10, &status);
    fprintf(stderr, "  SIGTERM with 3 OCR requests in flight: exit after %.2f s (grace %.0f s)\n",
            took, grace);
    CHECK(took >= 0 && took <= grace + 5);
    CHECK(WIFEXITED(status));
    for (int i = 0; i < 3; i++) {
        char *resp = NULL;
        int st = fds[i] >= 0 ? http_read(fds[i], 2, &resp) : -1;
        CHECK_EQ_INT(st, 503);
        CHECK(resp && strstr(resp, "shutting_down") != NULL);
        if (st != 503) fprintf(stderr, "  request %d: %d %.200s\n", i, st, resp ? resp : "");
        free(resp);
    }
    if (t_fail_cur) {
        char *log = cli_slurp(sv.err_path);
        fprintf(stderr, "  server log:\n%s", log);
        free(log);
    }
    server_stop(&sv);
}

int main(void) {
    int rc = t_main();
    free(g_body);
    return rc;
}
