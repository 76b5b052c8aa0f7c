/* hfconfig.c — see hfconfig.h.
 *
 * Design: each file is read whole (with a size cap) and parsed with cJSON; every field is
 * type- and range-checked, and a JSON null counts as absent. Messages name the file and the key.
 */
#include "model/hfconfig.h"

#include "model/quote.h"

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

/* RoPE theta and scaling from either layout. */
static int parse_rope(fr_hf_config *c, const cJSON *root, const char *path, fr_err *err) {
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
    int rc = get_pos(root, "rope_theta", 10000.0, &theta, path, err);
    if (rc < 0) return -1;
    if (rc == 1 && rp && get_pos(rp, "rope_theta", 10000.0, &theta, path, err) < 0) return -1;
    c->hp.rope_theta = (float)theta;
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
    if (!strcmp(type, "default")) return 0;
    if (strcmp(type, "llama3")) {
        char q[80];
        fr_err_set(err, "%s: unsupported rope scaling type '%s' in '%s' (supported: default, "
                        "llama3)", path, fr_quotez(type, q, sizeof q), rp_key);
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
    const char *arch = cJSON_IsString(a0) ? a0->valuestring : NULL;
    if (!arch && cJSON_IsString(mt)) {
        if (!strcmp(mt->valuestring, "qwen2")) arch = "Qwen2ForCausalLM";
        else if (!strcmp(mt->valuestring, "llama")) arch = "LlamaForCausalLM";
        else arch = mt->valuestring;
    }
    if (!arch) {
        fr_err_set(err, "%s: no 'architectures' (supported: Qwen2ForCausalLM, LlamaForCausalLM)",
                   path);
        goto done;
    }
    if (!strcmp(arch, "Qwen2ForCausalLM")) {
        hp->arch = FR_ARCH_QWEN2;
    } else if (!strcmp(arch, "LlamaForCausalLM")) {
        hp->arch = FR_ARCH_LLAMA;
    } else {
        char q[128];
        fr_err_set(err, "%s: unsupported architecture '%s' (supported: Qwen2ForCausalLM, "
                        "LlamaForCausalLM)", path, fr_quotez(arch, q, sizeof q));
        goto done;
    }
    const cJSON *qc = get(root, "quantization_config");
    if (qc) {
        const cJSON *qm = cJSON_IsObject(qc) ? get(qc, "quant_method") : NULL;
        char q[64];
        fr_err_set(err, "%s: quantized HF checkpoints (quant_method '%s') are not supported; "
                        "use the unquantized checkpoint or a GGUF file", path,
                   fr_quotez(cJSON_IsString(qm) ? qm->valuestring : "?", q, sizeof q));
        goto done;
    }
    const cJSON *act = get(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu"))) {
        char q[64];
        fr_err_set(err, "%s: hidden_act '%s' is not supported (supported: silu)", path,
                   fr_quotez(cJSON_IsString(act) ? act->valuestring : "?", q, sizeof q));
        goto done;
    }
    const cJSON *mb = get(root, "mlp_bias");
    if (cJSON_IsTrue(mb)) {
        fr_err_set(err, "%s: mlp_bias is not supported", path);
        goto done;
    }
    if (get_req_int(root, "hidden_size", 1, 1 << 20, &hp->n_embd, path, err) ||
        get_req_int(root, "num_hidden_layers", 1, 4096, &hp->n_layer, path, err) ||
        get_req_int(root, "num_attention_heads", 1, 4096, &hp->n_head, path, err) ||
        get_req_int(root, "intermediate_size", 1, 1 << 22, &hp->n_ff, path, err) ||
        get_req_int(root, "vocab_size", 1, 1 << 24, &hp->n_vocab, path, err))
        goto done;
    int64_t v;
    if (get_int(root, "num_key_value_heads", 1, hp->n_head, hp->n_head, &v, path, err) < 0)
        goto done;
    hp->n_head_kv = (int)v;
    if (hp->n_head % hp->n_head_kv) {
        fr_err_set(err, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                   path, hp->n_head, hp->n_head_kv);
        goto done;
    }
    if (get_int(root, "head_dim", 2, 4096, hp->n_embd / hp->n_head, &v, path, err) < 0) goto done;
    hp->head_dim = (int)v;
    if (hp->head_dim < 2 || hp->head_dim % 2) {
        fr_err_set(err, "%s: head_dim %d must be even and >= 2", path, hp->head_dim);
        goto done;
    }
    if (get_int(root, "max_position_embeddings", 1, INT32_MAX,
                hp->arch == FR_ARCH_QWEN2 ? 32768 : 2048, &v, path, err) < 0)
        goto done;
    hp->n_ctx_train = (int)v;
    double eps;
    if (get_pos(root, "rms_norm_eps", 1e-6, &eps, path, err) < 0) goto done;
    hp->rms_eps = (float)eps;
    const cJSON *tie = get(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie)) {
        fr_err_set(err, "%s: 'tie_word_embeddings' must be true or false", path);
        goto done;
    }
    c->tie = tie ? cJSON_IsTrue(tie) : -1;
    hp->tied_embeddings = c->tie == 1;
    hp->rope_interleaved = false;
    if (parse_rope(c, root, path, err) != 0) goto done;
    const cJSON *sw = get(root, "use_sliding_window");
    if (cJSON_IsTrue(sw))
        fr_warn("%s: use_sliding_window is set; sliding-window attention is not implemented, "
                "all layers attend to the full context", path);
    int ids[8];
    int n = get_ids(root, "bos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    if (n > 0) hp->bos_id = ids[0];
    n = get_ids(root, "eos_token_id", ids, 8, path, err);
    if (n < 0) goto done;
    for (int i = 0; i < n; i++) {
        if (hp->eos_id < 0) hp->eos_id = ids[i];
        else fr_hparams_add_eos(hp, ids[i]);
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
    free(c->chat_template);
    free(c->bos_token_str);
    free(c->eos_token_str);
    memset(c, 0, sizeof *c);
}
