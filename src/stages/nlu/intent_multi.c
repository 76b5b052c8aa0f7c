/* intent_multi.c — see intent_multi.h. NLU++ reader, thresholds, F1, cross-validation. */
#include "stages/nlu/intent_multi.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool domain_has(const cJSON *intent, const char *domain) {
    const cJSON *doms = cJSON_GetObjectItemCaseSensitive(intent, "domain"), *x;
    cJSON_ArrayForEach(x, doms) {
        if (cJSON_IsString(x) && (!strcmp(x->valuestring, domain) || !strcmp(x->valuestring, "general")))
            return true;
    }
    return false;
}

static cJSON *read_json(const char *path, fr_err *err) {
    size_t len;
    char *buf = fr_read_file(path, (size_t)64 << 20, &len, err);
    if (!buf) return NULL;
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!root) fr_err_set(err, "%s: not valid JSON", path);
    return root;
}

int fr_intent_data_load_nlupp(fr_intent_data *d, const char *dir, const char *ontology_path,
                              const char *domain, uint32_t folds, fr_err *err) {
    memset(d, 0, sizeof *d);
    cJSON *onto = read_json(ontology_path, err);
    if (!onto) return -1;
    const cJSON *intents = cJSON_GetObjectItemCaseSensitive(onto, "intents"), *it;
    int nl = 0;
    cJSON_ArrayForEach(it, intents) nl += domain_has(it, domain);
    if (!cJSON_IsObject(intents) || nl < 2 || nl > (int)FR_INTENT_MAX_LABELS) {
        fr_err_set(err, "%s: no usable \"intents\" object for domain %s", ontology_path, domain);
        cJSON_Delete(onto);
        return -1;
    }
    d->names = fr_xmalloc((size_t)nl * sizeof *d->names);
    cJSON_ArrayForEach(it, intents) if (domain_has(it, domain)) d->names[d->n_labels++] = fr_xstrdup(it->string);
    cJSON_Delete(onto);
    qsort(d->names, (size_t)nl, sizeof *d->names, cmp_str);
    size_t cap = 0;
    for (int f = 0; f < FR_NLUPP_MAX_FOLDS; f++) {
        if (!(folds >> f & 1u)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/fold%d.json", dir, f);
        cJSON *root = read_json(path, err);
        if (!root) goto fail;
        if (!cJSON_IsArray(root)) {
            fr_err_set(err, "%s: not a JSON array", path);
            cJSON_Delete(root);
            goto fail;
        }
        const cJSON *ex;
        cJSON_ArrayForEach(ex, root) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(ex, "text");
            const cJSON *li = cJSON_GetObjectItemCaseSensitive(ex, "intents"), *x;
            if (!cJSON_IsString(t) || (li && !cJSON_IsArray(li))) {
                fr_err_set(err, "%s: an example without a text or with a bad \"intents\"", path);
                cJSON_Delete(root);
                goto fail;
            }
            if (d->n == cap) {
                cap = cap ? cap * 2 : 256;
                d->texts = fr_xrealloc(d->texts, cap * sizeof *d->texts);
                d->labels = fr_xrealloc(d->labels, cap * sizeof *d->labels);
                d->group = fr_xrealloc(d->group, cap * sizeof *d->group);
                d->multi = fr_xrealloc(d->multi, cap * (size_t)nl);
            }
            uint8_t *row = d->multi + d->n * (size_t)nl;
            memset(row, 0, (size_t)nl);
            d->labels[d->n] = -1;
            cJSON_ArrayForEach(x, li) {
                char *key = cJSON_IsString(x) ? x->valuestring : NULL;
                char **hit = key ? bsearch(&key, d->names, (size_t)nl, sizeof *d->names, cmp_str) : NULL;
                if (!hit) {
                    fr_err_set(err, "%s: intent %s%s%s is not in the ontology's %s intents", path,
                               key ? "'" : "", key ? key : "(not a string)", key ? "'" : "", domain);
                    cJSON_Delete(root);
                    goto fail;
                }
                row[hit - d->names] = 1;
            }
            for (int l = nl - 1; l >= 0; l--)
                if (row[l]) d->labels[d->n] = l;
            d->texts[d->n] = fr_xstrdup(t->valuestring);
            d->group[d->n] = f;
            d->n++;
        }
        cJSON_Delete(root);
    }
    if (!d->n) {
        fr_err_set(err, "%s: no examples in the folds asked for", dir);
        goto fail;
    }
    return 0;
fail:
    d->n_labels = nl; /* every name allocated is freed */
    fr_intent_data_free(d);
    return -1;
}

void fr_intent_multi_defaults(fr_intent_train_cfg *c) {
    /* Chosen by the pooled micro-F1 of fr_intent_multi_cv over folds 0-14 (bench/RESULTS.md). */
    fr_intent_train_defaults(c);
    c->min_df = 2;
    c->val_frac = 0;
    c->n_members = 1;
    c->member[0] = (fr_intent_member_cfg){.hidden = 512, .epochs = 40, .batch = 16, .lr = 0.002f,
                                          .dropout = 0.5f, .init = 0.05f, .weight = 1};
}

/* d's label index → the model's (by name), or -1. */
static int *label_map(const fr_intent_model *m, const fr_intent_data *d) {
    int *map = fr_xmalloc((size_t)(d->n_labels + 1) * sizeof *map);
    for (int l = 0; l < d->n_labels; l++) map[l] = fr_intent_label_index(m, d->names[l]);
    return map;
}

/* Probabilities of the model's labels, reordered to d's labels (0 where the model lacks one). */
static void probs_of(const fr_intent_model *m, const int *map, int nl, const char *text, float *pm,
                     float *pd) {
    fr_intent_probs(m, text, strlen(text), pm, NULL, NULL);
    for (int l = 0; l < nl; l++) pd[l] = map[l] >= 0 ? pm[map[l]] : 0;
}

void fr_intent_multi_count(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                           int want, const float *thr, long *tp, long *pred, long *gold) {
    FR_ASSERT(d->multi);
    int nl = d->n_labels, *map = label_map(m, d);
    float *pm = fr_xmalloc((size_t)fr_intent_n_labels(m) * sizeof *pm);
    float *pd = fr_xmalloc((size_t)nl * sizeof *pd);
    const float *mt = fr_intent_thresholds(m);
    for (size_t i = 0; i < d->n; i++) {
        if (mask && mask[i] != want) continue;
        probs_of(m, map, nl, d->texts[i], pm, pd);
        const uint8_t *y = d->multi + i * (size_t)nl;
        for (int l = 0; l < nl; l++) {
            float t = thr ? *thr : map[l] >= 0 && mt ? mt[map[l]] : 0.5f;
            int p = map[l] >= 0 && pd[l] >= t;
            tp[l] += p && y[l];
            pred[l] += p;
            gold[l] += y[l];
        }
    }
    free(pm);
    free(pd);
    free(map);
}

void fr_intent_f1_of(const long *tp, const long *pred, const long *gold, int n, double *micro,
                     double *macro) {
    long T = 0, P = 0, G = 0;
    double sum = 0;
    int k = 0;
    for (int l = 0; l < n; l++) {
        T += tp[l];
        P += pred[l];
        G += gold[l];
        if (!gold[l]) continue;
        sum += 2.0 * (double)tp[l] / (double)(pred[l] + gold[l]);
        k++;
    }
    if (micro) *micro = P + G ? 2.0 * (double)T / (double)(P + G) : 0;
    if (macro) *macro = k ? sum / k : 0;
}

void fr_intent_multi_f1(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                        int want, double *micro, double *macro, size_t *n_used) {
    int nl = d->n_labels;
    long *c = fr_xcalloc(3 * (size_t)nl, sizeof *c);
    fr_intent_multi_count(m, d, mask, want, NULL, c, c + nl, c + 2 * nl);
    fr_intent_f1_of(c, c + nl, c + 2 * nl, nl, micro, macro);
    if (n_used) {
        size_t n = 0;
        for (size_t i = 0; i < d->n; i++) n += !mask || mask[i] == want;
        *n_used = n;
    }
    free(c);
}

#define N_GRID 37 /* 0.05, 0.075, ..., 0.95 */
static float grid_t(int g) { return 0.05f + 0.025f * (float)g; }

float fr_intent_tune_thresholds(fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                                int want) {
    FR_ASSERT(d->multi && fr_intent_is_multilabel(m));
    int nl = d->n_labels, nm = fr_intent_n_labels(m), *map = label_map(m, d);
    /* counts per (grid point, label) */
    long *tp = fr_xcalloc((size_t)N_GRID * nl, sizeof *tp), *pr = fr_xcalloc((size_t)N_GRID * nl, sizeof *pr);
    long *gold = fr_xcalloc((size_t)nl, sizeof *gold);
    float *pm = fr_xmalloc((size_t)nm * sizeof *pm), *pd = fr_xmalloc((size_t)nl * sizeof *pd);
    for (size_t i = 0; i < d->n; i++) {
        if (mark[i] != want) continue;
        probs_of(m, map, nl, d->texts[i], pm, pd);
        const uint8_t *y = d->multi + i * (size_t)nl;
        for (int l = 0; l < nl; l++) {
            gold[l] += y[l];
            for (int g = 0; g < N_GRID; g++) {
                int p = pd[l] >= grid_t(g);
                tp[g * nl + l] += p && y[l];
                pr[g * nl + l] += p;
            }
        }
    }
    long G = 0;
    for (int l = 0; l < nl; l++) G += gold[l];
    int best_g = N_GRID / 2 - 1; /* 0.5 */
    double best = -1;
    for (int g = 0; g < N_GRID; g++) {
        long T = 0, P = 0;
        for (int l = 0; l < nl; l++) {
            T += tp[g * nl + l];
            P += pr[g * nl + l];
        }
        double f = P + G ? 2.0 * (double)T / (double)(P + G) : 0;
        if (f > best + 1e-12) {
            best = f;
            best_g = g;
        }
    }
    float *t = fr_xmalloc((size_t)nm * sizeof *t);
    const float *old = fr_intent_thresholds(m);
    for (int k = 0; k < nm; k++) t[k] = old ? old[k] : 0.5f;
    for (int l = 0; l < nl; l++) {
        if (map[l] < 0) continue;
        int pick = best_g;
        if (gold[l] >= 3) {
            double bf = -1;
            for (int g = 0; g < N_GRID; g++) {
                long T = tp[g * nl + l], P = pr[g * nl + l];
                double f = 2.0 * (double)T / (double)(P + gold[l]);
                int dist = abs(g - best_g), bdist = abs(pick - best_g);
                if (f > bf + 1e-12 || (f > bf - 1e-12 && dist < bdist)) {
                    bf = f;
                    pick = g;
                }
            }
        }
        t[map[l]] = grid_t(pick);
    }
    fr_intent_set_thresholds(m, t);
    free(t);
    free(tp);
    free(pr);
    free(gold);
    free(pm);
    free(pd);
    free(map);
    return grid_t(best_g);
}

void fr_intent_cv_report_free(fr_intent_cv_report *rep) {
    for (int r = 0; r < 3; r++) {
        free(rep->tp[r]);
        free(rep->pred[r]);
    }
    free(rep->gold);
    memset(rep, 0, sizeof *rep);
}

int fr_intent_multi_cv(const fr_intent_data *d, const fr_intent_train_cfg *cfg, int n_parts,
                       fr_intent_cv_report *rep, fr_err *err) {
    memset(rep, 0, sizeof *rep);
    if (!d->multi || !d->group) {
        fr_err_set(err, "cross-validation needs a multi-label data set with folds");
        return -1;
    }
    /* distinct groups, ascending */
    int groups[FR_NLUPP_MAX_FOLDS], ng = 0;
    for (int g = 0; g < FR_NLUPP_MAX_FOLDS; g++)
        for (size_t i = 0; i < d->n; i++)
            if (d->group[i] == g) {
                groups[ng++] = g;
                break;
            }
    if (n_parts < 3 || n_parts > ng) {
        fr_err_set(err, "cross-validation: %d parts over %d folds (need 3..folds)", n_parts, ng);
        return -1;
    }
    double t0 = fr_time_s();
    int nl = d->n_labels;
    rep->n_labels = nl;
    rep->n_parts = n_parts;
    for (int r = 0; r < 3; r++) {
        rep->tp[r] = fr_xcalloc((size_t)nl, sizeof *rep->tp[r]);
        rep->pred[r] = fr_xcalloc((size_t)nl, sizeof *rep->pred[r]);
    }
    rep->gold = fr_xcalloc((size_t)nl, sizeof *rep->gold);
    long *scratch = fr_xcalloc((size_t)nl, sizeof *scratch);
    uint8_t *marks = fr_xmalloc(d->n + 1);
    int rc = 0;
    for (int p = 0; p < n_parts && !rc; p++) {
        int tune = (p + 1) % n_parts;
        for (size_t i = 0; i < d->n; i++) {
            int gi = 0;
            while (groups[gi] != d->group[i]) gi++;
            int part = gi * n_parts / ng;
            marks[i] = part == p ? 1 : part == tune ? 2 : 0;
        }
        fr_intent_train_cfg c = *cfg;
        c.marks = marks;
        c.verbose = 0;
        fr_intent_train_report tr;
        fr_intent_model *m = fr_intent_train(d, &c, &tr, err);
        if (!m) {
            rc = -1;
            break;
        }
        rep->n_rows += tr.n_val;
        long *gold = fr_xcalloc((size_t)nl, sizeof *gold);
        long *t2 = fr_xcalloc((size_t)nl, sizeof *t2), *p2 = fr_xcalloc((size_t)nl, sizeof *p2);
        fr_intent_multi_count(m, d, marks, 1, NULL, t2, p2, gold);
        fr_intent_f1_of(t2, p2, gold, nl, &rep->part_micro[p], NULL);
        for (int l = 0; l < nl; l++) {
            rep->tp[2][l] += t2[l];
            rep->pred[2][l] += p2[l];
            rep->gold[l] += gold[l];
        }
        float half = 0.5f;
        memset(scratch, 0, (size_t)nl * sizeof *scratch);
        fr_intent_multi_count(m, d, marks, 1, &half, rep->tp[0], rep->pred[0], scratch);
        /* the tuned global threshold (tuning again on the same rows gives the same thresholds) */
        float g = fr_intent_tune_thresholds(m, d, marks, 2);
        memset(scratch, 0, (size_t)nl * sizeof *scratch);
        fr_intent_multi_count(m, d, marks, 1, &g, rep->tp[1], rep->pred[1], scratch);
        free(gold);
        free(t2);
        free(p2);
        fr_intent_free(m);
    }
    free(marks);
    free(scratch);
    if (rc) {
        fr_intent_cv_report_free(rep);
        return -1;
    }
    for (int r = 0; r < 3; r++) fr_intent_f1_of(rep->tp[r], rep->pred[r], rep->gold, nl, &rep->micro[r], &rep->macro[r]);
    rep->seconds = fr_time_s() - t0;
    return 0;
}
