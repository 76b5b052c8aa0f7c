/* test_vlproc.c — the Qwen2-VL preprocessing (src/stages/image/vlproc.c).
 *
 * smart_resize against values from transformers 5.17's smart_resize (Python; half-to-even
 * rounding, the max- and min-pixel branches); fr_vl_preprocess against the pixel values of
 * tests/fixtures/ref/vlproc-pil/ (HF's PIL-backend steps run with Pillow 9.4 and numpy by
 * scripts/make_resample_refs.py): grid_thw equal and every float equal (measured: 0 difference);
 * the processor configuration files (flat, nested under image_processor, size dicts, bad values,
 * none); per-request overrides; refusals with codes.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/npy.h"
#include "stages/image/vlproc.h"
#include "t.h"

TEST(smart_resize_matches_hf) {
    /* h, w, factor, min_pixels, max_pixels -> h, w (from the Python function) */
    static const int64_t c[][7] = {
        {42, 70, 28, 3136, 1003520, 56, 56},      /* 1.5 and 2.5 both round to 2 */
        {70, 42, 28, 3136, 1003520, 56, 56},
        {1080, 1920, 28, 3136, 1003520, 728, 1316},
        {4000, 3000, 28, 3136, 1003520, 1148, 840},
        {10, 10, 28, 3136, 1003520, 56, 56},      /* smaller than the factor: scaled up */
        {13, 2000, 28, 3136, 1003520, 28, 700},
        {224, 224, 28, 3136, 12845056, 224, 224},
        {500, 375, 28, 200704, 401408, 532, 392},
        {1, 200, 28, 784, 1003520, 28, 420},      /* aspect exactly 200 is taken */
        {61, 37, 8, 64, 25600, 64, 40},
        {90, 70, 8, 64, 1920, 48, 32},
        {999, 1001, 28, 784, 3136, 28, 56},
        {14, 14, 14, 196, 19600, 14, 14},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(c); i++) {
        int64_t h = 0, w = 0;
        fr_err e = {0};
        CHECK(fr_vl_smart_resize(c[i][0], c[i][1], (int)c[i][2], c[i][3], c[i][4], &h, &w, &e) == 0);
        if (h != c[i][5] || w != c[i][6])
            fprintf(stderr, "  case %zu: %lldx%lld, expected %lldx%lld\n", i, (long long)h,
                    (long long)w, (long long)c[i][5], (long long)c[i][6]);
        CHECK(h == c[i][5] && w == c[i][6]);
    }
    int64_t h, w;
    fr_err e = {0};
    CHECK(fr_vl_smart_resize(1, 201, 28, 784, 1003520, &h, &w, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    CHECK(strstr(e.msg, "aspect ratio") != NULL);
    CHECK(fr_vl_smart_resize(0, 20, 28, 784, 1003520, &h, &w, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
}

/* A uint8 [h, w, 3] .npy as an image. */
static int load_img(const char *path, fr_image *img) {
    fr_npy a;
    fr_err e = {0};
    memset(img, 0, sizeof *img);
    if (fr_npy_load_f32(path, &a, &e) || a.n_dims != 3 || a.shape[2] != 3) {
        fprintf(stderr, "  %s: %s\n", path, e.msg[0] ? e.msg : "not [h, w, 3]");
        fr_npy_free(&a);
        return -1;
    }
    img->height = (uint32_t)a.shape[0];
    img->width = (uint32_t)a.shape[1];
    img->channels = 3;
    img->pix = malloc((size_t)a.n);
    for (int64_t i = 0; i < a.n; i++) img->pix[i] = (uint8_t)a.data[i];
    fr_npy_free(&a);
    return 0;
}

static int json_int(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

TEST(pixel_values_equal_hf_pil_backend) {
    char dir[1024], ip[1100];
    snprintf(dir, sizeof dir, "%s/ref/vlproc-pil", t_fixtures());
    snprintf(ip, sizeof ip, "%s/index.json", dir);
    size_t len = 0;
    fr_err e = {0};
    char *text = fr_read_file(ip, 1 << 20, &len, &e);
    CHECK(text != NULL);
    if (!text) {
        fprintf(stderr, "  %s\n", e.msg);
        return;
    }
    cJSON *j = cJSON_Parse(text);
    cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases"), *c;
    CHECK(cJSON_GetArraySize(cases) >= 4);
    double worst = 0;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "src"));
        const char *pv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "pixel_values"));
        const cJSON *cf = cJSON_GetObjectItemCaseSensitive(c, "config");
        const cJSON *grid = cJSON_GetObjectItemCaseSensitive(c, "grid_thw");
        CHECK(src && pv && cf && cJSON_GetArraySize(grid) == 3);
        if (!src || !pv || !cf) continue;
        char sp[2200], pp[2200];
        snprintf(sp, sizeof sp, "%s/%s", dir, src);
        snprintf(pp, sizeof pp, "%s/%s", dir, pv);
        fr_image img;
        fr_npy ref;
        if (load_img(sp, &img) || fr_npy_load_f32(pp, &ref, &e)) {
            CHECK(0);
            fr_image_free(&img);
            continue;
        }
        fr_vl_proc_cfg cfg;
        fr_vl_proc_cfg_default(&cfg);
        cfg.patch = json_int(cf, "patch_size");
        cfg.merge = json_int(cf, "merge_size");
        cfg.temporal = json_int(cf, "temporal_patch_size");
        cfg.min_pixels = json_int(cf, "min_pixels");
        cfg.max_pixels = json_int(cf, "max_pixels");
        fr_vl_pixels px;
        CHECK(fr_vl_preprocess(&img, &cfg, &px, &e) == 0);
        CHECK_EQ_INT(px.grid_t, cJSON_GetArrayItem(grid, 0)->valueint);
        CHECK_EQ_INT(px.grid_h, cJSON_GetArrayItem(grid, 1)->valueint);
        CHECK_EQ_INT(px.grid_w, cJSON_GetArrayItem(grid, 2)->valueint);
        CHECK(ref.n_dims == 2 && ref.shape[0] == px.n_patches && ref.shape[1] == px.patch_dim);
        if (ref.n == px.n_patches * px.patch_dim) {
            double d = 0;
            for (int64_t i = 0; i < ref.n; i++) d = FR_MAX(d, fabs((double)px.data[i] - ref.data[i]));
            if (d > 0) fprintf(stderr, "  %s: max |diff| %g\n", src, d);
            CHECK(d == 0);
            worst = FR_MAX(worst, d);
        }
        n_cases++;
        fr_vl_pixels_free(&px);
        fr_npy_free(&ref);
        fr_image_free(&img);
    }
    printf("# vlproc-pil: %d cases, max |pixel_values - HF| = %g\n", n_cases, worst);
    cJSON_Delete(j);
    free(text);
}

/* The RGB pixels HF's processor saw for a fixture image: the GPU host's decoded copy
 * (ref/resample/vl-<name>-rgb.npy) when it kept one, else (an RGB PNG, whose pixels are the
 * file's) the file decoded here. */
static int fixture_rgb(const cJSON *vl_images, const char *image, fr_image *img) {
    const cJSON *v;
    cJSON_ArrayForEach(v, vl_images) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "image"));
        if (!name || strcmp(name, image)) continue;
        const char *rgb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "rgb"));
        char p[2200];
        if (rgb) {
            snprintf(p, sizeof p, "%s/ref/resample/%s", t_fixtures(), rgb);
            return load_img(p, img);
        }
        snprintf(p, sizeof p, "%s/%s", t_fixtures(), image);
        size_t len = 0;
        fr_err e = {0};
        char *bytes = fr_read_file(p, 1 << 24, &len, &e);
        int rc = bytes ? fr_img_decode((const uint8_t *)bytes, len, NULL, NULL, 3, img, &e) : -1;
        if (rc) fprintf(stderr, "  %s: %s\n", p, e.msg);
        free(bytes);
        return rc;
    }
    fprintf(stderr, "  %s: not in ref/resample/index.json\n", image);
    return -1;
}

/* HF's pixel_values of the model fixtures (ref/<model>/ref.json cases with images), from the
 * model folder's processor configuration: equal to the float (measured: 0 difference). */
TEST(pixel_values_equal_hf_on_model_fixtures) {
    char ip[1100];
    snprintf(ip, sizeof ip, "%s/ref/resample/index.json", t_fixtures());
    size_t len = 0;
    fr_err e = {0};
    char *rtext = fr_read_file(ip, 1 << 20, &len, &e);
    CHECK(rtext != NULL);
    if (!rtext) return;
    cJSON *rj = cJSON_Parse(rtext);
    const cJSON *vl_images = cJSON_GetObjectItemCaseSensitive(rj, "vl_images");
    int n_images = 0;
    double worst = 0;
    const char *models[] = {"qwen25vl-tiny", "qwen2vl-tiny"};
    for (size_t mi = 0; mi < FR_ARRAY_LEN(models); mi++) {
        char mdir[1100], refp[1100];
        snprintf(mdir, sizeof mdir, "%s/%s", t_fixtures(), models[mi]);
        snprintf(refp, sizeof refp, "%s/ref/%s/ref.json", t_fixtures(), models[mi]);
        fr_vl_proc_cfg cfg;
        CHECK(fr_vl_proc_cfg_load(mdir, &cfg, &e) == 0);
        char *text = fr_read_file(refp, 1 << 22, &len, &e);
        CHECK(text != NULL);
        if (!text) continue;
        cJSON *j = cJSON_Parse(text), *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "cases")) {
            const cJSON *images = cJSON_GetObjectItemCaseSensitive(c, "images"), *im;
            const char *pv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "pixel_values"));
            if (cJSON_GetArraySize(images) == 0) continue;
            char pp[2300];
            snprintf(pp, sizeof pp, "%s/ref/%s/%s", t_fixtures(), models[mi], pv ? pv : "");
            fr_npy ref;
            CHECK(pv && fr_npy_load_f32(pp, &ref, &e) == 0);
            if (!pv || ref.n_dims != 2) continue;
            int64_t row = 0;
            int k = 0;
            const cJSON *grids = cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw");
            cJSON_ArrayForEach(im, images) {
                fr_image img;
                fr_vl_pixels px;
                const cJSON *g = cJSON_GetArrayItem(grids, k++);
                if (fixture_rgb(vl_images, cJSON_GetStringValue(im), &img)) {
                    CHECK(0);
                    continue;
                }
                CHECK(fr_vl_preprocess(&img, &cfg, &px, &e) == 0);
                CHECK(px.grid_t == cJSON_GetArrayItem(g, 0)->valueint && px.grid_h == cJSON_GetArrayItem(g, 1)->valueint &&
                      px.grid_w == cJSON_GetArrayItem(g, 2)->valueint);
                CHECK(px.patch_dim == ref.shape[1] && row + px.n_patches <= ref.shape[0]);
                if (px.data && px.patch_dim == ref.shape[1] && row + px.n_patches <= ref.shape[0]) {
                    const float *r = ref.data + row * ref.shape[1];
                    double d = 0;
                    for (int64_t i = 0; i < px.n_patches * px.patch_dim; i++) d = FR_MAX(d, fabs((double)px.data[i] - r[i]));
                    if (d > 0) fprintf(stderr, "  %s %s: max |diff| %g\n", models[mi], cJSON_GetStringValue(im), d);
                    CHECK(d == 0);
                    worst = FR_MAX(worst, d);
                }
                row += px.n_patches;
                n_images++;
                fr_vl_pixels_free(&px);
                fr_image_free(&img);
            }
            CHECK_EQ_INT(row, ref.shape[0]);
            fr_npy_free(&ref);
        }
        cJSON_Delete(j);
        free(text);
    }
    printf("# model fixtures: %d images, max |pixel_values - HF| = %g\n", n_images, worst);
    CHECK(n_images >= 4);
    cJSON_Delete(rj);
    free(rtext);
}

/* A gray image gives the pixel values of the same image in RGB (do_convert_rgb). */
TEST(gray_is_converted_to_rgb) {
    enum { W = 61, H = 37 };
    uint8_t g[W * H], rgb[W * H * 3];
    for (int i = 0; i < W * H; i++) g[i] = (uint8_t)(i * 29 % 256), rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = g[i];
    fr_image gi = {.pix = g, .width = W, .height = H, .channels = 1};
    fr_image ci = {.pix = rgb, .width = W, .height = H, .channels = 3};
    fr_vl_proc_cfg cfg;
    fr_vl_proc_cfg_default(&cfg);
    fr_vl_pixels a, b;
    fr_err e = {0};
    CHECK(fr_vl_preprocess(&gi, &cfg, &a, &e) == 0);
    CHECK(fr_vl_preprocess(&ci, &cfg, &b, &e) == 0);
    CHECK(a.n_patches == b.n_patches && a.patch_dim == b.patch_dim && a.patch_dim == 3 * 2 * 14 * 14);
    CHECK(a.data && b.data && !memcmp(a.data, b.data, (size_t)(a.n_patches * a.patch_dim) * sizeof(float)));
    fr_vl_pixels_free(&a);
    fr_vl_pixels_free(&b);
    cfg.do_rgb = false;
    CHECK(fr_vl_preprocess(&gi, &cfg, &a, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && !a.data);
}

TEST(refusals) {
    uint8_t px[201 * 3] = {0};
    fr_image thin = {.pix = px, .width = 201, .height = 1, .channels = 3};
    fr_vl_proc_cfg cfg;
    fr_vl_proc_cfg_default(&cfg);
    fr_vl_pixels out;
    fr_err e = {0};
    CHECK(fr_vl_preprocess(&thin, &cfg, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && !out.data);
    CHECK(strstr(e.msg, "aspect ratio") != NULL);
    /* without resizing the sides must be multiples of the factor */
    uint8_t sq[30 * 28 * 3] = {0};
    fr_image odd = {.pix = sq, .width = 30, .height = 28, .channels = 3};
    cfg.do_resize = false;
    CHECK(fr_vl_preprocess(&odd, &cfg, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    fr_image ok = {.pix = sq, .width = 28, .height = 28, .channels = 3};
    CHECK(fr_vl_preprocess(&ok, &cfg, &out, &e) == 0 && out.n_patches == 4 && out.grid_h == 2);
    /* the rescaled, normalised value of level 0 for the red channel */
    float want = ((float)(0.0 * (1.0 / 255.0)) - 0.48145466f) / 0.26862954f;
    CHECK(out.data && out.data[0] == want);
    fr_vl_pixels_free(&out);
    /* a bad configuration is refused before any work */
    cfg.std[1] = 0;
    CHECK(fr_vl_preprocess(&ok, &cfg, &out, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
}

TEST(overrides_are_validated) {
    fr_vl_proc_cfg cfg;
    fr_vl_proc_cfg_default(&cfg);
    fr_err e = {0};
    fr_vl_proc_override ov = {.min_pixels = 28 * 28 * 4, .max_pixels = 28 * 28 * 256};
    CHECK(fr_vl_proc_cfg_apply(&cfg, &ov, &e) == 0 && cfg.min_pixels == 3136 && cfg.max_pixels == 200704);
    fr_vl_proc_override only_max = {.max_pixels = 28 * 28 * 64};
    CHECK(fr_vl_proc_cfg_apply(&cfg, &only_max, &e) == 0 && cfg.min_pixels == 3136 && cfg.max_pixels == 50176);
    fr_vl_proc_cfg before = cfg;
    const fr_vl_proc_override bad[] = {
        {.min_pixels = 28 * 28 - 1},                       /* below factor^2 */
        {.min_pixels = 60000, .max_pixels = 50000},        /* min over max */
        {.max_pixels = 28LL * 28 * FR_VL_MAX_MERGED_TOKENS + 1}, /* over the cap */
        {.min_pixels = -5},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) {
        CHECK(fr_vl_proc_cfg_apply(&cfg, &bad[i], &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
        CHECK(!memcmp(&cfg, &before, sizeof cfg));
    }
    CHECK(strstr(e.msg, "mm_processor_kwargs") != NULL);
    CHECK(fr_vl_proc_cfg_apply(&cfg, NULL, &e) == 0);
    fr_vl_proc_override cap = {.max_pixels = 28LL * 28 * FR_VL_MAX_MERGED_TOKENS};
    CHECK(fr_vl_proc_cfg_apply(&cfg, &cap, &e) == 0);
}

static char tdir[128];
static const char *write_cfg(const char *name, const char *text) {
    snprintf(tdir, sizeof tdir, "/tmp/test_vlproc_%d", (int)getpid());
    mkdir(tdir, 0755);
    char p[256];
    const char *names[] = {"processor_config.json", "preprocessor_config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", tdir, names[i]);
        unlink(p);
    }
    if (name) {
        snprintf(p, sizeof p, "%s/%s", tdir, name);
        FILE *f = fopen(p, "w");
        fputs(text, f);
        fclose(f);
    }
    return tdir;
}

TEST(config_files) {
    fr_vl_proc_cfg c;
    fr_err e = {0};
    /* older flat preprocessor_config.json with min/max_pixels overriding size */
    const char *d = write_cfg("preprocessor_config.json",
                              "{\"min_pixels\": 3136, \"max_pixels\": 12845056, \"patch_size\": 14,"
                              " \"temporal_patch_size\": 2, \"merge_size\": 2, \"image_mean\": [0.5, 0.5, 0.5],"
                              " \"image_std\": [0.25, 0.5, 1.0], \"size\": {\"shortest_edge\": 1000, \"longest_edge\": 2000},"
                              " \"rescale_factor\": 0.00392156862745098, \"resample\": 3, \"do_convert_rgb\": true,"
                              " \"image_processor_type\": \"Qwen2VLImageProcessor\"}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == 0);
    CHECK(c.min_pixels == 3136 && c.max_pixels == 12845056 && c.patch == 14 && c.mean[0] == 0.5f && c.std[2] == 1.0f);
    CHECK(c.rescale == 1.0 / 255.0);
    /* transformers 5 processor_config.json: nested, size as shortest/longest edge */
    d = write_cfg("processor_config.json",
                  "{\"image_processor\": {\"size\": {\"shortest_edge\": 784, \"longest_edge\": 50176},"
                  " \"patch_size\": 4, \"merge_size\": 2, \"do_normalize\": false}, \"processor_class\": \"Qwen2_5_VLProcessor\"}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == 0);
    CHECK(c.min_pixels == 784 && c.max_pixels == 50176 && c.patch == 4 && !c.do_normalize && c.do_resize);
    CHECK(c.mean[1] == 0.4578275f && c.temporal == 2); /* defaults kept */
    /* bad values name the key */
    d = write_cfg("preprocessor_config.json", "{\"patch_size\": 14.5}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && strstr(e.msg, "patch_size"));
    d = write_cfg("preprocessor_config.json", "{\"image_mean\": [0.5, 0.5]}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && strstr(e.msg, "image_mean"));
    d = write_cfg("preprocessor_config.json", "{\"min_pixels\": 100}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_BAD_REQUEST && strstr(e.msg, "min_pixels"));
    d = write_cfg("preprocessor_config.json", "{\"resample\": 2}");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_UNSUPPORTED);
    d = write_cfg("preprocessor_config.json", "[1, 2]");
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    d = write_cfg(NULL, NULL);
    CHECK(fr_vl_proc_cfg_load(d, &c, &e) == -1 && e.code == FR_ERR_NOT_FOUND);
    rmdir(d);
}

int main(void) { return t_main(); }
