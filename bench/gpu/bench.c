/* bench.c — the CUDA backend's benchmarks on a random-weight model shaped like Llama-3-8B
 * (hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336, vocab 128256); weights are generated
 * on the device (hash-based uniform values, never zeros), so no 16 GB file is needed.
 *
 *   gpu-bench [--quick] [--out FILE]
 *
 * Measures, each through the public engine API (fr_cuda_forward_sample: host packs the batch,
 * one H2D copy, graph replay or eager launches, on-device argmax, ids back, synchronise):
 *   ceilings: device-to-device copy (bytes read + written) and a cuBLAS bf16 8192^3 GEMM;
 *   prefill of a 512-token prompt (bf16);
 *   batch-1 decode of 128 tokens after a 512-token prompt (bf16, INT8, INT4 weights; graphs on,
 *   and bf16 with graphs off);
 *   32 sequences decoding together (aggregate tokens/s);
 *   GPU energy per generated token from NVML's total-energy counter (dlopen libnvidia-ml.so.1);
 *   the number of 2,048-token sequences the KV pool holds, bf16 KV vs int8 KV.
 * Prints the full log, then a summary table with the roofline arithmetic of each figure.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include <cublas_v2.h>
#include "base/base.h"
#include "meter/sources.h"


static FILE *logf_;
#define LOG(...)                                                                             \
    do {                                                                                     \
        printf(__VA_ARGS__);                                                                 \
        fflush(stdout);                                                                      \
        if (logf_) fprintf(logf_, __VA_ARGS__);                                              \
    } while (0)

/* ---------------------------------------------------------------- NVML energy */
/* NVML through the meter's loader (src/meter/nvml.c); GPU 0 of NVML is taken as CUDA device 0
 * (the benchmark runs on one GPU). */
static fr_nvml *nvml;
static void nvml_open(void) {
    char why[256];
    nvml = fr_nvml_open("libnvidia-ml.so.1", why, sizeof why);
    if (!nvml) LOG("NVML: %s (no energy figures)\n", why);
}
static double nvml_joules(void) {
    fr_nvml_reading r;
    if (!nvml) return NAN;
    fr_nvml_read(nvml, 0, &r);
    return r.energy_rc == FR_NVML_SUCCESS ? (double)r.energy_mj / 1000.0 : NAN;
}
static void nvml_clocks(char *buf, size_t n) {
    fr_nvml_reading r;
    if (!nvml) {
        snprintf(buf, n, "NVML unavailable");
        return;
    }
    fr_nvml_read(nvml, 0, &r);
    snprintf(buf, n, "SM %u MHz, power %.0f W", r.clock_rc == FR_NVML_SUCCESS ? r.sm_mhz : 0,
             r.power_rc == FR_NVML_SUCCESS ? r.power_mw / 1000.0 : 0.0);
}

/* ---------------------------------------------------------------- helpers */
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static int rtok(int V) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (int)(rs % (uint64_t)V);
}
static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct seqset {
    fr_seq *s;
    int n;
    int next_block;
} seqset;
static void ss_init(seqset *ss, int n) {
    ss->s = calloc((size_t)n, sizeof(fr_seq));
    ss->n = n;
    ss->next_block = 1;
}
static void ss_reserve(seqset *ss, int i, int n_pos) {
    fr_seq *s = &ss->s[i];
    const int need = (n_pos + 15) / 16;
    if (need > s->cap_blocks) {
        s->cap_blocks = need + 16;
        s->blocks = realloc(s->blocks, (size_t)s->cap_blocks * sizeof(int));
    }
    while (s->n_blocks < need) s->blocks[s->n_blocks++] = ss->next_block++;
}
static void ss_free(seqset *ss) {
    for (int i = 0; i < ss->n; i++) free(ss->s[i].blocks);
    free(ss->s);
}


static void die(const char *what, const fr_err *e) {
    fprintf(stderr, "gpu-bench: %s: %s\n", what, e->msg);
    exit(1);
}

/* prefill seq i of ss with n random tokens (chunks of max 512); returns seconds */
static double prefill(fr_cuda *c, seqset *ss, int i, int n) {
    const fr_hparams *hp = fr_cuda_hparams(c);
    int32_t tok[512], pos[512], id;
    fr_seq *sp[512];
    uint8_t want[512];
    ss_reserve(ss, i, ss->s[i].n_pos + n);
    fr_sampling g;
    memset(&g, 0, sizeof g);
    g.temperature = 0;
    fr_err err;
    const double t0 = fr_time_s();
    for (int off = 0; off < n; off += 512) {
        const int m = FR_MIN(512, n - off);
        for (int j = 0; j < m; j++) {
            tok[j] = rtok(hp->n_vocab);
            pos[j] = ss->s[i].n_pos + j;
            sp[j] = &ss->s[i];
            want[j] = j == m - 1;
        }
        fr_batch b = {.n_tokens = m, .tokens = tok, .pos = pos, .seqs = sp, .logits = want};
        if (fr_cuda_forward_sample(c, &b, &g, 1, NULL, &id, NULL, &err)) die("prefill", &err);
    }
    return fr_time_s() - t0;
}

/* decode `steps` tokens for sequences [0, B) together; greedy on the device. Returns seconds and
 * fills *joules. pipe: step s + 1 is submitted before step s's ids are collected, its tokens fed
 * on the device (fr_cuda_submit / fr_cuda_collect); else one synchronous call a step. */
static double decode_loop(fr_cuda *c, seqset *ss, int B, int steps, double *joules, bool pipe) {
    int32_t tok[64], pos[64], ids[64];
    fr_seq *sp[64];
    uint8_t want[64];
    fr_sampling g;
    memset(&g, 0, sizeof g);
    fr_err err;
    for (int i = 0; i < B; i++) {
        ss_reserve(ss, i, ss->s[i].n_pos + steps + 1);
        ids[i] = 1;
    }
    fr_cuda_sync(c);
    const double j0 = nvml_joules(), t0 = fr_time_s();
    for (int s = 0; s <= steps; s++) {
        if (s < steps) {
            for (int i = 0; i < B; i++) {
                tok[i] = pipe && s ? 0 : ids[i];
                pos[i] = ss->s[i].n_pos;
                sp[i] = &ss->s[i];
                want[i] = 1;
            }
            fr_batch b = {.n_tokens = B, .tokens = tok, .pos = pos, .seqs = sp, .logits = want};
            if (!pipe) {
                if (fr_cuda_forward_sample(c, &b, &g, 1, NULL, ids, NULL, &err)) die("decode", &err);
            } else if (fr_cuda_submit(c, &b, &g, 1, NULL, s > 0, &err)) {
                die("pipelined decode", &err);
            }
        }
        if (pipe && s > 0 && fr_cuda_collect(c, ids, &err) != B) die("pipelined collect", &err);
    }
    const double t = fr_time_s() - t0;
    if (joules) *joules = nvml_joules() - j0;
    return t;
}
static double decode(fr_cuda *c, seqset *ss, int B, int steps, double *joules) {
    return decode_loop(c, ss, B, steps, joules, false);
}
static double decode_pipe(fr_cuda *c, seqset *ss, int B, int steps, double *joules) {
    return decode_loop(c, ss, B, steps, joules, true);
}

static fr_hparams llama8b(void);
/* An engine of the 8B shape with weight format wi (0 bf16, 1 INT8, 2 INT4) and room for a few
 * batch-1 steps (trace: the timeline probes on), and s1's one sequence prefilled with 512
 * tokens. */
static fr_cuda *engine_b1(int wi, seqset *s1, int trace) {
    fr_hparams hq = llama8b();
    fr_err err;
    fr_cuda_config cfg = fr_cuda_config_default();
    cfg.weights = wi == 0 ? FR_CUDA_W_BF16 : wi == 1 ? FR_CUDA_W_INT8 : FR_CUDA_W_INT4;
    cfg.max_tokens = 512;
    cfg.max_seqs = 4;
    cfg.max_ctx = 2048;
    cfg.trace = trace;
    fr_cuda *c = fr_cuda_new_random(&hq, &cfg, 1, &err);
    if (!c) die("batch-1 engine", &err);
    ss_init(s1, 1);
    prefill(c, s1, 0, 512);
    return c;
}

static fr_hparams llama8b(void) {
    fr_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = FR_ARCH_LLAMA;
    hp.n_vocab = 128256;
    hp.n_embd = 4096;
    hp.n_layer = 32;
    hp.n_head = 32;
    hp.n_head_kv = 8;
    hp.head_dim = 128;
    hp.n_ff = 14336;
    hp.n_ctx_train = 8192;
    hp.rms_eps = 1e-5f;
    hp.rope_theta = 500000.f;
    hp.bos_id = hp.eos_id = -1;
    return hp;
}


/* ---------------------------------------------------------------- kernel breakdown */
/* Times one launcher call with events: warm-up 3, then the median of `reps`; `rot` copies of the
 * weights are cycled so a matrix smaller than L2 is still read from HBM. */
typedef void (*launch_fn)(void *ctx, int copy);
static bool g_profile; /* --profile: one launch per kernel, for ncu */
static double time_us(launch_fn fn, void *ctx, int rot, int reps) {
    if (g_profile) {
        fn(ctx, 0);
        FR_CK(cudaDeviceSynchronize());
        return 0;
    }
    cudaEvent_t e0, e1;
    FR_CK(cudaEventCreate(&e0));
    FR_CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) fn(ctx, i % rot);
    double t[64];
    if (reps > 64) reps = 64;
    for (int i = 0; i < reps; i++) {
        FR_CK(cudaEventRecord(e0, 0));
        fn(ctx, i % rot);
        FR_CK(cudaEventRecord(e1, 0));
        FR_CK(cudaEventSynchronize(e1));
        float ms;
        FR_CK(cudaEventElapsedTime(&ms, e0, e1));
        t[i] = ms * 1e3;
    }
    FR_CK(cudaEventDestroy(e0));
    FR_CK(cudaEventDestroy(e1));
    return median(t, reps);
}

static void stream_call(void *w, uint32_t *sz, int M, int K, int bits, const uint16_t *x, void *o,
                        int ldo, int mode, cudaStream_t st);
typedef struct gemv_ctx {
    int M, K, bits, nb, mode, rot;
    void *w[8];
    uint32_t *sz[8];
    uint16_t *x;
    void *y;
    cublasHandle_t cub;
} gemv_ctx;
static bool g_stream_kernel; /* gemv_bench times frk_gemv_stream instead of the GEMV kernels */
static void run_gemv(void *p, int copy) {
    gemv_ctx *g = p;
    const int ldo = g->mode == FRK_OUT_SWIGLU ? g->M / 2 : g->M;
    if (g_stream_kernel && g->nb == 1)
        stream_call(g->w[copy], g->sz[copy], g->M, g->K, g->bits, g->x, g->y, ldo, g->mode, 0);
    else if (g->bits == 16)
        frk_gemv_bf16(g->w[copy], g->M, g->K, g->x, g->K, g->nb, g->y, ldo, g->mode, 0);
    else
        frk_gemv_q(g->w[copy], g->sz[copy], g->M, g->K, g->bits, g->x, g->K, g->nb, g->y, ldo, g->mode, 0);
}
static void run_cublas(void *p, int copy) {
    gemv_ctx *g = p;
    const float a = 1.f, b = 0.f;
    if (cublasGemmEx(g->cub, CUBLAS_OP_T, CUBLAS_OP_N, g->M, g->nb, g->K, &a, g->w[copy], CUDA_R_16BF,
                     g->K, g->x, CUDA_R_16BF, g->K, &b, g->y, CUDA_R_32F, g->M, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx failed\n");
        abort();
    }
}

static void gemv_bench(const char *name, int M, int K, int bits, int nb, int mode, bool cublas,
                       cublasHandle_t cub, double *us_out) {
    gemv_ctx g;
    memset(&g, 0, sizeof g);
    g.M = M, g.K = K, g.bits = bits, g.nb = nb, g.mode = mode, g.cub = cub;
    const size_t wb = bits == 16 ? (size_t)M * K * 2 : frk_quant_bytes(M, K, bits);
    const size_t szb = bits == 16 ? 0 : frk_quant_sz_count(M, K) * 4;
    g.rot = (int)FR_MIN(8, FR_MAX(1, (int)((400u << 20) / (wb + szb)) + 1));
    for (int i = 0; i < g.rot; i++) {
        FR_CK(cudaMalloc(&g.w[i], wb));
        if (bits == 16)
            frk_fill_bf16(g.w[i], (size_t)M * K, 0.02f, 0.f, 77 + i, 0);
        else {
            FR_CK(cudaMalloc((void **)&g.sz[i], szb));
            frk_quant_random(g.w[i], g.sz[i], M, K, bits, 0.02f, 77 + i, 0);
        }
    }
    FR_CK(cudaMalloc((void **)&g.x, (size_t)nb * K * 2));
    frk_fill_bf16(g.x, (size_t)nb * K, 1.f, 0.f, 5, 0);
    FR_CK(cudaMalloc(&g.y, (size_t)nb * M * 4));
    const double us = time_us(cublas ? run_cublas : run_gemv, &g, g.rot, 40);
    const double bytes = (double)(wb + szb) + (double)nb * K * 2 + (double)nb * M * 4;
    LOG("  %-44s %8.1f us  %7.0f GB/s\n", name, us, bytes / (us * 1e-6) / 1e9);
    if (us_out) *us_out = us;
    for (int i = 0; i < g.rot; i++) {
        FR_CK(cudaFree(g.w[i]));
        if (g.sz[i]) FR_CK(cudaFree(g.sz[i]));
    }
    FR_CK(cudaFree(g.x));
    FR_CK(cudaFree(g.y));
}

typedef struct attn_ctx {
    frk_attn_args a;
    int prefill;
} attn_ctx;
static void run_attn(void *p, int copy) {
    attn_ctx *c = p;
    (void)copy;
    if (c->prefill == 1)
        frk_attention_prefill(&c->a, 0, 0);
    else
        frk_attention(&c->a, 0);
}
/* cluster: frk_attn_args.cluster (the cluster kernel where it applies, 0 off). */
static void attn_bench(const char *name, int T, int ctx, int n_split, int prefill, int kv_int8, int cluster,
                       double *us_out) {
    const int H = 32, Hkv = 8, D = 128, L = 1, bts = (ctx + 15) / 16;
    const int nseq = prefill ? 1 : T; /* prefill 1: mma kernel, 2: scalar kernel, same run */
    const int NB = nseq * bts + 1;
    const size_t pool = (size_t)NB * L * Hkv * 16 * D * (kv_int8 ? 1 : 2);
    attn_ctx c;
    memset(&c, 0, sizeof c);
    void *kc, *vc, *ks, *vs, *q, *out, *part, *bt, *pos, *seq;
    FR_CK(cudaMalloc(&kc, pool));
    FR_CK(cudaMalloc(&vc, pool));
    frk_fill_bf16(kc, pool / 2, 1.f, 0.f, 1, 0);
    frk_fill_bf16(vc, pool / 2, 1.f, 0.f, 2, 0);
    FR_CK(cudaMalloc(&ks, (size_t)NB * Hkv * 4));
    FR_CK(cudaMalloc(&vs, (size_t)NB * Hkv * 4));
    frk_fill_f32(ks, (size_t)NB * Hkv, 0.001f, 0.01f, 3, 0);
    frk_fill_f32(vs, (size_t)NB * Hkv, 0.001f, 0.01f, 4, 0);
    FR_CK(cudaMalloc(&q, (size_t)T * H * D * 2));
    frk_fill_bf16(q, (size_t)T * H * D, 1.f, 0.f, 5, 0);
    FR_CK(cudaMalloc(&out, (size_t)T * H * D * 2));
    FR_CK(cudaMalloc(&part, (size_t)T * H * n_split * (D + 2) * 4));
    int32_t *hbt = malloc((size_t)nseq * bts * 4), *hpos = malloc((size_t)T * 4), *hseq = malloc((size_t)T * 4);
    for (int i = 0; i < nseq * bts; i++) hbt[i] = 1 + i;
    for (int t = 0; t < T; t++) {
        hpos[t] = prefill ? t : ctx - 1;
        hseq[t] = prefill ? 0 : t;
    }
    FR_CK(cudaMalloc(&bt, (size_t)nseq * bts * 4));
    FR_CK(cudaMalloc(&pos, (size_t)T * 4));
    FR_CK(cudaMalloc(&seq, (size_t)T * 4));
    FR_CK(cudaMemcpy(bt, hbt, (size_t)nseq * bts * 4, cudaMemcpyHostToDevice));
    FR_CK(cudaMemcpy(pos, hpos, (size_t)T * 4, cudaMemcpyHostToDevice));
    FR_CK(cudaMemcpy(seq, hseq, (size_t)T * 4, cudaMemcpyHostToDevice));
    frk_attn_args *a = &c.a;
    a->q = q, a->kc = kc, a->vc = vc, a->kscale = ks, a->vscale = vs;
    a->pos = pos, a->tok_seq = seq, a->block_tables = bt;
    a->T = T, a->H = H, a->Hkv = Hkv, a->D = D, a->bt_stride = bts, a->layer = 0, a->n_layer = L;
    a->kv_int8 = kv_int8, a->n_split = n_split, a->part = part, a->out = out;
    a->cluster = cluster;
    c.prefill = prefill;
    const double us = time_us(run_attn, &c, 1, 30);
    const double kvb = prefill ? 0 : (double)T * ctx * Hkv * D * 2 * (kv_int8 ? 1 : 2);
    LOG("  %-44s %8.1f us  %7.0f GB/s of KV\n", name, us, kvb / (us * 1e-6) / 1e9);
    if (us_out) *us_out = us;
    cudaFree(kc), cudaFree(vc), cudaFree(ks), cudaFree(vs), cudaFree(q), cudaFree(out);
    cudaFree(part), cudaFree(bt), cudaFree(pos), cudaFree(seq);
    free(hbt), free(hpos), free(hseq);
}

typedef struct misc_ctx {
    float *x, *w;
    uint16_t *out;
    int n, E;
} misc_ctx;
static void run_rms(void *p, int copy) {
    misc_ctx *m = p;
    (void)copy;
    frk_rmsnorm(m->x, m->w, NULL, m->n, m->E, 1e-5f, m->out, 0);
}


/* One streamed GEMV (k_stream.cu) of one bf16 input row, in the plan of the Llama-3-8B product
 * of that shape (plan.cu). */
static void stream_call(void *w, uint32_t *sz, int M, int K, int bits, const uint16_t *x, void *o,
                        int ldo, int mode, cudaStream_t st) {
    frk_gemv_args a;
    memset(&a, 0, sizeof a);
    a.W = w, a.sz = sz, a.M = M, a.K = K, a.bits = bits, a.x = x, a.ldx = K, a.nb = 1;
    a.out = o, a.ldo = ldo, a.mode = mode;
    const int prod = mode == FRK_OUT_SWIGLU ? FRK_P_GU
                     : mode == FRK_OUT_ACC  ? (K > 8192 ? FRK_P_DOWN : FRK_P_O)
                                            : (M > 65536 ? FRK_P_HEAD : FRK_P_QKV);
    a.plan = *frk_plan_stream(bits, prod);
    frk_gemv_stream(&a, st);
}

/* The 32-layer chain of decode GEMVs (qkv, o, gate_up+SwiGLU, down) + LM head, captured as one
 * graph and replayed: the GEMV part of a batch-1 decode step without attention and norms, through
 * the GEMV kernels and through the streamed kernels. */
static void gemv_chain(int bits) {
    const int L = 32, E = 4096, F = 14336, V = 128256, Wq = 6144;
    const int Ms[4] = {Wq, E, 2 * F, E}, Ks[4] = {E, E, E, F}, modes[4] = {FRK_OUT_STORE, FRK_OUT_ACC, FRK_OUT_SWIGLU, FRK_OUT_ACC};
    void *w[32][4], *hw;
    uint32_t *sz[32][4], *hsz = NULL;
    size_t total = 0;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < 4; i++) {
            const size_t wb = bits == 16 ? (size_t)Ms[i] * Ks[i] * 2 : frk_quant_bytes(Ms[i], Ks[i], bits);
            FR_CK(cudaMalloc(&w[l][i], wb));
            total += wb;
            sz[l][i] = NULL;
            if (bits == 16) {
                frk_fill_bf16(w[l][i], (size_t)Ms[i] * Ks[i], 0.02f, 0.f, 100 + l * 4 + i, 0);
            } else {
                FR_CK(cudaMalloc((void **)&sz[l][i], frk_quant_sz_count(Ms[i], Ks[i]) * 4));
                frk_quant_random(w[l][i], sz[l][i], Ms[i], Ks[i], bits, 0.02f, 100 + l * 4 + i, 0);
                total += frk_quant_sz_count(Ms[i], Ks[i]) * 4;
            }
        }
    const size_t hb = bits == 16 ? (size_t)V * E * 2 : frk_quant_bytes(V, E, bits);
    FR_CK(cudaMalloc(&hw, hb));
    total += hb;
    if (bits == 16) frk_fill_bf16(hw, (size_t)V * E, 0.02f, 0.f, 99, 0);
    else {
        FR_CK(cudaMalloc((void **)&hsz, frk_quant_sz_count(V, E) * 4));
        frk_quant_random(hw, hsz, V, E, bits, 0.02f, 99, 0);
        total += frk_quant_sz_count(V, E) * 4;
    }
    uint16_t *xn, *act;
    float *y, *x, *lg;
    FR_CK(cudaMalloc((void **)&xn, (size_t)F * 2));
    FR_CK(cudaMalloc((void **)&act, (size_t)F * 2));
    FR_CK(cudaMalloc((void **)&y, (size_t)2 * F * 4));
    FR_CK(cudaMalloc((void **)&x, (size_t)E * 4));
    FR_CK(cudaMalloc((void **)&lg, (size_t)V * 4));
    frk_fill_bf16(xn, F, 1.f, 0.f, 7, 0);
    frk_fill_bf16(act, F, 1.f, 0.f, 8, 0);
    FR_CK(cudaMemset(x, 0, (size_t)E * 4));
    cudaStream_t st;
    FR_CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    FR_CK(cudaDeviceSynchronize());
    for (int v = 0; v < 2; v++) {
            const bool stream = v == 1;
            cudaGraph_t g;
            cudaGraphExec_t ge;
            FR_CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            for (int l = 0; l < L; l++)
                for (int i = 0; i < 4; i++) {
                    const uint16_t *in = i == 3 ? act : xn;
                    void *o = i == 0 ? (void *)y : i == 2 ? (void *)act : (void *)x;
                    const int ldo = modes[i] == FRK_OUT_SWIGLU ? Ms[i] / 2 : Ms[i];
                    if (stream)
                        stream_call(w[l][i], sz[l][i], Ms[i], Ks[i], bits, in, o, ldo, modes[i], st);
                    else if (bits == 16)
                        frk_gemv_bf16(w[l][i], Ms[i], Ks[i], in, Ks[i], 1, o, ldo, modes[i], st);
                    else
                        frk_gemv_q(w[l][i], sz[l][i], Ms[i], Ks[i], bits, in, Ks[i], 1, o, ldo, modes[i], st);
                }
            if (stream)
                stream_call(hw, hsz, V, E, bits, xn, lg, V, FRK_OUT_STORE, st);
            else if (bits == 16)
                frk_gemv_bf16(hw, V, E, xn, E, 1, lg, V, FRK_OUT_STORE, st);
            else
                frk_gemv_q(hw, hsz, V, E, bits, xn, E, 1, lg, V, FRK_OUT_STORE, st);
            FR_CK(cudaStreamEndCapture(st, &g));
            FR_CK(cudaGraphInstantiate(&ge, g, 0));
            cudaEvent_t e0, e1;
            FR_CK(cudaEventCreate(&e0));
            FR_CK(cudaEventCreate(&e1));
            double t[7];
            for (int r = 0; r < 9; r++) {
                FR_CK(cudaEventRecord(e0, st));
                FR_CK(cudaGraphLaunch(ge, st));
                FR_CK(cudaEventRecord(e1, st));
                FR_CK(cudaEventSynchronize(e1));
                float ms;
                FR_CK(cudaEventElapsedTime(&ms, e0, e1));
                if (r >= 2) t[r - 2] = ms;
            }
            const double ms = median(t, 7);
            LOG("  GEMV chain %s %s: %.3f ms/token, %.2f TB/s (%.2f GB)\n", bits == 16 ? "bf16" : bits == 8 ? "int8" : "int4",
                stream ? "streamed" : "GEMV kernels", ms, total / (ms * 1e-3) / 1e12, total / 1e9);
            FR_CK(cudaEventDestroy(e0));
            FR_CK(cudaEventDestroy(e1));
            FR_CK(cudaGraphExecDestroy(ge));
            FR_CK(cudaGraphDestroy(g));
        }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < 4; i++) {
            FR_CK(cudaFree(w[l][i]));
            if (sz[l][i]) FR_CK(cudaFree(sz[l][i]));
        }
    FR_CK(cudaFree(hw));
    if (hsz) FR_CK(cudaFree(hsz));
    cudaFree(xn), cudaFree(act), cudaFree(y), cudaFree(x), cudaFree(lg);
    FR_CK(cudaStreamDestroy(st));
}

/* --timeline: a few batch-1 decode steps (graphs) per weight format on the 8B shape after a
 * 512-token prompt, for a system profiler's kernel timeline (nsys profile --cuda-graph-trace=node).
 * Each format's steps are bracketed by a 50 ms idle gap so they can be told apart. */
static void timeline(void) {
    const fr_hparams hq = llama8b();
    for (int wi = 0; wi < 3; wi++) {
        seqset s1;
        fr_cuda *c = engine_b1(wi, &s1, 1);
        decode(c, &s1, 1, 4, NULL);
        fr_cuda_sync(c);
        const double t0 = fr_time_s();
        while (fr_time_s() - t0 < 0.05) {}
        const double t = decode(c, &s1, 1, 4, NULL);
        const char *fmt = wi == 0 ? "bf16" : wi == 1 ? "int8" : "int4";
        printf("timeline %s: 4 steps, %.3f ms/token (traced)\n", fmt, 1e3 * t / 4);
        /* the probes: one traced step after a traced warm-up step (graph capture) */
        const int L = hq.n_layer, ns = fr_cuda_trace_slots(c);
        if (ns > 0) {
            decode(c, &s1, 1, 2, NULL);
            const double tt = decode(c, &s1, 1, 1, NULL);
            const int TW = FR_CUDA_TRACE_W;
            unsigned long long *w = malloc((size_t)ns * TW * 8);
            fr_cuda_trace_read(c, w, ns * TW);
            const unsigned long long g0 = w[0];
            /* per slot (fields of fr_cuda_trace_read, ns after the first qkv entry); ~0 = did not
             * run or not marked; latest marks are stored as complements */
            double sum[7][4] = {0}, sx[7][6] = {0};
            int cnt[7] = {0}, cx[7][6] = {0};
            static const char *kn[7] = {"qkv", "attention", "combine", "o", "gate/up", "down", "head"};
            for (int k = 0; k < ns; k++) {
                const unsigned long long *e = w + (size_t)TW * k;
                if (e[0] == ~0ull || e[2] == ~0ull) continue;
#define TL_AT(f, late) (e[f] == ~0ull ? -1e9 : (double)(((late) ? ~e[f] : e[f]) - g0) / 1e3)
                const double en = TL_AT(0, 0), wt = TL_AT(1, 0), ex = TL_AT(2, 1);
                const double pro = TL_AT(3, 1), arr = TL_AT(4, 1), fe = TL_AT(5, 0), lw = TL_AT(6, 1), le = TL_AT(7, 1);
#undef TL_AT
                const int ty = k == 6 * L ? 6 : k % 6;
                /* the previous slot that ran: its end, for the hand-off gap */
                double pe = -1;
                for (int q = k - 1; q >= 0; q--)
                    if (w[(size_t)TW * q] != ~0ull && w[(size_t)TW * q + 2] != ~0ull) {
                        pe = (double)(~w[(size_t)TW * q + 2] - g0) / 1e3;
                        break;
                    }
                if (k / 6 == L / 2 || k == 6 * L)
                    printf("  %s layer %2d %-9s entry %9.2f  past wait %9.2f  end %9.2f us  (busy %6.2f, "
                           "from previous end %6.2f)\n", fmt, k / 6, kn[ty], en, wt, ex, ex - wt, pe >= 0 ? wt - pe : 0);
                if ((k / 6 >= 1 && k / 6 < L - 1) || k == 6 * L) {
                    sum[ty][0] += ex - wt;
                    sum[ty][1] += pe >= 0 ? wt - pe : 0;
                    sum[ty][2] += pe >= 0 ? pe - en : 0;
                    sum[ty][3] += ex - (pe >= 0 ? pe : wt);
                    cnt[ty]++;
                    /* the extra marks, relative to the first block past its wait */
                    const double xv[6] = {pe >= 0 && le > -1e8 ? le - pe : -1e9, lw - wt, pro - wt, arr - wt, fe - wt, arr > -1e8 ? ex - arr : -1e9};
                    for (int f = 0; f < 6; f++)
                        if (xv[f] > -1e8) sx[ty][f] += xv[f], cx[ty][f]++;
                }
            }
            for (int ty = 0; ty < 7; ty++)
                if (cnt[ty]) {
                    printf("  %s mean %-9s past-wait..end %7.2f us, previous end..past wait %6.2f us, entered %6.2f us "
                           "before the previous end, previous end..end %7.2f us (%d)\n",
                           fmt, kn[ty], sum[ty][0] / cnt[ty], sum[ty][1] / cnt[ty], sum[ty][2] / cnt[ty],
                           sum[ty][3] / cnt[ty], cnt[ty]);
                    double m[6];
                    for (int f = 0; f < 6; f++) m[f] = cx[ty][f] ? sx[ty][f] / cx[ty][f] : NAN;
                    printf("  %s  more %-9s last block in %6.2f us after the previous end; after the first past wait: "
                           "last past wait %6.2f, last prologue end %6.2f, last stage in %6.2f, first end %6.2f; "
                           "last stage in..end %6.2f us\n", fmt, kn[ty], m[0], m[1], m[2], m[3], m[4], m[5]);
                }
            printf("  %s traced step: %.3f ms wall; first qkv entry .. head end %.3f ms\n", fmt, 1e3 * tt,
                   w[(size_t)TW * 6 * L + 2] != ~0ull ? (double)(~w[(size_t)TW * 6 * L + 2] - g0) / 1e6 : -1.0);
            free(w);
        }
        ss_free(&s1);
        fr_cuda_free(c);
    }
}

/* One launch of each kernel worth profiling (for ncu -k regex:... gpu-bench --profile). */
static void profile_once(void) {
    cublasHandle_t cub = NULL;
    double us;
    gemv_bench("profile: gemv bf16 qkv", 6144, 4096, 16, 1, FRK_OUT_STORE, false, cub, &us);
    gemv_bench("profile: gemv bf16 o", 4096, 4096, 16, 1, FRK_OUT_ACC, false, cub, &us);
    gemv_bench("profile: gemv int4 qkv", 6144, 4096, 4, 1, FRK_OUT_STORE, false, cub, &us);
    gemv_bench("profile: gemv int8 down", 4096, 14336, 8, 1, FRK_OUT_ACC, false, cub, &us);
    g_stream_kernel = true;
    gemv_bench("profile: stream bf16 gate_up", 28672, 4096, 16, 1, FRK_OUT_SWIGLU, false, cub, &us);
    gemv_bench("profile: stream int4 gate_up", 28672, 4096, 4, 1, FRK_OUT_SWIGLU, false, cub, &us);
    gemv_bench("profile: stream int8 gate_up", 28672, 4096, 8, 1, FRK_OUT_SWIGLU, false, cub, &us);
    g_stream_kernel = false;
    attn_bench("profile: attention b1 ctx 640", 1, 640, 33, 0, 0, 8, &us);
    attn_bench("profile: attention b32 ctx 640", 32, 640, 4, 0, 0, 0, &us);
}

static void kernel_breakdown(void) {
    cublasHandle_t cub;
    if (cublasCreate(&cub) != CUBLAS_STATUS_SUCCESS) return;
    void *ws;
    FR_CK(cudaMalloc(&ws, 32u << 20));
    cublasSetWorkspace(cub, ws, 32u << 20);
    LOG("kernel breakdown (Llama-3-8B shapes; weights rotated through several copies, so HBM):\n");
    const int shp[5][3] = {{6144, 4096, FRK_OUT_STORE}, {4096, 4096, FRK_OUT_ACC},
                           {28672, 4096, FRK_OUT_SWIGLU}, {4096, 14336, FRK_OUT_ACC},
                           {128256, 4096, FRK_OUT_STORE}};
    const char *nm[5] = {"qkv", "o", "gate_up+swiglu", "down", "lm_head"};
    const int bitsv[3] = {16, 8, 4};
    for (int bi = 0; bi < 6; bi++) {
        double layer = 0, head = 0;
        g_stream_kernel = bi >= 3;
        for (int i = 0; i < 5; i++) {
            char name[96];
            double us = 0;
            const int bits = bitsv[bi % 3];
            snprintf(name, sizeof name, "%s %s b=1 %s %dx%d", g_stream_kernel ? "stream" : "gemv",
                     bits == 16 ? "bf16" : bits == 8 ? "int8" : "int4", nm[i], shp[i][0], shp[i][1]);
            gemv_bench(name, shp[i][0], shp[i][1], bits, 1, shp[i][2], false, cub, &us);
            if (i < 4) layer += us; else head = us;
        }
        LOG("  => %s %s per token: 32 x %.1f + %.1f = %.2f ms\n", bitsv[bi % 3] == 16 ? "bf16" : bitsv[bi % 3] == 8 ? "int8" : "int4",
            !g_stream_kernel ? "GEMVs" : "streamed GEMVs", layer, head,
            (32 * layer + head) / 1e3);
    }
    g_stream_kernel = false;
    gemv_bench("cuBLAS bf16 b=1 gate_up 28672x4096", 28672, 4096, 16, 1, FRK_OUT_STORE, true, cub, NULL);
    gemv_bench("gemv bf16 b=4 gate_up 28672x4096", 28672, 4096, 16, 4, FRK_OUT_SWIGLU, false, cub, NULL);
    gemv_bench("cuBLAS bf16 b=8 gate_up 28672x4096", 28672, 4096, 16, 8, FRK_OUT_STORE, true, cub, NULL);
    gemv_bench("cuBLAS bf16 b=32 gate_up 28672x4096", 28672, 4096, 16, 32, FRK_OUT_STORE, true, cub, NULL);
    gemv_bench("gemv int4 b=32 gate_up 28672x4096", 28672, 4096, 4, 32, FRK_OUT_SWIGLU, false, cub, NULL);
    gemv_bench("gemv int8 b=32 gate_up 28672x4096", 28672, 4096, 8, 32, FRK_OUT_SWIGLU, false, cub, NULL);
    /* prefill GEMMs */
    {
        const int T = 512;
        for (int i = 0; i < 4; i++) {
            gemv_ctx g;
            memset(&g, 0, sizeof g);
            g.M = shp[i][0], g.K = shp[i][1], g.nb = T, g.cub = cub, g.rot = 1, g.bits = 16;
            FR_CK(cudaMalloc(&g.w[0], (size_t)g.M * g.K * 2));
            frk_fill_bf16(g.w[0], (size_t)g.M * g.K, 0.02f, 0.f, 9, 0);
            FR_CK(cudaMalloc((void **)&g.x, (size_t)T * g.K * 2));
            frk_fill_bf16(g.x, (size_t)T * g.K, 1.f, 0.f, 10, 0);
            FR_CK(cudaMalloc(&g.y, (size_t)T * g.M * 4));
            const double us = time_us(run_cublas, &g, 1, 20);
            LOG("  cuBLAS bf16 GEMM T=%d %-16s %8.1f us  %6.0f TFLOP/s\n", T, nm[i], us,
                2.0 * T * g.M * g.K / (us * 1e-6) / 1e12);
            cudaFree(g.w[0]), cudaFree(g.x), cudaFree(g.y);
        }
    }
    double us;
    attn_bench("attention decode b=1 ctx=640 cluster 16", 1, 640, 33, 0, 0, 16, &us);
    attn_bench("attention decode b=4 ctx=640 cluster 16", 4, 640, 16, 0, 0, 16, &us);
    attn_bench("attention decode b=1 ctx=640 cluster 8", 1, 640, 33, 0, 0, 8, &us);
    attn_bench("attention decode b=1 ctx=640 split=33", 1, 640, 33, 0, 0, 0, &us);
    attn_bench("attention decode b=1 ctx=640 split=1", 1, 640, 1, 0, 0, 0, &us);
    attn_bench("attention decode b=32 ctx=640 split=2", 32, 640, 2, 0, 0, 0, &us);
    attn_bench("attention decode b=32 ctx=640 int8 KV split=2", 32, 640, 2, 0, 1, 0, &us);
    attn_bench("attention prefill T=512 mma", 512, 512, 1, 1, 0, 0, &us);
    attn_bench("attention prefill T=512 scalar kernel", 512, 512, 1, 2, 0, 0, &us);
    {
        misc_ctx m;
        m.n = 1, m.E = 4096;
        FR_CK(cudaMalloc((void **)&m.x, 4096 * 4 * 32));
        FR_CK(cudaMalloc((void **)&m.w, 4096 * 4));
        FR_CK(cudaMalloc((void **)&m.out, 4096 * 2 * 32));
        frk_fill_f32(m.x, 4096 * 32, 1.f, 0.f, 1, 0);
        frk_fill_f32(m.w, 4096, 0.1f, 1.f, 2, 0);
        LOG("  %-44s %8.1f us\n", "rmsnorm 1x4096", time_us(run_rms, &m, 1, 30));
        cudaFree(m.x), cudaFree(m.w), cudaFree(m.out);
    }
    cublasDestroy(cub);
    cudaFree(ws);
    gemv_chain(16);
    gemv_chain(8);
    gemv_chain(4);
}

/* ---------------------------------------------------------------- results */
typedef struct res {
    double copy_tbs, gemm_tflops;
    double prefill_tps, prefill_ms;
    double dec1_tps[3], dec1_eager_tps, dec1_j;
    double dec1p_tps[3]; /* pipelined loop (fr_cuda_submit) */
    double dec32_tps, dec32_j, dec32_i8kv_tps;
    double w_bytes[3];
    long kv_seqs_bf16, kv_seqs_i8;
    double kv_gib_bf16, kv_gib_i8;
    double dec32_q_tps[3];
} res;

static void ceilings(res *r, bool quick) {
    const size_t bytes = quick ? (256u << 20) : ((size_t)4 << 30);
    void *a, *b;
    FR_CK(cudaMalloc(&a, bytes));
    FR_CK(cudaMalloc(&b, bytes));
    FR_CK(cudaMemset(a, 0x3c, bytes));
    cudaEvent_t e0, e1;
    FR_CK(cudaEventCreate(&e0));
    FR_CK(cudaEventCreate(&e1));
    double t[9];
    for (int i = 0; i < 10; i++) {
        FR_CK(cudaEventRecord(e0, 0));
        FR_CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
        FR_CK(cudaEventRecord(e1, 0));
        FR_CK(cudaEventSynchronize(e1));
        float ms;
        FR_CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i) t[i - 1] = ms;
    }
    r->copy_tbs = 2.0 * bytes / (median(t, 9) * 1e-3) / 1e12;
    FR_CK(cudaFree(a));
    FR_CK(cudaFree(b));
    FR_CK(cudaEventDestroy(e0));
    FR_CK(cudaEventDestroy(e1));
}

int main(int argc, char **argv) {
    bool quick = false;
    const char *out = NULL;
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("frugal CUDA tools (sm_90)\n");
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--profile")) {
            g_profile = true;
            profile_once();
            return 0;
        } else if (!strcmp(argv[i], "--timeline")) {
            timeline();
            return 0;
        }
    }
    if (fr_cuda_device_count() <= 0) {
        printf("gpu-bench: no CUDA device: skipped\n");
        return 0;
    }
    if (out) logf_ = fopen(out, "w");
    struct cudaDeviceProp prop;
    FR_CK(cudaGetDeviceProperties(&prop, 0));
    nvml_open();
    char clk[128];
    nvml_clocks(clk, sizeof clk);
    LOG("gpu-bench on %s, %d SMs, %.1f GiB; %s\n", prop.name, prop.multiProcessorCount,
        prop.totalGlobalMem / 1073741824.0, clk);
    res r;
    memset(&r, 0, sizeof r);
    ceilings(&r, quick);
    LOG("ceiling: device copy %.2f TB/s (read + write)\n", r.copy_tbs);
    if (!quick) kernel_breakdown();
    const fr_hparams hp = llama8b();
    fr_hparams hq = hp;
    if (quick) { /* same widths, fewer layers: a smoke run */
        hq.n_layer = 2;
    }
    const int P = 512, G = quick ? 16 : 128, B = 32;
    fr_err err;
    /* ---------------- bf16 weights, bf16 KV */
    {
        fr_cuda_config cfg = fr_cuda_config_default();
        cfg.max_tokens = 512;
        cfg.max_seqs = 32;
        cfg.max_ctx = 2048;
        fr_cuda *c = fr_cuda_new_random(&hq, &cfg, 1, &err);
        if (!c) die("bf16 engine", &err);
        fr_cuda_mem mi;
        fr_cuda_mem_info(c, &mi);
        r.w_bytes[0] = (double)mi.weights;
        r.kv_seqs_bf16 = (mi.kv_blocks - 1) / (2048 / 16);
        r.kv_gib_bf16 = mi.kv / 1073741824.0;
        LOG("bf16 engine: %s; weights %.2f GiB, scratch %.2f GiB, KV pool %.2f GiB = %d blocks "
            "(%.2f MiB each) -> %ld sequences of 2048 tokens\n",
            fr_cuda_device_name(c), mi.weights / 1073741824.0, mi.scratch / 1073741824.0,
            mi.kv / 1073741824.0, mi.kv_blocks, mi.kv_block_bytes / 1048576.0, r.kv_seqs_bf16);
        seqset ss;
        ss_init(&ss, B + 8);
        /* warm-up: prefill + a few decode steps (module load, cuBLAS heuristics, graph capture) */
        prefill(c, &ss, B + 7, P);
        double pt[5];
        for (int i = 0; i < 5; i++) pt[i] = prefill(c, &ss, B + i % 7, P);
        r.prefill_ms = median(pt, 5) * 1e3;
        r.prefill_tps = P / (r.prefill_ms * 1e-3);
        LOG("prefill %d tokens: median %.2f ms -> %.0f tok/s\n", P, r.prefill_ms, r.prefill_tps);
        /* batch-1 decode after the prompt */
        seqset s1;
        ss_init(&s1, 1);
        s1.next_block = ss.next_block + 4096;
        prefill(c, &s1, 0, P);
        decode(c, &s1, 1, 4, NULL);
        double j = 0;
        const double t = decode(c, &s1, 1, G, &j);
        r.dec1_tps[0] = G / t;
        r.dec1_j = j / G;
        nvml_clocks(clk, sizeof clk);
        LOG("decode batch 1 (bf16, graphs): %d tokens in %.3f s -> %.1f tok/s, %.3f ms/token, "
            "%.2f J/token (%s)\n", G, t, G / t, 1e3 * t / G, r.dec1_j, clk);
        s1.s[0].n_pos = P + 4;
        const double tp1 = decode_pipe(c, &s1, 1, G, NULL);
        r.dec1p_tps[0] = G / tp1;
        LOG("decode batch 1 (bf16, graphs, pipelined): %d tokens in %.3f s -> %.1f tok/s, %.3f ms/token\n", G, tp1,
            G / tp1, 1e3 * tp1 / G);
        {
            /* NVML's counter moves in ~0.1 s steps, too coarse for one 0.54 s pass: the energy
             * figure is taken over 4 more passes of the same G steps (context rewound to P + 4) */
            double jt = 0, tt = 0;
            for (int rep = 0; rep < 4; rep++) {
                double jj = 0;
                s1.s[0].n_pos = P + 4;
                tt += decode(c, &s1, 1, G, &jj);
                jt += jj;
            }
            r.dec1_j = jt / (4.0 * G);
            LOG("decode batch 1 (bf16, graphs) energy: %d tokens in %.3f s (%.1f tok/s), %.1f J -> %.3f J/token\n",
                4 * G, tt, 4 * G / tt, jt, r.dec1_j);
        }
        ss_free(&s1);
        /* batch 32 */
        seqset s32;
        ss_init(&s32, B);
        s32.next_block = ss.next_block + 8192;
        double tp = 0;
        for (int i = 0; i < B; i++) tp += prefill(c, &s32, i, P);
        LOG("prefill %d x %d tokens: %.2f s (%.0f tok/s)\n", B, P, tp, B * P / tp);
        decode(c, &s32, B, 2, NULL);
        const double t32 = decode(c, &s32, B, G, &j);
        r.dec32_tps = (double)B * G / t32;
        r.dec32_j = j / ((double)B * G);
        nvml_clocks(clk, sizeof clk);
        LOG("decode batch %d (bf16): %d steps in %.3f s -> %.0f tok/s aggregate, %.2f ms/step, "
            "%.3f J/token (%s)\n", B, G, t32, r.dec32_tps, 1e3 * t32 / G, r.dec32_j, clk);
        {
            /* energy over 3 more passes of the same G steps (every sequence rewound) */
            double jt = 0, tt = 0;
            for (int rep = 0; rep < 3; rep++) {
                double jj = 0;
                for (int i = 0; i < B; i++) s32.s[i].n_pos = P + 2;
                tt += decode(c, &s32, B, G, &jj);
                jt += jj;
            }
            r.dec32_j = jt / (3.0 * B * G);
            LOG("decode batch %d (bf16) energy: %d tokens in %.3f s, %.1f J -> %.4f J/token\n", B, 3 * B * G, tt,
                jt, r.dec32_j);
        }
        fr_cuda_stats stt;
        fr_cuda_get_stats(c, &stt);
        LOG("engine stats: %ld forwards, %ld graph replays, %ld captures, %ld tokens\n", stt.forwards,
            stt.graph_replays, stt.graph_captures, stt.tokens);
        ss_free(&s32);
        ss_free(&ss);
        fr_cuda_free(c);
    }
    /* ---------------- bf16 weights, eager launches (a decoder made with use_graphs = 0) */
    {
        fr_cuda_config cfg = fr_cuda_config_default();
        cfg.max_tokens = 512;
        cfg.max_seqs = 4;
        cfg.max_ctx = 2048;
        cfg.use_graphs = 0;
        fr_cuda *c = fr_cuda_new_random(&hq, &cfg, 1, &err);
        if (!c) die("bf16 eager engine", &err);
        seqset s1;
        ss_init(&s1, 1);
        prefill(c, &s1, 0, P);
        decode(c, &s1, 1, 4, NULL);
        const double te = decode(c, &s1, 1, G / 2, NULL);
        r.dec1_eager_tps = (G / 2) / te;
        LOG("decode batch 1 (bf16, eager launches): %.1f tok/s\n", r.dec1_eager_tps);
        ss_free(&s1);
        fr_cuda_free(c);
    }
    /* ---------------- bf16 weights, int8 KV */
    {
        fr_cuda_config cfg = fr_cuda_config_default();
        cfg.max_tokens = 512;
        cfg.max_seqs = 32;
        cfg.max_ctx = 2048;
        cfg.kv_int8 = 1;
        fr_cuda *c = fr_cuda_new_random(&hq, &cfg, 2, &err);
        if (!c) die("int8-KV engine", &err);
        fr_cuda_mem mi;
        fr_cuda_mem_info(c, &mi);
        r.kv_seqs_i8 = (mi.kv_blocks - 1) / (2048 / 16);
        r.kv_gib_i8 = mi.kv / 1073741824.0;
        LOG("int8-KV engine: KV pool %.2f GiB = %d blocks (%.3f MiB each) -> %ld sequences of 2048 "
            "tokens\n", mi.kv / 1073741824.0, mi.kv_blocks, mi.kv_block_bytes / 1048576.0, r.kv_seqs_i8);
        seqset s32;
        ss_init(&s32, B);
        for (int i = 0; i < B; i++) prefill(c, &s32, i, P);
        decode(c, &s32, B, 2, NULL);
        const double t32 = decode(c, &s32, B, G / 2, NULL);
        r.dec32_i8kv_tps = (double)B * (G / 2) / t32;
        LOG("decode batch %d (bf16 weights, int8 KV): %.0f tok/s aggregate\n", B, r.dec32_i8kv_tps);
        ss_free(&s32);
        fr_cuda_free(c);
    }
    /* ---------------- INT8 and INT4 weights */
    for (int wi = 1; wi <= 2; wi++) {
        fr_cuda_config cfg = fr_cuda_config_default();
        cfg.max_tokens = 512;
        cfg.max_seqs = 32;
        cfg.max_ctx = 2048;
        cfg.weights = wi == 1 ? FR_CUDA_W_INT8 : FR_CUDA_W_INT4;
        cfg.kv_fraction = 0.3f;
        fr_cuda *c = fr_cuda_new_random(&hq, &cfg, 3 + wi, &err);
        if (!c) die("int engine", &err);
        fr_cuda_mem mi;
        fr_cuda_mem_info(c, &mi);
        r.w_bytes[wi] = (double)mi.weights;
        seqset s1;
        ss_init(&s1, 1);
        const double tp = prefill(c, &s1, 0, P);
        decode(c, &s1, 1, 4, NULL);
        const double t = decode(c, &s1, 1, G, NULL);
        r.dec1_tps[wi] = G / t;
        LOG("%s weights (%.2f GiB): prefill %d in %.1f ms (first call); decode batch 1: %.1f tok/s, "
            "%.3f ms/token\n", wi == 1 ? "INT8" : "INT4", mi.weights / 1073741824.0, P, tp * 1e3,
            G / t, 1e3 * t / G);
        s1.s[0].n_pos = P + 4;
        const double tp1 = decode_pipe(c, &s1, 1, G, NULL);
        r.dec1p_tps[wi] = G / tp1;
        LOG("%s weights: decode batch 1 pipelined: %.1f tok/s, %.3f ms/token\n", wi == 1 ? "INT8" : "INT4",
            G / tp1, 1e3 * tp1 / G);
        seqset s32;
        ss_init(&s32, B);
        s32.next_block = 4096;
        for (int i = 0; i < B; i++) prefill(c, &s32, i, 64);
        decode(c, &s32, B, 2, NULL);
        const double t32 = decode(c, &s32, B, G / 2, NULL);
        r.dec32_q_tps[wi] = (double)B * (G / 2) / t32;
        LOG("%s weights: decode batch %d: %.0f tok/s aggregate\n", wi == 1 ? "INT8" : "INT4", B,
            r.dec32_q_tps[wi]);
        ss_free(&s32);
        ss_free(&s1);
        fr_cuda_free(c);
    }
    /* ---------------- summary */
    const double bw = r.copy_tbs * 1e12;
    const double kv_tok = 2.0 * hp.n_layer * hp.n_head_kv * hp.head_dim * 2; /* bytes per position, bf16 */
    const double emb = (double)hp.n_vocab * hp.n_embd * 2;
    const double rd1 = r.w_bytes[0] - emb + (P + G / 2) * kv_tok; /* bytes read per batch-1 step */
    const double lin_params = (double)hp.n_layer * (4096.0 * 6144 + 4096.0 * 4096 + 3 * 4096.0 * 14336);
    const double flop_tok = 2 * lin_params + 4.0 * hp.n_layer * hp.n_head * hp.head_dim * (P / 2.0);
    LOG("\n==== summary (Llama-3-8B shape, random weights, prompt %d, generate %d%s) ====\n", P, G,
        quick ? ", QUICK: 2 layers" : "");
    LOG("%-38s %12s %10s %10s  %s\n", "figure", "measured", "target", "llama.cpp", "roofline arithmetic");
    LOG("%-38s %12.1f %10s %10s  %.2f GB/token / %.2f TB/s copy = %.0f tok/s ceiling -> %.0f%%\n",
        "decode b=1 BF16 (tok/s)", r.dec1_tps[0], ">=228", "149", rd1 / 1e9, r.copy_tbs, bw / rd1,
        100 * r.dec1_tps[0] * rd1 / bw);
    LOG("%-38s %12.1f %10s %10s  same bytes, eager launches (no CUDA graph)\n", "decode b=1 BF16 eager (tok/s)",
        r.dec1_eager_tps, "-", "-");
    LOG("%-38s %12.1f %10s %10s  same bytes, next step queued before the token is read\n",
        "decode b=1 BF16 pipelined (tok/s)", r.dec1p_tps[0], "-", "-");
    for (int wi = 1; wi <= 2; wi++) {
        const double rd = r.w_bytes[wi] - emb + (P + G / 2) * kv_tok;
        LOG("%-38s %12.1f %10s %10s  %.2f GB/token -> %.0f tok/s ceiling -> %.0f%%\n",
            wi == 1 ? "decode b=1 INT8 weights (tok/s)" : "decode b=1 INT4 weights (tok/s)", r.dec1_tps[wi],
            wi == 1 ? ">=380" : ">=600", wi == 1 ? "184" : "217", rd / 1e9, bw / rd,
            100 * r.dec1_tps[wi] * rd / bw);
        LOG("%-38s %12.1f %10s %10s  same bytes, next step queued before the token is read -> %.0f%%\n",
            wi == 1 ? "decode b=1 INT8 pipelined (tok/s)" : "decode b=1 INT4 pipelined (tok/s)", r.dec1p_tps[wi],
            "-", "-", 100 * r.dec1p_tps[wi] * rd / bw);
    }
    const double rd32 = r.w_bytes[0] - emb + 32 * (P + G / 2) * kv_tok;
    LOG("%-38s %12.0f %10s %10s  %.2f GB/step -> %.0f tok/s bandwidth ceiling\n", "decode b=32 BF16 aggregate (tok/s)",
        r.dec32_tps, ">=4000", "1377", rd32 / 1e9, 32 * bw / rd32);
    LOG("%-38s %12.0f %10s %10s  int8 KV halves the KV bytes per step\n", "decode b=32 BF16 w + INT8 KV (tok/s)",
        r.dec32_i8kv_tps, "-", "-");
    LOG("%-38s %12.0f %10s %10s\n", "decode b=32 INT8 weights (tok/s)", r.dec32_q_tps[1], "-", "-");
    LOG("%-38s %12.0f %10s %10s\n", "decode b=32 INT4 weights (tok/s)", r.dec32_q_tps[2], "-", "-");
    LOG("%-38s %12.0f %10s %10s  %.1f GFLOP/token, 790 TFLOP/s -> %.0f tok/s ceiling\n", "prefill 512 BF16 (tok/s)",
        r.prefill_tps, ">=25000", "17757", flop_tok / 1e9, 790e12 / flop_tok);
    LOG("%-38s %12.2f %10s %10s  HF transformers: 16.2 J\n", "energy b=1 BF16 (J/token)", r.dec1_j, "-", "-");
    LOG("%-38s %12.3f %10s %10s  HF transformers: 0.59 J; vLLM H100 b=64: 0.12 J\n", "energy b=32 BF16 (J/token)",
        r.dec32_j, "-", "-");
    LOG("%-38s %12ld %10s %10s  %.1f GiB pool / %.0f MiB per sequence\n", "2048-token seqs that fit, BF16 KV",
        r.kv_seqs_bf16, "-", "-", r.kv_gib_bf16, 2048 * kv_tok / 1048576.0);
    LOG("%-38s %12ld %10s %10s  %.1f GiB pool / %.0f MiB per sequence (+scales)\n", "2048-token seqs that fit, INT8 KV",
        r.kv_seqs_i8, "-", "-", r.kv_gib_i8, 2048 * kv_tok / 2 / 1048576.0);
    LOG("%-38s %12.2f %10s %10s\n", "device copy ceiling (TB/s)", r.copy_tbs, "-", "-");
    if (logf_) fclose(logf_);
    return 0;
}
