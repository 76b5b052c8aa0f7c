/* ocr.c — libtesseract engine, orientation fallback, limits (time, cancel, pixel budget), engine
 * pool; see ocr.h. */
#include "stages/ocr/ocr.h"

#include "stages/ocr/ppocr.h"
#include "backend/backend.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tesseract/capi.h>
#include <cjson/cJSON.h>
#include <time.h>

struct fr_ocr_engine {
    TessBaseAPI *api;    /* the recogniser, initialised with cfg.lang */
    TessBaseAPI *osd;    /* orientation detector, created on first need (NULL until then) */
    bool osd_tried;      /* creating osd was attempted (it may be unavailable) */
    char tessdata[512];  /* resolved tessdata directory ("" = tesseract's default) */
    fr_ocr_cfg cfg;      /* settings (lang points into lang_buf) */
    char lang_buf[128];  /* copy of the language string */
};

static bool has_model(const char *dir, const char *lang) {
    char first[64];
    size_t n = strcspn(lang, "+");
    if (n == 0 || n >= sizeof first) return false;
    memcpy(first, lang, n);
    first[n] = 0;
    char path[800];
    snprintf(path, sizeof path, "%s/%s.traineddata", dir, first);
    return fr_path_exists(path);
}

const char *fr_ocr_tessdata_dir(const fr_ocr_cfg *cfg, char *buf, size_t cap) {
    const char *lang = cfg && cfg->lang ? cfg->lang : "eng";
    const char *cands[8];
    size_t nc = 0;
    if (cfg && cfg->tessdata) cands[nc++] = cfg->tessdata;
    const char *env = getenv("TESSDATA_PREFIX");
    if (env && *env) cands[nc++] = env;
    cands[nc++] = "/usr/share/tesseract-ocr/5/tessdata";
    cands[nc++] = "/usr/share/tesseract-ocr/4.00/tessdata";
    cands[nc++] = "/usr/share/tessdata";
    cands[nc++] = "/usr/local/share/tessdata";
    for (size_t i = 0; i < nc; i++) {
        if (has_model(cands[i], lang)) {
            snprintf(buf, cap, "%s", cands[i]);
            return buf;
        }
        char sub[600]; /* $TESSDATA_PREFIX may name the parent of tessdata/ */
        snprintf(sub, sizeof sub, "%s/tessdata", cands[i]);
        if (has_model(sub, lang)) {
            snprintf(buf, cap, "%s", sub);
            return buf;
        }
    }
    return NULL;
}

static void quiet(TessBaseAPI *api) { TessBaseAPISetVariable(api, "debug_file", "/dev/null"); }

fr_ocr_engine *fr_ocr_engine_new(const fr_ocr_cfg *cfg, fr_err *err) {
    fr_ocr_engine *e = fr_xcalloc(1, sizeof *e);
    if (cfg) e->cfg = *cfg;
    snprintf(e->lang_buf, sizeof e->lang_buf, "%s", e->cfg.lang ? e->cfg.lang : "eng");
    e->cfg.lang = e->lang_buf;
    if (!e->cfg.dpi) e->cfg.dpi = 150;
    if (e->cfg.retry_conf == 0) e->cfg.retry_conf = 45;
    if (!e->cfg.psm) e->cfg.psm = PSM_AUTO;
    const char *dir = fr_ocr_tessdata_dir(&e->cfg, e->tessdata, sizeof e->tessdata);
    e->api = TessBaseAPICreate();
    if (TessBaseAPIInit3(e->api, dir, e->lang_buf) != 0) {
        fr_err_setc(err, FR_ERR_UNAVAILABLE,
                    "OCR: cannot load tesseract language '%s' (tessdata %s)", e->lang_buf,
                    dir ? dir : "default");
        TessBaseAPIDelete(e->api);
        free(e);
        return NULL;
    }
    e->cfg.tessdata = NULL;
    quiet(e->api);
    TessBaseAPISetPageSegMode(e->api, (TessPageSegMode)e->cfg.psm);
    char tm[8];
    snprintf(tm, sizeof tm, "%d", e->cfg.binarize);
    TessBaseAPISetVariable(e->api, "thresholding_method", tm);
    return e;
}

void fr_ocr_engine_free(fr_ocr_engine *e) {
    if (!e) return;
    if (e->api) TessBaseAPIEnd(e->api), TessBaseAPIDelete(e->api);
    if (e->osd) TessBaseAPIEnd(e->osd), TessBaseAPIDelete(e->osd);
    free(e);
}

const char *fr_ocr_kind_name(fr_ocr_kind k) {
    return k == FR_OCR_KIND_PPOCR ? "ppocr" : "tesseract";
}

int fr_ocr_kind_parse(const char *s, fr_ocr_kind *k, fr_err *err) {
    if (s && !strcmp(s, "tesseract")) *k = FR_OCR_KIND_TESSERACT;
    else if (s && !strcmp(s, "ppocr")) *k = FR_OCR_KIND_PPOCR;
    else {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "OCR engine '%s': not ppocr or tesseract",
                    s ? s : "");
        return -1;
    }
    return 0;
}

fr_ocr_kind fr_ocr_kind_default(const char *ppocr_dir) {
    return fr_ppocr_models_present(ppocr_dir) ? FR_OCR_KIND_PPOCR : FR_OCR_KIND_TESSERACT;
}

void fr_ocr_result_free(fr_ocr_result *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_lines; i++) free(r->lines[i].text);
    free(r->lines);
    free(r->text);
    free(r->quads);
    memset(r, 0, sizeof *r);
}

static char *trim_dup(const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    return fr_xstrndup(s, n);
}

/* The bounds of one call as tesseract's monitor sees them. */
typedef struct ocr_watch {
    double t0;               /* fr_time_s() at the start of the call */
    double deadline;         /* fr_time_s() at which the time limit passes; 0 = none */
    double limit_s;          /* the time limit (for messages) */
    const fr_cancel *cancel; /* external check, or NULL */
    fr_cancel_reason why;    /* the first reason seen (sticky) */
} ocr_watch;

static fr_cancel_reason watch_check(ocr_watch *w) {
    if (!w || w->why) return w ? w->why : FR_CANCEL_NONE;
    if (w->deadline > 0 && fr_time_s() >= w->deadline) w->why = FR_CANCEL_TIMEOUT;
    else w->why = fr_cancel_check(w->cancel);
    return w->why;
}

/* tesseract's cancel callback: called after every word of every recognition pass. */
static bool on_word(void *cancel_this, int words) {
    (void)words;
    return watch_check(cancel_this) != FR_CANCEL_NONE;
}

static void stopped_msg(const ocr_watch *w, fr_err *err) {
    double el = fr_time_s() - w->t0;
    fr_err_code c = fr_cancel_reason_code(w->why);
    if (w->why == FR_CANCEL_TIMEOUT)
        fr_err_setc(err, c, "OCR: stopped after %.1f s: the page took longer than the OCR time "
                            "limit of %.1f s", el, w->limit_s);
    else if (w->why == FR_CANCEL_SHUTDOWN)
        fr_err_setc(err, c, "OCR: stopped after %.1f s: the server is shutting down", el);
    else if (w->why == FR_CANCEL_CLIENT_GONE)
        fr_err_setc(err, c, "OCR: stopped after %.1f s: the client disconnected", el);
    else
        fr_err_setc(err, c, "OCR: stopped after %.1f s: the request's deadline passed", el);
}

/* One recognition pass over a gray image into r (replacing its contents). 0, -1 (error) or
 * FR_OCR_STOPPED when the watch fired. */
static int pass(fr_ocr_engine *e, const fr_image *g, ocr_watch *w, fr_ocr_result *r,
                fr_err *err) {
    fr_ocr_result_free(r);
    if (watch_check(w)) return FR_OCR_STOPPED;
    TessBaseAPISetImage(e->api, g->pix, (int)g->width, (int)g->height, 1, (int)g->width);
    TessBaseAPISetSourceResolution(e->api, e->cfg.dpi);
    ETEXT_DESC *mon = NULL;
    if (w) {
        mon = TessMonitorCreate();
        TessMonitorSetCancelFunc(mon, on_word);
        TessMonitorSetCancelThis(mon, w);
    }
    int rrc = TessBaseAPIRecognize(e->api, mon);
    if (mon) TessMonitorDelete(mon);
    if (watch_check(w)) { /* stopped mid-page (or right after): the text is incomplete */
        TessBaseAPIClear(e->api);
        return FR_OCR_STOPPED;
    }
    if (rrc != 0) {
        TessBaseAPIClear(e->api);
        fr_err_set(err, "OCR: recognition failed");
        return -1;
    }
    r->mean_conf = (float)TessBaseAPIMeanTextConf(e->api);
    size_t cap = 0;
    fr_buf all = {0};
    TessResultIterator *ri = TessBaseAPIGetIterator(e->api);
    if (ri) {
        const TessPageIterator *pi = TessResultIteratorGetPageIterator(ri);
        do {
            char *t = TessResultIteratorGetUTF8Text(ri, RIL_TEXTLINE);
            if (!t) continue;
            char *s = trim_dup(t);
            TessDeleteText(t);
            if (!*s) {
                free(s);
                continue;
            }
            if (r->n_lines == cap) {
                cap = cap ? cap * 2 : 16;
                r->lines = fr_xrealloc(r->lines, cap * sizeof *r->lines);
            }
            fr_ocr_line *ln = &r->lines[r->n_lines++];
            ln->text = s;
            ln->conf = TessResultIteratorConfidence(ri, RIL_TEXTLINE);
            ln->x0 = ln->y0 = ln->x1 = ln->y1 = 0;
            TessPageIteratorBoundingBox(pi, RIL_TEXTLINE, &ln->x0, &ln->y0, &ln->x1, &ln->y1);
            if (all.len) fr_buf_puts(&all, "\n");
            fr_buf_puts(&all, s);
        } while (TessResultIteratorNext(ri, RIL_TEXTLINE));
        TessResultIteratorDelete(ri);
    }
    r->text = all.len ? fr_buf_cstr(&all) : fr_xstrdup("");
    if (!all.len) fr_buf_free(&all);
    TessBaseAPIClear(e->api);
    return 0;
}

static bool poor(const fr_ocr_engine *e, const fr_ocr_result *r) {
    if (e->cfg.retry_conf < 0) return false;
    return r->mean_conf < e->cfg.retry_conf || strlen(r->text) < 8;
}

/* Orientation from the OSD model: degrees clockwise to turn the page upright, or -1. */
static int osd_rotation(fr_ocr_engine *e, const fr_image *g) {
    if (!e->osd_tried) {
        e->osd_tried = true;
        char dir[512];
        fr_ocr_cfg oc = {.lang = "osd", .tessdata = e->tessdata[0] ? e->tessdata : NULL};
        if (fr_ocr_tessdata_dir(&oc, dir, sizeof dir)) {
            e->osd = TessBaseAPICreate();
            if (TessBaseAPIInit3(e->osd, dir, "osd") != 0) {
                TessBaseAPIDelete(e->osd);
                e->osd = NULL;
            } else {
                quiet(e->osd);
                TessBaseAPISetPageSegMode(e->osd, PSM_OSD_ONLY);
            }
        }
    }
    if (!e->osd) return -1;
    TessBaseAPISetImage(e->osd, g->pix, (int)g->width, (int)g->height, 1, (int)g->width);
    TessBaseAPISetSourceResolution(e->osd, e->cfg.dpi);
    int deg = 0;
    float oconf = 0, sconf = 0;
    const char *script = NULL;
    BOOL ok = TessBaseAPIDetectOrientationScript(e->osd, &deg, &oconf, &script, &sconf);
    /* script points into the OSD model's unicharset in tesseract 5 (capi.h's advice to
     * TessDeleteText it is stale and causes a double free) */
    (void)script;
    TessBaseAPIClear(e->osd);
    if (!ok || oconf < 1.0f) return -1;
    /* tesseract reports the counter-clockwise angle the text is rotated by */
    return deg % 360;
}

void fr_ocr_downscale(const fr_image *g, uint32_t ow, uint32_t oh, fr_image *out) {
    FR_ASSERT(g->channels == 1 && ow >= 1 && oh >= 1 && ow <= g->width && oh <= g->height);
    uint32_t w = g->width, h = g->height;
    out->width = ow;
    out->height = oh;
    out->channels = 1;
    out->pix = fr_xmalloc((size_t)ow * oh);
    uint32_t *acc = fr_xcalloc(w, sizeof *acc); /* (w) column sums of the current band */
    uint32_t *x0 = fr_xmalloc((size_t)(ow + 1) * sizeof *x0); /* (ow + 1) column band edges */
    for (uint32_t x = 0; x <= ow; x++) x0[x] = (uint32_t)((uint64_t)x * w / ow);
    for (uint32_t y = 0; y < oh; y++) {
        uint32_t ya = (uint32_t)((uint64_t)y * h / oh), yb = (uint32_t)((uint64_t)(y + 1) * h / oh);
        memset(acc, 0, w * sizeof *acc);
        for (uint32_t sy = ya; sy < yb; sy++) {
            const uint8_t *row = g->pix + (size_t)sy * w;
            for (uint32_t sx = 0; sx < w; sx++) acc[sx] += row[sx];
        }
        uint8_t *o = out->pix + (size_t)y * ow;
        for (uint32_t x = 0; x < ow; x++) {
            uint64_t s = 0;
            for (uint32_t sx = x0[x]; sx < x0[x + 1]; sx++) s += acc[sx];
            uint64_t n = (uint64_t)(x0[x + 1] - x0[x]) * (yb - ya);
            o[x] = (uint8_t)((s + n / 2) / n);
        }
    }
    free(acc);
    free(x0);
}

/* Fit the gray page g into the pixel budget: 0 with *use = g or the downscaled copy in *tmp,
 * FR_OCR_OVER_BUDGET with err when that needs a factor below min_scale. */
static int fit_budget(const fr_image *g, const fr_ocr_limits *lim, fr_image *tmp,
                      const fr_image **use, double *scale, fr_err *err) {
    *use = g;
    *scale = 1;
    uint64_t px = (uint64_t)g->width * g->height;
    if (!lim || !lim->max_pixels || px <= lim->max_pixels) return 0;
    double min_scale = lim->min_scale > 0 ? lim->min_scale : 0.5;
    double s = sqrt((double)lim->max_pixels / (double)px);
    if (s < min_scale) {
        fr_err_setc(err, FR_ERR_TOO_LARGE,
                    "OCR: the image is %ux%u (%.1f megapixels); the OCR pixel budget is %.1f "
                    "megapixels and shrinking the page %.1fx to fit would make its text "
                    "illegible (at most %.1fx): send the page at 300 dpi or less, or crop it",
                    g->width, g->height, (double)px / 1e6, (double)lim->max_pixels / 1e6, 1 / s,
                    1 / min_scale);
        return FR_OCR_OVER_BUDGET;
    }
    uint32_t ow = (uint32_t)fmax(1, floor(g->width * s)), oh = (uint32_t)fmax(1, floor(g->height * s));
    while ((uint64_t)ow * oh > lim->max_pixels && ow > 1 && oh > 1) ow--, oh--;
    fr_ocr_downscale(g, ow, oh, tmp);
    *use = tmp;
    *scale = (double)ow / g->width;
    return 0;
}

static void watch_init(ocr_watch *w, const fr_ocr_limits *lim, double t0) {
    memset(w, 0, sizeof *w);
    w->t0 = t0;
    if (!lim) return;
    w->cancel = lim->cancel;
    w->limit_s = lim->time_limit_s;
    if (lim->time_limit_s > 0) w->deadline = t0 + lim->time_limit_s;
}

int fr_ocr_run(fr_ocr_engine *e, const fr_image *img, fr_ocr_result *res, fr_err *err) {
    return fr_ocr_run_limited(e, img, NULL, res, err) == FR_OCR_OK ? 0 : -1;
}

static fr_ocr_status run_watched(fr_ocr_engine *e, const fr_image *img, const fr_ocr_limits *lim,
                                 ocr_watch *wt, fr_ocr_result *res, fr_err *err) {
    double t0 = wt->t0;
    ocr_watch *w = lim ? wt : NULL; /* no limits: tesseract runs without a monitor */
    memset(res, 0, sizeof *res);
    res->scale = 1;
    if (!img || !img->pix || !img->width || !img->height) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "OCR: empty image");
        return FR_OCR_FAILED;
    }
    fr_image g = {0}, small = {0};
    const fr_image *gray = img;
    if (img->channels != 1) {
        fr_image_to_gray(img, &g);
        gray = &g;
    }
    double scale = 1;
    int rc = fit_budget(gray, lim, &small, &gray, &scale, err);
    if (!rc) {
        rc = pass(e, gray, w, res, err);
        res->passes = 1;
    }
    if (!rc && poor(e, res)) {
        int rot = osd_rotation(e, gray);
        int cands[3] = {90, 180, 270}, nc = 3;
        if (rot >= 0) {
            cands[0] = rot;
            nc = rot == 0 ? 0 : 1;
        }
        for (int i = 0; i < nc; i++) {
            if (watch_check(w)) break;
            fr_image r = {0};
            fr_image_rotate(gray, cands[i], &r);
            fr_ocr_result alt = {0};
            fr_err e2;
            if (!pass(e, &r, w, &alt, &e2) && alt.mean_conf > res->mean_conf + 5) {
                int passes = res->passes;
                fr_ocr_result_free(res);
                *res = alt;
                res->passes = passes;
                res->rotation = cands[i];
            } else {
                fr_ocr_result_free(&alt);
            }
            res->passes++;
            fr_image_free(&r);
        }
        /* a retry pass cut short: the first pass is complete, so it stands when only the time
         * limit ran out; nobody is waiting for it after a disconnect or at shutdown */
        if (watch_check(w) && w->why != FR_CANCEL_TIMEOUT) rc = FR_OCR_STOPPED;
    }
    fr_image_free(&small);
    fr_image_free(&g);
    if (rc == FR_OCR_STOPPED) {
        fr_ocr_result_free(res);
        res->stopped = w->why;
        stopped_msg(w, err);
    }
    res->scale = scale;
    res->ms = (fr_time_s() - t0) * 1e3;
    res->engine = "tesseract";
    return (fr_ocr_status)rc;
}

/* The watch as an fr_cancel for the PP-OCR engine (polled between and inside network runs). */
static fr_cancel_reason watch_fn(void *ctx) { return watch_check(ctx); }

/* One page on a PP-OCR engine under the same bounds as tesseract's: the pixel budget (a page over
 * it is downscaled in gray, or refused), the time limit and the cancel check through the watch. */
static fr_ocr_status run_ppocr(fr_ppocr *e, const fr_image *img, const fr_ocr_limits *lim,
                               ocr_watch *w, fr_ocr_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    res->scale = 1;
    if (!img || !img->pix || !img->width || !img->height) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "OCR: empty image");
        return FR_OCR_FAILED;
    }
    fr_image g = {0}, small = {0};
    const fr_image *use = img;
    double scale = 1;
    int rc = 0;
    uint64_t px = (uint64_t)img->width * img->height;
    if (lim && lim->max_pixels && px > lim->max_pixels) { /* only then the gray copy */
        if (img->channels != 1) fr_image_to_gray(img, &g);
        rc = fit_budget(img->channels != 1 ? &g : img, lim, &small, &use, &scale, err);
    }
    fr_ocr_status st = (fr_ocr_status)rc;
    if (!rc) {
        fr_cancel c = {watch_fn, w};
        st = fr_ppocr_run(e, use, &c, res, err);
        if (st == FR_OCR_STOPPED && w->why) {
            res->stopped = w->why;
            stopped_msg(w, err);
        }
    }
    fr_image_free(&small);
    fr_image_free(&g);
    res->scale = scale;
    res->ms = (fr_time_s() - w->t0) * 1e3;
    return st;
}

fr_ocr_status fr_ocr_run_limited(fr_ocr_engine *e, const fr_image *img, const fr_ocr_limits *lim,
                                 fr_ocr_result *res, fr_err *err) {
    ocr_watch w;
    watch_init(&w, lim, fr_time_s());
    return run_watched(e, img, lim, &w, res, err);
}

/* x rounded to 1/scale, so that the JSON shows the digits that mean something. */
static double rounded(double x, double scale) { return round(x * scale) / scale; }

cJSON *fr_ocr_result_json(const fr_ocr_result *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "engine", r->engine ? r->engine : "tesseract");
    cJSON_AddStringToObject(o, "text", r->text ? r->text : "");
    cJSON *lines = cJSON_AddArrayToObject(o, "lines");
    for (size_t i = 0; i < r->n_lines; i++) {
        const fr_ocr_line *l = &r->lines[i];
        cJSON *lo = cJSON_CreateObject();
        cJSON_AddStringToObject(lo, "text", l->text ? l->text : "");
        cJSON_AddNumberToObject(lo, "conf", rounded(l->conf, 10));
        const int box[4] = {l->x0, l->y0, l->x1, l->y1};
        cJSON_AddItemToObject(lo, "box", cJSON_CreateIntArray(box, 4));
        if (r->quads) {
            double q[8];
            for (int c = 0; c < 8; c++) q[c] = rint(r->quads[i * 8 + c]);
            cJSON_AddItemToObject(lo, "quad", cJSON_CreateDoubleArray(q, 8));
        }
        cJSON_AddItemToArray(lines, lo);
    }
    cJSON_AddNumberToObject(o, "mean_conf", rounded(r->mean_conf, 10));
    cJSON_AddNumberToObject(o, "rotation", r->rotation);
    cJSON_AddNumberToObject(o, "passes", r->passes);
    cJSON_AddNumberToObject(o, "ms", rounded(r->ms, 100));
    if (r->lang) {
        fr_ppocr_script sc = fr_ppocr_detect_script(r->text ? r->text : "", NULL);
        cJSON_AddStringToObject(o, "script", sc == FR_PPOCR_SCRIPT_HAN     ? "han"
                                             : sc == FR_PPOCR_SCRIPT_LATIN ? "latin"
                                                                           : "none");
        cJSON_AddStringToObject(o, "lang", r->lang);
    }
    return o;
}

/* ---- pool ------------------------------------------------------------------------------------- */

struct fr_ocr_pool {
    pthread_mutex_t mu;      /* guards the fields below */
    pthread_cond_t cv;       /* signalled when an engine is returned */
    void **free_e;           /* [cap] idle engines (stack): fr_ocr_engine or fr_ppocr by kind */
    int n_free;              /* idle count */
    int n_made;              /* engines created so far */
    int cap;                 /* most engines */
    fr_ocr_cfg cfg;          /* copied settings */
    char lang[128];          /* copy of cfg.lang */
    char tessdata[512];      /* copy of cfg.tessdata */
    fr_ppocr_models *pm;     /* PP-OCR: the models every engine shares (immutable), else NULL */
    fr_ppocr_opts po;        /* PP-OCR: the engines' settings */
};

static void *engine_new(fr_ocr_pool *p, fr_err *err) {
    if (p->cfg.kind == FR_OCR_KIND_PPOCR) return fr_ppocr_new(p->pm, &p->po, err);
    return fr_ocr_engine_new(&p->cfg, err);
}

static void engine_free(const fr_ocr_pool *p, void *e) {
    if (p->cfg.kind == FR_OCR_KIND_PPOCR) fr_ppocr_free(e);
    else fr_ocr_engine_free(e);
}

fr_ocr_pool *fr_ocr_pool_new(const fr_ocr_cfg *cfg, int n, fr_err *err) {
    fr_ocr_pool *p = fr_xcalloc(1, sizeof *p);
    if (cfg) p->cfg = *cfg;
    snprintf(p->lang, sizeof p->lang, "%s", p->cfg.lang ? p->cfg.lang : "eng");
    p->cfg.lang = p->lang;
    if (p->cfg.tessdata) {
        snprintf(p->tessdata, sizeof p->tessdata, "%s", p->cfg.tessdata);
        p->cfg.tessdata = p->tessdata;
    }
    p->cfg.ppocr_dir = NULL; /* read once, below */
    p->cfg.device = NULL;    /* read once, below */
    p->cap = n > 0 ? n : fr_n_cores();
    p->free_e = fr_xcalloc((size_t)p->cap, sizeof *p->free_e);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (p->cfg.kind == FR_OCR_KIND_PPOCR) {
        fr_backend_kind dk;
        int di;
        if (fr_backend_parse_device(cfg->device, &dk, &di, err)) {
            fr_err_prefix(err, "OCR");
            fr_ocr_pool_free(p);
            return NULL;
        }
        p->po = dk == FR_BACKEND_CUDA ? fr_ppocr_cuda_opts(di) : fr_ppocr_default_opts();
        if (!(p->pm = fr_ppocr_models_load(cfg->ppocr_dir, err))) {
            fr_ocr_pool_free(p);
            return NULL;
        }
    }
    /* create one engine now so a missing language or model is reported at start-up */
    void *e = engine_new(p, err);
    if (!e) {
        fr_ocr_pool_free(p);
        return NULL;
    }
    p->free_e[p->n_free++] = e;
    p->n_made = 1;
    return p;
}

fr_ocr_kind fr_ocr_pool_kind(const fr_ocr_pool *p) { return p->cfg.kind; }

int fr_ocr_pool_cuda_device(const fr_ocr_pool *p) {
    return p->cfg.kind == FR_OCR_KIND_PPOCR ? p->po.device : -1;
}

int fr_ocr_pool_run(fr_ocr_pool *p, const fr_image *img, fr_ocr_result *res, fr_err *err) {
    return fr_ocr_pool_run_limited(p, img, NULL, res, err) == FR_OCR_OK ? 0 : -1;
}

fr_ocr_status fr_ocr_pool_run_limited(fr_ocr_pool *p, const fr_image *img,
                                      const fr_ocr_limits *lim, fr_ocr_result *res, fr_err *err) {
    ocr_watch w;
    watch_init(&w, lim, fr_time_s());
    void *e = NULL;
    bool make = false;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->n_free) {
            e = p->free_e[--p->n_free];
            break;
        }
        if (p->n_made < p->cap) {
            p->n_made++;
            make = true;
            break; /* create outside the lock */
        }
        if (!lim) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        if (watch_check(&w)) break;
        /* all engines busy: wait in 50 ms slices so a limit or a cancel ends the wait too */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    if (!e && !make) { /* stopped while waiting for an engine */
        memset(res, 0, sizeof *res);
        res->scale = 1;
        res->stopped = w.why;
        stopped_msg(&w, err);
        res->ms = (fr_time_s() - w.t0) * 1e3;
        return FR_OCR_STOPPED;
    }
    if (!e) {
        e = engine_new(p, err);
        if (!e) {
            pthread_mutex_lock(&p->mu);
            p->n_made--;
            pthread_cond_signal(&p->cv);
            pthread_mutex_unlock(&p->mu);
            memset(res, 0, sizeof *res);
            return FR_OCR_FAILED;
        }
    }
    fr_ocr_status rc = p->cfg.kind == FR_OCR_KIND_PPOCR
                           ? run_ppocr(e, img, lim, &w, res, err)
                           : run_watched(e, img, lim, &w, res, err);
    pthread_mutex_lock(&p->mu);
    p->free_e[p->n_free++] = e;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void fr_ocr_pool_free(fr_ocr_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n_free; i++) engine_free(p, p->free_e[i]);
    free(p->free_e);
    fr_ppocr_models_free(p->pm);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
