/* ppocr_run.c — the PP-OCR engine: the three networks on frugal's ONNX executor
 * (backend/onnx_exec.h, or its CUDA twin backend/cuda/onnx_cuda.h when opts.device >= 0) around
 * the pure steps of ppocr_det.c and ppocr_rec.c; see ppocr.h.
 *
 * Design: the models and the dictionary are loaded once (fr_ppocr_models, immutable, shared);
 * an engine holds one executor session per network and one input buffer grown to the largest
 * run it has made (bounded by the image limit and the width cap), so a page allocates only its
 * boxes, crops and texts. Every network run is checked for the shape it must give back; a run
 * that fails while the cancel check says stop is a stop (FR_OCR_STOPPED), anything else is
 * the executor's error with its code.
 */
#include "stages/ocr/ppocr.h"
#include "backend/cuda/onnx_cuda.h"
#include "backend/onnx_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/onnx/onnx.h"

/* The CUDA executor is linked only into binaries built with the CUDA backend (make cuda); it is
 * referenced weakly, as backend.c references the CUDA row of the backend table. */
#pragma weak fr_onnx_cuda_default_opts
#pragma weak fr_onnx_cuda_sess_new
#pragma weak fr_onnx_cuda_sess_run
#pragma weak fr_onnx_cuda_sess_free


struct fr_ppocr_models {
    fr_onnx_model *det; /* DB detector: x (N, 3, H, W) → (N, 1, H, W) probabilities */
    fr_onnx_model *cls; /* direction classifier: x (N, 3, 48, 192) → (N, 2) */
    fr_onnx_model *rec; /* recogniser: x (N, 3, 48, W) → (N, W/8, classes) softmax */
    fr_ppocr_dict dict; /* classes of rec: blank, the dictionary, " " */
};

/* One network's session, on the CPU executor or on a CUDA device (the other NULL). */
typedef struct net_sess {
    fr_onnx_sess *cpu;
    fr_onnx_cuda_sess *gpu;
} net_sess;

struct fr_ppocr {
    const fr_ppocr_models *m; /* borrowed */
    fr_ppocr_opts o;          /* settings */
    net_sess det, cls, rec;   /* sessions (cls empty when !o.use_cls) */
    float *in;                /* network input scratch */
    size_t in_cap;            /* its capacity in floats */
    float *canvas;            /* the detector's canvas input (o.det_canvas), or NULL */
    float *map;               /* the map cut back from the canvas output */
    float *path;              /* a line's greedy path (T, 2) on the CPU */
    size_t path_cap;          /* its capacity in steps */
    double t[FR_PPOCR_T_N];   /* seconds per step, summed (fr_ppocr_times) */
    long pages;               /* pages read */
};

/* Adds the time since *t0 to step s and restarts *t0. */
static void lap(fr_ppocr *e, fr_ppocr_step s, double *t0) {
    double now = fr_time_s();
    e->t[s] += now - *t0;
    *t0 = now;
}

void fr_ppocr_times(const fr_ppocr *e, double t[FR_PPOCR_T_N], long *pages) {
    memcpy(t, e->t, sizeof e->t);
    *pages = e->pages;
}

const char *fr_ppocr_step_name(fr_ppocr_step s) {
    static const char *const n[FR_PPOCR_T_N] = {"det_prep", "det_net",  "det_post", "crop",
                                                "cls_prep", "cls_net",  "rec_prep", "rec_net",
                                                "decode",   "result"};
    return (unsigned)s < FR_PPOCR_T_N ? n[s] : "?";
}

fr_ppocr_opts fr_ppocr_default_opts(void) {
    fr_ppocr_opts o = {.n_threads = 1, .use_cls = true, .cls_thresh = 0.9f, .cls_batch = 6,
                       .rec_batch = 6, .rec_min_w = 320, .rec_step = 32, .rec_max_w = 2400,
                       .drop_score = 0.5f, .max_boxes = FR_PPOCR_MAX_BOXES, .join_gap = 40.0f,
                       .find_signs = true,
                       .det = fr_ppocr_det_default_params(), .device = -1};
    return o;
}

fr_ppocr_opts fr_ppocr_cuda_opts(int device) {
    fr_ppocr_opts o = fr_ppocr_default_opts();
    o.device = device;
    o.cls_batch = o.rec_batch = 32;
    o.pad_batch = true;
    o.rec_step = 320;
    o.det_canvas = (uint32_t)o.det.limit_side;
    o.det_canvas_short = (o.det_canvas * 3 / 4) / 32 * 32; /* 720 of 960: A4 (1:1.414) fits */
    return o;
}

/* dir/file as a malloc'd path; dir NULL: the default folder under the data root. */
static char *model_path(const char *dir, const char *file) {
    if (dir) return fr_path_join(dir, file);
    char *d = fr_data_path(FR_PPOCR_DEFAULT_DIR);
    char *p = fr_path_join(d, file);
    free(d);
    return p;
}

static const char *const files[4] = {FR_PPOCR_DET_FILE, FR_PPOCR_CLS_FILE, FR_PPOCR_REC_FILE,
                                     FR_PPOCR_DICT_FILE};

bool fr_ppocr_models_present(const char *dir) {
    for (int i = 0; i < 4; i++) {
        char *p = model_path(dir, files[i]);
        bool ok = fr_path_exists(p) && !fr_path_is_dir(p);
        free(p);
        if (!ok) return false;
    }
    return true;
}


void fr_ppocr_models_free(fr_ppocr_models *m) {
    if (!m) return;
    fr_onnx_model_free(m->det);
    fr_onnx_model_free(m->cls);
    fr_onnx_model_free(m->rec);
    fr_ppocr_dict_free(&m->dict);
    free(m);
}

/* One model file: present (else NOT_FOUND), loaded, one input and one output. */
static fr_onnx_model *load_one(const char *dir, const char *file, fr_err *err) {
    char *p = model_path(dir, file);
    fr_onnx_model *m = NULL;
    if (!fr_path_exists(p)) {
        fr_err_setc(err, FR_ERR_NOT_FOUND,
                    "PP-OCR: %s is missing (scripts/install-deps.sh installs the models)", p);
    } else if ((m = fr_onnx_model_load(p, err)) && (m->n_inputs != 1 || m->n_outputs != 1)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "PP-OCR: %s has %d inputs and %d outputs, not 1 and 1",
                    p, m->n_inputs, m->n_outputs);
        fr_onnx_model_free(m);
        m = NULL;
    }
    free(p);
    return m;
}

fr_ppocr_models *fr_ppocr_models_load(const char *dir, fr_err *err) {
    fr_ppocr_models *m = fr_xcalloc(1, sizeof *m);
    if (!(m->det = load_one(dir, FR_PPOCR_DET_FILE, err)) ||
        !(m->cls = load_one(dir, FR_PPOCR_CLS_FILE, err)) ||
        !(m->rec = load_one(dir, FR_PPOCR_REC_FILE, err))) {
        fr_ppocr_models_free(m);
        return NULL;
    }
    char *kp = model_path(dir, FR_PPOCR_DICT_FILE);
    int rc = fr_ppocr_dict_load(kp, 1, &m->dict, err);
    free(kp);
    if (rc) {
        fr_err_prefix(err, "PP-OCR dictionary");
        fr_ppocr_models_free(m);
        return NULL;
    }
    return m;
}

static void net_free(net_sess *n) {
    fr_onnx_sess_free(n->cpu);
    if (n->gpu) fr_onnx_cuda_sess_free(n->gpu);
    memset(n, 0, sizeof *n);
}

static int net_new(const fr_ppocr_opts *o, const fr_onnx_model *m, int path, net_sess *n,
                     fr_err *err) {
    if (o->device < 0) {
        fr_onnx_sess_opts so = fr_onnx_sess_default_opts();
        so.n_threads = o->n_threads > 0 ? o->n_threads : 1;
        return (n->cpu = fr_onnx_sess_new(m, &so, err)) ? 0 : -1;
    }
    if (!fr_onnx_cuda_sess_new) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "device cuda:%d: this binary is built without the "
                    "CUDA backend (make cuda builds frugal-cuda)", o->device);
        return -1;
    }
    fr_onnx_cuda_opts co = fr_onnx_cuda_default_opts();
    co.max_plans = 32; /* det sides, one cls shape, the rec width buckets */
    co.argmax_last = path;
    return (n->gpu = fr_onnx_cuda_sess_new(m, o->device, &co, err)) ? 0 : -1;
}

void fr_ppocr_free(fr_ppocr *e) {
    if (!e) return;
    net_free(&e->det);
    net_free(&e->cls);
    net_free(&e->rec);
    free(e->in);
    free(e->canvas);
    free(e->map);
    free(e->path);
    free(e);
}

fr_ppocr *fr_ppocr_new(const fr_ppocr_models *m, const fr_ppocr_opts *o, fr_err *err) {
    fr_ppocr *e = fr_xcalloc(1, sizeof *e);
    e->m = m;
    e->o = o ? *o : fr_ppocr_default_opts();
    if (e->o.cls_batch < 1) e->o.cls_batch = 1;
    if (e->o.rec_batch < 1) e->o.rec_batch = 1;
    if (e->o.max_boxes < 1 || e->o.max_boxes > FR_PPOCR_MAX_BOXES)
        e->o.max_boxes = FR_PPOCR_MAX_BOXES;
    if (e->o.rec_min_w < 8) e->o.rec_min_w = 8;
    if (e->o.rec_max_w < e->o.rec_min_w) e->o.rec_max_w = e->o.rec_min_w;
    if (net_new(&e->o, m->det, 0, &e->det, err) ||
        (e->o.use_cls && net_new(&e->o, m->cls, 0, &e->cls, err)) ||
        net_new(&e->o, m->rec, 1, &e->rec, err)) {
        fr_err_prefix(err, "PP-OCR");
        fr_ppocr_free(e);
        return NULL;
    }
    return e;
}

/* The input buffer, at least n floats (n is bounded by the caller). */
static float *scratch(fr_ppocr *e, size_t n) {
    if (n > e->in_cap) {
        free(e->in);
        e->in = fr_xmalloc(n * sizeof *e->in);
        e->in_cap = n;
    }
    return e->in;
}

/* One network run on x (n, 3, h, w). 0, or an fr_ocr_status: STOPPED when the cancel check says
 * stop (before the run or as the reason it failed), FAILED with err otherwise. */
static int net_run(net_sess *s, const char *what, float *x, int64_t n, int64_t h, int64_t w,
                     fr_onnx_arr *out, const fr_cancel *cancel, fr_err *err) {
    if (fr_cancel_check(cancel)) return FR_OCR_STOPPED;
    fr_onnx_arr in = {.rank = 4, .dims = {n, 3, h, w}, .data = x};
    if (s->gpu ? fr_onnx_cuda_sess_run(s->gpu, &in, 1, out, 1, cancel, err)
               : fr_onnx_sess_run(s->cpu, &in, 1, out, 1, cancel, err)) {
        if (fr_cancel_check(cancel)) return FR_OCR_STOPPED;
        fr_err_prefix(err, "PP-OCR %s", what);
        return FR_OCR_FAILED;
    }
    return 0;
}

static int bad_shape(const char *what, const fr_onnx_arr *a, fr_err *err) {
    fr_err_setc(err, FR_ERR_INTERNAL, "PP-OCR %s: unexpected output of rank %d (%lld, %lld, ...)",
                what, a->rank, a->rank > 0 ? (long long)a->dims[0] : 0LL,
                a->rank > 1 ? (long long)a->dims[1] : 0LL);
    return FR_OCR_FAILED;
}

/* The canvas for a detector input of mw x mh: *cw x *ch, the smallest of the shapes o allows
 * that holds it; false when none does (or no canvas is set). */
static bool canvas_for(const fr_ppocr_opts *o, uint32_t mw, uint32_t mh, uint32_t *cw,
                       uint32_t *ch) {
    const uint32_t C = o->det_canvas, S = o->det_canvas_short;
    if (C < 32 || C % 32 || mw > C || mh > C) return false;
    *cw = *ch = C;
    if (S >= 32 && S % 32 == 0 && S < C) {
        if (mw <= S) *cw = S; /* portrait */
        else if (mh <= S) *ch = S; /* landscape */
    }
    return true;
}

/* The detector's input x (3, mh, mw) placed top-left on the white canvas (3, ch, cw): the rest
 * of each channel is white as det_prep normalises it (BGR, ImageNet mean and deviation), so the
 * page looks as if it had more blank paper right and below. */
static float *place_on_canvas(fr_ppocr *e, const float *x, uint32_t mw, uint32_t mh, uint32_t cw,
                              uint32_t ch) {
    static const float white[3] = {(1.0f - 0.485f) / 0.229f, (1.0f - 0.456f) / 0.224f,
                                   (1.0f - 0.406f) / 0.225f};
    const size_t C = e->o.det_canvas, plane = (size_t)cw * ch;
    if (!e->canvas) e->canvas = fr_xmalloc(3 * C * C * sizeof *e->canvas); /* the largest */
    for (size_t c = 0; c < 3; c++) {
        float *dst = e->canvas + c * plane;
        for (size_t i = 0; i < plane; i++) dst[i] = white[c];
        for (uint32_t y = 0; y < mh; y++)
            memcpy(dst + y * cw, x + (c * mh + y) * mw, mw * sizeof *dst);
    }
    return e->canvas;
}

/* Detection: boxes in reading order into b (at most e->o.max_boxes); *nb their count. */
static int detect(fr_ppocr *e, const fr_image *img, const fr_cancel *cancel, fr_ppocr_box *b,
                  int *nb, fr_err *err) {
    uint32_t mw, mh;
    fr_ppocr_det_size(img->width, img->height, e->o.det.limit_side, &mw, &mh);
    if ((uint64_t)mw * mh > FR_PPOCR_MAX_MAP_PIXELS) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "PP-OCR: detection input %ux%u over the map limit",
                    mw, mh);
        return FR_OCR_FAILED;
    }
    double t0 = fr_time_s();
    float *x = scratch(e, (size_t)3 * mw * mh); /* (1, 3, mh, mw) */
    fr_ppocr_det_prep(img, mw, mh, x);
    const uint32_t cv = e->o.det_canvas;
    uint32_t nw = mw, nh = mh; /* the network's input sides */
    const bool on_canvas = canvas_for(&e->o, mw, mh, &nw, &nh);
    if (on_canvas) x = place_on_canvas(e, x, mw, mh, nw, nh);
    lap(e, FR_PPOCR_T_DET_PREP, &t0);
    fr_onnx_arr out;
    int rc = net_run(&e->det, "det", x, 1, nh, nw, &out, cancel, err);
    lap(e, FR_PPOCR_T_DET_NET, &t0);
    if (rc) return rc;
    if (out.rank != 4 || out.dims[0] != 1 || out.dims[1] != 1 || out.dims[2] != nh ||
        out.dims[3] != nw)
        return bad_shape("det", &out, err);
    const float *prob = out.data;
    if (on_canvas) { /* the page's part of the map, rows of mw */
        if (!e->map) e->map = fr_xmalloc((size_t)cv * cv * sizeof *e->map);
        for (uint32_t y = 0; y < mh; y++)
            memcpy(e->map + (size_t)y * mw, out.data + (size_t)y * nw, mw * sizeof *e->map);
        prob = e->map;
    }
    int n = fr_ppocr_det_boxes(prob, mw, mh, img->width, img->height, &e->o.det, b,
                               e->o.max_boxes, err);
    lap(e, FR_PPOCR_T_DET_POST, &t0);
    if (n < 0) return FR_OCR_FAILED;
    *nb = n;
    return 0;
}

int fr_ppocr_batch_rows(const fr_ppocr_opts *o, int batch, int k) {
    if (!o->pad_batch) return k;
    if (batch < 4) return batch;
    return k <= batch / 4 ? batch / 4 : k <= batch / 2 ? batch / 2 : batch;
}

static int batch_rows(const fr_ppocr *e, int batch, int k) {
    return fr_ppocr_batch_rows(&e->o, batch, k);
}

int fr_ppocr_rec_batches(const float *ratios, int n, const fr_ppocr_opts *o, int *ends) {
    const int B = o->rec_batch > 0 ? o->rec_batch : 1;
    int nb = 0;
    if (!o->pad_batch) {
        for (int s = 0; s < n; s += B) ends[nb++] = FR_MIN(n, s + B);
        return nb;
    }
    /* cost[j]: the least work for crops [0, j); from[j]: where its last batch starts */
    double *cost = fr_xmalloc(((size_t)n + 1) * sizeof *cost);
    int *from = fr_xmalloc(((size_t)n + 1) * sizeof *from);
    const double launch = 4.0 * o->rec_min_w;
    cost[0] = 0;
    for (int j = 1; j <= n; j++) {
        const double w = fr_ppocr_rec_width(ratios[j - 1], o->rec_min_w, o->rec_step, o->rec_max_w);
        cost[j] = INFINITY;
        for (int i = FR_MAX(0, j - B); i < j; i++) {
            double c = cost[i] + fr_ppocr_batch_rows(o, B, j - i) * w + launch;
            if (c < cost[j]) cost[j] = c, from[j] = i;
        }
    }
    for (int j = n; j > 0; j = from[j]) nb++;
    int b = nb;
    for (int j = n; j > 0; j = from[j]) ends[--b] = j;
    free(from);
    free(cost);
    return nb;
}

/* The classifier over the crops listed in v[0..n) (all non-empty): 180° ones are turned. */
static int classify(fr_ppocr *e, fr_image *crops, const int *v, int n, const fr_cancel *cancel,
                    fr_err *err) {
    size_t per = (size_t)3 * FR_PPOCR_REC_H * FR_PPOCR_CLS_W;
    double t0 = fr_time_s();
    for (int s = 0; s < n; s += e->o.cls_batch) {
        int k = FR_MIN(e->o.cls_batch, n - s), kb = batch_rows(e, e->o.cls_batch, k);
        float *x = scratch(e, per * (size_t)kb); /* (kb, 3, 48, 192) */
        for (int i = 0; i < k; i++) fr_ppocr_cls_prep(&crops[v[s + i]], x + per * (size_t)i);
        memset(x + per * (size_t)k, 0, per * (size_t)(kb - k) * sizeof *x);
        lap(e, FR_PPOCR_T_CLS_PREP, &t0);
        fr_onnx_arr out;
        int rc = net_run(&e->cls, "cls", x, kb, FR_PPOCR_REC_H, FR_PPOCR_CLS_W, &out, cancel, err);
        lap(e, FR_PPOCR_T_CLS_NET, &t0);
        if (rc) return rc;
        if (out.rank != 2 || out.dims[0] != kb || out.dims[1] != 2)
            return bad_shape("cls", &out, err);
        for (int i = 0; i < k; i++)
            if (fr_ppocr_cls_says_flip(out.data + 2 * i, e->o.cls_thresh))
                fr_ppocr_flip180(&crops[v[s + i]]);
    }
    return 0;
}

/* The greedy path (T, 2) of one line's probabilities pr (T, C), in the engine's buffer. */
static const float *cpu_path(fr_ppocr *e, const float *pr, int T, int C) {
    if ((size_t)T > e->path_cap) {
        free(e->path);
        e->path = fr_xmalloc(2 * (size_t)T * sizeof *e->path);
        e->path_cap = (size_t)T;
    }
    fr_ppocr_best_path(pr, T, C, e->path);
    return e->path;
}

/* One line's text from its greedy path (T, 2), the crop recognised at input width w: CTC, the
 * drop score, the signs the dictionary lacks. 0 or FR_OCR_FAILED with err. */
static int decode_line(const fr_ppocr *e, const float *path, int T, const fr_image *crop,
                       uint32_t w, fr_ppocr_text *t, fr_err *err) {
    if (fr_ppocr_ctc_decode_path(path, T, &e->m->dict, t, err)) return FR_OCR_FAILED;
    if (t->conf < e->o.drop_score) { /* PaddleOCR's drop_score */
        t->text[0] = 0;
        return 0;
    }
    if (e->o.find_signs && fr_ppocr_find_signs_path(path, T, &e->m->dict, crop, w, t, err) < 0)
        return FR_OCR_FAILED;
    return 0;
}

/* The recogniser over the crops v[0..n) in batches of similar aspect ratio; texts[v[i]] set. */
static int recognise(fr_ppocr *e, const fr_image *crops, const int *v, int n,
                     const fr_cancel *cancel, fr_ppocr_text *texts, fr_err *err) {
    double t0 = fr_time_s();
    fr_image *sub = fr_xcalloc((size_t)n, sizeof *sub);
    int *ord = fr_xcalloc((size_t)n, sizeof *ord);
    for (int i = 0; i < n; i++) sub[i] = crops[v[i]]; /* shallow: the pixels stay the caller's */
    fr_ppocr_rec_order(sub, n, ord);
    float *ratio_of = fr_xmalloc((size_t)n * sizeof *ratio_of);
    int *ends = fr_xmalloc((size_t)n * sizeof *ends);
    for (int i = 0; i < n; i++)
        ratio_of[i] = (float)sub[ord[i]].width / (float)sub[ord[i]].height;
    const int nbatch = fr_ppocr_rec_batches(ratio_of, n, &e->o, ends);
    int rc = 0;
    for (int b = 0, s = 0; b < nbatch && !rc; s = ends[b++]) {
        int k = ends[b] - s;
        float ratio = 0;
        for (int i = 0; i < k; i++) ratio = fmaxf(ratio, ratio_of[s + i]);
        uint32_t w = fr_ppocr_rec_width(ratio, e->o.rec_min_w, e->o.rec_step, e->o.rec_max_w);
        size_t per = (size_t)3 * FR_PPOCR_REC_H * w;
        int kb = batch_rows(e, e->o.rec_batch, k);
        float *x = scratch(e, per * (size_t)kb); /* (kb, 3, 48, w) */
        for (int i = 0; i < k; i++) fr_ppocr_rec_prep(&sub[ord[s + i]], w, x + per * (size_t)i);
        memset(x + per * (size_t)k, 0, per * (size_t)(kb - k) * sizeof *x);
        lap(e, FR_PPOCR_T_REC_PREP, &t0);
        fr_onnx_arr out;
        rc = net_run(&e->rec, "rec", x, kb, FR_PPOCR_REC_H, w, &out, cancel, err);
        lap(e, FR_PPOCR_T_REC_NET, &t0);
        if (rc) break;
        if (out.rank != 3 || out.dims[0] != kb || out.dims[1] < 1 || out.dims[2] < 1) {
            rc = bad_shape("rec", &out, err);
            break;
        }
        int T = (int)out.dims[1], C = (int)out.dims[2];
        if (e->rec.gpu && C != 2) { /* the CUDA session returns paths */
            rc = bad_shape("rec", &out, err);
            break;
        }
        for (int i = 0; i < k && !rc; i++) {
            const float *path = e->rec.gpu ? out.data + (size_t)i * T * 2
                                           : cpu_path(e, out.data + (size_t)i * T * C, T, C);
            rc = decode_line(e, path, T, &sub[ord[s + i]], w, &texts[v[ord[s + i]]], err);
        }
        lap(e, FR_PPOCR_T_DECODE, &t0);
    }
    free(ends);
    free(ratio_of);
    free(ord);
    free(sub);
    return rc;
}

fr_ocr_status fr_ppocr_run(fr_ppocr *e, const fr_image *img, const fr_cancel *cancel,
                           fr_ocr_result *res, fr_err *err) {
    double t0 = fr_time_s();
    memset(res, 0, sizeof *res);
    res->scale = 1;
    res->engine = "ppocr";
    if (!img || !img->pix || !img->width || !img->height ||
        (img->channels != 1 && img->channels != 3)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "PP-OCR: empty image or not gray / RGB");
        return FR_OCR_FAILED;
    }
    if ((uint64_t)img->width * img->height > FR_PPOCR_MAX_IMAGE_PIXELS) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "PP-OCR: the image is %ux%u, over %llu pixels",
                    img->width, img->height, (unsigned long long)FR_PPOCR_MAX_IMAGE_PIXELS);
        return FR_OCR_FAILED;
    }
    fr_ppocr_box *boxes = fr_xcalloc((size_t)e->o.max_boxes, sizeof *boxes);
    int nb = 0;
    int rc = detect(e, img, cancel, boxes, &nb, err);
    fr_image *crops = fr_xcalloc(nb ? (size_t)nb : 1, sizeof *crops);
    fr_ppocr_text *texts = fr_xcalloc(nb ? (size_t)nb : 1, sizeof *texts);
    int *v = fr_xcalloc(nb ? (size_t)nb : 1, sizeof *v);
    int nv = 0;
    size_t bytes = 0;
    double t1 = fr_time_s();
    for (int i = 0; i < nb && !rc; i++) {
        fr_err ce = {0};
        if (fr_ppocr_crop(img, &boxes[i], &crops[i], &ce)) continue; /* degenerate: no line */
        bytes += (size_t)crops[i].width * crops[i].height * crops[i].channels;
        if (bytes > FR_PPOCR_MAX_CROP_BYTES) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "PP-OCR: the %d line crops of the page exceed "
                        "%zu MiB", nb, FR_PPOCR_MAX_CROP_BYTES >> 20);
            rc = FR_OCR_FAILED;
        }
        v[nv++] = i;
    }
    lap(e, FR_PPOCR_T_CROP, &t1);
    if (!rc && nv && (e->cls.cpu || e->cls.gpu)) rc = classify(e, crops, v, nv, cancel, err);
    if (!rc && nv)
        rc = recognise(e, crops, v, nv, cancel, texts, err);
    t1 = fr_time_s();
    if (!rc && nv && e->o.find_signs && fr_ppocr_lone_signs(boxes, crops, texts, nb, err) < 0)
        rc = FR_OCR_FAILED;
    if (!rc && fr_cancel_check(cancel)) rc = FR_OCR_STOPPED;
    if (!rc && fr_ppocr_result(boxes, texts, nb, e->o.det.line_tol, e->o.join_gap, res, err))
        rc = FR_OCR_FAILED;
    lap(e, FR_PPOCR_T_RESULT, &t1);
    e->pages++;
    for (int i = 0; i < nb; i++) {
        fr_image_free(&crops[i]);
        free(texts[i].text);
    }
    free(v);
    free(texts);
    free(crops);
    free(boxes);
    if (rc) {
        fr_ocr_result_free(res);
        res->scale = 1;
        res->engine = "ppocr";
        if (rc == FR_OCR_STOPPED) {
            res->stopped = fr_cancel_check(cancel);
            if (!res->stopped) res->stopped = FR_CANCEL_TIMEOUT;
            fr_err_setc(err, fr_cancel_reason_code(res->stopped), "PP-OCR: stopped (%s)",
                        fr_cancel_reason_name(res->stopped));
        }
    }
    res->ms = (fr_time_s() - t0) * 1e3;
    return (fr_ocr_status)rc;
}
