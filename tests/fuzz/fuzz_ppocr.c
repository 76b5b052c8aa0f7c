/* fuzz_ppocr.c — libFuzzer harness for the PP-OCR pipeline's parsers and map readers
 * (src/stages/ocr/ppocr_det.c, ppocr_rec.c).
 *
 * The first input byte (mod 2) picks the mode. 0: the rest is a dictionary file
 * (fr_ppocr_dict_parse); a parse must give at least 2 classes (blank and one entry), "" first and
 * " " last, each entry valid UTF-8; a failure must carry BAD_REQUEST and a one-line message; a
 * dictionary that loads then decodes a CTC output built from the same bytes (T x C, C = its
 * size + 1 so one class is unknown) into valid UTF-8 with a confidence in [0, 1]. 1: the next two
 * bytes are the map's width and height (1..64), the rest its probabilities (byte / 255, 255 =
 * NaN, 254 = +inf, padded with 0); DB post-processing must return 0..cap boxes whose corners lie
 * inside the (4x larger) image and whose scores are in [0, 1], each of which crops and feeds the
 * classifier and recogniser inputs without reading out of bounds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/ocr/ppocr.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

static void fuzz_dict(const uint8_t *data, size_t size) {
    char *b = malloc(size ? size : 1);
    if (size) memcpy(b, data, size);
    fr_ppocr_dict d;
    fr_err err = {0};
    if (fr_ppocr_dict_parse(b, size, 1, &d, &err) != 0) {
        if (d.chars || d.n || err.code != FR_ERR_BAD_REQUEST || !err.msg[0] || strchr(err.msg, '\n'))
            abort();
        free(b);
        return;
    }
    if (d.n < 2 || strcmp(d.chars[0], "") || strcmp(d.chars[d.n - 1], " ")) abort();
    for (size_t i = 0; i < d.n; i++)
        if (!fr_utf8_valid(d.chars[i], strlen(d.chars[i]))) abort();
    int C = (int)d.n + 1, T = (int)(size % 40);
    float *probs = malloc((size_t)T * C * sizeof *probs + 1);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) probs[t * C + c] = (float)(uint8_t)b[(size_t)(t * 7 + c) % size] / 255;
    fr_ppocr_text txt;
    if (fr_ppocr_ctc_decode(probs, T, C, &d, &txt, &err) != 0) abort();
    if (!fr_utf8_valid(txt.text, strlen(txt.text)) || !(txt.conf >= 0 && txt.conf <= 1)) abort();
    free(txt.text);
    free(probs);
    fr_ppocr_dict_free(&d);
    free(b);
}

static void fuzz_map(const uint8_t *data, size_t size) {
    if (size < 2) return;
    uint32_t w = data[0] % 64 + 1, h = data[1] % 64 + 1;
    data += 2;
    size -= 2;
    float *map = calloc((size_t)w * h, sizeof *map);
    for (size_t i = 0; i < (size_t)w * h && i < size; i++)
        map[i] = data[i] == 255 ? NAN : data[i] == 254 ? INFINITY : data[i] / 255.0f;
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    fr_ppocr_box boxes[64];
    fr_err err = {0};
    uint32_t iw = 4 * w, ih = 4 * h;
    int n = fr_ppocr_det_boxes(map, w, h, iw, ih, &p, boxes, 64, &err);
    if (n < 0 || n > 64) abort();
    uint8_t *pix = malloc((size_t)iw * ih * 3);
    for (size_t i = 0; i < (size_t)iw * ih * 3; i++) pix[i] = (uint8_t)(i * 31);
    fr_image img = {pix, iw, ih, 3};
    static float cls[3 * FR_PPOCR_REC_H * FR_PPOCR_CLS_W];
    for (int i = 0; i < n; i++) {
        const fr_ppocr_box *b = &boxes[i];
        for (int q = 0; q < 4; q++)
            if (!(b->x[q] >= 0 && b->x[q] <= iw - 1 && b->y[q] >= 0 && b->y[q] <= ih - 1)) abort();
        if (!(b->score >= 0 && b->score <= 1)) abort();
        fr_image crop;
        if (fr_ppocr_crop(&img, b, &crop, &err) != 0) continue;
        fr_ppocr_cls_prep(&crop, cls);
        uint32_t rw = fr_ppocr_rec_width((float)crop.width / crop.height, 320, 32, 1600);
        float *rec = malloc((size_t)3 * FR_PPOCR_REC_H * rw * sizeof *rec);
        fr_ppocr_rec_prep(&crop, rw, rec);
        free(rec);
        fr_image_free(&crop);
    }
    free(pix);
    free(map);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] % 2 == 0) fuzz_dict(data + 1, size - 1);
    else fuzz_map(data + 1, size - 1);
    return 0;
}
