/* rescore.c — joint ASR + intent choice over an n-best list. See rescore.h. */
#include "stages/asr/rescore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RESCORE_CONF_FLOOR 1e-4 /* log(conf) is bounded below: an unknown text is not -inf */

double fr_asr_joint(double score, float conf, double w) {
    double s = isfinite(score) ? FR_MIN(score, 0.0) : -1e30;
    return w * s + log(FR_MAX((double)conf, RESCORE_CONF_FLOOR));
}

int fr_asr_rescore(const fr_intent_model *m, const fr_asr_hyp *hyps, int n, double w,
                   fr_asr_pick *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    out->index = -1;
    out->label = -1;
    if (!m || n < 0 || n > FR_ASR_NBEST_MAX || (n && !hyps) || !isfinite(w) || w < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "asr rescore: bad arguments (n %d, weight %g)", n, w);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *t = hyps[i].text ? hyps[i].text : "";
        fr_intent_pred p;
        fr_intent_verdict v;
        int k = fr_intent_assess(m, t, strlen(t), &p, 1, &v, err);
        if (k < 0) return -1;
        float conf = k > 0 ? v.confidence : 0.0f;
        double j = fr_asr_joint(hyps[i].score, conf, w);
        if (out->index < 0 || j > out->joint) {
            out->index = i;
            out->joint = j;
            out->confidence = conf;
            out->label = k > 0 ? p.label : -1;
        }
    }
    return 0;
}

int fr_asr_result_rescore(const fr_intent_model *m, fr_asr_result *res, double w, fr_err *err) {
    if (!res->n_hyps) return 0;
    fr_asr_pick pk;
    if (fr_asr_rescore(m, res->hyps, res->n_hyps, w, &pk, err)) return -1;
    if (pk.index > 0) {
        free(res->text);
        res->text = fr_xstrdup(res->hyps[pk.index].text);
    }
    return pk.index;
}
