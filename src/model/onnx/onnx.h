/* onnx.h — ONNX model files: a bounded loader that turns an .onnx protobuf into a checked,
 * topologically ordered graph of fp32 / int64 tensors and typed nodes.
 *
 *   fr_err err = {0};
 *   fr_onnx_model *m = fr_onnx_model_load("models/ppocr/ch_PP-OCRv4_det_infer.onnx", &err);
 *   if (!m) { fprintf(stderr, "%s\n", err.msg); return 1; }      // one line, err.code says why
 *   for (int i = 0; i < m->n_nodes; i++) puts(fr_onnx_op_name(m->nodes[i].op));
 *   fr_onnx_model_free(m);
 *
 * The file is decoded by protobuf-c with the onnx.proto subset in this folder (generated C at
 * build time), then checked: the file size, tensor ranks and element counts (overflow-checked),
 * the node count, attribute and name sizes are bounded; initializer and Constant data lengths
 * must match their shapes; external data is refused; every node input must name a graph input,
 * an initializer or an earlier output (no dangling names), the graph must be acyclic, and every
 * op must be one this loader knows (fr_onnx_op). The two branches of an If are read and flattened
 * into the one node list: each branch is a scope (fr_onnx_scope) whose nodes carry its id, value
 * names are unique across the whole model, and a node may read only values of its own scope or
 * of the scopes around it. Nesting is at most FR_ONNX_MAX_DEPTH deep (checked on the raw bytes
 * before protobuf-c decodes them) and every graph's nodes count towards FR_ONNX_MAX_NODES; Loop
 * and Scan bodies are refused. Every refusal is a one-line fr_err naming the file and, where
 * there is one, the node.
 *
 * Thread safety: a loaded model is immutable; any number of threads may read it at once.
 * fr_onnx_model_free must not race with readers. Loading touches no global state.
 */
#ifndef FR_MODEL_ONNX_H
#define FR_MODEL_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_ONNX_MAX_FILE ((size_t)1 << 30)     /* bytes of one .onnx file */
#define FR_ONNX_MAX_NODES 200000               /* nodes of the graph */
#define FR_ONNX_MAX_RANK 8                     /* dimensions of any tensor */
#define FR_ONNX_MAX_ELEMS ((int64_t)1 << 31)   /* elements of one stored tensor */
#define FR_ONNX_MAX_IO 64                      /* inputs or outputs of one node */
#define FR_ONNX_MAX_ATTR_INTS 1024             /* values of one INTS / FLOATS attribute */
#define FR_ONNX_MAX_DEPTH 8                    /* If branches inside If branches */
#define FR_ONNX_MAX_SCOPES 1024                /* branches of all the If nodes, plus the graph */

/* The ops the loader accepts: those of the PP-OCR det / rec / cls models, then (from
 * ConstantOfShape on: the CUDA executor refuses them) those Silero VAD adds (docs/ONNX.md). An If
 * has at most (FR_ONNX_MAX_IO - 1) / 2 outputs. */
typedef enum fr_onnx_op {
#define FR_ONNX_OPS(X)                                                                          \
    X(Add) X(AveragePool) X(BatchNormalization) X(Cast) X(Clip) X(Concat) X(Constant) X(Conv)   \
    X(ConvTranspose) X(Div) X(GlobalAveragePool) X(HardSigmoid) X(MatMul) X(MaxPool) X(Mul)     \
    X(Pow) X(ReduceMean) X(Relu) X(Reshape) X(Resize) X(Shape) X(Sigmoid) X(Slice) X(Softmax)   \
    X(Sqrt) X(Squeeze) X(Sub) X(Transpose) X(ConstantOfShape) X(Equal) X(Gather) X(Identity)   \
    X(If) X(Log) X(LSTM) X(Neg) X(Pad) X(Unsqueeze)
#define FR_ONNX_OP_ENUM(n) FR_ONNX_OP_##n,
    FR_ONNX_OPS(FR_ONNX_OP_ENUM)
#undef FR_ONNX_OP_ENUM
    FR_ONNX_OP_N
} fr_onnx_op;

/* Element types a tensor of the graph can hold (ONNX TensorProto.DataType values). */
typedef enum fr_onnx_dtype {
    FR_ONNX_DTYPE_F32 = 1,
    FR_ONNX_DTYPE_I64 = 7, /* also what INT32 constants become */
} fr_onnx_dtype;

/* A constant tensor (initializer, Constant value, TENSOR attribute). */
typedef struct fr_onnx_tensor {
    fr_onnx_dtype dtype;
    int rank;                        /* 0..FR_ONNX_MAX_RANK */
    int64_t dims[FR_ONNX_MAX_RANK];  /* each >= 0 */
    int64_t n;                       /* product of dims (1 for a scalar) */
    void *data;                      /* n floats or n int64, owned by the model */
} fr_onnx_tensor;

typedef enum fr_onnx_attr_type {
    FR_ONNX_ATTR_FLOAT = 1,
    FR_ONNX_ATTR_INT = 2,
    FR_ONNX_ATTR_STRING = 3,
    FR_ONNX_ATTR_TENSOR = 4,
    FR_ONNX_ATTR_FLOATS = 6,
    FR_ONNX_ATTR_INTS = 7,
} fr_onnx_attr_type;

typedef struct fr_onnx_attr {
    char *name;              /* e.g. "kernel_shape" */
    fr_onnx_attr_type type;
    float f;                 /* FLOAT */
    int64_t i;               /* INT */
    char *s;                 /* STRING (NUL-terminated copy; bytes with NUL are refused) */
    int n;                   /* number of ints / floats */
    int64_t *ints;           /* INTS */
    float *floats;           /* FLOATS */
    fr_onnx_tensor *t;       /* TENSOR */
} fr_onnx_attr;

/* A value of the graph: a graph input, a constant, or the output of one node. */
typedef struct fr_onnx_value {
    char *name;
    int scope;               /* the scope that defines it (0: the main graph) */
    int producer;            /* index into nodes of the node that writes it; -1 otherwise */
    fr_onnx_tensor *konst;   /* the data of an initializer or Constant output; NULL otherwise */
} fr_onnx_value;

typedef struct fr_onnx_node {
    char *name;              /* the node's name, or "<op_type>#<index in the file>" */
    fr_onnx_op op;
    int scope;               /* 0: the main graph; else the If branch it belongs to (scopes) */
    int n_in, n_out;
    int *in;                 /* value ids; -1 for an omitted optional input (""). An If with
                                n_out outputs has 1 + 2 n_out: the condition, then the then
                                branch's outputs, then the else branch's */
    int *out;                /* value ids */
    int n_attr;
    fr_onnx_attr *attr;
} fr_onnx_node;

/* A graph input: name, element type and declared shape (-1 for a dynamic dimension). */
typedef struct fr_onnx_io {
    int value;               /* value id */
    fr_onnx_dtype dtype;
    int rank;
    int64_t dims[FR_ONNX_MAX_RANK];
    char *dim_names[FR_ONNX_MAX_RANK]; /* the symbolic name of a dynamic dimension, or NULL */
} fr_onnx_io;

/* A branch of an If node: its nodes run only when the If's condition selects it (and the
 * scope around the If is running). Scope 0 is the main graph (parent -1, node -1). */
typedef struct fr_onnx_scope {
    int parent;              /* the scope around the If node */
    int node;                /* index into nodes of the If node */
    int then;                /* 1: then_branch (condition true), 0: else_branch */
} fr_onnx_scope;

typedef struct fr_onnx_model {
    char *path;              /* the file name (or the name given to the buffer loader) */
    int64_t ir_version, opset; /* opset of the default domain */
    int n_values;
    fr_onnx_value *values;
    int n_nodes;             /* topological order: a node's inputs come from earlier nodes */
    fr_onnx_node *nodes;
    int n_scopes;            /* >= 1 */
    fr_onnx_scope *scopes;
    int n_inputs, n_outputs; /* graph inputs (initializers excluded) and outputs */
    fr_onnx_io *inputs, *outputs;
} fr_onnx_model;

/* Loads and checks the model in path (at most FR_ONNX_MAX_FILE bytes). Returns NULL with a
 * one-line message "path: ..." and a code (NOT_FOUND, TOO_LARGE, BAD_REQUEST, UNSUPPORTED) in
 * err. The caller owns the model: fr_onnx_model_free. */
fr_onnx_model *fr_onnx_model_load(const char *path, fr_err *err);
/* The same from len bytes at buf (not kept); name goes into the messages. */
fr_onnx_model *fr_onnx_model_load_buffer(const void *buf, size_t len, const char *name,
                                         fr_err *err);
void fr_onnx_model_free(fr_onnx_model *m);

/* "Conv", ... for op; "?" out of range. */
const char *fr_onnx_op_name(fr_onnx_op op);
/* The attribute called name of node n, or NULL. */
const fr_onnx_attr *fr_onnx_node_attr(const fr_onnx_node *n, const char *name);

#endif
