/* vad.c — Silero VAD on the ONNX executor, and the speech spans it gives (vad.h).
 *
 * The model (v4) takes input (1, 512) float, sr () int64, h and c (2, 1, 64) float and returns
 * output (1, 1), hn, cn. Its graph branches on sr with an If (16 kHz / 8 kHz weights) and on
 * shapes with smaller Ifs; the executor selects the branches at planning. One session run per
 * window; the state arrays are copied from hn / cn into the next window's h / c.
 */
#include "stages/audio/vad.h"

#include <stdlib.h>
#include <string.h>

#include "backend/onnx_exec.h"
#include "model/onnx/onnx.h"

#define VAD_STATE 128 /* floats of h (2 x 1 x 64), and of c */

struct fr_vad {
    fr_onnx_model *m;
    fr_onnx_sess *s;
    int in_x, in_sr, in_h, in_c;    /* graph input positions */
    int out_p, out_h, out_c;        /* graph output positions */
    float state[2 * VAD_STATE];     /* h then c */
    float win[FR_VAD_WINDOW];       /* the current window (the last one zero-padded) */
};

fr_vad_params fr_vad_default_params(void) {
    return (fr_vad_params){.threshold = 0.5f, .neg_threshold = 0.35f, .min_speech_ms = 250,
                           .min_silence_ms = 300, .speech_pad_ms = 200};
}

/* Position of the graph input / output called name, or -1. */
static int io_pos(const fr_onnx_model *m, const fr_onnx_io *io, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(m->values[io[i].value].name, name)) return i;
    return -1;
}

static int bind_io(fr_vad *v, fr_err *err) {
    const fr_onnx_model *m = v->m;
    v->in_x = io_pos(m, m->inputs, m->n_inputs, "input");
    v->in_sr = io_pos(m, m->inputs, m->n_inputs, "sr");
    v->in_h = io_pos(m, m->inputs, m->n_inputs, "h");
    v->in_c = io_pos(m, m->inputs, m->n_inputs, "c");
    v->out_p = io_pos(m, m->outputs, m->n_outputs, "output");
    v->out_h = io_pos(m, m->outputs, m->n_outputs, "hn");
    v->out_c = io_pos(m, m->outputs, m->n_outputs, "cn");
    if (m->n_inputs != 4 || m->n_outputs != 3 || v->in_x < 0 || v->in_sr < 0 || v->in_h < 0 ||
        v->in_c < 0 || v->out_p < 0 || v->out_h < 0 || v->out_c < 0 ||
        m->inputs[v->in_sr].dtype != FR_ONNX_DTYPE_I64) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vad: %s: not a Silero VAD graph (inputs input, sr, h, c; outputs output, hn, cn)",
                    m->path);
        return -1;
    }
    return 0;
}

fr_vad *fr_vad_new(const char *path, fr_err *err) {
    char *def = path ? NULL : fr_data_path(FR_VAD_MODEL);
    const char *p = path ? path : def;
    fr_vad *v = fr_xcalloc(1, sizeof *v);
    v->m = p ? fr_onnx_model_load(p, err) : NULL;
    if (!p) fr_err_setc(err, FR_ERR_NOT_FOUND, "vad: no data root for %s", FR_VAD_MODEL);
    free(def);
    if (!v->m || bind_io(v, err)) goto fail;
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.n_threads = 1; /* a window is about 1 MFLOP: threads would cost more than they save */
    o.max_bytes = (size_t)64 << 20;
    if (!(v->s = fr_onnx_sess_new(v->m, &o, err))) goto fail;
    return v;
fail:
    fr_vad_free(v);
    return NULL;
}

fr_vad *fr_vad_new_default(void) {
    static int told;
    const char *no = getenv("FRUGAL_NO_VAD");
    if (no && *no && strcmp(no, "0")) return NULL;
    char *path = fr_data_path(FR_VAD_MODEL);
    fr_vad *v = NULL;
    fr_err err = {0};
    if (!path || !fr_path_exists(path)) {
        if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
            fr_info("vad: %s not installed (scripts/install-deps.sh): speech is decoded whole",
                    FR_VAD_MODEL);
    } else if (!(v = fr_vad_new(path, &err))) {
        fr_warn("vad: %s: speech is decoded whole", err.msg);
    }
    free(path);
    return v;
}

void fr_vad_free(fr_vad *v) {
    if (!v) return;
    fr_onnx_sess_free(v->s);
    fr_onnx_model_free(v->m);
    free(v);
}

const float *fr_vad_state(const fr_vad *v) { return v->state; }

/* One window through the model: v->win in, the probability out, the state carried. */
static int vad_window(fr_vad *v, float *prob, const fr_cancel *cancel, fr_err *err) {
    static const int64_t sr = FR_VAD_RATE;
    fr_onnx_arr in[4], out[3];
    in[v->in_x] = (fr_onnx_arr){.rank = 2, .dims = {1, FR_VAD_WINDOW}, .data = v->win};
    in[v->in_sr] = (fr_onnx_arr){.rank = 0, .idata = &sr};
    in[v->in_h] = (fr_onnx_arr){.rank = 3, .dims = {2, 1, 64}, .data = v->state};
    in[v->in_c] = (fr_onnx_arr){.rank = 3, .dims = {2, 1, 64}, .data = v->state + VAD_STATE};
    if (v->m->inputs[v->in_sr].rank == 1) in[v->in_sr] = (fr_onnx_arr){.rank = 1, .dims = {1}, .idata = &sr};
    if (fr_onnx_sess_run(v->s, in, 4, out, 3, cancel, err)) return -1;
    int64_t nh = 1, nc = 1;
    for (int k = 0; k < out[v->out_h].rank; k++) nh *= out[v->out_h].dims[k];
    for (int k = 0; k < out[v->out_c].rank; k++) nc *= out[v->out_c].dims[k];
    if (nh != VAD_STATE || nc != VAD_STATE || out[v->out_p].rank < 1) {
        fr_err_setc(err, FR_ERR_INTERNAL, "vad: the model returned a state of %lld / %lld values",
                    (long long)nh, (long long)nc);
        return -1;
    }
    memcpy(v->state, out[v->out_h].data, VAD_STATE * sizeof(float));
    memcpy(v->state + VAD_STATE, out[v->out_c].data, VAD_STATE * sizeof(float));
    *prob = out[v->out_p].data[0];
    return 0;
}

int fr_vad_probs(fr_vad *v, const float *pcm, size_t n, float **probs, size_t *n_win,
                 const fr_cancel *cancel, fr_err *err) {
    *probs = NULL;
    *n_win = 0;
    if (n > FR_VAD_MAX_SAMPLES) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "vad: %zu samples (over %zu)", n, FR_VAD_MAX_SAMPLES);
        return -1;
    }
    memset(v->state, 0, sizeof v->state);
    const size_t nw = (n + FR_VAD_WINDOW - 1) / FR_VAD_WINDOW;
    float *p = nw ? fr_xmalloc(nw * sizeof *p) : NULL;
    for (size_t k = 0; k < nw; k++) {
        const size_t a = k * FR_VAD_WINDOW, len = FR_MIN((size_t)FR_VAD_WINDOW, n - a);
        memcpy(v->win, pcm + a, len * sizeof *pcm);
        memset(v->win + len, 0, (FR_VAD_WINDOW - len) * sizeof *pcm);
        if (vad_window(v, &p[k], cancel, err)) {
            free(p);
            return -1;
        }
    }
    *probs = p;
    *n_win = nw;
    return 0;
}

/* ---------------------------------------------------------------- segmentation */

/* The spans before padding: see vad.h. */
static size_t raw_spans(const float *pr, size_t nw, size_t n, const fr_vad_params *p,
                        fr_vad_seg *out) {
    const int64_t W = FR_VAD_WINDOW, min_sil = (int64_t)p->min_silence_ms * FR_VAD_RATE / 1000;
    const int64_t min_sp = (int64_t)p->min_speech_ms * FR_VAD_RATE / 1000;
    size_t ns = 0;
    int on = 0;
    int64_t start = 0, quiet = -1; /* quiet: where the probability last fell under neg_threshold */
    for (size_t k = 0; k < nw; k++) {
        const int64_t at = (int64_t)k * W;
        if (pr[k] >= p->threshold) {
            quiet = -1;
            if (!on) on = 1, start = at;
            continue;
        }
        if (!on || pr[k] >= p->neg_threshold) continue;
        if (quiet < 0) quiet = at;
        if (at - quiet < min_sil) continue;
        if (quiet - start > min_sp) out[ns++] = (fr_vad_seg){start, quiet};
        on = 0;
        quiet = -1;
    }
    if (on && (int64_t)n - start > min_sp) out[ns++] = (fr_vad_seg){start, (int64_t)n};
    return ns;
}

size_t fr_vad_segments(const float *probs, size_t n_win, size_t n_samples, const fr_vad_params *p,
                       fr_vad_seg **segs, size_t *n_segs) {
    const fr_vad_params def = fr_vad_default_params();
    if (!p) p = &def;
    fr_vad_seg *s = fr_xmalloc((n_win / 2 + 2) * sizeof *s); /* spans are >= 2 windows apart */
    const size_t ns = raw_spans(probs, n_win, n_samples, p, s);
    const int64_t pad = (int64_t)p->speech_pad_ms * FR_VAD_RATE / 1000, N = (int64_t)n_samples;
    for (size_t i = 0; i < ns; i++) {
        if (i == 0) s[i].start = FR_MAX(0, s[i].start - pad);
        if (i + 1 == ns) {
            s[i].end = FR_MIN(N, s[i].end + pad);
            break;
        }
        const int64_t gap = s[i + 1].start - s[i].end;
        const int64_t take = gap < 2 * pad ? gap / 2 : pad;
        s[i].end += take;
        s[i + 1].start = FR_MAX(0, s[i + 1].start - take);
    }
    if (!ns) {
        free(s);
        s = NULL;
    }
    *segs = s;
    *n_segs = ns;
    return ns;
}

int16_t *fr_vad_join_i16(const int16_t *pcm, const fr_vad_seg *segs, size_t n_segs, size_t *out_n) {
    size_t tot = 0;
    for (size_t i = 0; i < n_segs; i++) tot += (size_t)(segs[i].end - segs[i].start);
    int16_t *o = fr_xmalloc((tot ? tot : 1) * sizeof *o);
    size_t at = 0;
    for (size_t i = 0; i < n_segs; i++) {
        const size_t len = (size_t)(segs[i].end - segs[i].start);
        memcpy(o + at, pcm + segs[i].start, len * sizeof *o);
        at += len;
    }
    *out_n = tot;
    return o;
}

float *fr_vad_join_f32(const float *pcm, const fr_vad_seg *segs, size_t n_segs, size_t *out_n) {
    size_t tot = 0;
    for (size_t i = 0; i < n_segs; i++) tot += (size_t)(segs[i].end - segs[i].start);
    float *o = fr_xmalloc((tot ? tot : 1) * sizeof *o);
    size_t at = 0;
    for (size_t i = 0; i < n_segs; i++) {
        const size_t len = (size_t)(segs[i].end - segs[i].start);
        memcpy(o + at, pcm + segs[i].start, len * sizeof *o);
        at += len;
    }
    *out_n = tot;
    return o;
}

double fr_vad_time_map(const fr_vad_seg *segs, size_t n_segs, double t) {
    double at = 0; /* start of span i in the joined audio, seconds */
    for (size_t i = 0; i < n_segs; i++) {
        const double len = (double)(segs[i].end - segs[i].start) / FR_VAD_RATE;
        if (t < at + len || i + 1 == n_segs) return (double)segs[i].start / FR_VAD_RATE + (t - at);
        at += len;
    }
    return t;
}

int fr_vad_trim_f32(fr_vad *v, const float *pcm, size_t n, const fr_vad_params *p, float **out,
                    size_t *out_n, fr_vad_seg **segs, size_t *n_segs, const fr_cancel *cancel,
                    fr_err *err) {
    float *pr = NULL;
    size_t nw = 0;
    *out = NULL;
    *segs = NULL;
    *n_segs = *out_n = 0;
    if (fr_vad_probs(v, pcm, n, &pr, &nw, cancel, err)) return -1;
    fr_vad_segments(pr, nw, n, p, segs, n_segs);
    free(pr);
    *out = fr_vad_join_f32(pcm, *segs, *n_segs, out_n);
    return 0;
}
