/* lora_reg.h — the server's LoRA adapters by name: loaded at start (`--lora NAME=PATH`) and at
 * run time (POST /v1/load_lora_adapter, /v1/unload_lora_adapter, as vLLM names them). A request
 * whose "model" is an adapter's name runs with it (fr_req_params.lora); the requests hold their
 * own references, so unloading never pulls an adapter from under a running request.
 *
 * Thread-safe. Names are 1 to FR_LORA_MAX_NAME - 1 bytes of [A-Za-z0-9._:/-]; at most
 * FR_LORA_REG_MAX adapters at once (TOO_LARGE beyond).
 */
#ifndef FRUGAL_SERVE_LORA_REG_H
#define FRUGAL_SERVE_LORA_REG_H

#include "model/lora.h"

#define FR_LORA_REG_MAX 64

typedef struct fr_lora_reg fr_lora_reg;

/* A registry for adapters of a model of hp (copied). */
fr_lora_reg *fr_lora_reg_new(const fr_hparams *hp);
void fr_lora_reg_free(fr_lora_reg *g);
/* Loads dir as name. 0, or -1 with err (the loader's codes; a name taken: BAD_REQUEST; a bad
 * name: BAD_REQUEST; the registry full: TOO_LARGE). */
int fr_lora_reg_load(fr_lora_reg *g, const char *name, const char *dir, fr_err *err);
/* Parses "NAME=PATH" and loads it (the `--lora` flag). */
int fr_lora_reg_load_spec(fr_lora_reg *g, const char *spec, fr_err *err);
/* Removes name (NOT_FOUND when absent); requests running with it keep it until they end. */
int fr_lora_reg_unload(fr_lora_reg *g, const char *name, fr_err *err);
/* A reference to the adapter called name (give it back with fr_lora_free), or NULL. */
fr_lora *fr_lora_reg_get(fr_lora_reg *g, const char *name);
/* The names, in load order, into names[0..cap); returns how many there are. */
int fr_lora_reg_names(fr_lora_reg *g, char (*names)[FR_LORA_MAX_NAME], int cap);

#endif
