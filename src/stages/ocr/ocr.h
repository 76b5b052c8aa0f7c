/* ocr.h — text recognition with libtesseract's C API, one engine per worker thread, and the pool
 * that runs either reader (tesseract, or PP-OCR: stages/ocr/ppocr.h) behind one call.
 *
 * Design: an fr_ocr_engine wraps one TessBaseAPI initialised once (language models are loaded at
 * creation and reused for every page). A page is recognised with automatic page segmentation on an
 * 8-bit gray image; tesseract binarises it (Otsu by default, or leptonica's Otsu / Sauvola
 * adaptive via fr_ocr_cfg.binarize). Orientation is kept cheap: only when the first pass is poor
 * (mean confidence below retry_conf or almost no text) is the page's orientation detected with the
 * OSD model (a second, lazily created TessBaseAPI, if osd.traineddata is installed) or, without it,
 * by recognising the page at 90/180/270 degrees and keeping the most confident pass. The result is
 * the text, one entry per text line (RIL_TEXTLINE) with its confidence and box, and timings.
 *
 * tessdata: cfg.tessdata, else $TESSDATA_PREFIX, else the Debian/upstream default directories
 * (the first that holds <lang>.traineddata), else tesseract's compiled-in default.
 *
 * Bounds (fr_ocr_limits): a wall-clock time limit for the whole call (every pass) and a cancel
 * check (client gone, shutdown) are polled by tesseract's ETEXT_DESC monitor after every word
 * (TessBaseAPIRecognize(api, monitor) with a cancel callback), before each pass and while waiting
 * for a pooled engine, so a stopped call returns within a few milliseconds of recognition work.
 * Layout analysis (before the first word) is not interruptible; the pixel budget bounds it: a
 * page above max_pixels is downscaled (area average) to fit when that keeps at least min_scale of
 * its linear resolution (0.5: a 300-dpi scan stays at 150 dpi, tesseract's resolution hint here),
 * and refused (FR_OCR_OVER_BUDGET) otherwise, since text shrunk further turns illegible.
 *
 * Threads: an engine is used by one thread at a time. fr_ocr_pool holds up to N engines created on
 * demand and hands one to each caller (blocking when all are busy), so request threads can share
 * it. Tesseract itself may use OpenMP; for throughput set OMP_THREAD_LIMIT=1 in the process
 * environment and run one engine per core.
 */
#ifndef FRUGAL_OCR_H
#define FRUGAL_OCR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/image/image.h"

/* Which reader runs a page. */
typedef enum fr_ocr_kind {
    FR_OCR_KIND_TESSERACT = 0, /* libtesseract (this file) */
    FR_OCR_KIND_PPOCR,         /* PP-OCRv4 on frugal's ONNX executor (stages/ocr/ppocr.h) */
} fr_ocr_kind;

typedef struct fr_ocr_cfg {
    fr_ocr_kind kind;     /* the reader (0: tesseract); the fields below up to psm are tesseract's */
    const char *ppocr_dir; /* PP-OCR models folder; NULL = models/ppocr under the data root */
    const char *device;   /* where PP-OCR's networks run: NULL / "cpu", "cuda", "cuda:N" (a
                             binary with the CUDA backend; fr_ppocr_cuda_opts) */
    const char *lang;     /* tesseract languages, "eng", "chi_sim", "eng+chi_sim"; NULL = "eng" */
    const char *tessdata; /* directory of *.traineddata; NULL = search (see above) */
    int dpi;              /* resolution hint for tesseract; 0 = 150 */
    int binarize;         /* 0 tesseract Otsu (default), 1 leptonica Otsu, 2 Sauvola adaptive */
    float retry_conf;     /* orientation check below this mean confidence; 0 = 45, < 0 = never */
    int psm;              /* page segmentation mode; 0 = PSM_AUTO (3) */
} fr_ocr_cfg;

/* One recognised text line. */
typedef struct fr_ocr_line {
    char *text;             /* UTF-8, trimmed, malloc'd */
    float conf;             /* tesseract confidence 0..100 */
    int x0, y0, x1, y1;     /* bounding box in the (rotated) page, pixels */
} fr_ocr_line;

/* Bounds of one call (all optional: a zeroed struct means no limit). */
typedef struct fr_ocr_limits {
    double time_limit_s;     /* wall-clock limit of the call (pool wait + every pass); 0 = none */
    uint64_t max_pixels;     /* pixel budget of the page; 0 = none */
    double min_scale;        /* smallest downscale factor accepted to fit the budget; 0 = 0.5 */
    const fr_cancel *cancel; /* external cancel check (base.h), or NULL */
} fr_ocr_limits;

/* Outcome of a bounded call. */
typedef enum fr_ocr_status {
    FR_OCR_OK = 0,            /* recognised */
    FR_OCR_FAILED = -1,       /* error (err says why) */
    FR_OCR_STOPPED = -2,      /* cut short: res->stopped says why (time limit, client, shutdown) */
    FR_OCR_OVER_BUDGET = -3,  /* the page exceeds the pixel budget beyond min_scale */
} fr_ocr_status;

typedef struct fr_ocr_result {
    char *text;          /* all lines joined with '\n', malloc'd */
    fr_ocr_line *lines;  /* [n_lines] */
    size_t n_lines;      /* count of non-empty lines */
    float mean_conf;     /* tesseract's mean word confidence 0..100 */
    int rotation;        /* degrees clockwise the page was turned before the kept pass */
    int passes;          /* recognition passes run (1 unless the orientation check ran) */
    double ms;           /* wall time of fr_ocr_run, milliseconds (also when stopped) */
    double scale;        /* factor the page was downscaled by to fit the pixel budget (1 = none) */
    fr_cancel_reason stopped; /* why the call was cut short (FR_OCR_STOPPED), else NONE */
    const char *engine;  /* "tesseract" or "ppocr" (static) */
    float *quads;        /* ppocr: [n_lines * 8] each line's corners x0,y0 .. x3,y3 clockwise
                            from top-left (malloc'd); NULL for tesseract */
    const char *lang;    /* ppocr: language detected from the text, "eng", "chi_sim" or ""
                            (static); NULL for tesseract (its languages are the config's) */
} fr_ocr_result;

typedef struct fr_ocr_engine fr_ocr_engine;
typedef struct fr_ocr_pool fr_ocr_pool;

/* "tesseract" / "ppocr". */
const char *fr_ocr_kind_name(fr_ocr_kind k);
/* "tesseract" / "ppocr" → *k: 0, or -1 with err (BAD_REQUEST naming the value). */
int fr_ocr_kind_parse(const char *s, fr_ocr_kind *k, fr_err *err);
/* The default reader: PP-OCR when its four model files are in ppocr_dir (NULL: the default
 * folder), tesseract otherwise. */
fr_ocr_kind fr_ocr_kind_default(const char *ppocr_dir);

/* Resolve the tessdata directory for cfg (see above) into buf; returns buf or NULL. */
const char *fr_ocr_tessdata_dir(const fr_ocr_cfg *cfg, char *buf, size_t cap);

fr_ocr_engine *fr_ocr_engine_new(const fr_ocr_cfg *cfg, fr_err *err);
void fr_ocr_engine_free(fr_ocr_engine *e);
/* Recognise a gray or RGB image. 0 on success (*res owns its strings), -1 with err set. */
int fr_ocr_run(fr_ocr_engine *e, const fr_image *img, fr_ocr_result *res, fr_err *err);
/* The same under limits (NULL = none). Returns an fr_ocr_status; on anything but FR_OCR_OK, res
 * holds no text (res->ms, res->scale and res->stopped are still set) and err says why. */
fr_ocr_status fr_ocr_run_limited(fr_ocr_engine *e, const fr_image *img, const fr_ocr_limits *lim,
                                 fr_ocr_result *res, fr_err *err);
/* Area-average downscale of a gray image to out_w x out_h (each >= 1, <= the input's). */
void fr_ocr_downscale(const fr_image *gray, uint32_t out_w, uint32_t out_h, fr_image *out);
void fr_ocr_result_free(fr_ocr_result *res);
/* The result as a new JSON object (the caller owns it: cJSON_Delete), escaped by cJSON:
 * {"engine":"tesseract"|"ppocr", "text":..., "lines":[{"text":..., "conf":..., "box":[x0,y0,x1,y1]
 *  (, "quad":[x0,y0,..,x3,y3] with ppocr)}], "mean_conf":..., "rotation":..., "passes":...,
 *  "ms":... (, "script":"han"|"latin"|"none", "lang":... with ppocr)}; confidences to 0.1, ms to
 * 0.01, quads to whole pixels. Never NULL. */
struct cJSON;
struct cJSON *fr_ocr_result_json(const fr_ocr_result *res);

/* A pool of at most n engines (n <= 0: one per core), created lazily; cfg is copied. The engines
 * are cfg->kind's: tesseract engines, or PP-OCR engines (one thread each) on one set of models
 * loaded when the pool is made. NULL with err when the first engine cannot be made (language
 * data or models missing: UNAVAILABLE / NOT_FOUND; the executor cannot run a model:
 * UNSUPPORTED). Limits, cancel and the pixel budget work the same for both kinds. */
fr_ocr_pool *fr_ocr_pool_new(const fr_ocr_cfg *cfg, int n, fr_err *err);
int fr_ocr_pool_run(fr_ocr_pool *p, const fr_image *img, fr_ocr_result *res, fr_err *err);
/* fr_ocr_run_limited on a pooled engine; the wait for a free engine counts against the time
 * limit and is cut short by the cancel check too (FR_OCR_STOPPED). */
fr_ocr_status fr_ocr_pool_run_limited(fr_ocr_pool *p, const fr_image *img,
                                      const fr_ocr_limits *lim, fr_ocr_result *res, fr_err *err);
/* The reader the pool runs. */
fr_ocr_kind fr_ocr_pool_kind(const fr_ocr_pool *p);
/* The CUDA device PP-OCR's networks run on (cfg->device), or -1: the CPU (also tesseract). */
int fr_ocr_pool_cuda_device(const fr_ocr_pool *p);
void fr_ocr_pool_free(fr_ocr_pool *p);

#endif
