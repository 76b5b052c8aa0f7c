/* test_onnx.c — the ONNX loader (src/model/onnx/onnx.c): small models written through protobuf-c
 * (tests/onnx_build.h) load into a topologically ordered graph with their constants, dynamic
 * input dimensions and attributes; hostile files (every truncation, absurd dimensions, data
 * shorter than its shape, external data, unknown ops, cycles, dangling inputs, repeated outputs,
 * subgraph attributes) are refused with a one-line message and the right code; the three PP-OCR
 * models installed by scripts/install-deps.sh (models/ppocr/) load with the op counts that
 * docs/ONNX.md lists; the onnxruntime references of tests/fixtures/ref/onnx (tests/onnx/make_refs.mjs)
 * fit the models' declared inputs and outputs (the recogniser's class count is the dictionary's
 * size plus blank and space; softmax rows sum to 1). A missing model or fixture is a failure. */
#include <stdint.h>

#include "base/npy.h"
#include "model/onnx/onnx.h"
#include "onnx_build.h"
#include "t.h"

static int one_line(const fr_err *e) { return e->msg[0] && !strchr(e->msg, '\n'); }

static fr_onnx_model *load_ob(ob *b, fr_err *err) {
    size_t len;
    uint8_t *bytes = ob_pack(b, &len);
    fr_onnx_model *m = fr_onnx_model_load_buffer(bytes, len, "t.onnx", err);
    free(bytes);
    ob_free(b);
    return m;
}

TEST(valid_model_loads_sorted) {
    for (int rev = 0; rev < 2; rev++) {
        size_t len;
        uint8_t *bytes = ob_conv_relu(rev, &len);
        fr_err err = {0};
        fr_onnx_model *m = fr_onnx_model_load_buffer(bytes, len, "t.onnx", &err);
        free(bytes);
        CHECK(m != NULL);
        if (!m) {
            fprintf(stderr, "  %s\n", err.msg);
            continue;
        }
        CHECK_EQ_INT(m->opset, 11);
        CHECK_EQ_INT(m->ir_version, 8);
        CHECK_EQ_INT(m->n_nodes, 3);
        CHECK_EQ_INT(m->nodes[0].op, FR_ONNX_OP_Constant);
        CHECK_EQ_INT(m->nodes[1].op, FR_ONNX_OP_Conv);
        CHECK_EQ_INT(m->nodes[2].op, FR_ONNX_OP_Relu);
        CHECK_STR(m->nodes[1].name, "conv");
        /* every input is produced earlier or is a graph input / constant */
        for (int i = 0; i < m->n_nodes; i++)
            for (int k = 0; k < m->nodes[i].n_in; k++) {
                int v = m->nodes[i].in[k];
                CHECK(v >= 0 && v < m->n_values);
                CHECK(m->values[v].producer < i);
            }
        CHECK_EQ_INT(m->n_inputs, 1);
        CHECK_EQ_INT(m->inputs[0].rank, 4);
        CHECK_EQ_INT(m->inputs[0].dims[0], -1);
        CHECK_EQ_INT(m->inputs[0].dims[1], 3);
        CHECK_STR(m->inputs[0].dim_names[0], "d0");
        CHECK_EQ_INT(m->n_outputs, 1);
        CHECK_STR(m->values[m->outputs[0].value].name, "y");
        const fr_onnx_tensor *w = m->values[m->nodes[1].in[1]].konst;
        const fr_onnx_tensor *bias = m->values[m->nodes[1].in[2]].konst;
        CHECK(w && w->rank == 4 && w->n == 6 && ((float *)w->data)[5] == -0.5f);
        CHECK(bias && bias->n == 2 && ((float *)bias->data)[1] == -0.2f);
        const fr_onnx_attr *ks = fr_onnx_node_attr(&m->nodes[1], "kernel_shape");
        CHECK(ks && ks->type == FR_ONNX_ATTR_INTS && ks->n == 2 && ks->ints[1] == 1);
        const fr_onnx_attr *gr = fr_onnx_node_attr(&m->nodes[1], "group");
        CHECK(gr && gr->type == FR_ONNX_ATTR_INT && gr->i == 1);
        CHECK(fr_onnx_node_attr(&m->nodes[1], "pads") == NULL);
        fr_onnx_model_free(m);
    }
}

/* Every proper prefix of a valid model either loads (protobuf prefixes can be valid messages)
 * or fails with a one-line message and a code other than internal. */
TEST(every_truncation_is_safe) {
    size_t len;
    uint8_t *bytes = ob_conv_relu(0, &len);
    int refused = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n + 1);
        memcpy(cut, bytes, n);
        fr_err err = {0};
        fr_onnx_model *m = fr_onnx_model_load_buffer(cut, n, "cut.onnx", &err);
        if (m) fr_onnx_model_free(m);
        else {
            refused++;
            CHECK(one_line(&err));
            CHECK(err.code != FR_ERR_INTERNAL);
            CHECK(!strncmp(err.msg, "cut.onnx: ", 10));
        }
        free(cut);
    }
    CHECK(refused > (int)len / 2);
    free(bytes);
}

static void expect_refused(fr_onnx_model *m, const fr_err *err, fr_err_code code,
                           const char *part) {
    CHECK(m == NULL);
    if (m) {
        fr_onnx_model_free(m);
        return;
    }
    CHECK_EQ_INT(err->code, code);
    CHECK(one_line(err));
    if (!strstr(err->msg, part)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", err->msg, part);
        CHECK(0);
    }
}

TEST(unknown_op_names_the_node) {
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "FancyOp", "mystery", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    fr_err err = {0};
    expect_refused(load_ob(&b, &err), &err, FR_ERR_UNSUPPORTED, "node mystery: op FancyOp");
    ob_input(&b, "x", 1, (const int64_t[]){4});
    Onnx__NodeProto *n = ob_node(&b, "Relu", "dom", (const char *[]){"x", NULL},
                                 (const char *[]){"y", NULL});
    n->domain = ob_str(&b, "com.microsoft");
    ob_output(&b, "y");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_UNSUPPORTED, "node dom: op com.microsoft.Relu");
}

TEST(cycle_is_refused) {
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Add", "a", (const char *[]){"x", "q", NULL}, (const char *[]){"p", NULL});
    ob_node(&b, "Relu", "b", (const char *[]){"p", NULL}, (const char *[]){"q", NULL});
    ob_output(&b, "q");
    fr_err err = {0};
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "cycle");
    /* a node reading its own output */
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Add", "self", (const char *[]){"x", "s", NULL}, (const char *[]){"s", NULL});
    ob_output(&b, "s");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "node self: the graph has a cycle");
}

TEST(dangling_and_repeated_names) {
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Relu", "r", (const char *[]){"nowhere", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    fr_err err = {0};
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "node r: input nowhere is not defined");
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Relu", "r1", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_node(&b, "Relu", "r2", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "node r2: output y");
    ob_input(&b, "x", 1, (const int64_t[]){4});
    ob_node(&b, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "z");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "graph output z");
}

TEST(tensor_data_must_match_shape) {
    static const float d[8] = {0};
    fr_err err = {0};
    for (int raw = 0; raw < 2; raw++) {
        ob b = {0};
        ob_input(&b, "x", 1, (const int64_t[]){6});
        ob_init(&b, ob_tensor(&b, "k", 2, (const int64_t[]){2, 3}, d, 5, raw));
        ob_node(&b, "Add", "add", (const char *[]){"x", "k", NULL}, (const char *[]){"y", NULL});
        ob_output(&b, "y");
        expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST,
                       "initializer k: shape holds 6 elements, data holds 5");
    }
    /* a raw_data length that is not a whole number of floats */
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){1});
    Onnx__TensorProto *t = ob_tensor(&b, "k", 1, (const int64_t[]){1}, d, 2, 1);
    t->raw_data.len = 5; /* of the 8 bytes written */
    ob_init(&b, t);
    ob_node(&b, "Add", "add", (const char *[]){"x", "k", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "partial element");
}

TEST(absurd_dimensions) {
    fr_err err = {0};
    static const float d[1] = {0};
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){1});
    /* 2^40 x 2^40 overflows int64 without the check */
    ob_init(&b, ob_tensor(&b, "k", 2, (const int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40}, d, 1, 0));
    ob_node(&b, "Add", "add", (const char *[]){"x", "k", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_TOO_LARGE, "initializer k: more than");
    ob_input(&b, "x", 1, (const int64_t[]){1});
    ob_init(&b, ob_tensor(&b, "k", 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, d, 1, 0));
    ob_output(&b, "x");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_TOO_LARGE, "rank 9");
    ob_input(&b, "x", 1, (const int64_t[]){1});
    ob_init(&b, ob_tensor(&b, "k", 1, (const int64_t[]){-3}, d, 1, 0));
    ob_output(&b, "x");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_BAD_REQUEST, "negative dimension");
}

TEST(external_data_and_subgraphs_refused) {
    fr_err err = {0};
    static const float d[1] = {0};
    ob b = {0};
    ob_input(&b, "x", 1, (const int64_t[]){1});
    Onnx__TensorProto *t = ob_tensor(&b, "k", 1, (const int64_t[]){1}, d, 1, 1);
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    ob_init(&b, t);
    ob_output(&b, "x");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_UNSUPPORTED, "external tensor data");
    ob_input(&b, "x", 1, (const int64_t[]){1});
    Onnx__NodeProto *n = ob_node(&b, "Relu", "g", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    ob_attr(&b, n, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    ob_output(&b, "y");
    expect_refused(load_ob(&b, &err), &err, FR_ERR_UNSUPPORTED, "node g: attribute body has type 5");
}

TEST(file_errors) {
    fr_err err = {0};
    CHECK(fr_onnx_model_load("/nonexistent/x.onnx", &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x0f};
    expect_refused(fr_onnx_model_load_buffer(junk, sizeof junk, "junk", &err), &err,
                   FR_ERR_BAD_REQUEST, "junk: not a valid ONNX protobuf");
}

/* The PP-OCR models: the op counts of docs/ONNX.md (Constant nodes included). */
static void check_model(const char *file, const int *want, int n_nodes, const char *out_name) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/ppocr/%s", file);
    char *path = fr_data_path(rel);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load(path, &err);
    if (!m) fprintf(stderr, "  %s (run scripts/install-deps.sh)\n", err.msg);
    CHECK(m != NULL);
    free(path);
    if (!m) return;
    CHECK_EQ_INT(m->n_nodes, n_nodes);
    int count[FR_ONNX_OP_N] = {0};
    for (int i = 0; i < m->n_nodes; i++) count[m->nodes[i].op]++;
    for (int op = 0; op < FR_ONNX_OP_N; op++)
        if (count[op] != want[op]) {
            fprintf(stderr, "  %s: %s %d, want %d\n", file, fr_onnx_op_name(op), count[op], want[op]);
            CHECK(0);
        }
    CHECK_EQ_INT(m->n_inputs, 1);
    CHECK_STR(m->values[m->inputs[0].value].name, "x");
    CHECK_EQ_INT(m->inputs[0].rank, 4);
    CHECK_EQ_INT(m->inputs[0].dims[1], 3);
    CHECK_EQ_INT(m->n_outputs, 1);
    CHECK_STR(m->values[m->outputs[0].value].name, out_name);
    fr_onnx_model_free(m);
}

#define OP(n) [FR_ONNX_OP_##n]
TEST(ppocr_det) {
    static const int want[FR_ONNX_OP_N] = {
        OP(Add) = 89, OP(BatchNormalization) = 3, OP(Clip) = 24, OP(Concat) = 1,
        OP(Constant) = 342, OP(Conv) = 62, OP(ConvTranspose) = 2, OP(Div) = 24,
        OP(GlobalAveragePool) = 10, OP(HardSigmoid) = 10, OP(Mul) = 86, OP(Relu) = 12,
        OP(Resize) = 6, OP(Sigmoid) = 1};
    check_model("ch_PP-OCRv4_det_infer.onnx", want, 672, "sigmoid_0.tmp_0");
}
TEST(ppocr_rec) {
    static const int want[FR_ONNX_OP_N] = {
        OP(Add) = 107, OP(AveragePool) = 1, OP(BatchNormalization) = 6, OP(Cast) = 23,
        OP(Clip) = 28, OP(Concat) = 7, OP(Constant) = 325, OP(Conv) = 38, OP(Div) = 33,
        OP(GlobalAveragePool) = 2, OP(HardSigmoid) = 2, OP(MatMul) = 13, OP(Mul) = 107,
        OP(Pow) = 5, OP(ReduceMean) = 10, OP(Relu) = 2, OP(Reshape) = 6, OP(Shape) = 4,
        OP(Sigmoid) = 7, OP(Slice) = 10, OP(Softmax) = 3, OP(Sqrt) = 5, OP(Squeeze) = 7,
        OP(Sub) = 5, OP(Transpose) = 9};
    check_model("ch_PP-OCRv4_rec_infer.onnx", want, 765, "softmax_11.tmp_0");
}
TEST(ppocr_cls) {
    static const int want[FR_ONNX_OP_N] = {
        OP(Add) = 26, OP(BatchNormalization) = 35, OP(Cast) = 3, OP(Clip) = 18, OP(Concat) = 1,
        OP(Constant) = 250, OP(Conv) = 53, OP(Div) = 18, OP(GlobalAveragePool) = 10,
        OP(HardSigmoid) = 9, OP(MatMul) = 1, OP(MaxPool) = 1, OP(Mul) = 27, OP(Relu) = 15,
        OP(Reshape) = 1, OP(Shape) = 1, OP(Slice) = 1, OP(Softmax) = 1};
    check_model("ch_ppocr_mobile_v2.0_cls_infer.onnx", want, 471, "softmax_0.tmp_0");
}

/* Silero VAD (models/vad, docs/ONNX.md): the op counts over the graph and all its If branches,
 * the 19 scopes (the graph and 2 per If), the declared inputs and outputs. */
TEST(silero_vad_ops) {
    static const int want[FR_ONNX_OP_N] = {
        OP(Conv) = 36, OP(Slice) = 28, OP(Relu) = 26, OP(Concat) = 18, OP(Squeeze) = 16,
        OP(Shape) = 14, OP(Gather) = 14, OP(Unsqueeze) = 14, OP(Add) = 14, OP(Transpose) = 10,
        OP(If) = 9, OP(LSTM) = 8, OP(Equal) = 7, OP(Identity) = 6, OP(ReduceMean) = 6,
        OP(Pow) = 4, OP(ConstantOfShape) = 4, OP(Reshape) = 2, OP(Pad) = 2, OP(Sqrt) = 2,
        OP(Mul) = 2, OP(Log) = 2, OP(Neg) = 2, OP(Cast) = 2, OP(Sigmoid) = 2};
    char *path = fr_data_path("models/vad/silero_vad.onnx");
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load(path, &err);
    if (!m) fprintf(stderr, "  %s (run scripts/install-deps.sh)\n", err.msg);
    CHECK(m != NULL);
    free(path);
    if (!m) return;
    CHECK_EQ_INT(m->opset, 16);
    CHECK_EQ_INT(m->n_nodes, 250);
    CHECK_EQ_INT(m->n_scopes, 19);
    int count[FR_ONNX_OP_N] = {0};
    for (int i = 0; i < m->n_nodes; i++) count[m->nodes[i].op]++;
    for (int op = 0; op < FR_ONNX_OP_N; op++)
        if (count[op] != want[op]) {
            fprintf(stderr, "  silero: %s %d, want %d\n", fr_onnx_op_name(op), count[op], want[op]);
            CHECK(0);
        }
    CHECK_EQ_INT(m->n_inputs, 4);
    CHECK_STR(m->values[m->inputs[1].value].name, "sr");
    CHECK_EQ_INT(m->inputs[1].dtype, FR_ONNX_DTYPE_I64);
    CHECK_EQ_INT(m->inputs[1].rank, 0);
    CHECK_EQ_INT(m->inputs[2].dims[0], 2);
    CHECK_EQ_INT(m->inputs[2].dims[2], 64);
    CHECK_EQ_INT(m->n_outputs, 3);
    CHECK_STR(m->values[m->outputs[1].value].name, "hn");
    /* every node of a branch comes after its If's condition and before the If */
    for (int i = 0; i < m->n_nodes; i++) {
        const int sc = m->nodes[i].scope;
        if (sc <= 0) continue;
        const int f = m->scopes[sc].node, cv = m->nodes[f].in[0];
        CHECK(f > i);
        CHECK(cv < 0 || m->values[cv].producer < i);
    }
    fr_onnx_model_free(m);
}

static fr_npy ref(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/ref/onnx/%s.npy", name);
    fr_npy a = {0};
    fr_err err = {0};
    if (fr_npy_load_f32(rel, &a, &err) != 0) {
        fprintf(stderr, "  %s (node tests/onnx/make_refs.mjs writes it)\n", err.msg);
        CHECK(0);
    }
    return a;
}

static void rows_sum_to_one(const fr_npy *a, int64_t k) {
    for (int64_t r = 0; k && r < a->n / k; r++) {
        double s = 0;
        for (int64_t j = 0; j < k; j++) s += a->data[r * k + j];
        CHECK_NEAR(s, 1.0, 1e-4);
    }
}

TEST(onnxruntime_references_fit_the_models) {
    /* the dictionary: 6,623 characters, one a line */
    char *keys = fr_data_path("models/ppocr/ppocr_keys_v1.txt");
    size_t len = 0;
    fr_err err = {0};
    char *txt = fr_read_file(keys, 1 << 20, &len, &err);
    free(keys);
    CHECK(txt != NULL);
    int lines = 0;
    for (size_t i = 0; txt && i < len; i++) lines += txt[i] == '\n';
    if (txt && len && txt[len - 1] != '\n') lines++; /* the last line has no newline */
    free(txt);
    CHECK_EQ_INT(lines, 6623);
    static const struct { const char *name; int64_t n, h, w; } det[] = {{"det_64x96", 1, 64, 96},
                                                                        {"det_96x128", 1, 96, 128}};
    for (size_t i = 0; i < 2; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s.in", det[i].name);
        fr_npy x = ref(nm);
        snprintf(nm, sizeof nm, "%s.out", det[i].name);
        fr_npy y = ref(nm);
        CHECK(x.n_dims == 4 && x.shape[0] == det[i].n && x.shape[1] == 3 && x.shape[2] == det[i].h &&
              x.shape[3] == det[i].w);
        CHECK(y.n_dims == 4 && y.shape[1] == 1 && y.shape[2] == det[i].h && y.shape[3] == det[i].w);
        for (int64_t k = 0; k < y.n; k++) CHECK(y.data[k] >= 0 && y.data[k] <= 1); /* sigmoid */
        free(x.data);
        free(y.data);
    }
    fr_npy x = ref("rec_1x48x160.in"), y = ref("rec_1x48x160.out");
    CHECK(x.n_dims == 4 && x.shape[2] == 48 && x.shape[3] == 160);
    CHECK(y.n_dims == 3 && y.shape[0] == 1 && y.shape[1] == 160 / 8 && y.shape[2] == lines + 2);
    rows_sum_to_one(&y, y.n_dims == 3 ? y.shape[2] : 0);
    free(x.data);
    free(y.data);
    x = ref("rec_2x48x320.in");
    fr_npy am = ref("rec_2x48x320.argmax"), mx = ref("rec_2x48x320.max"), hd = ref("rec_2x48x320.head");
    CHECK(x.n_dims == 4 && x.shape[0] == 2 && x.shape[3] == 320);
    CHECK(am.n == 2 * 40 && mx.n == 2 * 40 && hd.n == 2 * 40 * 128);
    for (int64_t r = 0; r < am.n && r < mx.n; r++) {
        CHECK(am.data[r] >= 0 && am.data[r] < lines + 2 && am.data[r] == (int)am.data[r]);
        CHECK(mx.data[r] > 0 && mx.data[r] <= 1);
        if (am.data[r] < 128 && hd.n == 2 * 40 * 128) CHECK(hd.data[r * 128 + (int)am.data[r]] == mx.data[r]);
    }
    free(x.data);
    free(am.data);
    free(mx.data);
    free(hd.data);
    x = ref("cls_1x48x192.in");
    y = ref("cls_1x48x192.out");
    CHECK(x.n_dims == 4 && x.shape[2] == 48 && x.shape[3] == 192);
    CHECK(y.n_dims == 2 && y.shape[0] == 1 && y.shape[1] == 2);
    rows_sum_to_one(&y, 2);
    free(x.data);
    free(y.data);
}

int main(void) { return t_main(); }
