/* route.c — the stage plan (route.h): a pure function of the request's modalities, the image's
 * text density, stage availability and the reply mode. Every skipped stage gets a reason. */
#include "route/route.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

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

/* Words (prefixes at a word start) of questions about the picture itself. */
static const char *const visual_words[] = {
    "picture", "photo", "image", "look like", "looks like", "colour", "color", "logo", "signature", "signed",
    "stamp", "handwrit", "damage", "broken", "crack", "scratch", "chart", "graph", "diagram",
    "layout", "shown", "show", "see", "visible", "appear", "draw", "sketch", "screenshot",
};

bool fr_route_question_visual(const char *text, const char **why) {
    if (why) *why = NULL;
    if (!text) return false;
    for (const char *p = text; *p; p++) {
        if (!isalpha((unsigned char)*p) || (p > text && isalpha((unsigned char)p[-1]))) continue;
        for (size_t i = 0; i < sizeof visual_words / sizeof *visual_words; i++) {
            size_t n = strlen(visual_words[i]);
            if (!strncasecmp(p, visual_words[i], n)) {
                if (why) *why = visual_words[i];
                return true;
            }
        }
    }
    return false;
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
    /* a document goes to the VLM only when the question needs the picture and a VLM is there */
    bool doc_to_vlm = dens && p->image_is_text && in->question_visual &&
                      in->available[FR_STAGE_VISION];
    decide(in, p, FR_STAGE_OCR, dens && p->image_is_text && !doc_to_vlm,
           img_why       ? img_why
           : doc_to_vlm  ? "the question needs the picture: the vision-language model instead"
                         : "image is a picture (text density below the threshold): vision "
                           "instead");
    decide(in, p, FR_STAGE_VISION, dens && (!p->image_is_text || doc_to_vlm),
           img_why ? img_why : "image is mostly text (text density at or above the "
                               "threshold) and OCR answers the question: OCR instead");
    if (p->run[FR_STAGE_VISION]) {
        p->vision_keep_ratio = doc_to_vlm ? FR_ROUTE_DOCUMENT_KEEP_RATIO
                                          : FR_ROUTE_PHOTO_KEEP_RATIO;
        p->vision_why = doc_to_vlm ? "a document whose question needs the picture: the "
                                     "vision-language model at the larger budget"
                                   : "a picture: the vision-language model with pruning";
    }
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
    if (p->run[FR_STAGE_VISION]) { /* the vision-language model's generation is the reply */
        const char *why = "the vision-language model answers (the picture)";
        decide(in, p, FR_STAGE_BUDGET, false, why);
        decide(in, p, FR_STAGE_LLM, false, why);
        decide(in, p, FR_STAGE_TEMPLATE, false, why);
        return;
    }
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
