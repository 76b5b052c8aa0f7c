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

/* ---------------------------------------------------------------- every op */

/* Runs one case of OPS/cases.txt with threads; the number of mismatches (-1: could not run). */
static int run_op_case(const char *name, int n_in, int n_out, int threads, int *used_ops) {
    char path[320];
    snprintf(path, sizeof path, OPS "%s.onnx", name);
    fr_onnx_model *m = load(path);
    if (!m) return -1;
    for (int i = 0; i < m->n_nodes; i++) used_ops[m->nodes[i].op] = 1;
    int bad = -1;
    fr_npy ins[8] = {{0}}, refs[8] = {{0}};
    fr_onnx_arr x[8], y[8];
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.n_threads = threads;
    fr_err err = {0};
    fr_onnx_sess *s = fr_onnx_sess_new(m, &o, &err);
    if (!s) fprintf(stderr, "  %s\n", err.msg);
    if (!s || n_in > 8 || n_out > 8 || n_in != m->n_inputs || n_out != m->n_outputs) goto done;
    for (int i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, OPS "%s.in%d.npy", name, i);
        if (npy(path, &ins[i])) goto done;
        x[i] = arr_of(&ins[i]);
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(path, sizeof path, OPS "%s.out%d.npy", name, i);
        if (npy(path, &refs[i])) goto done;
    }
    if (fr_onnx_sess_run(s, x, n_in, y, n_out, NULL, &err)) {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
        goto done;
    }
    bad = 0;
    for (int i = 0; i < n_out; i++) {
        if (!same_shape(&y[i], &refs[i])) {
            fprintf(stderr, "  %s: output %d has another shape (rank %d)\n", name, i, y[i].rank);
            bad++;
            continue;
        }
        for (int64_t k = 0; k < refs[i].n; k++) {
            const float r = refs[i].data[k], g = y[i].data[k];
            if (!(fabsf(g - r) <= 1e-5f + 1e-4f * fabsf(r))) {
                if (bad < 5) fprintf(stderr, "  %s: output %d [%lld] = %.7g, onnxruntime %.7g\n", name, i, (long long)k, g, r);
                bad++;
            }
        }
    }
done:
    for (int i = 0; i < 8; i++) {
        fr_npy_free(&ins[i]);
        fr_npy_free(&refs[i]);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    return bad;
}

/* The ops added for Silero VAD: covered by the hand-built graphs of tests/test_onnx_seq.c and,
 * in the whole graph, by tests/test_vad.c against onnxruntime (tests/fixtures/vad/ref/). */
static int by_hand(int op) {
    static const fr_onnx_op ops[] = {FR_ONNX_OP_ConstantOfShape, FR_ONNX_OP_Equal, FR_ONNX_OP_Gather,
                                     FR_ONNX_OP_Identity, FR_ONNX_OP_If, FR_ONNX_OP_Log,
                                     FR_ONNX_OP_LSTM, FR_ONNX_OP_Neg, FR_ONNX_OP_Pad,
                                     FR_ONNX_OP_Unsqueeze};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if ((int)ops[i] == op) return 1;
    return 0;
}

/* Every case of cases.txt, on 1 and 2 threads; every op of the loader's list but Constant (the
 * cases use initializers) and the by_hand ones is covered. */
TEST(every_op_against_onnxruntime) {
    FILE *f = fopen(OPS "cases.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    char name[128];
    int n_in, n_out, n_cases = 0, failed = 0;
    int used[FR_ONNX_OP_N] = {0};
    while (fscanf(f, "%127s %d %d", name, &n_in, &n_out) == 3) {
        n_cases++;
        for (int th = 1; th <= 2; th++)
            if (run_op_case(name, n_in, n_out, th, used) != 0) {
                fprintf(stderr, "  case %s (%d threads) failed\n", name, th);
                failed++;
            }
    }
    fclose(f);
    CHECK_EQ_INT(failed, 0);
    CHECK(n_cases >= 70);
    for (int op = 0; op < FR_ONNX_OP_N; op++)
        if (op != FR_ONNX_OP_Constant && !by_hand(op) && !used[op]) {
            fprintf(stderr, "  no case covers %s\n", fr_onnx_op_name((fr_onnx_op)op));
            CHECK(used[op]);
        }
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

static fr_onnx_model *load_cls(void) { return load(MODELS "ch_ppocr_mobile_v2.0_cls_infer.onnx"); }

/* One session serves every input size: cls at batch 1 and then batch 3 (the same line three
 * times) gives the same probabilities per row. */
TEST(shapes_inferred_per_run) {
    fr_onnx_model *m = load_cls();
    CHECK(m != NULL);
    fr_err err = {0};
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    fr_npy in = {0};
    CHECK(npy(REF "cls_1x48x192.in.npy", &in) == 0);
    if (s && in.data) {
        fr_onnx_arr x = arr_of(&in), y;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, NULL, &err) == 0);
        const float p0 = y.data[0], p1 = y.data[1];
        float *x3 = malloc((size_t)in.n * 3 * sizeof *x3);
        for (int b = 0; b < 3; b++) memcpy(x3 + b * in.n, in.data, (size_t)in.n * sizeof *x3);
        fr_onnx_arr xb = x;
        xb.dims[0] = 3;
        xb.data = x3;
        CHECK(fr_onnx_sess_run(s, &xb, 1, &y, 1, NULL, &err) == 0);
        CHECK_EQ_INT(y.dims[0], 3);
        for (int b = 0; b < 3 && y.dims[0] == 3; b++) {
            CHECK_NEAR(y.data[2 * b], p0, 1e-6);
            CHECK_NEAR(y.data[2 * b + 1], p1, 1e-6);
        }
        free(x3);
    }
    fr_npy_free(&in);
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

static int n_polls;
static fr_cancel_reason count_polls(void *ctx) {
    n_polls++;
    return FR_CANCEL_NONE;
}
static fr_cancel_reason gone_after(void *ctx) {
    return ++n_polls > *(int *)ctx ? FR_CANCEL_CLIENT_GONE : FR_CANCEL_NONE;
}

/* Wrong rank, wrong fixed dims, wrong counts: BAD_REQUEST, nothing run. */
TEST(hostile_input_shapes) {
    fr_onnx_model *m = load_cls();
    CHECK(m != NULL);
    fr_err err = {0};
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        static float buf[4 * 48 * 192];
        fr_onnx_arr y, x = {.rank = 3, .dims = {3, 48, 192}, .data = buf};
        fr_cancel cc = {count_polls, NULL};
        n_polls = 0;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        x = (fr_onnx_arr){.rank = 4, .dims = {1, 4, 48, 192}, .data = buf};
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK(strstr(err.msg, "dim 1") != NULL);
        x.dims[1] = 3;
        x.dims[2] = -5;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        x.dims[2] = 48;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 2, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        x.data = NULL;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        /* an input too small for the kernels: the node is named */
        x = (fr_onnx_arr){.rank = 4, .dims = {1, 3, 1, 1}, .data = buf};
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK(strstr(err.msg, "node ") != NULL);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK_EQ_INT(n_polls, 0);
        /* the session still works */
        x = (fr_onnx_arr){.rank = 4, .dims = {1, 3, 48, 192}, .data = buf};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == 0);
        CHECK(n_polls > 10);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

/* Sizes over the caps: TOO_LARGE from the plan, before any node is computed (the cancel check,
 * polled before each node, is never reached) and without reading the input. */
TEST(hostile_sizes_too_large_before_compute) {
    fr_onnx_model *m = load(MODELS "ch_PP-OCRv4_det_infer.onnx");
    CHECK(m != NULL);
    fr_err err = {0};
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        static float tiny[16];
        fr_onnx_arr y;
        fr_cancel cc = {count_polls, NULL};
        n_polls = 0;
        /* 1.2e9 input elements (under the element cap): the first conv needs 6.4 GB > 2 GiB */
        fr_onnx_arr x = {.rank = 4, .dims = {1, 3, 20000, 20000}, .data = tiny};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
        /* over the element cap */
        x.dims[2] = x.dims[3] = 1 << 20;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
        x.dims[0] = INT64_MAX / 2;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
        CHECK_EQ_INT(n_polls, 0);
    }
    fr_onnx_sess_free(s);
    /* a small cap: a 96x128 page needs more than 1 MiB */
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.max_bytes = 1 << 20;
    s = m ? fr_onnx_sess_new(m, &o, &err) : NULL;
    CHECK(s != NULL);
    fr_npy in = {0};
    CHECK(npy(REF "det_96x128.in.npy", &in) == 0);
    if (s && in.data) {
        fr_onnx_arr x = arr_of(&in), y;
        fr_cancel cc = {count_polls, NULL};
        n_polls = 0;
        err = (fr_err){0};
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
        CHECK_EQ_INT(n_polls, 0);
    }
    fr_npy_free(&in);
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

/* A stop between nodes returns its code and names the node; the session runs again after. */
TEST(cancel_between_nodes) {
    fr_onnx_model *m = load_cls();
    CHECK(m != NULL);
    fr_err err = {0};
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    fr_npy in = {0};
    CHECK(npy(REF "cls_1x48x192.in.npy", &in) == 0);
    if (s && in.data) {
        fr_onnx_arr x = arr_of(&in), y;
        int after = 5;
        fr_cancel cc = {gone_after, &after};
        n_polls = 0;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, &cc, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_CANCELLED);
        CHECK(strstr(err.msg, "node ") != NULL);
        CHECK_EQ_INT(n_polls, 6);
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, NULL, &err) == 0);
        CHECK(y.data[0] >= 0 && y.data[0] <= 1);
    }
    fr_npy_free(&in);
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

/* Graphs the executor refuses: at session creation (UNSUPPORTED naming the node) or, for what
 * depends on the input, at the run. */
static fr_onnx_model *build(ob *b, const char *name) {
    size_t len;
    uint8_t *bytes = ob_pack(b, &len);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load_buffer(bytes, len, name, &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    free(bytes);
    ob_free(b);
    return m;
}
static void ob_attr_str(ob *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ob_str(b, v);
}

TEST(hostile_graphs_refused) {
    fr_err err = {0};
    /* Resize in linear mode */
    ob b = {0};
    ob_input(&b, "x", 4, (const int64_t[]){1, 1, 2, 2});
    static const float sc[4] = {1, 1, 2, 2};
    ob_init(&b, ob_tensor(&b, "roi", 1, (const int64_t[]){0}, sc, 0, 1));
    ob_init(&b, ob_tensor(&b, "sc", 1, (const int64_t[]){4}, sc, 4, 1));
    Onnx__NodeProto *n = ob_node(&b, "Resize", "up", (const char *[]){"x", "roi", "sc", NULL}, (const char *[]){"y", NULL});
    ob_attr_str(&b, n, "mode", "linear");
    ob_output(&b, "y");
    fr_onnx_model *m = build(&b, "linear");
    CHECK(m != NULL);
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "up") != NULL);
    fr_onnx_model_free(m);
    /* Cast to double */
    ob_input(&b, "x", 2, (const int64_t[]){2, 2});
    n = ob_node(&b, "Cast", "c", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_attr_int(&b, n, "to", 11);
    ob_output(&b, "y");
    m = build(&b, "cast");
    err = (fr_err){0};
    s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(m != NULL && s == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
    fr_onnx_model_free(m);
    /* Reshape to a shape computed from the data: refused at the run */
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"s", NULL});
    ob_node(&b, "Reshape", "rs", (const char *[]){"x", "s", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    m = build(&b, "reshape");
    err = (fr_err){0};
    s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        float xv[4] = {1, 2, 2, 1};
        fr_onnx_arr x = {.rank = 1, .dims = {4}, .data = xv}, y;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "rs") != NULL);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    /* Conv whose weights disagree with the input's channels (dims dynamic in the graph) */
    ob_input(&b, "x", 4, (const int64_t[]){-1, -1, -1, -1});
    static const float w[6] = {1, 2, 3, 4, 5, 6};
    ob_init(&b, ob_tensor(&b, "w", 4, (const int64_t[]){2, 3, 1, 1}, w, 6, 1));
    ob_node(&b, "Conv", "cv", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    m = build(&b, "conv");
    err = (fr_err){0};
    s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        static float xv[4 * 5 * 5];
        fr_onnx_arr x = {.rank = 4, .dims = {1, 4, 5, 5}, .data = xv}, y;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK(strstr(err.msg, "cv") != NULL);
        x.dims[1] = 3;
        CHECK(fr_onnx_sess_run(s, &x, 1, &y, 1, NULL, &err) == 0);
        CHECK_EQ_INT(y.dims[1], 2);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

int main(void) { return t_main(); }
