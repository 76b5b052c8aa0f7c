/* test_onnx_seq.c — the executor's ops for sequence models (Silero VAD): If (branches chosen at
 * planning, scopes, bounds), LSTM, Gather, Pad, ConstantOfShape, Unsqueeze, Identity, Equal, Log,
 * Neg, Cast to BOOL, 1-D Conv and int64 graph inputs, on small graphs built by hand
 * (tests/onnx_build.h). Each expected value is computed here by a plain loop written from the
 * ONNX specification; the whole Silero graph is checked against onnxruntime in tests/test_vad.c.
 * Tolerance: 1e-6 absolute (the same arithmetic in the same order, but expf / tanhf of libm).
 */
#include "t.h"

#include "backend/onnx_exec.h"
#include "model/onnx/onnx.h"
#include "onnx_build.h"

#define TOL 1e-6

static fr_onnx_model *build(ob *b, const char *name, fr_err *err) {
    size_t len;
    if (!b->opset) b->opset = 16;
    uint8_t *bytes = ob_pack(b, &len);
    fr_onnx_model *m = fr_onnx_model_load_buffer(bytes, len, name, err);
    free(bytes);
    ob_free(b);
    return m;
}

static void ob_str_attr(ob *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ob_str(b, v);
}

/* Runs m on in (n_in), expects n_out outputs; returns the session (outputs valid) or NULL. */
static fr_onnx_sess *run(fr_onnx_model *m, fr_onnx_arr *in, int n_in, fr_onnx_arr *out, int n_out,
                         fr_err *err) {
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, err) : NULL;
    if (!s) {
        fprintf(stderr, "  %s\n", err->msg);
        return NULL;
    }
    if (fr_onnx_sess_run(s, in, n_in, out, n_out, NULL, err)) {
        fr_onnx_sess_free(s);
        return NULL;
    }
    return s;
}

static void check_vals(const fr_onnx_arr *o, const float *want, int n) {
    int64_t cnt = 1;
    for (int k = 0; k < o->rank; k++) cnt *= o->dims[k];
    CHECK_EQ_INT(cnt, n);
    for (int i = 0; i < n && i < cnt; i++)
        if (fabs((double)o->data[i] - want[i]) > TOL) {
            fprintf(stderr, "  [%d] %.7g != %.7g\n", i, o->data[i], want[i]);
            CHECK(0);
            return;
        }
}

/* ---------------------------------------------------------------- If */

/* y = If(sel == 1) { x * k (k an initializer of the branch) } else { -x }; the branch's Mul
 * also reads the outer x. */
static fr_onnx_model *if_model(fr_err *err) {
    ob b = {0}, t = {0}, e = {0};
    ob_input(&b, "x", 1, (const int64_t[]){3});
    ob_input_i64(&b, "sel", 0, NULL);
    ob_init(&b, ob_itensor(&b, "one", 0, NULL, (const int64_t[]){1}, 1));
    ob_node(&b, "Equal", "eq", (const char *[]){"sel", "one", NULL}, (const char *[]){"cond", NULL});
    ob_init(&t, ob_tensor(&t, "k", 1, (const int64_t[]){1}, (const float[]){2.0f}, 1, 1));
    ob_node(&t, "Mul", "m", (const char *[]){"x", "k", NULL}, (const char *[]){"tx", NULL});
    ob_output(&t, "tx");
    ob_node(&e, "Neg", "ng", (const char *[]){"x", NULL}, (const char *[]){"ex", NULL});
    ob_output(&e, "ex");
    Onnx__NodeProto *n = ob_node(&b, "If", "if", (const char *[]){"cond", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_attr_graph(&b, n, "else_branch", ob_graph(&b, &e));
    ob_output(&b, "y");
    return build(&b, "if", err);
}

TEST(if_selects_the_branch_by_an_int64_input) {
    fr_err err = {0};
    fr_onnx_model *m = if_model(&err);
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(m->n_scopes, 3);
    fr_onnx_sess *s = fr_onnx_sess_new(m, NULL, &err);
    CHECK(s != NULL);
    float xv[3] = {1, -2, 3};
    for (int64_t sel = 0; sel <= 1 && s; sel++) {
        fr_onnx_arr in[2] = {{.rank = 1, .dims = {3}, .data = xv}, {.rank = 0, .idata = &sel}}, y;
        CHECK(fr_onnx_sess_run(s, in, 2, &y, 1, NULL, &err) == 0);
        const float want[2][3] = {{-1, 2, -3}, {2, -4, 6}};
        check_vals(&y, want[sel], 3);
    }
    /* an int64 input without idata, or too large, is BAD_REQUEST */
    fr_onnx_arr bad[2] = {{.rank = 1, .dims = {3}, .data = xv}, {.rank = 0}}, y;
    CHECK(fr_onnx_sess_run(s, bad, 2, &y, 1, NULL, &err) == -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

TEST(if_on_float_data_is_unsupported_at_the_run) {
    ob b = {0}, t = {0}, e = {0};
    ob_input(&b, "x", 1, (const int64_t[]){1});
    ob_node(&b, "Cast", "cb", (const char *[]){"x", NULL}, (const char *[]){"cond", NULL});
    ob_attr_int(&b, b.nodes[0], "to", 9);
    ob_node(&t, "Identity", "ti", (const char *[]){"x", NULL}, (const char *[]){"tx", NULL});
    ob_output(&t, "tx");
    ob_node(&e, "Neg", "en", (const char *[]){"x", NULL}, (const char *[]){"ex", NULL});
    ob_output(&e, "ex");
    Onnx__NodeProto *n = ob_node(&b, "If", "ifd", (const char *[]){"cond", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_attr_graph(&b, n, "else_branch", ob_graph(&b, &e));
    ob_output(&b, "y");
    fr_err err = {0};
    fr_onnx_model *m = build(&b, "ifdata", &err);
    CHECK(m != NULL);
    float xv = 1;
    fr_onnx_arr in = {.rank = 1, .dims = {1}, .data = &xv}, y;
    fr_onnx_sess *s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        CHECK(fr_onnx_sess_run(s, &in, 1, &y, 1, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "ifd") != NULL);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

/* If on a shape (Shape → Gather → Equal), nested inside another If's branch. */
TEST(if_nested_on_a_shape) {
    ob b = {0}, t = {0}, e = {0}, t2 = {0}, e2 = {0};
    ob_input(&b, "x", 1, (const int64_t[]){-1});
    ob_input_i64(&b, "sel", 0, NULL);
    ob_init(&b, ob_itensor(&b, "one", 0, NULL, (const int64_t[]){1}, 1));
    ob_init(&b, ob_itensor(&b, "zero", 0, NULL, (const int64_t[]){0}, 1));
    ob_init(&b, ob_itensor(&b, "two", 0, NULL, (const int64_t[]){2}, 1));
    ob_node(&b, "Equal", "eq", (const char *[]){"sel", "one", NULL}, (const char *[]){"cond", NULL});
    /* then: If(len(x) == 2) { Log(x) } else { Identity(x) } */
    ob_node(&t, "Shape", "sh", (const char *[]){"x", NULL}, (const char *[]){"shp", NULL});
    ob_node(&t, "Gather", "ga", (const char *[]){"shp", "zero", NULL}, (const char *[]){"len", NULL});
    ob_node(&t, "Equal", "eq2", (const char *[]){"len", "two", NULL}, (const char *[]){"c2", NULL});
    ob_node(&t2, "Log", "lg", (const char *[]){"x", NULL}, (const char *[]){"l2", NULL});
    ob_output(&t2, "l2");
    ob_node(&e2, "Identity", "id", (const char *[]){"x", NULL}, (const char *[]){"i2", NULL});
    ob_output(&e2, "i2");
    Onnx__NodeProto *n2 = ob_node(&t, "If", "inner", (const char *[]){"c2", NULL}, (const char *[]){"tx", NULL});
    ob_attr_graph(&t, n2, "then_branch", ob_graph(&t, &t2));
    ob_attr_graph(&t, n2, "else_branch", ob_graph(&t, &e2));
    ob_output(&t, "tx");
    ob_node(&e, "Neg", "ng", (const char *[]){"x", NULL}, (const char *[]){"ex", NULL});
    ob_output(&e, "ex");
    Onnx__NodeProto *n = ob_node(&b, "If", "outer", (const char *[]){"cond", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_attr_graph(&b, n, "else_branch", ob_graph(&b, &e));
    ob_output(&b, "y");
    fr_err err = {0};
    fr_onnx_model *m = build(&b, "nested", &err);
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(m->n_scopes, 5);
    fr_onnx_sess *s = fr_onnx_sess_new(m, NULL, &err);
    CHECK(s != NULL);
    float xv[3] = {1, 2, 4};
    const int64_t one = 1, zero = 0;
    for (int len = 2; len <= 3 && s; len++) {
        fr_onnx_arr in[2] = {{.rank = 1, .dims = {len}, .data = xv}, {.rank = 0, .idata = &one}}, y;
        CHECK(fr_onnx_sess_run(s, in, 2, &y, 1, NULL, &err) == 0);
        const float wl[2] = {0.0f, logf(2.0f)};
        if (len == 2) check_vals(&y, wl, 2);
        else check_vals(&y, xv, 3);
        in[1].idata = &zero;
        CHECK(fr_onnx_sess_run(s, in, 2, &y, 1, NULL, &err) == 0);
        const float wn[3] = {-1, -2, -4};
        check_vals(&y, wn, len);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

TEST(if_scopes_and_bounds_refused) {
    fr_err err = {0};
    /* the else branch reads a value of the then branch: BAD_REQUEST */
    ob b = {0}, t = {0}, e = {0};
    ob_input(&b, "x", 1, (const int64_t[]){1});
    ob_input_i64(&b, "c", 0, NULL);
    ob_node(&t, "Neg", "tn", (const char *[]){"x", NULL}, (const char *[]){"tx", NULL});
    ob_output(&t, "tx");
    ob_node(&e, "Neg", "en", (const char *[]){"tx", NULL}, (const char *[]){"ex", NULL});
    ob_output(&e, "ex");
    Onnx__NodeProto *n = ob_node(&b, "If", "if", (const char *[]){"c", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_attr_graph(&b, n, "else_branch", ob_graph(&b, &e));
    ob_output(&b, "y");
    CHECK(build(&b, "scope", &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK(strstr(err.msg, "out of its scope") != NULL);
    /* a missing branch: BAD_REQUEST */
    ob_input(&b, "x", 1, (const int64_t[]){1});
    ob_input_i64(&b, "c", 0, NULL);
    ob_node(&t, "Neg", "tn", (const char *[]){"x", NULL}, (const char *[]){"tx", NULL});
    ob_output(&t, "tx");
    n = ob_node(&b, "If", "if1", (const char *[]){"c", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_output(&b, "y");
    err = (fr_err){0};
    CHECK(build(&b, "onebranch", &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    /* If bodies nested FR_ONNX_MAX_DEPTH + 1 deep: TOO_LARGE before protobuf-c decodes them */
    ob lv[FR_ONNX_MAX_DEPTH + 2];
    memset(lv, 0, sizeof lv);
    const int deep = FR_ONNX_MAX_DEPTH + 1;
    for (int d = deep; d >= 0; d--) {
        ob *g = &lv[d];
        if (d == 0) {
            ob_input(g, "x", 1, (const int64_t[]){1});
            ob_input_i64(g, "c", 0, NULL);
        }
        char out[16], nm[16];
        snprintf(out, sizeof out, "o%d", d);
        snprintf(nm, sizeof nm, "n%d", d);
        if (d == deep) {
            ob_node(g, "Neg", nm, (const char *[]){"x", NULL}, (const char *[]){out, NULL});
        } else {
            ob other = {0};
            char eo[16];
            snprintf(eo, sizeof eo, "e%d", d);
            ob_node(&other, "Neg", eo, (const char *[]){"x", NULL}, (const char *[]){eo, NULL});
            ob_output(&other, eo);
            Onnx__NodeProto *in = ob_node(g, "If", nm, (const char *[]){"c", NULL}, (const char *[]){out, NULL});
            char below[16];
            snprintf(below, sizeof below, "o%d", d + 1);
            ob_output(&lv[d + 1], below);
            ob_attr_graph(g, in, "then_branch", ob_graph(g, &lv[d + 1]));
            ob_attr_graph(g, in, "else_branch", ob_graph(g, &other));
        }
    }
    ob_output(&lv[0], "o0");
    err = (fr_err){0};
    CHECK(build(&lv[0], "deep", &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "nested") != NULL);
}

/* ---------------------------------------------------------------- LSTM */

static float sig(float v) { return 1.0f / (1.0f + expf(-v)); }

TEST(lstm_against_a_plain_loop) {
    enum { S = 3, I = 2, H = 2 };
    float x[S * I], w[4 * H * I], r[4 * H * H], bb[8 * H], h0[H], c0[H];
    uint32_t seed = 7;
    float *all[6] = {x, w, r, bb, h0, c0};
    const int cnt[6] = {S * I, 4 * H * I, 4 * H * H, 8 * H, H, H};
    for (int a = 0; a < 6; a++)
        for (int i = 0; i < cnt[a]; i++) {
            seed = seed * 1664525u + 1013904223u;
            all[a][i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
    /* the reference: ONNX gate order i, o, f, c */
    float h[H], c[H], ys[S * H];
    memcpy(h, h0, sizeof h);
    memcpy(c, c0, sizeof c);
    for (int t = 0; t < S; t++) {
        float g[4 * H];
        for (int j = 0; j < 4 * H; j++) {
            float acc = bb[j] + bb[4 * H + j];
            for (int k = 0; k < I; k++) acc += w[j * I + k] * x[t * I + k];
            for (int k = 0; k < H; k++) acc += r[j * H + k] * h[k];
            g[j] = acc;
        }
        for (int j = 0; j < H; j++) {
            c[j] = sig(g[2 * H + j]) * c[j] + sig(g[j]) * tanhf(g[3 * H + j]);
            h[j] = sig(g[H + j]) * tanhf(c[j]);
            ys[t * H + j] = h[j];
        }
    }
    ob b = {0};
    ob_input(&b, "x", 3, (const int64_t[]){S, 1, I});
    ob_input(&b, "h0", 3, (const int64_t[]){1, 1, H});
    ob_input(&b, "c0", 3, (const int64_t[]){1, 1, H});
    ob_init(&b, ob_tensor(&b, "W", 3, (const int64_t[]){1, 4 * H, I}, w, 4 * H * I, 1));
    ob_init(&b, ob_tensor(&b, "R", 3, (const int64_t[]){1, 4 * H, H}, r, 4 * H * H, 1));
    ob_init(&b, ob_tensor(&b, "B", 2, (const int64_t[]){1, 8 * H}, bb, 8 * H, 1));
    Onnx__NodeProto *n = ob_node(&b, "LSTM", "lstm", (const char *[]){"x", "W", "R", "B", "", "h0", "c0", NULL},
                                 (const char *[]){"Y", "Yh", "Yc", NULL});
    ob_attr_int(&b, n, "hidden_size", H);
    ob_output(&b, "Y");
    ob_output(&b, "Yh");
    ob_output(&b, "Yc");
    fr_err err = {0};
    fr_onnx_model *m = build(&b, "lstm", &err);
    CHECK(m != NULL);
    fr_onnx_arr in[3] = {{.rank = 3, .dims = {S, 1, I}, .data = x},
                         {.rank = 3, .dims = {1, 1, H}, .data = h0},
                         {.rank = 3, .dims = {1, 1, H}, .data = c0}}, out[3];
    fr_onnx_sess *s = run(m, in, 3, out, 3, &err);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_INT(out[0].rank, 4);
        CHECK_EQ_INT(out[0].dims[0], S);
        check_vals(&out[0], ys, S * H);
        check_vals(&out[1], h, H);
        check_vals(&out[2], c, H);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    /* reverse direction: UNSUPPORTED, naming the node */
    ob_input(&b, "x", 3, (const int64_t[]){S, 1, I});
    ob_init(&b, ob_tensor(&b, "W", 3, (const int64_t[]){1, 4 * H, I}, w, 4 * H * I, 1));
    ob_init(&b, ob_tensor(&b, "R", 3, (const int64_t[]){1, 4 * H, H}, r, 4 * H * H, 1));
    n = ob_node(&b, "LSTM", "rev", (const char *[]){"x", "W", "R", NULL}, (const char *[]){"Y", NULL});
    ob_attr_int(&b, n, "hidden_size", H);
    ob_str_attr(&b, n, "direction", "reverse");
    ob_output(&b, "Y");
    m = build(&b, "lstmrev", &err);
    CHECK(m != NULL);
    s = m ? fr_onnx_sess_new(m, NULL, &err) : NULL;
    CHECK(s != NULL);
    if (s) {
        CHECK(fr_onnx_sess_run(s, in, 1, out, 1, NULL, &err) == -1);
        CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "rev") != NULL);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

/* ---------------------------------------------------------------- indexing and padding */

/* One node over graph input x (shape xr, xd) with int64 initializers k0 (and k1); runs on xv. */
static fr_onnx_model *one_node(const char *op, int xr, const int64_t *xd, const int64_t *k0,
                               int k0n, const char *attr, int64_t aval, const char *mode,
                               fr_err *err) {
    ob b = {0};
    ob_input(&b, "x", xr, xd);
    const char *ins[3] = {"x", k0 ? "k0" : NULL, NULL};
    if (k0) ob_init(&b, ob_itensor(&b, "k0", 1, (const int64_t[]){k0n}, k0, (size_t)k0n));
    Onnx__NodeProto *n = ob_node(&b, op, op, ins, (const char *[]){"y", NULL});
    if (attr) ob_attr_int(&b, n, attr, aval);
    if (mode) ob_str_attr(&b, n, "mode", mode);
    ob_output(&b, "y");
    return build(&b, op, err);
}

static void run_one(fr_onnx_model *m, int xr, const int64_t *xd, float *xv, const float *want,
                    int n_want, fr_err_code code) {
    fr_err err = {0};
    CHECK(m != NULL);
    if (!m) return;
    fr_onnx_arr in = {.rank = xr, .data = xv}, y;
    memcpy(in.dims, xd, (size_t)xr * sizeof *xd);
    fr_onnx_sess *s = fr_onnx_sess_new(m, NULL, &err);
    CHECK(s != NULL);
    const int rc = s ? fr_onnx_sess_run(s, &in, 1, &y, 1, NULL, &err) : -1;
    if (code) {
        CHECK(rc == -1);
        CHECK_EQ_INT(err.code, code);
    } else {
        if (rc) fprintf(stderr, "  %s\n", err.msg);
        CHECK(rc == 0);
        if (!rc) check_vals(&y, want, n_want);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
}

TEST(gather_axis_and_negative_indices) {
    fr_err err = {0};
    float xv[6] = {0, 1, 2, 10, 11, 12};
    const int64_t xd[2] = {2, 3};
    const float want[6] = {2, 2, 0, 12, 12, 10};
    run_one(one_node("Gather", 2, xd, (const int64_t[]){2, -1, 0}, 3, "axis", 1, NULL, &err), 2, xd,
            xv, want, 6, 0);
    run_one(one_node("Gather", 2, xd, (const int64_t[]){3}, 1, "axis", 1, NULL, &err), 2, xd, xv,
            NULL, 0, FR_ERR_BAD_REQUEST);
}

TEST(pad_reflect_edge_constant) {
    fr_err err = {0};
    float xv[5] = {1, 2, 3, 4, 5};
    const int64_t xd[2] = {1, 5};
    const int64_t pads[4] = {0, 2, 0, 3};
    const float refl[10] = {3, 2, 1, 2, 3, 4, 5, 4, 3, 2};
    const float edge[10] = {1, 1, 1, 2, 3, 4, 5, 5, 5, 5};
    const float cons[10] = {0, 0, 1, 2, 3, 4, 5, 0, 0, 0};
    run_one(one_node("Pad", 2, xd, pads, 4, NULL, 0, "reflect", &err), 2, xd, xv, refl, 10, 0);
    run_one(one_node("Pad", 2, xd, pads, 4, NULL, 0, "edge", &err), 2, xd, xv, edge, 10, 0);
    run_one(one_node("Pad", 2, xd, pads, 4, NULL, 0, NULL, &err), 2, xd, xv, cons, 10, 0);
    /* reflect wider than the dimension, a negative pad: refused */
    run_one(one_node("Pad", 2, xd, (const int64_t[]){0, 5, 0, 0}, 4, NULL, 0, "reflect", &err), 2,
            xd, xv, NULL, 0, FR_ERR_BAD_REQUEST);
    run_one(one_node("Pad", 2, xd, (const int64_t[]){0, -1, 0, 0}, 4, NULL, 0, NULL, &err), 2, xd,
            xv, NULL, 0, FR_ERR_UNSUPPORTED);
}

TEST(unsqueeze_identity_log_neg) {
    fr_err err = {0};
    float xv[3] = {1, 2, 4};
    const int64_t xd[1] = {3};
    fr_onnx_model *m = one_node("Unsqueeze", 1, xd, (const int64_t[]){0, -1}, 2, NULL, 0, NULL, &err);
    CHECK(m != NULL);
    fr_onnx_arr in = {.rank = 1, .dims = {3}, .data = xv}, y;
    fr_onnx_sess *s = run(m, &in, 1, &y, 1, &err);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_INT(y.rank, 3);
        CHECK(y.dims[0] == 1 && y.dims[1] == 3 && y.dims[2] == 1);
        check_vals(&y, xv, 3);
    }
    fr_onnx_sess_free(s);
    fr_onnx_model_free(m);
    run_one(one_node("Identity", 1, xd, NULL, 0, NULL, 0, NULL, &err), 1, xd, xv, xv, 3, 0);
    const float lg[3] = {0, logf(2), logf(4)}, ng[3] = {-1, -2, -4};
    run_one(one_node("Log", 1, xd, NULL, 0, NULL, 0, NULL, &err), 1, xd, xv, lg, 3, 0);
    run_one(one_node("Neg", 1, xd, NULL, 0, NULL, 0, NULL, &err), 1, xd, xv, ng, 3, 0);
    const float bo[3] = {1, 1, 1};
    run_one(one_node("Cast", 1, xd, NULL, 0, "to", 9, NULL, &err), 1, xd, xv, bo, 3, 0);
}

TEST(equal_broadcast_and_constantofshape) {
    ob b = {0};
    ob_input(&b, "x", 2, (const int64_t[]){2, 2});
    ob_init(&b, ob_tensor(&b, "k", 1, (const int64_t[]){2}, (const float[]){1, 4}, 2, 1));
    ob_node(&b, "Equal", "eq", (const char *[]){"x", "k", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    fr_err err = {0};
    float xv[4] = {1, 2, 3, 4};
    const int64_t xd[2] = {2, 2};
    const float want[4] = {1, 0, 0, 1};
    run_one(build(&b, "equal", &err), 2, xd, xv, want, 4, 0);
    /* ConstantOfShape(Shape(x)) with an int64 value of 7 (an int64 output comes back as float) */
    ob_input(&b, "x", 2, (const int64_t[]){2, 2});
    ob_node(&b, "Shape", "sh", (const char *[]){"x", NULL}, (const char *[]){"s", NULL});
    Onnx__NodeProto *n = ob_node(&b, "ConstantOfShape", "cs", (const char *[]){"s", NULL}, (const char *[]){"y", NULL});
    ob_attr_tensor(&b, n, "value", ob_itensor(&b, NULL, 1, (const int64_t[]){1}, (const int64_t[]){7}, 1));
    ob_output(&b, "y");
    const float sev[4] = {7, 7, 7, 7};
    run_one(build(&b, "cos", &err), 2, xd, xv, sev, 4, 0);
}

TEST(conv_1d_against_a_plain_loop) {
    enum { C = 2, L = 7, M = 3, K = 3, STR = 2, PL = 1, PR = 1 };
    float x[C * L], w[M * C * K], bias[M];
    for (int i = 0; i < C * L; i++) x[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < M * C * K; i++) w[i] = (float)((i * 7) % 11) / 10.0f - 0.5f;
    for (int i = 0; i < M; i++) bias[i] = 0.1f * (float)i;
    const int OL = (L + PL + PR - K) / STR + 1;
    float want[M * 4];
    for (int o = 0; o < M; o++)
        for (int t = 0; t < OL; t++) {
            float acc = bias[o];
            for (int ci = 0; ci < C; ci++)
                for (int k = 0; k < K; k++) {
                    const int j = t * STR + k - PL;
                    if (j >= 0 && j < L) acc += w[(o * C + ci) * K + k] * x[ci * L + j];
                }
            want[o * OL + t] = acc;
        }
    ob b = {0};
    ob_input(&b, "x", 3, (const int64_t[]){1, C, L});
    ob_init(&b, ob_tensor(&b, "w", 3, (const int64_t[]){M, C, K}, w, M * C * K, 1));
    ob_init(&b, ob_tensor(&b, "b", 1, (const int64_t[]){M}, bias, M, 1));
    Onnx__NodeProto *n = ob_node(&b, "Conv", "c1", (const char *[]){"x", "w", "b", NULL}, (const char *[]){"y", NULL});
    ob_attr_ints(&b, n, "kernel_shape", 1, (const int64_t[]){K});
    ob_attr_ints(&b, n, "strides", 1, (const int64_t[]){STR});
    ob_attr_ints(&b, n, "pads", 2, (const int64_t[]){PL, PR});
    ob_output(&b, "y");
    fr_err err = {0};
    run_one(build(&b, "conv1d", &err), 3, (const int64_t[]){1, C, L}, x, want, M * OL, 0);
}

int main(void) { return t_main(); }
