/* bench_prefix.c — time to first token per turn of multi-turn conversations, with and without the
 * prefix cache (engine/engine.h), on the serving engine itself (no HTTP, no tokenizer).
 *
 *   bench_prefix --model PATH [--convs 4] [--turns 8] [--system 512] [--user 48] [--reply 32]
 *                [--seed 1]
 *
 * The workload: `convs` conversations share one system prompt of `system` token ids; turn t of a
 * conversation sends the system prompt, its whole history (every earlier user message and the
 * model's reply, as ids) and a new user message of `user` ids, and generates `reply` tokens
 * (greedy, EOS ignored). Turns are interleaved (turn 1 of every conversation, then turn 2, ...),
 * one request in flight at a time, so TTFT is the queue-free prefill of that turn: the engine's
 * arrival-to-first-token time. The same ids run on an engine with the cache off, then on one
 * with it on (a fresh engine each, default settings otherwise); the generated ids must be equal
 * (the program fails otherwise). Prints a Markdown table: per turn the mean prompt length, the
 * mean cached tokens, and the median TTFT over the conversations off and on.
 *
 * Built by `make build/bench_prefix`. Progress goes to stderr.
 */
#include "base/flags.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONVS 64
#define MAX_TURNS 64

typedef struct conv {
    int32_t *ids; /* the history: system prompt, then user / reply ids of every turn so far */
    int n, cap;
} conv;

static void push(conv *c, const int32_t *v, int n) {
    if (c->n + n > c->cap) {
        c->cap = (c->n + n) * 2;
        c->ids = fr_xrealloc(c->ids, sizeof(int32_t) * (size_t)c->cap);
    }
    memcpy(c->ids + c->n, v, sizeof(int32_t) * (size_t)n);
    c->n += n;
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void random_ids(uint64_t *s, int32_t *out, int n, int vocab, int eos) {
    for (int i = 0; i < n; i++) {
        int32_t v;
        do v = (int32_t)(rng_next(s) % (uint64_t)vocab);
        while (v == eos);
        out[i] = v;
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct run_out {
    double ttft[MAX_TURNS][MAX_CONVS];
    int n_prompt[MAX_TURNS][MAX_CONVS];
    int n_cached[MAX_TURNS][MAX_CONVS];
    int32_t *gen; /* (turns, convs, reply) generated ids */
    double wall_s;
} run_out;

/* One pass of the workload on a fresh engine. Returns 0, or -1 with a message on stderr. */
static int run(const fr_model *m, bool cache, int convs, int turns, int n_sys, int n_user,
               int n_reply, uint64_t seed, run_out *o) {
    fr_engine_config cfg = fr_engine_config_default();
    cfg.prefix_cache = cache;
    cfg.warmup = false;
    cfg.max_ctx = n_sys + turns * (n_user + n_reply) + 8;
    fr_err err = {0};
    fr_engine *e = fr_engine_new(m, &cfg, &err);
    if (!e) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return -1;
    }
    int vocab = m->hp.n_vocab, eos = m->hp.eos_id;
    uint64_t s = seed;
    int32_t *sys = fr_xmalloc(sizeof(int32_t) * (size_t)n_sys);
    random_ids(&s, sys, n_sys, vocab, eos);
    conv cv[MAX_CONVS];
    memset(cv, 0, sizeof cv);
    for (int c = 0; c < convs; c++) push(&cv[c], sys, n_sys);
    int32_t *user = fr_xmalloc(sizeof(int32_t) * (size_t)n_user);
    double t0 = fr_time_s();
    int rc = 0;
    for (int t = 0; t < turns && rc == 0; t++) {
        for (int c = 0; c < convs && rc == 0; c++) {
            uint64_t us = seed * 1000003u + (uint64_t)(t * MAX_CONVS + c) + 17;
            random_ids(&us, user, n_user, vocab, eos);
            push(&cv[c], user, n_user);
            fr_req_params p;
            memset(&p, 0, sizeof p);
            p.prompt = cv[c].ids;
            p.n_prompt = cv[c].n;
            p.gen = fr_gen_params_default();
            p.gen.max_tokens = n_reply;
            p.gen.ignore_eos = true;
            p.sampling = fr_sampling_default();
            p.sampling.temperature = 0;
            p.tier = 1;
            fr_admission adm;
            fr_req *r = fr_engine_submit(e, &p, &adm);
            if (!r) {
                fprintf(stderr, "refused: %s\n", adm.msg);
                rc = -1;
                break;
            }
            fr_req_info info;
            while (!fr_req_wait(r, NULL, 1.0, &info)) {
            }
            int32_t *out = o->gen + ((size_t)t * convs + c) * n_reply;
            int n = fr_req_output_ids(r, out, n_reply);
            fr_req_release(r);
            if (info.end != FR_END_LENGTH || n != n_reply) {
                fprintf(stderr, "turn %d conversation %d ended %s with %d ids\n", t + 1, c + 1,
                        fr_end_name(info.end), n);
                rc = -1;
                break;
            }
            o->ttft[t][c] = info.t_first - info.t_arrival;
            o->n_prompt[t][c] = p.n_prompt;
            o->n_cached[t][c] = info.n_cached;
            push(&cv[c], out, n_reply);
        }
        fprintf(stderr, "  cache %s: turn %d done\n", cache ? "on" : "off", t + 1);
    }
    o->wall_s = fr_time_s() - t0;
    for (int c = 0; c < convs; c++) free(cv[c].ids);
    free(sys);
    free(user);
    fr_engine_free(e);
    return rc;
}

static void usage(void) {
    fputs("usage: bench_prefix --model PATH [--convs N] [--turns N] [--system N] [--user N] "
          "[--reply N] [--seed S]\n", stderr);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int convs = 4, turns = 8, n_sys = 512, n_user = 48, n_reply = 32;
    uint64_t seed = 1;
    fr_flags f;
    fr_flags_init(&f, "bench_prefix", argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) return usage(), 0;
        if (fr_flag_str(&f, "--model", &path) || fr_flag_int(&f, "--convs", 1, MAX_CONVS, &convs) ||
            fr_flag_int(&f, "--turns", 1, MAX_TURNS, &turns) ||
            fr_flag_int(&f, "--system", 1, 1 << 20, &n_sys) ||
            fr_flag_int(&f, "--user", 1, 1 << 20, &n_user) ||
            fr_flag_int(&f, "--reply", 1, 1 << 20, &n_reply) || fr_flag_u64(&f, "--seed", &seed))
            continue;
        return fr_flags_unknown(&f);
    }
    if (f.rc) return f.rc;
    if (!path) return usage(), 2;
    fr_err err = {0};
    fr_model *m = fr_model_load(path, &err);
    if (!m) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return 1;
    }
    static run_out off, on;
    size_t n_gen = (size_t)turns * (size_t)convs * (size_t)n_reply;
    off.gen = fr_xcalloc(n_gen, sizeof(int32_t));
    on.gen = fr_xcalloc(n_gen, sizeof(int32_t));
    int rc = run(m, false, convs, turns, n_sys, n_user, n_reply, seed, &off);
    if (rc == 0) rc = run(m, true, convs, turns, n_sys, n_user, n_reply, seed, &on);
    if (rc == 0 && memcmp(off.gen, on.gen, n_gen * sizeof(int32_t))) {
        fprintf(stderr, "FAIL: the generated ids differ with the cache\n");
        rc = 1;
    }
    if (rc == 0) {
        printf("model: %s (%d layers, hidden %d, %d KV heads x %d); %d conversations x %d turns; "
               "system %d, user %d, reply %d ids\n", path, m->hp.n_layer, m->hp.n_embd,
               m->hp.n_head_kv, m->hp.head_dim, convs, turns, n_sys, n_user, n_reply);
        printf("generated ids identical with and without the cache: yes\n\n");
        printf("| turn | prompt tokens (mean) | cached tokens (mean, on) | TTFT off s (median) | "
               "TTFT on s (median) | off / on |\n|---|---|---|---|---|---|\n");
        double sum_off = 0, sum_on = 0;
        for (int t = 0; t < turns; t++) {
            double a[MAX_CONVS], b[MAX_CONVS], np = 0, nc = 0;
            for (int c = 0; c < convs; c++) {
                a[c] = off.ttft[t][c];
                b[c] = on.ttft[t][c];
                sum_off += a[c];
                sum_on += b[c];
                np += on.n_prompt[t][c];
                nc += on.n_cached[t][c];
            }
            double mo = median(a, convs), mn = median(b, convs);
            printf("| %d | %.0f | %.0f | %.3f | %.3f | %.1fx |\n", t + 1, np / convs, nc / convs,
                   mo, mn, mn > 0 ? mo / mn : 0);
        }
        printf("\nsum of TTFT over all %d requests: off %.2f s, on %.2f s; wall: off %.1f s, on "
               "%.1f s\n", turns * convs, sum_off, sum_on, off.wall_s, on.wall_s);
    }
    free(off.gen);
    free(on.gen);
    fr_model_free(m);
    return rc;
}
