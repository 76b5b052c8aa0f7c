/* vision.c — the CUDA vision tower (backend/cuda/cuda_vision.h) against the CPU tower
 * (fr_vision_forward, fp32, equal to HF to 1e-6) and against HF's image features:
 *   - the fixtures qwen25vl-tiny (RMSNorm, SwiGLU, windows + full attention, head_dim 16) and
 *     qwen2vl-tiny (LayerNorm, quick_gelu, full attention), on every case of their ref.json
 *     that has pixel values (HF's own pixel values; one and two images per call);
 *   - a random Qwen2.5-VL tower of a mid shape (hidden 320, 4 heads of head_dim 80 as the 7B,
 *     SwiGLU 640, window 112, full attention at blocks 1 and 3, out 512) on two images of
 *     different sizes in one call, one of them not a whole number of windows;
 *   - fr_cuda_vision_forward_rgb (8-bit RGB patchified on the device through the processor's
 *     table) against fr_vl_preprocess + fr_cuda_vision_forward on the same image: bit-identical
 *     features (the same bf16 pixels enter the same tower), and a size that is not a multiple of
 *     patch * merge refused.
 * Tolerance: the GPU rounds the weights and every product's input to bf16 (fp32 accumulation,
 * fp32 residual stream, norms and softmax); features rel L2 < 2e-2 against fp32. A missing
 * fixture file is a FAIL. Without a GPU it prints that and exits 0.
 *
 *   gpu-vision [FIXTURES_DIR]     (default tests/fixtures)
 *   gpu-vision --bench            ViT milliseconds of a random Qwen2.5-VL-7B-shape tower at
 *                                 448, 896 and 1344 pixels a side (no checks)
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vision.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_vision.h"
#include "base/base.h"
#include "base/npy.h"
#include "stages/image/vlproc.h"

#define TOL 2e-2

static int n_pass, n_fail;

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}
static void report(const char *name, double e) {
    const bool ok = e <= TOL; /* NaN fails */
    printf("%-4s %-64s rel_l2 %.2e  (tol %.0e)\n", ok ? "ok" : "FAIL", name, e, TOL);
    fflush(stdout);
    if (ok) n_pass++; else n_fail++;
}
static void fail(const char *what, const char *msg) {
    printf("FAIL %s: %s\n", what, msg);
    n_fail++;
}

/* CUDA vs CPU (and vs HF's features when hf != NULL) on one call. */
static void compare(const char *name, const fr_model *m, fr_cuda_vision *cv, const float *pix,
                    int64_t n_patches, const int32_t *grid, int n_images, const float *hf,
                    int64_t hf_n) {
    fr_err err = {0};
    const int64_t nt = fr_vision_n_tokens(&m->vision->hp, grid, n_images);
    if (nt < 0) {
        fail(name, "invalid grid");
        return;
    }
    const size_t n_out = (size_t)nt * m->vision->hp.out_hidden;
    float *cpu = malloc(n_out * sizeof(float)), *gpu = malloc(n_out * sizeof(float));
    FR_ASSERT(cpu && gpu);
    memset(gpu, 0xFF, n_out * sizeof(float)); /* NaN until written */
    char label[160];
    if (fr_vision_forward(m, NULL, pix, n_patches, grid, n_images, cpu, &err) != 0) {
        fail(name, err.msg);
    } else if (fr_cuda_vision_forward(cv, pix, n_patches, grid, n_images, gpu, &err) != 0) {
        fail(name, err.msg);
    } else {
        snprintf(label, sizeof label, "%s vs CPU tower (%lld tokens)", name, (long long)nt);
        report(label, rel_l2(gpu, cpu, n_out));
        if (hf) {
            snprintf(label, sizeof label, "%s vs HF image_embeds", name);
            if (hf_n != (int64_t)n_out) fail(label, "the reference's size differs");
            else report(label, rel_l2(gpu, hf, n_out));
        }
    }
    free(cpu), free(gpu);
}

static void check_fixture(const char *dir, const char *fx) {
    char path[1024];
    fr_err err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, fx);
    fr_model *m = fr_model_load(path, &err);
    if (!m) {
        fail(fx, err.msg);
        return;
    }
    fr_cuda_vision *cv = m->vision ? fr_cuda_vision_new(m, 0, &err) : NULL;
    if (!cv) {
        fail(fx, m->vision ? err.msg : "no vision tower");
        fr_model_free(m);
        return;
    }
    snprintf(path, sizeof path, "%s/ref/%s/ref.json", dir, fx);
    size_t len;
    char *txt = fr_read_file(path, 16u << 20, &len, &err);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *cases = root ? cJSON_GetObjectItem(root, "cases") : NULL, *c;
    int done = 0;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *pv = cJSON_GetObjectItem(c, "pixel_values");
        const cJSON *ie = cJSON_GetObjectItem(c, "image_embeds");
        const cJSON *g = cJSON_GetObjectItem(c, "image_grid_thw"), *gi;
        const cJSON *nm = cJSON_GetObjectItem(c, "name");
        if (!cJSON_IsString(pv) || !cJSON_IsString(ie) || !cJSON_IsArray(g) || !cJSON_IsString(nm))
            continue; /* text-only cases */
        int32_t grid[3 * 8];
        int n_images = 0;
        cJSON_ArrayForEach(gi, g) {
            if (n_images == 8 || cJSON_GetArraySize(gi) != 3) break;
            for (int k = 0; k < 3; k++) grid[3 * n_images + k] = cJSON_GetArrayItem(gi, k)->valueint;
            n_images++;
        }
        char name[160];
        snprintf(name, sizeof name, "%s/%s", fx, nm->valuestring);
        fr_npy px = {0}, hf = {0};
        snprintf(path, sizeof path, "%s/ref/%s/%s", dir, fx, pv->valuestring);
        if (fr_npy_load_f32(path, &px, &err) != 0) {
            fail(name, err.msg);
            continue;
        }
        snprintf(path, sizeof path, "%s/ref/%s/%s", dir, fx, ie->valuestring);
        if (fr_npy_load_f32(path, &hf, &err) != 0) {
            fail(name, err.msg);
            fr_npy_free(&px);
            continue;
        }
        compare(name, m, cv, px.data, px.shape[0], grid, n_images, hf.data, hf.n);
        fr_npy_free(&px), fr_npy_free(&hf);
        done++;
    }
    if (!done) fail(fx, "no case with pixel values in ref.json (missing or unreadable)");
    cJSON_Delete(root);
    fr_cuda_vision_free(cv);
    fr_model_free(m);
}

/* ---------------------------------------------------------------- a random mid-shape tower */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}
/* A random tower of the shape hp into v (weights uniform, norms near 1, small biases); the
 * storage is one block *store the caller frees with free_rand_tower. */
static float *rtensor(fr_tensor *t, float *d, int64_t in, int64_t out, float amp, float offset) {
    for (int64_t i = 0; i < in * out; i++) d[i] = offset + amp * frand();
    memset(t, 0, sizeof *t);
    t->dtype = FR_DTYPE_F32;
    t->n_dims = out > 1 ? 2 : 1;
    t->ne[0] = in, t->ne[1] = out, t->ne[2] = t->ne[3] = 1;
    t->data = d;
    t->nbytes = (size_t)(in * out) * sizeof(float);
    return d + in * out;
}

static bool rand_tower(const fr_vision_hparams *hp, fr_vision *v, float **store) {
    memset(v, 0, sizeof *v);
    v->hp = *hp;
    const int64_t H = hp->hidden, F = hp->n_ff, PD = fr_vision_patch_dim(hp);
    const int64_t HM = H * hp->merge * hp->merge, O = hp->out_hidden;
    const int64_t per_block = 2 * H + 3 * H * H + 3 * H + H * H + H + 3 * F * H + 2 * F + H;
    const size_t total = (size_t)(H * PD + hp->depth * per_block + H + HM * HM + HM + O * HM + O);
    float *d = *store = malloc(total * sizeof(float));
    v->blocks = calloc((size_t)hp->depth, sizeof *v->blocks);
    if (!d || !v->blocks) {
        free(d), free(v->blocks);
        return false;
    }
    const float sh = 1.f / sqrtf((float)H), sf = 1.f / sqrtf((float)F), sm = 1.f / sqrtf((float)HM);
    d = rtensor(&v->patch_w, d, PD, H, 1.f / sqrtf((float)PD), 0);
    for (int l = 0; l < hp->depth; l++) {
        fr_vision_block *k = &v->blocks[l];
        d = rtensor(&k->norm1_w, d, H, 1, 0.2f, 1.f);
        d = rtensor(&k->norm2_w, d, H, 1, 0.2f, 1.f);
        d = rtensor(&k->qkv_w, d, H, 3 * H, sh, 0);
        d = rtensor(&k->qkv_b, d, 3 * H, 1, 0.1f, 0);
        d = rtensor(&k->proj_w, d, H, H, sh, 0);
        d = rtensor(&k->proj_b, d, H, 1, 0.1f, 0);
        d = rtensor(&k->gate_w, d, H, F, sh, 0);
        d = rtensor(&k->gate_b, d, F, 1, 0.1f, 0);
        d = rtensor(&k->up_w, d, H, F, sh, 0);
        d = rtensor(&k->up_b, d, F, 1, 0.1f, 0);
        d = rtensor(&k->down_w, d, F, H, sf, 0);
        d = rtensor(&k->down_b, d, H, 1, 0.1f, 0);
    }
    d = rtensor(&v->merger_ln_w, d, H, 1, 0.2f, 1.f);
    d = rtensor(&v->merger_fc1_w, d, HM, HM, sm, 0);
    d = rtensor(&v->merger_fc1_b, d, HM, 1, 0.1f, 0);
    d = rtensor(&v->merger_fc2_w, d, HM, O, sm, 0);
    d = rtensor(&v->merger_fc2_b, d, O, 1, 0.1f, 0);
    FR_ASSERT(d == *store + total);
    return true;
}

/* Qwen2.5-VL's shape with the given widths (patch 14, temporal 2, merge 2, window 112). */
static fr_vision_hparams q25_shape(int depth, int hidden, int n_head, int n_ff, int out,
                                   const int *fullatt, int n_full) {
    fr_vision_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.kind = FR_VISION_QWEN25VL;
    hp.depth = depth, hp.hidden = hidden, hp.n_head = n_head, hp.head_dim = hidden / n_head;
    hp.n_ff = n_ff, hp.in_chans = 3, hp.patch = 14, hp.temporal = 2, hp.merge = 2;
    hp.window_size = 112, hp.out_hidden = out, hp.eps = 1e-6f, hp.rope_theta = 10000.f;
    for (int i = 0; i < n_full; i++) hp.fullatt[fullatt[i]] = true;
    return hp;
}

static void check_random_mid(void) {
    const int fa[] = {1, 3};
    const fr_vision_hparams hp = q25_shape(4, 320, 4, 640, 512, fa, 2); /* head_dim 80 */
    fr_vision v;
    float *store;
    char nm[] = "random-qwen25vl-mid";
    if (!rand_tower(&hp, &v, &store)) {
        fail(nm, "out of host memory");
        return;
    }
    fr_model m;
    memset(&m, 0, sizeof m);
    m.name = nm;
    m.vision = &v;
    fr_err err = {0};
    fr_cuda_vision *cv = fr_cuda_vision_new(&m, 0, &err);
    if (!cv) {
        fail(nm, err.msg);
    } else {
        /* 20 x 28 patches (windows of 8 x 8: 3 x 4 with cut ones) and 10 x 6 in one call */
        const int32_t grid[6] = {1, 20, 28, 1, 10, 6};
        const int64_t PD = fr_vision_patch_dim(&hp), n = 20 * 28 + 10 * 6;
        float *pix = malloc((size_t)(n * PD) * sizeof(float));
        FR_ASSERT(pix);
        for (int64_t i = 0; i < n * PD; i++) pix[i] = 2.f * frand();
        compare("random-qwen25vl-mid(H320,D80,win112) 2 images", &m, cv, pix, n, grid, 2, NULL, 0);
        /* background units dropped before the tower (a pattern over both images, image 2's
         * last units all gone): the kept rows against the CPU tower's kept rows */
        {
            const int64_t units = n / 4;
            uint8_t *keep = malloc((size_t)units);
            FR_ASSERT(keep);
            int64_t k = 0;
            for (int64_t u = 0; u < units; u++) k += (keep[u] = (u % 3 != 1 && u < units - 5));
            const int O = hp.out_hidden;
            float *cpu = malloc((size_t)(k * O) * 4), *gpu = malloc((size_t)(k * O) * 4);
            FR_ASSERT(cpu && gpu);
            memset(gpu, 0xFF, (size_t)(k * O) * 4);
            if (fr_vision_forward_kept(&m, NULL, pix, n, grid, 2, keep, NULL, cpu, &err) != 0 ||
                fr_cuda_vision_forward_kept(cv, pix, n, grid, 2, keep, gpu, &err) != 0) {
                fail("random-qwen25vl-mid kept units", err.msg);
            } else {
                char label[160];
                snprintf(label, sizeof label, "random-qwen25vl-mid kept units (%lld of %lld) vs CPU "
                         "tower", (long long)k, (long long)units);
                report(label, rel_l2(gpu, cpu, (size_t)(k * O)));
            }
            free(keep), free(cpu), free(gpu);
        }
        /* the same handle again on a smaller call (buffers reused) */
        compare("random-qwen25vl-mid 1 image, buffers reused", &m, cv, pix, 10 * 6, grid + 3, 1,
                NULL, 0);
        free(pix);
        fr_cuda_vision_free(cv);
    }
    free(v.blocks);
    free(store);
}

/* The device patchify against the host preprocessing, on fixture fx's tower. */
static void check_rgb(const char *dir, const char *fx) {
    char path[512], nm[160];
    snprintf(path, sizeof path, "%s/%s", dir, fx);
    snprintf(nm, sizeof nm, "%s: forward_rgb == preprocess + forward (bit-identical)", fx);
    fr_err err = {0};
    fr_model *m = fr_model_load(path, &err);
    fr_vl_proc_cfg cfg;
    if (!m || fr_vl_proc_cfg_load(path, &cfg, &err)) {
        fail(nm, err.msg);
        fr_model_free(m);
        return;
    }
    fr_cuda_vision *cv = fr_cuda_vision_new(m, 0, &err);
    if (!cv) {
        fail(nm, err.msg);
        fr_model_free(m);
        return;
    }
    const int f = cfg.patch * cfg.merge, W = 4 * f, H = 2 * f; /* 112 x 56: within min / max */
    fr_image im = {malloc((size_t)W * H * 3), (uint32_t)W, (uint32_t)H, 3};
    for (size_t i = 0; i < (size_t)W * H * 3; i++) im.pix[i] = (uint8_t)(frand() * 127.5f + 127.5f);
    fr_vl_pixels px = {0};
    float lut[3 * 256];
    fr_vl_proc_lut(&cfg, lut);
    const int32_t grid[3] = {1, H / cfg.patch, W / cfg.patch};
    const int64_t nt = fr_vision_n_tokens(&m->vision->hp, grid, 1);
    const size_t O = (size_t)m->vision->hp.out_hidden;
    float *a = malloc((size_t)nt * O * 4), *b = malloc((size_t)nt * O * 4);
    int rc = fr_vl_preprocess(&im, &cfg, &px, &err);
    if (!rc && (px.grid_h != grid[1] || px.grid_w != grid[2])) {
        fr_err_set(&err, "the processor resized %dx%d", W, H);
        rc = -1;
    }
    if (!rc) rc = fr_cuda_vision_forward(cv, px.data, px.n_patches, grid, 1, a, &err);
    if (!rc) rc = fr_cuda_vision_forward_rgb(cv, im.pix, H, W, lut, b, &err);
    if (rc) {
        fail(nm, err.msg);
    } else {
        const bool same = !memcmp(a, b, (size_t)nt * O * 4);
        printf("%-4s %-64s %s\n", same ? "ok" : "FAIL", nm, same ? "" : "features differ");
        if (same) n_pass++; else n_fail++;
    }
    fr_err e2 = {0};
    const bool refused = fr_cuda_vision_forward_rgb(cv, im.pix, H - 1, W, lut, b, &e2) == -1 &&
                         e2.code == FR_ERR_BAD_REQUEST;
    printf("%-4s %-64s %s\n", refused ? "ok" : "FAIL", "forward_rgb refuses a side off the grid",
           e2.msg);
    if (refused) n_pass++; else n_fail++;
    fr_vl_pixels_free(&px);
    free(im.pix), free(a), free(b);
    fr_cuda_vision_free(cv);
    fr_model_free(m);
}

/* --bench: a random tower of the Qwen2.5-VL-7B shape, one image per call at 448, 896 and 1344
 * pixels a side (the call as fr_cuda_vision_forward makes it: plan, pixel upload, tower,
 * features back to the host); mean of 5 timed calls after one warm-up. */
static int bench_7b(void) {
    const int fa[] = {7, 15, 23, 31};
    const fr_vision_hparams hp = q25_shape(32, 1280, 16, 3420, 3584, fa, 4);
    fr_vision v;
    float *store;
    if (!rand_tower(&hp, &v, &store)) {
        printf("gpu-vision --bench: out of host memory\n");
        return 1;
    }
    fr_model m;
    memset(&m, 0, sizeof m);
    char nm[] = "random-qwen25vl-7b-shape";
    m.name = nm;
    m.vision = &v;
    fr_err err = {0};
    fr_cuda_vision *cv = fr_cuda_vision_new(&m, 0, &err);
    int rc = 0;
    if (!cv) {
        printf("gpu-vision --bench: %s\n", err.msg);
        rc = 1;
    }
    const int sides[] = {448, 896, 1344};
    for (int s = 0; cv && s < 3; s++) {
        const int g = sides[s] / 14;
        const int32_t grid[3] = {1, g, g};
        const int64_t n = (int64_t)g * g, PD = fr_vision_patch_dim(&hp), nt = n / 4;
        float *pix = malloc((size_t)(n * PD) * sizeof(float));
        float *out = malloc((size_t)(nt * hp.out_hidden) * sizeof(float));
        FR_ASSERT(pix && out);
        for (int64_t i = 0; i < n * PD; i++) pix[i] = 2.f * frand();
        double t = 0;
        for (int it = 0; it < 6 && rc == 0; it++) {
            const double t0 = fr_time_s();
            if (fr_cuda_vision_forward(cv, pix, n, grid, 1, out, &err) != 0) {
                printf("gpu-vision --bench: %s\n", err.msg);
                rc = 1;
            }
            if (it) t += fr_time_s() - t0;
        }
        if (rc == 0)
            printf("vit %dx%d: %lld patches, %lld tokens, %.2f ms (mean of 5)\n", sides[s],
                   sides[s], (long long)n, (long long)nt, t / 5 * 1e3);
        free(pix), free(out);
    }
    fr_cuda_vision_free(cv);
    free(v.blocks);
    free(store);
    return rc;
}

int main(int argc, char **argv) {
    const bool bench = argc > 1 && !strcmp(argv[1], "--bench");
    const char *dir = argc > 1 && !bench ? argv[1] : "tests/fixtures";
    if (fr_cuda_device_count() <= 0) {
        printf("gpu-vision: no CUDA device: skipped (the program builds and links)\n");
        printf("0 passed, 0 failed\n");
        return 0;
    }
    if (bench) return bench_7b();
    check_fixture(dir, "qwen25vl-tiny");
    check_fixture(dir, "qwen2vl-tiny");
    check_random_mid();
    check_rgb(dir, "qwen25vl-tiny");
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
