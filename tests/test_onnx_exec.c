/* test_onnx_exec.c — the CPU ONNX executor (backend/onnx_exec.h) against onnxruntime.
 *
 *   - every op: the small models of tests/fixtures/ref/onnx_ops/ (written, with their inputs
 *     and onnxruntime's outputs, by tests/onnx/make_op_refs.mjs), listed in its cases.txt;
 *   - the three PP-OCR models on the references of tests/fixtures/ref/onnx/ (make_refs.mjs);
 *   - hostile inputs: wrong rank or dims, sizes over max_bytes, a cancelled run, and
 *     graphs the executor must refuse.
 * A missing model or fixture is a FAIL. Tolerances (docs/ONNX.md): per op, |got - ref| <=
 * 1e-5 + 1e-4 * |ref| elementwise; whole models, relative L2 error <= 1e-4.
 */
#include "t.h"

#include <stdarg.h>

#include "backend/onnx_exec.h"
#include "base/npy.h"
#include "onnx_build.h"

#define REF "tests/fixtures/ref/onnx/"
#define OPS "tests/fixtures/ref/onnx_ops/"
#define MODELS "models/ppocr/"

static fr_onnx_model *load(const char *path) {
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load(path, &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    return m;
}

static int npy(const char *path, fr_npy *a) {
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

static int same_shape(const fr_onnx_arr *o, const fr_npy *r) {
    if (o->rank != r->n_dims) return 0;
    for (int i = 0; i < o->rank; i++)
        if (o->dims[i] != r->shape[i]) return 0;
    return 1;
}

/* ---------------------------------------------------------------- whole models */

/* Runs model on REF<name>.in.npy with threads, returns the session (out filled) or NULL. */
static fr_onnx_sess *run_model(const char *model, const char *name, int threads, fr_onnx_model **pm,
                               fr_npy *in, fr_onnx_arr *out) {
    char path[256];
    snprintf(path, sizeof path, REF "%s.in.npy", name);
    *pm = load(model);
    if (!*pm || npy(path, in)) return NULL;
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.n_threads = threads;
    fr_err err = {0};
    fr_onnx_sess *s = fr_onnx_sess_new(*pm, &o, &err);
    if (!s) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    fr_onnx_arr x = arr_of(in);
    if (fr_onnx_sess_run(s, &x, 1, out, 1, NULL, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        fr_onnx_sess_free(s);
        return NULL;
    }
    return s;
}

/* abs_tol > 0: the output is a probability map (det's sigmoid), compared by the largest absolute
 * difference, since onnxruntime's sigmoid flushes values under ~1e-7 to 0 and a map of a
 * text-free input is nearly all such values (its relative L2 error would measure only those);
 * otherwise by the relative L2 error. */
static void check_whole(const char *model, const char *name, int threads, double abs_tol) {
    fr_onnx_model *m = NULL;
    fr_npy in = {0}, ref = {0};
    fr_onnx_arr out;
    char path[256];
    snprintf(path, sizeof path, REF "%s.out.npy", name);
    fr_onnx_sess *s = run_model(model, name, threads, &m, &in, &out);
    CHECK(s != NULL);
    CHECK(npy(path, &ref) == 0);
    if (s && ref.data) {
        CHECK(same_shape(&out, &ref));
        if (same_shape(&out, &ref)) {
            const double e = t_rel_l2(out.data, ref.data, ref.n);
            double mx = 0;
            for (int64_t i = 0; i < ref.n; i++) mx = fmax(mx, fabs((double)out.data[i] - ref.data[i]));
            fprintf(stderr, "  %s (%d threads): rel L2 %.2e, max abs %.2e\n", name, threads, e, mx);
            if (abs_tol > 0) CHECK(mx <= abs_tol);
            else CHECK(e <= 1e-4);
        }
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    fr_npy_free(&in);
    fr_npy_free(&ref);
}

TEST(cls_whole_model) { check_whole(MODELS "ch_ppocr_mobile_v2.0_cls_infer.onnx", "cls_1x48x192", 1, 0); }
TEST(det_whole_model_64x96) { check_whole(MODELS "ch_PP-OCRv4_det_infer.onnx", "det_64x96", 1, 1e-5); }
TEST(det_whole_model_96x128_2threads) { check_whole(MODELS "ch_PP-OCRv4_det_infer.onnx", "det_96x128", 2, 1e-5); }
TEST(rec_whole_model_1x48x160) { check_whole(MODELS "ch_PP-OCRv4_rec_infer.onnx", "rec_1x48x160", 1, 0); }

/* rec at batch 2, width 320: the reference keeps per step the argmax, its probability and the
 * first 128 classes. */
TEST(rec_whole_model_2x48x320) {
    fr_onnx_model *m = NULL;
    fr_npy in = {0}, am = {0}, mx = {0}, head = {0};
    fr_onnx_arr out;
    fr_onnx_sess *s = run_model(MODELS "ch_PP-OCRv4_rec_infer.onnx", "rec_2x48x320", 2, &m, &in, &out);
    CHECK(s != NULL);
    CHECK(npy(REF "rec_2x48x320.argmax.npy", &am) == 0);
    CHECK(npy(REF "rec_2x48x320.max.npy", &mx) == 0);
    CHECK(npy(REF "rec_2x48x320.head.npy", &head) == 0);
    if (s && am.data && mx.data && head.data) {
        CHECK_EQ_INT(out.rank, 3);
        const int64_t T = out.dims[0] * out.dims[1], K = out.dims[2];
        CHECK_EQ_INT(T, am.n);
        int wrong = 0;
        double maxd = 0;
        float *h = malloc((size_t)T * 128 * sizeof *h), *pm = malloc((size_t)T * sizeof *pm);
        for (int64_t r = 0; r < T && T == am.n; r++) {
            const float *row = out.data + r * K;
            int64_t best = 0;
            for (int64_t k = 1; k < K; k++)
                if (row[k] > row[best]) best = k;
            /* a tie within the tolerance may flip the argmax; the probabilities must agree */
            if (best != (int64_t)am.data[r] && fabsf(row[(int64_t)am.data[r]] - row[best]) > 1e-4f) wrong++;
            pm[r] = row[(int64_t)am.data[r]];
            for (int k = 0; k < 128; k++) h[r * 128 + k] = row[k];
            maxd = fmax(maxd, fabs(pm[r] - mx.data[r]));
        }
        CHECK_EQ_INT(wrong, 0);
        if (T == am.n) {
            const double e1 = t_rel_l2(pm, mx.data, T), e2 = t_rel_l2(h, head.data, T * 128);
            fprintf(stderr, "  rec_2x48x320: rel L2 of the max %.2e, of the first 128 classes %.2e\n", e1, e2);
            CHECK(e1 <= 1e-4);
            CHECK(e2 <= 1e-4);
        }
        free(h);
        free(pm);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    fr_npy_free(&in);
    fr_npy_free(&am);
    fr_npy_free(&mx);
    fr_npy_free(&head);
}

/* ---------------------------------------------------------------- hostile inputs */

static fr_onnx_model *conv_relu_model(void) {
    size_t len;
    uint8_t *bytes = ob_conv_relu(1, &len);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load_buffer(bytes, len, "conv_relu", &err);
    free(bytes);
    return m;
}

/* The builder's 1x1 Conv + Relu, by hand: y[o] = relu(sum_c w[o][c] x[c] + b[o]). */
TEST(conv_relu_by_hand) {
    fr_onnx_model *m = conv_relu_model();
    CHECK(m != NULL);
    fr_err err = {0};
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        float x[3 * 2 * 3];
        for (int i = 0; i < 18; i++) x[i] = (float)(i % 7) - 2.5f;
        fr_onnx_arr in = {.rank = 4, .dims = {1, 3, 2, 3}, .data = x}, out;
        CHECK(fr_onnx_sess_run(s, &in, 1, &out, 1, NULL, &err) == 0);
        static const float w[6] = {0.5f, -1, 2, 0.25f, 1, -0.5f}, b[2] = {0.1f, -0.2f};
        CHECK_EQ_INT(out.rank, 4);
        CHECK_EQ_INT(out.dims[1], 2);
        CHECK_EQ_INT(out.dims[3], 3);
        for (int o = 0; o < 2; o++)
            for (int p = 0; p < 6; p++) {
                float v = b[o];
                for (int c = 0; c < 3; c++) v += w[o * 3 + c] * x[c * 6 + p];
                CHECK_NEAR(out.data[o * 6 + p], v > 0 ? v : 0, 1e-6);
            }
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

int main(void) { return t_main(); }
