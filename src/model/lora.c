/* lora.c — PEFT LoRA adapters (lora.h): the config, the tensors, their checks against the model.
 */
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/safetensors.h"

#define LORA_MAX_CONFIG ((size_t)1 << 20)

static const char *const mod_names[FR_LORA_N] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};

const char *fr_lora_mod_name(fr_lora_mod m) {
    return (unsigned)m < FR_LORA_N ? mod_names[m] : "?";
}

static int mod_of(const char *s) {
    for (int i = 0; i < FR_LORA_N; i++)
        if (!strcmp(s, mod_names[i])) return i;
    return -1;
}

/* The projection sides of module m in a model of hp. */
static void sides(const fr_hparams *hp, int m, int *in, int *out) {
    const int q = hp->n_head * hp->head_dim, kv = hp->n_head_kv * hp->head_dim;
    const int E = hp->n_embd, F = hp->n_ff;
    switch (m) {
    case FR_LORA_Q: *in = E, *out = q; break;
    case FR_LORA_K:
    case FR_LORA_V: *in = E, *out = kv; break;
    case FR_LORA_O: *in = q, *out = E; break;
    case FR_LORA_GATE:
    case FR_LORA_UP: *in = E, *out = F; break;
    default: *in = F, *out = E; break;
    }
}

fr_lora *fr_lora_ref(const fr_lora *c) {
    fr_lora *a = (fr_lora *)c; /* the count is the one mutable field */
    atomic_fetch_add(&a->refs, 1);
    return a;
}

void fr_lora_free(fr_lora *a) {
    if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
    for (int i = 0; a->m && i < a->n_layer * FR_LORA_N; i++) {
        free(a->m[i].a);
        free(a->m[i].b);
    }
    free(a->m);
    free(a->dir);
    free(a);
}

/* A tensor name fit for a one-line message: control bytes as '?', at most cap - 1 bytes. */
static const char *printable(const char *in, char *out, size_t cap) {
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? '?' : in[i];
    out[i] = 0;
    return out;
}

/* A config key that must be absent, null, false, empty or equal to `ok` (a string). */
static int refuse_if_set(const cJSON *c, const char *key, const char *ok, const char *path,
                         fr_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !cJSON_GetArraySize(v)) return 0;
    if (ok && cJSON_IsString(v) && !strcmp(v->valuestring, ok)) return 0;
    fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: \"%s\" is not supported", path, key);
    return -1;
}

/* The config text (len bytes, named path in messages): rank, alpha, scale, and which modules
 * are targeted (targets[m] = 1). */
static int read_config(fr_lora *a, const char *txt, size_t len, const char *path,
                       int targets[FR_LORA_N], fr_err *err) {
    int rc = -1;
    cJSON *c = len <= LORA_MAX_CONFIG ? cJSON_ParseWithLength(txt, len) : NULL;
    if (!cJSON_IsObject(c)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: not a JSON object", path);
        goto done;
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(c, "peft_type");
    if (pt && (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA"))) {
        char v[64];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: peft_type %s is not LORA", path,
                    cJSON_IsString(pt) ? printable(pt->valuestring, v, sizeof v) : "(not a string)");
        goto done;
    }
    if (refuse_if_set(c, "use_dora", NULL, path, err) || refuse_if_set(c, "bias", "none", path, err) ||
        refuse_if_set(c, "fan_in_fan_out", NULL, path, err) ||
        refuse_if_set(c, "modules_to_save", NULL, path, err) ||
        refuse_if_set(c, "rank_pattern", NULL, path, err) ||
        refuse_if_set(c, "alpha_pattern", NULL, path, err) ||
        refuse_if_set(c, "layers_to_transform", NULL, path, err) ||
        refuse_if_set(c, "lora_bias", NULL, path, err) ||
        refuse_if_set(c, "exclude_modules", NULL, path, err) ||
        refuse_if_set(c, "layer_replication", NULL, path, err))
        goto done;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "r");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha");
    if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble != (int)r->valuedouble ||
        (al && !cJSON_IsNumber(al))) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: \"r\" must be a positive integer and "
                    "\"lora_alpha\" a number", path);
        goto done;
    }
    if (r->valuedouble > FR_LORA_MAX_RANK) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: rank %d is over %d", path,
                    (int)r->valuedouble, FR_LORA_MAX_RANK);
        goto done;
    }
    a->rank = (int)r->valuedouble;
    a->alpha = al ? (float)al->valuedouble : (float)a->rank;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "use_rslora");
    a->scale = cJSON_IsTrue(rs) ? a->alpha / sqrtf((float)a->rank) : a->alpha / (float)a->rank;
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(c, "target_modules");
    memset(targets, 0, FR_LORA_N * sizeof *targets);
    if (cJSON_IsString(tm) && !strcmp(tm->valuestring, "all-linear")) {
        for (int m = 0; m < FR_LORA_N; m++) targets[m] = 1;
    } else if (cJSON_IsArray(tm) && cJSON_GetArraySize(tm) > 0) {
        const cJSON *it;
        cJSON_ArrayForEach(it, tm) {
            int m = cJSON_IsString(it) ? mod_of(it->valuestring) : -1;
            if (m < 0) {
                char v[64];
                fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: target module %s is not one of "
                            "q_proj k_proj v_proj o_proj gate_proj up_proj down_proj", path,
                            cJSON_IsString(it) ? printable(it->valuestring, v, sizeof v)
                                               : "(not a string)");
                goto done;
            }
            targets[m] = 1;
        }
    } else {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: \"target_modules\" must be a list of "
                    "module names or \"all-linear\" (a regular expression is not supported)", path);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(c);
    return rc;
}

/* One stored tensor as rows x cols f32 (malloc'd), or NULL with err set. */
static float *to_f32(const fr_st_tensor *t, int rows, int cols, const char *where, fr_err *err) {
    char sh[64], nm[160];
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: %s has shape %s, expected [%d, %d]", where,
                    printable(t->name, nm, sizeof nm),
                    fr_st_shape_str(t->shape, t->n_dims, sh, sizeof sh), rows, cols);
        return NULL;
    }
    if (t->dtype != FR_DTYPE_F32 && t->dtype != FR_DTYPE_F16 && t->dtype != FR_DTYPE_BF16) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: %s is %s (F32, F16 or BF16 only)", where,
                    printable(t->name, nm, sizeof nm), printable(t->dtype_name, sh, sizeof sh));
        return NULL;
    }
    const size_t n = (size_t)rows * cols;
    float *o = fr_xmalloc(n * sizeof *o);
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == FR_DTYPE_F32) {
            memcpy(&o[i], t->data + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            o[i] = t->dtype == FR_DTYPE_F16 ? fr_f16_to_f32(h) : fr_bf16_to_f32(h);
        }
    }
    return o;
}

/* FNV-1a over bytes, continuing h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Which layer and module a tensor name names, and whether A (1) or B (2); 0 when it is not a
 * LoRA tensor of the decoder's projections, -1 when it is a LoRA tensor of something else. */
static int parse_name(const char *nm, int *layer, int *mod) {
    const char *pre = "base_model.model.model.layers.";
    const bool lora = strstr(nm, ".lora_A") || strstr(nm, ".lora_B");
    if (strncmp(nm, pre, strlen(pre))) return lora ? -1 : 0;
    const char *p = nm + strlen(pre);
    char *end;
    long l = strtol(p, &end, 10);
    if (end == p || *end != '.' || l < 0 || l > 100000) return lora ? -1 : 0;
    p = end + 1;
    if (!strncmp(p, "self_attn.", 10)) p += 10;
    else if (!strncmp(p, "mlp.", 4)) p += 4;
    else return lora ? -1 : 0;
    char m[32];
    size_t k = strcspn(p, ".");
    if (k >= sizeof m) return lora ? -1 : 0;
    memcpy(m, p, k);
    m[k] = 0;
    p += k;
    int which = !strcmp(p, ".lora_A.weight") || !strcmp(p, ".lora_A.default.weight")   ? 1
                : !strcmp(p, ".lora_B.weight") || !strcmp(p, ".lora_B.default.weight") ? 2
                                                                                        : 0;
    if (!which) return lora ? -1 : 0;
    if ((*mod = mod_of(m)) < 0) return -1;
    *layer = (int)l;
    return which;
}

/* Every tensor of the file into a (checked against hp and the targets). */
static int read_tensors(fr_lora *a, const fr_st_file *f, const fr_hparams *hp,
                        const int targets[FR_LORA_N], fr_err *err) {
    char nm[160];
    for (int i = 0; i < f->n_tensors; i++) {
        const fr_st_tensor *t = &f->tensors[i];
        int l = 0, m = 0, which = parse_name(t->name, &l, &m);
        printable(t->name, nm, sizeof nm);
        if (which < 0 || (which > 0 && l >= hp->n_layer)) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "LoRA %s: tensor %s adapts something other than "
                        "the decoder's projections (or a layer the model lacks)", f->path, nm);
            return -1;
        }
        if (!which) continue; /* not a LoRA tensor: ignored */
        if (!targets[m]) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: tensor %s is for %s, which "
                        "target_modules does not list", f->path, nm, mod_names[m]);
            return -1;
        }
        fr_lora_mat *x = &a->m[l * FR_LORA_N + m];
        int in, out;
        sides(hp, m, &in, &out);
        float **dst = which == 1 ? &x->a : &x->b;
        if (*dst) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: tensor %s given twice", f->path, nm);
            return -1;
        }
        if (!(*dst = which == 1 ? to_f32(t, a->rank, in, f->path, err)
                                : to_f32(t, out, a->rank, f->path, err)))
            return -1;
        x->r = a->rank, x->in = in, x->out = out;
    }
    /* each projection: both halves or neither; at least one adapted */
    int any = 0;
    for (int i = 0; i < a->n_layer * FR_LORA_N; i++) {
        fr_lora_mat *x = &a->m[i];
        if (!x->a != !x->b) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: layer %d %s has lora_%s but not lora_%s",
                        f->path, i / FR_LORA_N, mod_names[i % FR_LORA_N], x->a ? "A" : "B",
                        x->a ? "B" : "A");
            return -1;
        }
        any |= x->a != NULL;
    }
    if (!any) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA %s: no LoRA tensors of the decoder's projections",
                    f->path);
        return -1;
    }
    return 0;
}

/* The adapter from its config text and its tensors (f parsed), for a model of hp. */
static fr_lora *lora_from(const char *where, const char *name, const char *cfg, size_t cfg_len,
                          const char *cfg_path, const fr_st_file *f, const fr_hparams *hp,
                          fr_err *err) {
    if (!name || !*name || strlen(name) >= FR_LORA_MAX_NAME || hp->n_layer < 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA: a name of 1 to %d bytes is needed",
                    FR_LORA_MAX_NAME - 1);
        return NULL;
    }
    fr_lora *a = fr_xcalloc(1, sizeof *a);
    atomic_init(&a->refs, 1);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->dir = fr_xstrdup(where);
    a->n_layer = hp->n_layer;
    a->m = fr_xcalloc((size_t)hp->n_layer * FR_LORA_N, sizeof *a->m);
    int targets[FR_LORA_N];
    if (read_config(a, cfg, cfg_len, cfg_path, targets, err) ||
        read_tensors(a, f, hp, targets, err)) {
        fr_lora_free(a);
        return NULL;
    }
    uint64_t h = fnv(0xcbf29ce484222325ull, &a->rank, sizeof a->rank);
    h = fnv(h, &a->scale, sizeof a->scale);
    for (int i = 0; i < a->n_layer * FR_LORA_N; i++) {
        const fr_lora_mat *x = &a->m[i];
        if (!x->a) continue;
        h = fnv(h, &i, sizeof i);
        h = fnv(h, x->a, (size_t)x->r * x->in * sizeof *x->a);
        h = fnv(h, x->b, (size_t)x->out * x->r * sizeof *x->b);
        a->bytes += ((size_t)x->r * x->in + (size_t)x->out * x->r) * sizeof(float);
    }
    a->hash = h | 1; /* never 0 */
    return a;
}

fr_lora *fr_lora_parse(const char *cfg, size_t cfg_len, const uint8_t *st, size_t st_len,
                       const char *name, const fr_hparams *hp, fr_err *err) {
    fr_st_file f = {0};
    if (fr_st_parse(&f, "adapter_model.safetensors", st, st_len, err)) return NULL;
    fr_lora *a = lora_from("(memory)", name, cfg, cfg_len, "adapter_config.json", &f, hp, err);
    fr_st_close(&f);
    return a;
}

fr_lora *fr_lora_load(const char *dir, const char *name, const fr_hparams *hp, fr_err *err) {
    if (!dir) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA: no folder given");
        return NULL;
    }
    char *cp = fr_path_join(dir, "adapter_config.json");
    char *st = fr_path_join(dir, "adapter_model.safetensors");
    size_t len = 0;
    fr_lora *a = NULL;
    fr_st_file f = {0};
    char *txt = fr_read_file(cp, LORA_MAX_CONFIG, &len, err);
    if (!txt) {
        fr_err_prefix(err, "LoRA");
    } else if (!fr_path_exists(st)) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "LoRA %s is missing (a PEFT adapter folder holds "
                    "adapter_config.json and adapter_model.safetensors)", st);
    } else if (!fr_st_open(&f, st, err)) {
        a = lora_from(dir, name, txt, len, cp, &f, hp, err);
    }
    fr_st_close(&f);
    free(txt);
    free(st);
    free(cp);
    return a;
}
