/* onnx.c — the bounded ONNX loader (onnx.h): protobuf-c decodes, this file checks and copies.
 *
 * Steps: read the file (size cap) → onnx__model_proto__unpack → model header (IR version,
 * default-domain opset) → values: graph inputs, initializers (shape vs data length) → nodes: op
 * known, attributes copied (sizes capped; If branches flattened into scopes, other GRAPH and
 * SPARSE attributes refused), Constant outputs
 * become constants → every node input resolved to a value (dangling names refused) → Kahn's
 * topological order (a cycle is refused, naming a node on it) → graph outputs resolved.
 * Names are looked up through an open-addressing hash table of value ids.
 */
#include "model/onnx/onnx.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

static const char *const op_names[FR_ONNX_OP_N] = {
#define FR_ONNX_OP_NAME(n) #n,
    FR_ONNX_OPS(FR_ONNX_OP_NAME)
#undef FR_ONNX_OP_NAME
};

const char *fr_onnx_op_name(fr_onnx_op op) {
    return (unsigned)op < FR_ONNX_OP_N ? op_names[op] : "?";
}

const fr_onnx_attr *fr_onnx_node_attr(const fr_onnx_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
    return NULL;
}

/* A name from the file, made safe to print in a one-line message: at most 200 bytes, control
 * bytes as '?'. Returns buf. */
static const char *q(char buf[static 208], const char *s) {
    size_t i = 0;
    for (; s && s[i] && i < 200; i++) buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = 0;
    return buf;
}

/* ---- name table: value ids by name ---------------------------------------------------------- */
typedef struct names {
    fr_onnx_model *m;
    int *slot;       /* value id + 1, 0 = empty */
    size_t cap;      /* power of two, > 2 x the values it can hold */
} names;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int names_find(const names *t, const char *s) {
    for (size_t i = hash_str(s) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->slot[i]) return -1;
        if (!strcmp(t->m->values[t->slot[i] - 1].name, s)) return t->slot[i] - 1;
    }
}

/* Adds a value called s (copied); returns its id, or -1 when the name is taken. */
static int names_add(names *t, const char *s, int cap_values) {
    if (names_find(t, s) >= 0) return -1;
    fr_onnx_model *m = t->m;
    FR_ASSERT(m->n_values < cap_values);
    int id = m->n_values++;
    m->values[id] = (fr_onnx_value){.name = fr_xstrdup(s), .producer = -1};
    size_t i = hash_str(s) & (t->cap - 1);
    while (t->slot[i]) i = (i + 1) & (t->cap - 1);
    t->slot[i] = id + 1;
    return id;
}

/* ---- tensors ---------------------------------------------------------------------------------- */
static void tensor_free(fr_onnx_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

/* Copies a TensorProto into a new fr_onnx_tensor (FLOAT, INT64 or INT32 → int64). NULL with
 * err set ("what: ...") when it is not one of those, is external, or its data does not match. */
static fr_onnx_tensor *tensor_from_proto(const Onnx__TensorProto *p, const char *what,
                                         fr_err *err) {
    if (p->n_external_data || (p->has_data_location &&
                               p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: external tensor data is not supported", what);
        return NULL;
    }
    if (p->n_dims > FR_ONNX_MAX_RANK) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: rank %zu over %d", what, p->n_dims,
                    FR_ONNX_MAX_RANK);
        return NULL;
    }
    int64_t n = 1;
    for (size_t i = 0; i < p->n_dims; i++) {
        if (p->dims[i] < 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: negative dimension %lld", what,
                        (long long)p->dims[i]);
            return NULL;
        }
        if (p->dims[i] && n > FR_ONNX_MAX_ELEMS / p->dims[i]) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: more than %lld elements", what,
                        (long long)FR_ONNX_MAX_ELEMS);
            return NULL;
        }
        n *= p->dims[i];
    }
    int dt = p->has_data_type ? p->data_type : 0;
    if (dt != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && dt != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
        dt != ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: element type %d is not supported", what, dt);
        return NULL;
    }
    size_t esz = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : 4;
    size_t have; /* elements present in the file */
    if (p->has_raw_data)
        have = p->raw_data.len % esz ? SIZE_MAX : p->raw_data.len / esz;
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        have = p->n_float_data;
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        have = p->n_int64_data;
    else
        have = p->n_int32_data;
    if (have != (size_t)n) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: shape holds %lld elements, data holds %s%zu",
                    what, (long long)n, have == SIZE_MAX ? "a partial element after " : "",
                    have == SIZE_MAX ? p->raw_data.len / esz : have);
        return NULL;
    }
    fr_onnx_tensor *t = fr_xcalloc(1, sizeof *t);
    t->rank = (int)p->n_dims;
    for (int i = 0; i < t->rank; i++) t->dims[i] = p->dims[i];
    t->n = n;
    if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        t->dtype = FR_ONNX_DTYPE_F32;
        t->data = fr_xmalloc((size_t)n * 4 + 1);
        if (n)
            memcpy(t->data, p->has_raw_data ? (const void *)p->raw_data.data : p->float_data,
                   (size_t)n * 4);
    } else {
        t->dtype = FR_ONNX_DTYPE_I64;
        int64_t *d = fr_xmalloc((size_t)n * 8 + 1);
        for (int64_t i = 0; i < n; i++) {
            if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
                if (p->has_raw_data) memcpy(&d[i], p->raw_data.data + i * 8, 8);
                else d[i] = p->int64_data[i];
            } else {
                int32_t v;
                if (p->has_raw_data) memcpy(&v, p->raw_data.data + i * 4, 4);
                else v = p->int32_data[i];
                d[i] = v;
            }
        }
        t->data = d;
    }
    return t;
}

/* ---- attributes -------------------------------------------------------------------------------- */
static int attr_from_proto(fr_onnx_attr *a, const Onnx__AttributeProto *p, const char *node,
                           fr_err *err) {
    a->name = fr_xstrdup(p->name ? p->name : "");
    int type = p->has_type ? (int)p->type : 0;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->f = p->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->i = p->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        if (p->s.len && memchr(p->s.data, 0, p->s.len)) {
            char b1[208];
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "node %s: attribute %s holds a NUL byte", node,
                        q(b1, a->name));
            return -1;
        }
        a->s = p->s.len ? fr_xstrndup((const char *)p->s.data, p->s.len) : fr_xstrdup("");
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        char b1[208];
        if (!p->t) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "node %s: attribute %s has no tensor", node,
                        q(b1, a->name));
            return -1;
        }
        char what[320];
        snprintf(what, sizeof what, "node %s: attribute %s", node, q(b1, a->name));
        if (!(a->t = tensor_from_proto(p->t, what, err))) return -1;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
        size_t n = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ? p->n_ints : p->n_floats;
        if (n > FR_ONNX_MAX_ATTR_INTS) {
            char b1[208];
            fr_err_setc(err, FR_ERR_TOO_LARGE, "node %s: attribute %s has %zu values (over %d)",
                        node, q(b1, a->name), n, FR_ONNX_MAX_ATTR_INTS);
            return -1;
        }
        a->n = (int)n;
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
            a->ints = fr_xmalloc(n * sizeof *a->ints + 1);
            if (n) memcpy(a->ints, p->ints, n * sizeof *a->ints);
        } else {
            a->floats = fr_xmalloc(n * sizeof *a->floats + 1);
            if (n) memcpy(a->floats, p->floats, n * sizeof *a->floats);
        }
        break;
    }
    default: {
        char b1[208];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "node %s: attribute %s has type %d (not supported)",
                    node, q(b1, a->name), type);
        return -1;
    }
    }
    a->type = (fr_onnx_attr_type)type;
    return 0;
}

/* ---- model ------------------------------------------------------------------------------------ */
void fr_onnx_model_free(fr_onnx_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_nodes; i++) {
        fr_onnx_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_attr; k++) {
            fr_onnx_attr *a = &n->attr[k];
            free(a->name);
            free(a->s);
            free(a->ints);
            free(a->floats);
            tensor_free(a->t);
        }
        free(n->attr);
        free(n->in);
        free(n->out);
        free(n->name);
    }
    for (int i = 0; i < m->n_values; i++) {
        free(m->values[i].name);
        tensor_free(m->values[i].konst);
    }
    for (int i = 0; i < m->n_inputs; i++)
        for (int k = 0; k < FR_ONNX_MAX_RANK; k++) free(m->inputs[i].dim_names[k]);
    for (int i = 0; i < m->n_outputs; i++)
        for (int k = 0; k < FR_ONNX_MAX_RANK; k++) free(m->outputs[i].dim_names[k]);
    free(m->inputs);
    free(m->outputs);
    free(m->values);
    free(m->scopes);
    free(m->nodes);
    free(m->path);
    free(m);
}

static int io_from_proto(fr_onnx_io *io, const Onnx__ValueInfoProto *v, fr_err *err) {
    char nb[208];
    const char *vname = q(nb, v->name);
    const Onnx__TypeProto *ty = v->type;
    if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "graph input/output %s is not a tensor", vname);
        return -1;
    }
    const Onnx__TypeProto__Tensor *tt = ty->tensor_type;
    int et = tt->has_elem_type ? tt->elem_type : 0;
    if (et != FR_ONNX_DTYPE_F32 && et != FR_ONNX_DTYPE_I64) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "graph input/output %s: element type %d", vname,
                    et);
        return -1;
    }
    io->dtype = (fr_onnx_dtype)et;
    io->rank = -1; /* no shape given */
    if (!tt->shape) return 0;
    if (tt->shape->n_dim > FR_ONNX_MAX_RANK) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "graph input/output %s: rank %zu over %d", vname,
                    tt->shape->n_dim, FR_ONNX_MAX_RANK);
        return -1;
    }
    io->rank = (int)tt->shape->n_dim;
    for (int k = 0; k < io->rank; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        io->dims[k] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0 || d->dim_value > FR_ONNX_MAX_ELEMS) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "graph input/output %s: dimension %lld",
                            vname, (long long)d->dim_value);
                return -1;
            }
            io->dims[k] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
            io->dim_names[k] = fr_xstrdup(d->dim_param);
        }
    }
    return 0;
}

static int op_lookup(const char *s) {
    for (int i = 0; i < FR_ONNX_OP_N; i++)
        if (!strcmp(op_names[i], s)) return i;
    return -1;
}

/* Input k of node i for the ordering: its inputs, then (k == n_in, in a branch) the condition
 * of the If around it, which must be known before the branch's nodes run. -1: none. */
static int dep(const fr_onnx_model *m, int i, int k) {
    const fr_onnx_node *n = &m->nodes[i];
    int v = k < n->n_in ? n->in[k] : n->scope > 0 ? m->nodes[m->scopes[n->scope].node].in[0] : -1;
    return v >= 0 && m->values[v].producer >= 0 ? v : -1;
}

/* Orders m->nodes topologically (Kahn). On a cycle: -1, err names a node on it. */
static int topo_sort(fr_onnx_model *m, fr_err *err) {
    int nn = m->n_nodes;
    int *indeg = fr_xcalloc((size_t)nn + 1, sizeof *indeg);
    /* consumers: for each value, the nodes that read it (CSR) */
    int *cstart = fr_xcalloc((size_t)m->n_values + 1, sizeof *cstart);
    for (int i = 0; i < nn; i++)
        for (int k = 0; k <= m->nodes[i].n_in; k++) {
            int v = dep(m, i, k);
            if (v >= 0) {
                indeg[i]++;
                cstart[v + 1]++;
            }
        }
    for (int v = 0; v < m->n_values; v++) cstart[v + 1] += cstart[v];
    int *fill = fr_xmalloc(((size_t)m->n_values + 1) * sizeof *fill);
    memcpy(fill, cstart, (size_t)m->n_values * sizeof *fill);
    int *cons = fr_xmalloc(((size_t)cstart[m->n_values] + 1) * sizeof *cons);
    for (int i = 0; i < nn; i++)
        for (int k = 0; k <= m->nodes[i].n_in; k++) {
            int v = dep(m, i, k);
            if (v >= 0) cons[fill[v]++] = i;
        }
    int *order = fr_xmalloc(((size_t)nn + 1) * sizeof *order);
    int head = 0, tail = 0;
    for (int i = 0; i < nn; i++)
        if (!indeg[i]) order[tail++] = i;
    while (head < tail) {
        const fr_onnx_node *n = &m->nodes[order[head++]];
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            for (int c = cstart[v]; c < cstart[v + 1]; c++)
                if (--indeg[cons[c]] == 0) order[tail++] = cons[c];
        }
    }
    int rc = 0;
    if (tail < nn) {
        int stuck = 0;
        while (!indeg[stuck]) stuck++;
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "node %s: the graph has a cycle through it",
                    m->nodes[stuck].name);
        rc = -1;
    } else {
        fr_onnx_node *sorted = fr_xmalloc(((size_t)nn + 1) * sizeof *sorted);
        int *pos = fr_xmalloc(((size_t)nn + 1) * sizeof *pos);
        for (int i = 0; i < nn; i++) {
            sorted[i] = m->nodes[order[i]];
            pos[order[i]] = i;
        }
        for (int v = 0; v < m->n_values; v++)
            if (m->values[v].producer >= 0) m->values[v].producer = pos[m->values[v].producer];
        for (int sc = 1; sc < m->n_scopes; sc++) m->scopes[sc].node = pos[m->scopes[sc].node];
        free(m->nodes);
        m->nodes = sorted;
        free(pos);
    }
    free(order);
    free(cons);
    free(fill);
    free(cstart);
    free(indeg);
    return rc;
}

/* ---- subgraph nesting, checked on the raw bytes ---------------------------------------------- */
/* protobuf-c decodes nested messages recursively, so a file nesting If bodies a million deep
 * would exhaust the stack inside it. This walks the only recursive path of the subset
 * (GraphProto.node → NodeProto.attribute → AttributeProto.g → GraphProto) on the wire bytes
 * first and refuses nesting over FR_ONNX_MAX_DEPTH. Malformed bytes end the walk quietly:
 * protobuf-c refuses them next. */
typedef struct wire {
    const uint8_t *p, *end;
} wire;

static int wire_varint(wire *w, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && w->p < w->end; s += 7) {
        const uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* Next field of the message in w: its number and, for a length-delimited one, its bytes in
 * *sub. 1 while there is one, 0 at the end or on malformed bytes. */
static int wire_next(wire *w, uint32_t *field, wire *sub) {
    uint64_t key, v;
    if (w->p >= w->end || wire_varint(w, &key)) return 0;
    *field = (uint32_t)(key >> 3);
    sub->p = sub->end = NULL;
    switch (key & 7) {
    case 0: return !wire_varint(w, &v);
    case 1: if (w->end - w->p < 8) return 0; w->p += 8; return 1;
    case 5: if (w->end - w->p < 4) return 0; w->p += 4; return 1;
    case 2:
        if (wire_varint(w, &v) || v > (uint64_t)(w->end - w->p)) return 0;
        sub->p = w->p;
        sub->end = w->p + v;
        w->p += v;
        return 1;
    default: return 0;
    }
}

/* 0, or -1 when a graph in w nests deeper than FR_ONNX_MAX_DEPTH (depth: this graph's). */
static int wire_graph_depth(wire g, int depth) {
    wire node, attr, sub;
    uint32_t f;
    while (wire_next(&g, &f, &node)) {
        if (f != 1 || !node.p) continue;
        while (wire_next(&node, &f, &attr)) {
            if (f != 5 || !attr.p) continue;
            while (wire_next(&attr, &f, &sub)) {
                if (f != 6 || !sub.p) continue;
                if (depth + 1 > FR_ONNX_MAX_DEPTH || wire_graph_depth(sub, depth + 1)) return -1;
            }
        }
    }
    return 0;
}

static int check_nesting(const void *buf, size_t len) {
    wire m = {buf, (const uint8_t *)buf + len}, g;
    uint32_t f;
    while (wire_next(&m, &f, &g))
        if (f == 7 && g.p && wire_graph_depth(g, 0)) return -1;
    return 0;
}

/* ---- graphs and their If branches ----------------------------------------------------------- */
/* The two bodies of an If node, or NULL. */
static const Onnx__GraphProto *if_branch(const Onnx__NodeProto *np, const char *which) {
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        if (a->name && !strcmp(a->name, which) && a->g) return a->g;
    }
    return NULL;
}

static int is_if(const Onnx__NodeProto *np) {
    return np->op_type && !strcmp(np->op_type, "If") && (!np->domain || !*np->domain);
}

/* Counts the nodes, values and scopes of g and its branches; checks the per-node and per-graph
 * bounds. -1 with err set. */
static int count_graph(const Onnx__GraphProto *g, size_t *nodes, size_t *values, size_t *scopes,
                       fr_err *err) {
    *values += g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        char b1[208];
        if (++*nodes > FR_ONNX_MAX_NODES) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "over %d nodes", FR_ONNX_MAX_NODES);
            return -1;
        }
        if (np->n_input > FR_ONNX_MAX_IO || np->n_output > FR_ONNX_MAX_IO) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "node %s: over %d inputs or outputs",
                        q(b1, np->name), FR_ONNX_MAX_IO);
            return -1;
        }
        *values += np->n_output;
        if (!is_if(np)) continue;
        if (1 + 2 * np->n_output > FR_ONNX_MAX_IO) { /* its inputs: condition, both branches' */
            fr_err_setc(err, FR_ERR_TOO_LARGE, "node %s: If with %zu outputs (over %d)",
                        q(b1, np->name), np->n_output, (FR_ONNX_MAX_IO - 1) / 2);
            return -1;
        }
        const Onnx__GraphProto *br[2] = {if_branch(np, "then_branch"), if_branch(np, "else_branch")};
        for (int k = 0; k < 2; k++) {
            if (!br[k] || br[k]->n_input || br[k]->n_output != np->n_output) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST,
                            "node %s: If needs then_branch and else_branch without inputs, with "
                            "one output per output of the node", q(b1, np->name));
                return -1;
            }
            if (++*scopes > FR_ONNX_MAX_SCOPES) {
                fr_err_setc(err, FR_ERR_TOO_LARGE, "over %d If branches", FR_ONNX_MAX_SCOPES);
                return -1;
            }
            if (count_graph(br[k], nodes, values, scopes, err)) return -1;
        }
    }
    return 0;
}

/* What build_graph shares. */
typedef struct bctx {
    fr_onnx_model *m;
    names *t;
    int cap_values;
    const Onnx__NodeProto **np; /* (nodes) each node's proto */
    fr_err *err;
} bctx;

static int add_inits(bctx *b, const Onnx__GraphProto *g, int scope) {
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *nm = tp->name ? tp->name : "";
        char what[300];
        char b1[208];
        snprintf(what, sizeof what, "initializer %s", q(b1, nm));
        int id = *nm ? names_add(b->t, nm, b->cap_values) : -1;
        if (id < 0) {
            fr_err_setc(b->err, FR_ERR_BAD_REQUEST, "%s: empty or repeated name", what);
            return -1;
        }
        b->m->values[id].scope = scope;
        if (!(b->m->values[id].konst = tensor_from_proto(tp, what, b->err))) return -1;
    }
    return 0;
}

static int add_graph(bctx *b, const Onnx__GraphProto *g, int scope);

/* Adds node np (op, outputs, attributes) in scope, then an If's branches as new scopes. */
static int add_node(bctx *b, const Onnx__NodeProto *np, int scope) {
    fr_onnx_model *m = b->m;
    const int idx = m->n_nodes++;
    fr_onnx_node *n = &m->nodes[idx];
    b->np[idx] = np;
    n->scope = scope;
    const char *ot = np->op_type ? np->op_type : "";
    char b1[208], b2[208];
    if (np->name && *np->name) n->name = fr_xstrdup(q(b1, np->name));
    else {
        char bn[256];
        snprintf(bn, sizeof bn, "%s#%d", q(b1, ot), idx);
        n->name = fr_xstrdup(bn);
    }
    int op = (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")) ? -1 : op_lookup(ot);
    if (op < 0) {
        fr_err_setc(b->err, FR_ERR_UNSUPPORTED, "node %s: op %s%s%s is not supported", n->name,
                    q(b1, np->domain && *np->domain ? np->domain : ""),
                    np->domain && *np->domain ? "." : "", q(b2, ot));
        return -1;
    }
    n->op = (fr_onnx_op)op;
    n->n_out = (int)np->n_output;
    n->n_in = n->op == FR_ONNX_OP_If ? 1 + 2 * n->n_out : (int)np->n_input;
    if (n->op == FR_ONNX_OP_If && np->n_input != 1) {
        fr_err_setc(b->err, FR_ERR_BAD_REQUEST, "node %s: If takes one input", n->name);
        return -1;
    }
    n->in = fr_xcalloc((size_t)n->n_in + 1, sizeof *n->in);
    n->out = fr_xcalloc((size_t)n->n_out + 1, sizeof *n->out);
    for (int k = 0; k < n->n_out; k++) {
        const char *on = np->output[k];
        int id = *on ? names_add(b->t, on, b->cap_values) : -1;
        if (id < 0) {
            fr_err_setc(b->err, FR_ERR_BAD_REQUEST, "node %s: output %s is empty or written twice",
                        n->name, q(b1, on));
            return -1;
        }
        m->values[id].producer = idx;
        m->values[id].scope = scope;
        n->out[k] = id;
    }
    n->attr = fr_xcalloc(np->n_attribute + 1, sizeof *n->attr);
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *ap = np->attribute[k];
        if (n->op == FR_ONNX_OP_If && ap->g) continue; /* the branches: read below */
        if (attr_from_proto(&n->attr[n->n_attr++], ap, n->name, b->err) < 0) return -1;
    }
    if (n->op == FR_ONNX_OP_Constant) {
        const fr_onnx_attr *a = fr_onnx_node_attr(n, "value");
        if (n->n_in != 0 || n->n_out != 1 || !a || a->type != FR_ONNX_ATTR_TENSOR) {
            fr_err_setc(b->err, FR_ERR_UNSUPPORTED,
                        "node %s: Constant needs one output and a tensor 'value'", n->name);
            return -1;
        }
    }
    if (n->op != FR_ONNX_OP_If) return 0;
    for (int k = 0; k < 2; k++) {
        const int sc = m->n_scopes++;
        m->scopes[sc] = (fr_onnx_scope){.parent = scope, .node = idx, .then = k == 0};
        if (add_graph(b, if_branch(np, k == 0 ? "then_branch" : "else_branch"), sc)) return -1;
    }
    return 0;
}

static int add_graph(bctx *b, const Onnx__GraphProto *g, int scope) {
    if (add_inits(b, g, scope)) return -1;
    for (size_t i = 0; i < g->n_node; i++)
        if (add_node(b, g->node[i], scope)) return -1;
    return 0;
}

/* 1 when a value of scope vs may be read from scope from (the same or an enclosing scope). */
static int visible(const fr_onnx_model *m, int vs, int from) {
    for (int s = from; s >= 0; s = m->scopes[s].parent)
        if (s == vs) return 1;
    return 0;
}

/* The value called nm as node n (in scope sc) reads it; -1 with err set. */
static int resolve(bctx *b, const fr_onnx_node *n, const char *nm, int sc) {
    char b1[208];
    const int id = names_find(b->t, nm);
    if (id < 0) {
        fr_err_setc(b->err, FR_ERR_BAD_REQUEST, "node %s: input %s is not defined", n->name,
                    q(b1, nm));
        return -1;
    }
    if (!visible(b->m, b->m->values[id].scope, sc)) {
        fr_err_setc(b->err, FR_ERR_BAD_REQUEST, "node %s: input %s is out of its scope", n->name,
                    q(b1, nm));
        return -1;
    }
    return id;
}

/* Every node input resolved (anywhere in the file, within scope); an If's inputs are its
 * condition and its branches' outputs, read from the branch scopes. */
static int resolve_inputs(bctx *b) {
    fr_onnx_model *m = b->m;
    for (int i = 0; i < m->n_nodes; i++) {
        fr_onnx_node *n = &m->nodes[i];
        const Onnx__NodeProto *np = b->np[i];
        const int direct = n->op == FR_ONNX_OP_If ? 1 : n->n_in;
        for (int k = 0; k < direct; k++) {
            const char *in = np->input[k];
            n->in[k] = -1;
            if (*in && (n->in[k] = resolve(b, n, in, n->scope)) < 0) return -1;
        }
        if (n->op != FR_ONNX_OP_If) continue;
        for (int s = 1; s < m->n_scopes; s++) {
            if (m->scopes[s].node != i) continue;
            const Onnx__GraphProto *g = if_branch(np, m->scopes[s].then ? "then_branch" : "else_branch");
            const int base = m->scopes[s].then ? 1 : 1 + n->n_out;
            for (int k = 0; k < n->n_out; k++) {
                const char *on = g->output[k]->name ? g->output[k]->name : "";
                if ((n->in[base + k] = resolve(b, n, on, s)) < 0) return -1;
            }
        }
    }
    return 0;
}

/* Builds the model from the decoded proto; -1 with err set (without the file prefix). */
static int build(fr_onnx_model *m, const Onnx__ModelProto *p, fr_err *err) {
    m->ir_version = p->has_ir_version ? p->ir_version : 0;
    for (size_t i = 0; i < p->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = p->opset_import[i];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))
            m->opset = o->has_version ? o->version : 0;
    }
    const Onnx__GraphProto *g = p->graph;
    if (!g) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "no graph");
        return -1;
    }
    /* Every value is a graph input, an initializer or a node output, of some graph. */
    size_t n_nodes = 0, cap_values = g->n_input, n_scopes = 1;
    if (count_graph(g, &n_nodes, &cap_values, &n_scopes, err)) return -1;
    if (cap_values > INT_MAX / 4) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%zu values", cap_values);
        return -1;
    }
    m->values = fr_xcalloc(cap_values + 1, sizeof *m->values);
    m->nodes = fr_xcalloc(n_nodes + 1, sizeof *m->nodes);
    m->scopes = fr_xcalloc(n_scopes + 1, sizeof *m->scopes);
    m->scopes[0] = (fr_onnx_scope){.parent = -1, .node = -1, .then = 1};
    m->n_scopes = 1;
    names t = {.m = m, .cap = 16};
    while (t.cap < 2 * cap_values + 2) t.cap *= 2;
    t.slot = fr_xcalloc(t.cap, sizeof *t.slot);
    bctx b = {m, &t, (int)cap_values, fr_xcalloc(n_nodes + 1, sizeof *b.np), err};
    int rc = -1;
    if (add_inits(&b, g, 0)) goto out;
    /* graph inputs (those that repeat an initializer are constants with a default: skipped) */
    m->inputs = fr_xcalloc(g->n_input + 1, sizeof *m->inputs);
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = g->input[i]->name ? g->input[i]->name : "";
        if (*nm && names_find(&t, nm) >= 0 && m->values[names_find(&t, nm)].konst) continue;
        int id = *nm ? names_add(&t, nm, (int)cap_values) : -1;
        if (id < 0) {
            char b1[208];
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "graph input %s: empty or repeated name",
                        q(b1, nm));
            goto out;
        }
        fr_onnx_io *io = &m->inputs[m->n_inputs++];
        io->value = id;
        if (io_from_proto(io, g->input[i], err) < 0) goto out;
    }
    for (size_t i = 0; i < g->n_node; i++)
        if (add_node(&b, g->node[i], 0)) goto out;
    if (resolve_inputs(&b)) goto out;
    m->outputs = fr_xcalloc(g->n_output + 1, sizeof *m->outputs);
    for (size_t i = 0; i < g->n_output; i++) {
        const char *nm = g->output[i]->name ? g->output[i]->name : "";
        int id = names_find(&t, nm);
        if (id < 0 || m->values[id].scope != 0) {
            char b1[208];
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "graph output %s is not defined", q(b1, nm));
            goto out;
        }
        fr_onnx_io *io = &m->outputs[m->n_outputs++];
        io->value = id;
        if (io_from_proto(io, g->output[i], err) < 0) goto out;
    }
    if (topo_sort(m, err) < 0) goto out;
    /* Constant nodes: their output value holds the tensor (the node stays in the list) */
    for (int i = 0; i < m->n_nodes; i++) {
        fr_onnx_node *n = &m->nodes[i];
        if (n->op != FR_ONNX_OP_Constant) continue;
        fr_onnx_attr *a = (fr_onnx_attr *)fr_onnx_node_attr(n, "value");
        m->values[n->out[0]].konst = a->t;
        a->t = NULL;
    }
    rc = 0;
out:
    free(b.np);
    free(t.slot);
    return rc;
}

fr_onnx_model *fr_onnx_model_load_buffer(const void *buf, size_t len, const char *name,
                                         fr_err *err) {
    if (!name) name = "onnx";
    if (len > FR_ONNX_MAX_FILE) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: %zu bytes (over %zu)", name, len,
                    FR_ONNX_MAX_FILE);
        return NULL;
    }
    if (check_nesting(buf, len)) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: If branches nested over %d deep", name,
                    FR_ONNX_MAX_DEPTH);
        return NULL;
    }
    Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, len, buf);
    if (!p) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a valid ONNX protobuf (truncated or corrupt)",
                    name);
        return NULL;
    }
    fr_onnx_model *m = fr_xcalloc(1, sizeof *m);
    m->path = fr_xstrdup(name);
    if (build(m, p, err) < 0) {
        fr_err_prefix(err, "%s", name);
        fr_onnx_model_free(m);
        m = NULL;
    }
    onnx__model_proto__free_unpacked(p, NULL);
    return m;
}

fr_onnx_model *fr_onnx_model_load(const char *path, fr_err *err) {
    size_t len = 0;
    char *buf = fr_read_file(path, FR_ONNX_MAX_FILE, &len, err);
    if (!buf) return NULL;
    fr_onnx_model *m = fr_onnx_model_load_buffer(buf, len, path, err);
    free(buf);
    return m;
}
