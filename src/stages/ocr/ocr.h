/* ocr.h — text recognition with libtesseract's C API, one engine per worker thread.
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
 * Threads: an engine is used by one thread at a time. fr_ocr_pool holds up to N engines created on
 * demand and hands one to each caller (blocking when all are busy), so request threads can share
 * it. Tesseract itself may use OpenMP; for throughput set OMP_THREAD_LIMIT=1 in the process
 * environment and run one engine per core.
 */
#ifndef FRUGAL_OCR_H
#define FRUGAL_OCR_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "stages/image/image.h"

typedef struct fr_ocr_cfg {
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

typedef struct fr_ocr_result {
    char *text;          /* all lines joined with '\n', malloc'd */
    fr_ocr_line *lines;  /* [n_lines] */
    size_t n_lines;      /* count of non-empty lines */
    float mean_conf;     /* tesseract's mean word confidence 0..100 */
    int rotation;        /* degrees clockwise the page was turned before the kept pass */
    int passes;          /* recognition passes run (1 unless the orientation check ran) */
    double ms;           /* wall time of fr_ocr_run, milliseconds */
} fr_ocr_result;

typedef struct fr_ocr_engine fr_ocr_engine;
typedef struct fr_ocr_pool fr_ocr_pool;

/* Resolve the tessdata directory for cfg (see above) into buf; returns buf or NULL. */
const char *fr_ocr_tessdata_dir(const fr_ocr_cfg *cfg, char *buf, size_t cap);

fr_ocr_engine *fr_ocr_engine_new(const fr_ocr_cfg *cfg, fr_err *err);
void fr_ocr_engine_free(fr_ocr_engine *e);
/* Recognise a gray or RGB image. 0 on success (*res owns its strings), -1 with err set. */
int fr_ocr_run(fr_ocr_engine *e, const fr_image *img, fr_ocr_result *res, fr_err *err);
void fr_ocr_result_free(fr_ocr_result *res);
/* Append the result as a JSON object:
 * {"text":..., "lines":[{"text":..., "conf":..., "box":[x0,y0,x1,y1]}], "mean_conf":...,
 *  "rotation":..., "passes":..., "ms":...} */
void fr_ocr_result_json(const fr_ocr_result *res, fr_buf *out);

/* A pool of at most n engines (n <= 0: one per core), created lazily; cfg is copied. */
fr_ocr_pool *fr_ocr_pool_new(const fr_ocr_cfg *cfg, int n, fr_err *err);
int fr_ocr_pool_run(fr_ocr_pool *p, const fr_image *img, fr_ocr_result *res, fr_err *err);
void fr_ocr_pool_free(fr_ocr_pool *p);

#endif
