/* frugal.c — the public API (include/frugal.h) over the internal modules: fr_model_load for
 * loading, model/chat for rendering, model/tokenizer for ids, engine/generate (through the
 * backend interface, backend/backend.h) for generation on the CPU or a CUDA device.
 *
 * The context keeps its device settings and opens the backend for each frugal_generate call
 * (on the CPU, a KV pool of exactly prompt + max_tokens positions, as engine/generate does).
 * Errors: every internal fr_err is copied to frugal_error with the status of its code
 * (fr_err_code, base/base.h), or, where the raiser left the code unset, the status the step that
 * failed implies (loading, a parameter, the device). The server takes the model and device of
 * its handles through frugal_internal.h. */
#include "frugal.h"
#include "frugal_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/vision.h"
#include "engine/generate.h"
#include "model/chat.h"
#include "model/mrope.h"
#include "model/vision.h"
#include "stages/image/image.h"
#include "stages/image/vlproc.h"
#include "stages/vision/prune.h"
#include "model/model.h"
#include "model/tokenizer.h"

struct frugal_model {
    fr_model *m;
    bool quantised; /* loaded with frugal_model_params.quant */
};

struct frugal_context {
    const frugal_model *model;
    fr_backend_kind kind;
    char *device, *weights, *kv; /* owned copies (weights / kv NULL: the backend's default) */
    float kv_fraction;
};

/* ---- status ---- */

static frugal_status fail(frugal_error *err, frugal_status st, const char *fmt, ...)
    FR_PRINTF(3, 4);
static frugal_status fail(frugal_error *err, frugal_status st, const char *fmt, ...) {
    if (err) {
        err->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* An internal error with the status its code gives; `fallback` when the raiser left the code at
 * FR_ERR_INTERNAL (the caller knows which step failed: loading, a parameter, the device). */
static frugal_status fail_fr(frugal_error *err, frugal_status fallback, const fr_err *e) {
    frugal_status st = fallback;
    switch (e->code) {
    case FR_ERR_BAD_REQUEST: st = FRUGAL_ERR_INVALID_ARGUMENT; break;
    case FR_ERR_TOO_LARGE: st = FRUGAL_ERR_TOO_LARGE; break;
    case FR_ERR_UNSUPPORTED: st = FRUGAL_ERR_UNSUPPORTED; break;
    case FR_ERR_NOT_FOUND: st = FRUGAL_ERR_NOT_FOUND; break;
    case FR_ERR_UNAVAILABLE:
    case FR_ERR_TIMEOUT:
    case FR_ERR_CANCELLED: st = FRUGAL_ERR_UNAVAILABLE; break;
    case FR_ERR_INTERNAL: break;
    }
    return fail(err, st, "%s", e->msg);
}

static void ok(frugal_error *err) {
    if (err) {
        err->status = FRUGAL_OK;
        err->message[0] = 0;
    }
}

const char *frugal_status_str(frugal_status s) {
    switch (s) {
    case FRUGAL_OK: return "ok";
    case FRUGAL_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case FRUGAL_ERR_NOT_FOUND: return "not_found";
    case FRUGAL_ERR_UNSUPPORTED: return "unsupported";
    case FRUGAL_ERR_TOO_LARGE: return "too_large";
    case FRUGAL_ERR_UNAVAILABLE: return "unavailable";
    case FRUGAL_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}

void frugal_free(void *p) { free(p); }

/* ---- model ---- */

frugal_model_params frugal_model_default_params(void) {
    frugal_model_params p = {NULL};
    return p;
}

frugal_model *frugal_model_load(const char *path, frugal_model_params params, frugal_error *err) {
    if (!path || !*path) {
        fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "no model path given");
        return NULL;
    }
    if (params.quant && strcmp(params.quant, "q8") && strcmp(params.quant, "q4")) {
        fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "quant must be q8 or q4, not '%s'", params.quant);
        return NULL;
    }
    fr_err e = {0};
    fr_model *m = fr_model_load(path, &e);
    if (!m) {
        fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
        return NULL;
    }
    if (params.quant && fr_model_quantize(m, params.quant, &e)) {
        fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
        fr_model_free(m);
        return NULL;
    }
    frugal_model *h = fr_xmalloc(sizeof *h);
    h->m = m;
    h->quantised = params.quant != NULL;
    ok(err);
    return h;
}

const fr_model *frugal_model_impl(const frugal_model *h) { return h->m; }

void frugal_model_free(frugal_model *h) {
    if (!h) return;
    fr_model_free(h->m);
    free(h);
}

/* ---- text ---- */

frugal_status frugal_tokenize(const frugal_model *h, const char *text, int add_special,
                              int32_t **ids, size_t *n, frugal_error *err) {
    *ids = NULL;
    *n = 0;
    if (!text) return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "no text to tokenize");
    fr_err e = {0};
    if (fr_tokenize(h->m->tok, text, strlen(text), add_special != 0, ids, n, &e))
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
    }
    ok(err);
    return FRUGAL_OK;
}

/* The messages array, checked: objects with a string "role" and a string, array or null
 * "content". Returns NULL with err set. */
static cJSON *parse_messages(const char *json, frugal_error *err) {
    cJSON *msgs = json ? cJSON_Parse(json) : NULL;
    if (!cJSON_IsArray(msgs)) {
        cJSON_Delete(msgs);
        fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
             "messages must be a JSON array of {\"role\", \"content\"} objects");
        return NULL;
    }
    const cJSON *it;
    int idx = 0;
    cJSON_ArrayForEach(it, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsObject(it) || !cJSON_IsString(role) ||
            !(cJSON_IsString(content) || cJSON_IsArray(content) || cJSON_IsNull(content))) {
            cJSON_Delete(msgs);
            fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
                 "message %d needs a string \"role\" and a \"content\"", idx);
            return NULL;
        }
        idx++;
    }
    return msgs;
}

char *frugal_render_chat(const frugal_model *h, const char *messages_json,
                         const char *chat_template, frugal_error *err) {
    const fr_model *m = h->m;
    const char *tmpl = chat_template ? fr_chat_builtin(chat_template) : m->chat_template;
    if (!tmpl) {
        if (chat_template)
            fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
                 "unknown chat template '%s' (built-in: chatml, llama3)", chat_template);
        else
            fail(err, FRUGAL_ERR_UNSUPPORTED,
                 "%s has no chat template; choose a built-in one (chatml, llama3)", m->path);
        return NULL;
    }
    cJSON *msgs = parse_messages(messages_json, err);
    if (!msgs) return NULL;
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "",
                       .tools = NULL};
    fr_err e = {0};
    char *out = fr_chat_render(tmpl, msgs, &co, &e);
    cJSON_Delete(msgs);
    if (!out) {
        fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
        return NULL;
    }
    ok(err);
    return out;
}

frugal_status frugal_tokenize_chat(const frugal_model *h, const char *messages_json,
                                   const char *chat_template, int32_t **ids, size_t *n,
                                   frugal_error *err) {
    *ids = NULL;
    *n = 0;
    char *text = frugal_render_chat(h, messages_json, chat_template, err);
    if (!text) return err ? err->status : FRUGAL_ERR_INVALID_ARGUMENT;
    /* the template wrote BOS: the rendered text owns it (HF: apply_chat_template(tokenize=True)
     * encodes with add_special_tokens=False) */
    frugal_status st = frugal_tokenize(h, text, 0, ids, n, err);
    free(text);
    return st;
}

/* ---- context ---- */

frugal_context_params frugal_context_default_params(void) {
    const fr_backend_params d = fr_backend_params_default(); /* the backend's defaults, not a copy */
    frugal_context_params p;
    memset(&p, 0, sizeof p);
    p.device = d.device;
    p.kv_fraction = d.kv_fraction;
    return p;
}

static bool one_of(const char *s, const char *a, const char *b, const char *c) {
    return !strcmp(s, a) || !strcmp(s, b) || (c && !strcmp(s, c));
}

/* Parses the device and checks the settings against its kind (no model needed). */
static frugal_status check_params(const frugal_context_params *p, fr_backend_kind *kind,
                                  frugal_error *err) {
    int index;
    fr_err e = {0};
    const char *device = p->device ? p->device : "cpu";
    if (fr_backend_parse_device(device, kind, &index, &e))
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    if (p->weights && !one_of(p->weights, "bf16", "int8", "int4"))
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
                    "weights must be bf16, int8 or int4, not '%s'", p->weights);
    if (p->kv_cache && !one_of(p->kv_cache, "bf16", "int8", NULL))
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "kv_cache must be bf16 or int8, not '%s'",
                    p->kv_cache);
    if (!(p->kv_fraction >= 0 && p->kv_fraction <= 1))
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "kv_fraction must be in 0..1");
    if (*kind == FR_BACKEND_CPU) {
        if (p->weights)
            return fail(err, FRUGAL_ERR_UNSUPPORTED,
                        "weights %s: the CPU runs the model's own weights (quantise on load "
                        "with quant q8 or q4)", p->weights);
        if (p->kv_cache && strcmp(p->kv_cache, "bf16"))
            return fail(err, FRUGAL_ERR_UNSUPPORTED, "kv_cache %s: the CPU keeps an f32 KV cache",
                        p->kv_cache);
    } else if (!fr_backend_cuda_linked()) {
        return fail(err, FRUGAL_ERR_UNSUPPORTED,
                    "device '%s': built without CUDA: rebuild with make cuda "
                    "(build-cuda/frugal-cuda)", device);
    }
    return FRUGAL_OK;
}

frugal_status frugal_context_params_check(const frugal_context_params *p, frugal_error *err) {
    fr_backend_kind kind;
    frugal_status st = check_params(p, &kind, err);
    if (st == FRUGAL_OK) ok(err);
    return st;
}

frugal_context *frugal_context_new(const frugal_model *h, frugal_context_params p,
                                   frugal_error *err) {
    fr_backend_kind kind;
    if (check_params(&p, &kind, err) != FRUGAL_OK) return NULL;
    if (kind == FR_BACKEND_CUDA && h->quantised) {
        fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
             "device '%s': the model was quantised on load for the CPU; choose CUDA weights "
             "with weights int8 or int4 instead", p.device);
        return NULL;
    }
    frugal_context *c = fr_xcalloc(1, sizeof *c);
    c->model = h;
    c->kind = kind;
    c->device = fr_xstrdup(p.device ? p.device : "cpu");
    c->weights = p.weights ? fr_xstrdup(p.weights) : NULL;
    c->kv = p.kv_cache ? fr_xstrdup(p.kv_cache) : NULL;
    c->kv_fraction = p.kv_fraction > 0 ? p.kv_fraction : fr_backend_params_default().kv_fraction;
    ok(err);
    return c;
}

fr_generate_device frugal_context_device(const frugal_context *c) {
    fr_generate_device d = {.device = c->device, .weights = c->weights, .kv = c->kv,
                            .kv_fraction = c->kv_fraction};
    return d;
}

void frugal_context_free(frugal_context *c) {
    if (!c) return;
    free(c->device);
    free(c->weights);
    free(c->kv);
    free(c);
}

/* ---- generation ---- */

frugal_generate_params frugal_generate_default_params(void) {
    frugal_generate_params p;
    memset(&p, 0, sizeof p);
    p.max_tokens = 128;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    return p;
}

/* The sampler and generation settings of p, checked. */
static frugal_status to_internal(const frugal_generate_params *p, fr_sampling *s,
                                 fr_gen_params *gp, frugal_error *err) {
    if (p->max_tokens < 1) return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "max_tokens must be >= 1");
    if (!(p->temperature >= 0) || p->top_k < 0 || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1))
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT,
                    "sampling: temperature >= 0, top_k >= 0, top_p and min_p in 0..1");
    *s = fr_sampling_default();
    s->temperature = p->temperature;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->min_p = p->min_p;
    s->seed = p->seed;
    *gp = fr_gen_params_default();
    gp->max_tokens = p->max_tokens;
    gp->ignore_eos = p->ignore_eos != 0;
    for (int i = 0; i < FRUGAL_MAX_STOP && i < FR_GEN_MAX_STOP && p->stop[i]; i++)
        gp->stop[gp->n_stop++] = p->stop[i];
    return FRUGAL_OK;
}

frugal_status frugal_generate(frugal_context *c, const int32_t *prompt, size_t n_prompt,
                              const frugal_generate_params *p, frugal_result *out,
                              frugal_error *err) {
    memset(out, 0, sizeof *out);
    const fr_model *m = c->model->m;
    if (!prompt || n_prompt == 0) return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "the prompt is empty");
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= m->hp.n_vocab)
            return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "prompt id %d at %zu is not in 0..%d",
                        prompt[i], i, m->hp.n_vocab - 1);
    fr_sampling s;
    fr_gen_params gp;
    frugal_status st = to_internal(p, &s, &gp, err);
    if (st != FRUGAL_OK) return st;
    if (m->hp.n_ctx_train > 0 && (int64_t)n_prompt + p->max_tokens > m->hp.n_ctx_train)
        return fail(err, FRUGAL_ERR_TOO_LARGE,
                    "prompt (%zu tokens) + max_tokens (%d) exceeds the model's context of %d "
                    "tokens", n_prompt, p->max_tokens, m->hp.n_ctx_train);
    fr_generate_device gd = frugal_context_device(c);
    fr_generate_result r;
    fr_err e = {0};
    if (fr_generate_on(m, &gd, prompt, n_prompt, &s, &gp, p->on_text, p->user_data, &r, &e))
        /* what is left after the checks above is the device: opening it, its memory, a kernel */
        return fail_fr(err, c->kind == FR_BACKEND_CUDA ? FRUGAL_ERR_UNAVAILABLE : FRUGAL_ERR_INTERNAL,
                       &e);
    out->ids = r.ids;
    out->n_ids = r.n_ids;
    out->text = r.text;
    out->finish = r.finish == FR_FINISH_LENGTH ? FRUGAL_FINISH_LENGTH : FRUGAL_FINISH_STOP;
    out->prefill_s = r.prefill_s;
    out->decode_s = r.decode_s;
    ok(err);
    return FRUGAL_OK;
}

void frugal_result_free(frugal_result *r) {
    if (!r) return;
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* ---- images ---- */

frugal_vl_params frugal_vl_default_params(void) {
    frugal_vl_params p;
    memset(&p, 0, sizeof p);
    p.keep_ratio = 1.0f;
    return p;
}

/* The rendered prompt of one user message holding n_images images, then the text, tokenised
 * (the template's BOS only) with each image placeholder expanded to its grid's tokens. */
static frugal_status vl_prompt_ids(const fr_model *m, const char *prompt, const char *tmpl_name,
                                   const int32_t *grid, int n_images, int32_t **ids, size_t *n,
                                   frugal_error *err) {
    const char *tmpl = tmpl_name ? fr_chat_builtin(tmpl_name) : m->chat_template;
    if (!tmpl)
        return fail(err, tmpl_name ? FRUGAL_ERR_INVALID_ARGUMENT : FRUGAL_ERR_UNSUPPORTED,
                    tmpl_name ? "unknown chat template '%s'" : "%s has no chat template",
                    tmpl_name ? tmpl_name : m->path);
    cJSON *msgs = cJSON_CreateArray(), *msg = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    cJSON_AddItemToArray(msgs, msg);
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddItemToObject(msg, "content", parts);
    for (int i = 0; i < n_images; i++) {
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "image");
        cJSON_AddItemToArray(parts, part);
    }
    cJSON *text = cJSON_CreateObject();
    cJSON_AddStringToObject(text, "type", "text");
    cJSON_AddStringToObject(text, "text", prompt);
    cJSON_AddItemToArray(parts, text);
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "",
                       .tools = NULL};
    fr_err e = {0};
    char *rendered = fr_chat_render(tmpl, msgs, &co, &e);
    cJSON_Delete(msgs);
    if (!rendered) return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    int32_t *raw = NULL;
    size_t n_raw = 0;
    int rc = fr_tokenize(m->tok, rendered, strlen(rendered), false, &raw, &n_raw, &e);
    free(rendered);
    if (!rc)
        rc = fr_vl_expand_pads(raw, n_raw, m->hp.image_token_id, grid, n_images,
                               m->vision->hp.merge, (size_t)INT32_MAX / 4, ids, n, &e);
    free(raw);
    return rc ? fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e) : FRUGAL_OK;
}

/* Image i given as pixel values: checked against its grid and the model, appended to *pix. */
static frugal_status vl_given_pixels(const fr_vision_hparams *vh, const frugal_image *im, int i,
                                     fr_buf *pix, int32_t grid[3], frugal_error *err) {
    const int64_t pd = fr_vision_patch_dim(vh);
    for (int k = 0; k < 3; k++) grid[k] = im->grid_thw[k];
    if (fr_vl_image_tokens(grid, vh->merge) < 0)
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "image %d: bad grid [%d, %d, %d] (each > 0, "
                    "h and w multiples of %d)", i, grid[0], grid[1], grid[2], vh->merge);
    int64_t rows = (int64_t)grid[0] * grid[1] * grid[2];
    if (rows > FR_VISION_MAX_PATCHES)
        return fail(err, FRUGAL_ERR_TOO_LARGE, "image %d: %lld patches (at most %d)", i,
                    (long long)rows, FR_VISION_MAX_PATCHES);
    if (im->n_patches != rows || im->patch_dim != pd)
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "image %d: pixel values (%lld, %lld) do not "
                    "match grid [%d, %d, %d] and the model's patch size: (%lld, %lld) expected", i,
                    (long long)im->n_patches, (long long)im->patch_dim, grid[0], grid[1], grid[2],
                    (long long)rows, (long long)pd);
    fr_buf_append(pix, im->pixel_values, (size_t)(rows * pd) * sizeof(float));
    return FRUGAL_OK;
}

/* Image i from its encoded bytes: decoded to RGB (alpha dropped, EXIF orientation applied, as
 * PIL's exif_transpose + convert("RGB")) under the image stage's default limits
 * (stages/image/image.h), preprocessed as HF's processor (stages/image/vlproc.h, cfg: the model's
 * processor configuration), appended to *pix. */
static frugal_status vl_decode(const fr_vision_hparams *vh, const fr_vl_proc_cfg *cfg,
                               const frugal_image *im, int i, fr_buf *pix, int32_t grid[3],
                               frugal_error *err) {
    if (!im->data || im->size == 0)
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "image %d: no image data", i);
    fr_err e = {0};
    fr_image rgb = {0};
    if (fr_img_decode_flags(im->data, im->size, NULL, NULL, 3, FR_IMG_DECODE_ALPHA_DROP, &rgb, &e)) {
        fr_err_prefix(&e, "image %d", i);
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    }
    fr_vl_pixels px = {0};
    int rc = fr_vl_preprocess(&rgb, cfg, &px, &e);
    fr_image_free(&rgb);
    if (rc) {
        fr_err_prefix(&e, "image %d", i);
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    }
    frugal_image given = {.pixel_values = px.data, .n_patches = px.n_patches,
                          .patch_dim = px.patch_dim, .grid_thw = {px.grid_t, px.grid_h, px.grid_w}};
    frugal_status st = vl_given_pixels(vh, &given, i, pix, grid, err);
    fr_vl_pixels_free(&px);
    return st;
}

/* Image i's pixel rows appended to *pix (grown), its grid into grid[3]. */
static frugal_status vl_pixels(const fr_model *m, const fr_vl_proc_cfg *cfg,
                               const frugal_image *im, int i, fr_buf *pix, int32_t grid[3],
                               frugal_error *err) {
    if (im->pixel_values) return vl_given_pixels(&m->vision->hp, im, i, pix, grid, err);
    return vl_decode(&m->vision->hp, cfg, im, i, pix, grid, err);
}

/* The model's processor configuration, when some image needs preprocessing. */
static frugal_status vl_proc_cfg(const fr_model *m, const frugal_vl_params *vp,
                                 fr_vl_proc_cfg *cfg, frugal_error *err) {
    fr_vl_proc_cfg_default(cfg);
    bool need = false;
    for (int i = 0; i < vp->n_images; i++) need |= !vp->images[i].pixel_values;
    fr_err e = {0};
    if (need && fr_vl_proc_cfg_load(m->path, cfg, &e))
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    if (need && (cfg->patch != m->vision->hp.patch || cfg->merge != m->vision->hp.merge ||
                 cfg->temporal != m->vision->hp.temporal))
        return fail(err, FRUGAL_ERR_UNSUPPORTED, "%s: the processor's patch %d, merge %d, temporal "
                    "%d differ from the vision tower's %d, %d, %d", m->path, cfg->patch,
                    cfg->merge, cfg->temporal, m->vision->hp.patch, m->vision->hp.merge,
                    m->vision->hp.temporal);
    return FRUGAL_OK;
}

/* Everything a VL call allocates, freed at once. */
typedef struct vl_work {
    fr_buf pix;       /* (n_patches, patch_dim) floats of every image */
    int32_t *grid;    /* (n_images, 3) */
    float *feats;     /* (n_tokens, out_hidden) */
    int32_t *ids;     /* prompt ids, pads expanded */
    size_t n_ids;
    int32_t *rpos;    /* (3, n_ids) */
    float *last;      /* (n_vocab) */
    int64_t *kept;    /* (n_kept) image tokens kept, indices over all images' tokens */
} vl_work;

static void vl_work_free(vl_work *w) {
    fr_buf_free(&w->pix);
    free(w->grid);
    free(w->feats);
    free(w->ids);
    free(w->rpos);
    free(w->last);
    free(w->kept);
    memset(w, 0, sizeof *w);
}

/* The question's token embeddings (m, n_embd) and weights for pruning: the prompt text's tokens,
 * their embedding rows, weight 0 for special tokens and stop words. *m = 0 for an empty text. */
static void vl_query(const fr_model *m, const char *prompt, float **q, float **qw, int64_t *nq) {
    *q = *qw = NULL;
    *nq = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    fr_err e = {0};
    if (fr_tokenize(m->tok, prompt, strlen(prompt), false, &ids, &n, &e) || n == 0 ||
        n > FR_VISION_PRUNE_MAX_QUERY) {
        free(ids);
        return;
    }
    const int E = m->hp.n_embd;
    *q = fr_xmalloc(n * (size_t)E * sizeof(float));
    *qw = fr_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        fr_cpu_dequantize_row(m->w.tok_embd.dtype, fr_cpu_row_ptr(&m->w.tok_embd, ids[i]),
                              *q + i * E, E);
        size_t len = 0;
        const char *piece = fr_token_data(m->tok, ids[i], &len);
        bool skip = fr_tokenizer_is_special(m->tok, ids[i]) || !piece ||
                    fr_vision_prune_is_stopword(piece, len);
        (*qw)[i] = skip ? 0.0f : 1.0f;
    }
    *nq = (int64_t)n;
    free(ids);
}

/* Query-guided pruning (stages/vision/prune.h) of each image's tokens: w->ids, w->rpos and
 * w->feats shrink to the kept image tokens (every text token stays; kept tokens keep their
 * original positions). *n_kept gets the image tokens kept. */
static frugal_status vl_prune(const fr_model *m, const frugal_vl_params *vp, const char *prompt,
                              vl_work *w, int64_t n_tok, int64_t *n_kept, frugal_error *err) {
    *n_kept = n_tok;
    w->kept = fr_xmalloc(((size_t)n_tok + 1) * sizeof(int64_t));
    for (int64_t t = 0; t < n_tok; t++) w->kept[t] = t;
    if (vp->n_images == 0 || (vp->keep_ratio >= 1 && vp->max_image_tokens == 0))
        return FRUGAL_OK;
    const int merge = m->vision->hp.merge, E = m->hp.n_embd, img = m->hp.image_token_id;
    fr_vision_prune_params pp = fr_vision_prune_default_params();
    pp.keep_ratio = vp->keep_ratio;
    if (vp->max_image_tokens > 0) pp.max_image_tokens = vp->max_image_tokens;
    int64_t counts[FR_VL_MAX_IMAGES], keep[FR_VL_MAX_IMAGES];
    for (int i = 0; i < vp->n_images; i++) counts[i] = fr_vl_image_tokens(w->grid + 3 * i, merge);
    fr_err e = {0};
    if (fr_vision_prune_keep_counts(counts, vp->n_images, &pp, keep, &e))
        return fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    float *q, *qw;
    int64_t nq;
    vl_query(m, prompt, &q, &qw, &nq);
    const size_t n = w->n_ids;
    uint8_t *drop = fr_xcalloc(n, 1);          /* (n) prompt rows to drop */
    int64_t *kept = fr_xmalloc((size_t)n_tok * sizeof(int64_t));
    int32_t *ipos = fr_xmalloc(3 * (size_t)n_tok * sizeof(int32_t)); /* (3, n_i) of one image */
    frugal_status st = FRUGAL_OK;
    size_t at = 0;       /* prompt row of the current image's first token */
    int64_t row0 = 0, total = 0;
    for (int i = 0; i < vp->n_images && st == FRUGAL_OK; i++) {
        while (at < n && w->ids[at] != img) at++; /* the image's run (fr_vl_rope_index checked) */
        const int64_t ni = counts[i];
        for (int r = 0; r < 3; r++)
            for (int64_t k = 0; k < ni; k++) ipos[r * ni + k] = w->rpos[r * n + at + (size_t)k];
        pp.max_image_tokens = keep[i]; /* the shared budget's count for this image */
        pp.keep_ratio = 1.0;
        fr_vision_prune_input in = {.feat = w->feats + row0 * E, .n = ni, .d = E, .pos = ipos,
                                    .query = q, .query_w = qw, .m = nq};
        int64_t k = fr_vision_prune_select(&in, &pp, kept, NULL, NULL, NULL, &e);
        if (k < 0) {
            st = fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
            break;
        }
        int64_t j = 0;
        for (int64_t t = 0; t < ni; t++) {
            bool keep_t = j < k && kept[j] == t;
            if (keep_t) {
                memmove(w->feats + (total + j) * E, w->feats + (row0 + t) * E,
                        (size_t)E * sizeof(float));
                w->kept[total + j] = row0 + t;
                j++;
            }
            drop[at + (size_t)t] = !keep_t;
        }
        total += k;
        row0 += ni;
        at += (size_t)ni;
    }
    if (st == FRUGAL_OK) { /* compact the ids and the three position rows */
        size_t o = 0;
        for (size_t t = 0; t < n; t++) {
            if (drop[t]) continue;
            w->ids[o] = w->ids[t];
            o++;
        }
        for (int r = 0; r < 3; r++) {
            size_t oo = 0;
            for (size_t t = 0; t < n; t++)
                if (!drop[t]) w->rpos[(size_t)r * o + oo++] = w->rpos[(size_t)r * n + t];
        }
        w->n_ids = o;
        *n_kept = total;
    }
    free(drop), free(kept), free(ipos), free(q), free(qw);
    return st;
}

static frugal_status vl_check_params(const fr_model *m, const frugal_vl_params *vp,
                                     const char *prompt, frugal_error *err) {
    if (!m->vision || m->hp.image_token_id < 0)
        return fail(err, FRUGAL_ERR_UNSUPPORTED, "%s has no vision tower (not a vision-language "
                    "model)", m->path);
    if (!prompt) return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "no prompt text");
    if (vp->n_images < 0 || vp->n_images > FR_VL_MAX_IMAGES || (vp->n_images && !vp->images))
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "%d images (0..%d)", vp->n_images,
                    FR_VL_MAX_IMAGES);
    if (!(vp->keep_ratio > 0 && vp->keep_ratio <= 1) || vp->max_image_tokens < 0)
        return fail(err, FRUGAL_ERR_INVALID_ARGUMENT, "keep_ratio must be in (0, 1] and "
                    "max_image_tokens >= 0");
    return FRUGAL_OK;
}

frugal_status frugal_generate_vl(frugal_context *c, const char *prompt,
                                 const frugal_vl_params *vp_in, const frugal_generate_params *p,
                                 frugal_vl_result *out, frugal_error *err) {
    memset(out, 0, sizeof *out);
    const fr_model *m = c->model->m;
    frugal_vl_params vp = vp_in ? *vp_in : frugal_vl_default_params();
    frugal_status st = vl_check_params(m, &vp, prompt, err);
    fr_sampling s;
    fr_gen_params gp;
    if (st == FRUGAL_OK) st = to_internal(p, &s, &gp, err);
    if (st != FRUGAL_OK) return st;
    fr_generate_device gd = frugal_context_device(c);
    const fr_vision_hparams *vh = &m->vision->hp;
    vl_work w = {0};
    fr_err e = {0};
    double t0 = fr_time_s();
    /* 1. pixel values and grids of every image */
    fr_vl_proc_cfg cfg;
    st = vl_proc_cfg(m, &vp, &cfg, err);
    w.grid = fr_xcalloc((size_t)vp.n_images * 3 + 1, sizeof(int32_t));
    for (int i = 0; i < vp.n_images && st == FRUGAL_OK; i++)
        st = vl_pixels(m, &cfg, &vp.images[i], i, &w.pix, w.grid + 3 * i, err);
    int64_t pd = fr_vision_patch_dim(vh), n_patches = (int64_t)(w.pix.len / sizeof(float)) / pd;
    /* 2. the tower: features of every image token */
    int64_t n_tok = 0;
    for (int i = 0; i < vp.n_images; i++) n_tok += fr_vl_image_tokens(w.grid + 3 * i, vh->merge);
    if (st == FRUGAL_OK && vp.n_images) {
        w.feats = fr_xmalloc((size_t)n_tok * vh->out_hidden * sizeof(float));
        if (fr_generate_vision(m, &gd, (const float *)w.pix.data, n_patches, w.grid, vp.n_images,
                               w.feats, &e))
            st = fail_fr(err, FRUGAL_ERR_INTERNAL, &e);
    }
    double vision_s = fr_time_s() - t0;
    /* 3. the prompt: template, pads, M-RoPE positions */
    if (st == FRUGAL_OK)
        st = vl_prompt_ids(m, prompt, vp.chat_template, w.grid, vp.n_images, &w.ids, &w.n_ids,
                           err);
    if (st == FRUGAL_OK && m->hp.n_ctx_train > 0 &&
        (int64_t)w.n_ids + p->max_tokens > m->hp.n_ctx_train)
        st = fail(err, FRUGAL_ERR_TOO_LARGE, "prompt (%zu tokens with its images) + max_tokens "
                  "(%d) exceeds the model's context of %d tokens", w.n_ids, p->max_tokens,
                  m->hp.n_ctx_train);
    if (st == FRUGAL_OK) {
        w.rpos = fr_xmalloc(3 * w.n_ids * sizeof(int32_t));
        int32_t delta;
        if (fr_vl_rope_index(w.ids, w.n_ids, m->hp.image_token_id, w.grid, vp.n_images,
                             vh->merge, w.rpos, &delta, &e))
            st = fail_fr(err, FRUGAL_ERR_INVALID_ARGUMENT, &e);
    }
    /* 3b. pruning: the kept image tokens with their original positions */
    int64_t n_kept = n_tok;
    float *features_before = NULL; /* the merger's output before pruning, when asked */
    if (st == FRUGAL_OK && vp.want_image_features && w.feats) {
        features_before = fr_xmalloc((size_t)n_tok * vh->out_hidden * sizeof(float));
        memcpy(features_before, w.feats, (size_t)n_tok * vh->out_hidden * sizeof(float));
    }
    if (st == FRUGAL_OK) st = vl_prune(m, &vp, prompt, &w, n_tok, &n_kept, err);
    /* 4. generation with the features in place of the image tokens */
    fr_generate_result r = {0};
    if (st == FRUGAL_OK) {
        w.last = vp.want_last_logits ? fr_xmalloc((size_t)m->hp.n_vocab * sizeof(float)) : NULL;
        fr_generate_mm mm = {.embd = w.feats, .n_embd_rows = w.feats ? n_kept : 0,
                             .image_token_id = m->hp.image_token_id, .rope_pos = w.rpos,
                             .last_logits = w.last};
        if (fr_generate_mm_on(m, &gd, w.ids, w.n_ids, &mm, &s, &gp, p->on_text, p->user_data,
                              &r, &e))
            st = fail_fr(err, c->kind == FR_BACKEND_CUDA ? FRUGAL_ERR_UNAVAILABLE
                                                         : FRUGAL_ERR_INTERNAL, &e);
    }
    if (st != FRUGAL_OK) {
        free(features_before);
        vl_work_free(&w);
        return st;
    }
    out->gen.ids = r.ids;
    out->gen.n_ids = r.n_ids;
    out->gen.text = r.text;
    out->gen.finish = r.finish == FR_FINISH_LENGTH ? FRUGAL_FINISH_LENGTH : FRUGAL_FINISH_STOP;
    out->gen.prefill_s = r.prefill_s;
    out->gen.decode_s = r.decode_s;
    out->vision_s = vision_s;
    out->prompt_ids = w.ids, w.ids = NULL;
    out->n_prompt_ids = w.n_ids;
    out->image_grid_thw = w.grid, w.grid = NULL;
    out->n_images = vp.n_images;
    out->image_tokens = n_tok;
    out->image_tokens_kept = n_kept;
    out->kept_index = w.kept, w.kept = NULL;
    out->n_vocab = m->hp.n_vocab;
    out->last_logits = w.last, w.last = NULL;
    out->patch_dim = pd;
    if (vp.want_pixel_values) {
        out->pixel_values = (float *)(void *)w.pix.data, w.pix.data = NULL;
        out->n_patches = n_patches;
    }
    out->feature_dim = vh->out_hidden;
    out->image_features = features_before;
    vl_work_free(&w);
    ok(err);
    return FRUGAL_OK;
}

void frugal_vl_result_free(frugal_vl_result *r) {
    if (!r) return;
    frugal_result_free(&r->gen);
    free(r->prompt_ids);
    free(r->image_grid_thw);
    free(r->last_logits);
    free(r->pixel_values);
    free(r->image_features);
    free(r->kept_index);
    memset(r, 0, sizeof *r);
}
