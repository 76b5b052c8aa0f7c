/* mrope.c — see mrope.h. Written from HF transformers 5.17's get_rope_index: the token types are
 * 1 for image tokens and 0 otherwise (the processor's mm_token_type_ids), itertools.groupby over
 * them gives the runs, and each image run consumes the next image_grid_thw row. */
#include "model/mrope.h"

#include <stdint.h>
#include <stdlib.h>

int64_t fr_vl_image_tokens(const int32_t grid_thw[3], int merge) {
    int64_t t = grid_thw[0], h = grid_thw[1], w = grid_thw[2];
    if (merge < 1 || t < 1 || h < 1 || w < 1 || h % merge || w % merge) return -1;
    int64_t n = t * (h / merge); /* < 2^62 */
    if (n > INT32_MAX / 4) return -1;
    n *= w / merge; /* < 2^60 */
    return n > INT32_MAX / 4 ? -1 : n;
}

static int check_grids(const int32_t *grid_thw, int n_images, int merge, fr_err *err) {
    if (n_images < 0 || n_images > FR_VL_MAX_IMAGES) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%d images (at most %d per prompt)", n_images,
                    FR_VL_MAX_IMAGES);
        return -1;
    }
    for (int i = 0; i < n_images; i++)
        if (fr_vl_image_tokens(grid_thw + 3 * i, merge) < 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "image %d: bad grid [%d, %d, %d] for merge %d", i,
                        grid_thw[3 * i], grid_thw[3 * i + 1], grid_thw[3 * i + 2], merge);
            return -1;
        }
    return 0;
}

int fr_vl_expand_pads(const int32_t *ids, size_t n, int image_token_id, const int32_t *grid_thw,
                      int n_images, int merge, size_t max_out, int32_t **out, size_t *n_out,
                      fr_err *err) {
    *out = NULL;
    *n_out = 0;
    if (check_grids(grid_thw, n_images, merge, err)) return -1;
    size_t total = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != image_token_id) {
            total++;
            continue;
        }
        if (k == n_images) {
            k++;
            break;
        }
        total += (size_t)fr_vl_image_tokens(grid_thw + 3 * k++, merge);
    }
    if (k != n_images) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "the prompt has %s image placeholders than the %d "
                    "images given", k < n_images ? "fewer" : "more", n_images);
        return -1;
    }
    if (total > max_out) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "the prompt with its image tokens is %zu tokens (at "
                    "most %zu)", total, max_out);
        return -1;
    }
    int32_t *o = malloc((total ? total : 1) * sizeof *o);
    if (!o) {
        fr_err_set(err, "out of memory for %zu prompt ids", total);
        return -1;
    }
    size_t j = 0;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != image_token_id) {
            o[j++] = ids[i];
            continue;
        }
        for (int64_t c = fr_vl_image_tokens(grid_thw + 3 * k++, merge); c > 0; c--)
            o[j++] = image_token_id;
    }
    *out = o;
    *n_out = total;
    return 0;
}

int fr_vl_rope_index(const int32_t *ids, size_t n, int image_token_id, const int32_t *grid_thw,
                     int n_images, int merge, int32_t *pos, int32_t *delta, fr_err *err) {
    *delta = 0;
    if (check_grids(grid_thw, n_images, merge, err)) return -1;
    if (n > INT32_MAX / 4) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "a prompt of %zu tokens", n);
        return -1;
    }
    int32_t p = 0, max = -1;
    int k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        bool img = ids[i] == image_token_id;
        while (j < n && (ids[j] == image_token_id) == img) j++;
        if (!img) {
            for (size_t q = i; q < j; q++) pos[q] = pos[n + q] = pos[2 * n + q] = p++;
            max = FR_MAX(max, p - 1);
        } else {
            if (k == n_images) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "more runs of image tokens than the %d "
                            "images", n_images);
                return -1;
            }
            const int32_t *g = grid_thw + 3 * k;
            int64_t want = fr_vl_image_tokens(g, merge);
            if ((int64_t)(j - i) != want) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "image %d: %zu image tokens in the prompt, "
                            "its grid [%d, %d, %d] needs %lld", k, j - i, g[0], g[1], g[2],
                            (long long)want);
                return -1;
            }
            int lh = g[1] / merge, lw = g[2] / merge;
            size_t q = i;
            for (int ti = 0; ti < g[0]; ti++)
                for (int hi = 0; hi < lh; hi++)
                    for (int wi = 0; wi < lw; wi++, q++) {
                        pos[q] = p + ti;
                        pos[n + q] = p + hi;
                        pos[2 * n + q] = p + wi;
                    }
            int32_t top = p + FR_MAX(g[0] - 1, FR_MAX(lh, lw) - 1);
            max = FR_MAX(max, top);
            p += FR_MAX(g[1], g[2]) / merge;
            k++;
        }
        i = j;
    }
    if (k != n_images) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%d runs of image tokens for %d images", k, n_images);
        return -1;
    }
    *delta = n ? max + 1 - (int32_t)n : 0;
    return 0;
}
