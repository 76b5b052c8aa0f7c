/* vl_sample.c — JSONL samples and their prompts (vl_sample.h says the format and the rules). */
#include "tools/vl_sample.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vision.h"
#include "base/npy.h"
#include "model/chat.h"
#include "model/mrope.h"
#include "model/tokenizer.h"
#include "model/vision.h"
#include "stages/image/image.h"
#include "stages/image/vlproc.h"

#define MAX_PROMPT_IDS (1 << 20) /* ids of one prompt after pad expansion */

void fr_vl_sample_free(fr_vl_sample *s) {
    if (!s) return;
    free(s->id);
    for (int i = 0; i < s->n_images; i++) free(s->images[i]);
    free(s->pixel_values);
    free(s->question);
    for (int i = 0; i < s->n_answers; i++) free(s->answers[i]);
    memset(s, 0, sizeof *s);
}

static char *resolve(const char *base_dir, const char *p) {
    if (!base_dir || !*base_dir || p[0] == '/') return fr_xstrdup(p);
    return fr_path_join(base_dir, p);
}

/* A non-empty string field of at most FR_VL_SAMPLE_MAX_TEXT bytes without NUL. */
static int text_field(const cJSON *v, const char *name, char **out, fr_err *err) {
    if (!cJSON_IsString(v) || !v->valuestring) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"%s\" must be a string", name);
        return -1;
    }
    size_t n = strlen(v->valuestring);
    if (n > FR_VL_SAMPLE_MAX_TEXT) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "\"%s\" is %zu bytes (at most %d)", name, n,
                    FR_VL_SAMPLE_MAX_TEXT);
        return -1;
    }
    *out = fr_xstrdup(v->valuestring);
    return 0;
}

static int parse_images(const cJSON *img, const char *base_dir, fr_vl_sample *s, fr_err *err) {
    int n = cJSON_IsArray(img) ? cJSON_GetArraySize(img) : 1;
    if (n < 1 || n > FR_VL_SAMPLE_MAX_IMAGES) {
        fr_err_setc(err, n < 1 ? FR_ERR_BAD_REQUEST
                    : FR_ERR_TOO_LARGE, "\"image\": %d images (1..%d)", n, FR_VL_SAMPLE_MAX_IMAGES);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_IsArray(img) ? cJSON_GetArrayItem(img, i) : img;
        if (!cJSON_IsString(v) || !v->valuestring || !*v->valuestring) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"image\" must be a path or an array of paths");
            return -1;
        }
        s->images[s->n_images++] = resolve(base_dir, v->valuestring);
    }
    return 0;
}

static int parse_pixels(const cJSON *pv, const cJSON *grid, const char *base_dir, fr_vl_sample *s,
                        fr_err *err) {
    if (!cJSON_IsString(pv) || !pv->valuestring || !*pv->valuestring) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"pixel_values\" must be a .npy path");
        return -1;
    }
    int n = cJSON_IsArray(grid) ? cJSON_GetArraySize(grid) : 0;
    if (n < 1 || n > FR_VL_SAMPLE_MAX_IMAGES) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"grid_thw\" must be 1..%d [t, h, w] triples",
                    FR_VL_SAMPLE_MAX_IMAGES);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *g = cJSON_GetArrayItem(grid, i);
        if (!cJSON_IsArray(g) || cJSON_GetArraySize(g) != 3) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"grid_thw\"[%d] must be [t, h, w]", i);
            return -1;
        }
        for (int k = 0; k < 3; k++) {
            const cJSON *x = cJSON_GetArrayItem(g, k);
            if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 4096 ||
                x->valuedouble != (double)(int)x->valuedouble) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"grid_thw\"[%d][%d] must be an integer "
                            "in 1..4096", i, k);
                return -1;
            }
            s->grid_thw[3 * i + k] = (int32_t)x->valuedouble;
        }
    }
    s->n_grids = n;
    s->pixel_values = resolve(base_dir, pv->valuestring);
    return 0;
}

static int parse_answers(const cJSON *a, fr_vl_sample *s, fr_err *err) {
    if (!a) return 0;
    if (!cJSON_IsArray(a)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "\"answers\" must be an array of strings");
        return -1;
    }
    int n = cJSON_GetArraySize(a);
    if (n > FR_VL_SAMPLE_MAX_ANSWERS) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "\"answers\": %d (at most %d)", n,
                    FR_VL_SAMPLE_MAX_ANSWERS);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (text_field(cJSON_GetArrayItem(a, i), "answers[]", &s->answers[s->n_answers], err))
            return -1;
        s->n_answers++;
    }
    return 0;
}

int fr_vl_sample_parse(const char *line, size_t len, const char *base_dir, int line_no,
                       fr_vl_sample *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    if (len > FR_VL_SAMPLE_MAX_LINE) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "line of %zu bytes (at most %u)", len,
                    FR_VL_SAMPLE_MAX_LINE);
        return -1;
    }
    cJSON *o = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "not a JSON object");
        return -1;
    }
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(o, "image");
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(o, "pixel_values");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    int rc = -1;
    if (!!img == !!pv) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "give \"image\" or \"pixel_values\" (one of them)");
        goto out;
    }
    if (img ? parse_images(img, base_dir, out, err)
            : parse_pixels(pv, cJSON_GetObjectItemCaseSensitive(o, "grid_thw"), base_dir, out, err))
        goto out;
    if (text_field(cJSON_GetObjectItemCaseSensitive(o, "question"), "question", &out->question,
                   err))
        goto out;
    if (parse_answers(cJSON_GetObjectItemCaseSensitive(o, "answers"), out, err)) goto out;
    if (id && text_field(id, "id", &out->id, err)) goto out;
    if (!out->id) {
        char b[32];
        snprintf(b, sizeof b, "line %d", line_no);
        out->id = fr_xstrdup(b);
    }
    rc = 0;
out:
    cJSON_Delete(o);
    if (rc) fr_vl_sample_free(out);
    return rc;
}

int fr_vl_samples_load(const char *path, int max_samples, fr_vl_sample **out, int *n, fr_err *err) {
    *out = NULL;
    *n = 0;
    size_t len = 0;
    char *text = fr_read_file(path, 1u << 30, &len, err);
    if (!text) return -1;
    char *dir = fr_xstrdup(path), *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else dir[0] = 0;
    fr_vl_sample *v = NULL;
    int cnt = 0, cap = 0, line_no = 0, rc = 0;
    for (size_t i = 0; i < len && (!max_samples || cnt < max_samples);) {
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        line_no++;
        size_t a = i, b = j;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r')) b--;
        i = j + 1;
        if (a == b) continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 16;
            v = fr_xrealloc(v, (size_t)cap * sizeof *v);
        }
        if (fr_vl_sample_parse(text + a, b - a, dir, line_no, &v[cnt], err)) {
            fr_err_prefix(err, "%s:%d", path, line_no);
            rc = -1;
            break;
        }
        cnt++;
    }
    if (!rc && cnt == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: no samples", path);
        rc = -1;
    }
    if (rc) {
        for (int k = 0; k < cnt; k++) fr_vl_sample_free(&v[k]);
        free(v);
        v = NULL;
        cnt = 0;
    }
    free(dir);
    free(text);
    *out = v;
    *n = cnt;
    return rc;
}

void fr_vl_prompt_free(fr_vl_prompt *p) {
    if (!p) return;
    free(p->ids);
    free(p->rope_pos);
    free(p->feat);
    memset(p, 0, sizeof *p);
}

/* Decodes each image file of s as PIL does for HF (the image stage: EXIF orientation applied,
 * alpha dropped), then preprocesses it as HF's processor (stages/image/vlproc.h), rows appended to px in order. */
static int load_images(const fr_model *m, const fr_vl_sample *s, fr_npy *px, int32_t *grid,
                       fr_err *err) {
    fr_vl_proc_cfg cfg;
    if (fr_vl_proc_cfg_load(m->path, &cfg, err)) return -1;
    fr_buf rows = {0};
    int64_t n_rows = 0, dim = 0;
    int rc = 0;
    for (int i = 0; i < s->n_images && !rc; i++) {
        size_t len = 0;
        char *bytes = fr_read_file(s->images[i], FR_IMG_DEFAULT_MAX_BYTES, &len, err);
        fr_image img = {0};
        fr_vl_pixels vp = {0};
        rc = !bytes || fr_img_decode_flags((const uint8_t *)bytes, len, NULL, NULL, 3,
                                       FR_IMG_DECODE_ALPHA_DROP, &img, err) ||
             fr_vl_preprocess(&img, &cfg, &vp, err);
        if (rc) {
            if (bytes) fr_err_prefix(err, "%s", s->images[i]);
        } else {
            fr_buf_append(&rows, vp.data, (size_t)(vp.n_patches * vp.patch_dim) * sizeof(float));
            n_rows += vp.n_patches;
            dim = vp.patch_dim;
            grid[3 * i] = vp.grid_t;
            grid[3 * i + 1] = vp.grid_h;
            grid[3 * i + 2] = vp.grid_w;
        }
        fr_vl_pixels_free(&vp);
        fr_image_free(&img);
        free(bytes);
    }
    if (rc) {
        fr_buf_free(&rows);
        return -1;
    }
    *px = (fr_npy){.n_dims = 2, .shape = {n_rows, dim}, .n = n_rows * dim, .data = (float *)rows.data};
    return 0;
}

/* The pixel values of s: (n_patches, patch_dim) rows and the grids, from the .npy or the
 * image files. */
static int load_pixels(const fr_model *m, const fr_vl_sample *s, fr_npy *px, int32_t *grid,
                       int *n_images, fr_err *err) {
    const fr_vision_hparams *vh = &m->vision->hp;
    if (!s->pixel_values) {
        *n_images = s->n_images;
        return load_images(m, s, px, grid, err);
    }
    if (fr_npy_load_f32(s->pixel_values, px, err)) return -1;
    int64_t dim = (int64_t)vh->in_chans * vh->temporal * vh->patch * vh->patch, need = 0;
    for (int i = 0; i < s->n_grids; i++)
        need += (int64_t)s->grid_thw[3 * i] * s->grid_thw[3 * i + 1] * s->grid_thw[3 * i + 2];
    if (px->n_dims != 2 || px->shape[1] != dim || px->shape[0] != need) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: shape must be (%lld, %lld) for grid_thw",
                    s->pixel_values, (long long)need, (long long)dim);
        fr_npy_free(px);
        return -1;
    }
    memcpy(grid, s->grid_thw, sizeof(int32_t) * 3 * (size_t)s->n_grids);
    *n_images = s->n_grids;
    return 0;
}

/* The rendered chat prompt of s with n_images image parts, tokenized. */
static int prompt_ids(const fr_model *m, const char *question, int n_images, int32_t **ids,
                      size_t *n, fr_err *err) {
    if (!m->chat_template) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "model has no chat template");
        return -1;
    }
    cJSON *msgs = cJSON_CreateArray(), *msg = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    cJSON_AddStringToObject(msg, "role", "user");
    for (int i = 0; i < n_images; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "image");
        cJSON_AddItemToArray(parts, p);
    }
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", question);
    cJSON_AddItemToArray(parts, t);
    cJSON_AddItemToObject(msg, "content", parts);
    cJSON_AddItemToArray(msgs, msg);
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : ""};
    char *text = fr_chat_render(m->chat_template, msgs, &co, err);
    cJSON_Delete(msgs);
    if (!text) return -1;
    int rc = fr_tokenize(m->tok, text, strlen(text), false, ids, n, err);
    free(text);
    return rc;
}

int fr_vl_prompt_build(const fr_model *m, fr_pool *pool, const fr_vl_sample *s, fr_vl_prompt *out,
                       fr_err *err) {
    memset(out, 0, sizeof *out);
    if (!m->vision || m->hp.image_token_id < 0 || !m->tok) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "model %s has no vision tower", m->name ? m->name : "");
        return -1;
    }
    const fr_vision_hparams *vh = &m->vision->hp;
    double t0 = fr_time_s();
    fr_npy px = {0};
    int32_t *raw = NULL;
    size_t n_raw = 0, n = 0;
    int rc = -1;
    if (load_pixels(m, s, &px, out->grid_thw, &out->n_images, err)) return -1;
    out->n_img = fr_vision_n_tokens(vh, out->grid_thw, out->n_images);
    if (out->n_img < 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "grid_thw does not fit the vision tower (merge %d)",
                    vh->merge);
        goto out;
    }
    out->feat = malloc((size_t)out->n_img * (size_t)vh->out_hidden * sizeof(float));
    if (!out->feat) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "out of memory for %lld image tokens",
                    (long long)out->n_img);
        goto out;
    }
    if (fr_vision_forward(m, pool, px.data, px.shape[0], out->grid_thw, out->n_images, out->feat,
                          err))
        goto out;
    out->vision_s = fr_time_s() - t0;
    if (prompt_ids(m, s->question, out->n_images, &raw, &n_raw, err)) goto out;
    if (fr_vl_expand_pads(raw, n_raw, m->hp.image_token_id, out->grid_thw, out->n_images,
                          vh->merge, MAX_PROMPT_IDS, &out->ids, &n, err))
        goto out;
    out->n = (int)n;
    out->rope_pos = fr_xmalloc(3 * n * sizeof(int32_t));
    if (fr_vl_rope_index(out->ids, n, m->hp.image_token_id, out->grid_thw, out->n_images,
                         vh->merge, out->rope_pos, &out->delta, err))
        goto out;
    out->first_img = out->last_img = -1;
    for (int i = 0; i < out->n; i++)
        if (out->ids[i] == m->hp.image_token_id) {
            if (out->first_img < 0) out->first_img = i;
            out->last_img = i;
        }
    rc = 0;
out:
    fr_npy_free(&px);
    free(raw);
    if (rc) fr_vl_prompt_free(out);
    return rc;
}
