/* prune.h — query-guided pruning of a VLM's visual tokens after the merger, and the baseline it
 * is measured against (plain spatial downsampling to the same token count).
 *
 * Usage (one image; the caller owns every buffer):
 *
 *   fr_vision_prune_params p = fr_vision_prune_default_params();
 *   p.keep_ratio = 0.25;                            // and/or p.max_image_tokens = 256
 *   fr_vision_prune_input in = {.feat = feat, .n = n, .d = d, .pos = pos,   // (n, d), (3, n)
 *                               .query = qemb, .query_w = qw, .m = m};     // (m, d), (m)
 *   int64_t *kept = malloc(n * sizeof *kept);       // capacity n
 *   int32_t *kept_pos = malloc(3 * n * sizeof *kept_pos);
 *   fr_vision_prune_report rep;
 *   int64_t k = fr_vision_prune_select(&in, &p, kept, kept_pos, NULL, &rep, &err);
 *   if (k < 0) -> err.code is FR_ERR_BAD_REQUEST (a bad parameter) or FR_ERR_INTERNAL (no memory)
 *   // kept[0..k) are row indices of feat in increasing order; kept_pos holds their original
 *   // t/h/w positions (row t first, stride k); fr_vision_prune_gather compacts the features.
 *
 * Design (docs/VISION.md, "Pruning"). It runs on the merger's output, so it needs no attention
 * map (flash attention and CUDA graphs stay on) and the cached encoder output serves every
 * question. Three steps, all fp32 with double where a sum over many terms needs it:
 *   1. Relevance. Visual features are centred on their mean over the image (the component that
 *      every token shares says nothing about where the answer is). For visual token i and
 *      question token j, s_ij = cos(v_i - mean, q_j); r_i is a weighted soft maximum over the
 *      question tokens, tau * log(sum_j w_j exp(s_ij / tau) / sum_j w_j) (tau -> 0: the max;
 *      tau large: the weighted mean). Weight 0 drops a token (template and stop tokens, see
 *      fr_vision_prune_is_stopword). r is min-max normalised over the image to [0, 1]. Without a
 *      question (m == 0 or every weight 0) all relevances are 1 and only diversity decides.
 *   2. Diversity. dist(i, j) = (1 - cos(x_i, x_j)) / 2 in [0, 1] over the centred features x,
 *      or over an r-dimensional count sketch of them when d > sketch_dim (feature c goes to
 *      bucket c mod r with a fixed pseudo-random sign; inner products are kept in expectation,
 *      and the sketch costs one vectorised pass).
 *   3. Greedy selection, k steps: pick the token maximising
 *          theta * r_i + (1 - theta) * log(D_i),   D_i = min over kept j of dist(i, j)
 *      (D_i = 1 before the first pick; ties go to the higher relevance, then the lower index).
 *      This is the greedy MAP step of a conditional DPP (CDPruner) with the distance to the span
 *      of the kept set replaced by the distance to the nearest kept token (DivPrune's max-min
 *      criterion): a near-duplicate of a kept token scores log(0) and comes last, it keeps
 *      working past the features' rank, and each step costs O(n * r) at most. theta = 1 is
 *      relevance only (top-k), theta = 0 is DivPrune's max-min diversity alone. The scores only
 *      fall as tokens are kept, so the greedy runs lazily (a heap of upper bounds, Minoux's
 *      accelerated greedy): the same picks, most distances never computed.
 * The kept set is returned in the original order; the caller keeps each kept token's original
 * M-RoPE position, so nothing downstream is renumbered.
 *
 * Cost: O(n*d) for centring and the sketch, O(n*m*d) for relevance, at most O(k*n*r) for the
 * selection (lazy: far less in practice); nothing when every token is kept.
 *
 * Thread safety: pure functions of their arguments; no global state. Inputs are read only.
 */
#ifndef FRUGAL_VISION_PRUNE_H
#define FRUGAL_VISION_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_VISION_PRUNE_NO_BUDGET INT64_MAX /* max_image_tokens: no cap */
#define FR_VISION_PRUNE_MAX_TOKENS (1 << 20) /* n (image tokens of one call) */
#define FR_VISION_PRUNE_MAX_DIM 65536        /* d, sketch_dim */
#define FR_VISION_PRUNE_MAX_QUERY 65536      /* m (question tokens) */

/* How many tokens to keep and how to choose them. */
typedef struct fr_vision_prune_params {
    double keep_ratio;        /* share of the tokens kept, in (0, 1]; default 1 */
    int64_t max_image_tokens; /* cap on the kept count (>= 1) or FR_VISION_PRUNE_NO_BUDGET
                                 (default); the tighter of ratio and cap wins, at least 1 kept */
    float relevance_weight;   /* theta in [0, 1]: relevance against diversity; default 0.5 */
    float temperature;        /* tau > 0 of the soft maximum over question tokens; default 0.1 */
    int sketch_dim;           /* distances on a sketch of this width when d is larger; 0: exact
                                 distances in d dimensions; default 128 */
} fr_vision_prune_params;

fr_vision_prune_params fr_vision_prune_default_params(void);

/* One image's tokens (or several images' tokens concatenated: the function does not care). */
typedef struct fr_vision_prune_input {
    const float *feat;     /* (n, d) merger output = the LLM's input embeddings of the tokens */
    int64_t n;             /* tokens, 1 .. FR_VISION_PRUNE_MAX_TOKENS */
    int d;                 /* feature width (the LLM's hidden size), 1 .. FR_VISION_PRUNE_MAX_DIM */
    const int32_t *pos;    /* optional (3, n): the tokens' M-RoPE t, h, w positions (row t first,
                              stride n); copied to kept_pos for the kept tokens; NULL: none */
    const float *query;    /* (m, d) the question's token embeddings (the LLM's embedding rows of
                              the question's tokens); NULL when m == 0 */
    const float *query_w;  /* optional (m): weight >= 0 of each question token (0 ignores it);
                              NULL: all 1 */
    int64_t m;             /* question tokens, 0 .. FR_VISION_PRUNE_MAX_QUERY */
} fr_vision_prune_input;

/* What one selection did. */
typedef struct fr_vision_prune_report {
    int64_t n;            /* tokens offered */
    int64_t n_kept;       /* tokens kept */
    float rel_min;        /* raw relevance (soft-max cosine) range over the tokens; 0 and 0 */
    float rel_max;        /* when there was no question */
    float kept_relevance; /* mean normalised relevance of the kept tokens, in [0, 1] (1 when
                             every token was kept and relevance was not asked for) */
    int sketch_dim;       /* width the distances were computed in (d when exact) */
    double ms;            /* wall time of the call */
} fr_vision_prune_report;

/* The kept count for n tokens: round(keep_ratio * n), capped by max_image_tokens, in [1, n].
 * -1 with err (FR_ERR_BAD_REQUEST) for n < 1 or n over the cap, a ratio that is not a finite
 * number in (0, 1], or a cap below 1. */
int64_t fr_vision_prune_keep_count(int64_t n, const fr_vision_prune_params *p, fr_err *err);

/* Kept counts for the images of one request: the ratio applies to each image (at least 1
 * each); when their sum exceeds max_image_tokens, the cap is shared out in proportion to those
 * counts (each image keeps at least 1; largest remainders first, ties to the earlier image).
 * k_out gets n_images counts. 0, or -1 with err (FR_ERR_BAD_REQUEST): bad parameters, an image
 * with no tokens, n_images < 1, or a cap below the number of images. */
int fr_vision_prune_keep_counts(const int64_t *n_tokens, int n_images,
                                const fr_vision_prune_params *p, int64_t *k_out, fr_err *err);

/* Selects the tokens to keep (design above). kept: caller buffer of capacity n, gets the kept
 * row indices in increasing order. kept_pos: optional (needs in->pos), capacity 3 * n, gets the
 * kept tokens' positions as (3, k): t row, then h, then w. relevance: optional [n], gets each
 * token's normalised relevance. rep: optional. Returns k >= 1, or -1 with err:
 * FR_ERR_BAD_REQUEST for a bad parameter or a non-finite feature or query value,
 * FR_ERR_TOO_LARGE when n * m exceeds 2^28, FR_ERR_INTERNAL when scratch memory (n * sketch width floats) cannot be allocated.
 * Deterministic: the same inputs give the same output. When every token is kept (k == n) and
 * relevance is NULL, the features are not read at all (keep_ratio 1 costs nothing). */
int64_t fr_vision_prune_select(const fr_vision_prune_input *in, const fr_vision_prune_params *p,
                               int64_t *kept, int32_t *kept_pos, float *relevance,
                               fr_vision_prune_report *rep, fr_err *err);

/* How well kept[0..k) (indices < n) covers the image: the mean over all n tokens of the
 * distance (1 - cos) / 2 to the nearest kept token, with the centred (and, when d > sketch_dim,
 * sketched) features of the selection, in [0, 1]; 0 when every token is kept or duplicated,
 * lower covers more. For benchmarks and tests (O(n * k * r)); -1 with err for bad arguments. */
double fr_vision_prune_coverage(const float *feat, int64_t n, int d, const int64_t *kept,
                                int64_t k, int sketch_dim, fr_err *err);

/* Copies rows kept[0..k) of feat (n, d) into out (k, d). Indices must be < n (asserted). */
void fr_vision_prune_gather(const float *feat, int64_t n, int d, const int64_t *kept, int64_t k,
                            float *out);

/* True when a question token's text (decoded, e.g. " the" or "?") carries no content for
 * relevance: empty, only whitespace / ASCII punctuation, or an English stop word (a short fixed
 * list: articles, pronouns, auxiliaries, prepositions, question words' helpers). The caller
 * gives such tokens weight 0, as it does the chat template's own tokens. */
bool fr_vision_prune_is_stopword(const char *piece, size_t len);

/* ---- the baseline: plain spatial downsampling to k tokens ---------------------------------
 * The merged grid (grid_t frames of grid_h x grid_w tokens, in the merger's raster order: t,
 * then h, then w; n = t * h * w) is cut into exactly k rectangular cells: k is shared over the
 * frames (largest remainder), each frame's k_f over hb bands of rows, hb = round(sqrt(k_f * h /
 * w)) kept within [ceil(k_f / w), min(h, k_f)], and band b gets floor((b+1) k_f / hb) -
 * floor(b k_f / hb) cells of equal width. Stride keeps the token at each cell's centre
 * (row (r0 + r1 - 1) / 2, column likewise); pool averages each cell's features and gives the
 * pooled token the centre token's position. Both return k, in increasing index order, or -1
 * with err (FR_ERR_BAD_REQUEST: a grid side < 1, n over FR_VISION_PRUNE_MAX_TOKENS, k not in
 * [1, n]). */
int64_t fr_vision_downsample_stride(int grid_t, int grid_h, int grid_w, int64_t k, int64_t *kept,
                                    fr_err *err);
/* feat (n, d) -> out_feat (k, d); pos optional (3, n) -> out_pos (3, k) (both or neither). */
int64_t fr_vision_downsample_pool(const float *feat, int d, const int32_t *pos, int grid_t,
                                  int grid_h, int grid_w, int64_t k, float *out_feat,
                                  int32_t *out_pos, fr_err *err);

#endif
