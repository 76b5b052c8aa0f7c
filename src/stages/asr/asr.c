/* asr.c — pocketsphinx decoder wrapper and the decoder pool. See asr.h.
 *
 * Audio is fed to ps_process_raw in blocks of FR_ASR_CHUNK samples (the pattern pocketsphinx
 * documents for streaming). The transcript is ps_get_hyp; the confidence is the lattice
 * posterior of the best path (ps_get_prob, converted from log base with the decoder's logmath).
 *
 * Cepstral mean: fed in blocks, pocketsphinx normalises with a running ("live") mean that starts
 * from the model's prior and carries over from the previous utterance of the same decoder, so
 * the first second of an utterance is normalised with the wrong mean (short questions lost their
 * first words) and a result depended on what the decoder heard before. Before each utterance the
 * decoder's own front end computes the cepstra of the whole utterance (a few percent of the
 * search's cost), and their mean is set as the live mean: every frame is normalised with the
 * utterance's mean, as in the acoustic model's training, and results no longer depend on history.
 *
 * Dither: espeak-ng and other synthesisers write digital silence (exact zeros), which derails the
 * log-energy features, so every utterance gets ±1 LSB of noise. pocketsphinx's own dither draws
 * from one process-wide generator seeded from the clock (results changed from run to run and
 * with the interleaving of threads); here each utterance is dithered from a fixed seed, so the
 * same audio gives the same transcript.
 */
#include "stages/asr/asr.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stages/asr/ps_wrap.h"
#include "stages/asr/rescore.h"

#define FR_ASR_CHUNK 4096 /* samples per ps_process_raw call */

struct fr_asr {
    ps_decoder_t *ps;  /* the decoder */
    cmd_ln_t *cfg;     /* its configuration (owned) */
    char **extra;      /* extra option argv (pointers into extra_store), or NULL */
    char *extra_store; /* their bytes, or NULL */
    int nbest;         /* hypotheses kept per result, >= 1 */
    int utt_cmn;       /* 1 = set the utterance's cepstral mean before decoding */
    const fr_intent_model *im; /* rescoring model, or NULL (none) */
    fr_intent_model *im_own;   /* im when this decoder loaded it (else the pool owns it) */
    double weight;             /* rescoring weight */
    fr_vad *vad;               /* voice-activity detection in front of the decoder, or NULL */
};

/* The rescoring model of a config: 0 with *out (NULL = none), or -1 with err when a named
 * model cannot be loaded. The default model missing from the data root means no rescoring. */
static int load_rescore_model(const fr_asr_config *cfg, fr_intent_model **out, fr_err *err) {
    *out = NULL;
    if (cfg->rescore_model && !*cfg->rescore_model) return 0;
    char *dflt = cfg->rescore_model ? NULL : fr_data_path(FR_ASR_RESCORE_MODEL);
    if (dflt && !fr_path_exists(dflt)) {
        free(dflt);
        return 0;
    }
    *out = fr_intent_load(dflt ? dflt : cfg->rescore_model, err);
    free(dflt);
    if (!*out) return -1;
    if (fr_intent_is_multilabel(*out)) {
        fr_intent_free(*out);
        *out = NULL;
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "asr: the rescoring model must be single-label");
        return -1;
    }
    return 0;
}

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER; /* pocketsphinx init/free */

/* The VAD of a config: 0 with *out (NULL = none), or -1 with err when a named model cannot be
 * loaded. The default (vad_model NULL) is fr_vad_new_default: off switch, model not installed. */
static int load_vad(const fr_asr_config *cfg, fr_vad **out, fr_err *err) {
    *out = NULL;
    if (cfg->vad_model && !*cfg->vad_model) return 0;
    if (!cfg->vad_model) return (*out = fr_vad_new_default()), 0;
    *out = fr_vad_new(cfg->vad_model, err);
    return *out ? 0 : -1;
}

/* Split extra "-opt value ..." options into argv (strings owned by *store). The number of
 * options is capped; an odd count (an option without its value) is an error. */
static int split_extra(const char *extra, char ***out, int *n, char **store, fr_err *err) {
    *out = NULL;
    *n = 0;
    *store = NULL;
    if (!extra || !*extra) return 0;
    char *s = fr_xstrdup(extra);
    char **v = fr_xcalloc(2 * FR_ASR_EXTRA_ARGS_MAX, sizeof(char *));
    int k = 0;
    for (char *tok = strtok(s, " \t"); tok; tok = strtok(NULL, " \t")) {
        if (k == 2 * FR_ASR_EXTRA_ARGS_MAX) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "asr: more than %d extra pocketsphinx options",
                        FR_ASR_EXTRA_ARGS_MAX);
            free(v), free(s);
            return -1;
        }
        v[k++] = tok;
    }
    if (k % 2 || (k && v[0][0] != '-')) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "asr: extra pocketsphinx options must be -name value pairs");
        free(v), free(s);
        return -1;
    }
    *out = v;
    *n = k;
    *store = s;
    return 0;
}

/* A decoder; im: the pool's rescoring model (shared), or NULL to load cfg's own. */
static fr_asr *asr_new(const fr_asr_config *cfg, const fr_intent_model *shared, int use_shared,
                       fr_err *err) {
    fr_asr_config dc;
    if (!cfg) memset(&dc, 0, sizeof dc), cfg = &dc;
    const char *hmm = cfg->hmm ? cfg->hmm : FR_ASR_MODEL_DIR "/en-us";
    const char *dict = cfg->dict ? cfg->dict : FR_ASR_MODEL_DIR "/cmudict-en-us.dict";
    const char *lm = cfg->lm;
    if (!lm && cfg->lm_kind == FR_ASR_LM_GENERIC) lm = FR_ASR_MODEL_DIR "/en-us.lm.bin";
    if (!lm) lm = getenv("FRUGAL_ASR_LM");
    char *domain_lm = lm ? NULL : fr_data_path(FR_ASR_DOMAIN_LM);
    if (!lm) lm = domain_lm;
    const char *paths[3] = {hmm, dict, lm};
    for (int i = 0; i < 3; i++)
        if (!fr_path_exists(paths[i])) {
            fr_err_setc(err, FR_ERR_NOT_FOUND, "asr: %s not found (%s)", paths[i],
                        i < 2 ? "install pocketsphinx-en-us"
                        : lm == domain_lm
                            ? "the domain LM ships under the data root: set FRUGAL_DATA_DIR, "
                              "run `make install`, or build it with `frugal build-lm`"
                            : "check FRUGAL_ASR_LM / --lm");
            free(domain_lm);
            return NULL;
        }
    char **extra, *extra_store;
    int n_extra;
    if (split_extra(cfg->extra_args, &extra, &n_extra, &extra_store, err)) {
        free(domain_lm);
        return NULL;
    }
    /* argv[0] is skipped by cmd_ln_parse_r; later options override earlier ones */
    const char *base[] = {"frugal", "-hmm", hmm, "-dict", dict, "-lm", lm, "-samprate", "16000",
                          "-bestpath", "yes", "-dither", "no",
                          cfg->beam_fast ? "-beam" : "-topn", cfg->beam_fast ? "1e-40" : "4",
                          cfg->beam_fast ? "-wbeam" : "-pl_window",
                          cfg->beam_fast ? "1e-30" : "5"};
    /* an extra option replaces the default of the same name (sphinxbase refuses duplicates) */
    int nb = (int)FR_ARRAY_LEN(base), argc = 1;
    char **argv = fr_xcalloc((size_t)(nb + n_extra) + 1, sizeof(char *));
    argv[0] = (char *)base[0];
    for (int i = 1; i + 1 < nb; i += 2) {
        int dup = 0;
        for (int k = 0; k < n_extra && !dup; k += 2) dup = !strcmp(extra[k], base[i]);
        if (!dup) argv[argc++] = (char *)base[i], argv[argc++] = (char *)base[i + 1];
    }
    for (int i = 0; i < n_extra; i++) argv[argc++] = extra[i];
    pthread_mutex_lock(&g_init_lock);
    err_set_logfp(NULL); /* pocketsphinx logs to stderr by default: silence it */
    cmd_ln_t *c = cmd_ln_parse_r(NULL, ps_args(), argc, argv, TRUE);
    ps_decoder_t *ps = c ? ps_init(c) : NULL;
    pthread_mutex_unlock(&g_init_lock);
    free(argv);
    if (!ps) {
        if (c) cmd_ln_free_r(c);
        fr_err_setc(err, c || !n_extra ? FR_ERR_UNAVAILABLE : FR_ERR_BAD_REQUEST,
                    "asr: pocketsphinx could not load model %s, dictionary %s, LM %s%s%s", hmm,
                    dict, lm, n_extra ? " with options " : "", n_extra ? cfg->extra_args : "");
        free(extra), free(extra_store), free(domain_lm);
        return NULL;
    }
    free(domain_lm);
    fr_intent_model *own = NULL;
    fr_vad *vad = NULL;
    if ((!use_shared && load_rescore_model(cfg, &own, err)) || load_vad(cfg, &vad, err)) {
        fr_intent_free(own);
        pthread_mutex_lock(&g_init_lock);
        ps_free(ps);
        cmd_ln_free_r(c);
        pthread_mutex_unlock(&g_init_lock);
        free(extra), free(extra_store);
        return NULL;
    }
    fr_asr *a = fr_xcalloc(1, sizeof *a);
    a->im = use_shared ? shared : own;
    a->im_own = own;
    a->weight = cfg->rescore_weight > 0 ? cfg->rescore_weight : FR_ASR_RESCORE_WEIGHT;
    a->ps = ps;
    a->vad = vad;
    a->cfg = c;
    a->extra = extra; /* kept while c lives (cmd_ln may point into them) */
    a->extra_store = extra_store;
    a->utt_cmn = !cfg->no_utt_cmn;
    a->nbest = cfg->nbest <= 0 ? FR_ASR_NBEST_DEFAULT : FR_MIN(cfg->nbest, FR_ASR_NBEST_MAX);
    return a;
}

fr_asr *fr_asr_new(const fr_asr_config *cfg, fr_err *err) {
    fr_asr_config dc;
    if (!cfg) memset(&dc, 0, sizeof dc), cfg = &dc;
    return asr_new(cfg, NULL, 0, err);
}

void fr_asr_free(fr_asr *a) {
    if (!a) return;
    fr_intent_free(a->im_own);
    fr_vad_free(a->vad);
    pthread_mutex_lock(&g_init_lock);
    ps_free(a->ps);
    cmd_ln_free_r(a->cfg);
    pthread_mutex_unlock(&g_init_lock);
    free(a->extra);
    free(a->extra_store);
    free(a);
}

void fr_asr_result_free(fr_asr_result *r) {
    if (!r) return;
    free(r->text);
    for (int i = 0; i < r->n_hyps; i++) free(r->hyps[i].text);
    free(r->hyps);
    memset(r, 0, sizeof *r);
}

/* The bounds of one call: deadline from its start, the external check. */
typedef struct asr_watch {
    double t0;               /* fr_time_s() at the start of the call */
    double deadline;         /* 0 = none */
    double limit_s;          /* for messages */
    const fr_cancel *cancel; /* or NULL */
    fr_cancel_reason why;    /* first reason seen (sticky) */
} asr_watch;

static void watch_init(asr_watch *w, const fr_asr_limits *lim) {
    memset(w, 0, sizeof *w);
    w->t0 = fr_time_s();
    if (!lim) return;
    w->cancel = lim->cancel;
    w->limit_s = lim->time_limit_s;
    if (lim->time_limit_s > 0) w->deadline = w->t0 + lim->time_limit_s;
}

static fr_cancel_reason watch_check(asr_watch *w) {
    if (w->why) return w->why;
    if (w->deadline > 0 && fr_time_s() >= w->deadline) w->why = FR_CANCEL_TIMEOUT;
    else w->why = fr_cancel_check(w->cancel);
    return w->why;
}

static int stopped(const asr_watch *w, double audio_s, fr_asr_result *res, fr_err *err) {
    double el = fr_time_s() - w->t0;
    res->stopped = w->why;
    res->proc_s = el;
    fr_err_code c = fr_cancel_reason_code(w->why);
    if (w->why == FR_CANCEL_TIMEOUT)
        fr_err_setc(err, c, "asr: stopped after %.1f s: %.1f s of audio took longer than the ASR "
                            "time limit of %.1f s", el, audio_s, w->limit_s);
    else if (w->why == FR_CANCEL_SHUTDOWN)
        fr_err_setc(err, c, "asr: stopped after %.1f s: the server is shutting down", el);
    else if (w->why == FR_CANCEL_CLIENT_GONE)
        fr_err_setc(err, c, "asr: stopped after %.1f s: the client disconnected", el);
    else
        fr_err_setc(err, c, "asr: stopped after %.1f s: the request's deadline passed", el);
    return FR_ASR_STOPPED;
}

/* Adds (text, score in nats relative to the best path) to res->hyps unless the text is already
 * there or the list is full. */
static void add_hyp(fr_asr_result *res, int cap, const char *text, double rel) {
    for (int i = 0; i < res->n_hyps; i++)
        if (!strcmp(res->hyps[i].text, text)) return;
    if (res->n_hyps >= cap) return;
    fr_asr_hyp *h = &res->hyps[res->n_hyps++];
    h->text = fr_xstrdup(text);
    h->score = FR_MIN(0.0, rel);
}

/* The n-best list from the lattice (A* over it): distinct texts, best first, the 1-best
 * transcript always first (score 0; the others relative to the first A* path). The search stops
 * at a->nbest texts, after 4x as many paths, or when the watch fires (the list is then shorter,
 * never empty). */
static void collect_nbest(fr_asr *a, fr_asr_result *res, asr_watch *w) {
    res->hyps = fr_xcalloc((size_t)a->nbest, sizeof *res->hyps);
    add_hyp(res, a->nbest, res->text, 0);
    if (a->nbest < 2) return;
    /* path scores are in the decoder's log base, scaled down by 2^10 (pocketsphinx's
     * SENSCR_SHIFT) */
    double ln_base = log(logmath_get_base(ps_get_logmath(a->ps))) * 1024.0;
    ps_nbest_t *nb = ps_nbest(a->ps);
    int32 ref = 0;
    for (int paths = 0; nb && res->n_hyps < a->nbest && paths < 4 * a->nbest; paths++) {
        if (watch_check(w)) break;
        int32 sc = 0;
        const char *t = ps_nbest_hyp(nb, &sc);
        if (!paths) ref = sc;
        if (t) add_hyp(res, a->nbest, t, ((double)sc - (double)ref) * ln_base);
        nb = ps_nbest_next(nb); /* frees the iterator after the last path */
    }
    if (nb) ps_nbest_free(nb);
}

int fr_asr_run(fr_asr *a, const int16_t *pcm, size_t n, fr_asr_result *res, fr_err *err) {
    return fr_asr_run_limited(a, pcm, n, NULL, res, err) == 0 ? 0 : -1;
}

#define CMN_BLOCK 256 /* frames per front-end call of the mean pass */
#define CMN_MAX_CEP 64 /* cepstral coefficients at most */
#define CMN_MIN_FRAMES 10 /* fewer frames: keep the running mean */

/* The utterance's cepstral mean into the decoder's live CMN (see the design note). Stops early
 * (keeping the running mean) when the watch fires. */
static void set_utt_cmn(fr_asr *a, const int16_t *pcm, size_t n, asr_watch *w) {
    fe_t *fe = ps_get_fe(a->ps);
    feat_t *ft = ps_get_feat(a->ps);
    int ncep = fe ? fe_get_output_size(fe) : 0;
    if (!ft || !ft->cmn_struct || ncep <= 0 || ncep > CMN_MAX_CEP || !n) return;
    mfcc_t *buf = fr_xcalloc((size_t)CMN_BLOCK * (size_t)ncep, sizeof(mfcc_t));
    mfcc_t *rows[CMN_BLOCK];
    for (int i = 0; i < CMN_BLOCK; i++) rows[i] = buf + (size_t)i * (size_t)ncep;
    double sum[CMN_MAX_CEP] = {0};
    long nfr = 0;
    int ok = fe_start_utt(fe) == 0;
    const int16 *p = pcm;
    size_t left = n;
    while (ok && left > 0) {
        if (watch_check(w)) {
            ok = 0;
            break;
        }
        int32 nf = CMN_BLOCK;
        size_t before = left;
        if (fe_process_frames(fe, &p, &left, rows, &nf, NULL) < 0) ok = 0;
        for (int32 f = 0; ok && f < nf; f++, nfr++)
            for (int c = 0; c < ncep; c++) sum[c] += (double)rows[f][c];
        if (!nf && left == before) break; /* no progress */
    }
    int32 nf = 0;
    fe_end_utt(fe, rows[0], &nf);
    if (ok && nf == 1) {
        for (int c = 0; c < ncep; c++) sum[c] += (double)rows[0][c];
        nfr++;
    }
    if (ok && nfr >= CMN_MIN_FRAMES) {
        for (int c = 0; c < ncep; c++) rows[0][c] = (mfcc_t)(sum[c] / (double)nfr);
        cmn_live_set(ft->cmn_struct, rows[0]);
    }
    free(buf);
}

/* A copy of pcm with ±1 LSB of noise from a fixed-seed generator (see the design note). */
static int16_t *dithered(const int16_t *pcm, size_t n) {
    int16_t *d = fr_xmalloc((n ? n : 1) * sizeof *d);
    uint32_t s = 0x2545f491u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        int v = (int)pcm[i] + (int)((s >> 16) % 3) - 1; /* -1, 0 or +1 */
        d[i] = (int16_t)FR_MAX(-32768, FR_MIN(32767, v));
    }
    return d;
}

static int run_watched_pcm(fr_asr *a, const int16_t *pcm, size_t n, asr_watch *w,
                           fr_asr_result *res, fr_err *err);

static fr_cancel_reason vad_watch(void *ctx) { return watch_check(ctx); }

/* The speech spans of pcm joined (malloc'd, *out_n samples), or NULL with err set; the span
 * count and the VAD's time into res. */
static int16_t *vad_trim(fr_asr *a, const int16_t *pcm, size_t n, asr_watch *w, size_t *out_n,
                         fr_asr_result *res, fr_err *err) {
    const double t0 = fr_time_s();
    float *f = fr_xmalloc((n ? n : 1) * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = (float)pcm[i] / 32768.0f;
    float *pr = NULL;
    size_t nw = 0, ns = 0;
    fr_cancel cc = {.fn = vad_watch, .ctx = w};
    const int rc = fr_vad_probs(a->vad, f, n, &pr, &nw, &cc, err);
    free(f);
    if (rc) return NULL;
    fr_vad_seg *segs = NULL;
    fr_vad_segments(pr, nw, n, NULL, &segs, &ns);
    int16_t *o = fr_vad_join_i16(pcm, segs, ns, out_n);
    free(pr);
    free(segs);
    res->vad = 1;
    res->vad_spans = (int)ns;
    res->vad_s = fr_time_s() - t0;
    return o;
}

static int run_watched(fr_asr *a, const int16_t *pcm, size_t n, asr_watch *w, fr_asr_result *res,
                       fr_err *err) {
    fr_asr_result vr = {0};
    int16_t *trim = NULL;
    size_t tn = n;
    memset(res, 0, sizeof *res); /* a VAD failure returns before the decoder fills it */
    if (a->vad) {
        if (!(trim = vad_trim(a, pcm, n, w, &tn, &vr, err)))
            return w->why != FR_CANCEL_NONE ? stopped(w, (double)n / FR_ASR_RATE, res, err) : -1;
        pcm = trim;
    }
    int16_t *d = dithered(pcm, tn);
    int rc = run_watched_pcm(a, d, tn, w, res, err);
    free(d);
    free(trim);
    res->speech_s = (double)tn / FR_ASR_RATE;
    if (rc == 0) {
        res->vad = vr.vad;
        res->vad_spans = vr.vad_spans;
        res->vad_s = vr.vad_s;
        res->audio_s = (double)n / FR_ASR_RATE;
        res->proc_s += vr.vad_s;
        res->rtf = res->audio_s > 0 ? res->proc_s / res->audio_s : 0;
    }
    return rc;
}

static int run_watched_pcm(fr_asr *a, const int16_t *pcm, size_t n, asr_watch *w,
                           fr_asr_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    double t0 = fr_time_s();
    if (watch_check(w)) return stopped(w, (double)n / FR_ASR_RATE, res, err);
    if (a->utt_cmn) set_utt_cmn(a, pcm, n, w);
    if (ps_start_utt(a->ps) < 0) {
        fr_err_set(err, "asr: could not start an utterance");
        return -1;
    }
    for (size_t off = 0; off < n; off += FR_ASR_CHUNK) {
        if (watch_check(w)) {
            ps_end_utt(a->ps);
            return stopped(w, (double)n / FR_ASR_RATE, res, err);
        }
        size_t k = FR_MIN((size_t)FR_ASR_CHUNK, n - off);
        if (ps_process_raw(a->ps, pcm + off, k, FALSE, FALSE) < 0) {
            ps_end_utt(a->ps);
            fr_err_set(err, "asr: recognition failed");
            return -1;
        }
    }
    ps_end_utt(a->ps);
    int32 score = 0;
    const char *hyp = ps_get_hyp(a->ps, &score);
    res->text = fr_xstrdup(hyp ? hyp : "");
    collect_nbest(a, res, w);
    if (a->im && res->n_hyps > 1) {
        fr_err rerr = {0};
        int k = fr_asr_result_rescore(a->im, res, a->weight, &rerr);
        res->chosen = k > 0 ? k : 0; /* a failed rescoring keeps the 1-best */
    }
    res->confidence = -1;
    if (hyp && *hyp) {
        int32 lp = ps_get_prob(a->ps);
        double p = logmath_exp(ps_get_logmath(a->ps), lp);
        if (p >= 0 && p <= 1.0000001) res->confidence = p > 1 ? 1 : p;
    }
    res->audio_s = (double)n / FR_ASR_RATE;
    res->proc_s = fr_time_s() - t0;
    res->rtf = res->audio_s > 0 ? res->proc_s / res->audio_s : 0;
    return 0;
}

int fr_asr_run_limited(fr_asr *a, const int16_t *pcm, size_t n, const fr_asr_limits *lim,
                       fr_asr_result *res, fr_err *err) {
    asr_watch w;
    watch_init(&w, lim);
    return run_watched(a, pcm, n, &w, res, err);
}

int fr_asr_run_bytes(fr_asr *a, const void *bytes, size_t len, const fr_audio_limits *lim,
                     fr_asr_result *res, fr_err *err) {
    double t0 = fr_time_s();
    fr_audio au;
    if (fr_audio_decode(bytes, len, lim, FR_ASR_RATE, &au, err)) {
        memset(res, 0, sizeof *res);
        return -1;
    }
    int16_t *s16 = fr_xmalloc((au.n ? au.n : 1) * sizeof(int16_t));
    fr_audio_to_s16(au.pcm, au.n, s16);
    double dec = fr_time_s() - t0;
    int rc = fr_asr_run(a, s16, au.n, res, err);
    free(s16);
    if (!rc) {
        res->decode_s = dec;
        res->src = au.src;
        res->rtf = res->audio_s > 0 ? (res->decode_s + res->proc_s) / res->audio_s : 0;
    }
    fr_audio_free(&au);
    return rc;
}

/* ---------------------------------------------------------------- pool */

struct fr_asr_pool {
    fr_asr_config cfg;     /* configuration (strings below owned) */
    char *hmm, *dict, *lm; /* owned copies of the config strings */
    char *extra, *rescore; /* ditto */
    char *vad;             /* ditto */
    fr_intent_model *im;   /* the rescoring model shared by the decoders, or NULL */
    int im_loaded;         /* 1 once the model was loaded (or found absent) */
    int max;               /* decoders at most */
    int created;           /* decoders created so far (including ones being created) */
    fr_asr **idle;         /* stack of idle decoders */
    int n_idle;            /* its depth */
    pthread_mutex_t mu;    /* guards the fields above */
    pthread_cond_t cv;     /* signalled when a decoder is returned or a creation fails */
};

static char *dup_or_null(const char *s) { return s ? fr_xstrdup(s) : NULL; }

fr_asr_pool *fr_asr_pool_new(const fr_asr_config *cfg, int n) {
    fr_asr_pool *p = fr_xcalloc(1, sizeof *p);
    if (cfg) p->cfg = *cfg;
    p->cfg.hmm = p->hmm = dup_or_null(p->cfg.hmm);
    p->cfg.dict = p->dict = dup_or_null(p->cfg.dict);
    p->cfg.lm = p->lm = dup_or_null(p->cfg.lm);
    p->cfg.extra_args = p->extra = dup_or_null(p->cfg.extra_args);
    p->cfg.rescore_model = p->rescore = dup_or_null(p->cfg.rescore_model);
    p->cfg.vad_model = p->vad = dup_or_null(p->cfg.vad_model);
    p->max = n > 0 ? n : fr_n_cores();
    p->idle = fr_xcalloc((size_t)p->max, sizeof(fr_asr *));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    return p;
}

/* Take a decoder, waiting while all are busy; with a watch the wait is in 50 ms slices and ends
 * (NULL, w->why set) when the watch fires. */
static fr_asr *pool_take(fr_asr_pool *p, asr_watch *w, fr_err *err) {
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->n_idle) {
            fr_asr *a = p->idle[--p->n_idle];
            pthread_mutex_unlock(&p->mu);
            return a;
        }
        if (p->created < p->max) {
            p->created++;
            fr_asr *a = NULL;
            /* the shared rescoring model loads with the first decoder (under the lock) */
            if (!p->im_loaded && load_rescore_model(&p->cfg, &p->im, err) == 0) p->im_loaded = 1;
            int ok = p->im_loaded;
            pthread_mutex_unlock(&p->mu);
            if (ok) a = asr_new(&p->cfg, p->im, 1, err);
            if (!a) {
                pthread_mutex_lock(&p->mu);
                p->created--;
                pthread_cond_signal(&p->cv);
                pthread_mutex_unlock(&p->mu);
            }
            return a;
        }
        if (!w) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        if (watch_check(w)) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
}

static void pool_give(fr_asr_pool *p, fr_asr *a) {
    pthread_mutex_lock(&p->mu);
    p->idle[p->n_idle++] = a;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int fr_asr_pool_warm(fr_asr_pool *p, fr_err *err) {
    fr_asr *a = pool_take(p, NULL, err);
    if (!a) return -1;
    pool_give(p, a);
    return 0;
}

int fr_asr_pool_transcribe(fr_asr_pool *p, const void *bytes, size_t len,
                           const fr_audio_limits *lim, fr_asr_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    /* refuse bad media before waiting for (or loading) a decoder */
    if (fr_audio_probe(bytes, len, lim, NULL, err)) return -1;
    fr_asr *a = pool_take(p, NULL, err);
    if (!a) return -1;
    int rc = fr_asr_run_bytes(a, bytes, len, lim, res, err);
    pool_give(p, a);
    return rc;
}

int fr_asr_pool_transcribe_pcm_limited(fr_asr_pool *p, const int16_t *pcm, size_t n,
                                       const fr_asr_limits *lim, fr_asr_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    asr_watch w;
    watch_init(&w, lim);
    fr_asr *a = pool_take(p, &w, err);
    if (!a) return w.why ? stopped(&w, (double)n / FR_ASR_RATE, res, err) : -1;
    int rc = run_watched(a, pcm, n, &w, res, err);
    pool_give(p, a);
    return rc;
}

int fr_asr_pool_transcribe_pcm(fr_asr_pool *p, const int16_t *pcm, size_t n, fr_asr_result *res,
                               fr_err *err) {
    memset(res, 0, sizeof *res);
    fr_asr *a = pool_take(p, NULL, err);
    if (!a) return -1;
    int rc = fr_asr_run(a, pcm, n, res, err);
    pool_give(p, a);
    return rc;
}

void fr_asr_pool_free(fr_asr_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n_idle; i++) fr_asr_free(p->idle[i]);
    free(p->idle);
    free(p->hmm);
    free(p->dict);
    free(p->lm);
    free(p->extra);
    free(p->rescore);
    free(p->vad);
    fr_intent_free(p->im);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
