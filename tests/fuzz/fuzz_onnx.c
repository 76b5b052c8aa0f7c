/* fuzz_onnx.c — libFuzzer harness for the ONNX loader (src/model/onnx/onnx.c).
 *
 * The input is a whole .onnx image (copied to a buffer of exactly its size). A successful load
 * must give a graph whose node inputs are -1 or values produced by an earlier node (or by no
 * node: graph inputs and constants), whose outputs are produced by their node, whose constants
 * hold n elements within FR_ONNX_MAX_ELEMS with n the product of their dims, and whose ops
 * have names; a failure must carry a code other than FR_ERR_INTERNAL and a one-line message
 * starting with the name given. Seeds: small models written through protobuf-c
 * (tests/onnx_build.h, `seeds onnx`).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    fr_onnx_model_free(m);
    return 0;
}
