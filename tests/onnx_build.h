/* onnx_build.h — writes small ONNX models through protobuf-c for the tests and the fuzz seeds
 * (tests/test_onnx.c, tests/fuzz/seeds.c). Everything a builder allocates is freed by ob_free.
 *
 *   ob b = {0};
 *   ob_input(&b, "x", 4, (int64_t[]){-1, 3, 8, 8});      // -1: a dynamic dimension ("d0", ...)
 *   ob_node(&b, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
 *   ob_output(&b, "y");
 *   size_t len; uint8_t *bytes = ob_pack(&b, &len);      // malloc'd; ob_free(&b) afterwards
 */
#ifndef FRUGAL_ONNX_BUILD_H
#define FRUGAL_ONNX_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#define OB_MAX 64

typedef struct ob {
    void *owned[1024];                  /* every allocation, freed by ob_free */
    int n_owned;
    Onnx__NodeProto *nodes[OB_MAX];
    int n_nodes;
    Onnx__TensorProto *inits[OB_MAX];
    int n_inits;
    Onnx__ValueInfoProto *inputs[OB_MAX], *outputs[OB_MAX];
    int n_inputs, n_outputs;
    int opset;                          /* of the default domain; 0: 11 */
} ob;

static void *ob_alloc(ob *b, size_t n) {
    void *p = calloc(1, n ? n : 1);
    b->owned[b->n_owned++] = p;
    return p;
}

static char *ob_str(ob *b, const char *s) {
    char *p = ob_alloc(b, strlen(s) + 1);
    memcpy(p, s, strlen(s));
    return p;
}

static Onnx__ValueInfoProto *ob_vi(ob *b, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = ob_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = ob_str(b, name);
    Onnx__TypeProto *t = ob_alloc(b, sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    if (rank >= 0) {
        Onnx__TensorShapeProto *s = ob_alloc(b, sizeof *s);
        onnx__tensor_shape_proto__init(s);
        s->n_dim = (size_t)rank;
        s->dim = ob_alloc(b, (size_t)rank * sizeof *s->dim);
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = ob_alloc(b, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else {
                char nm[16];
                snprintf(nm, sizeof nm, "d%d", i);
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = ob_str(b, nm);
            }
            s->dim[i] = d;
        }
        tt->shape = s;
    }
    return v;
}

static void ob_input(ob *b, const char *name, int rank, const int64_t *dims) {
    b->inputs[b->n_inputs++] = ob_vi(b, name, rank, dims);
}
static void ob_output(ob *b, const char *name) {
    b->outputs[b->n_outputs++] = ob_vi(b, name, -1, NULL);
}

/* A float tensor of the given shape; data (n floats) copied into raw_data when raw, else
 * float_data. n need not match the shape (hostile tests). */
static Onnx__TensorProto *ob_tensor(ob *b, const char *name, int rank, const int64_t *dims,
                                    const float *data, size_t n, int raw) {
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = ob_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc(b, (size_t)rank * sizeof *t->dims);
    memcpy(t->dims, dims, (size_t)rank * sizeof *t->dims);
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.len = n * 4;
        t->raw_data.data = ob_alloc(b, n * 4);
        memcpy(t->raw_data.data, data, n * 4);
    } else {
        t->n_float_data = n;
        t->float_data = ob_alloc(b, n * 4);
        memcpy(t->float_data, data, n * 4);
    }
    return t;
}

static void ob_init(ob *b, Onnx__TensorProto *t) { b->inits[b->n_inits++] = t; }

/* An int64 tensor (raw_data) of the given shape with n values. */
static inline Onnx__TensorProto *ob_itensor(ob *b, const char *name, int rank, const int64_t *dims,
                                     const int64_t *data, size_t n) {
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = ob_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc(b, (size_t)rank * sizeof *t->dims);
    if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof *t->dims); /* a scalar: dims NULL */
    t->has_raw_data = 1;
    t->raw_data.len = n * 8;
    t->raw_data.data = ob_alloc(b, n * 8);
    memcpy(t->raw_data.data, data, n * 8);
    return t;
}

/* A graph input of element type INT64 (ONNX's 7). */
static inline void ob_input_i64(ob *b, const char *name, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *v = ob_vi(b, name, rank, dims);
    v->type->tensor_type->elem_type = 7;
    b->inputs[b->n_inputs++] = v;
}

/* Adds a node; ins / outs are NULL-terminated name lists ("" for an omitted input). */
static Onnx__NodeProto *ob_node(ob *b, const char *op, const char *name, const char *const *ins,
                                const char *const *outs) {
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ob_str(b, op);
    if (name) n->name = ob_str(b, name);
    while (ins && ins[n->n_input]) n->n_input++;
    while (outs && outs[n->n_output]) n->n_output++;
    n->input = ob_alloc(b, n->n_input * sizeof *n->input);
    n->output = ob_alloc(b, n->n_output * sizeof *n->output);
    for (size_t i = 0; i < n->n_input; i++) n->input[i] = ob_str(b, ins[i]);
    for (size_t i = 0; i < n->n_output; i++) n->output[i] = ob_str(b, outs[i]);
    n->attribute = ob_alloc(b, 16 * sizeof *n->attribute);
    b->nodes[b->n_nodes++] = n;
    return n;
}

static Onnx__AttributeProto *ob_attr(ob *b, Onnx__NodeProto *n, const char *name, int type) {
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ob_str(b, name);
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    n->attribute[n->n_attribute++] = a;
    return a;
}
static void ob_attr_int(ob *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}
static void ob_attr_ints(ob *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)cnt;
    a->ints = ob_alloc(b, (size_t)cnt * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)cnt * sizeof *a->ints);
}
static void ob_attr_tensor(ob *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

/* sub's nodes, initializers and outputs as a GraphProto owned by b (an If branch: give it to
 * ob_attr_graph). sub's allocations move to b; sub is left empty. */
static inline Onnx__GraphProto *ob_graph(ob *b, ob *sub) {
    Onnx__GraphProto *g = ob_alloc(b, sizeof *g);
    onnx__graph_proto__init(g);
    g->name = ob_str(b, "branch");
    g->n_node = (size_t)sub->n_nodes;
    g->node = ob_alloc(b, (size_t)sub->n_nodes * sizeof *g->node);
    memcpy(g->node, sub->nodes, (size_t)sub->n_nodes * sizeof *g->node);
    g->n_initializer = (size_t)sub->n_inits;
    g->initializer = ob_alloc(b, (size_t)sub->n_inits * sizeof *g->initializer);
    memcpy(g->initializer, sub->inits, (size_t)sub->n_inits * sizeof *g->initializer);
    g->n_output = (size_t)sub->n_outputs;
    g->output = ob_alloc(b, (size_t)sub->n_outputs * sizeof *g->output);
    memcpy(g->output, sub->outputs, (size_t)sub->n_outputs * sizeof *g->output);
    for (int i = 0; i < sub->n_owned; i++) b->owned[b->n_owned++] = sub->owned[i];
    memset(sub, 0, sizeof *sub);
    return g;
}

static inline void ob_attr_graph(ob *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g) {
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = g;
}

/* The model as protobuf bytes (malloc'd, *len set); opset b->opset (0: 11) of the default
 * domain. */
static uint8_t *ob_pack(ob *b, size_t *len) {
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"g";
    g.n_node = (size_t)b->n_nodes;
    g.node = b->nodes;
    g.n_initializer = (size_t)b->n_inits;
    g.initializer = b->inits;
    g.n_input = (size_t)b->n_inputs;
    g.input = b->inputs;
    g.n_output = (size_t)b->n_outputs;
    g.output = b->outputs;
    Onnx__OperatorSetIdProto os, *osp = &os;
    onnx__operator_set_id_proto__init(&os);
    os.domain = (char *)"";
    os.has_version = 1;
    os.version = b->opset ? b->opset : 11;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = &osp;
    m.graph = &g;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *out = malloc(*len + 1);
    onnx__model_proto__pack(&m, out);
    return out;
}

static void ob_free(ob *b) {
    for (int i = 0; i < b->n_owned; i++) free(b->owned[i]);
    memset(b, 0, sizeof *b);
}

/* A small valid model: x (N,3,H,W dynamic) → Conv(1x1 weight from a Constant, bias from an
 * initializer) → Relu → y; nodes written in reverse order when reversed (the loader sorts). */
static inline uint8_t *ob_conv_relu(int reversed, size_t *len) {
    ob b = {0};
    ob_input(&b, "x", 4, (const int64_t[]){-1, 3, -1, -1});
    static const float w[6] = {0.5f, -1, 2, 0.25f, 1, -0.5f}, bias[2] = {0.1f, -0.2f};
    ob_init(&b, ob_tensor(&b, "bias", 1, (const int64_t[]){2}, bias, 2, 0));
    Onnx__NodeProto *nodes[3];
    nodes[0] = ob_node(&b, "Constant", "w_const", NULL, (const char *[]){"w", NULL});
    ob_attr_tensor(&b, nodes[0], "value", ob_tensor(&b, NULL, 4, (const int64_t[]){2, 3, 1, 1}, w, 6, 1));
    nodes[1] = ob_node(&b, "Conv", "conv", (const char *[]){"x", "w", "bias", NULL},
                       (const char *[]){"c", NULL});
    ob_attr_ints(&b, nodes[1], "kernel_shape", 2, (const int64_t[]){1, 1});
    ob_attr_int(&b, nodes[1], "group", 1);
    nodes[2] = ob_node(&b, "Relu", "relu", (const char *[]){"c", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    if (reversed) {
        Onnx__NodeProto *t = b.nodes[0];
        b.nodes[0] = b.nodes[2];
        b.nodes[2] = t;
    }
    uint8_t *bytes = ob_pack(&b, len);
    ob_free(&b);
    return bytes;
}

#endif
