/* grammar.h — JSON Schema compiled to a byte-level grammar, and its matcher: the core of
 * structured outputs (response_format json_object / json_schema, forced tool calls).
 *
 *   fr_err err;
 *   fr_grammar *g = fr_grammar_from_schema(schema_json, NULL, NULL, &err);   // or NULL + err
 *   fr_gmatch *m = fr_gmatch_new(g);
 *   fr_gmatch_accept(m, "{\"a\"", 4);   // false once a byte leaves the language
 *   fr_gmatch_free(m); fr_grammar_free(g);
 *
 * The language: compact JSON (no whitespace except one optional space after ':' and ','), object
 * properties in the schema's order (optional ones may be skipped; extra keys only when the
 * object declares no properties), numbers of at most 16 integer and 16 fraction digits and a
 * 3-digit exponent, strings of valid UTF-8 with JSON escapes (no lone surrogates). Every prefix
 * the matcher accepts can be completed (schemas that cannot be satisfied are refused), and
 * fr_gmatch_need says how many bytes the shortest completion has: the engine uses it so that a
 * constrained generation always completes within max_tokens.
 *
 * Supported keywords (anything else is refused with FR_ERR_UNSUPPORTED naming the keyword):
 * type (one or a list), properties, required, additionalProperties, items, minItems, maxItems,
 * minLength, maxLength, enum, const, anyOf, and the annotations title, description, default,
 * examples, $schema, $id. $ref, oneOf, allOf, pattern, format, minimum/maximum and the rest are
 * refused by name.
 * Limits (FR_ERR_TOO_LARGE): FR_GRAMMAR_MAX_DEPTH nesting, FR_GRAMMAR_MAX_NODES nodes,
 * FR_GRAMMAR_MAX_ENUM values per enum, FR_GRAMMAR_MAX_BYTES literal bytes.
 *
 * The matcher's state is a set of at most FR_GRAMMAR_MAX_STACKS pushdown stacks (anyOf and enum
 * fork); each stack is at most FR_GRAMMAR_MAX_FRAMES deep.
 *
 * Thread-safety: a compiled fr_grammar is immutable and may be shared; a matcher is used by one
 * thread at a time.
 */
#ifndef FRUGAL_ENGINE_GRAMMAR_H
#define FRUGAL_ENGINE_GRAMMAR_H

#include "base/base.h"

#include <stdint.h>

struct cJSON;

#define FR_GRAMMAR_MAX_DEPTH 12    /* schema nesting */
#define FR_GRAMMAR_MAX_NODES 4096  /* grammar nodes per schema */
#define FR_GRAMMAR_MAX_ENUM 256    /* values of one enum */
#define FR_GRAMMAR_MAX_BYTES 65536 /* literal bytes (keys, consts, enum values) */
#define FR_GRAMMAR_MAX_STACKS 16   /* parallel stacks of a matcher state */
#define FR_GRAMMAR_MAX_FRAMES 28   /* frames of one stack */

typedef struct fr_grammar fr_grammar;

/* Compile a JSON Schema (a cJSON object; NULL = any JSON object, as response_format
 * json_object). prefix / suffix (may be NULL): literal text around the value (a tool-call
 * wrapper). Returns the grammar (caller frees), or NULL with err (FR_ERR_UNSUPPORTED naming the
 * keyword, FR_ERR_TOO_LARGE for a limit, FR_ERR_BAD_REQUEST for a malformed schema). */
fr_grammar *fr_grammar_from_schema(const struct cJSON *schema, const char *prefix,
                                   const char *suffix, fr_err *err);
/* The same from schema text (for the fuzzer and tests). */
fr_grammar *fr_grammar_from_text(const char *json, size_t len, fr_err *err);
void fr_grammar_free(fr_grammar *g);
/* The grammar's tables as bytes (malloc'd, *len set): equal fingerprints, equal grammars. */
uint8_t *fr_grammar_fingerprint(const fr_grammar *g, size_t *len);
int fr_grammar_n_nodes(const fr_grammar *g);

/* One frame of a stack: a node and where in it the match is. Plain data: two equal frames
 * behave the same for every continuation. */
typedef struct fr_gframe {
    int32_t node; /* grammar node */
    int16_t ph;   /* phase within the node (per kind) */
    int16_t aux;  /* kind-specific (UTF-8 continuation, \u digits) */
    int32_t i;    /* kind-specific (next property, sequence element) */
    int32_t n;    /* kind-specific (characters, items, literal position, value node) */
} fr_gframe;

typedef struct fr_gstack {
    int32_t len;                             /* frames in use */
    fr_gframe f[FR_GRAMMAR_MAX_FRAMES];      /* bottom first */
} fr_gstack;

typedef struct fr_gstate {
    int n;                                   /* live stacks; 0 = dead */
    bool hit_base;                           /* a byte reached the base frame (mask cache) */
    fr_gstack s[FR_GRAMMAR_MAX_STACKS];
} fr_gstate;

/* The state before any byte. */
void fr_gstate_init(const fr_grammar *g, fr_gstate *st);
/* out = in after byte c (out != in). Returns out->n (0: c is not allowed). */
int fr_gstate_feed(const fr_grammar *g, const fr_gstate *in, uint8_t c, fr_gstate *out);
/* Feed bytes; tmp is scratch. true when all were accepted (st updated), false (st unchanged). */
bool fr_gstate_feed_bytes(const fr_grammar *g, fr_gstate *st, const char *s, size_t n,
                          fr_gstate tmp[2]);
/* The value is complete (the output may end here). */
bool fr_gstate_can_finish(const fr_grammar *g, const fr_gstate *st);
/* Complete and no byte can follow. */
bool fr_gstate_terminal(const fr_grammar *g, const fr_gstate *st);
/* Bytes of the shortest completion (0 = may end now). */
int fr_gstate_need(const fr_grammar *g, const fr_gstate *st);
/* Copy of one stack (the used frames only). */
void fr_gstack_copy(fr_gstack *dst, const fr_gstack *src);
/* A stack whose bottom is a base marker and whose only other frame is f (mask cache: what a
 * frame accepts by itself; a byte that would pop f sets hit_base instead). */
void fr_gstate_from_frame(const fr_grammar *g, const fr_gframe *f, fr_gstate *st);
/* A frame's cache key: f with the fields that cannot change the next max_chars characters'
 * outcome normalised. */
fr_gframe fr_gframe_key(const fr_grammar *g, const fr_gframe *f, int max_chars);
/* A string frame inside its body (not within an escape or a UTF-8 character): true with its
 * characters so far and its minLength / maxLength (-1: none). */
bool fr_gframe_string_body(const fr_grammar *g, const fr_gframe *f, int *n, int *min, int *max);
/* out = the one-stack state of s with its top frame popped as complete (its parent told). */
void fr_gstate_pop_top(const fr_grammar *g, const fr_gstack *s, fr_gstate *out);

#endif
