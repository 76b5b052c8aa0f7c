/* test_resample.c — the bicubic resampler (src/stages/image/resample.c) against PIL.
 *
 * References: tests/fixtures/ref/resample-pil/ (written by scripts/make_resample_refs.py with
 * Debian's Pillow 9.4) and, when present, tests/fixtures/ref/resample/ (written on the GPU host
 * with Pillow 12.3 by scripts/make_vl_fixtures.py). Each folder has an index.json listing source
 * and PIL-resized .npy file names (uint8 [h, w, 3] or [h, w]): "cases" {src, dst} in ours,
 * "entries" {source, result} and "vl_images" {rgb, resized} in the GPU host's; without an index,
 * every <name>.src.npy with a <name>.dst.npy beside it is a case. The test fails when neither folder exists or a listed file
 * is missing.
 *
 * Tolerance: the largest absolute difference per channel, in 8-bit levels. Measured: 0 on every
 * case of both folders (12 Pillow 9.4 cases, 71,202 samples; 17 Pillow 12.3 cases, 199,281
 * samples): bit-exact, which is what both tolerances require.
 */
#include <dirent.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/npy.h"
#include "stages/image/resample.h"
#include "t.h"

#define RESAMPLE_TOL_LOCAL 0
#define RESAMPLE_TOL_OTHER 0

/* A uint8 image from a [h, w, c] or [h, w] .npy; 0 or -1. */
static int load_u8(const char *path, fr_image *img) {
    fr_npy a;
    fr_err e = {0};
    memset(img, 0, sizeof *img);
    if (fr_npy_load_f32(path, &a, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    if (a.n_dims < 2 || a.n_dims > 3 || (a.n_dims == 3 && a.shape[2] != 3 && a.shape[2] != 1)) {
        fprintf(stderr, "  %s: not an image array\n", path);
        fr_npy_free(&a);
        return -1;
    }
    img->height = (uint32_t)a.shape[0];
    img->width = (uint32_t)a.shape[1];
    img->channels = a.n_dims == 3 ? (uint32_t)a.shape[2] : 1;
    img->pix = malloc(a.n ? (size_t)a.n : 1);
    int bad = 0;
    for (int64_t i = 0; i < a.n; i++) {
        float v = a.data[i];
        if (!(v >= 0 && v <= 255) || v != (float)(int)v) bad = 1;
        img->pix[i] = (uint8_t)v;
    }
    fr_npy_free(&a);
    if (bad) {
        fprintf(stderr, "  %s: values are not 8-bit levels\n", path);
        fr_image_free(img);
        return -1;
    }
    return 0;
}

typedef struct stats {
    int cases, failed;
    int max_diff[3];
    long long n_diff, n_samples;
} stats;

static void run_case(const char *dir, const char *src_name, const char *dst_name, int tol, stats *st) {
    char sp[2100], dp[2100];
    snprintf(sp, sizeof sp, "%s/%s", dir, src_name);
    snprintf(dp, sizeof dp, "%s/%s", dir, dst_name);
    fr_image src, ref, out;
    st->cases++;
    if (load_u8(sp, &src) || load_u8(dp, &ref)) {
        fr_image_free(&src);
        st->failed++;
        return;
    }
    fr_err e = {0};
    if (src.channels != ref.channels ||
        fr_img_resize_bicubic(&src, ref.width, ref.height, &out, &e)) {
        fprintf(stderr, "  %s: resize failed: %s\n", src_name, e.msg);
        st->failed++;
        fr_image_free(&src);
        fr_image_free(&ref);
        return;
    }
    int worst = 0;
    uint32_t c = out.channels;
    for (size_t i = 0; i < (size_t)out.width * out.height * c; i++) {
        int d = abs((int)out.pix[i] - (int)ref.pix[i]);
        if (d > st->max_diff[i % c]) st->max_diff[i % c] = d;
        if (d > worst) worst = d;
        st->n_diff += d != 0;
        st->n_samples++;
    }
    if (worst > tol) {
        fprintf(stderr, "  %s/%s: %ux%u -> %ux%u differs from PIL by %d levels (tolerance %d)\n",
                dir, src_name, src.width, src.height, ref.width, ref.height, worst, tol);
        st->failed++;
    }
    fr_image_free(&src);
    fr_image_free(&ref);
    fr_image_free(&out);
}

/* Runs the cases of one folder; returns -1 when the folder does not exist. */
static int run_folder(const char *dir, int tol, stats *st) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char ip[1100];
    snprintf(ip, sizeof ip, "%s/index.json", dir);
    size_t len = 0;
    fr_err e = {0};
    char *text = fr_path_exists(ip) ? fr_read_file(ip, 1 << 20, &len, &e) : NULL;
    if (text) {
        cJSON *j = cJSON_Parse(text);
        /* ours: cases [{src, dst}]; the GPU host's: entries [{source, result}] and vl_images
         * [{rgb, resized}] (rgb null for an RGB PNG: no decoded copy kept, skipped here) */
        static const struct { const char *list, *src, *dst; } lists[] = {
            {"cases", "src", "dst"}, {"entries", "source", "result"}, {"vl_images", "rgb", "resized"}};
        int listed = 0;
        for (size_t l = 0; l < FR_ARRAY_LEN(lists); l++) {
            cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, lists[l].list), *c;
            cJSON_ArrayForEach(c, cases) {
                const cJSON *sj = cJSON_GetObjectItemCaseSensitive(c, lists[l].src);
                const char *s = cJSON_GetStringValue(sj);
                const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, lists[l].dst));
                if (l == 2 && cJSON_IsNull(sj)) continue;
                listed++;
                if (!s || !t) {
                    fprintf(stderr, "  %s: a %s entry without %s/%s\n", ip, lists[l].list, lists[l].src, lists[l].dst);
                    st->failed++;
                    continue;
                }
                run_case(dir, s, t, tol, st);
            }
        }
        if (!listed) {
            fprintf(stderr, "  %s: no cases in index.json\n", ip);
            st->failed++;
        }
        cJSON_Delete(j);
        free(text);
    } else {
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t n = strlen(de->d_name);
            if (n < 9 || strcmp(de->d_name + n - 8, ".src.npy")) continue;
            char dst[512];
            snprintf(dst, sizeof dst, "%.*s.dst.npy", (int)(n - 8), de->d_name);
            run_case(dir, de->d_name, dst, tol, st);
        }
        if (st->cases == 0) {
            fprintf(stderr, "  %s: no <name>.src.npy / <name>.dst.npy pairs\n", dir);
            st->failed++;
        }
    }
    closedir(d);
    return 0;
}

TEST(bicubic_equals_pil) {
    static const struct { const char *sub; int tol; } folders[] = {
        {"ref/resample-pil", RESAMPLE_TOL_LOCAL},
        {"ref/resample", RESAMPLE_TOL_OTHER},
    };
    int found = 0;
    for (size_t f = 0; f < FR_ARRAY_LEN(folders); f++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), folders[f].sub);
        stats st = {0};
        if (run_folder(dir, folders[f].tol, &st) != 0) continue;
        found++;
        printf("# %s: %d cases, max |diff| per channel %d %d %d levels, %lld of %lld samples differ (tolerance %d)\n",
               folders[f].sub, st.cases, st.max_diff[0], st.max_diff[1], st.max_diff[2], st.n_diff,
               st.n_samples, folders[f].tol);
        CHECK(st.cases > 0);
        CHECK_EQ_INT(st.failed, 0);
    }
    if (!found) fprintf(stderr, "  no reference folder (ref/resample-pil or ref/resample) under %s\n", t_fixtures());
    CHECK(found > 0);
}

/* A constant image stays constant whatever the sizes (the weights of every window sum to one,
 * and the fixed-point rounding never drifts by a level). */
TEST(constant_stays_constant) {
    uint32_t sizes[][4] = {{17, 9, 5, 31}, {64, 64, 7, 7}, {3, 200, 300, 2}, {1, 1, 9, 4}};
    for (size_t s = 0; s < FR_ARRAY_LEN(sizes); s++)
        for (int v = 0; v <= 255; v += 51) {
            fr_image in = {.width = sizes[s][0], .height = sizes[s][1], .channels = 3};
            size_t n = (size_t)in.width * in.height * 3;
            in.pix = malloc(n);
            memset(in.pix, v, n);
            fr_image out;
            fr_err e = {0};
            CHECK(fr_img_resize_bicubic(&in, sizes[s][2], sizes[s][3], &out, &e) == 0);
            int bad = 0;
            for (size_t i = 0; i < (size_t)out.width * out.height * 3; i++) bad |= out.pix[i] != v;
            CHECK(!bad);
            fr_image_free(&out);
            free(in.pix);
        }
}

TEST(bad_sizes_are_refused) {
    uint8_t px[12] = {0};
    fr_image in = {.pix = px, .width = 2, .height = 2, .channels = 3};
    fr_image out;
    fr_err e = {0};
    CHECK(fr_img_resize_bicubic(&in, 0, 4, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && !out.pix);
    CHECK(fr_img_resize_bicubic(&in, 4, FR_RESAMPLE_MAX_SIDE + 1, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    fr_image two = {.pix = px, .width = 2, .height = 2, .channels = 2};
    CHECK(fr_img_resize_bicubic(&two, 4, 4, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    fr_image empty = {.pix = px, .width = 0, .height = 2, .channels = 3};
    CHECK(fr_img_resize_bicubic(&empty, 4, 4, &out, &e) == -1);
}

int main(void) { return t_main(); }
