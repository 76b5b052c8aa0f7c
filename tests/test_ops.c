/* test_ops.c — every fast CPU kernel against its reference op on fresh random inputs.
 *
 * Tolerance: |fast - ref| <= abs + |ref| * eps (NaN never passes); outputs are poisoned with NaN
 * before each run so an element a kernel forgets to write fails. Also checks that a row's result
 * does not depend on the number of tokens in the call or on threading (bit for bit), records
 * OpenBLAS's behaviour for M = 1 vs M > 1, and checks the thread pool and the format round trips.
 * Inputs are fresh on every run: the generator is seeded from the clock and the seed is printed;
 * FRUGAL_TEST_SEED=N reproduces a run.
 */
#include "backend/cpu/cpu.h"
#include "t.h"

#include <stdatomic.h>

#include <time.h>

static uint64_t rng_state;
__attribute__((constructor)) static void seed_rng(void) {
    const char *e = getenv("FRUGAL_TEST_SEED");
    rng_state = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "  note: FRUGAL_TEST_SEED=%llu\n", (unsigned long long)rng_state);
    rng_state = rng_state * 0x9e3779b97f4a7c15ull + 0x12345678abcdefull;
    if (!rng_state) rng_state = 1;
}
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
}
static void poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}
/* count of elements outside abs + |ref|*eps (NaN counts) */
static int n_bad(const float *got, const float *ref, size_t n, double abs_tol, double eps) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= abs_tol + fabs((double)ref[i]) * eps)) {
            if (bad < 3)
                fprintf(stderr, "    [%zu] got %.9g ref %.9g\n", i, (double)got[i], (double)ref[i]);
            bad++;
        }
    return bad;
}

/* a random (N, K) weight matrix of dtype t; returns storage to free */
static void *make_weight(fr_tensor *w, fr_dtype t, int N, int K, float *dense) {
    fill(dense, (size_t)N * K, 1.0f);
    size_t rb = fr_cpu_row_bytes(t, K);
    uint8_t *buf = aligned_alloc(64, ((size_t)N * rb + 63) / 64 * 64);
    for (int r = 0; r < N; r++) {
        if (t == FR_DTYPE_F32) memcpy(buf + (size_t)r * rb, dense + (size_t)r * K, rb);
        else fr_cpu_quantize_row(t, dense + (size_t)r * K, buf + (size_t)r * rb, K);
    }
    memset(w, 0, sizeof *w);
    w->dtype = t;
    w->n_dims = 2;
    w->ne[0] = K;
    w->ne[1] = N;
    w->ne[2] = w->ne[3] = 1;
    w->data = buf;
    w->nbytes = (size_t)N * rb;
    return buf;
}

static const fr_dtype all_types[] = {FR_DTYPE_F32, FR_DTYPE_Q8_0, FR_DTYPE_Q4_0, FR_DTYPE_Q8,
                                     FR_DTYPE_Q4};

static void matmul_fast_vs_ref_body(void) {
    static const int Ts[] = {1, 2, 3, 4, 5, 7, 17};
    static const int Ns[] = {1, 5, 37, 128, 300};
    static const int Ks[] = {32, 96, 288, 512};
    fr_pool *pool = fr_pool_new(2);
    fr_cpu_scratch *s = fr_cpu_scratch_new(17, 512, 2);
    float *dense = malloc(300 * 512 * sizeof(float)), *x = malloc(17 * 512 * sizeof(float));
    float *y = malloc(17 * 300 * sizeof(float)), *yr = malloc(17 * 300 * sizeof(float));
    for (size_t ti = 0; ti < FR_ARRAY_LEN(all_types); ti++)
        for (size_t ni = 0; ni < FR_ARRAY_LEN(Ns); ni++)
            for (size_t ki = 0; ki < FR_ARRAY_LEN(Ks); ki++) {
                int N = Ns[ni], K = Ks[ki];
                fr_tensor w;
                void *buf = make_weight(&w, all_types[ti], N, K, dense);
                for (size_t tt = 0; tt < FR_ARRAY_LEN(Ts); tt++) {
                    int T = Ts[tt];
                    fill(x, (size_t)T * K, 2.0f);
                    poison(y, (size_t)T * N);
                    poison(yr, (size_t)T * N);
                    fr_cpu_matmul(pool, s, y, x, &w, T);
                    fr_ref_matmul(yr, x, &w, T);
                    int bad = n_bad(y, yr, (size_t)T * N, 1e-4 * sqrt((double)K), 1e-5);
                    if (bad)
                        fprintf(stderr, "  %s N=%d K=%d T=%d: %d bad\n",
                                fr_cpu_dtype_name(all_types[ti]), N, K, T, bad);
                    CHECK(bad == 0);
                }
                free(buf);
            }
    free(dense);
    free(x);
    free(y);
    free(yr);
    fr_cpu_scratch_free(s);
    fr_pool_free(pool);
}
TEST(matmul_fast_vs_ref) {
    bool was = fr_cpu_avx512();
    fprintf(stderr, "  note: own-format kernels %s\n", was ? "AVX-512 VNNI" : "AVX2");
    matmul_fast_vs_ref_body();
    if (was) { /* the AVX2 kernels as well */
        fr_cpu_use_avx512(false);
        matmul_fast_vs_ref_body();
        fr_cpu_use_avx512(true);
    }
}

/* a row's result is the same whatever the number of tokens in the call and the threading */
static void matmul_rows_independent_of_batch_body(void) {
    const int N = 203, K = 320, TMAX = 33;
    fr_pool *pool = fr_pool_new(2);
    fr_cpu_scratch *s = fr_cpu_scratch_new(TMAX, K, 2);
    float *dense = malloc((size_t)N * K * sizeof(float)), *x = malloc((size_t)TMAX * K * 4);
    float *yb = malloc((size_t)TMAX * N * 4), *y1 = malloc((size_t)N * 4);
    for (size_t ti = 0; ti < FR_ARRAY_LEN(all_types); ti++) {
        fr_tensor w;
        void *buf = make_weight(&w, all_types[ti], N, K, dense);
        fill(x, (size_t)TMAX * K, 3.0f);
        for (int T = 2; T <= TMAX; T += 7) {
            poison(yb, (size_t)T * N);
            fr_cpu_matmul(pool, s, yb, x, &w, T);
            int diff = 0;
            for (int t = 0; t < T; t++) {
                poison(y1, N);
                fr_cpu_matmul(t % 2 ? pool : NULL, s, y1, x + (size_t)t * K, &w, 1);
                diff += memcmp(y1, yb + (size_t)t * N, (size_t)N * 4) != 0;
            }
            if (diff) fprintf(stderr, "  %s T=%d: %d rows differ\n", fr_cpu_dtype_name(w.dtype), T, diff);
            CHECK(diff == 0);
        }
        free(buf);
    }
    free(dense);
    free(x);
    free(yb);
    free(y1);
    fr_cpu_scratch_free(s);
    fr_pool_free(pool);
}
TEST(matmul_rows_independent_of_batch) {
    bool was = fr_cpu_avx512();
    fprintf(stderr, "  note: own-format kernels %s\n", was ? "AVX-512 VNNI" : "AVX2");
    matmul_rows_independent_of_batch_body();
    if (was) { /* the AVX2 kernels as well */
        fr_cpu_use_avx512(false);
        matmul_rows_independent_of_batch_body();
        fr_cpu_use_avx512(true);
    }
}

/* a fused call over several matrices equals separate calls, bit for bit */
static void matmul_n_equals_separate_body(void) {
    const int K = 256, T = 5;
    static const int Ns[3] = {96, 32, 40};
    fr_pool *pool = fr_pool_new(2);
    fr_cpu_scratch *s = fr_cpu_scratch_new(T, K, 2);
    float *dense = malloc((size_t)96 * K * 4), *x = malloc((size_t)T * K * 4);
    for (size_t ti = 0; ti < FR_ARRAY_LEN(all_types); ti++) {
        fr_tensor w[3];
        void *buf[3];
        float *y[3], *y1 = malloc((size_t)T * 96 * 4);
        for (int i = 0; i < 3; i++) {
            buf[i] = make_weight(&w[i], all_types[ti], Ns[i], K, dense);
            y[i] = malloc((size_t)T * Ns[i] * 4);
            poison(y[i], (size_t)T * Ns[i]);
        }
        fill(x, (size_t)T * K, 2.0f);
        for (int tt = 1; tt <= T; tt += T - 1) {
            const fr_tensor *ws[3] = {&w[0], &w[1], &w[2]};
            fr_cpu_matmul_n(pool, s, 3, y, x, ws, tt);
            for (int i = 0; i < 3; i++) {
                fr_cpu_matmul(pool, s, y1, x, &w[i], tt);
                CHECK(memcmp(y1, y[i], (size_t)tt * Ns[i] * 4) == 0);
            }
        }
        for (int i = 0; i < 3; i++) {
            free(buf[i]);
            free(y[i]);
        }
        free(y1);
    }
    free(dense);
    free(x);
    fr_cpu_scratch_free(s);
    fr_pool_free(pool);
}
TEST(matmul_n_equals_separate) {
    bool was = fr_cpu_avx512();
    fprintf(stderr, "  note: own-format kernels %s\n", was ? "AVX-512 VNNI" : "AVX2");
    matmul_n_equals_separate_body();
    if (was) { /* the AVX2 kernels as well */
        fr_cpu_use_avx512(false);
        matmul_n_equals_separate_body();
        fr_cpu_use_avx512(true);
    }
}

/* OpenBLAS: accuracy of cblas_sgemm, and whether a row of C is the same for M = 1 and M > 1.
 * Its answer only decides which path the decoder may use; the decoder uses its own kernels. */
TEST(openblas_sgemm_behaviour) {
    const int N = 256, K = 896, M = 24;
    float *a = malloc((size_t)M * K * 4), *b = malloc((size_t)N * K * 4);
    float *c = malloc((size_t)M * N * 4), *c1 = malloc((size_t)N * 4), *cr = malloc((size_t)M * N * 4);
    fill(a, (size_t)M * K, 1.0f);
    fill(b, (size_t)N * K, 1.0f);
    poison(c, (size_t)M * N);
    fr_cpu_sgemm_nt(c, a, b, M, N, K);
    fr_tensor w = {.dtype = FR_DTYPE_F32, .n_dims = 2, .ne = {K, N, 1, 1}, .data = b,
                   .nbytes = (size_t)N * K * 4};
    fr_ref_matmul(cr, a, &w, M);
    CHECK(n_bad(c, cr, (size_t)M * N, 1e-3, 1e-5) == 0);
    int differ = 0;
    for (int m = 0; m < M; m++) {
        fr_cpu_sgemm_nt(c1, a + (size_t)m * K, b, 1, N, K);
        differ += memcmp(c1, c + (size_t)m * N, (size_t)N * 4) != 0;
    }
    fprintf(stderr, "  note: OpenBLAS sgemm rows for M=1 vs M=%d: %s (%d of %d rows differ)\n", M,
            differ ? "DIFFER" : "identical", differ, M);
    free(a);
    free(b);
    free(c);
    free(c1);
    free(cr);
}

TEST(rmsnorm_fast_vs_ref) {
    static const int ns[] = {8, 64, 896, 100};
    for (size_t i = 0; i < FR_ARRAY_LEN(ns); i++) {
        int n = ns[i], T = 5;
        float *x = malloc((size_t)T * n * 4), *g = malloc((size_t)n * 4);
        float *o = malloc((size_t)T * n * 4), *r = malloc((size_t)T * n * 4);
        fill(x, (size_t)T * n, 4.0f);
        fill(g, (size_t)n, 1.0f);
        poison(o, (size_t)T * n);
        poison(r, (size_t)T * n);
        fr_cpu_rmsnorm(o, x, g, T, n, 1e-6f);
        fr_ref_rmsnorm(r, x, g, T, n, 1e-6f);
        CHECK(n_bad(o, r, (size_t)T * n, 1e-6, 1e-5) == 0);
        free(x);
        free(g);
        free(o);
        free(r);
    }
}

TEST(rope_fast_vs_ref) {
    const int T = 6, H = 3, hd = 16, NP = 5000;
    int32_t pos[6] = {0, 1, 7, 100, 2047, 4999};
    float ff[8] = {1, 1, 1.5f, 2, 4, 8, 8, 8};
    float *cs = malloc((size_t)NP * hd / 2 * 4), *sn = malloc((size_t)NP * hd / 2 * 4);
    float *a = malloc((size_t)T * H * hd * 4), *b = malloc((size_t)T * H * hd * 4);
    for (int il = 0; il < 2; il++)
        for (int f = 0; f < 2; f++) {
            fr_cpu_rope_table(cs, sn, NP, hd, 10000.0f, f ? ff : NULL, false);
            fill(a, (size_t)T * H * hd, 2.0f);
            memcpy(b, a, (size_t)T * H * hd * 4);
            fr_cpu_rope(a, T, H, hd, pos, il, cs, sn);
            fr_ref_rope(b, T, H, hd, pos, 10000.0f, il, f ? ff : NULL);
            CHECK(n_bad(a, b, (size_t)T * H * hd, 1e-6, 1e-5) == 0);
        }
    /* a rotation keeps each pair's norm, and position 0 is the identity */
    fill(a, (size_t)H * hd, 1.0f);
    memcpy(b, a, (size_t)H * hd * 4);
    int32_t p0 = 0;
    fr_ref_rope(b, 1, H, hd, &p0, 10000.0f, false, NULL);
    CHECK(memcmp(a, b, (size_t)H * hd * 4) == 0);
    free(cs);
    free(sn);
    free(a);
    free(b);
}

TEST(attention_fast_vs_ref) {
    /* paged cache: 2 layers, blocks of 4 tokens, block tables in shuffled order */
    const int n_layer = 2, bs = 4, n_blocks = 40;
    static const int dims[][3] = {{4, 2, 16}, {8, 2, 8}, {4, 4, 12}}; /* n_head, n_kv, hd */
    for (size_t di = 0; di < FR_ARRAY_LEN(dims); di++) {
        int H = dims[di][0], HK = dims[di][1], hd = dims[di][2], kvd = HK * hd;
        size_t tot = (size_t)n_blocks * n_layer * bs * kvd;
        float *k = malloc(tot * 4), *v = malloc(tot * 4);
        fill(k, tot, 2.0f);
        fill(v, tot, 1.0f);
        int tab_a[10], tab_b[10];
        for (int i = 0; i < 10; i++) {
            tab_a[i] = (i * 7 + 3) % n_blocks;
            tab_b[i] = 39 - i * 2;
        }
        const int T = 5;
        int32_t pos[5] = {0, 3, 4, 17, 39};
        const int *tabs[5] = {tab_a, tab_b, tab_a, tab_b, tab_a};
        float *q = malloc((size_t)T * H * hd * 4), *o = malloc((size_t)T * H * hd * 4),
              *r = malloc((size_t)T * H * hd * 4), *sc = malloc(2 * 64 * 4);
        fill(q, (size_t)T * H * hd, 2.0f);
        fr_pool *pool = fr_pool_new(2);
        fr_kv_view kv = {k, v, n_layer, 1, bs, kvd};
        poison(o, (size_t)T * H * hd);
        fr_cpu_attention(pool, o, q, &kv, tabs, pos, T, H, HK, hd, sc, 64);
        for (int t = 0; t < T; t++)
            fr_ref_attention(r + (size_t)t * H * hd, q + (size_t)t * H * hd, &kv, tabs[t], pos[t],
                             H, HK, hd);
        CHECK(n_bad(o, r, (size_t)T * H * hd, 1e-5, 1e-4) == 0);
        fr_pool_free(pool);
        free(k);
        free(v);
        free(q);
        free(o);
        free(r);
        free(sc);
    }
}

TEST(swiglu_softmax) {
    const int n = 1000;
    float *g = malloc(n * 4), *u = malloc(n * 4), *o = malloc(n * 4), *r = malloc(n * 4);
    fill(g, n, 8.0f);
    fill(u, n, 2.0f);
    poison(o, n);
    fr_cpu_swiglu(o, g, u, n);
    fr_ref_swiglu(r, g, u, n);
    CHECK(n_bad(o, r, n, 1e-6, 1e-5) == 0);
    fill(g, n, 30.0f);
    memcpy(o, g, n * 4);
    fr_ref_softmax(o, n);
    double sum = 0, mx = -1e30;
    for (int i = 0; i < n; i++) {
        sum += o[i];
        mx = g[i] > mx ? g[i] : mx;
    }
    CHECK_NEAR(sum, 1.0, 1e-5);
    double z = 0;
    for (int i = 0; i < n; i++) z += exp(g[i] - mx);
    CHECK_NEAR(o[7], exp(g[7] - mx) / z, 1e-7);
    free(g);
    free(u);
    free(o);
    free(r);
}

TEST(format_round_trips) {
    const int K = 256;
    float x[256], y[256];
    for (size_t ti = 1; ti < FR_ARRAY_LEN(all_types); ti++) {
        fr_dtype t = all_types[ti];
        fill(x, K, 1.0f);
        x[5] = 0; /* a zero group must survive as well */
        for (int j = 32; j < 64; j++) x[j] = 0;
        uint8_t buf[1024];
        fr_cpu_quantize_row(t, x, buf, K);
        fr_cpu_dequantize_row(t, buf, y, K);
        double worst = 0;
        for (int j = 0; j < K; j++) worst = fmax(worst, fabs((double)x[j] - y[j]));
        /* half a step: q8 amax/127/2, q4_0 amax/8/2 (+ clamp), q4 range/15/2 */
        double bound = (t == FR_DTYPE_Q8 || t == FR_DTYPE_Q8_0) ? 1.0 / 254 + 1e-3 : 1.0 / 8 + 1e-3;
        if (worst > bound) fprintf(stderr, "  %s worst %g\n", fr_cpu_dtype_name(t), worst);
        CHECK(worst <= bound);
        for (int j = 32; j < 64; j++) CHECK(y[j] == 0.0f);
    }
    /* GGUF Q8_0 dequantisation of a hand-made block */
    fr_block_q8_0 b = {.d = fr_f32_to_f16(0.5f)};
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j - 16);
    fr_cpu_dequantize_row(FR_DTYPE_Q8_0, &b, y, 32);
    CHECK(y[0] == -8.0f && y[31] == 7.5f);
    fr_block_q4_0 b4 = {.d = fr_f32_to_f16(2.0f)};
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    fr_cpu_dequantize_row(FR_DTYPE_Q4_0, &b4, y, 32);
    CHECK(y[0] == -16.0f && y[1] == -14.0f && y[16] == 14.0f && y[31] == -16.0f);
    CHECK(fr_cpu_row_bytes(FR_DTYPE_Q8, 896) % 64 == 0);
    CHECK(fr_cpu_row_bytes(FR_DTYPE_Q4, 896) % 64 == 0);
    CHECK_STR(fr_cpu_dtype_name(FR_DTYPE_Q4), "q4");
}

typedef struct pool_ctx {
    atomic_int calls[4];
    atomic_long sum;
} pool_ctx;
static void pool_fn(void *arg, int ith, int nth) {
    pool_ctx *c = arg;
    atomic_fetch_add(&c->calls[ith], 1);
    atomic_fetch_add(&c->sum, nth);
}

TEST(thread_pool) {
    for (int n = 1; n <= 3; n++) {
        fr_pool *p = fr_pool_new(n);
        CHECK_EQ_INT(fr_pool_size(p), n);
        pool_ctx c;
        memset(&c, 0, sizeof c);
        for (int i = 0; i < 1000; i++) fr_pool_run(p, pool_fn, &c);
        for (int i = 0; i < n; i++) CHECK_EQ_INT(atomic_load(&c.calls[i]), 1000);
        CHECK_EQ_INT(atomic_load(&c.sum), 1000L * n * n);
        fr_pool_free(p);
    }
}

int main(void) { return t_main(); }
