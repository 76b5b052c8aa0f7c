/* vlproc.c — Qwen2VLImageProcessor in C (see vlproc.h for the steps and the numerics).
 *
 * The patch order, from HF's reshape of the [T, C, H, W] frame stack into
 * [T, C, gh/m, m, P, gw/m, m, P] and its transpose to [gh/m, gw/m, m, m, C, T, P, P]:
 *   row    = ((bh * (gw / m) + bw) * m + ih) * m + iw
 *   column = ((c * T + t) * P + py) * P + px
 *   pixel  = (y = (bh * m + ih) * P + py, x = (bw * m + iw) * P + px)
 * Every t copies the same frame. The normalised frame is computed once per channel into a
 * float plane and the rows are gathered from it.
 */
#include "stages/image/vlproc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/image/resample.h"

#define VL_MAX_CONFIG_BYTES (1u << 20)

void fr_vl_proc_cfg_default(fr_vl_proc_cfg *c) {
    static const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    static const float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    memset(c, 0, sizeof *c);
    c->patch = 14;
    c->merge = 2;
    c->temporal = 2;
    c->min_pixels = 56 * 56;
    c->max_pixels = 28 * 28 * 1280;
    memcpy(c->mean, mean, sizeof mean);
    memcpy(c->std, std, sizeof std);
    c->rescale = 1.0 / 255.0;
    c->do_resize = c->do_rescale = c->do_normalize = c->do_rgb = true;
}

int fr_vl_proc_cfg_check(const fr_vl_proc_cfg *c, fr_err *err) {
    if (c->patch < 1 || c->patch > 64 || c->merge < 1 || c->merge > 8 || c->temporal < 1 ||
        c->temporal > 8) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "image processor: patch_size %d, merge_size %d, temporal_patch_size %d "
                    "(1..64, 1..8, 1..8)", c->patch, c->merge, c->temporal);
        return -1;
    }
    int64_t f2 = (int64_t)c->patch * c->merge * c->patch * c->merge;
    int64_t cap = f2 * FR_VL_MAX_MERGED_TOKENS;
    if (c->min_pixels < f2 || c->max_pixels < c->min_pixels || c->max_pixels > cap) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "image processor: min_pixels %lld, max_pixels %lld (need %lld <= min_pixels "
                    "<= max_pixels <= %lld)", (long long)c->min_pixels, (long long)c->max_pixels,
                    (long long)f2, (long long)cap);
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(c->mean[i]) || !isfinite(c->std[i]) || c->std[i] == 0.0f) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "image processor: image_mean / image_std must be finite, std non-zero");
            return -1;
        }
    if (!isfinite(c->rescale) || c->rescale <= 0.0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "image processor: rescale_factor %g", c->rescale);
        return -1;
    }
    return 0;
}

int fr_vl_proc_cfg_apply(fr_vl_proc_cfg *cfg, const fr_vl_proc_override *ov, fr_err *err) {
    if (!ov) return 0;
    if (ov->min_pixels < 0 || ov->max_pixels < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "mm_processor_kwargs: min_pixels / max_pixels must be positive");
        return -1;
    }
    fr_vl_proc_cfg c = *cfg;
    if (ov->min_pixels) c.min_pixels = ov->min_pixels;
    if (ov->max_pixels) c.max_pixels = ov->max_pixels;
    if (fr_vl_proc_cfg_check(&c, err)) {
        fr_err_prefix(err, "mm_processor_kwargs");
        return -1;
    }
    *cfg = c;
    return 0;
}

/* ---- configuration file ----------------------------------------------------------------------- */

/* An integer JSON value in [lo, hi] into *out; absent: 0 and *out unchanged; bad: -1. */
static int cfg_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   const char *file, fr_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %s must be an integer in %lld..%lld", file, key,
                    (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

static int cfg_bool(const cJSON *o, const char *key, bool *out, const char *file, fr_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %s must be true or false", file, key);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A list of 3 numbers, or one number for all three channels. */
static int cfg_vec3(const cJSON *o, const char *key, float out[3], const char *file, fr_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsNumber(v)) {
        out[0] = out[1] = out[2] = (float)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3) goto bad;
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e)) goto bad;
        out[i] = (float)e->valuedouble;
    }
    return 0;
bad:
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %s must be a list of 3 numbers", file, key);
    return -1;
}

static int cfg_parse(const cJSON *o, fr_vl_proc_cfg *c, const char *file, fr_err *err) {
    int64_t big = (int64_t)1 << 40;
    int64_t patch = c->patch, merge = c->merge, temporal = c->temporal, resample = 3;
    int64_t mn = c->min_pixels, mx = c->max_pixels;
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size");
    if (size && !cJSON_IsNull(size)) {
        if (!cJSON_IsObject(size)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: size must be an object", file);
            return -1;
        }
        if (cfg_int(size, "shortest_edge", 1, big, &mn, file, err) ||
            cfg_int(size, "longest_edge", 1, big, &mx, file, err) ||
            cfg_int(size, "min_pixels", 1, big, &mn, file, err) ||
            cfg_int(size, "max_pixels", 1, big, &mx, file, err))
            return -1;
    }
    if (cfg_int(o, "min_pixels", 1, big, &mn, file, err) ||
        cfg_int(o, "max_pixels", 1, big, &mx, file, err) ||
        cfg_int(o, "patch_size", 1, 64, &patch, file, err) ||
        cfg_int(o, "merge_size", 1, 8, &merge, file, err) ||
        cfg_int(o, "temporal_patch_size", 1, 8, &temporal, file, err) ||
        cfg_int(o, "resample", 0, 5, &resample, file, err) ||
        cfg_vec3(o, "image_mean", c->mean, file, err) || cfg_vec3(o, "image_std", c->std, file, err) ||
        cfg_bool(o, "do_resize", &c->do_resize, file, err) ||
        cfg_bool(o, "do_rescale", &c->do_rescale, file, err) ||
        cfg_bool(o, "do_normalize", &c->do_normalize, file, err) ||
        cfg_bool(o, "do_convert_rgb", &c->do_rgb, file, err))
        return -1;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "rescale_factor");
    if (rf && !cJSON_IsNull(rf)) {
        if (!cJSON_IsNumber(rf)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: rescale_factor must be a number", file);
            return -1;
        }
        c->rescale = rf->valuedouble;
    }
    if (resample != 3) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: resample %lld (only 3, bicubic, is implemented)",
                    file, (long long)resample);
        return -1;
    }
    c->patch = (int)patch;
    c->merge = (int)merge;
    c->temporal = (int)temporal;
    c->min_pixels = mn;
    c->max_pixels = mx;
    if (fr_vl_proc_cfg_check(c, err)) {
        fr_err_prefix(err, "%s", file);
        return -1;
    }
    return 0;
}

/* Parses dir/name into *json; 1 when the file does not exist, 0 when parsed, -1 on error. */
static int cfg_read(const char *dir, const char *name, cJSON **json, char **path, fr_err *err) {
    *path = fr_path_join(dir, name);
    *json = NULL;
    if (!fr_path_exists(*path)) return 1;
    size_t len = 0;
    char *text = fr_read_file(*path, VL_MAX_CONFIG_BYTES, &len, err);
    if (!text) {
        if (err) err->code = FR_ERR_BAD_REQUEST;
        return -1;
    }
    *json = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(*json)) {
        cJSON_Delete(*json);
        *json = NULL;
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a JSON object", *path);
        return -1;
    }
    return 0;
}

int fr_vl_proc_cfg_load(const char *model_dir, fr_vl_proc_cfg *cfg, fr_err *err) {
    fr_vl_proc_cfg_default(cfg);
    cJSON *proc = NULL, *pre = NULL;
    char *proc_path = NULL, *pre_path = NULL;
    int rc = -1;
    int a = cfg_read(model_dir, "processor_config.json", &proc, &proc_path, err);
    if (a < 0) goto done;
    int b = cfg_read(model_dir, "preprocessor_config.json", &pre, &pre_path, err);
    if (b < 0) goto done;
    /* transformers 5 nests the image processor's keys; older processor_config.json files hold
     * only the processor class, with the image keys in preprocessor_config.json */
    const cJSON *nested = proc ? cJSON_GetObjectItemCaseSensitive(proc, "image_processor") : NULL;
    fr_vl_proc_cfg c = *cfg;
    if (cJSON_IsObject(nested)) rc = cfg_parse(nested, &c, proc_path, err);
    else if (pre) rc = cfg_parse(pre, &c, pre_path, err);
    else if (proc) rc = cfg_parse(proc, &c, proc_path, err);
    else
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: no processor_config.json or preprocessor_config.json",
                    model_dir);
    if (rc == 0) *cfg = c;
done:
    cJSON_Delete(proc);
    cJSON_Delete(pre);
    free(proc_path);
    free(pre_path);
    return rc;
}

/* ---- smart_resize ----------------------------------------------------------------------------- */

int fr_vl_smart_resize(int64_t h, int64_t w, int factor, int64_t min_pixels, int64_t max_pixels,
                       int64_t *out_h, int64_t *out_w, fr_err *err) {
    if (h < 1 || w < 1 || factor < 1 || min_pixels < 1 || max_pixels < min_pixels ||
        h > (1 << 20) || w > (1 << 20)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "smart_resize: image %lldx%lld, factor %d, pixels %lld..%lld",
                    (long long)w, (long long)h, factor, (long long)min_pixels, (long long)max_pixels);
        return -1;
    }
    double hd = (double)h, wd = (double)w, fd = (double)factor;
    double aspect = (double)FR_MAX(h, w) / (double)FR_MIN(h, w);
    if (aspect > FR_VL_MAX_ASPECT) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "image %lldx%lld: aspect ratio %.1f is over %.0f (HF's Qwen2-VL processor refuses it)",
                    (long long)w, (long long)h, aspect, FR_VL_MAX_ASPECT);
        return -1;
    }
    /* Python's round() is half to even: nearbyint in the default rounding mode */
    int64_t hb = (int64_t)nearbyint(hd / fd) * factor;
    int64_t wb = (int64_t)nearbyint(wd / fd) * factor;
    if (hb * wb > max_pixels) {
        double beta = sqrt((hd * wd) / (double)max_pixels);
        hb = FR_MAX((int64_t)factor, (int64_t)floor(hd / beta / fd) * factor);
        wb = FR_MAX((int64_t)factor, (int64_t)floor(wd / beta / fd) * factor);
    } else if (hb * wb < min_pixels) {
        double beta = sqrt((double)min_pixels / (hd * wd));
        hb = (int64_t)ceil(hd * beta / fd) * factor;
        wb = (int64_t)ceil(wd * beta / fd) * factor;
    }
    *out_h = hb;
    *out_w = wb;
    return 0;
}

/* ---- preprocessing ---------------------------------------------------------------------------- */

void fr_vl_pixels_free(fr_vl_pixels *p) {
    if (!p) return;
    free(p->data);
    memset(p, 0, sizeof *p);
}

void fr_vl_proc_lut(const fr_vl_proc_cfg *cfg, float lut[3 * 256]) {
    for (int c = 0; c < 3; c++) {
        const float mean = cfg->mean[c], sd = cfg->std[c];
        for (int v = 0; v < 256; v++) {
            float x = cfg->do_rescale ? (float)((double)v * cfg->rescale) : (float)v;
            if (cfg->do_normalize) x = (x - mean) / sd;
            lut[c * 256 + v] = x;
        }
    }
}

int fr_vl_preprocess(const fr_image *rgb, const fr_vl_proc_cfg *cfg, fr_vl_pixels *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    if (fr_vl_proc_cfg_check(cfg, err)) return -1;
    if (!rgb || !rgb->pix || rgb->width == 0 || rgb->height == 0 ||
        (rgb->channels != 3 && !(rgb->channels == 1 && cfg->do_rgb))) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "image preprocessing: an empty image or one of %u channels (RGB needed)",
                    rgb ? rgb->channels : 0);
        return -1;
    }
    int factor = cfg->patch * cfg->merge;
    int64_t rh = rgb->height, rw = rgb->width;
    if (cfg->do_resize) {
        if (fr_vl_smart_resize(rgb->height, rgb->width, factor, cfg->min_pixels, cfg->max_pixels,
                               &rh, &rw, err))
            return -1;
    } else if (rh % factor || rw % factor) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "image %lldx%lld: without resizing both sides must be multiples of %d",
                    (long long)rw, (long long)rh, factor);
        return -1;
    }
    if (rh * rw > cfg->max_pixels && cfg->do_resize) { /* smart_resize never gives this */
        fr_err_setc(err, FR_ERR_TOO_LARGE, "image %lldx%lld over max_pixels", (long long)rw, (long long)rh);
        return -1;
    }
    if (rh > FR_RESAMPLE_MAX_SIDE || rw > FR_RESAMPLE_MAX_SIDE) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "image resized to %lldx%lld: a side over %u", (long long)rw,
                    (long long)rh, FR_RESAMPLE_MAX_SIDE);
        return -1;
    }
    /* 1. RGB, 2-3. resize (8-bit, as PIL) */
    fr_image src = *rgb, gray3 = {0}, sized = {0};
    if (rgb->channels == 1) {
        size_t np = (size_t)rgb->width * rgb->height;
        gray3.pix = malloc(np * 3);
        if (!gray3.pix) goto oom;
        for (size_t i = 0; i < np; i++) gray3.pix[3 * i] = gray3.pix[3 * i + 1] = gray3.pix[3 * i + 2] = rgb->pix[i];
        gray3.width = rgb->width;
        gray3.height = rgb->height;
        gray3.channels = 3;
        src = gray3;
    }
    const fr_image *img = &src;
    if ((uint32_t)rw != src.width || (uint32_t)rh != src.height) {
        if (fr_img_resize_bicubic(&src, (uint32_t)rw, (uint32_t)rh, &sized, err)) {
            fr_image_free(&gray3);
            return -1;
        }
        img = &sized;
    }
    /* 4. rescale and normalise into float planes [3][rh][rw] */
    size_t np = (size_t)rh * (size_t)rw;
    float *plane = malloc(np * 3 * sizeof(float));
    int P = cfg->patch, m = cfg->merge, T = cfg->temporal;
    int gh = (int)(rh / P), gw = (int)(rw / P);
    int64_t n_patches = (int64_t)gh * gw, dim = (int64_t)3 * T * P * P;
    float *data = malloc((size_t)n_patches * (size_t)dim * sizeof(float));
    if (!plane || !data) {
        free(plane);
        free(data);
        fr_image_free(&sized);
        fr_image_free(&gray3);
        goto oom;
    }
    float lut[3 * 256];
    fr_vl_proc_lut(cfg, lut);
    for (int c = 0; c < 3; c++) {
        float *pl = plane + (size_t)c * np;
        for (size_t i = 0; i < np; i++) pl[i] = lut[c * 256 + img->pix[3 * i + (size_t)c]];
    }
    fr_image_free(&sized);
    fr_image_free(&gray3);
    /* 5. patchify: rows by merge block, columns by (channel, t, y, x) */
    float *row = data;
    for (int bh = 0; bh < gh / m; bh++)
        for (int bw = 0; bw < gw / m; bw++)
            for (int ih = 0; ih < m; ih++)
                for (int iw = 0; iw < m; iw++) {
                    size_t y0 = (size_t)(bh * m + ih) * (size_t)P, x0 = (size_t)(bw * m + iw) * (size_t)P;
                    for (int c = 0; c < 3; c++) {
                        const float *pl = plane + (size_t)c * np;
                        float *dst = row + (size_t)c * (size_t)T * (size_t)P * (size_t)P;
                        for (int py = 0; py < P; py++)
                            memcpy(dst + (size_t)py * P, pl + (y0 + (size_t)py) * (size_t)rw + x0, (size_t)P * sizeof(float));
                        for (int t = 1; t < T; t++)
                            memcpy(dst + (size_t)t * P * P, dst, (size_t)P * P * sizeof(float));
                    }
                    row += dim;
                }
    free(plane);
    out->data = data;
    out->n_patches = n_patches;
    out->patch_dim = dim;
    out->grid_t = 1;
    out->grid_h = gh;
    out->grid_w = gw;
    return 0;
oom:
    fr_err_setc(err, FR_ERR_INTERNAL, "image preprocessing: out of memory");
    return -1;
}
