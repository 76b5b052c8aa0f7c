/* analyze_heads.h — `frugal analyze heads`: how redundant a VLM's attention heads are over the
 * image tokens, on the CPU reference decoder.
 *
 *   frugal analyze heads --model DIR --data FILE.jsonl --out DIR [--threshold 0.9]
 *                        [--rows last|text] [--max-samples N] [--threads N]
 *
 * For each sample (tools/vl_sample.h) the prompt runs through the CPU decoder once with its
 * attention-probability probe on (backend/cpu/decoder.h): for the captured rows (the prompt's
 * last position, or with --rows text every text position after the last image token) each
 * layer's and head's probabilities over the image tokens form one map per head (rows
 * concatenated). Per layer, the cosine similarity of every pair of heads' maps is averaged over
 * the samples. Written to DIR: heads.json (the matrices and the shares below), layer_NN.png (a
 * heatmap per layer, libpng) and index.html (one self-contained page with the heatmaps inline).
 * A pair is redundant when its mean similarity is >= the threshold; a head has a near-duplicate
 * partner when some other head of its layer forms such a pair with it.
 */
#ifndef FRUGAL_TOOLS_ANALYZE_HEADS_H
#define FRUGAL_TOOLS_ANALYZE_HEADS_H

#include "tools/vl_sample.h"

typedef enum fr_heads_rows {
    FR_HEADS_ROWS_LAST = 0, /* the prompt's last position */
    FR_HEADS_ROWS_TEXT,     /* every position after the last image token */
} fr_heads_rows;

typedef struct fr_heads_opts {
    fr_heads_rows rows;
    double threshold;   /* similarity at or above which a pair counts as redundant (0.9) */
    int n_threads;      /* decoder and tower threads, 0 = one per core */
    bool progress;      /* one line per sample on stderr */
} fr_heads_opts;

/* The result: sim (n_layer, n_head, n_head) of mean cosine similarities (diagonal 1). */
typedef struct fr_heads_result {
    int n_layer, n_head, n_samples;
    double *sim;
    int64_t image_tokens; /* image tokens summed over the samples */
} fr_heads_result;

/* Runs the analysis of samples[0..n) on m. Returns 0 and fills *res (free with
 * fr_heads_result_free), or -1 with err prefixed by the sample's id (codes of vl_sample.h and of
 * the decoder). */
int fr_heads_analyze(const fr_model *m, const fr_vl_sample *samples, int n,
                     const fr_heads_opts *o, fr_heads_result *res, fr_err *err);
void fr_heads_result_free(fr_heads_result *r);

/* Pairs i < j of one layer with sim >= threshold, and heads having such a partner. */
void fr_heads_layer_counts(const fr_heads_result *r, int layer, double threshold, int *pairs,
                           int *heads);

/* Writes heads.json, layer_NN.png and index.html into dir (created). 0, or -1 with err. */
int fr_heads_write(const fr_heads_result *r, const fr_heads_opts *o, const char *model,
                   const char *dir, fr_err *err);

int fr_cmd_analyze(int argc, char **argv);

#endif
