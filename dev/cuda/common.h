/* common.h — shared helpers of the dev/cuda programs: error checks, host bf16 / f16 conversions,
 * random inputs, output poisoning, comparison against a CPU reference, cudaEvent timing and the
 * device copy rate that GB/s figures are set against.
 *
 * Header-only and self-contained (nothing from src/): each program is one .cu file plus this
 * header, built by `make dev`. Every program prints one line per variant in the same format
 * (print_result), which dev/cuda/run_all.sh relies on:
 *   <name>  maxerr <e>  PASS|FAIL  <µs> us  <GB/s> GB/s  <% of copy>
 * maxerr is the largest |got - ref| divided by the tolerance of that element (atol + rtol |ref|,
 * atol relative to the reference's RMS): a variant passes when it is <= 1 and no output is NaN
 * or Inf (outputs are poisoned with NaN before every checked launch, so an element the kernel
 * never writes fails too).
 */
#ifndef DEV_CUDA_COMMON_H
#define DEV_CUDA_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every CUDA runtime call: a failure is a bug in the program, so print file:line and exit. */
#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: CUDA error %s: %s (in %s)\n", __FILE__, __LINE__,      \
                    cudaGetErrorName(e_), cudaGetErrorString(e_), #call);                 \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)
#define CK_LAUNCH() CK(cudaGetLastError())

typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf162;

static inline int cdiv(long a, long b) { return (int)((a + b - 1) / b); }

/* ---- host conversions (round to nearest even) ---- */
static inline uint16_t host_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float host_bf2f(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t host_f2h(float f) { return __half_as_ushort(__float2half(f)); }
static inline float host_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* ---- random inputs (splitmix64: reproducible for a seed, independent of the platform) ---- */
typedef struct { uint64_t s; } rng_t;
static inline uint64_t rng_u64(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float rng_uniform(rng_t *r, float lo, float hi) { /* [lo, hi) */
    return lo + (hi - lo) * (float)((rng_u64(r) >> 40) * (1.0 / 16777216.0));
}
/* n bf16 values uniform in [lo, hi) (the bits, and their float values when f != NULL) */
static inline void fill_bf16(rng_t *r, uint16_t *b, float *f, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        b[i] = host_f2bf(rng_uniform(r, lo, hi));
        if (f) f[i] = host_bf2f(b[i]);
    }
}

/* ---- device buffers ---- */
static inline void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static inline void *dev_upload(const void *h, size_t bytes) {
    void *p = dev_alloc(bytes);
    CK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}
/* NaN in every float (0xFF bytes), or in every bf16: unwritten outputs fail the check */
static inline void dev_poison(void *p, size_t bytes) { CK(cudaMemset(p, 0xFF, bytes)); }

/* Copies of a device buffer whose total exceeds `min_total` bytes (at most 16), so that timing
 * rotates through them and reads HBM, not the 50 MB L2. c[0] is the original. Returns the count. */
static inline int dev_copies(void *src, size_t bytes, size_t min_total, void **c) {
    int n = (int)((min_total + bytes - 1) / bytes);
    n = n < 1 ? 1 : n > 16 ? 16 : n;
    c[0] = src;
    for (int i = 1; i < n; i++) {
        c[i] = dev_alloc(bytes);
        CK(cudaMemcpy(c[i], src, bytes, cudaMemcpyDeviceToDevice));
    }
    return n;
}

/* ---- comparison against the CPU reference ---- */
typedef struct {
    double maxerr;   /* max |got - ref| / (atol + rtol |ref|) */
    double maxabs;   /* max |got - ref| */
    long bad;        /* elements over the tolerance or not finite */
    int pass;
} check_t;
static inline check_t check_f32(const float *ref, const float *got, size_t n, double atol_rms,
                                double rtol) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
    const double rms = n ? sqrt(ss / (double)n) : 0.0;
    const double atol = atol_rms * (rms > 0 ? rms : 1.0);
    check_t c = {0, 0, 0, 1};
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)ref[i]);
        const double e = d / (atol + rtol * fabs((double)ref[i]));
        if (!isfinite(got[i]) || !(e <= 1.0)) {
            c.bad++;
            if (shown++ < 4) fprintf(stderr, "    mismatch at %zu: ref %.6g got %.6g\n", i, ref[i], got[i]);
        }
        if (isfinite(got[i])) {
            if (e > c.maxerr) c.maxerr = e;
            if (d > c.maxabs) c.maxabs = d;
        } else {
            c.maxerr = INFINITY;
        }
    }
    c.pass = c.bad == 0;
    return c;
}
static inline check_t check_bf16(const float *ref, const uint16_t *got, size_t n, double atol_rms,
                                 double rtol) {
    float *g = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) g[i] = host_bf2f(got[i]);
    check_t c = check_f32(ref, g, n, atol_rms, rtol);
    free(g);
    return c;
}

/* ---- timing ---- */
/* Every launch of the programs goes to this stream, so that the timed launches can be captured
 * into a CUDA graph (the decode step is one graph in production too). A blocking stream: the
 * set-up's cudaMemset / cudaMemcpy on the legacy default stream stay ordered with it. */
static cudaStream_t g_stream;
static inline void stream_init(void) { CK(cudaStreamCreate(&g_stream)); }

typedef void (*launch_fn)(void *ctx, int iter);
/* Mean µs of one launch: `warmup` eager calls, then `repeats` calls captured into one CUDA graph
 * and replayed (once to warm up, once timed between two events), so host launch overhead does
 * not bound short kernels. The launch function gets the iteration number, to rotate through
 * weight copies. */
static inline double time_us(launch_fn f, void *ctx, int warmup, int repeats) {
    for (int i = 0; i < warmup; i++) f(ctx, i);
    CK(cudaStreamSynchronize(g_stream));
    CK_LAUNCH();
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < repeats; i++) f(ctx, warmup + i);
    CK(cudaStreamEndCapture(g_stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, g_stream));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, g_stream));
    CK(cudaGraphLaunch(ge, g_stream));
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    CK_LAUNCH();
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return 1000.0 * ms / (repeats > 0 ? repeats : 1);
}

/* The device's copy rate in GB/s, read + write (cudaMemcpy device to device of 1 GiB, best of 5):
 * the ceiling a memory-bound kernel is set against. */
static inline double copy_rate_gbs(void) {
    const size_t bytes = (size_t)1 << 30;
    void *a = dev_alloc(bytes), *b = dev_alloc(bytes);
    CK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int i = 0; i < 6; i++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i > 0 && ms < best) best = ms; /* the first is a warm-up */
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * (double)bytes / (best * 1e-3) / 1e9;
}

static inline int sm_count(void) {
    int dev = 0, n = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}

static inline void print_device(void) {
    cudaDeviceProp p;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&p, dev));
    printf("# %s, %d SMs, sm_%d%d, %.1f GiB\n", p.name, p.multiProcessorCount, p.major, p.minor,
           (double)p.totalGlobalMem / (1 << 30));
}

/* One result line (see the top of this file); bytes = what one launch must move. */
static inline void print_result(const char *name, check_t c, double us, double bytes, double copy_gbs) {
    const double gbs = us > 0 ? bytes / (us * 1e3) : 0.0;
    printf("%-52s maxerr %8.3g  %s  %9.2f us  %7.1f GB/s  %5.1f %% of copy\n", name, c.maxerr,
           c.pass ? "PASS" : "FAIL", us, gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0);
    fflush(stdout);
}

#endif
