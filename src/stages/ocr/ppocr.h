/* ppocr.h — the PP-OCR pipeline around the three networks (DB detection, the 180° direction
 * classifier, SVTR/CTC recognition), as PaddleOCR's predict_system runs it. Pure C on images and
 * float arrays: nothing here runs a network, so every step is testable on constructed inputs and
 * the executor that runs the models is wired in by the caller.
 *
 *   fr_ppocr_det_params dp = fr_ppocr_det_default_params();
 *   uint32_t mw, mh; fr_ppocr_det_size(img->width, img->height, dp.limit_side, &mw, &mh);
 *   float *x = malloc(3 * mw * mh * sizeof *x);            // (3, mh, mw) network input
 *   fr_ppocr_det_prep(img, mw, mh, x);
 *   ... run the det model: prob (1, 1, mh, mw) ...
 *   fr_ppocr_box boxes[FR_PPOCR_MAX_BOXES];
 *   int n = fr_ppocr_det_boxes(prob, mw, mh, img->width, img->height, &dp, boxes,
 *                              FR_PPOCR_MAX_BOXES, &err);  // in reading order
 *   for each box: fr_ppocr_crop(img, &boxes[i], &line) → cls input (fr_ppocr_cls_prep), flip
 *   with fr_ppocr_flip180 when fr_ppocr_cls_says_flip; rec input (fr_ppocr_rec_width,
 *   fr_ppocr_rec_prep); ... run rec: probs (T, C) ... fr_ppocr_ctc_decode(probs, T, C, dict, ...).
 *
 * Channel order: PaddleOCR reads images with OpenCV (BGR) and its models were trained so; every
 * *_prep here writes channel 0 = blue, 1 = green, 2 = red from an RGB (or gray) fr_image.
 *
 * Bounds: a probability map above FR_PPOCR_MAX_MAP_PIXELS is refused (FR_ERR_TOO_LARGE); at most
 * FR_PPOCR_MAX_CANDIDATES components are examined (PaddleOCR's max_candidates) and at most the
 * caller's cap of boxes kept; a component's outline holds at most 2 points per map row; crops are
 * at most FR_PPOCR_MAX_CROP_SIDE per side; the dictionary holds at most FR_PPOCR_MAX_DICT entries.
 * NaN in a probability map counts as 0 (below every threshold).
 *
 * Threads: every function is reentrant; a dictionary is read-only after loading and can be shared.
 */
#ifndef FRUGAL_PPOCR_H
#define FRUGAL_PPOCR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/image/image.h"
#include "stages/ocr/ocr.h"

#define FR_PPOCR_MAX_MAP_PIXELS (4096u * 4096u) /* largest probability map taken */
#define FR_PPOCR_MAX_CANDIDATES 1000            /* components examined per map */
#define FR_PPOCR_MAX_BOXES 1000                 /* a good cap for the caller's box array */
#define FR_PPOCR_MAX_CROP_SIDE 4096u            /* longest side of one rectified line crop */
#define FR_PPOCR_MAX_DICT 100000                /* dictionary entries */
#define FR_PPOCR_REC_H 48                       /* recognition / classifier input height */
#define FR_PPOCR_CLS_W 192                      /* classifier input width */

/* DB post-processing settings (PaddleOCR's defaults). */
typedef struct fr_ppocr_det_params {
    int limit_side;     /* the longer side of the network input is at most this; 960 */
    float thresh;       /* binarisation threshold of the probability map; 0.3 */
    float box_thresh;   /* a box whose mean probability is below this is dropped; 0.6 */
    float unclip_ratio; /* grow each box by area * ratio / perimeter on every side; 1.5 */
    float min_size;     /* shorter side (map pixels) below this is dropped; 3 */
    float line_tol;     /* boxes whose top-left y differ by less are one line; 10 image px */
} fr_ppocr_det_params;

/* A text box: a quadrilateral in image pixels, points clockwise from top-left. */
typedef struct fr_ppocr_box {
    float x[4], y[4]; /* top-left, top-right, bottom-right, bottom-left */
    float score;      /* mean probability inside the box before unclipping, 0..1 */
} fr_ppocr_box;

/* The recognition dictionary: index 0 is the CTC blank, 1..n the file's lines, then " ". */
typedef struct fr_ppocr_dict {
    char **chars;  /* [n]: chars[0] = "" (blank), chars[n-1] = " "; each malloc'd UTF-8 */
    size_t n;      /* number of classes the recogniser's output must have */
} fr_ppocr_dict;

/* One decoded text line. */
typedef struct fr_ppocr_text {
    char *text;       /* UTF-8, malloc'd (possibly "") */
    float conf;       /* mean of the kept steps' max probability, 0..1 (0 when nothing kept) */
    int n_unknown;    /* kept steps whose class is outside the dictionary (skipped) */
} fr_ppocr_text;

/* The script of a text, from the share of CJK ideographs among its letters and ideographs. */
typedef enum fr_ppocr_script {
    FR_PPOCR_SCRIPT_NONE = 0, /* no letters at all */
    FR_PPOCR_SCRIPT_LATIN,    /* mostly Latin (and other non-CJK) letters: lang "eng" */
    FR_PPOCR_SCRIPT_HAN,      /* CJK ideographs are at least 30 % of the letters: lang "chi_sim" */
} fr_ppocr_script;

fr_ppocr_det_params fr_ppocr_det_default_params(void);

/* ---- detection ---- */

/* The network input size for a w x h image: scaled so the longer side is at most limit_side
 * (never up), then each side rounded to the nearest multiple of 32 (at least 32). */
void fr_ppocr_det_size(uint32_t w, uint32_t h, int limit_side, uint32_t *out_w, uint32_t *out_h);
/* Bilinear resize of img (gray or RGB) to out_w x out_h and ImageNet normalisation into
 * out (3, out_h, out_w), BGR order: (v / 255 - mean) / std with mean 0.485 0.456 0.406 and std
 * 0.229 0.224 0.225 for channels 0 1 2. Cannot fail (the caller sizes out). */
void fr_ppocr_det_prep(const fr_image *img, uint32_t out_w, uint32_t out_h, float *out);
/* DB post-processing of prob (map_h, map_w) for an image of img_w x img_h: binarise at
 * p->thresh, take the 8-connected components (at most FR_PPOCR_MAX_CANDIDATES, in raster order of
 * their first pixel), the minimum-area rectangle of each component's outline, drop it when its
 * shorter side < min_size or its score (mean probability over the rectangle's polygon mask) <
 * box_thresh, grow it by unclip_ratio, drop it when the grown shorter side < min_size + 2, map it
 * to image pixels, clip, drop it when a side is <= 3 px, and sort into reading order
 * (fr_ppocr_sort_rows). Writes at
 * most cap boxes; returns their count (>= 0), or -1 with err set (map too large: TOO_LARGE; zero
 * sizes or NULL: BAD_REQUEST). */
int fr_ppocr_det_boxes(const float *prob, uint32_t map_w, uint32_t map_h, uint32_t img_w,
                       uint32_t img_h, const fr_ppocr_det_params *p, fr_ppocr_box *out, int cap,
                       fr_err *err);
/* Reading order in place: by the top-left corner's y then x; boxes whose top-left y differ by less
 * than line_tol are one line and go left to right (PaddleOCR's sorted_boxes). */
void fr_ppocr_sort_boxes(fr_ppocr_box *b, int n, float line_tol);
/* The page's skew from its boxes (fr_ppocr_box corners): the median slope of the top edges of the
 * boxes at least twice as wide as high, radians, clamped to +-0.2; 0 when none. */
float fr_ppocr_skew(const fr_ppocr_box *b, int n);
/* Whether two boxes share a row in the frame turned by skew: their extents across the lines
 * overlap by at least half the lower box's height. */
bool fr_ppocr_same_row(const fr_ppocr_box *a, const fr_ppocr_box *b, float skew);
/* Reading order in place, skew-aware (what fr_ppocr_det_boxes uses): rows of boxes that share a
 * row (fr_ppocr_same_row at the page's fr_ppocr_skew) with the row's first box, top to bottom,
 * each left to right along the lines. On a page turned by 3 degrees a value 400 px right of its
 * label sits 20 px higher: PaddleOCR's fixed 10-px rule makes it a row of its own, above the
 * label. Out of memory: fr_ppocr_sort_boxes with 10 px. */
void fr_ppocr_sort_rows(fr_ppocr_box *b, int n);
/* The minimum-area enclosing rectangle of n points (x, y interleaved), as a box with corners
 * ordered as fr_ppocr_box says; *short_side gets its shorter side. n >= 1. */
void fr_ppocr_min_area_rect(const float *pts, int n, fr_ppocr_box *out, float *short_side);
/* Grow a rectangle box by d = area * ratio / perimeter on each side (exactly what PaddleOCR's
 * polygon offset followed by the minimum-area rectangle gives for a rectangle). */
void fr_ppocr_unclip(fr_ppocr_box *b, float ratio);

/* ---- crop, classifier ---- */

/* The line under box b, rectified: a bilinear perspective warp of the quad to a w x h rectangle
 * (w = the longer of the top and bottom edges, h = the longer of the side edges, truncated,
 * border pixels replicated), then turned 90° counter-clockwise when h / w >= 1.5. out has img's
 * channels. 0, or -1 with err set (degenerate box: BAD_REQUEST; a side over
 * FR_PPOCR_MAX_CROP_SIDE: TOO_LARGE; out of memory). */
int fr_ppocr_crop(const fr_image *img, const fr_ppocr_box *b, fr_image *out, fr_err *err);
/* The classifier's input (3, 48, 192): the crop resized to height 48 keeping its aspect ratio
 * (width ceil(48 w / h), at most 192), v / 127.5 - 1, BGR, zero padding on the right. */
void fr_ppocr_cls_prep(const fr_image *crop, float *out);
/* Whether the classifier's probabilities (2: 0°, 180°) ask for a flip: label 1 and p > thresh
 * (PaddleOCR: 0.9). NaN never flips. */
int fr_ppocr_cls_says_flip(const float probs[2], float thresh);
/* Rotate an image by 180° in place. */
void fr_ppocr_flip180(fr_image *img);

/* ---- recognition ---- */

/* Width of the recognition input for a batch whose widest crop has aspect ratio max_ratio (w/h):
 * max(min_w, 48 * max_ratio) rounded up to a multiple of step (step <= 1: none), at most max_w. */
uint32_t fr_ppocr_rec_width(float max_ratio, uint32_t min_w, uint32_t step, uint32_t max_w);
/* One crop into the recognition input out (3, 48, width): resized to height 48 and width
 * min(width, ceil(48 w / h)), v / 127.5 - 1, BGR, zero padding on the right. */
void fr_ppocr_rec_prep(const fr_image *crop, uint32_t width, float *out);
/* Indices 0..n-1 of n crops sorted by aspect ratio (w / h), ascending: batches of consecutive
 * indices then pad little (PaddleOCR's order). */
void fr_ppocr_rec_order(const fr_image *crops, int n, int *idx);

/* Load the dictionary file (one entry per line, UTF-8; "\r\n" accepted); with_space adds " " as
 * the last class (PaddleOCR's use_space_char, on for ppocr_keys_v1). 0, or -1 with err set
 * (NOT_FOUND, BAD_REQUEST for invalid UTF-8 / empty / over FR_PPOCR_MAX_DICT entries). */
int fr_ppocr_dict_load(const char *path, int with_space, fr_ppocr_dict *d, fr_err *err);
/* The same from bytes in memory. */
int fr_ppocr_dict_parse(const char *data, size_t len, int with_space, fr_ppocr_dict *d,
                        fr_err *err);
void fr_ppocr_dict_free(fr_ppocr_dict *d);

/* CTC greedy decoding of probs (T, C) (the recogniser's softmax output, row per time step): the
 * argmax of each step, repeats collapsed, blanks (class 0) removed; classes >= d->n are counted in
 * n_unknown and skipped; NaN entries never win. conf = mean max probability of the kept steps.
 * 0, or -1 with err set (out of memory, or C == 0). out->text is malloc'd. */
int fr_ppocr_ctc_decode(const float *probs, int T, int C, const fr_ppocr_dict *d,
                        fr_ppocr_text *out, fr_err *err);
/* The greedy path of probs (T, C): path[2t] = the index (as a float) of step t's first largest
 * probability, path[2t + 1] = that probability (NaN never wins; a step with nothing above -inf
 * gives class 0, -inf). The CUDA recogniser session returns this directly (argmax_last). */
void fr_ppocr_best_path(const float *probs, int T, int C, float *path);
/* fr_ppocr_ctc_decode from the path (T, 2) of fr_ppocr_best_path. */
int fr_ppocr_ctc_decode_path(const float *path, int T, const fr_ppocr_dict *d, fr_ppocr_text *out,
                             fr_err *err);

/* Currency signs the dictionary lacks (ppocr_keys_v1: no "€", no "£"; the recogniser emits a
 * blank over them, or an "f" for "£"), from the line image (ppocr_signs.c): on the greedy path of
 * probs (T, C) for crop (recognised at input width in_w, the crop resized to min(in_w,
 * ceil(48 w / h)) columns of it), the first number whose figures have, right before them (or
 * right after them), a stretch where nothing was emitted but the crop holds a glyph of the
 * line's height, 0.35 to 1.8 character pitches wide, not beside a sign the dictionary has ($ ¥
 * ￥ ￡), gets "£" or "€" there by the glyph's shape (a lone "f" before a number becomes "£").
 * t->text (the decode of the same probs) is replaced by the path's text with the sign. Returns 1
 * when a sign was put in, 0 when not (nothing found, or inputs it does not look at: no crop,
 * T over 4096), -1 with err set when out of memory (t untouched). */
int fr_ppocr_find_signs(const float *probs, int T, int C, const fr_ppocr_dict *d,
                        const fr_image *crop, uint32_t in_w, fr_ppocr_text *t, fr_err *err);
/* fr_ppocr_find_signs from the path (T, 2) of fr_ppocr_best_path. */
int fr_ppocr_find_signs_path(const float *path, int T, const fr_ppocr_dict *d,
                             const fr_image *crop, uint32_t in_w, fr_ppocr_text *t, fr_err *err);

/* The same for a sign the detector boxed alone ("1.234,56 €" with a wide space): a box the
 * recogniser read as nothing (texts[i].text empty), at most twice as wide as high, next in its
 * row (fr_ppocr_same_row, the boxes in reading order) to a box whose text ends (the box before)
 * or starts (the box after) with a figure less than a line height away, and holding one glyph of
 * at least half the crop's height, gets "£" or "€" by the glyph's shape (conf at least 0.5).
 * crops[i] is box i's crop (pix NULL when there is none). Returns how many, or -1 with err set
 * (out of memory). */
int fr_ppocr_lone_signs(const fr_ppocr_box *boxes, const fr_image *crops, fr_ppocr_text *texts,
                        int n, fr_err *err);

/* ---- result ---- */

/* The script of UTF-8 text (invalid bytes are skipped); *cjk_share (may be NULL) gets the share
 * of CJK ideographs among letters and ideographs. */
fr_ppocr_script fr_ppocr_detect_script(const char *text, float *cjk_share);
/* tesseract-style language name of a script: "chi_sim", "eng" or "" (none). */
const char *fr_ppocr_script_lang(fr_ppocr_script s);
/* Assemble an fr_ocr_result from n recognised lines (texts[i] for boxes[i], in reading order;
 * lines with empty text are left out and boxes is compacted in place to the kept lines, so
 * boxes[0..res->n_lines) match res->lines; the text is moved out of texts, which keep NULL): line boxes
 * are the quads' bounding boxes, res->quads the quads themselves, confidences 0..100, text
 * joined by fr_ppocr_join_text (line_tol, join_gap), mean_conf the mean of the kept lines',
 * res->engine "ppocr", res->lang from the text's script. 0, or -1 with err set (out of memory). */
int fr_ppocr_result(fr_ppocr_box *boxes, fr_ppocr_text *texts, int n, float line_tol,
                    float join_gap, fr_ocr_result *res, fr_err *err);
/* Assemble the OCR text of the kept lines (boxes[0..n), in reading order, texts[i] for boxes[i])
 * into a malloc'd string: boxes of one row (their top-left y within line_tol, or sharing a row by
 * fr_ppocr_same_row at the boxes' fr_ppocr_skew) whose horizontal gap is under join_gap times the
 * line height are joined with a space (one phrase the detector split, or with a large join_gap a
 * label and its value in another column), every other boundary is '\n'. Never NULL. */
char *fr_ppocr_join_text(const fr_ppocr_box *boxes, char *const *texts, int n, float line_tol,
                         float join_gap);

/* ---- the engine: the three networks on frugal's ONNX executor (ppocr_run.c) ----
 *
 *   fr_ppocr_models *m = fr_ppocr_models_load(NULL, &err);     // models/ppocr of the data root
 *   fr_ppocr_opts o = fr_ppocr_default_opts();
 *   fr_ppocr *e = fr_ppocr_new(m, &o, &err);                    // one per thread
 *   fr_ocr_result r;
 *   fr_ocr_status st = fr_ppocr_run(e, img, &cancel, &r, &err); // r.quads, r.engine "ppocr"
 *   ... fr_ocr_result_free(&r); fr_ppocr_free(e); fr_ppocr_models_free(m);
 *
 * One page: det input (longer side <= 960, multiples of 32) → det → DB boxes (at most max_boxes)
 * → a rectified crop per box → the direction classifier in batches of cls_batch (crops it calls
 * 180° are turned) → the recogniser in batches of rec_batch crops of similar aspect ratio (sorted
 * by w/h; each batch padded to one width, a multiple of rec_step between rec_min_w and rec_max_w)
 * → CTC greedy decoding → lines under drop_score left out → fr_ocr_result with quads, the text
 * joined by rows (fr_ppocr_join_text), script and language detected from the text.
 *
 * Bounds: the image must be at most FR_PPOCR_MAX_MAP_PIXELS * 16 pixels (TOO_LARGE; callers fit
 * pages into their pixel budget first, see ocr.h); boxes are capped at max_boxes; the crops of
 * one page together at most FR_PPOCR_MAX_CROP_BYTES (TOO_LARGE); the cancel check is polled
 * between every network run and inside them (between nodes), and a stop returns FR_OCR_STOPPED
 * with res->stopped set and err's code from the reason (fr_cancel_reason_code).
 *
 * Threads: fr_ppocr_models is immutable after loading and shared by any number of engines and
 * threads. An fr_ppocr (its three executor sessions and scratch buffers) runs one page at a time:
 * use one engine per thread (fr_ocr_pool does, ocr.h); calls on one engine from two threads at
 * once are a bug of the caller. */

#define FR_PPOCR_DET_FILE "ch_PP-OCRv4_det_infer.onnx"
#define FR_PPOCR_REC_FILE "ch_PP-OCRv4_rec_infer.onnx"
#define FR_PPOCR_CLS_FILE "ch_ppocr_mobile_v2.0_cls_infer.onnx"
#define FR_PPOCR_DICT_FILE "ppocr_keys_v1.txt"
#define FR_PPOCR_DEFAULT_DIR "models/ppocr"      /* under the data root (base.h fr_data_path) */
#define FR_PPOCR_MAX_CROP_BYTES ((size_t)256 << 20) /* pixels of all crops of one page */
#define FR_PPOCR_MAX_IMAGE_PIXELS ((uint64_t)FR_PPOCR_MAX_MAP_PIXELS * 16)

typedef struct fr_ppocr_models fr_ppocr_models;
typedef struct fr_ppocr fr_ppocr;

/* Settings of one engine; fr_ppocr_default_opts gives the values shown. */
typedef struct fr_ppocr_opts {
    int n_threads;          /* threads of each network run; <= 0: 1 (a pool runs one engine per
                               core) */
    bool use_cls;           /* run the 180° classifier (true) */
    float cls_thresh;       /* flip when the classifier says 180° with more than this (0.9) */
    int cls_batch;          /* crops per classifier run (6) */
    int rec_batch;          /* crops per recogniser run (6) */
    uint32_t rec_min_w;     /* narrowest recogniser input (320, PaddleOCR's 3x48x320) */
    uint32_t rec_step;      /* batch widths are multiples of this (32: few distinct shapes) */
    uint32_t rec_max_w;     /* widest recogniser input; wider lines are squeezed (2400) */
    float drop_score;       /* lines whose confidence is below this are left out (0.5) */
    int max_boxes;          /* text boxes kept per page (FR_PPOCR_MAX_BOXES) */
    float join_gap;         /* fr_ppocr_join_text's gap, in line heights (40: a row is one
                               line, so a label keeps the value printed in another column) */
    bool find_signs;        /* put in the currency signs the dictionary lacks (true;
                               fr_ppocr_find_signs) */
    fr_ppocr_det_params det; /* detection settings (fr_ppocr_det_default_params) */
    int device;             /* -1: the networks run on the CPU executor; k >= 0: on CUDA device
                               k (backend/cuda/onnx_cuda.h; a binary without the CUDA backend
                               refuses it: UNSUPPORTED) */
    bool pad_batch;         /* every cls / rec run of k crops has batch/4, batch/2 or batch rows,
                               the smallest that holds k (padded with blank rows), and the
                               recogniser's batches are cut where that saves padded work
                               (fr_ppocr_rec_batches): few shapes, so a few CUDA graphs serve
                               every page (false) */
    uint32_t det_canvas;    /* > 0: the detector's input is placed top-left on a white
                               det_canvas x det_canvas input when it fits (a multiple of 32), and
                               its map cut back: one detector shape for every page (0) */
    uint32_t det_canvas_short; /* > 0 (a multiple of 32, under det_canvas): a page that fits
                               is placed on a det_canvas x det_canvas_short canvas (portrait,
                               rows x columns) or det_canvas_short x det_canvas (landscape)
                               instead, so an A4 page pays for its own shape: three detector
                               shapes in all (0) */
} fr_ppocr_opts;

fr_ppocr_opts fr_ppocr_default_opts(void);
/* The settings for CUDA device `device`: the defaults with larger batches (32 lines a run,
 * padded), recogniser widths in steps of 320 (8 shapes from 320 to 2400) and the detector on a
 * 960 x 960 canvas, so that the device runs few shapes (each a plan, with cuDNN's algorithm
 * search, and a CUDA graph), wide and graphed. */
fr_ppocr_opts fr_ppocr_cuda_opts(int device);
/* Whether dir (NULL: FR_PPOCR_DEFAULT_DIR under the data root) holds the four files. */
bool fr_ppocr_models_present(const char *dir);
/* Loads the three models and the dictionary from dir (NULL: the default). NULL with err set
 * (a file missing: NOT_FOUND naming it; a bad file: the loader's code). */
fr_ppocr_models *fr_ppocr_models_load(const char *dir, fr_err *err);
void fr_ppocr_models_free(fr_ppocr_models *m);
/* Rows of a cls / rec run of k crops in batches of up to batch: k, or with o->pad_batch the
 * smallest of batch/4, batch/2 and batch that holds k (batch when it is under 4). */
int fr_ppocr_batch_rows(const fr_ppocr_opts *o, int batch, int k);
/* The recogniser's batches over n crops whose aspect ratios (w / h) are ratios[0..n), ascending:
 * ends[b] is one past the last crop of batch b (ends has room for n); returns the count. Without
 * o->pad_batch: runs of rec_batch. With it: the cut that minimises the padded work, the sum over
 * batches of fr_ppocr_batch_rows x the batch's input width (fr_ppocr_rec_width of its widest)
 * plus a run's fixed cost (4 rows of rec_min_w), so a few wide lines do not widen a batch of
 * narrow ones. */
int fr_ppocr_rec_batches(const float *ratios, int n, const fr_ppocr_opts *o, int *ends);

/* An engine on m (borrowed: m must outlive it): one executor session per network. NULL with err
 * set (the executor cannot run a model: UNSUPPORTED; out of memory). */
fr_ppocr *fr_ppocr_new(const fr_ppocr_models *m, const fr_ppocr_opts *o, fr_err *err);
void fr_ppocr_free(fr_ppocr *e);
/* Reads a gray or RGB page into *res (res->engine "ppocr", res->quads one per line, res->lang
 * detected; res->ms the call's time). cancel may be NULL. FR_OCR_OK, FR_OCR_FAILED with err set
 * (empty image: BAD_REQUEST; over the bounds: TOO_LARGE; executor failure), or FR_OCR_STOPPED
 * (res->stopped, err). On anything but OK res holds no lines. */
fr_ocr_status fr_ppocr_run(fr_ppocr *e, const fr_image *img, const fr_cancel *cancel,
                           fr_ocr_result *res, fr_err *err);

/* Where an engine's time went, in seconds summed over every fr_ppocr_run since it was made:
 * the host steps and the network runs (each run's input copy, the run and the output copy). */
typedef enum fr_ppocr_step {
    FR_PPOCR_T_DET_PREP,  /* resize + normalise, the canvas */
    FR_PPOCR_T_DET_NET,   /* the detector */
    FR_PPOCR_T_DET_POST,  /* DB boxes from the map */
    FR_PPOCR_T_CROP,      /* rectified crops */
    FR_PPOCR_T_CLS_PREP,  /* classifier inputs */
    FR_PPOCR_T_CLS_NET,   /* the classifier */
    FR_PPOCR_T_REC_PREP,  /* recogniser order and inputs */
    FR_PPOCR_T_REC_NET,   /* the recogniser */
    FR_PPOCR_T_DECODE,    /* CTC, the sign search */
    FR_PPOCR_T_RESULT,    /* lone signs, rows, the joined text */
    FR_PPOCR_T_N
} fr_ppocr_step;
/* Copies the engine's totals into t[0..FR_PPOCR_T_N) and *pages (pages read). */
void fr_ppocr_times(const fr_ppocr *e, double t[FR_PPOCR_T_N], long *pages);
const char *fr_ppocr_step_name(fr_ppocr_step s);

#endif
