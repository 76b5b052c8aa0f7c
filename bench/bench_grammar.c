/* bench_grammar.c — the cost of grammar-constrained decoding per token (engine/tokmask.h) on a
 * vocabulary of the Qwen2.5 size, against the decode step it must fit in.
 *
 *   bench_grammar [--vocab 151936] [--steps 400] [--walks 8] [--seed 1] [--tokenizer FILE]
 *
 * No fixture has a full-size vocabulary (the largest, qwen2-tiny, has 4,005 tokens), so by
 * default the vocabulary is synthetic: the 256 byte tokens, then distinct tokens drawn like a
 * byte-level BPE vocabulary's — " word" and "word" pieces, CJK runs, punctuation clusters
 * ('",', '":', '{"', '}]', ...), whitespace runs, digits, identifiers — up to --vocab entries,
 * plus <|endoftext|> and <|im_end|> as special tokens. --tokenizer FILE uses a real
 * tokenizer.json instead.
 *
 * Workload: per walk, a fresh matcher over one of four schemas (an intent object with an enum, a
 * boolean, a number and a bounded string array; a nested order list; a Qwen2.5 forced tool
 * call; json_object); each step fills the mask (timed), applies it to a logits row of the
 * vocabulary's size (timed), then takes a random allowed token whose shortest completion fits
 * the steps left (drawn and checked, as the engine's sampler does). Prints the per-token mask time (mean, p50, p99, cold
 * steps = cache misses), the apply time, and the share of a decode step at batch 32: the H200
 * batch-32 bf16 step (7.4 ms for 32 tokens, bench/RESULTS.md) and the CPU's.
 *
 * Built by `make build/bench_grammar`.
 */
#include "backend/sampler.h"
#include "base/flags.h"
#include "engine/grammar.h"
#include "engine/tokmask.h"
#include "model/tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_s;
static uint32_t rnd(void) {
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return (uint32_t)(rng_s >> 11);
}

/* GPT-2's byte-to-unicode map: the stored form of byte-level BPE tokens */
static int byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

static size_t put_cp(char *o, int cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* raw bytes -> stored byte-level string (malloc'd) */
static char *to_stored(const char *b, size_t n) {
    char *o = malloc(2 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += put_cp(o + k, byte_cp((uint8_t)b[i]));
    o[k] = 0;
    return o;
}

static void word(char *o, size_t *n, int len) {
    for (int i = 0; i < len; i++) o[(*n)++] = (char)('a' + rnd() % 26);
}

/* one candidate token's raw bytes, drawn like a BPE vocabulary (file comment) */
static size_t draw_token(char *o) {
    static const char punct[] = "{}[]\":,.;()<>/\\'-_=+!?*#&|@$%^~`";
    size_t n = 0;
    uint32_t k = rnd() % 100;
    if (k < 42) {
        o[n++] = ' ';
        if (rnd() % 5 == 0) o[n - 1] = ' ', o[n++] = (char)('A' + rnd() % 26);
        word(o, &n, 2 + (int)(rnd() % 9));
    } else if (k < 62) {
        word(o, &n, 1 + (int)(rnd() % 9));
    } else if (k < 72) {
        for (int c = 0, m = 1 + (int)(rnd() % 3); c < m; c++) {
            int cp = 0x4E00 + (int)(rnd() % 0x5200);
            o[n++] = (char)(0xE0 | cp >> 12);
            o[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            o[n++] = (char)(0x80 | (cp & 0x3F));
        }
    } else if (k < 82) {
        for (int c = 0, m = 2 + (int)(rnd() % 3); c < m; c++) o[n++] = punct[rnd() % (sizeof punct - 1)];
    } else if (k < 87) {
        int m = 1 + (int)(rnd() % 32);
        if (rnd() % 2) o[n++] = '\n';
        for (int c = 0; c < m; c++) o[n++] = ' ';
    } else if (k < 93) {
        o[n++] = rnd() % 2 ? '_' : '.';
        word(o, &n, 3 + (int)(rnd() % 8));
    } else {
        for (int c = 0, m = 1 + (int)(rnd() % 4); c < m; c++) {
            int cp = 0x400 + (int)(rnd() % 0x100); /* Cyrillic */
            o[n++] = (char)(0xC0 | cp >> 6);
            o[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return n;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h | 1;
}

static fr_tokenizer *synthetic_vocab(int n_vocab) {
    int n_special = 2, n_norm = n_vocab - n_special;
    char **toks = calloc((size_t)n_vocab, sizeof *toks);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    size_t cap = 1u << 19;
    uint64_t *set = calloc(cap, sizeof *set);
    int n = 0;
    char buf[256];
    for (int b = 0; b < 256; b++) {
        buf[0] = (char)b;
        set[hash_bytes(buf, 1) & (cap - 1)] = hash_bytes(buf, 1);
        toks[n] = to_stored(buf, 1);
        types[n++] = 1;
    }
    while (n < n_norm) {
        size_t l = draw_token(buf);
        uint64_t h = hash_bytes(buf, l);
        size_t at = h & (cap - 1);
        while (set[at] && set[at] != h) at = (at + 1) & (cap - 1);
        if (set[at]) continue;
        set[at] = h;
        toks[n] = to_stored(buf, l);
        types[n++] = 1;
    }
    toks[n] = strdup("<|endoftext|>");
    types[n++] = 3;
    toks[n] = strdup("<|im_end|>");
    types[n++] = 3;
    fr_vocab_spec spec = {.n_tokens = n, .tokens = (const char *const *)toks, .token_types = types,
                          .pre = "qwen2", .bos_id = -1, .eos_id = n - 1, .pad_id = -1};
    fr_err err = {0};
    fr_tokenizer *t = fr_tokenizer_from_vocab(&spec, &err);
    if (!t) fprintf(stderr, "bench_grammar: vocabulary: %s\n", err.msg);
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks);
    free(types);
    free(set);
    return t;
}

static const char *SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"intent\":{\"enum\":[\"block_card\",\"balance\","
    "\"dispute\",\"transfer\",\"other\"]},\"urgent\":{\"type\":\"boolean\"},\"amount\":{\"type\":"
    "[\"number\",\"null\"]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
    "\"maxLength\":20},\"maxItems\":4}},\"required\":[\"intent\",\"urgent\",\"tags\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"orders\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\","
    "\"maxLength\":40},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},"
    "\"required\":[\"id\",\"note\"]},\"maxItems\":5}},\"required\":[\"orders\"]}",
    "TOOL",
    NULL,
};

static fr_grammar *grammar(int k) {
    fr_err err = {0};
    if (!SCHEMAS[k]) return fr_grammar_from_schema(NULL, NULL, NULL, &err);
    if (!strcmp(SCHEMAS[k], "TOOL")) {
        cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"
                               "\"block_card\"},\"arguments\":{\"type\":\"object\",\"properties\":"
                               "{\"last4\":{\"type\":\"string\",\"minLength\":4,\"maxLength\":4},"
                               "\"reason\":{\"enum\":[\"lost\",\"stolen\",\"damaged\"]}},"
                               "\"required\":[\"last4\",\"reason\"]}},\"required\":[\"name\","
                               "\"arguments\"],\"additionalProperties\":false}");
        fr_grammar *g = fr_grammar_from_schema(s, "<tool_call>\n", "\n</tool_call>", &err);
        cJSON_Delete(s);
        return g;
    }
    return fr_grammar_from_text(SCHEMAS[k], strlen(SCHEMAS[k]), &err);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n_vocab = 151936, steps = 400, walks = 8;
    uint64_t seed = 1;
    const char *tokfile = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc) n_vocab = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--walks") && i + 1 < argc) walks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokfile = argv[++i];
        else {
            fprintf(stderr, "usage: bench_grammar [--vocab N] [--steps N] [--walks N] [--seed N] "
                            "[--tokenizer FILE]\n");
            return 2;
        }
    }
    rng_s = seed * 0x9E3779B97F4A7C15ull | 1;
    fr_err err = {0};
    double t0 = fr_time_s();
    fr_tokenizer *tok = tokfile ? fr_tokenizer_load_json(tokfile, &err) : synthetic_vocab(n_vocab);
    if (!tok) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        return 1;
    }
    n_vocab = fr_tokenizer_n_vocab(tok);
    int eos = n_vocab - 1;
    double t1 = fr_time_s();
    fr_tokvocab *v = fr_tokvocab_new(tok, n_vocab, &eos, 1);
    double t_trie = fr_time_s() - t1;
    printf("vocabulary: %d tokens (%s, made in %.2f s), trie %d nodes built in %.1f ms\n", n_vocab,
           tokfile ? tokfile : "synthetic", t1 - t0, fr_tokvocab_trie_nodes(v), 1e3 * t_trie);

    int words = fr_tokmask_words(v);
    uint32_t *mask = malloc(sizeof(uint32_t) * (size_t)words);
    float *row = malloc(sizeof(float) * (size_t)n_vocab);
    int32_t *cand = malloc(sizeof(int32_t) * (size_t)n_vocab);
    double *tf = malloc(sizeof(double) * (size_t)(steps * walks)), sum_apply = 0;
    double *tw = malloc(sizeof(double) * (size_t)(steps * walks)); /* steps of warm walks */
    int nt = 0, n_cold = 0, nw = 0;
    double cold_sum = 0;
    enum { NS = sizeof SCHEMAS / sizeof SCHEMAS[0] };
    fr_maskcache *caches[NS]; /* one per schema, shared by its walks as the engine shares them */
    for (int k = 0; k < NS; k++) caches[k] = fr_maskcache_new();
    for (int w = 0; w < walks; w++) {
        fr_grammar *g = grammar(w % NS);
        fr_tokmask *m = fr_tokmask_new_shared(v, g, caches[w % NS]);
        bool warm = w >= NS;
        for (int s = 0; s < steps; s++) {
            long h0, m0, h1, m1;
            fr_tokmask_stats(m, &h0, &m0);
            double a = fr_time_s();
            fr_tokmask_fill(m, mask);
            double b = fr_time_s();
            for (int i = 0; i < n_vocab; i++) row[i] = (float)(rnd() % 1000) * 1e-3f;
            double c = fr_time_s();
            fr_sampler_apply_mask(row, mask, n_vocab);
            sum_apply += fr_time_s() - c;
            fr_tokmask_stats(m, &h1, &m1);
            tf[nt++] = b - a;
            if (warm) tw[nw++] = b - a;
            if (m1 > m0) {
                n_cold++;
                cold_sum += b - a;
            }
            /* as the engine draws: a random allowed token, kept when its completion fits */
            int nc = 0, left = steps - s - 1, id = -1;
            for (int i = 0; i < n_vocab; i++)
                if (mask[i >> 5] >> (i & 31) & 1) cand[nc++] = i;
            for (int tries = 0; nc > 0 && tries < 64 && id < 0; tries++) {
                int pick = cand[rnd() % (uint32_t)nc], need = fr_tokmask_need_after(m, pick);
                if (need >= 0 && need <= left) id = pick;
            }
            for (int i = 0; i < nc && id < 0; i++) { /* few fit: the engine's keep_fitting */
                int need = fr_tokmask_need_after(m, cand[i]);
                if (need >= 0 && need <= left) id = cand[i];
            }
            if (id < 0) break;
            if (id == eos || !fr_tokmask_accept(m, id) || fr_tokmask_terminal(m)) break;
        }
        long hits, misses;
        fr_tokmask_stats(m, &hits, &misses);
        fprintf(stderr, "walk %d (schema %d): %ld fills, %ld cache misses\n", w,
                w % (int)(sizeof SCHEMAS / sizeof SCHEMAS[0]), hits + misses, misses);
        fr_tokmask_free(m);
        fr_grammar_free(g);
    }
    double mean = 0;
    for (int i = 0; i < nt; i++) mean += tf[i];
    mean /= nt;
    qsort(tf, (size_t)nt, sizeof(double), cmp_d);
    double apply = sum_apply / nt, per = mean + apply, wmean = 0;
    for (int i = 0; i < nw; i++) wmean += tw[i];
    wmean = nw ? wmean / nw : 0;
    qsort(tw, (size_t)nw, sizeof(double), cmp_d);
    printf("steps: %d over %d walks (%d cold: cache misses, mean %.1f us)\n", nt, walks, n_cold,
           n_cold ? 1e6 * cold_sum / n_cold : 0.0);
    printf("mask fill per token: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", 1e6 * mean,
           1e6 * tf[nt / 2], 1e6 * tf[(int)(nt * 0.99)], 1e6 * tf[nt - 1]);
    if (nw)
        printf("  of which walks after the first of their schema (cache shared): %d steps, mean "
               "%.1f us, p50 %.1f us, p99 %.1f us\n", nw, 1e6 * wmean, 1e6 * tw[nw / 2],
               1e6 * tw[(int)(nw * 0.99)]);
    printf("mask apply per token (logits row of %d): %.1f us\n", n_vocab, 1e6 * apply);
    double wper = wmean + apply;
    printf("batch 32, one thread, all steps: %.3f ms per step = %.1f%% of the H200 bf16 step "
           "(7.4 ms); shared-cache steps: %.3f ms = %.1f%%; per token vs the CPU q8 step at "
           "batch 1 (68.9 ms, Qwen2.5-0.5B shape): %.2f%%\n", 32e3 * per, 100 * 32 * per / 7.4e-3,
           32e3 * wper, 100 * 32 * wper / 7.4e-3, 100 * per / 68.9e-3);
    for (int k = 0; k < NS; k++) fr_maskcache_free(caches[k]);
    free(tw);
    free(mask);
    free(row);
    free(cand);
    free(tf);
    fr_tokvocab_free(v);
    fr_tokenizer_free(tok);
    return 0;
}
