/* nlu_cmds.c — command-line front ends of the NLU stage.
 *
 *   frugal train-intent --data CSV --out MODEL [--val-frac F] [--seed S] [--threads N] [...]
 *       trains the intent classifier (recipe: fr_intent_train_defaults; flags below override it)
 *       and writes the model; progress per epoch on stderr.
 *   frugal train-intent --nlupp DIR --folds A-B --tune-folds C-D --out MODEL [...]
 *       trains the multi-label NLU++ intent model (recipe: fr_intent_multi_defaults) on folds A-B
 *       with per-label thresholds tuned on folds C-D.
 *   frugal eval-nlu --model MODEL [--data CSV] [--val-frac F] [--seed S] [--nlupp DIR]
 *                   [--folds A-B] [--threads N] [--repeat R]
 *       prints validation accuracy, per-query latency (p50/p99) and throughput on 1..N threads, and
 *       the per-slot precision/recall/F1 table on NLU++ folds.
 * Design: argument parsing only; the work is in src/stages/nlu. */
#include "tools/nlu_cmds.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/flags.h"
#include "base/num.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/intent_multi.h"
#include "stages/nlu/intent_train.h"
#include "stages/nlu/slots.h"

static int parse_member(const char *spec, fr_intent_member_cfg *mc) {
    char *dup = fr_xstrdup(spec), *save = NULL;
    int ok = 1;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            ok = 0;
            break;
        }
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        double x;
        if (!fr_parse_double(v, 0, 1e9, &x)) {
            ok = 0;
            break;
        }
        if (!strcmp(k, "hidden")) mc->hidden = (uint32_t)x;
        else if (!strcmp(k, "epochs")) mc->epochs = (uint32_t)x;
        else if (!strcmp(k, "batch")) mc->batch = (uint32_t)x;
        else if (!strcmp(k, "lr")) mc->lr = (float)x;
        else if (!strcmp(k, "wd")) mc->wd = (float)x;
        else if (!strcmp(k, "dropout")) mc->dropout = (float)x;
        else if (!strcmp(k, "smooth")) mc->smooth = (float)x;
        else if (!strcmp(k, "init")) mc->init = (float)x;
        else if (!strcmp(k, "weight")) mc->weight = (float)x;
        else {
            ok = 0;
            break;
        }
    }
    free(dup);
    return ok ? 0 : -1;
}

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: frugal train-intent --data CSV --out MODEL [options]\n"
            "  --data CSV         labelled examples: header with text and category/label columns\n"
            "  --nlupp DIR        multi-label instead: NLU++ folds DIR/foldK.json (labels from the\n"
            "                     ontology, --ontology FILE, default DIR/../ontology.json, the intents\n"
            "                     of --domain D, default banking, and of \"general\")\n"
            "  --folds A-B        NLU++ folds to train on (default 0-11)\n"
            "  --tune-folds C-D   NLU++ folds the per-label thresholds are tuned on (default 12-14;\n"
            "                     none: threshold 0.5)\n"
            "  --out MODEL        model file to write\n"
            "  --val-frac F       stratified validation fraction carved from the data (default 0.1;\n"
            "                     0 trains on every row)\n"
            "  --seed S           split/initialisation/order seed (default 1)\n"
            "  --oos DIR          add every line of DIR/*.txt as an example of the label\n"
            "                     \"out_of_scope\" (negative examples; repeatable)\n"
            "  --calib-frac F     calibration fraction carved after the validation rows (default 0):\n"
            "                     fits the temperature and the out-of-scope thresholds\n"
            "  --oos-target R     share of in-scope calibration rows the out-of-scope rule may flag\n"
            "                     (default 0.01)\n"
            "  --refit            after calibrating, train again on training + calibration rows and\n"
            "                     keep the calibration (validation rows stay held out)\n"
            "  --threads N        train ensemble members in parallel (same result for any N)\n"
            "  --quiet            no progress lines\n"
            "recipe overrides (defaults reproduce the shipped model):\n"
            "  --bits N           hash space 2^N buckets\n"
            "  --word N           word n-grams up to N (0 = none)\n"
            "  --char MIN-MAX     char n-gram lengths (0 = none)\n"
            "  --flags LIST       comma list of wb (in-word char n-grams), digits, bounds, or none\n"
            "  --group-weights W,C  scale of the word and char groups\n"
            "  --min-df N         drop buckets seen in fewer training rows\n"
            "  --member SPEC      replace the ensemble (repeatable): hidden=H,epochs=E,batch=B,lr=X,\n"
            "                     wd=X,dropout=X,smooth=X,init=X,weight=X\n");
}

/* "A-B" (or "A") → a mask of folds; 0 on a bad spec. */
static uint32_t fold_mask(const char *v) {
    int a, b;
    char tail;
    int n = sscanf(v, "%d-%d%c", &a, &b, &tail);
    if (n == 1) b = a;
    else if (n != 2) return 0;
    if (a < 0 || b < a || b >= FR_NLUPP_MAX_FOLDS) return 0;
    uint32_t m = 0;
    for (int f = a; f <= b; f++) m |= 1u << f;
    return m;
}

/* DIR/../ontology.json into buf. */
static void default_ontology(const char *dir, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/../ontology.json", dir);
}

int fr_cmd_train_intent(int argc, char **argv) {
    fr_intent_train_cfg cfg;
    bool multi = false;
    for (int i = 1; i < argc; i++) multi |= !strcmp(argv[i], "--nlupp");
    if (multi) fr_intent_multi_defaults(&cfg);
    else fr_intent_train_defaults(&cfg);
    const char *nlupp = NULL, *ontology = NULL, *domain = "banking";
    uint32_t train_folds = fold_mask("0-11"), tune_folds = fold_mask("12-14");
    const char *data = NULL, *out = NULL, *oos_dirs[8];
    int n_spec = 0, n_oos = 0;
    bool quiet = false, refit = false;
    int bits = (int)cfg.feat.bucket_bits, word = (int)cfg.feat.word_max, min_df = (int)cfg.min_df;
    const char *v = NULL;
    fr_flags fl;
    fr_flags_init(&fl, "train-intent", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            train_usage(stdout);
            return 0;
        }
        if (fr_flag_switch(&fl, "--quiet", &quiet) || fr_flag_switch(&fl, "--refit", &refit) ||
            fr_flag_str(&fl, "--data", &data) || fr_flag_str(&fl, "--out", &out) ||
            fr_flag_str(&fl, "--nlupp", &nlupp) || fr_flag_str(&fl, "--ontology", &ontology) ||
            fr_flag_str(&fl, "--domain", &domain) ||
            fr_flag_u64(&fl, "--seed", &cfg.seed) ||
            fr_flag_int(&fl, "--threads", 1, 256, &cfg.threads) ||
            fr_flag_int(&fl, "--bits", 10, 22, &bits) || fr_flag_int(&fl, "--word", 0, 3, &word) ||
            fr_flag_int(&fl, "--min-df", 0, 1 << 30, &min_df))
            continue;
        if (fr_flag_double(&fl, "--val-frac", 0, 1, &cfg.val_frac)) {
            if (!fl.rc && cfg.val_frac >= 1) return fr_flags_fail(&fl, "--val-frac must be in [0, 1)");
        } else if (fr_flag_double(&fl, "--calib-frac", 0, 1, &cfg.calib_frac)) {
            if (!fl.rc && cfg.calib_frac >= 1)
                return fr_flags_fail(&fl, "--calib-frac must be in [0, 1)");
        } else if (fr_flag_double(&fl, "--oos-target", 0, 1, &cfg.oos_target)) {
            if (!fl.rc && !(cfg.oos_target > 0 && cfg.oos_target < 1))
                return fr_flags_fail(&fl, "--oos-target must be in (0, 1)");
        } else if (fr_flag_str(&fl, "--folds", &v)) {
            if (v && !(train_folds = fold_mask(v))) return fr_flags_fail(&fl, "--folds wants A-B");
        } else if (fr_flag_str(&fl, "--tune-folds", &v)) {
            if (v && strcmp(v, "none") && !(tune_folds = fold_mask(v)))
                return fr_flags_fail(&fl, "--tune-folds wants C-D or none");
            if (v && !strcmp(v, "none")) tune_folds = 0;
        } else if (fr_flag_str(&fl, "--oos", &v)) {
            if (!v) continue;
            if (n_oos == (int)FR_ARRAY_LEN(oos_dirs))
                return fr_flags_fail(&fl, "at most %zu --oos folders", FR_ARRAY_LEN(oos_dirs));
            oos_dirs[n_oos++] = v;
        } else if (fr_flag_str(&fl, "--char", &v)) {
            unsigned lo = 0, hi = 0;
            if (!v) continue;
            if (!strcmp(v, "0")) cfg.feat.char_min = cfg.feat.char_max = 0;
            else if (sscanf(v, "%u-%u", &lo, &hi) == 2) {
                cfg.feat.char_min = lo;
                cfg.feat.char_max = hi;
            } else {
                return fr_flags_fail(&fl, "--char wants MIN-MAX or 0");
            }
        } else if (fr_flag_str(&fl, "--flags", &v)) {
            if (!v) continue;
            cfg.feat.flags = 0;
            if (strstr(v, "wb")) cfg.feat.flags |= FR_FEAT_CHAR_WB;
            if (strstr(v, "digits")) cfg.feat.flags |= FR_FEAT_DIGITS;
            if (strstr(v, "bounds")) cfg.feat.flags |= FR_FEAT_WORD_BOUNDS;
        } else if (fr_flag_str(&fl, "--group-weights", &v)) {
            if (v && sscanf(v, "%f,%f", &cfg.group_weight[0], &cfg.group_weight[1]) != 2)
                return fr_flags_fail(&fl, "--group-weights wants W,C");
        } else if (fr_flag_str(&fl, "--member", &v)) {
            if (!v) continue;
            if (n_spec == FR_INTENT_TRAIN_MAX_MEMBERS)
                return fr_flags_fail(&fl, "at most %d members", FR_INTENT_TRAIN_MAX_MEMBERS);
            fr_intent_member_cfg mc = {.epochs = 10, .batch = 32, .lr = 0.003f, .init = 0.1f, .weight = 1};
            if (parse_member(v, &mc)) return fr_flags_fail(&fl, "bad --member spec '%s'", v);
            cfg.member[n_spec++] = mc;
            cfg.n_members = n_spec;
        } else {
            fr_flags_unknown(&fl);
            train_usage(stderr);
            return 2;
        }
    }
    if (fl.rc) return fl.rc;
    if (quiet) cfg.verbose = 0;
    if (refit) cfg.refit = 1;
    cfg.feat.bucket_bits = (uint32_t)bits;
    cfg.feat.word_max = (uint32_t)word;
    cfg.min_df = (uint32_t)min_df;
    if ((!data && !nlupp) || (data && nlupp) || !out) {
        train_usage(stderr);
        return 2;
    }
    fr_err err = {0};
    fr_intent_data d;
    uint8_t *marks = NULL;
    if (nlupp) {
        char onto[4096];
        if (!ontology) default_ontology(nlupp, onto, sizeof onto);
        if (train_folds & tune_folds) {
            fprintf(stderr, "train-intent: --folds and --tune-folds overlap\n");
            return 2;
        }
        if (fr_intent_data_load_nlupp(&d, nlupp, ontology ? ontology : onto, domain,
                                      train_folds | tune_folds, &err)) {
            fprintf(stderr, "train-intent: %s\n", err.msg);
            return 1;
        }
        marks = fr_xmalloc(d.n + 1);
        for (size_t i = 0; i < d.n; i++) marks[i] = (tune_folds >> d.group[i] & 1u) ? 2 : 0;
        cfg.marks = marks;
    } else if (fr_intent_data_load_csv(&d, data, &err)) {
        fprintf(stderr, "train-intent: %s\n", err.msg);
        return 1;
    }
    for (int k = 0; k < n_oos; k++)
        if (fr_intent_data_add_lines(&d, oos_dirs[k], FR_INTENT_OOS_LABEL, &err)) {
            fprintf(stderr, "train-intent: %s\n", err.msg);
            fr_intent_data_free(&d);
            return 1;
        }
    fr_intent_train_report rep;
    fr_intent_model *m = fr_intent_train(&d, &cfg, &rep, &err);
    fr_intent_data_free(&d);
    free(marks);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int rc = fr_intent_save(m, out, &err);
    if (rc) fprintf(stderr, "train-intent: %s\n", err.msg);
    else {
        char desc[256];
        fr_intent_describe(m, desc, sizeof desc);
        size_t n;
        free(fr_intent_serialize(m, &n));
        printf("wrote %s (%zu bytes; %s); %zu training rows", out, n, desc, rep.n_train);
        if (rep.n_calib && multi) printf(", %zu threshold-tuning rows", rep.n_calib);
        else if (rep.n_calib) printf(", %zu calibration rows (temperature %.3f)", rep.n_calib, rep.calib.temperature);
        if (rep.n_val) printf(", validation accuracy %.2f%% on %zu rows", 100.0 * rep.val_acc, rep.n_val);
        printf("\n");
    }
    fr_intent_free(m);
    return rc ? 1 : 0;
}


/* ---------- eval-nlu ---------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Work of one throughput thread: classify (and optionally extract slots from) every text. */
typedef struct {
    const fr_intent_model *m; /* model (shared, read-only) */
    char **texts;             /* texts */
    size_t n;                 /* text count */
    int repeat;               /* passes */
    int slots;                /* also extract slots */
    size_t done;              /* queries done (output) */
} tp_job;

static void *tp_worker(void *arg) {
    tp_job *j = arg;
    fr_intent_pred p[5];
    fr_slot sl[32];
    fr_slot_ref ref = {2022, 3, 15, 9, 0, 1};
    for (int r = 0; r < j->repeat; r++)
        for (size_t i = 0; i < j->n; i++) {
            fr_intent_verdict v;
            if (j->m) fr_intent_assess(j->m, j->texts[i], strlen(j->texts[i]), p, 5, &v, NULL);
            if (j->slots) fr_slots_extract(j->texts[i], strlen(j->texts[i]), &ref, sl, 32, NULL);
            j->done++;
        }
    return NULL;
}

/* Queries per second over `threads` threads. */
static double throughput(const fr_intent_model *m, char **texts, size_t n, int threads, int repeat, int slots) {
    tp_job jobs[64];
    pthread_t th[64];
    threads = FR_MAX(1, FR_MIN(threads, 64));
    double t0 = fr_time_s();
    for (int t = 0; t < threads; t++) {
        jobs[t] = (tp_job){m, texts, n, repeat, slots, 0};
        pthread_create(&th[t], NULL, tp_worker, &jobs[t]);
    }
    size_t total = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        total += jobs[t].done;
    }
    return (double)total / (fr_time_s() - t0);
}

/* Per-query latency percentiles (µs) of one call kind over all texts, `repeat` passes. */
static void latency(const fr_intent_model *m, char **texts, size_t n, int repeat, int what, double *p50,
                    double *p99) {
    size_t tot = n * (size_t)repeat;
    double *t = fr_xmalloc((tot + 1) * sizeof *t);
    fr_intent_pred p[5];
    fr_slot sl[32];
    fr_slot_ref ref = {2022, 3, 15, 9, 0, 1};
    size_t k = 0;
    for (int r = 0; r < repeat; r++)
        for (size_t i = 0; i < n; i++) {
            double a = fr_time_s();
            fr_intent_verdict v;
            if (what & 1) fr_intent_assess(m, texts[i], strlen(texts[i]), p, 5, &v, NULL);
            if (what & 2) fr_slots_extract(texts[i], strlen(texts[i]), &ref, sl, 32, NULL);
            t[k++] = (fr_time_s() - a) * 1e6;
        }
    qsort(t, k, sizeof *t, cmp_double);
    *p50 = k ? t[k / 2] : 0;
    *p99 = k ? t[FR_MIN(k - 1, (size_t)((double)k * 0.99))] : 0;
    free(t);
}

/* NLU++ slot names this extractor answers for, and its own name for each. */
static const struct { const char *nlupp, *ours; } slot_map[] = {
    {"amount_of_money", "amount"}, {"date", "date"},           {"date_from", "date_from"},
    {"date_to", "date_to"},         {"date_period", "date_period"}, {"time", "time"},
    {"time_from", "time_from"},     {"time_to", "time_to"},     {"company_name", "company_name"},
    {"person_name", "person_name"}, {"shopping_category", "shopping_category"},
    {"time_period", "time_period"}, {"number", "number"}};
#define N_MAP ((int)FR_ARRAY_LEN(slot_map))
/* rows: the mapped slots, then the role-agnostic families date* and time* */
#define N_ROWS (N_MAP + 2)

typedef struct {
    long gold, pred, tp, val_ok, val_n; /* counts; value accuracy over matched spans with a gold value */
} prf;

static int row_of_ours(const char *name) {
    for (int i = 0; i < N_MAP; i++)
        if (!strcmp(slot_map[i].ours, name)) return i;
    return -1;
}
static int row_of_gold(const char *name) {
    for (int i = 0; i < N_MAP; i++)
        if (!strcmp(slot_map[i].nlupp, name)) return i;
    return -1;
}
static int family_of(int row) {
    if (row >= 1 && row <= 3) return N_MAP;     /* date* */
    if (row >= 5 && row <= 7) return N_MAP + 1; /* time* */
    return -1;
}

/* Byte offset of code point index cp in s. */
static size_t cp_to_byte(const char *s, long cp) {
    size_t b = 0;
    for (long i = 0; i < cp && s[b]; i++) {
        b++;
        while (s[b] && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
    }
    return b;
}

/* Year, month and day of an NLU++ date object; false unless all three are numbers. */
static bool ymd_of(const cJSON *o, int *y, int *m, int *d) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "year"), *b = cJSON_GetObjectItemCaseSensitive(o, "month"),
                *c = cJSON_GetObjectItemCaseSensitive(o, "day");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !cJSON_IsNumber(c)) return false;
    *y = a->valueint, *m = b->valueint, *d = c->valueint;
    return true;
}

/* Normalised gold value in our value syntax; "" when NLU++ gives none we can compare. */
static void gold_value(const char *name, const cJSON *slot, char *out, size_t cap) {
    out[0] = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(slot, "value");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(slot, "values");
    if (!strncmp(name, "date_period", 11)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(vs, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(vs, "from"), *t = cJSON_GetObjectItemCaseSensitive(vs, "to");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "absolute")) return;
        int fy, fmo, fd, ty_, tmo, td;
        if (!ymd_of(f, &fy, &fmo, &fd) || !ymd_of(t, &ty_, &tmo, &td)) return;
        snprintf(out, cap, "%04d-%02d-%02d/%04d-%02d-%02d", fy, fmo, fd, ty_, tmo, td);
    } else if (!strncmp(name, "date", 4)) {
        int y, m, d;
        if (ymd_of(v, &y, &m, &d)) snprintf(out, cap, "%04d-%02d-%02d", y, m, d);
    } else if (!strcmp(name, "time_period")) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(vs, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(vs, "from"), *t = cJSON_GetObjectItemCaseSensitive(vs, "to");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "absolute")) return;
        const cJSON *fh = cJSON_GetObjectItemCaseSensitive(f, "hour"), *fm = cJSON_GetObjectItemCaseSensitive(f, "minute");
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(t, "hour"), *tm = cJSON_GetObjectItemCaseSensitive(t, "minute");
        if (cJSON_IsNumber(fh) && cJSON_IsNumber(fm) && cJSON_IsNumber(th) && cJSON_IsNumber(tm))
            snprintf(out, cap, "%02d:%02d/%02d:%02d", fh->valueint, fm->valueint, th->valueint, tm->valueint);
    } else if (!strcmp(name, "number")) {
        if (cJSON_IsNumber(v)) snprintf(out, cap, "%g", v->valuedouble);
    } else if (!strncmp(name, "time", 4)) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(v, "hour"), *m = cJSON_GetObjectItemCaseSensitive(v, "minute");
        if (cJSON_IsNumber(h) && cJSON_IsNumber(m)) snprintf(out, cap, "%02d:%02d", h->valueint, m->valueint);
    } else if (!strcmp(name, "amount_of_money")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(v, "amount"), *c = cJSON_GetObjectItemCaseSensitive(v, "currency");
        if (!cJSON_IsNumber(a)) return;
        if (cJSON_IsString(c) && strlen(c->valuestring) == 3) snprintf(out, cap, "%.2f %s", a->valuedouble, c->valuestring);
        else snprintf(out, cap, "%.2f", a->valuedouble);
    } else if (cJSON_IsString(v)) {
        snprintf(out, cap, "%s", v->valuestring);
    }
}

/* Compare our value with gold's; an amount whose gold currency is "ambiguous" compares the number. */
static bool value_match(const char *ours, const char *gold) {
    if (!strcmp(ours, gold)) return true;
    size_t gl = strlen(gold);
    if (gl && !strchr(gold, ' ') && !strncmp(ours, gold, gl) && (ours[gl] == ' ' || !ours[gl])) return true;
    return false;
}

static int eval_slots(const char *dir, int f0, int f1, const fr_slot_ref *ref, int show_errors) {
    prf rows[N_ROWS] = {0};
    long n_ex = 0, other_gold = 0;
    double t_total = 0;
    for (int f = f0; f <= f1; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fold%d.json", dir, f);
        fr_err err = {0};
        size_t len;
        char *buf = fr_read_file(path, (size_t)64 << 20, &len, &err);
        if (!buf) {
            fprintf(stderr, "eval-nlu: %s\n", err.msg);
            return 1;
        }
        cJSON *root = cJSON_ParseWithLength(buf, len);
        free(buf);
        if (!cJSON_IsArray(root)) {
            fprintf(stderr, "eval-nlu: %s: not a JSON array\n", path);
            cJSON_Delete(root);
            return 1;
        }
        const cJSON *ex;
        cJSON_ArrayForEach(ex, root) {
            const cJSON *jt = cJSON_GetObjectItemCaseSensitive(ex, "text");
            if (!cJSON_IsString(jt)) continue;
            const char *text = jt->valuestring;
            n_ex++;
            fr_slot sl[64];
            double a = fr_time_s();
            int ns = fr_slots_extract(text, strlen(text), ref, sl, 64, NULL);
            t_total += fr_time_s() - a;
            if (ns < 0) ns = 0;
            bool used[64] = {0};
            const cJSON *slots = cJSON_GetObjectItemCaseSensitive(ex, "slots"), *g;
            cJSON_ArrayForEach(g, slots) {
                int r = row_of_gold(g->string);
                if (r < 0) {
                    other_gold++; /* a slot type without a row still counts in the total */
                    continue;
                }
                const cJSON *span = cJSON_GetObjectItemCaseSensitive(g, "span");
                if (cJSON_GetArraySize(span) != 2) continue;
                size_t gs = cp_to_byte(text, cJSON_GetArrayItem(span, 0)->valueint);
                size_t ge = cp_to_byte(text, cJSON_GetArrayItem(span, 1)->valueint);
                char gv[128];
                gold_value(g->string, g, gv, sizeof gv);
                int fam = family_of(r);
                rows[r].gold++;
                if (fam >= 0) rows[fam].gold++;
                int hit = -1, fam_hit = -1;
                for (int k = 0; k < ns; k++) {
                    if (sl[k].start != gs || sl[k].end != ge) continue;
                    int rk = row_of_ours(sl[k].name);
                    if (rk == r && !used[k]) hit = k;
                    if (fam >= 0 && rk >= 0 && family_of(rk) == fam) fam_hit = k;
                }
                if (hit >= 0) {
                    used[hit] = true;
                    rows[r].tp++;
                    if (gv[0]) {
                        rows[r].val_n++;
                        if (value_match(sl[hit].value, gv)) rows[r].val_ok++;
                        else if (show_errors)
                            printf("VALUE %-14s %-26s ours %-24s gold %-24s | %s\n", g->string,
                                   sl[hit].text, sl[hit].value, gv, text);
                    }
                } else if (show_errors) {
                    printf("MISS  %-14s %-26.*s gold %-24s | %s\n", g->string, (int)(ge - gs), text + gs, gv, text);
                }
                if (fam >= 0 && fam_hit >= 0) {
                    rows[fam].tp++;
                    if (gv[0]) {
                        rows[fam].val_n++;
                        rows[fam].val_ok += value_match(sl[fam_hit].value, gv);
                    }
                }
            }
            for (int k = 0; k < ns; k++) {
                int r = row_of_ours(sl[k].name);
                if (r < 0) continue;
                rows[r].pred++;
                if (family_of(r) >= 0) rows[family_of(r)].pred++;
                if (!used[k] && show_errors)
                    printf("FALSE %-14s %-26s ours %-24s | %s\n", sl[k].name, sl[k].text, sl[k].value, text);
            }
        }
        cJSON_Delete(root);
    }
    printf("\nSlots: NLU++ banking folds %d-%d (%ld utterances), reference date %04d-%02d-%02d %02d:%02d, "
           "partial dates resolved %s;\n"
           "exact byte-span match; value accuracy over matched spans whose gold value is comparable.\n\n",
           f0, f1, n_ex, ref->year, ref->month, ref->day, ref->hour, ref->minute,
           ref->forward_only ? "forward (NLU++ convention)" : "by tense");
    printf("| NLU++ slot | ours | gold | predicted | precision | recall | F1 | value acc |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int r = 0; r < N_ROWS; r++) {
        const prf *x = &rows[r];
        double P = x->pred ? (double)x->tp / (double)x->pred : 0, R = x->gold ? (double)x->tp / (double)x->gold : 0;
        double F = P + R > 0 ? 2 * P * R / (P + R) : 0;
        const char *gn = r < N_MAP ? slot_map[r].nlupp : r == N_MAP ? "date* (any role)" : "time* (any role)";
        const char *on = r < N_MAP ? slot_map[r].ours : r == N_MAP ? "date*" : "time*";
        printf("| %s | %s | %ld | %ld | %.3f | %.3f | %.3f | ", gn, on, x->gold, x->pred, P, R, F);
        if (x->val_n) printf("%.3f (%ld/%ld) |\n", (double)x->val_ok / (double)x->val_n, x->val_ok, x->val_n);
        else printf("- |\n");
    }
    long g = other_gold, p = 0, t = 0;
    for (int r = 0; r < N_MAP; r++) {
        g += rows[r].gold;
        p += rows[r].pred;
        t += rows[r].tp;
    }
    double P = p ? (double)t / (double)p : 0, R = g ? (double)t / (double)g : 0;
    printf("| **all gold slots (micro)** | | %ld | %ld | %.3f | %.3f | %.3f | |\n", g, p, P, R,
           P + R > 0 ? 2 * P * R / (P + R) : 0);
    printf("\nslot extraction: %.1f µs per utterance on average\n", n_ex ? t_total * 1e6 / (double)n_ex : 0);
    return 0;
}

/* Share of texts flagged out of scope. */
static double flagged(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                      size_t *n_used) {
    size_t n = 0, f = 0;
    int oos = fr_intent_get_calib(m)->oos_label;
    for (size_t i = 0; i < d->n; i++) {
        if (mask && mask[i] != 1) continue;
        int y = fr_intent_label_index(m, d->names[d->labels[i]]);
        if (y < 0 || y == oos) continue;
        fr_intent_pred p[1];
        fr_intent_verdict v;
        fr_intent_assess(m, d->texts[i], strlen(d->texts[i]), p, 1, &v, NULL);
        f += !v.in_scope;
        n++;
    }
    *n_used = n;
    return n ? (double)f / (double)n : 0;
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The out-of-scope report: calibration error, in-scope rows flagged, negatives flagged. */
static int eval_oos(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                    const char *const *dirs, int n_dirs) {
    const fr_intent_calib *c = fr_intent_get_calib(m);
    double acc_raw, acc_cal;
    double e_raw = fr_intent_ece(m, d, mask, mask ? 1 : 0, 1.0f, &acc_raw);
    double e_cal = fr_intent_ece(m, d, mask, mask ? 1 : 0, c->temperature, &acc_cal);
    printf("\nCalibration (top-1 confidence, 15 bins, in-scope %s rows): ECE %.4f at temperature 1, "
           "%.4f at the model's %.3f\n", mask ? "validation" : "", e_raw, e_cal, c->temperature);
    printf("Out-of-scope rule: P(%s) >= %.3f, best intent < %.3f, or word coverage < %.3f (label %s)\n",
           FR_INTENT_OOS_LABEL, c->oos_min_prob, c->min_conf, c->min_coverage,
           c->oos_label >= 0 ? "present" : "absent");
    size_t n_in;
    double fin = flagged(m, d, mask, &n_in);
    printf("\n| set | category | examples | flagged out of scope |\n|---|---|---:|---:|\n");
    printf("| in scope | %s rows of the data | %zu | %.2f %% |\n", mask ? "validation" : "all", n_in,
           100 * fin);
    for (int k = 0; k < n_dirs; k++) {
        DIR *dp = opendir(dirs[k]);
        if (!dp) {
            fprintf(stderr, "eval-nlu: %s: cannot open the folder\n", dirs[k]);
            return 1;
        }
        char **files = NULL;
        size_t nf = 0;
        struct dirent *de;
        while ((de = readdir(dp))) {
            size_t l = strlen(de->d_name);
            if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
            files = fr_xrealloc(files, (nf + 1) * sizeof *files);
            files[nf++] = fr_xstrdup(de->d_name);
        }
        closedir(dp);
        if (!nf) {
            fprintf(stderr, "eval-nlu: %s: no .txt files\n", dirs[k]);
            free(files);
            return 1;
        }
        qsort(files, nf, sizeof *files, cmp_cstr);
        size_t tot = 0, tot_f = 0;
        for (size_t f = 0; f < nf; f++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs[k], files[f]);
            fr_intent_data nd = {0};
            fr_err err = {0};
            size_t n = 0, fl = 0;
            if (!fr_intent_data_add_lines(&nd, path, FR_INTENT_OOS_LABEL, &err))
                for (size_t i = 0; i < nd.n; i++) {
                    fr_intent_pred p[1];
                    fr_intent_verdict v;
                    fr_intent_assess(m, nd.texts[i], strlen(nd.texts[i]), p, 1, &v, NULL);
                    fl += !v.in_scope;
                    n++;
                }
            fr_intent_data_free(&nd);
            printf("| %s | %.*s | %zu | %.1f %% |\n", dirs[k], (int)(strlen(files[f]) - 4), files[f], n,
                   n ? 100.0 * (double)fl / (double)n : 0);
            tot += n;
            tot_f += fl;
            free(files[f]);
        }
        free(files);
        printf("| %s | **all** | %zu | **%.1f %%** |\n", dirs[k], tot,
               tot ? 100.0 * (double)tot_f / (double)tot : 0);
    }
    return 0;
}

/* Per-label table and micro/macro F1 of counts. */
static void print_multi_table(const fr_intent_data *d, const long *tp, const long *pred, const long *gold) {
    printf("| NLU++ intent | gold | predicted | precision | recall | F1 |\n|---|---:|---:|---:|---:|---:|\n");
    for (int l = 0; l < d->n_labels; l++) {
        double P = pred[l] ? (double)tp[l] / (double)pred[l] : 0, R = gold[l] ? (double)tp[l] / (double)gold[l] : 0;
        printf("| %s | %ld | %ld | %.3f | %.3f | %.3f |\n", d->names[l], gold[l], pred[l], P, R,
               P + R > 0 ? 2 * P * R / (P + R) : 0);
    }
}

/* Multi-label intents: cross-validation of the recipe over the folds, or one model's scores. */
static int eval_multi(const char *dir, const char *ontology, const char *model, uint32_t folds,
                      int cv_parts, bool table, const fr_intent_train_cfg *cfg) {
    char onto[4096];
    if (!ontology) default_ontology(dir, onto, sizeof onto);
    fr_err err = {0};
    fr_intent_data d;
    if (fr_intent_data_load_nlupp(&d, dir, ontology ? ontology : onto, "banking", folds, &err)) {
        fprintf(stderr, "eval-nlu: %s\n", err.msg);
        return 1;
    }
    int nl = d.n_labels, rc = 0;
    if (cv_parts) {
        fr_intent_cv_report r;
        if (fr_intent_multi_cv(&d, cfg, cv_parts, &r, &err)) {
            fprintf(stderr, "eval-nlu: %s\n", err.msg);
            fr_intent_data_free(&d);
            return 1;
        }
        printf("\nMulti-label intents: NLU++ banking, %d labels, %zu utterances, %d-part cross-validation "
               "over the folds (each part predicted by a model trained on the others but one, whose "
               "thresholds were tuned on that one), %.1f s\n\n", nl, r.n_rows, cv_parts, r.seconds);
        printf("| decision rule | micro-F1 | macro-F1 |\n|---|---:|---:|\n");
        static const char *names[3] = {"threshold 0.5", "one tuned threshold", "per-label tuned thresholds"};
        for (int k = 0; k < 3; k++) printf("| %s | %.4f | %.4f |\n", names[k], r.micro[k], r.macro[k]);
        printf("\nper part (per-label thresholds), micro-F1:");
        for (int p = 0; p < r.n_parts; p++) printf(" %.4f", r.part_micro[p]);
        printf("\n");
        if (table) {
            printf("\n");
            print_multi_table(&d, r.tp[2], r.pred[2], r.gold);
        }
        fr_intent_cv_report_free(&r);
    }
    if (model) {
        fr_intent_model *m = fr_intent_load(model, &err);
        if (!m || !fr_intent_is_multilabel(m)) {
            fprintf(stderr, "eval-nlu: %s\n", m ? "the model is not multi-label" : err.msg);
            fr_intent_free(m);
            fr_intent_data_free(&d);
            return 1;
        }
        long *c = fr_xcalloc(3 * (size_t)nl, sizeof *c);
        fr_intent_multi_count(m, &d, NULL, 0, NULL, c, c + nl, c + 2 * nl);
        double mi, ma;
        fr_intent_f1_of(c, c + nl, c + 2 * nl, nl, &mi, &ma);
        printf("\nMulti-label intents of %s on %zu NLU++ utterances: micro-F1 %.4f, macro-F1 %.4f\n", model,
               d.n, mi, ma);
        if (table) print_multi_table(&d, c, c + nl, c + 2 * nl);
        free(c);
        /* per-utterance CPU latency of the multi-label decision and the slots, one thread */
        const int repeat = 5;
        size_t tot = d.n * repeat;
        double *t[3];
        for (int w = 0; w < 3; w++) t[w] = fr_xmalloc((tot + 1) * sizeof *t[w]);
        fr_slot_ref ref = {2022, 3, 15, 9, 0, 0};
        size_t k = 0;
        for (int r = 0; r < repeat; r++)
            for (size_t i = 0; i < d.n; i++, k++) {
                fr_intent_pred p[16];
                fr_slot sl[32];
                size_t len = strlen(d.texts[i]);
                double a = fr_time_s();
                fr_intent_select(m, d.texts[i], len, p, 16, NULL);
                double b = fr_time_s();
                fr_slots_extract(d.texts[i], len, &ref, sl, 32, NULL);
                double e = fr_time_s();
                t[0][k] = (b - a) * 1e6;
                t[1][k] = (e - b) * 1e6;
                t[2][k] = (e - a) * 1e6;
            }
        static const char *what[3] = {"multi-label intents (fr_intent_select)", "slots (fr_slots_extract)",
                                      "intents + slots"};
        printf("\n| per utterance (%zu texts x %d, one thread) | p50 µs | p99 µs |\n|---|---:|---:|\n", d.n, repeat);
        for (int w = 0; w < 3; w++) {
            qsort(t[w], k, sizeof *t[w], cmp_double);
            printf("| %s | %.1f | %.1f |\n", what[w], t[w][k / 2], t[w][FR_MIN(k - 1, (size_t)((double)k * 0.99))]);
            free(t[w]);
        }
        fr_intent_free(m);
    }
    fr_intent_data_free(&d);
    return rc;
}

static void eval_usage(FILE *f) {
    fprintf(f,
            "usage: frugal eval-nlu [--model MODEL --data CSV] [--nlupp DIR] [options]\n"
            "  --model MODEL      intent model to evaluate\n"
            "  --data CSV         labelled CSV; the validation split is carved as train-intent does\n"
            "  --val-frac F       validation fraction (default 0.1; must match training)\n"
            "  --seed S           split seed (default 1; must match training)\n"
            "  --all              evaluate on every row instead of the validation split\n"
            "  --threads N        throughput measured on 1..N threads (default 2)\n"
            "  --repeat R         passes over the texts for latency/throughput (default 5)\n"
            "  --nlupp DIR        NLU++ folder with foldK.json files: per-slot P/R/F1\n"
            "  --folds A-B        folds to score (default 10-14)\n"
            "  --ref YYYY-MM-DDTHH:MM  reference moment for relative dates (default 2022-03-15T09:00,\n"
            "                     the NLU++ convention)\n"
            "  --oos-eval DIR     out-of-scope evaluation: DIR/*.txt hold negative examples (one per\n"
            "                     line, one category per file); prints the share flagged per file,\n"
            "                     the share of in-scope validation rows flagged, and the expected\n"
            "                     calibration error before / after the temperature (repeatable)\n"
            "  --errors           list slot misses, false alarms and wrong values\n"
            "  --tense-aware      resolve partial dates by tense as serving does (default: always\n"
            "                     forward, the convention of NLU++'s annotations)\n"
            "  --intent-cv N      multi-label NLU++ intents: N-part cross-validation of the recipe\n"
            "                     over --intent-folds (default 0-14); micro/macro F1 per decision rule\n"
            "  --intent-folds A-B folds for --intent-cv, or to score a multi-label --model on\n"
            "  --ontology FILE    NLU++ ontology (default DIR/../ontology.json)\n"
            "  --per-label        per-intent precision/recall/F1 table\n"
            "  --member SPEC, --min-df N, --bits N  recipe overrides for --intent-cv (as train-intent)\n");
}

int fr_cmd_eval_nlu(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *nlupp = NULL, *oos_dirs[8], *ontology = NULL;
    int intent_cv = 0;
    uint32_t intent_folds = 0;
    bool per_label = false;
    fr_intent_train_cfg mcfg;
    fr_intent_multi_defaults(&mcfg);
    int n_spec = 0, min_df = (int)mcfg.min_df, bits = (int)mcfg.feat.bucket_bits;
    int n_oos = 0;
    double frac = 0.1;
    uint64_t seed = 1;
    int threads = 2, repeat = 5, f0 = 10, f1 = 14;
    bool errors = false, all = false, tense = false;
    fr_slot_ref ref = {2022, 3, 15, 9, 0, 1};
    const char *v = NULL;
    fr_flags fl;
    fr_flags_init(&fl, "eval-nlu", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            eval_usage(stdout);
            return 0;
        }
        if (fr_flag_switch(&fl, "--errors", &errors) || fr_flag_switch(&fl, "--all", &all) ||
            fr_flag_switch(&fl, "--per-label", &per_label) ||
            fr_flag_switch(&fl, "--tense-aware", &tense) ||
            fr_flag_str(&fl, "--ontology", &ontology) ||
            fr_flag_int(&fl, "--intent-cv", 3, FR_NLUPP_MAX_FOLDS, &intent_cv) ||
            fr_flag_int(&fl, "--min-df", 0, 1 << 30, &min_df) ||
            fr_flag_int(&fl, "--bits", 10, 22, &bits) ||
            fr_flag_str(&fl, "--model", &model) || fr_flag_str(&fl, "--data", &data) ||
            fr_flag_str(&fl, "--nlupp", &nlupp) ||
            fr_flag_double(&fl, "--val-frac", 0, 1, &frac) || fr_flag_u64(&fl, "--seed", &seed) ||
            fr_flag_int(&fl, "--threads", 1, 256, &threads) ||
            fr_flag_int(&fl, "--repeat", 1, 1 << 20, &repeat))
            continue;
        if (fr_flag_str(&fl, "--oos-eval", &v)) {
            if (!v) continue;
            if (n_oos == (int)FR_ARRAY_LEN(oos_dirs))
                return fr_flags_fail(&fl, "at most %zu --oos-eval folders", FR_ARRAY_LEN(oos_dirs));
            oos_dirs[n_oos++] = v;
        } else if (fr_flag_str(&fl, "--folds", &v)) {
            if (v && (sscanf(v, "%d-%d", &f0, &f1) != 2 || f0 < 0 || f1 < f0))
                return fr_flags_fail(&fl, "--folds wants A-B");
        } else if (fr_flag_str(&fl, "--member", &v)) {
            if (!v) continue;
            if (n_spec == FR_INTENT_TRAIN_MAX_MEMBERS)
                return fr_flags_fail(&fl, "at most %d members", FR_INTENT_TRAIN_MAX_MEMBERS);
            fr_intent_member_cfg mc = {.epochs = 10, .batch = 32, .lr = 0.003f, .init = 0.1f, .weight = 1};
            if (parse_member(v, &mc)) return fr_flags_fail(&fl, "bad --member spec '%s'", v);
            mcfg.member[n_spec++] = mc;
            mcfg.n_members = n_spec;
        } else if (fr_flag_str(&fl, "--intent-folds", &v)) {
            if (v && !(intent_folds = fold_mask(v))) return fr_flags_fail(&fl, "--intent-folds wants A-B");
        } else if (fr_flag_str(&fl, "--ref", &v)) {
            if (v && sscanf(v, "%d-%d-%dT%d:%d", &ref.year, &ref.month, &ref.day, &ref.hour,
                            &ref.minute) < 3)
                return fr_flags_fail(&fl, "--ref wants YYYY-MM-DDTHH:MM");
        } else {
            fr_flags_unknown(&fl);
            eval_usage(stderr);
            return 2;
        }
    }
    if (fl.rc) return fl.rc;
    if ((!model || !data) && !nlupp) {
        eval_usage(stderr);
        return 2;
    }
    if (repeat < 1) repeat = 1;
    if (threads < 1) threads = 1;
    int rc = 0;
    if (model && data) {
        fr_err err = {0};
        fr_intent_model *m = fr_intent_load(model, &err);
        if (!m) {
            fprintf(stderr, "eval-nlu: %s\n", err.msg);
            return 1;
        }
        fr_intent_data d;
        if (fr_intent_data_load_csv(&d, data, &err)) {
            fprintf(stderr, "eval-nlu: %s\n", err.msg);
            fr_intent_free(m);
            return 1;
        }
        uint8_t *is_val = fr_xmalloc(d.n + 1);
        fr_intent_split(&d, all ? 0 : frac, seed, is_val);
        size_t n_used;
        double acc = fr_intent_accuracy(m, &d, all ? NULL : is_val, 1, &n_used);
        char **texts = fr_xmalloc((d.n + 1) * sizeof *texts);
        size_t nt = 0;
        for (size_t i = 0; i < d.n; i++)
            if (all || is_val[i]) texts[nt++] = d.texts[i];
        char desc[256];
        fr_intent_describe(m, desc, sizeof desc);
        printf("Intent: %s (%s)\n", model, desc);
        printf("accuracy %.2f%% on %zu %s rows of %s (val-frac %.2f, seed %llu)\n", 100.0 * acc, n_used,
               all ? "" : "validation", data, all ? 0.0 : frac, (unsigned long long)seed);
        if (n_oos && (rc = eval_oos(m, &d, all ? NULL : is_val, oos_dirs, n_oos))) {
            free(texts);
            free(is_val);
            fr_intent_data_free(&d);
            fr_intent_free(m);
            return rc;
        }
        double p50, p99, s50, s99, b50, b99;
        latency(m, texts, nt, repeat, 1, &p50, &p99);
        latency(m, texts, nt, repeat, 2, &s50, &s99);
        latency(m, texts, nt, repeat, 3, &b50, &b99);
        printf("\n| per query (%zu texts x %d) | p50 µs | p99 µs |\n|---|---:|---:|\n", nt, repeat);
        printf("| intent (top-5) | %.1f | %.1f |\n| slots | %.1f | %.1f |\n| intent + slots | %.1f | %.1f |\n", p50,
               p99, s50, s99, b50, b99);
        printf("\n| threads | intent queries/s | intent + slots queries/s |\n|---:|---:|---:|\n");
        for (int t = 1; t <= threads; t++)
            printf("| %d | %.0f | %.0f |\n", t, throughput(m, texts, nt, t, repeat, 0),
                   throughput(m, texts, nt, t, repeat, 1));
        free(texts);
        free(is_val);
        fr_intent_data_free(&d);
        fr_intent_free(m);
    }
    mcfg.min_df = (uint32_t)min_df;
    ref.forward_only = tense ? 0 : 1;
    mcfg.feat.bucket_bits = (uint32_t)bits;
    if (nlupp && (intent_cv || intent_folds)) {
        rc = eval_multi(nlupp, ontology, model && !data ? model : NULL,
                        intent_folds ? intent_folds : fold_mask("0-14"), intent_cv, per_label, &mcfg);
        if (rc) return rc;
    }
    if (nlupp && !intent_cv && !intent_folds) rc = eval_slots(nlupp, f0, f1, &ref, errors);
    return rc;
}
