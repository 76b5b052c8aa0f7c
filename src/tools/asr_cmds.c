/* asr_cmds.c — speech commands.
 *
 *   frugal asr [--lm-kind domain|generic] [--lm PATH] [--no-rescore] [--no-vad] FILE...
 *                   transcribe WAV/FLAC/OGG files (n-best rescored with the intent model)
 *   frugal build-lm --csv TRAIN.csv [--nlupp DIR] [--text FILE] --out LM.arpa [--bin LM.bin]
 *                   [--order 3] [--min-count3 N] [--dict PATH]   build the domain LM
 *   frugal eval-asr --csv TRAIN.csv [--n 150] [--workers 2] [--lm PATH] [--keep-wavs DIR] [-v]
 *                   synthesise held-out rows with espeak-ng, WER with generic vs domain LM
 *
 * The held-out rows (fr_asr_is_heldout) are skipped by build-lm and are the only rows eval-asr
 * uses, so the domain LM never sees the evaluation sentences (also not as exact duplicates:
 * training rows whose normalised text equals a held-out row's are dropped too). build-lm also
 * skips the text splits of `frugal eval-speech` (fr_speech_split_marks: the intent model's
 * validation and calibration rows), the same way.
 */
#include "tools/asr_cmds.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/flags.h"
#include "base/mask.h"
#include "stages/asr/asr.h"
#include "stages/asr/lm.h"
#include "stages/asr/ps_wrap.h"
#include "tools/speech_eval.h"

extern char **environ;

int fr_asr_is_heldout(const char *text) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 16777619u;
    return h % 40 == 7;
}

/* Rows of a BANKING77-style CSV (text,category): malloc'd texts. */
typedef struct rows {
    char **v;  /* utterances */
    size_t n;  /* count */
} rows;

static void rows_free(rows *r) {
    for (size_t i = 0; i < r->n; i++) free(r->v[i]);
    free(r->v);
}

static int read_csv(const char *path, rows *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    size_t len;
    char *txt = fr_read_file(path, (size_t)256 << 20, &len, err);
    if (!txt) return -1;
    char *p = txt;
    int first = 1;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (nl && nl > p && nl[-1] == '\r') nl[-1] = 0;
        char *comma = strrchr(p, ',');
        if (!first && comma) {
            *comma = 0;
            fr_buf b = {0};
            if (*p == '"') {
                for (char *q = p + 1; *q; q++) {
                    if (*q == '"' && q[1] == '"') fr_buf_append(&b, q++, 1);
                    else if (*q == '"') break;
                    else fr_buf_append(&b, q, 1);
                }
            } else {
                fr_buf_puts(&b, p);
            }
            out->v = fr_xrealloc(out->v, (out->n + 1) * sizeof(char *));
            out->v[out->n++] = fr_buf_cstr(&b);
        }
        first = 0;
        if (!nl) break;
        p = nl + 1;
    }
    free(txt);
    return 0;
}

/* All "text" fields of the NLU++ fold*.json files in dir. */
static int read_nlupp(const char *dir, rows *out, fr_err *err) {
    DIR *d = opendir(dir);
    if (!d) {
        fr_err_set(err, "%s: cannot open directory", dir);
        return -1;
    }
    struct dirent *e;
    char **names = NULL;
    size_t nn = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) {
            names = fr_xrealloc(names, (nn + 1) * sizeof(char *));
            names[nn++] = fr_path_join(dir, e->d_name);
        }
    }
    closedir(d);
    for (size_t i = 0; i < nn; i++) {
        size_t len;
        char *txt = fr_read_file(names[i], (size_t)64 << 20, &len, err);
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        cJSON *it;
        cJSON_ArrayForEach(it, j) {
            cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "text");
            if (!cJSON_IsString(t)) continue;
            out->v = fr_xrealloc(out->v, (out->n + 1) * sizeof(char *));
            out->v[out->n++] = fr_xstrdup(t->valuestring);
        }
        cJSON_Delete(j);
        free(names[i]);
    }
    free(names);
    return 0;
}

/* ---------------------------------------------------------------- asr */

int fr_cmd_asr(int argc, char **argv) {
    fr_asr_config cfg = {0};
    int first = -1;
    const char *kind = NULL;
    bool no_rescore = false, no_vad = false;
    fr_flags fl;
    fr_flags_init(&fl, "asr", argc, argv);
    while (first < 0 && fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf("usage: frugal asr [--lm-kind domain|generic] [--lm PATH] [--no-rescore] [--no-vad] FILE...\n"
                   "  transcribes WAV/FLAC/OGG files; prints one JSON object per file (the n-best\n"
                   "  list is rescored with the intent model unless --no-rescore; only the speech\n"
                   "  the VAD finds is decoded when models/vad is installed, unless --no-vad)\n");
            return 0;
        } else if (fr_flag_switch(&fl, "--no-rescore", &no_rescore)) {
            if (no_rescore) cfg.rescore_model = "";
        } else if (fr_flag_switch(&fl, "--no-vad", &no_vad)) {
            if (no_vad) cfg.vad_model = "";
        } else if (fr_flag_str(&fl, "--lm", &cfg.lm)) {
            continue;
        } else if (fr_flag_str(&fl, "--lm-kind", &kind)) {
            if (!kind) continue;
            if (!strcmp(kind, "generic")) cfg.lm_kind = FR_ASR_LM_GENERIC;
            else if (!strcmp(kind, "domain")) cfg.lm_kind = FR_ASR_LM_DOMAIN;
            else return fr_flags_fail(&fl, "--lm-kind domain|generic");
        } else if (fr_flags_positional(&fl)) {
            first = fl.i; /* the files start here */
        } else {
            return fr_flags_unknown(&fl);
        }
    }
    if (fl.rc) return fl.rc;
    if (first < 0) {
        fprintf(stderr, "usage: frugal asr [--lm-kind domain|generic] [--lm PATH] FILE...\n");
        return 2;
    }
    fr_err err = {0};
    fr_asr *a = fr_asr_new(&cfg, &err);
    if (!a) return fprintf(stderr, "frugal asr: %s\n", err.msg), 1;
    int rc = 0;
    for (int i = first; i < argc; i++) {
        size_t len;
        char *bytes = fr_read_file(argv[i], (size_t)64 << 20, &len, &err);
        fr_asr_result r;
        if (!bytes || fr_asr_run_bytes(a, bytes, len, NULL, &r, &err)) {
            fprintf(stderr, "frugal asr: %s: %s\n", argv[i], err.msg);
            free(bytes);
            rc = 1;
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", argv[i]);
        char *masked = fr_mask_dup(r.text ? r.text : ""); /* no card number printed in clear */
        cJSON_AddStringToObject(o, "transcript", masked);
        free(masked);
        cJSON_AddNumberToObject(o, "confidence", r.confidence);
        cJSON_AddNumberToObject(o, "hypotheses", r.n_hyps);
        cJSON_AddNumberToObject(o, "chosen", r.chosen); /* 0: the 1-best; > 0: rescored */
        cJSON_AddNumberToObject(o, "audio_s", r.audio_s);
        cJSON_AddNumberToObject(o, "decode_s", r.decode_s);
        cJSON_AddNumberToObject(o, "proc_s", r.proc_s);
        cJSON_AddNumberToObject(o, "rtf", r.rtf);
        cJSON_AddBoolToObject(o, "vad", r.vad);
        if (r.vad) {
            cJSON_AddNumberToObject(o, "vad_spans", r.vad_spans);
            cJSON_AddNumberToObject(o, "vad_s", r.vad_s);
        }
        cJSON_AddNumberToObject(o, "speech_s", r.speech_s);
        char *s = cJSON_PrintUnformatted(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        fr_asr_result_free(&r);
        free(bytes);
    }
    fr_asr_free(a);
    return rc;
}

/* ---------------------------------------------------------------- build-lm */

int fr_cmd_build_lm(int argc, char **argv) {
    const char *csv = NULL, *nlupp = NULL, *text = NULL, *out = NULL, *bin = NULL;
    const char *dict = FR_ASR_MODEL_DIR "/cmudict-en-us.dict";
    int order = 3, minc3 = 1;
    fr_flags fl;
    fr_flags_init(&fl, "build-lm", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf("usage: frugal build-lm [--csv TRAIN.csv] [--nlupp DIR] [--text FILE] --out LM.arpa\n"
                   "       [--bin LM.bin] [--order 2|3] [--min-count3 N] [--dict PATH]\n"
                   "  interpolated Kneser-Ney LM over dictionary words; CSV rows held out for\n"
                   "  eval-asr are skipped\n");
            return 0;
        }
        if (!(fr_flag_str(&fl, "--csv", &csv) || fr_flag_str(&fl, "--nlupp", &nlupp) ||
              fr_flag_str(&fl, "--text", &text) || fr_flag_str(&fl, "--out", &out) ||
              fr_flag_str(&fl, "--bin", &bin) || fr_flag_str(&fl, "--dict", &dict) ||
              fr_flag_int(&fl, "--order", 2, 3, &order) ||
              fr_flag_int(&fl, "--min-count3", 0, 1 << 20, &minc3)))
            return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    if (!out || (!csv && !nlupp && !text)) {
        fprintf(stderr, "frugal build-lm: --out and at least one of --csv/--nlupp/--text needed\n");
        return 2;
    }
    fr_err err = {0};
    fr_wordset *ws = fr_wordset_load_dict(dict, &err);
    if (!ws) return fprintf(stderr, "frugal build-lm: %s\n", err.msg), 1;
    rows train = {0}, extra = {0}, held = {0};
    int rc = 1;
    if (nlupp && read_nlupp(nlupp, &extra, &err)) goto done;
    if (text) {
        size_t len;
        char *t = fr_read_file(text, (size_t)256 << 20, &len, &err);
        if (!t) goto done;
        for (char *p = strtok(t, "\n"); p; p = strtok(NULL, "\n")) {
            extra.v = fr_xrealloc(extra.v, (extra.n + 1) * sizeof(char *));
            extra.v[extra.n++] = fr_xstrdup(p);
        }
        free(t);
    }
    /* the CSV through the labelled-data reader (RFC 4180 quoting, the intent trainer's row
     * order): rows of the spoken tuning/evaluation text splits (speech_eval.h) stay out too */
    uint8_t *mark = NULL;
    if (csv) {
        fr_intent_data d;
        if (fr_intent_data_load_csv(&d, csv, &err)) goto done;
        mark = fr_xcalloc(d.n + 1, 1);
        fr_speech_split_marks(&d, mark);
        train.v = fr_xcalloc(d.n + 1, sizeof(char *));
        for (size_t i = 0; i < d.n; i++) train.v[i] = fr_xstrdup(d.texts[i]);
        train.n = d.n;
        fr_intent_data_free(&d);
    } else {
        mark = fr_xcalloc(1, 1);
    }
    for (size_t i = 0; i < train.n; i++) mark[i] = mark[i] || fr_asr_is_heldout(train.v[i]);
    /* normalised held-out sentences: exact duplicates never enter the LM */
    char **hn = NULL;
    size_t nh = 0;
    for (size_t i = 0; i < train.n; i++)
        if (mark[i]) {
            fr_buf b = {0};
            fr_asr_normalize(train.v[i], &b);
            hn = fr_xrealloc(hn, (nh + 1) * sizeof(char *));
            hn[nh++] = fr_buf_cstr(&b);
        }
    fr_lm_builder *lb = fr_lm_builder_new(ws);
    size_t skipped = 0;
    for (int pass = 0; pass < 2; pass++) {
        rows *r = pass ? &extra : &train;
        for (size_t i = 0; i < r->n; i++) {
            if (!pass && mark[i]) continue;
            fr_buf b = {0};
            fr_asr_normalize(r->v[i], &b);
            int dup = 0;
            for (size_t k = 0; k < nh && !dup; k++) dup = !strcmp(hn[k], b.data);
            if (dup) skipped++;
            else fr_lm_add_words(lb, b.data);
            fr_buf_free(&b);
        }
    }
    for (size_t k = 0; k < nh; k++) free(hn[k]);
    free(hn);
    free(mark);
    (void)held;
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "frugal build-lm: cannot write %s\n", out);
        fr_lm_builder_free(lb);
        goto done;
    }
    fr_lm_stats st;
    int wrc = fr_lm_write_arpa(lb, order, minc3, f, &st, &err);
    if (fclose(f) || wrc) {
        fprintf(stderr, "frugal build-lm: %s\n", wrc ? err.msg : "write failed");
        fr_lm_builder_free(lb);
        goto done;
    }
    fr_lm_builder_free(lb);
    fprintf(stderr,
            "build-lm: %zu sentences (%zu held-out rows and %zu duplicates of them skipped), %zu words, "
            "%zu not in the dictionary; %zu/%zu/%zu n-grams; KN discounts %.3f %.3f %.3f -> %s\n",
            st.sentences, nh, skipped, st.tokens, st.oov_tokens, st.n[0], st.n[1], st.n[2],
            st.discount[0], st.discount[1], st.discount[2], out);
    if (bin) {
        logmath_t *lm = logmath_init(1.0001, 0, 0);
        err_set_logfp(NULL);
        ngram_model_t *m = ngram_model_read(NULL, out, NGRAM_ARPA, lm);
        int ok = m && ngram_model_write(m, bin, NGRAM_BIN) == 0;
        if (m) ngram_model_free(m);
        logmath_free(lm);
        if (!ok) {
            fprintf(stderr, "frugal build-lm: pocketsphinx could not convert %s to %s\n", out, bin);
            goto done;
        }
        fprintf(stderr, "build-lm: binary model -> %s\n", bin);
    }
    rc = 0;
done:
    if (rc && err.msg[0]) fprintf(stderr, "frugal build-lm: %s\n", err.msg);
    rows_free(&train);
    rows_free(&extra);
    fr_wordset_free(ws);
    return rc;
}

/* ---------------------------------------------------------------- eval-asr */

/* Run espeak-ng (no shell): voice, words per minute, output wav, text. 0 on success. */
static int espeak(const char *voice, int speed, const char *wav, const char *text) {
    char sp[16];
    snprintf(sp, sizeof sp, "%d", speed);
    char *args[] = {"espeak-ng", "-v", (char *)voice, "-s", sp, "-w", (char *)wav, "--",
                    (char *)text, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "espeak-ng", NULL, NULL, args, environ)) return -1;
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static const char *const voices[] = {"en-us", "en-us+m3", "en-us+f2", "en-us+m7", "en-us+f4"};

/* One evaluation item. */
typedef struct ev_item {
    char *raw;        /* utterance text */
    char *ref;        /* normalised reference */
    char *wav;        /* synthesised file */
    char *hyp[2];     /* transcripts: generic, domain */
    double audio_s;   /* seconds of audio */
    double proc_s[2]; /* recognition + decoding seconds per LM */
} ev_item;

/* Shared state of the worker threads. */
typedef struct ev_job {
    ev_item *items;     /* all items */
    size_t n;           /* count */
    size_t next;        /* next unclaimed item */
    int phase;          /* -1 synthesise, 0 generic LM, 1 domain LM */
    fr_asr_pool *pool;  /* decoders for phase 0/1 */
    pthread_mutex_t mu; /* guards next */
    int failed;         /* a synthesis or recognition failed */
} ev_job;

static void *ev_worker(void *arg) {
    ev_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n) return NULL;
        ev_item *it = &j->items[i];
        if (j->phase < 0) {
            if (espeak(voices[i % FR_ARRAY_LEN(voices)], 140 + (int)(i * 7 % 35), it->wav, it->raw))
                j->failed = 1;
            continue;
        }
        size_t len;
        fr_err err = {0};
        char *bytes = fr_read_file(it->wav, (size_t)64 << 20, &len, &err);
        fr_asr_result r;
        if (!bytes || fr_asr_pool_transcribe(j->pool, bytes, len, NULL, &r, &err)) {
            fprintf(stderr, "eval-asr: %s: %s\n", it->wav, err.msg);
            j->failed = 1;
            free(bytes);
            continue;
        }
        fr_buf b = {0};
        fr_asr_normalize(r.text, &b);
        it->hyp[j->phase] = fr_buf_cstr(&b);
        it->audio_s = r.audio_s;
        it->proc_s[j->phase] = r.decode_s + r.proc_s;
        fr_asr_result_free(&r);
        free(bytes);
    }
}

static void ev_run(ev_job *j, int workers) {
    pthread_t th[64];
    j->next = 0;
    for (int w = 0; w < workers; w++) pthread_create(&th[w], NULL, ev_worker, j);
    for (int w = 0; w < workers; w++) pthread_join(th[w], NULL);
}

int fr_cmd_eval_asr(int argc, char **argv) {
    const char *csv = NULL, *lm = NULL, *keep = NULL;
    int n = 150, workers = FR_MIN(fr_n_cores(), 64);
    bool verbose = false;
    fr_flags fl;
    fr_flags_init(&fl, "eval-asr", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf("usage: frugal eval-asr [--csv TRAIN.csv] [--n 150] [--workers N] [--lm PATH]\n"
                   "       [--keep-wavs DIR] [-v]\n"
                   "  synthesises held-out rows with espeak-ng and reports WER and speed with the\n"
                   "  generic and the domain LM\n");
            return 0;
        }
        if (!(fr_flag_switch(&fl, "-v", &verbose) || fr_flag_str(&fl, "--csv", &csv) ||
              fr_flag_int(&fl, "--n", 1, 1 << 20, &n) ||
              fr_flag_int(&fl, "--workers", 1, 64, &workers) || fr_flag_str(&fl, "--lm", &lm) ||
              fr_flag_str(&fl, "--keep-wavs", &keep)))
            return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    fr_err err = {0};
    rows r;
    char *csv_default = csv ? NULL : fr_data_path("data/banking77/train.csv");
    int crc = read_csv(csv ? csv : csv_default, &r, &err);
    free(csv_default);
    if (crc) return fprintf(stderr, "frugal eval-asr: %s\n", err.msg), 1;
    char tmpl[] = "/tmp/frugal-eval-asr-XXXXXX";
    const char *dir = keep;
    if (!dir) {
        if (!mkdtemp(tmpl)) return fprintf(stderr, "frugal eval-asr: mkdtemp failed\n"), 1;
        dir = tmpl;
    }
    ev_item *items = fr_xcalloc((size_t)FR_MAX(n, 1), sizeof(ev_item));
    size_t m = 0;
    for (size_t i = 0; i < r.n && m < (size_t)n; i++) {
        if (!fr_asr_is_heldout(r.v[i])) continue;
        ev_item *it = &items[m];
        it->raw = fr_xstrdup(r.v[i]);
        fr_buf b = {0};
        fr_asr_normalize(r.v[i], &b);
        it->ref = fr_buf_cstr(&b);
        char name[32];
        snprintf(name, sizeof name, "u%03zu.wav", m);
        it->wav = fr_path_join(dir, name);
        m++;
    }
    rows_free(&r);
    ev_job j = {.items = items, .n = m, .phase = -1};
    pthread_mutex_init(&j.mu, NULL);
    double t0 = fr_time_s();
    ev_run(&j, workers);
    fprintf(stderr, "eval-asr: synthesised %zu held-out utterances in %.1f s\n", m, fr_time_s() - t0);
    int rc = j.failed ? 1 : 0;
    double wall[2] = {0, 0};
    for (int ph = 0; ph < 2 && !rc; ph++) {
        fr_asr_config cfg = {0};
        cfg.lm_kind = ph ? FR_ASR_LM_DOMAIN : FR_ASR_LM_GENERIC;
        if (ph && lm) cfg.lm = lm;
        j.pool = fr_asr_pool_new(&cfg, workers);
        if (fr_asr_pool_warm(j.pool, &err)) {
            fprintf(stderr, "frugal eval-asr: %s\n", err.msg);
            rc = 1;
        } else {
            j.phase = ph;
            double t1 = fr_time_s();
            ev_run(&j, workers);
            wall[ph] = fr_time_s() - t1;
            if (j.failed) rc = 1;
        }
        fr_asr_pool_free(j.pool);
    }
    if (!rc) {
        size_t edits[2] = {0, 0}, words = 0;
        double audio = 0, proc[2] = {0, 0};
        for (size_t i = 0; i < m; i++) {
            size_t nw = 0;
            for (int ph = 0; ph < 2; ph++) {
                edits[ph] += fr_wer_edits(items[i].ref, items[i].hyp[ph], &nw);
                proc[ph] += items[i].proc_s[ph];
            }
            words += nw;
            audio += items[i].audio_s;
            if (verbose)
                printf("REF %s\nGEN %s\nDOM %s\n\n", items[i].ref, items[i].hyp[0], items[i].hyp[1]);
        }
        static const char *const nm[2] = {"generic", "domain"};
        printf("eval-asr: %zu utterances, %zu reference words, %.1f s of audio, %d workers\n", m,
               words, audio, workers);
        for (int ph = 0; ph < 2; ph++)
            printf("  %-8s LM: WER %.4f (%zu edits)  RTF per core %.3f  wall %.1f s  "
                   "%.2f s of audio per second\n",
                   nm[ph], words ? (double)edits[ph] / words : 0, edits[ph],
                   audio > 0 ? proc[ph] / audio : 0, wall[ph], wall[ph] > 0 ? audio / wall[ph] : 0);
    }
    for (size_t i = 0; i < m; i++) {
        if (!keep) unlink(items[i].wav);
        free(items[i].raw);
        free(items[i].ref);
        free(items[i].wav);
        free(items[i].hyp[0]);
        free(items[i].hyp[1]);
    }
    free(items);
    if (!keep) rmdir(tmpl);
    pthread_mutex_destroy(&j.mu);
    return rc;
}
