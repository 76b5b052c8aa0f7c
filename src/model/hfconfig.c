/* hfconfig.c — see hfconfig.h.
 *
 * Design: each file is read whole (with a size cap) and parsed with cJSON; every field is
 * type- and range-checked, and a JSON null counts as absent. Messages name the file and the key.
 */
#include "model/hfconfig.h"

#include "model/quote.h"
#include "model/vision.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_MAX_JSON (64u * 1024u * 1024u) /* config / tokenizer_config size cap */

static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* An integer field in [lo, hi]: 0 found, 1 absent (*out = def), -1 error. */
static int get_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t def,
                   int64_t *out, const char *path, fr_err *err) {
    const cJSON *v = get(o, key);
    if (!v) {
        *out = def;
        return 1;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        fr_err_set(err, "%s: '%s' must be an integer in [%lld, %lld]", path, key, (long long)lo,
                   (long long)hi);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

static int get_req_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int *out,
                       const char *path, fr_err *err) {
    int64_t v;
    int rc = get_int(o, key, lo, hi, 0, &v, path, err);
    if (rc < 0) return -1;
    if (rc == 1) {
        fr_err_set(err, "%s: missing '%s'", path, key);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A positive finite number: 0 found, 1 absent (*out = def), -1 error. */
static int get_pos(const cJSON *o, const char *key, double def, double *out, const char *path,
                   fr_err *err) {
    const cJSON *v = get(o, key);
    if (!v) {
        *out = def;
        return 1;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
        fr_err_set(err, "%s: '%s' must be a positive number", path, key);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

int fr_rope_llama3_factors(double theta, int head_dim, double factor, double lo, double hi,
                           double old_ctx, float *out) {
    if (!(theta > 0) || head_dim < 2 || !(factor > 0) || !(lo > 0) || !(hi > lo) ||
        !(old_ctx > 0) || !isfinite(theta) || !isfinite(factor) || !isfinite(hi) ||
        !isfinite(old_ctx))
        return -1;
    const double pi = 3.14159265358979323846;
    double lo_wl = old_ctx / lo, hi_wl = old_ctx / hi;
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow(theta, (double)(2 * i) / head_dim);
        double wl = 2 * pi / freq;
        double f;
        if (wl < hi_wl) {
            f = 1.0;
        } else if (wl > lo_wl) {
            f = factor;
        } else {
            double smooth = (old_ctx / wl - lo) / (hi - lo);
            f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        out[i] = (float)f;
    }
    return 0;
}

/* bos_token_id / eos_token_id: an int, a list of ints, or null. Returns the count read into ids
 * (at most cap), or -1 on a bad value. */
static int get_ids(const cJSON *o, const char *key, int *ids, int cap, const char *path,
                   fr_err *err) {
    const cJSON *v = get(o, key);
    if (!v) return 0;
    int n = 0;
    if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX ||
                e->valuedouble != floor(e->valuedouble)) {
                fr_err_set(err, "%s: '%s' must hold non-negative integer token ids", path, key);
                return -1;
            }
            if (n < cap) ids[n++] = (int)e->valuedouble;
        }
        return n;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > INT32_MAX ||
        v->valuedouble != floor(v->valuedouble)) {
        fr_err_set(err, "%s: '%s' must be a non-negative integer token id or a list of them",
                   path, key);
        return -1;
    }
    ids[0] = (int)v->valuedouble;
    return 1;
}

/* M-RoPE sections (Qwen2-VL / Qwen2.5-VL): three non-negative ints summing to head_dim/2; HF's
 * default [16, 24, 24] when absent. */
static int parse_mrope(fr_hf_config *c, const cJSON *rp, const char *rp_key, const char *path,
                       fr_err *err) {
    int sec[3] = {16, 24, 24};
    const cJSON *ms = rp ? get(rp, "mrope_section") : NULL;
    if (ms) {
        bool ok = cJSON_IsArray(ms) && cJSON_GetArraySize(ms) == 3;
        for (int i = 0; ok && i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(ms, i);
            ok = cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble <= 4096 &&
                 e->valuedouble == floor(e->valuedouble);
            if (ok) sec[i] = (int)e->valuedouble;
        }
        if (!ok) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s.mrope_section' must be a list of three non-negative integers",
                       path, rp_key);
            return -1;
        }
    }
    if (sec[0] + sec[1] + sec[2] != c->hp.head_dim / 2) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: mrope_section [%d, %d, %d] does not sum to head_dim / 2 = %d", path,
                   sec[0], sec[1], sec[2], c->hp.head_dim / 2);
        return -1;
    }
    memcpy(c->hp.mrope_section, sec, sizeof sec);
    return 0;
}

/* RoPE theta and scaling from either layout; `def_theta` when none is given. `vl`: a Qwen-VL text
 * config, whose rope type "mrope" (or "default") carries mrope_section. */
static int parse_rope(fr_hf_config *c, const cJSON *root, double def_theta, bool vl,
                      const char *path, fr_err *err) {
    const cJSON *rp = get(root, "rope_parameters");
    const char *rp_key = "rope_parameters";
    if (!cJSON_IsObject(rp)) {
        rp = get(root, "rope_scaling");
        rp_key = "rope_scaling";
    }
    if (rp && !cJSON_IsObject(rp)) {
        fr_err_set(err, "%s: '%s' must be an object", path, rp_key);
        return -1;
    }
    if (rp && !get(rp, "rope_type") && !get(rp, "type") && !get(rp, "rope_theta"))
        for (const cJSON *e = rp->child; e; e = e->next)
            if (cJSON_IsObject(e)) { /* {"full_attention": {...}, ...} (transformers 5) */
                fr_err_set(err, "%s: per-layer-type '%s' is not supported", path, rp_key);
                return -1;
            }
    double theta;
    int rc = get_pos(root, "rope_theta", def_theta, &theta, path, err);
    if (rc < 0) return -1;
    if (rc == 1 && rp && get_pos(rp, "rope_theta", def_theta, &theta, path, err) < 0) return -1;
    c->hp.rope_theta = (float)theta;
    if (vl && parse_mrope(c, rp, rp_key, path, err) != 0) return -1;
    if (!rp) return 0;
    const cJSON *ty = get(rp, "rope_type");
    if (!ty) ty = get(rp, "type");
    if (ty && !cJSON_IsString(ty)) {
        fr_err_set(err, "%s: '%s.rope_type' must be a string", path, rp_key);
        return -1;
    }
    const char *type = ty ? ty->valuestring : "default";
    const cJSON *prf = get(rp, "partial_rotary_factor");
    if (prf && (!cJSON_IsNumber(prf) || prf->valuedouble != 1.0)) {
        fr_err_set(err, "%s: partial_rotary_factor other than 1 is not supported", path);
        return -1;
    }
    if (!strcmp(type, "default") || (vl && !strcmp(type, "mrope"))) return 0;
    if (vl || strcmp(type, "llama3")) {
        char q[80];
        fr_err_set(err, "%s: unsupported rope scaling type '%s' in '%s' (supported: %s)", path,
                   fr_quotez(type, q, sizeof q), rp_key, vl ? "default, mrope" : "default, llama3");
        return -1;
    }
    static const char *keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                 "original_max_position_embeddings"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        int r = get_pos(rp, keys[i], 0, &v[i], path, err);
        if (r < 0) return -1;
        if (r == 1) {
            fr_err_set(err, "%s: llama3 rope scaling needs '%s.%s'", path, rp_key, keys[i]);
            return -1;
        }
    }
    c->rope_freq_factors = fr_xmalloc((size_t)(c->hp.head_dim / 2) * sizeof(float));
    if (fr_rope_llama3_factors(theta, c->hp.head_dim, v[0], v[1], v[2], v[3],
                               c->rope_freq_factors) != 0) {
        fr_err_set(err, "%s: invalid llama3 rope scaling parameters (need high_freq_factor > "
                        "low_freq_factor > 0)", path);
        return -1;
    }
    return 0;
}

/* The JSON object in json[0..len), or, when json is NULL, in the file at path (at most
 * HF_MAX_JSON bytes). The parsed object (caller frees), or NULL with err set ("path: invalid
 * JSON", "path: not a JSON object", or the read error). */
static cJSON *json_object(const char *json, size_t len, const char *path, fr_err *err) {
    char *txt = NULL;
    if (!json) {
        txt = fr_read_file(path, HF_MAX_JSON, &len, err);
        if (!txt) return NULL;
        json = txt;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    free(txt);
    if (!cJSON_IsObject(root)) {
        fr_err_set(err, "%s: %s", path, root ? "not a JSON object" : "invalid JSON");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* The architectures this loader knows: HF class name, model_type, text arch, vision kind (-1 none). */
static const struct hf_arch {
    const char *cls, *model_type;
    fr_arch arch;
    int vision;
} hf_archs[] = {
    {"Qwen2ForCausalLM", "qwen2", FR_ARCH_QWEN2, -1},
    {"LlamaForCausalLM", "llama", FR_ARCH_LLAMA, -1},
    {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", FR_ARCH_QWEN2, FR_VISION_QWEN25VL},
    {"Qwen2VLForConditionalGeneration", "qwen2_vl", FR_ARCH_QWEN2, FR_VISION_QWEN2VL},
};
#define HF_ARCH_LIST "Qwen2ForCausalLM, LlamaForCausalLM, Qwen2_5_VLForConditionalGeneration, " \
                     "Qwen2VLForConditionalGeneration"

/* The int `key` of o, else of o2 (may be NULL), else def; in [lo, hi]. 0 or -1. */
static int get_int2(const cJSON *o, const cJSON *o2, const char *key, int64_t lo, int64_t hi,
                    int64_t def, int *out, const char *path, fr_err *err) {
    int64_t v;
    int rc = get_int(o, key, lo, hi, def, &v, path, err);
    if (rc == 1 && o2) rc = get_int(o2, key, lo, hi, def, &v, path, err);
    if (rc < 0) return -1;
    *out = (int)v;
    return 0;
}

/* vision_config of a Qwen2-VL / Qwen2.5-VL config.json into c->vision. Absent fields take the
 * defaults of transformers' Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig (a config saved by
 * save_pretrained may omit fields equal to them). */
static int parse_vision(fr_hf_config *c, const cJSON *root, fr_vision_kind kind, const char *path,
                        fr_err *err) {
    const cJSON *vc = get(root, "vision_config");
    if (!cJSON_IsObject(vc)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing 'vision_config' (an object)", path);
        return -1;
    }
    fr_vision_hparams *v = c->vision = fr_xcalloc(1, sizeof *c->vision);
    v->kind = kind;
    v->eps = 1e-6f; /* hard-coded in HF's vision blocks and merger */
    bool q25 = kind == FR_VISION_QWEN25VL;
    const char *act_want = q25 ? "silu" : "quick_gelu";
    const cJSON *act = get(vc, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, act_want))) {
        char q[64];
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.hidden_act '%s' is not supported (supported: %s)", path,
                   fr_quotez(cJSON_IsString(act) ? act->valuestring : "?", q, sizeof q), act_want);
        return -1;
    }
    if (get_int2(vc, NULL, "depth", 1, FR_VISION_MAX_DEPTH, 32, &v->depth, path, err) ||
        get_int2(vc, NULL, "num_heads", 1, 1024, 16, &v->n_head, path, err) ||
        get_int2(vc, NULL, "in_channels", 1, 16, 3, &v->in_chans, path, err) ||
        get_int2(vc, NULL, "patch_size", 1, 1024, 14, &v->patch, path, err) ||
        get_int2(vc, NULL, "spatial_merge_size", 1, 64, 2, &v->merge, path, err) ||
        get_int2(vc, NULL, "temporal_patch_size", 1, 64, 2, &v->temporal, path, err))
        return -1;
    if (!get(vc, "in_channels") &&
        get_int2(vc, NULL, "in_chans", 1, 16, 3, &v->in_chans, path, err))
        return -1;
    if (q25) {
        if (get_int2(vc, NULL, "hidden_size", 1, 1 << 16, 3584, &v->hidden, path, err) ||
            get_int2(vc, NULL, "intermediate_size", 1, 1 << 20, 3420, &v->n_ff, path, err) ||
            get_int2(vc, NULL, "out_hidden_size", 1, 1 << 20, 3584, &v->out_hidden, path, err) ||
            get_int2(vc, NULL, "window_size", 1, 1 << 16, 112, &v->window_size, path, err) ||
            get_int2(vc, NULL, "tokens_per_second", 0, 1 << 20, 4, &v->tokens_per_second, path,
                     err))
            return -1;
        if (v->window_size / v->merge / v->patch < 1) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.window_size %d is smaller than patch_size x "
                            "spatial_merge_size (%d)", path, v->window_size, v->patch * v->merge);
            return -1;
        }
        const cJSON *fa = get(vc, "fullatt_block_indexes");
        static const int def_fa[] = {7, 15, 23, 31};
        if (fa && !cJSON_IsArray(fa)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.fullatt_block_indexes must be a list", path);
            return -1;
        }
        if (!fa) {
            for (size_t i = 0; i < FR_ARRAY_LEN(def_fa); i++)
                if (def_fa[i] < v->depth) v->fullatt[def_fa[i]] = true;
        }
        for (const cJSON *e = fa ? fa->child : NULL; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble != floor(e->valuedouble)) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.fullatt_block_indexes must hold non-negative "
                                "integers", path);
                return -1;
            }
            /* HF tests `layer_num in fullatt_block_indexes`: an index past depth selects nothing */
            if (e->valuedouble < v->depth) v->fullatt[(int)e->valuedouble] = true;
        }
        const cJSON *rp = get(vc, "rope_parameters");
        double theta = 10000.0;
        if (rp && (!cJSON_IsObject(rp) ||
                   get_pos(rp, "rope_theta", 10000.0, &theta, path, err) < 0)) {
            if (!cJSON_IsObject(rp))
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.rope_parameters must be an object", path);
            return -1;
        }
        const cJSON *rt = rp ? get(rp, "rope_type") : NULL;
        if (rt && (!cJSON_IsString(rt) || (strcmp(rt->valuestring, "axial") &&
                                           strcmp(rt->valuestring, "default")))) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.rope_parameters.rope_type must be 'axial'", path);
            return -1;
        }
        v->rope_theta = (float)theta;
    } else {
        double ratio;
        if (get_int2(vc, NULL, "embed_dim", 1, 1 << 16, 1280, &v->hidden, path, err) ||
            get_int2(vc, NULL, "hidden_size", 1, 1 << 20, 3584, &v->out_hidden, path, err) ||
            get_pos(vc, "mlp_ratio", 4.0, &ratio, path, err) < 0)
            return -1;
        double ff = (double)v->hidden * ratio; /* int(embed_dim * mlp_ratio) */
        if (ff < 1 || ff > (1 << 20)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision_config.mlp_ratio %g gives an MLP width out of range", path,
                       ratio);
            return -1;
        }
        v->n_ff = (int)ff;
        v->window_size = 0;
        for (int b = 0; b < v->depth; b++) v->fullatt[b] = true;
        v->rope_theta = 10000.0f;
    }
    if (v->hidden % v->n_head || (v->hidden / v->n_head) % 4) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision hidden size %d over %d heads must give a head dimension that "
                        "is a multiple of 4", path, v->hidden, v->n_head);
        return -1;
    }
    v->head_dim = v->hidden / v->n_head;
    if (v->head_dim > 4096) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: vision head dimension %d is too large", path,
                    v->head_dim);
        return -1;
    }
    if (v->out_hidden != c->hp.n_embd) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: the vision merger's output width %d differs from the text model's "
                        "hidden_size %d", path, v->out_hidden, c->hp.n_embd);
        return -1;
    }
    return 0;
}

int fr_hf_config_parse(fr_hf_config *c, const char *json, size_t len, const char *path,
                       fr_err *err) {
    memset(c, 0, sizeof *c);
    fr_hparams *hp = &c->hp;
    hp->bos_id = hp->eos_id = -1;
    for (int i = 0; i < 4; i++) hp->eos_ids[i] = -1;
    hp->image_token_id = hp->video_token_id = hp->vision_start_id = hp->vision_end_id = -1;
    c->tie = -1;
    cJSON *root = json_object(json, len, path, err);
    if (!root) return -1;
    int rc = -1;
    const cJSON *archs = get(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const cJSON *mt = get(root, "model_type");
    const struct hf_arch *ha = NULL;
    const char *arch = cJSON_IsString(a0) ? a0->valuestring : NULL;
    for (size_t i = 0; i < FR_ARRAY_LEN(hf_archs) && !ha; i++) {
        if (arch ? !strcmp(arch, hf_archs[i].cls)
                 : cJSON_IsString(mt) && !strcmp(mt->valuestring, hf_archs[i].model_type))
            ha = &hf_archs[i];
    }
    if (!arch && !ha && cJSON_IsString(mt)) arch = mt->valuestring;
    if (!arch && !ha) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: no 'architectures' (supported: " HF_ARCH_LIST ")",
                    path);
        goto done;
    }
    if (!ha) {
        char q[128];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: unsupported architecture '%s' (supported: "
                    HF_ARCH_LIST ")", path, fr_quotez(arch, q, sizeof q));
        goto done;
    }
    hp->arch = ha->arch;
    bool vl = ha->vision >= 0;
    /* the text model's fields: text_config (transformers 5) or the top level (older configs) */
    const cJSON *tc = root;
    if (vl && get(root, "text_config")) {
        tc = get(root, "text_config");
        if (!cJSON_IsObject(tc)) {
            fr_err_set(err, "%s: 'text_config' must be an object", path);
            goto done;
        }
    }
    const cJSON *qc = get(root, "quantization_config");
    if (!qc) qc = get(tc, "quantization_config");
    if (qc) {
        const cJSON *qm = cJSON_IsObject(qc) ? get(qc, "quant_method") : NULL;
        char q[64];
        fr_err_set(err, "%s: quantized HF checkpoints (quant_method '%s') are not supported; "
                        "use the unquantized checkpoint or a GGUF file", path,
                   fr_quotez(cJSON_IsString(qm) ? qm->valuestring : "?", q, sizeof q));
        goto done;
    }
    const cJSON *act = get(tc, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu"))) {
        char q[64];
        fr_err_set(err, "%s: hidden_act '%s' is not supported (supported: silu)", path,
                   fr_quotez(cJSON_IsString(act) ? act->valuestring : "?", q, sizeof q));
        goto done;
    }
    const cJSON *mb = get(tc, "mlp_bias");
    if (cJSON_IsTrue(mb)) {
        fr_err_set(err, "%s: mlp_bias is not supported", path);
        goto done;
    }
    if (get_req_int(tc, "hidden_size", 1, 1 << 20, &hp->n_embd, path, err) ||
        get_req_int(tc, "num_hidden_layers", 1, 4096, &hp->n_layer, path, err) ||
        get_req_int(tc, "num_attention_heads", 1, 4096, &hp->n_head, path, err) ||
        get_req_int(tc, "intermediate_size", 1, 1 << 22, &hp->n_ff, path, err) ||
        get_req_int(tc, "vocab_size", 1, 1 << 24, &hp->n_vocab, path, err))
        goto done;
    int64_t v;
    /* transformers' Qwen2-VL / Qwen2.5-VL text configs default to 8 key/value heads */
    if (get_int(tc, "num_key_value_heads", 1, hp->n_head, vl ? 8 : hp->n_head, &v, path, err) < 0)
        goto done;
    hp->n_head_kv = (int)v;
    if (hp->n_head % hp->n_head_kv) {
        fr_err_set(err, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                   path, hp->n_head, hp->n_head_kv);
        goto done;
    }
    if (get_int(tc, "head_dim", 2, 4096, hp->n_embd / hp->n_head, &v, path, err) < 0) goto done;
    hp->head_dim = (int)v;
    if (hp->head_dim < 2 || hp->head_dim % 2) {
        fr_err_set(err, "%s: head_dim %d must be even and >= 2", path, hp->head_dim);
        goto done;
    }
    if (get_int(tc, "max_position_embeddings", 1, INT32_MAX,
                hp->arch == FR_ARCH_QWEN2 ? 32768 : 2048, &v, path, err) < 0)
        goto done;
    hp->n_ctx_train = (int)v;
    double eps;
    if (get_pos(tc, "rms_norm_eps", vl ? 1e-5 : 1e-6, &eps, path, err) < 0) goto done;
    hp->rms_eps = (float)eps;
    const cJSON *tie = get(root, "tie_word_embeddings");
    if (!tie) tie = get(tc, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie)) {
        fr_err_set(err, "%s: 'tie_word_embeddings' must be true or false", path);
        goto done;
    }
    c->tie = tie ? cJSON_IsTrue(tie) : vl ? 0 : -1; /* the VL configs default to untied */
    hp->tied_embeddings = c->tie == 1;
    hp->rope_interleaved = false;
    if (parse_rope(c, tc, vl ? 1000000.0 : 10000.0, vl, path, err) != 0) goto done;
    const cJSON *sw = get(tc, "use_sliding_window");
    if (cJSON_IsTrue(sw))
        fr_warn("%s: use_sliding_window is set; sliding-window attention is not implemented, "
                "all layers attend to the full context", path);
    int ids[8];
    const cJSON *idsrc = get(tc, "bos_token_id") ? tc : root;
    int n = get_ids(idsrc, "bos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    if (n > 0) hp->bos_id = ids[0];
    idsrc = get(tc, "eos_token_id") ? tc : root;
    n = get_ids(idsrc, "eos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    for (int i = 0; i < n; i++) {
        if (hp->eos_id < 0) hp->eos_id = ids[i];
        else fr_hparams_add_eos(hp, ids[i]);
    }
    if (vl) {
        /* transformers' defaults when absent */
        if (get_int2(root, tc, "image_token_id", 0, INT32_MAX, 151655, &hp->image_token_id, path,
                     err) ||
            get_int2(root, tc, "video_token_id", 0, INT32_MAX, 151656, &hp->video_token_id, path,
                     err) ||
            get_int2(root, tc, "vision_start_token_id", 0, INT32_MAX, 151652,
                     &hp->vision_start_id, path, err) ||
            get_int2(root, tc, "vision_end_token_id", 0, INT32_MAX, 151653, &hp->vision_end_id,
                     path, err))
            goto done;
        if (parse_vision(c, root, (fr_vision_kind)ha->vision, path, err) != 0) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) fr_hf_config_free(c);
    return rc;
}

/* generation_config.json: its bos/eos take precedence over config.json's. */
static int load_generation_config(fr_hf_config *c, const char *path, fr_err *err) {
    cJSON *root = json_object(NULL, 0, path, err);
    if (!root) return -1;
    int rc = -1, ids[8];
    fr_hparams *hp = &c->hp;
    int n = get_ids(root, "bos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    if (n > 0) hp->bos_id = ids[0];
    n = get_ids(root, "eos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    if (n > 0) {
        int old[5] = {hp->eos_id, hp->eos_ids[0], hp->eos_ids[1], hp->eos_ids[2], hp->eos_ids[3]};
        hp->eos_id = ids[0];
        for (int i = 0; i < 4; i++) hp->eos_ids[i] = -1;
        for (int i = 1; i < n; i++) fr_hparams_add_eos(hp, ids[i]);
        for (int i = 0; i < 5; i++) fr_hparams_add_eos(hp, old[i]);
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

/* A special token in tokenizer_config.json: a string, {"content": "..."}, or null. */
static int token_str(const cJSON *root, const char *key, char **out, const char *path,
                     fr_err *err) {
    const cJSON *v = get(root, key);
    if (!v) return 0;
    if (cJSON_IsObject(v)) v = get(v, "content");
    if (!cJSON_IsString(v)) {
        fr_err_set(err, "%s: '%s' must be a string or an object with a string 'content'", path,
                   key);
        return -1;
    }
    *out = fr_xstrdup(v->valuestring);
    return 0;
}

static int load_tokenizer_config(fr_hf_config *c, const char *path, fr_err *err) {
    cJSON *root = json_object(NULL, 0, path, err);
    if (!root) return -1;
    int rc = -1;
    if (token_str(root, "bos_token", &c->bos_token_str, path, err) ||
        token_str(root, "eos_token", &c->eos_token_str, path, err))
        goto done;
    const cJSON *ct = get(root, "chat_template");
    if (ct && !c->chat_template) {
        if (cJSON_IsString(ct)) {
            c->chat_template = fr_xstrdup(ct->valuestring);
        } else if (cJSON_IsArray(ct)) {
            /* [{"name": ..., "template": ...}]: "default", else the first */
            const cJSON *pick = NULL;
            for (const cJSON *e = ct->child; e; e = e->next) {
                const cJSON *nm = get(e, "name"), *tp = get(e, "template");
                if (!cJSON_IsString(tp)) continue;
                if (!pick) pick = tp;
                if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default")) {
                    pick = tp;
                    break;
                }
            }
            if (pick) c->chat_template = fr_xstrdup(pick->valuestring);
        } else {
            fr_err_set(err, "%s: 'chat_template' must be a string or a list of {name, template}",
                       path);
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int fr_hf_config_load(fr_hf_config *c, const char *dir, fr_err *err) {
    memset(c, 0, sizeof *c);
    char *p = fr_path_join(dir, "config.json");
    size_t len;
    char *txt = fr_read_file(p, HF_MAX_JSON, &len, err);
    int rc = -1;
    if (!txt) {
        free(p);
        return -1;
    }
    rc = fr_hf_config_parse(c, txt, len, p, err);
    free(txt);
    free(p);
    if (rc) return -1;
    p = fr_path_join(dir, "generation_config.json");
    if (fr_path_exists(p) && load_generation_config(c, p, err) != 0) goto fail;
    free(p);
    p = fr_path_join(dir, "chat_template.jinja");
    if (fr_path_exists(p)) {
        c->chat_template = fr_read_file(p, HF_MAX_JSON, &len, err);
        if (!c->chat_template) goto fail;
    }
    free(p);
    p = fr_path_join(dir, "tokenizer_config.json");
    if (fr_path_exists(p) && load_tokenizer_config(c, p, err) != 0) goto fail;
    free(p);
    return 0;
fail:
    free(p);
    fr_hf_config_free(c);
    return -1;
}

void fr_hf_config_free(fr_hf_config *c) {
    free(c->rope_freq_factors);
    free(c->vision);
    free(c->chat_template);
    free(c->bos_token_str);
    free(c->eos_token_str);
    memset(c, 0, sizeof *c);
}
