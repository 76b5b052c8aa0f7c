/* frugal_internal.h — the public API's handles opened for the layers above it that also run the
 * internal modules. `frugal serve` (src/serve) loads its model and chooses its device through
 * frugal.h like any other program, then hands the result to the serving engine (src/engine:
 * continuous batching over many sequences), which is below the API and not part of it. These
 * two accessors are that hand-over, so nothing above the API loads a model or parses a device a
 * second way. Not installed and not public: a program outside this tree uses frugal.h only.
 *
 * Both are plain reads of an immutable handle: thread-safe, they allocate nothing and cannot
 * fail. What they return is owned by the handle and valid until its *_free; the caller must not
 * free or modify it.
 */
#ifndef FRUGAL_INTERNAL_H
#define FRUGAL_INTERNAL_H

#include "frugal.h"

#include "engine/generate.h"
#include "model/model.h"

/* The loaded model behind `m` (quantised already when frugal_model_params.quant asked). */
const fr_model *frugal_model_impl(const frugal_model *m);

/* The device that frugal_context_new checked and chose for `c`, in the backend's terms: device
 * ("cpu", "cuda", "cuda:N"), weights and kv (NULL: the backend's default) and kv_fraction (> 0).
 * The strings are the context's. */
fr_generate_device frugal_context_device(const frugal_context *c);

#endif
