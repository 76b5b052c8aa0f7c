/* eval_vqa.h — `frugal eval-vqa`: answer quality, latency and energy of a VLM per visual-token
 * keep ratio and per token budget, against plain downsampling to the same token counts.
 *
 *   frugal eval-vqa --model DIR --data FILE.jsonl [--keep-ratios 1,0.5,0.25,0.1]
 *                   [--budgets N,...] [--no-baseline] [--max-tokens 16] [--max-samples N]
 *                   [--threads N] [--json] [--quiet]
 *
 * Samples as tools/vl_sample.h ({image | pixel_values + grid_thw, question, answers}). Each
 * sample's image features are computed once (the encoder's output serves every setting, as the
 * encoder cache does); then for each setting the image tokens are cut to the kept count by the
 * query-guided pruning of stages/vision/prune.h ("prune") and, unless --no-baseline, by plain
 * spatial downsampling (average pooling of grid cells, fr_vision_downsample_pool: "downsample"),
 * kept tokens keeping their original M-RoPE positions; the answer is generated greedily on the
 * CPU (engine/generate.h) and scored by exact match and ANLS (tools/vqa_score.h) against the
 * sample's answers. Latency per sample = vision tower + selection + prefill + decode; joules
 * per sample from the host CPU's RAPL counters, or the meter's process-CPU-time estimate where
 * RAPL cannot be read (the source is printed). Samples without answers are generated but not
 * scored. Output: a table on stdout, or one JSON object with --json (with every prediction).
 */
#ifndef FRUGAL_TOOLS_EVAL_VQA_H
#define FRUGAL_TOOLS_EVAL_VQA_H

int fr_cmd_eval_vqa(int argc, char **argv);

#endif
