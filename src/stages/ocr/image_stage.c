/* image_stage.c — decode, density, route, OCR; see image_stage.h. */
#include "stages/ocr/image_stage.h"

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

void fr_image_stage_json(const fr_image_stage_result *r, fr_buf *b) {
    fr_buf_printf(b,
                  "{\"format\":\"%s\",\"width\":%u,\"height\":%u,\"density\":{\"score\":%.3f,"
                  "\"threshold\":%.3f,\"text_tiles\":%.3f,\"picture_tiles\":%.3f,\"paper\":%.3f,"
                  "\"ms\":%.3f},\"ocr_on\":%s,\"reason\":\"%s\",\"decode_ms\":%.2f,\"ocr_ms\":%.2f,"
                  "\"ocr\":",
                  fr_img_format_name(r->info.format), r->info.width, r->info.height,
                  r->density.score, r->threshold, r->density.text_tiles, r->density.picture_tiles,
                  r->density.paper, r->density.ms, r->ocr_on ? "true" : "false", r->reason,
                  r->decode_ms, r->ocr_ms);
    if (r->ocr_on) fr_ocr_result_json(&r->ocr, b);
    else fr_buf_puts(b, "null");
    fr_buf_puts(b, "}");
}
