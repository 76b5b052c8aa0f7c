/* grammar_impl.h — the compiled grammar's node table, shared by the schema compiler (schema.c)
 * and the matcher (grammar.c). Not for use outside those two files.
 *
 * A grammar is a table of nodes; node 0 is the root, a SEQ of [prefix literal?, value,
 * suffix literal?]. Kinds and their fields:
 *   LIT     a, b: offset and length of the bytes in g->bytes
 *   STR     a: minLength, b: maxLength (-1 = none), in characters (code points)
 *   NUM     a: 1 = integer only
 *   OBJ     a: first property in g->props, b: count; item: value node of extra keys (-1 none)
 *   ARR     a: minItems, b: maxItems (-1 = none); item: the item node
 *   CHOICE  a: first kid in g->kids, b: count (anyOf, enum, type lists, booleans, any value)
 *   SEQ     a: first kid, b: count
 *   BASE    the mask cache's bottom marker (never in a table; see fr_gstate_from_frame)
 * minsize: bytes of the shortest text the node matches.
 */
#ifndef FRUGAL_ENGINE_GRAMMAR_IMPL_H
#define FRUGAL_ENGINE_GRAMMAR_IMPL_H

#include "engine/grammar.h"

enum { GK_LIT = 1, GK_STR, GK_NUM, GK_OBJ, GK_ARR, GK_CHOICE, GK_SEQ, GK_BASE };

#define GN_BASE (-7) /* node id of the base marker frame */

typedef struct gnode {
    uint8_t kind;    /* GK_* */
    int32_t a, b;    /* per kind, above */
    int32_t item;    /* per kind, above */
    int32_t minsize; /* shortest match in bytes */
} gnode;

typedef struct gprop {
    int32_t key;      /* LIT node of the quoted key ("\"name\"") */
    int32_t value;    /* value node */
    bool required;
} gprop;

struct fr_grammar {
    gnode *nodes;
    int n_nodes, cap_nodes;
    gprop *props;
    int n_props, cap_props;
    int32_t *kids;
    int n_kids, cap_kids;
    uint8_t *bytes;   /* literal bytes */
    int n_bytes, cap_bytes;
    int any_str;      /* STR node without limits (extra keys) */
};

#endif
