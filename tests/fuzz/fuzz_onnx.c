/* fuzz_onnx.c — libFuzzer harness for the ONNX loader (src/model/onnx/onnx.c) and the CPU
 * executor that runs what it loads (src/backend/cpu/onnx_exec.c).
 *
 * The input is a whole .onnx image (copied to a buffer of exactly its size). A successful load
 * must give a graph whose node inputs are -1 or values produced by an earlier node (or by no
 * node: graph inputs and constants), whose outputs are produced by their node, whose constants
 * hold n elements within FR_ONNX_MAX_ELEMS with n the product of their dims, and whose ops
 * have names; a failure must carry a code other than FR_ERR_INTERNAL and a one-line message
 * starting with the name given. Every loaded graph then goes through fr_onnx_sess_new and,
 * when the session is made and its inputs are small (dynamic dimensions set to 3, at most 64 Ki
 * elements each), one run on one thread under a 4 MiB cap: either outputs of the declared count
 * whose every element can be read, or a one-line error with a code other than FR_ERR_INTERNAL.
 * int64 graph inputs (control values) get small integers in idata. Graphs with If branches must
 * keep each branch's nodes after their If's condition.
 * Seeds: small models written through protobuf-c (tests/onnx_build.h, `seeds onnx`), among them
 * If graphs (by an int64 input, nested on a shape) and an LSTM / Pad / Gather graph.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onnx_exec.h"
#include "model/onnx/onnx.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

static void check_tensor(const fr_onnx_tensor *t) {
    if (!t) return;
    if (t->rank < 0 || t->rank > FR_ONNX_MAX_RANK) abort();
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++) {
        if (t->dims[k] < 0) abort();
        n *= t->dims[k];
    }
    if (n != t->n || n > FR_ONNX_MAX_ELEMS) abort();
    if (t->n && !t->data) abort();
    if (t->n) { /* touch the last element: ASan sees a short buffer */
        volatile uint8_t last = ((const uint8_t *)t->data)[t->n * (t->dtype == FR_ONNX_DTYPE_I64 ? 8 : 4) - 1];
        (void)last;
    }
}

static void check_err(const fr_err *err) {
    if (err->code == FR_ERR_INTERNAL || !err->msg[0] || strchr(err->msg, '\n')) abort();
}

/* The loaded graph through the executor: a session, then one small run. */
static void run_graph(const fr_onnx_model *m) {
    fr_onnx_sess_opts o = fr_onnx_sess_default_opts();
    o.n_threads = 1;
    o.max_bytes = (size_t)4 << 20;
    fr_err err = {0};
    fr_onnx_sess *s = fr_onnx_sess_new(m, &o, &err);
    if (!s) {
        check_err(&err);
        return;
    }
    enum { MAX_IN = 8, MAX_ELEMS = 1 << 16 };
    fr_onnx_arr in[MAX_IN];
    int ok = m->n_inputs <= MAX_IN;
    for (int i = 0; i < m->n_inputs && ok; i++) {
        const fr_onnx_io *io = &m->inputs[i];
        in[i] = (fr_onnx_arr){.rank = io->rank};
        int64_t n = 1;
        for (int k = 0; k < io->rank && ok; k++) {
            in[i].dims[k] = io->dims[k] < 0 ? 3 : io->dims[k];
            if (in[i].dims[k] > MAX_ELEMS || (n *= in[i].dims[k]) > MAX_ELEMS) ok = 0;
        }
        in[i].data = NULL;
        if (!ok) break;
        in[i].data = malloc((size_t)(n ? n : 1) * sizeof(float));
        for (int64_t k = 0; k < n; k++) in[i].data[k] = (float)((k * 37 % 17) - 8) / 4.0f;
        if (io->dtype == FR_ONNX_DTYPE_I64) { /* a control input: small integers */
            int64_t *iv = malloc((size_t)(n ? n : 1) * sizeof *iv);
            for (int64_t k = 0; k < n; k++) iv[k] = k % 3;
            in[i].idata = iv;
        }
    }
    if (ok) {
        fr_onnx_arr out[FR_ONNX_MAX_IO];
        if (m->n_outputs <= FR_ONNX_MAX_IO &&
            fr_onnx_sess_run(s, in, m->n_inputs, out, m->n_outputs, NULL, &err) == 0) {
            for (int i = 0; i < m->n_outputs; i++) {
                int64_t n = 1;
                if (out[i].rank < 0 || out[i].rank > FR_ONNX_MAX_RANK) abort();
                for (int k = 0; k < out[i].rank; k++) n *= out[i].dims[k];
                if (n && !out[i].data) abort();
                if (n) { /* touch the last element */
                    volatile float last = out[i].data[n - 1];
                    (void)last;
                }
            }
        } else if (m->n_outputs <= FR_ONNX_MAX_IO) {
            check_err(&err);
        }
    }
    for (int i = 0; i < m->n_inputs && i < MAX_IN; i++) {
        free((void *)in[i].idata);
        free(in[i].data);
        if (!in[i].data) break;
    }
    fr_onnx_sess_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    fr_err err = {0};
    fr_onnx_model *m = fr_onnx_model_load_buffer(buf, size, "f.onnx", &err);
    free(buf);
    if (!m) {
        if (err.code == FR_ERR_INTERNAL || !err.msg[0] || strchr(err.msg, '\n') ||
            strncmp(err.msg, "f.onnx: ", 8))
            abort();
        return 0;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const fr_onnx_node *n = &m->nodes[i];
        if (!strcmp(fr_onnx_op_name(n->op), "?")) abort();
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < -1 || v >= m->n_values) abort();
            if (v >= 0 && m->values[v].producer >= i) abort();
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0 || v >= m->n_values || m->values[v].producer != i) abort();
        }
        /* a branch's node: its If's condition comes earlier (a node no branch output needs may
           come after the If itself) */
        if (n->scope < 0 || n->scope >= m->n_scopes) abort();
        if (n->scope > 0) {
            const int f = m->scopes[n->scope].node;
            if (f < 0 || f == i || f >= m->n_nodes || m->nodes[f].op != FR_ONNX_OP_If) abort();
            const int cv = m->nodes[f].in[0];
            if (cv >= 0 && m->values[cv].producer >= i) abort();
        }
        for (int k = 0; k < n->n_attr; k++) {
            const fr_onnx_attr *a = &n->attr[k];
            check_tensor(a->t);
            if ((a->type == FR_ONNX_ATTR_INTS && a->n && !a->ints) ||
                (a->type == FR_ONNX_ATTR_FLOATS && a->n && !a->floats) || a->n > FR_ONNX_MAX_ATTR_INTS)
                abort();
        }
    }
    for (int v = 0; v < m->n_values; v++) check_tensor(m->values[v].konst);
    for (int i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].value < 0 || m->inputs[i].value >= m->n_values ||
            m->inputs[i].rank > FR_ONNX_MAX_RANK)
            abort();
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i].value < 0 || m->outputs[i].value >= m->n_values) abort();
    run_graph(m);
    fr_onnx_model_free(m);
    return 0;
}
