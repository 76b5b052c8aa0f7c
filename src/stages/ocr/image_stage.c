/* image_stage.c — decode, density, route, OCR; see image_stage.h. */
#include "stages/ocr/image_stage.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int fr_image_stage_run(fr_ocr_pool *pool, const uint8_t *data, size_t len, const char *declared,
                       const fr_image_stage_cfg *cfg, fr_image_stage_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    fr_image_stage_cfg c = {0};
    if (cfg) c = *cfg;
    res->threshold = c.threshold > 0 ? c.threshold : (float)FR_DENSITY_DEFAULT_THRESHOLD;
    double t0 = fr_time_s();
    if (fr_img_probe(data, len, declared, &c.limits, &res->info, err)) return -1;
    if (fr_img_decode(data, len, declared, &c.limits, 1, &res->gray, err)) return -1;
    res->decode_ms = (fr_time_s() - t0) * 1e3;
    fr_density_measure(&res->gray, &res->density);
    bool est = fr_density_route_ocr(&res->density, res->threshold);
    if (c.force_vision) {
        res->ocr_on = false;
        snprintf(res->reason, sizeof res->reason, "vision forced (text density %.2f)",
                 res->density.score);
    } else if (c.force_ocr) {
        res->ocr_on = true;
        snprintf(res->reason, sizeof res->reason, "OCR forced (text density %.2f)",
                 res->density.score);
    } else {
        res->ocr_on = est;
        snprintf(res->reason, sizeof res->reason, "text density %.2f %s %.2f", res->density.score,
                 est ? ">=" : "<", res->threshold);
    }
    if (res->ocr_on) {
        if (!pool) {
            fr_err_set(err, "OCR route chosen but no OCR engine is configured");
            fr_image_stage_result_free(res);
            return -1;
        }
        if (fr_ocr_pool_run(pool, &res->gray, &res->ocr, err)) {
            fr_image_stage_result_free(res);
            return -1;
        }
        res->ocr_ms = res->ocr.ms;
    }
    return 0;
}

void fr_image_stage_result_free(fr_image_stage_result *res) {
    if (!res) return;
    fr_ocr_result_free(&res->ocr);
    fr_image_free(&res->gray);
}

/* x rounded to 1/scale, so that the JSON shows the digits that mean something. */
static double rounded(double x, double scale) { return round(x * scale) / scale; }

cJSON *fr_image_stage_json(const fr_image_stage_result *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", fr_img_format_name(r->info.format));
    cJSON_AddNumberToObject(o, "width", r->info.width);
    cJSON_AddNumberToObject(o, "height", r->info.height);
    cJSON *d = cJSON_AddObjectToObject(o, "density");
    cJSON_AddNumberToObject(d, "score", rounded(r->density.score, 1e3));
    cJSON_AddNumberToObject(d, "threshold", rounded(r->threshold, 1e3));
    cJSON_AddNumberToObject(d, "text_tiles", rounded(r->density.text_tiles, 1e3));
    cJSON_AddNumberToObject(d, "picture_tiles", rounded(r->density.picture_tiles, 1e3));
    cJSON_AddNumberToObject(d, "paper", rounded(r->density.paper, 1e3));
    cJSON_AddNumberToObject(d, "ms", rounded(r->density.ms, 1e3));
    cJSON_AddBoolToObject(o, "ocr_on", r->ocr_on);
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddNumberToObject(o, "decode_ms", rounded(r->decode_ms, 100));
    cJSON_AddNumberToObject(o, "ocr_ms", rounded(r->ocr_ms, 100));
    cJSON_AddItemToObject(o, "ocr", r->ocr_on ? fr_ocr_result_json(&r->ocr) : cJSON_CreateNull());
    return o;
}
