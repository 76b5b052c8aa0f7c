/* speech_eval.c — `frugal eval-speech`: speech -> intent on generated spoken sets.
 *
 *   frugal eval-speech --rows tune|eval [--n 120] [--csv TRAIN.csv]
 *       prints "label<TAB>text" rows of one text split (input of the speech generators)
 *   frugal eval-speech --manifest DIR/manifest.tsv [--intent MODEL] [--workers 2] [--lm PATH]
 *       [--ps-args "-opt v ..."] [--nbest N] [--weight W] [--sweep W1,W2,...] [-v]
 *       recognises every file of a generated set and reports, per voice profile and overall,
 *       WER and speech -> intent accuracy of the ASR 1-best and of the rescored n-best
 *       (stages/asr/rescore.h), the n-best oracle, and the typed-text intent accuracy
 *
 * Text splits. Both come from rows the shipped intent model never trained on and the domain LM
 * never saw (`frugal build-lm` skips them): the intent recipe's stratified seed-1 split of
 * BANKING77 train (scripts/train_intent_model.sh) marks 10 % validation rows (held out of
 * everything: the EVALUATION texts) and 10 % calibration rows (only the temperature and the
 * out-of-scope thresholds were fitted on them: the TUNING texts). The published BANKING77 test
 * split is not in this repository. Within a split, rows are taken in the order of a salted
 * FNV-1a hash of their text, so --n picks a fixed pseudo-random subset.
 *
 * Manifest: one line per file, "path<TAB>profile<TAB>label<TAB>text"; a relative path is taken
 * from the manifest's folder. bench/asr/gen_tune.sh and bench/asr/gen_eval.sh write them.
 */
#include "tools/speech_eval.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "stages/asr/asr.h"
#include "stages/asr/lm.h"
#include "stages/asr/rescore.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/intent_train.h"

#define SE_MAX_ITEMS 4096  /* manifest lines at most */
#define SE_MAX_SWEEP 32    /* weights in --sweep at most */
#define SE_MAX_PROFILES 64 /* distinct profiles at most */

int fr_speech_split_marks(const fr_intent_data *d, uint8_t *mark) {
    if (!d->n) return -1;
    fr_intent_split3(d, 0.1, 0.1, 1, mark);
    return 0;
}

static uint32_t fnv1a(const char *s, uint32_t salt) {
    uint32_t h = 2166136261u ^ salt;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

typedef struct row_key {
    uint32_t key; /* salted hash of the text */
    size_t idx;   /* row */
} row_key;

static int cmp_row_key(const void *a, const void *b) {
    const row_key *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* --rows: print the chosen rows of one split. */
static int print_rows(const char *csv, int want_mark, int n) {
    fr_err err = {0};
    fr_intent_data d;
    char *dflt = csv ? NULL : fr_data_path("data/banking77/train.csv");
    int rc = fr_intent_data_load_csv(&d, csv ? csv : dflt, &err);
    free(dflt);
    if (rc) return fprintf(stderr, "frugal eval-speech: %s\n", err.msg), 1;
    uint8_t *mark = fr_xmalloc(d.n + 1);
    fr_speech_split_marks(&d, mark);
    row_key *k = fr_xmalloc((d.n + 1) * sizeof *k);
    size_t m = 0;
    for (size_t i = 0; i < d.n; i++)
        if (mark[i] == want_mark) k[m++] = (row_key){fnv1a(d.texts[i], 0x5eed0000u + (uint32_t)want_mark), i};
    qsort(k, m, sizeof *k, cmp_row_key);
    for (size_t j = 0; j < m && j < (size_t)n; j++) {
        const char *t = d.texts[k[j].idx];
        printf("%s\t", d.names[d.labels[k[j].idx]]);
        for (const char *p = t; *p; p++) putchar(*p == '\t' || *p == '\n' || *p == '\r' ? ' ' : *p);
        putchar('\n');
    }
    free(k);
    free(mark);
    fr_intent_data_free(&d);
    return 0;
}

/* One hypothesis with its intent. */
typedef struct se_hyp {
    char *norm;   /* normalised text (for WER) */
    double score; /* ASR score, nats relative to the best */
    float conf;   /* best in-scope intent's calibrated probability */
    int label;    /* its label index, or -1 */
    float *probs; /* calibrated probabilities of every label [n_labels] */
} se_hyp;

/* One manifest line and what was recognised. */
typedef struct se_item {
    char *wav;     /* audio file */
    char *profile; /* voice profile name */
    char *label;   /* reference intent */
    char *text;    /* reference text (raw) */
    char *ref;     /* normalised reference */
    int prof;      /* profile index */
    int label_idx; /* reference label index in the model, or -1 */
    int typed_ok;  /* the typed text's intent is right */
    int concat_ok; /* the intent of all hypotheses' texts joined is right (a comparison rule) */
    se_hyp *hyps;  /* n-best, ASR order */
    int n_hyps;    /* count */
    double audio_s, proc_s;
} se_item;

typedef struct se_job {
    se_item *items;
    size_t n, next;
    fr_asr_pool *pool;
    const fr_intent_model *im;
    pthread_mutex_t mu;
    int failed;
} se_job;

static void label_of(const fr_intent_model *im, const char *t, float *conf, int *label) {
    fr_intent_pred p;
    fr_intent_verdict v;
    fr_err err = {0};
    int k = fr_intent_assess(im, t, strlen(t), &p, 1, &v, &err);
    *conf = k > 0 ? v.confidence : 0;
    *label = k > 0 ? p.label : -1;
}

static void *se_worker(void *arg) {
    se_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n) return NULL;
        se_item *it = &j->items[i];
        size_t len;
        fr_err err = {0};
        char *bytes = fr_read_file(it->wav, (size_t)64 << 20, &len, &err);
        fr_asr_result r;
        if (!bytes || fr_asr_pool_transcribe(j->pool, bytes, len, NULL, &r, &err)) {
            fprintf(stderr, "eval-speech: %s: %s\n", it->wav, err.msg);
            j->failed = 1;
            free(bytes);
            continue;
        }
        free(bytes);
        it->audio_s = r.audio_s;
        it->proc_s = r.decode_s + r.proc_s;
        it->n_hyps = r.n_hyps;
        it->hyps = fr_xcalloc((size_t)FR_MAX(r.n_hyps, 1), sizeof *it->hyps);
        for (int h = 0; h < r.n_hyps; h++) {
            fr_buf b = {0};
            fr_asr_normalize(r.hyps[h].text, &b);
            it->hyps[h].norm = fr_buf_cstr(&b);
            it->hyps[h].score = r.hyps[h].score;
            label_of(j->im, r.hyps[h].text, &it->hyps[h].conf, &it->hyps[h].label);
            float cov;
            it->hyps[h].probs = fr_xcalloc((size_t)fr_intent_n_labels(j->im), sizeof(float));
            fr_intent_probs(j->im, r.hyps[h].text, strlen(r.hyps[h].text), it->hyps[h].probs,
                            &cov, &err);
        }
        float c;
        int l;
        label_of(j->im, it->text, &c, &l);
        it->typed_ok = l >= 0 && l == it->label_idx;
        fr_buf cat = {0};
        for (int h = 0; h < r.n_hyps; h++) fr_buf_puts(&cat, h ? " " : ""), fr_buf_puts(&cat, r.hyps[h].text);
        label_of(j->im, fr_buf_cstr(&cat), &c, &l);
        fr_buf_free(&cat);
        it->concat_ok = l >= 0 && l == it->label_idx;
        fr_asr_result_free(&r);
    }
}

/* The hypothesis rescoring picks at weight w (the rule of fr_asr_rescore). */
static int pick(const se_item *it, double w) {
    int best = -1;
    double bj = 0;
    for (int h = 0; h < it->n_hyps; h++) {
        double j = fr_asr_joint(it->hyps[h].score, it->hyps[h].conf, w);
        if (best < 0 || j > bj) best = h, bj = j;
    }
    return best;
}

/* The marginal choice at weight w: P(h) ∝ exp(w * score(h)); each intent collects
 * sum P(h) * conf(h) over the hypotheses whose best intent it is; the hypothesis of the winning
 * intent with the largest P(h) * conf(h) is returned. For comparison with the pick rule. */
static int pick_marginal(const se_item *it, double w) {
    if (!it->n_hyps) return -1;
    double mx = it->hyps[0].score;
    for (int h = 1; h < it->n_hyps; h++) mx = FR_MAX(mx, it->hyps[h].score);
    double mass[FR_ASR_NBEST_MAX];
    for (int h = 0; h < it->n_hyps; h++) mass[h] = exp(w * (it->hyps[h].score - mx)) * it->hyps[h].conf;
    int best = 0;
    double bm = -1;
    for (int h = 0; h < it->n_hyps; h++) {
        double tot = 0;
        for (int k = 0; k < it->n_hyps; k++)
            if (it->hyps[k].label == it->hyps[h].label) tot += mass[k];
        if (tot > bm + 1e-12 || (fabs(tot - bm) <= 1e-12 && mass[h] > mass[best])) bm = tot, best = h;
    }
    return best;
}

/* The full marginal: P(c) = sum_h pi(h) p_h(c) with pi ∝ exp(w * score) over every in-scope
 * label c of the model (oos: its out-of-scope label, skipped); returns the hypothesis with the
 * largest pi(h) p_h(c*) and the label in *lab. */
static int pick_full(const se_item *it, double w, int n_labels, int oos, int *lab) {
    *lab = -1;
    if (!it->n_hyps) return -1;
    double mx = it->hyps[0].score, pi[FR_ASR_NBEST_MAX], z = 0;
    for (int h = 1; h < it->n_hyps; h++) mx = FR_MAX(mx, it->hyps[h].score);
    for (int h = 0; h < it->n_hyps; h++) z += pi[h] = exp(w * (it->hyps[h].score - mx));
    double best = -1;
    for (int c = 0; c < n_labels; c++) {
        if (c == oos) continue;
        double p = 0;
        for (int h = 0; h < it->n_hyps; h++) p += pi[h] / z * (double)it->hyps[h].probs[c];
        if (p > best) best = p, *lab = c;
    }
    int bh = 0;
    for (int h = 1; h < it->n_hyps; h++)
        if (pi[h] * it->hyps[h].probs[*lab] > pi[bh] * it->hyps[bh].probs[*lab]) bh = h;
    return bh;
}

/* Totals of one profile (or all) for one way of choosing. */
typedef struct se_tot {
    size_t n, words, edits, right;
} se_tot;

static void tot_add(se_tot *t, const se_item *it, int h) {
    size_t nw = 0;
    t->edits += fr_wer_edits(it->ref, h >= 0 ? it->hyps[h].norm : "", &nw);
    t->words += nw;
    t->right += h >= 0 && it->hyps[h].label >= 0 && it->hyps[h].label == it->label_idx;
    t->n++;
}

static double wer(const se_tot *t) { return t->words ? (double)t->edits / (double)t->words : 0; }
static double acc(const se_tot *t) { return t->n ? 100.0 * (double)t->right / (double)t->n : 0; }

/* Oracle over the n-best: the lowest-WER hypothesis; intent right when any hypothesis is. */
static void tot_oracle(se_tot *wt, se_tot *it_t, const se_item *it) {
    int bh = 0;
    size_t be = (size_t)-1, nw = 0;
    int any = 0;
    for (int h = 0; h < it->n_hyps; h++) {
        size_t e = fr_wer_edits(it->ref, it->hyps[h].norm, &nw);
        if (e < be) be = e, bh = h;
        any |= it->hyps[h].label >= 0 && it->hyps[h].label == it->label_idx;
    }
    tot_add(wt, it, it->n_hyps ? bh : -1);
    it_t->n++;
    it_t->right += any;
}

static int read_manifest(const char *path, const fr_intent_model *im, se_item **out, size_t *n,
                         char ***profiles, int *n_prof, fr_err *err) {
    size_t len;
    char *txt = fr_read_file(path, (size_t)16 << 20, &len, err);
    if (!txt) return -1;
    char *dir = fr_xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    se_item *v = NULL;
    size_t m = 0;
    char **pn = fr_xcalloc(SE_MAX_PROFILES, sizeof(char *));
    int np = 0, rc = 0;
    size_t line = 0;
    for (char *p = txt, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl) *nl = 0;
        line++;
        if (!*p || *p == '#') continue;
        char *f[4];
        int k = 0;
        for (char *q = p; k < 4; k++) {
            f[k] = q;
            char *tab = k < 3 ? strchr(q, '\t') : NULL;
            if (k < 3 && !tab) break;
            if (tab) *tab = 0, q = tab + 1;
        }
        if (k < 4 || m >= SE_MAX_ITEMS) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%zu: %s", path, line,
                        k < 4 ? "want path<TAB>profile<TAB>label<TAB>text" : "too many lines");
            rc = -1;
            break;
        }
        v = fr_xrealloc(v, (m + 1) * sizeof *v);
        se_item *it = &v[m++];
        memset(it, 0, sizeof *it);
        it->wav = f[0][0] == '/' ? fr_xstrdup(f[0]) : fr_path_join(dir, f[0]);
        it->profile = fr_xstrdup(f[1]);
        it->label = fr_xstrdup(f[2]);
        it->text = fr_xstrdup(f[3]);
        fr_buf b = {0};
        fr_asr_normalize(it->text, &b);
        it->ref = fr_buf_cstr(&b);
        it->label_idx = fr_intent_label_index(im, it->label);
        it->prof = -1;
        for (int q = 0; q < np; q++)
            if (!strcmp(pn[q], it->profile)) it->prof = q;
        if (it->prof < 0 && np < SE_MAX_PROFILES) {
            pn[np] = fr_xstrdup(it->profile);
            it->prof = np++;
        }
        if (it->prof < 0) it->prof = np - 1;
    }
    free(txt);
    free(dir);
    *out = v;
    *n = m;
    *profiles = pn;
    *n_prof = np;
    if (!rc && !m) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: no lines", path);
        rc = -1;
    }
    return rc;
}

static void print_row(const char *name, const se_tot *t1, const se_tot *tr, const se_tot *ow,
                      const se_tot *oi, size_t typed, double audio) {
    printf("| %s | %zu | %.1f | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f |\n", name, t1->n,
           audio, wer(t1), wer(tr), wer(ow), acc(t1), acc(tr), acc(oi),
           t1->n ? 100.0 * (double)typed / (double)t1->n : 0);
}

int fr_cmd_eval_speech(int argc, char **argv) {
    const char *csv = NULL, *rows = NULL, *manifest = NULL, *intent = NULL, *lm = NULL;
    const char *ps_args = NULL, *sweep = NULL;
    int n = 120, workers = 2, nbest = FR_ASR_NBEST_DEFAULT;
    double weight = FR_ASR_RESCORE_WEIGHT;
    bool verbose = false, no_utt_cmn = false;
    fr_flags fl;
    fr_flags_init(&fl, "eval-speech", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf("usage: frugal eval-speech --rows tune|eval [--n 120] [--csv TRAIN.csv]\n"
                   "       frugal eval-speech --manifest FILE [--intent MODEL] [--workers 2]\n"
                   "           [--lm PATH] [--ps-args \"-opt v ...\"] [--nbest N] [--weight W]\n"
                   "           [--sweep W1,W2,...] [--no-utt-cmn] [-v]\n"
                   "  --rows prints label<TAB>text rows of the tuning or evaluation text split;\n"
                   "  --manifest recognises a generated spoken set and reports WER and\n"
                   "  speech->intent accuracy per voice profile (1-best, rescored, oracle, typed)\n");
            return 0;
        }
        if (!(fr_flag_switch(&fl, "-v", &verbose) || fr_flag_str(&fl, "--csv", &csv) ||
              fr_flag_switch(&fl, "--no-utt-cmn", &no_utt_cmn) ||
              fr_flag_str(&fl, "--rows", &rows) || fr_flag_str(&fl, "--manifest", &manifest) ||
              fr_flag_str(&fl, "--intent", &intent) || fr_flag_str(&fl, "--lm", &lm) ||
              fr_flag_str(&fl, "--ps-args", &ps_args) || fr_flag_str(&fl, "--sweep", &sweep) ||
              fr_flag_int(&fl, "--n", 1, 1 << 20, &n) ||
              fr_flag_int(&fl, "--workers", 1, 64, &workers) ||
              fr_flag_int(&fl, "--nbest", 1, FR_ASR_NBEST_MAX, &nbest) ||
              fr_flag_double(&fl, "--weight", 0, 1e6, &weight)))
            return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    if (rows) {
        if (strcmp(rows, "tune") && strcmp(rows, "eval"))
            return fr_flags_fail(&fl, "--rows tune|eval");
        return print_rows(csv, !strcmp(rows, "eval") ? 1 : 2, n);
    }
    if (!manifest) return fr_flags_fail(&fl, "--rows or --manifest needed");
    double ws[SE_MAX_SWEEP];
    int nw = 0;
    if (sweep) {
        const char *p = sweep;
        while (*p && nw < SE_MAX_SWEEP) {
            char *e;
            double w = strtod(p, &e);
            if (e == p || !isfinite(w) || w < 0) return fr_flags_fail(&fl, "--sweep: weights >= 0, comma-separated");
            ws[nw++] = w;
            p = *e == ',' ? e + 1 : e;
            if (*e && *e != ',') return fr_flags_fail(&fl, "--sweep: weights >= 0, comma-separated");
        }
    }
    fr_err err = {0};
    char *dflt = intent ? NULL : fr_data_path("models/intent-banking77.bin");
    fr_intent_model *im = fr_intent_load(intent ? intent : dflt, &err);
    free(dflt);
    if (!im) return fprintf(stderr, "frugal eval-speech: %s\n", err.msg), 1;
    se_item *items = NULL;
    size_t m = 0;
    char **pn = NULL;
    int np = 0;
    int rc = 0;
    if (read_manifest(manifest, im, &items, &m, &pn, &np, &err)) {
        fprintf(stderr, "frugal eval-speech: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) {
        fr_asr_config cfg = {0};
        cfg.lm = lm;
        cfg.nbest = nbest;
        cfg.extra_args = ps_args;
        cfg.rescore_model = ""; /* the list is rescored here, at every weight */
        cfg.no_utt_cmn = no_utt_cmn;
        se_job j = {.items = items, .n = m, .im = im};
        pthread_mutex_init(&j.mu, NULL);
        j.pool = fr_asr_pool_new(&cfg, workers);
        if (fr_asr_pool_warm(j.pool, &err)) {
            fprintf(stderr, "frugal eval-speech: %s\n", err.msg);
            rc = 1;
        } else {
            double t0 = fr_time_s();
            pthread_t th[64];
            for (int w = 0; w < workers; w++) pthread_create(&th[w], NULL, se_worker, &j);
            for (int w = 0; w < workers; w++) pthread_join(th[w], NULL);
            double wall = fr_time_s() - t0;
            rc = j.failed;
            double audio = 0, proc = 0;
            for (size_t i = 0; i < m; i++) audio += items[i].audio_s, proc += items[i].proc_s;
            printf("eval-speech: %s: %zu utterances, %.1f s of audio, %d workers, n-best %d, "
                   "weight %g%s%s; wall %.1f s, RTF per core %.3f\n",
                   manifest, m, audio, workers, nbest, weight, ps_args ? ", ps-args " : "",
                   ps_args ? ps_args : "", wall, audio > 0 ? proc / audio : 0);
        }
        fr_asr_pool_free(j.pool);
        pthread_mutex_destroy(&j.mu);
    }
    if (!rc) {
        printf("\n| profile | utts | audio s | WER 1-best | WER rescored | WER oracle | intent 1-best %% "
               "| intent rescored %% | intent oracle %% | intent typed %% |\n"
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for (int q = 0; q <= np; q++) {
            se_tot t1 = {0}, tr = {0}, ow = {0}, oi = {0};
            size_t typed = 0;
            double audio = 0;
            for (size_t i = 0; i < m; i++) {
                if (q < np && items[i].prof != q) continue;
                tot_add(&t1, &items[i], items[i].n_hyps ? 0 : -1);
                tot_add(&tr, &items[i], pick(&items[i], weight));
                tot_oracle(&ow, &oi, &items[i]);
                typed += items[i].typed_ok;
                audio += items[i].audio_s;
            }
            print_row(q < np ? pn[q] : "**all**", &t1, &tr, &ow, &oi, typed, audio);
        }
        if (nw) {
            printf("\nweight sweep (all profiles):\n| weight | WER | intent %% | intent %% (marginal rule) "
                   "| intent %% (full marginal, its label) | intent %% (full marginal, chosen text) | WER (full marginal) |\n"
                   "| --- | --- | --- | --- | --- | --- | --- |\n");
            int nl = fr_intent_n_labels(im), oos = fr_intent_get_calib(im)->oos_label;
            for (int k = 0; k < nw; k++) {
                se_tot t = {0}, tm = {0}, tf = {0};
                size_t fr = 0;
                for (size_t i = 0; i < m; i++) {
                    tot_add(&t, &items[i], pick(&items[i], ws[k]));
                    tot_add(&tm, &items[i], pick_marginal(&items[i], ws[k]));
                    int lab;
                    tot_add(&tf, &items[i], pick_full(&items[i], ws[k], nl, oos, &lab));
                    fr += lab >= 0 && lab == items[i].label_idx;
                }
                printf("| %g | %.4f | %.2f | %.2f | %.2f | %.2f | %.4f |\n", ws[k], wer(&t), acc(&t),
                       acc(&tm), m ? 100.0 * (double)fr / (double)m : 0, acc(&tf), wer(&tf));
            }
            size_t cat = 0;
            for (size_t i = 0; i < m; i++) cat += items[i].concat_ok;
            printf("intent of the n-best texts joined: %.2f %%\n", m ? 100.0 * (double)cat / (double)m : 0);
        }
        if (verbose)
            for (size_t i = 0; i < m; i++) {
                const se_item *it = &items[i];
                int h = pick(it, weight);
                printf("\n[%s] %s (%s)\n  REF %s\n", it->profile, it->label, it->wav, it->ref);
                for (int k = 0; k < it->n_hyps; k++)
                    printf("  %c%2d %8.2f %-28s %.3f %s\n", k == h ? '*' : ' ', k,
                           it->hyps[k].score,
                           it->hyps[k].label >= 0 ? fr_intent_label(im, it->hyps[k].label) : "-",
                           it->hyps[k].conf, it->hyps[k].norm);
            }
    }
    for (size_t i = 0; i < m; i++) {
        se_item *it = &items[i];
        for (int k = 0; k < it->n_hyps; k++) free(it->hyps[k].norm), free(it->hyps[k].probs);
        free(it->hyps), free(it->wav), free(it->profile), free(it->label), free(it->text);
        free(it->ref);
    }
    free(items);
    for (int q = 0; q < np; q++) free(pn[q]);
    free(pn);
    fr_intent_free(im);
    return rc;
}
