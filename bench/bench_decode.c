/* bench_decode.c — CPU decoder benchmark: load time, prompt processing and generation speed, peak
 * RSS, memory bandwidth (STREAM-like copy and read), and decode speed as a share of the bandwidth
 * limit (bytes streamed per token / copy bandwidth).
 *
 *   bench_decode MODEL [--quant q8|q4] [--prompt N] [--gen N] [--threads N]
 *   bench_decode --synthetic qwen2-0.5b [--quant ...]   (random weights built in memory)
 *
 * Built by bench/bench-cpu.sh with the library's flags against build/libfrugal.a. Prints one
 * "key: value" line per figure on stdout (bench-cpu.sh turns them into a table); progress goes to
 * stderr.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/decoder.h"
#include "backend/cpu/quant.h"
#include "base/flags.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ------------------------------------------------------------------ synthetic model */
static uint64_t rs = 0x2545f4914f6cdd1dull;
static void rand_fill(float *p, size_t n, float scale, float base) {
    uint64_t x = rs;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = base + scale * ((float)(x >> 40) * (1.0f / 8388608.0f) - 1.0f);
    }
    rs = x;
}
static void rand_tensor(fr_model *m, fr_tensor *t, int64_t n0, int64_t n1, float scale, float base) {
    float *p = fr_xmalloc((size_t)(n0 * n1) * 4); /* (n1, n0) */
    rand_fill(p, (size_t)(n0 * n1), scale, base);
    fr_model_own(m, p);
    *t = (fr_tensor){.dtype = FR_DTYPE_F32, .n_dims = n1 > 1 ? 2 : 1, .ne = {n0, n1, 1, 1},
                     .data = p, .nbytes = (size_t)(n0 * n1) * 4};
}
/* Qwen2.5-0.5B shapes: hidden 896, 24 layers, 14 heads, 2 KV heads, FFN 4864, vocab 151936 */
static fr_model *synthetic_qwen2_05b(void) {
    fr_model *m = fr_xcalloc(1, sizeof *m);
    m->hp = (fr_hparams){.arch = FR_ARCH_QWEN2, .n_vocab = 151936, .n_embd = 896, .n_layer = 24,
                         .n_head = 14, .n_head_kv = 2, .head_dim = 64, .n_ff = 4864,
                         .n_ctx_train = 32768, .rms_eps = 1e-6f, .rope_theta = 1e6f,
                         .tied_embeddings = true, .bos_id = -1, .eos_id = -1};
    const fr_hparams *hp = &m->hp;
    int E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim,
        F = hp->n_ff;
    rand_tensor(m, &m->w.tok_embd, E, hp->n_vocab, 0.05f, 0);
    m->w.output = m->w.tok_embd;
    rand_tensor(m, &m->w.output_norm, E, 1, 0.1f, 1);
    m->w.layers = fr_xcalloc((size_t)hp->n_layer, sizeof(fr_layer));
    size_t wb = m->w.output.nbytes + m->w.output_norm.nbytes;
    for (int l = 0; l < hp->n_layer; l++) {
        fr_layer *L = &m->w.layers[l];
        rand_tensor(m, &L->attn_norm, E, 1, 0.1f, 1);
        rand_tensor(m, &L->wq, E, Q, 0.03f, 0);
        rand_tensor(m, &L->wk, E, KV, 0.03f, 0);
        rand_tensor(m, &L->wv, E, KV, 0.03f, 0);
        rand_tensor(m, &L->bq, Q, 1, 0.1f, 0);
        rand_tensor(m, &L->bk, KV, 1, 0.1f, 0);
        rand_tensor(m, &L->bv, KV, 1, 0.1f, 0);
        rand_tensor(m, &L->wo, Q, E, 0.03f, 0);
        rand_tensor(m, &L->ffn_norm, E, 1, 0.1f, 1);
        rand_tensor(m, &L->w_gate, E, F, 0.03f, 0);
        rand_tensor(m, &L->w_up, E, F, 0.03f, 0);
        rand_tensor(m, &L->w_down, F, E, 0.015f, 0);
        const fr_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk, &L->bv,
                                 &L->wo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++) wb += ts[i]->nbytes;
        if (l % 6 == 5) fprintf(stderr, "\rsynthetic model: layer %d/%d", l + 1, hp->n_layer);
    }
    fprintf(stderr, "\n");
    m->weight_bytes = wb;
    m->name = fr_xstrdup("synthetic-qwen2-0.5b");
    return m;
}

/* ------------------------------------------------------------------ bandwidth */
typedef struct bw_ctx {
    float *a, *b; /* (n) each */
    size_t n;
    int mode;     /* 0 copy a -> b, 1 read a */
    double sink[64];
} bw_ctx;

static void bw_worker(void *arg, int ith, int nth) {
    bw_ctx *c = arg;
    size_t per = c->n / (size_t)nth / 64 * 64, i0 = per * (size_t)ith,
           i1 = ith == nth - 1 ? c->n : i0 + per;
    if (c->mode == 0) {
        for (size_t i = i0; i < i1; i += 16) {
            _mm256_store_ps(c->b + i, _mm256_load_ps(c->a + i));
            _mm256_store_ps(c->b + i + 8, _mm256_load_ps(c->a + i + 8));
        }
    } else {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (size_t i = i0; i < i1; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(c->a + i));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(c->a + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(c->a + i + 16));
            s3 = _mm256_add_ps(s3, _mm256_load_ps(c->a + i + 24));
        }
        float o[8];
        _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        c->sink[ith & 63] = o[0];
    }
}

/* best of `reps` passes, GB/s (1e9 bytes); copy counts bytes read + written */
static double bandwidth(fr_pool *pool, int mode, size_t bytes, int reps) {
    bw_ctx c = {0};
    c.n = bytes / 4 / 64 * 64;
    c.a = aligned_alloc(2 << 20, c.n * 4);
    c.b = aligned_alloc(2 << 20, c.n * 4);
    if (!c.a || !c.b) return 0;
    memset(c.a, 1, c.n * 4);
    memset(c.b, 2, c.n * 4);
    c.mode = mode;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = fr_time_s();
        fr_pool_run(pool, bw_worker, &c);
        double dt = fr_time_s() - t0, gb = (mode == 0 ? 2.0 : 1.0) * (double)c.n * 4 / dt / 1e9;
        best = gb > best ? gb : best;
    }
    free(c.a);
    free(c.b);
    return best;
}

/* Decode kernel throughput with the weights in cache: 1024 rows of layer 0's w_gate (q4: 0.6 MiB,
 * f32: 3.5 MiB), one token, best of 300 calls. GB/s of weights: the compute ceiling of the
 * matmul, to compare with the memory bandwidth. */
static double kernel_in_cache(const fr_model *m, int n_threads) {
    fr_tensor w = m->w.layers[0].w_gate;
    w.ne[1] = FR_MIN(w.ne[1], 1024);
    w.nbytes = fr_cpu_row_bytes(w.dtype, w.ne[0]) * (size_t)w.ne[1];
    fr_pool *pool = fr_pool_new(n_threads);
    fr_cpu_scratch *s = fr_cpu_scratch_new(1, (int)w.ne[0], fr_pool_size(pool));
    float *x = fr_xmalloc((size_t)w.ne[0] * 4), *y = fr_xmalloc((size_t)w.ne[1] * 4);
    rand_fill(x, (size_t)w.ne[0], 1.0f, 0);
    double best = 1e9;
    for (int r = 0; r < 300; r++) {
        double t0 = fr_time_s();
        fr_cpu_matmul(pool, s, y, x, &w, 1);
        double dt = fr_time_s() - t0;
        best = dt < best ? dt : best;
    }
    free(x);
    free(y);
    fr_cpu_scratch_free(s);
    fr_pool_free(pool);
    return (double)w.nbytes / best / 1e9;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_decode (MODEL | --synthetic qwen2-0.5b) [--quant q8|q4] "
                    "[--prompt N] [--gen N] [--threads N] [--bw-mib N]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *path = NULL, *quant = NULL, *synth = NULL;
    int n_prompt = 512, n_gen = 128, n_threads = 0, bw_mib = 1024;
    fr_flags f; /* base/flags.h: bad numbers are usage errors, never atoi's 0 */
    fr_flags_init(&f, "bench_decode", argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) return usage(), 0;
        if (fr_flag_str(&f, "--quant", &quant) || fr_flag_str(&f, "--synthetic", &synth) ||
            fr_flag_int(&f, "--prompt", 1, 1 << 20, &n_prompt) ||
            fr_flag_int(&f, "--gen", 1, 1 << 20, &n_gen) ||
            fr_flag_int(&f, "--threads", 0, 1024, &n_threads) ||
            fr_flag_int(&f, "--bw-mib", 1, 1 << 20, &bw_mib))
            continue;
        if (fr_flags_positional(&f) && !path) path = f.arg;
        else return fr_flags_unknown(&f), usage();
    }
    if (f.rc) return usage();
    if (!path && !synth) return usage();
    if (synth && strcmp(synth, "qwen2-0.5b")) return usage();

    fr_err err = {0};
    double t0 = fr_time_s();
    fr_model *m = synth ? synthetic_qwen2_05b() : fr_model_load(path, &err);
    if (!m) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        return 1;
    }
    double t_load = fr_time_s() - t0, t_quant = 0;
    if (quant) {
        fprintf(stderr, "quantising to %s...\n", quant);
        t0 = fr_time_s();
        if (fr_model_quantize(m, quant, &err)) {
            fprintf(stderr, "bench_decode: %s\n", err.msg);
            fr_model_free(m);
            return 1;
        }
        t_quant = fr_time_s() - t0;
    }
    const fr_hparams *hp = &m->hp;
    int max_ctx = n_prompt + n_gen + 1;
    fr_decoder_opts o = {.n_threads = n_threads};
    fr_decoder *d = fr_decoder_new_opts(m, n_prompt, max_ctx, &o, &err);
    if (!d) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        fr_model_free(m);
        return 1;
    }
    fr_kv_pool *kv = fr_kv_pool_new(hp, (max_ctx + 15) / 16 + 1, 16);
    float *logits = fr_xmalloc((size_t)hp->n_vocab * sizeof(float)); /* (n_vocab) */
    int32_t *ids = fr_xmalloc((size_t)n_prompt * 4), *pos = fr_xmalloc((size_t)n_prompt * 4);
    fr_seq **seqs = fr_xmalloc((size_t)n_prompt * sizeof(fr_seq *));
    uint8_t *want = fr_xcalloc((size_t)n_prompt, 1);
    fr_seq s = {0};
    for (int i = 0; i < n_prompt; i++) {
        ids[i] = (int32_t)((i * 7919u + 13u) % (unsigned)hp->n_vocab);
        pos[i] = i;
        seqs[i] = &s;
    }
    want[n_prompt - 1] = 1;

    /* warm-up: one token touches every weight page once (mmap'd files fault in here) */
    fprintf(stderr, "warm-up...\n");
    {
        fr_seq w = {0};
        int32_t p0 = 0;
        fr_seq *ws = &w;
        uint8_t one = 1;
        fr_seq_reserve(&w, kv, 1);
        fr_batch b = {.n_tokens = 1, .tokens = ids, .pos = &p0, .seqs = &ws, .logits = &one};
        if (fr_decoder_forward(d, kv, &b, logits, &err)) {
            fprintf(stderr, "bench_decode: %s\n", err.msg);
            return 1;
        }
        fr_seq_release(&w, kv);
    }

    fprintf(stderr, "prompt processing: %d tokens...\n", n_prompt);
    fr_seq_reserve(&s, kv, max_ctx);
    t0 = fr_time_s();
    fr_batch b = {.n_tokens = n_prompt, .tokens = ids, .pos = pos, .seqs = seqs, .logits = want};
    if (fr_decoder_forward(d, kv, &b, logits, &err)) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        return 1;
    }
    double t_pp = fr_time_s() - t0;

    /* generation: 3 runs of n_gen tokens from the same prompt state (the sequence is cut back to
     * the prompt between runs); the median is reported, the best too (the machine may be shared) */
    double runs[3];
    const float *first_logits = NULL;
    float *prompt_logits = fr_xmalloc((size_t)hp->n_vocab * sizeof(float)); /* (n_vocab) */
    memcpy(prompt_logits, logits, (size_t)hp->n_vocab * sizeof(float));
    first_logits = prompt_logits;
    for (int run = 0; run < 3; run++) {
        fprintf(stderr, "generation %d/3: %d tokens...\n", run + 1, n_gen);
        s.n_pos = n_prompt;
        memcpy(logits, first_logits, (size_t)hp->n_vocab * sizeof(float));
        t0 = fr_time_s();
        for (int g = 0; g < n_gen; g++) {
            int32_t tok = 0, p = s.n_pos;
            for (int i = 1; i < hp->n_vocab; i++)
                if (logits[i] > logits[tok]) tok = i;
            fr_seq *sp = &s;
            uint8_t one = 1;
            fr_batch bd = {.n_tokens = 1, .tokens = &tok, .pos = &p, .seqs = &sp, .logits = &one};
            if (fr_decoder_forward(d, kv, &bd, logits, &err)) {
                fprintf(stderr, "bench_decode: %s\n", err.msg);
                return 1;
            }
            if (g % 16 == 15)
                fprintf(stderr, "\r  %d/%d  %.2f tok/s", g + 1, n_gen, (g + 1) / (fr_time_s() - t0));
        }
        runs[run] = n_gen / (fr_time_s() - t0);
        fprintf(stderr, "\n");
    }
    free(prompt_logits);
    double lo = FR_MIN(runs[0], FR_MIN(runs[1], runs[2])), hi = FR_MAX(runs[0], FR_MAX(runs[1], runs[2]));
    double gen_median = runs[0] + runs[1] + runs[2] - lo - hi, gen_best = hi;
    double rss = peak_rss_mib();

    fprintf(stderr, "bandwidth (%d MiB arrays)...\n", bw_mib);
    fr_pool *pool = fr_pool_new(n_threads);
    double bw_copy = bandwidth(pool, 0, (size_t)bw_mib << 20, 5);
    double bw_read = bandwidth(pool, 1, (size_t)bw_mib << 20, 5);
    fr_pool_free(pool);
    double kern = kernel_in_cache(m, n_threads);

    /* bytes streamed per generated token: weights + the KV cache read at the mean context */
    double mean_ctx = n_prompt + n_gen / 2.0;
    double kv_bytes = 2.0 * hp->n_layer * hp->n_head_kv * hp->head_dim * 4.0 * mean_ctx;
    double per_tok = (double)m->weight_bytes + kv_bytes;
    double gen_tps = gen_median, limit_copy = bw_copy * 1e9 / per_tok,
           limit_read = bw_read * 1e9 / per_tok;
    printf("model: %s\n", m->name ? m->name : (path ? path : "?"));
    printf("quant: %s\n", quant ? quant : "none");
    printf("threads: %d\n", n_threads > 0 ? n_threads : fr_n_cores());
    printf("load_s: %.2f\n", t_load);
    printf("quantize_s: %.2f\n", t_quant);
    printf("weight_mib_per_token: %.1f\n", (double)m->weight_bytes / (1 << 20));
    printf("kv_mib_per_token: %.1f\n", kv_bytes / (1 << 20));
    printf("prompt_tokens: %d\n", n_prompt);
    printf("prompt_tok_s: %.1f\n", n_prompt / t_pp);
    printf("gen_tokens: %d\n", n_gen);
    printf("gen_tok_s: %.2f\n", gen_tps);
    printf("gen_tok_s_best: %.2f\n", gen_best);
    printf("peak_rss_mib: %.0f\n", rss);
    printf("bw_copy_gb_s: %.1f\n", bw_copy);
    printf("bw_read_gb_s: %.1f\n", bw_read);
    printf("kernel_in_cache_gb_s: %.1f\n", kern);
    printf("gen_limit_tok_s: %.2f\n", limit_copy);
    printf("gen_share_of_limit: %.0f%%\n", 100.0 * gen_tps / limit_copy);
    printf("gen_share_of_read_limit: %.0f%%\n", 100.0 * gen_tps / limit_read);
    fr_seq_release(&s, kv);
    free(logits);
    free(ids);
    free(pos);
    free(seqs);
    free(want);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
    fr_model_free(m);
    return 0;
}
