/* rescore.h — choose among an utterance's n-best ASR hypotheses with the intent model.
 *
 * Design: each hypothesis h of the n-best list (asr.h, fr_asr_result.hyps) gets the joint score
 *     J(h) = asr_weight * score(h) + log(max(conf(h), 1e-4))
 * where score(h) is the ASR path score in nats relative to the best path (<= 0) and conf(h) the
 * calibrated probability of h's best in-scope intent (intent.h, fr_intent_assess). The
 * hypothesis with the largest J wins; ties go to the better ASR rank. asr_weight is small
 * because path scores are sums over ~100 frames per second of audio: a large weight keeps the
 * 1-best, a weight of 0 lets the intent model alone choose. The default weight was tuned on the
 * tuning speech set only (bench/asr/gen_tune.sh, bench/RESULTS.md).
 *
 * Thread safety: no state; the intent model is read-only, so calls may run on many threads.
 */
#ifndef FRUGAL_ASR_RESCORE_H
#define FRUGAL_ASR_RESCORE_H

#include "base/base.h"
#include "stages/asr/asr.h"
#include "stages/nlu/intent.h"

#define FR_ASR_RESCORE_WEIGHT 0.05 /* default asr_weight (per nat), chosen on the tuning set */

/* What the rescoring chose. */
typedef struct fr_asr_pick {
    int index;         /* chosen hypothesis (0 = the ASR 1-best), or -1 when n == 0 */
    double joint;      /* its J */
    float confidence;  /* its best in-scope intent's calibrated probability */
    int label;         /* that intent's label index in the model, or -1 */
} fr_asr_pick;

/* J of one hypothesis: w * min(score, 0) + log(max(conf, 1e-4)); a non-finite score counts as
 * a very bad path. */
double fr_asr_joint(double score, float conf, double w);

/* Rescore hyps[0..n) (n <= FR_ASR_NBEST_MAX) with model m and asr_weight w (>= 0; a negative or
 * non-finite w is an error). 0 with *out filled, or -1 with err (bad arguments, classification
 * failure). n == 0 gives out->index -1. */
int fr_asr_rescore(const fr_intent_model *m, const fr_asr_hyp *hyps, int n, double w,
                   fr_asr_pick *out, fr_err *err);

/* Replace res->text by the chosen hypothesis (res->hyps stay in ASR order) and return its index,
 * or -1 with err. A result without hypotheses is left unchanged (0). */
int fr_asr_result_rescore(const fr_intent_model *m, fr_asr_result *res, double w, fr_err *err);

#endif
