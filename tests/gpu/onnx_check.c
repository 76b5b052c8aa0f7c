/* onnx_check.c — build-cuda/gpu-onnx: the CUDA ONNX executor (backend/cuda/onnx_cuda.h)
 * against onnxruntime and the CPU executor, then its speed on the PP-OCR models.
 *
 *   gpu-onnx [--no-bench] [ROOT]       ROOT: the checkout (default .): the models/ppocr ONNX files,
 *                                      tests/fixtures/ref/onnx{,_ops}/
 *
 * Checks (one "PASS ..." or "FAIL ..." line each, then "N passed, N failed"; exit 1 on a FAIL;
 * a missing model or fixture is a FAIL; every step's output is poisoned with NaN before the step,
 * and NaN never passes):
 *   op      every case of tests/fixtures/ref/onnx_ops/cases.txt in fp32 (tf32 off) against
 *           onnxruntime, |got - ref| <= 1e-4 + 1e-4 |ref|; run twice, the second run replays the
 *           CUDA graph and must equal the first;
 *   model   det / rec / cls on tests/fixtures/ref/onnx/ in fp32 and in TF32, against
 *           onnxruntime and against the CPU executor: fp32 rel L2 <= 1e-4 (det: max abs <= 1e-4
 *           on the probability map); TF32 rel L2 <= 1e-2 (det: max abs <= 2e-2); rec 2x48x320:
 *           the argmax of every step (a tie within the tolerance may flip);
 *   batch   rec at batch 64 (the 2x48x320 input tiled): every line equals the batch-2 run;
 *   graph   the third run of rec 64 replays a graph and equals the first (eager) run;
 *   errors  wrong rank (BAD_REQUEST), a plan over max_bytes (TOO_LARGE), a cancelled run.
 * Bench (TF32, graphs; random inputs): det 1 and 4 pages at 960x672 (an A4 page at 960 on its
 * long side, sides rounded to 32), cls 64x3x48x192, rec 64x3x48x320; the page estimate
 * det + 40/64 (cls + rec) per page; then a measured pipeline: 4 host threads, each with its own
 * det/cls/rec sessions, each looping det of 4 pages + 3 x 64 lines of cls and rec (48 lines a
 * page), pages/s over all threads.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend/cuda/k_onnx.h"
#include "backend/cuda/onnx_cuda.h"
#include "backend/onnx_exec.h"
#include "base/npy.h"
#include "stages/ocr/ppocr.h"

static int n_pass, n_fail;
static char root[512] = ".";

static void result(int ok, const char *fmt, ...) FR_PRINTF(2, 3);
static void result(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    ok ? n_pass++ : n_fail++;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static fr_onnx_model *load_model(const char *rel) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load(path, &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    return m;
}

static int load_npy(const char *rel, fr_npy *a) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    fr_err err = {0};
    if (fr_npy_load_f32(path, a, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return -1;
    }
    return 0;
}

static fr_onnx_arr arr_of(const fr_npy *a) {
    fr_onnx_arr x = {.rank = a->n_dims, .data = a->data};
    for (int i = 0; i < a->n_dims; i++) x.dims[i] = a->shape[i];
    return x;
}

static int64_t arr_n(const fr_onnx_arr *a) {
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

static int same_dims(const fr_onnx_arr *a, int rank, const int64_t *d) {
    if (a->rank != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (a->dims[i] != d[i]) return 0;
    return 1;
}

static double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        if (!isfinite(a[i])) return INFINITY;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double max_abs(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (!(d <= mx)) mx = isnan(d) ? INFINITY : d;
    }
    return mx;
}

static int poison = 1; /* checks: outputs of every step poisoned (NaN) before it; bench: off */

static fr_onnx_cuda_sess *cuda_sess(const fr_onnx_model *m, int tf32) {
    fr_onnx_cuda_opts o = fr_onnx_cuda_default_opts();
    o.tf32 = tf32;
    o.poison = poison;
    fr_err err = {0};
    fr_onnx_cuda_sess *s = fr_onnx_cuda_sess_new(m, 0, &o, &err);
    if (!s) fprintf(stderr, "  %s\n", err.msg);
    return s;
}

/* ---------------------------------------------------------------- every op */

static void check_op_case(const char *name, int n_in, int n_out) {
    char rel[400];
    snprintf(rel, sizeof rel, "tests/fixtures/ref/onnx_ops/%s.onnx", name);
    fr_onnx_model *m = load_model(rel);
    fr_npy ins[8] = {{0}}, refs[8] = {{0}};
    fr_onnx_arr x[8], y[8];
    float *first[8] = {0};
    fr_onnx_cuda_sess *s = NULL;
    int ok = 0, bad = 0, replay_same = 1, graphed = 0;
    double worst = 0;
    if (!m || n_in > 8 || n_out > 8 || n_in != m->n_inputs || n_out != m->n_outputs) goto done;
    for (int i = 0; i < n_in; i++) {
        snprintf(rel, sizeof rel, "tests/fixtures/ref/onnx_ops/%s.in%d.npy", name, i);
        if (load_npy(rel, &ins[i])) goto done;
        x[i] = arr_of(&ins[i]);
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(rel, sizeof rel, "tests/fixtures/ref/onnx_ops/%s.out%d.npy", name, i);
        if (load_npy(rel, &refs[i])) goto done;
    }
    if (!(s = cuda_sess(m, 0))) goto done;
    fr_err err = {0};
    for (int run = 0; run < 2; run++) {
        if (fr_onnx_cuda_sess_run(s, x, n_in, y, n_out, NULL, &err)) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            goto done;
        }
        for (int i = 0; i < n_out; i++) {
            if (!same_dims(&y[i], refs[i].n_dims, refs[i].shape)) {
                fprintf(stderr, "  %s: output %d has another shape\n", name, i);
                goto done;
            }
            const int64_t n = refs[i].n;
            if (run == 0) {
                first[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
                memcpy(first[i], y[i].data, (size_t)n * sizeof(float));
                for (int64_t k = 0; k < n; k++) {
                    const float r = refs[i].data[k], g = y[i].data[k];
                    const double e = fabs((double)g - r);
                    if (!(e <= 1e-4 + 1e-4 * fabs(r))) {
                        if (bad < 3) fprintf(stderr, "  %s: out %d [%lld] = %.7g, onnxruntime %.7g\n", name, i, (long long)k, g, r);
                        bad++;
                    }
                    if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
                }
            } else if (memcmp(first[i], y[i].data, (size_t)n * sizeof(float))) {
                replay_same = 0;
            }
        }
        if (run == 1) graphed = fr_onnx_cuda_sess_last_graphed(s);
    }
    ok = bad == 0 && replay_same;
done:
    result(ok, "op %-32s max abs err %.2e, %d mismatches, second run %s%s", name, worst, bad,
           graphed ? "graph replay" : "step by step", replay_same ? "" : " DIFFERS from the first");
    for (int i = 0; i < 8; i++) {
        fr_npy_free(&ins[i]);
        fr_npy_free(&refs[i]);
        free(first[i]);
    }
    fr_onnx_cuda_sess_free(s);
    fr_onnx_model_free(m);
}

static void check_ops(void) {
    char path[800];
    snprintf(path, sizeof path, "%s/tests/fixtures/ref/onnx_ops/cases.txt", root);
    FILE *f = fopen(path, "r");
    if (!f) {
        result(0, "op cases: %s missing", path);
        return;
    }
    char name[128];
    int n_in, n_out, n = 0;
    while (fscanf(f, "%127s %d %d", name, &n_in, &n_out) == 3) {
        check_op_case(name, n_in, n_out);
        n++;
    }
    fclose(f);
    result(n >= 70, "op cases: %d run (>= 70 expected)", n);
}

/* ---------------------------------------------------------------- whole models */

#define DET "models/ppocr/ch_PP-OCRv4_det_infer.onnx"
#define REC "models/ppocr/ch_PP-OCRv4_rec_infer.onnx"
#define CLS "models/ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"
#define REF "tests/fixtures/ref/onnx/"

/* The CPU executor's output for x (malloc'd copy) or NULL. */
static float *cpu_run(const fr_onnx_model *m, const fr_onnx_arr *x, int64_t *n) {
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    fr_err err = {0};
    fr_onnx_sess *s = fr_onnx_sess_new(m, &o, &err);
    fr_onnx_arr y;
    float *r = NULL;
    if (s && !fr_onnx_sess_run(s, x, 1, &y, 1, NULL, &err)) {
        *n = arr_n(&y);
        r = malloc((size_t)(*n ? *n : 1) * sizeof(float));
        memcpy(r, y.data, (size_t)*n * sizeof(float));
    } else {
        fprintf(stderr, "  CPU executor: %s\n", err.msg);
    }
    fr_onnx_sess_free(s);
    return r;
}

static void check_whole(const char *model, const char *name, int is_det) {
    char rel[400];
    fr_onnx_model *m = load_model(model);
    fr_npy in = {0}, ref = {0};
    snprintf(rel, sizeof rel, REF "%s.in.npy", name);
    const int have_in = load_npy(rel, &in) == 0;
    snprintf(rel, sizeof rel, REF "%s.out.npy", name);
    const int have_ref = load_npy(rel, &ref) == 0;
    if (!m || !have_in || !have_ref) {
        result(0, "model %s: model or fixture missing", name);
        goto done;
    }
    fr_onnx_arr x = arr_of(&in);
    int64_t ncpu = 0;
    float *cpu = cpu_run(m, &x, &ncpu);
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        fr_onnx_cuda_sess *s = cuda_sess(m, tf32);
        fr_onnx_arr y;
        fr_err err = {0};
        if (!s || fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err)) {
            result(0, "model %s %s: did not run: %s", name, tf32 ? "tf32" : "fp32", err.msg);
            fr_onnx_cuda_sess_free(s);
            continue;
        }
        if (!same_dims(&y, ref.n_dims, ref.shape)) {
            result(0, "model %s %s: output shape differs", name, tf32 ? "tf32" : "fp32");
            fr_onnx_cuda_sess_free(s);
            continue;
        }
        const double e = rel_l2(y.data, ref.data, ref.n), mx = max_abs(y.data, ref.data, ref.n);
        const double ec = cpu && ncpu == ref.n ? rel_l2(y.data, cpu, ref.n) : INFINITY;
        const double mc = cpu && ncpu == ref.n ? max_abs(y.data, cpu, ref.n) : INFINITY;
        const double tol = tf32 ? 1e-2 : 1e-4, atol = tf32 ? 2e-2 : 1e-4;
        const int ok = is_det ? (mx <= atol && mc <= atol) : (e <= tol && ec <= tol);
        result(ok, "model %-14s %s vs onnxruntime: rel L2 %.2e max abs %.2e; vs CPU: rel L2 %.2e max abs %.2e (limit %s %.0e)",
               name, tf32 ? "tf32" : "fp32", e, mx, ec, mc, is_det ? "max abs" : "rel L2", is_det ? atol : tol);
        fr_onnx_cuda_sess_free(s);
    }
    free(cpu);
done:
    fr_onnx_model_free(m);
    fr_npy_free(&in);
    fr_npy_free(&ref);
}

/* rec 2x48x320 (argmax, max and the first 128 classes of each step), then batch 64 and the
 * graph replay on the same input tiled. */
static void check_rec_batch(void) {
    fr_onnx_model *m = load_model(REC);
    fr_npy in = {0}, am = {0}, mxr = {0};
    const int ok_in = load_npy(REF "rec_2x48x320.in.npy", &in) == 0;
    const int ok_am = load_npy(REF "rec_2x48x320.argmax.npy", &am) == 0;
    const int ok_mx = load_npy(REF "rec_2x48x320.max.npy", &mxr) == 0;
    if (!m || !ok_in || !ok_am || !ok_mx || in.n_dims != 4 || in.shape[0] != 2) {
        result(0, "model rec_2x48x320: model or fixture missing");
        goto done;
    }
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        fr_onnx_cuda_sess *s = cuda_sess(m, tf32);
        fr_onnx_arr x = arr_of(&in), y;
        fr_err err = {0};
        if (!s || fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err)) {
            result(0, "model rec_2x48x320 %s: did not run: %s", tf32 ? "tf32" : "fp32", err.msg);
            fr_onnx_cuda_sess_free(s);
            continue;
        }
        const int64_t T = y.rank == 3 ? y.dims[0] * y.dims[1] : -1, K = y.rank == 3 ? y.dims[2] : 0;
        int wrong = 0;
        double maxd = 0;
        const float tie = tf32 ? 1e-2f : 1e-4f;
        for (int64_t r = 0; r < T && T == am.n; r++) {
            const float *row = y.data + r * K;
            int64_t best = 0;
            for (int64_t k = 1; k < K; k++)
                if (row[k] > row[best]) best = k;
            const int64_t want = (int64_t)am.data[r];
            if (best != want && fabsf(row[want] - row[best]) > tie) wrong++;
            maxd = fmax(maxd, fabs(row[want] - mxr.data[r]));
        }
        result(T == am.n && wrong == 0 && maxd <= (tf32 ? 2e-2 : 1e-4),
               "model rec_2x48x320     %s vs onnxruntime: %d of %lld steps with another argmax, max prob diff %.2e",
               tf32 ? "tf32" : "fp32", wrong, (long long)T, maxd);
        if (T != am.n) {
            fr_onnx_cuda_sess_free(s);
            continue;
        }
        /* batch 64 from the two lines tiled */
        const int64_t per = in.n / 2, outper = T / 2 * K;
        float *two = malloc((size_t)(T * K) * sizeof(float));
        memcpy(two, y.data, (size_t)(T * K) * sizeof(float));
        float *big = malloc((size_t)(per * 64) * sizeof(float));
        for (int b = 0; b < 64; b++) memcpy(big + b * per, in.data + (b % 2) * per, (size_t)per * sizeof(float));
        fr_onnx_arr xb = x;
        xb.dims[0] = 64;
        xb.data = big;
        double worst = 0;
        float *firstb = NULL;
        int graphed = 0, ran = 1;
        double replay = INFINITY;
        for (int run = 0; run < 3 && ran; run++) {
            if (fr_onnx_cuda_sess_run(s, &xb, 1, &y, 1, NULL, &err)) {
                ran = 0;
                break;
            }
            if (run == 0) {
                for (int b = 0; b < 64; b++)
                    worst = fmax(worst, rel_l2(y.data + b * outper, two + (b % 2) * outper, outper));
                firstb = malloc((size_t)(64 * outper) * sizeof(float));
                memcpy(firstb, y.data, (size_t)(64 * outper) * sizeof(float));
            } else if (run == 2) {
                graphed = fr_onnx_cuda_sess_last_graphed(s);
                replay = rel_l2(y.data, firstb, 64 * outper);
            }
        }
        result(ran && worst <= (tf32 ? 1e-2 : 1e-4),
               "batch rec 64x3x48x320 %s: each line vs the batch-2 run: worst rel L2 %.2e%s",
               tf32 ? "tf32" : "fp32", worst, ran ? "" : " (did not run)");
        result(ran && graphed && replay <= 1e-6,
               "graph rec 64x3x48x320 %s: third run %s, rel L2 vs the first (eager) run %.2e",
               tf32 ? "tf32" : "fp32", graphed ? "replayed a CUDA graph" : "was NOT graphed", replay);
        free(two);
        free(big);
        free(firstb);
        fr_onnx_cuda_sess_free(s);
    }
done:
    fr_onnx_model_free(m);
    fr_npy_free(&in);
    fr_npy_free(&am);
    fr_npy_free(&mxr);
}


/* ---------------------------------------------------------------- argmax_last */

/* The kernel on hostile rows (ties, NaN, -inf, one column, a long row) against the host scan
 * (fr_ppocr_best_path), value and index exactly. */
static void check_argmax_kernel(void) {
    enum { R = 7, D = 6625 };
    float *x = malloc(sizeof(float) * R * D), want[2 * R], got[2 * R];
    unsigned seed = 12345;
    for (int i = 0; i < R * D; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)(seed >> 8 & 0xffff) / 65536.0f;
    }
    x[0 * D + 10] = x[0 * D + 4000] = 2.0f;                        /* tie: the first */
    for (int c = 0; c < D; c++) x[1 * D + c] = NAN;                /* all NaN: 0, -inf */
    for (int c = 0; c < D; c++) x[2 * D + c] = -INFINITY;          /* all -inf: 0, -inf */
    x[3 * D + 0] = NAN, x[3 * D + 6624] = 3.0f;                    /* NaN first, max last */
    for (int c = 0; c < D; c++) x[4 * D + c] = 0.5f;               /* all equal: 0 */
    x[5 * D + 31] = x[5 * D + 32] = x[5 * D + 33] = 5.0f;          /* ties across lanes */
    int ok = 1;
    float *dx = NULL, *dy = NULL;
    ok &= cudaMalloc((void **)&dx, sizeof(float) * R * D) == cudaSuccess;
    ok &= cudaMalloc((void **)&dy, sizeof(float) * 2 * R) == cudaSuccess;
    ok &= cudaMemcpy(dx, x, sizeof(float) * R * D, cudaMemcpyHostToDevice) == cudaSuccess;
    kox_argmax_last(0, dx, dy, R, D);
    ok &= cudaMemcpy(got, dy, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess;
    fr_ppocr_best_path(x, R, D, want);
    int same = 0;
    for (int r = 0; r < R; r++) same += got[2 * r] == want[2 * r] && got[2 * r + 1] == want[2 * r + 1];
    result(ok && same == R, "argmax_last kernel: %d of %d hostile rows (ties, NaN, -inf, equal) "
           "equal the host scan", same, R);
    float one[3] = {NAN, 1.0f, -INFINITY}, o2[6], w2[6];
    ok = cudaMemcpy(dx, one, sizeof one, cudaMemcpyHostToDevice) == cudaSuccess;
    kox_argmax_last(0, dx, dy, 3, 1); /* one column */
    ok &= cudaMemcpy(o2, dy, sizeof o2, cudaMemcpyDeviceToHost) == cudaSuccess;
    fr_ppocr_best_path(one, 3, 1, w2);
    result(ok && !memcmp(o2, w2, sizeof o2), "argmax_last kernel: one-column rows equal the host scan");
    cudaFree(dx);
    cudaFree(dy);
    free(x);
}

/* A session with argmax_last against the whole output of an ordinary one on the same input:
 * the same device arithmetic, so the paths equal the host scan of the whole output exactly,
 * eager and from the graph. */
static void check_argmax_session(void) {
    fr_onnx_model *m = load_model(REC);
    fr_npy in = {0};
    if (!m || load_npy(REF "rec_2x48x320.in.npy", &in) || in.n_dims != 4) {
        result(0, "argmax_last session: model or fixture missing");
        goto done;
    }
    fr_onnx_cuda_opts o = fr_onnx_cuda_default_opts();
    o.poison = poison;
    fr_err err = {0};
    fr_onnx_cuda_sess *whole = fr_onnx_cuda_sess_new(m, 0, &o, &err);
    o.argmax_last = 1;
    fr_onnx_cuda_sess *red = fr_onnx_cuda_sess_new(m, 0, &o, &err);
    fr_onnx_arr x = arr_of(&in), y, z;
    if (!whole || !red || fr_onnx_cuda_sess_run(whole, &x, 1, &y, 1, NULL, &err) || y.rank != 3) {
        result(0, "argmax_last session: did not run: %s", err.msg);
        goto free_s;
    }
    const int64_t rows = y.dims[0] * y.dims[1], C = y.dims[2];
    float *want = malloc(sizeof(float) * 2 * (size_t)rows);
    fr_ppocr_best_path(y.data, (int)rows, (int)C, want);
    for (int run = 0; run < 3; run++) {
        if (fr_onnx_cuda_sess_run(red, &x, 1, &z, 1, NULL, &err)) {
            result(0, "argmax_last session run %d: %s", run, err.msg);
            break;
        }
        const int shape = z.rank == 3 && z.dims[0] == y.dims[0] && z.dims[1] == y.dims[1] && z.dims[2] == 2;
        result(shape && !memcmp(z.data, want, sizeof(float) * 2 * (size_t)rows),
               "argmax_last session rec 2x48x320 run %d (%s): (N, T, 2) paths equal the host scan of "
               "the whole (N, T, %lld) output", run, fr_onnx_cuda_sess_last_graphed(red) ? "graph" : "eager",
               (long long)C);
    }
    free(want);
free_s:
    fr_onnx_cuda_sess_free(whole);
    fr_onnx_cuda_sess_free(red);
done:
    fr_onnx_model_free(m);
    fr_npy_free(&in);
}

static fr_cancel_reason stop_now(void *ctx) {
    (void)ctx;
    return FR_CANCEL_CLIENT_GONE;
}

static void check_errors(void) {
    fr_onnx_model *m = load_model(CLS);
    if (!m) {
        result(0, "errors: %s missing", CLS);
        return;
    }
    float *buf = calloc(64 * 3 * 48 * 192, sizeof(float));
    fr_err err = {0};
    fr_onnx_cuda_sess *s = cuda_sess(m, 1);
    fr_onnx_arr x = {.rank = 3, .dims = {3, 48, 192}, .data = buf}, y;
    int rc = s ? fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err) : 0;
    result(s && rc == -1 && err.code == FR_ERR_BAD_REQUEST, "errors: an input of rank 3: code %d (BAD_REQUEST %d): %s",
           (int)err.code, (int)FR_ERR_BAD_REQUEST, err.msg);
    fr_onnx_cuda_sess_free(s);
    fr_onnx_cuda_opts o = fr_onnx_cuda_default_opts();
    o.max_bytes = 1 << 20;
    err = (fr_err){0};
    s = fr_onnx_cuda_sess_new(m, 0, &o, &err);
    x = (fr_onnx_arr){.rank = 4, .dims = {64, 3, 48, 192}, .data = buf};
    rc = s ? fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err) : 0;
    result(s && rc == -1 && err.code == FR_ERR_TOO_LARGE, "errors: cls 64 with max_bytes 1 MiB: code %d (TOO_LARGE %d): %s",
           (int)err.code, (int)FR_ERR_TOO_LARGE, err.msg);
    fr_onnx_cuda_sess_free(s);
    err = (fr_err){0};
    s = cuda_sess(m, 1);
    fr_cancel c = {0};
    c.fn = stop_now;
    rc = s ? fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, &c, &err) : 0;
    result(s && rc == -1 && err.code == fr_cancel_reason_code(FR_CANCEL_CLIENT_GONE),
           "errors: a cancelled run: code %d (%d): %s", (int)err.code,
           (int)fr_cancel_reason_code(FR_CANCEL_CLIENT_GONE), err.msg);
    fr_onnx_cuda_sess_free(s);
    free(buf);
    fr_onnx_model_free(m);
}

/* ---------------------------------------------------------------- bench */

static float *rand_buf(int64_t n, unsigned seed) {
    float *p = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

/* ms per run of m at dims (after 3 warm-up runs: plan, eager, graph capture). */
static double bench_one(const fr_onnx_model *m, const int64_t *d, int iters) {
    fr_onnx_cuda_sess *s = cuda_sess(m, 1);
    if (!s) return -1;
    fr_onnx_arr x = {.rank = 4, .dims = {d[0], d[1], d[2], d[3]}}, y;
    x.data = rand_buf(d[0] * d[1] * d[2] * d[3], 7);
    fr_err err = {0};
    double ms = -1;
    for (int w = 0; w < 3; w++)
        if (fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err)) {
            fprintf(stderr, "  bench: %s\n", err.msg);
            goto done;
        }
    const double t0 = now_s();
    for (int i = 0; i < iters; i++) fr_onnx_cuda_sess_run(s, &x, 1, &y, 1, NULL, &err);
    ms = (now_s() - t0) * 1e3 / iters;
done:
    free(x.data);
    fr_onnx_cuda_sess_free(s);
    return ms;
}

typedef struct pipe_arg {
    const fr_onnx_model *det, *cls, *rec;
    pthread_barrier_t *bar; /* plans made by every thread before any captures a graph */
    double seconds;
    int pages;
    int ok, graphed;
} pipe_arg;

static void *pipe_thread(void *v) {
    pipe_arg *a = v;
    fr_onnx_cuda_sess *sd = cuda_sess(a->det, 1), *sc = cuda_sess(a->cls, 1), *sr = cuda_sess(a->rec, 1);
    fr_onnx_arr xd = {.rank = 4, .dims = {4, 3, 960, 672}}, xc = {.rank = 4, .dims = {64, 3, 48, 192}};
    fr_onnx_arr xr = {.rank = 4, .dims = {64, 3, 48, 320}}, y;
    xd.data = rand_buf(4 * 3 * 960 * 672, 1);
    xc.data = rand_buf(64 * 3 * 48 * 192, 2);
    xr.data = rand_buf(64 * 3 * 48 * 320, 3);
    fr_err err = {0};
    a->ok = sd && sc && sr;
    for (int w = 0; w < 3; w++) {
        if (a->ok)
            a->ok = !fr_onnx_cuda_sess_run(sd, &xd, 1, &y, 1, NULL, &err) &&
                    !fr_onnx_cuda_sess_run(sc, &xc, 1, &y, 1, NULL, &err) &&
                    !fr_onnx_cuda_sess_run(sr, &xr, 1, &y, 1, NULL, &err);
        pthread_barrier_wait(a->bar);
    }
    a->graphed = a->ok && fr_onnx_cuda_sess_last_graphed(sd) && fr_onnx_cuda_sess_last_graphed(sc) &&
                 fr_onnx_cuda_sess_last_graphed(sr);
    const double t0 = now_s();
    while (a->ok && now_s() - t0 < a->seconds) {
        fr_onnx_cuda_sess_run(sd, &xd, 1, &y, 1, NULL, &err);
        for (int k = 0; k < 3; k++) {
            fr_onnx_cuda_sess_run(sc, &xc, 1, &y, 1, NULL, &err);
            fr_onnx_cuda_sess_run(sr, &xr, 1, &y, 1, NULL, &err);
        }
        a->pages += 4;
    }
    a->seconds = now_s() - t0;
    free(xd.data);
    free(xc.data);
    free(xr.data);
    fr_onnx_cuda_sess_free(sd);
    fr_onnx_cuda_sess_free(sc);
    fr_onnx_cuda_sess_free(sr);
    return NULL;
}

static void bench(void) {
    fr_onnx_model *det = load_model(DET), *cls = load_model(CLS), *rec = load_model(REC);
    if (!det || !cls || !rec) {
        printf("bench: models missing\n");
        goto done;
    }
    const double d1 = bench_one(det, (const int64_t[]){1, 3, 960, 672}, 50);
    const double d4 = bench_one(det, (const int64_t[]){4, 3, 960, 672}, 20);
    const double c64 = bench_one(cls, (const int64_t[]){64, 3, 48, 192}, 50);
    const double r64 = bench_one(rec, (const int64_t[]){64, 3, 48, 320}, 50);
    printf("\n==== onnx bench (TF32, CUDA graphs, one session, host arrays in and out) ====\n");
    printf("onnx-bench %-28s %10s %12s\n", "run", "ms/run", "items/s");
    printf("onnx-bench %-28s %10.3f %12.1f pages\n", "det 1x3x960x672", d1, 1e3 / d1);
    printf("onnx-bench %-28s %10.3f %12.1f pages\n", "det 4x3x960x672", d4, 4e3 / d4);
    printf("onnx-bench %-28s %10.3f %12.1f lines\n", "cls 64x3x48x192", c64, 64e3 / c64);
    printf("onnx-bench %-28s %10.3f %12.1f lines\n", "rec 64x3x48x320", r64, 64e3 / r64);
    const double det_pp = fmin(d1, d4 / 4), page = det_pp + 40.0 / 64.0 * (c64 + r64);
    printf("onnx-bench %-28s %10.3f %12.1f pages/s (det + 40/64 (cls + rec), one stream)\n",
           "page estimate", page, 1e3 / page);
    enum { NT = 4 };
    pthread_t th[NT];
    pipe_arg a[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    for (int t = 0; t < NT; t++) {
        a[t] = (pipe_arg){det, cls, rec, &bar, 5.0, 0, 0, 0};
        pthread_create(&th[t], NULL, pipe_thread, &a[t]);
    }
    int pages = 0, ok = 1, graphed = 1;
    double secs = 0;
    for (int t = 0; t < NT; t++) {
        pthread_join(th[t], NULL);
        pages += a[t].pages;
        ok &= a[t].ok;
        graphed &= a[t].graphed;
        secs = fmax(secs, a[t].seconds);
    }
    pthread_barrier_destroy(&bar);
    const double pps = secs > 0 ? pages / secs : 0;
    printf("onnx-bench %-28s %10.3f %12.1f pages/s (%d threads, det 4 pages + 3x64 cls/rec lines per loop, %s)%s\n",
           "pipeline measured", pps > 0 ? 1e3 / pps : 0.0, pps, NT,
           graphed ? "all graphed" : "NOT all graphed", ok ? "" : " (a run FAILED)");
    printf("onnx-bench target >= 50 A4 pages/s: %s\n", pps >= 50 ? "met" : "NOT met");
done:
    fr_onnx_model_free(det);
    fr_onnx_model_free(cls);
    fr_onnx_model_free(rec);
}

int main(int argc, char **argv) {
    int do_bench = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bench")) do_bench = 0;
        else if (!strcmp(argv[i], "--version")) return puts("gpu-onnx 1") < 0;
        else snprintf(root, sizeof root, "%s", argv[i]);
    }
    check_ops();
    check_whole(CLS, "cls_1x48x192", 0);
    check_whole(DET, "det_64x96", 1);
    check_whole(DET, "det_96x128", 1);
    check_whole(REC, "rec_1x48x160", 0);
    check_rec_batch();
    check_argmax_kernel();
    check_argmax_session();
    check_errors();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    fflush(stdout);
    poison = 0;
    if (do_bench) bench();
    return n_fail ? 1 : 0;
}
