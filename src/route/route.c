/* route.c — the stage plan (route.h): a pure function of the request's modalities, the image's
 * text density, stage availability and the reply mode. Every skipped stage gets a reason. */
#include "route/route.h"

#include <stddef.h>

#include "stages/image/density.h"

static const char *const stage_names[FR_STAGE_COUNT] = {
    "decode_image", "density", "decode_audio", "asr",      "ocr",
    "vision",       "nlu",     "budget",       "llm",      "template",
};

const char *fr_stage_name(fr_stage s) {
    return (unsigned)s < FR_STAGE_COUNT ? stage_names[s] : "unknown";
}

void fr_route_input_init(fr_route_input *in) {
    *in = (fr_route_input){0};
    in->threshold = FR_DENSITY_DEFAULT_THRESHOLD;
    for (int i = 0; i < FR_STAGE_COUNT; i++) in->available[i] = true;
    in->available[FR_STAGE_VISION] = false;
    in->unavailable_reason[FR_STAGE_VISION] =
        "unavailable: vision (VLM) is not implemented in this build";
}

static const char *unavail(const fr_route_input *in, fr_stage s) {
    return in->unavailable_reason[s] ? in->unavailable_reason[s]
                                     : "unavailable: stage not built or not initialised";
}

/* Sets run/reason for stage s: runs when `need` holds and it is available. */
static void decide(const fr_route_input *in, fr_route_plan *p, fr_stage s, bool need,
                   const char *why_not) {
    if (!need) {
        p->run[s] = false;
        p->reason[s] = why_not;
    } else if (!in->available[s]) {
        p->run[s] = false;
        p->reason[s] = unavail(in, s);
    } else {
        p->run[s] = true;
        p->reason[s] = NULL;
    }
}

void fr_route_plan_make(const fr_route_input *in, fr_route_plan *p) {
    *p = (fr_route_plan){0};
    /* image: decode, then the density decides OCR versus vision */
    decide(in, p, FR_STAGE_DECODE_IMAGE, in->has_image, "no image");
    decide(in, p, FR_STAGE_DENSITY, p->run[FR_STAGE_DECODE_IMAGE],
           in->has_image ? "needs the decoded image" : "no image");
    bool dens = p->run[FR_STAGE_DENSITY] && in->image_decoded;
    p->image_is_text = dens && in->density >= in->threshold;
    const char *img_why = !in->has_image ? "no image"
                          : !p->run[FR_STAGE_DENSITY] ? "needs the decoded image"
                          : !in->image_decoded ? "needs the text density"
                                               : NULL;
    decide(in, p, FR_STAGE_OCR, dens && p->image_is_text,
           img_why ? img_why : "image is a picture (text density below the threshold): vision "
                               "instead");
    decide(in, p, FR_STAGE_VISION, dens && !p->image_is_text,
           img_why ? img_why : "image is mostly text (text density at or above the "
                               "threshold): OCR instead");
    /* audio: speech stages only when there is audio */
    decide(in, p, FR_STAGE_DECODE_AUDIO, in->has_audio, "no audio");
    decide(in, p, FR_STAGE_ASR, p->run[FR_STAGE_DECODE_AUDIO],
           in->has_audio ? "needs the decoded audio" : "no audio");
    /* NLU on typed text, the transcript or the OCR text */
    decide(in, p, FR_STAGE_NLU, in->has_text || p->run[FR_STAGE_ASR] || p->run[FR_STAGE_OCR],
           "no text, transcript or OCR text");
    fr_route_plan_reply(in, p);
}

void fr_route_plan_reply(const fr_route_input *in, fr_route_plan *p) {
    p->handoff = false;
    if (in->nlu == FR_ROUTE_NLU_CONFIDENT) {
        /* cascade, first step: a confident in-scope intent gets its template */
        const char *why = "a template answers: the intent is in scope and confident";
        decide(in, p, FR_STAGE_BUDGET, false, why);
        decide(in, p, FR_STAGE_LLM, false, why);
        decide(in, p, FR_STAGE_TEMPLATE, true, NULL);
        return;
    }
    /* pending (provisional) or unsure: the LLM when configured, else a hand-off */
    decide(in, p, FR_STAGE_BUDGET, in->llm, "no LLM configured: nothing to assemble");
    decide(in, p, FR_STAGE_LLM, in->llm,
           in->nlu == FR_ROUTE_NLU_UNSURE ? "no LLM configured: hand-off reply"
                                          : "no LLM configured: reply from templates");
    decide(in, p, FR_STAGE_TEMPLATE, !p->run[FR_STAGE_LLM],
           in->nlu == FR_ROUTE_NLU_UNSURE ? "out of scope or not confident: the LLM answers"
                                          : "the LLM writes the reply");
    p->handoff = in->nlu == FR_ROUTE_NLU_UNSURE && !p->run[FR_STAGE_LLM];
}
