/* test_route.c — the stage plan (route/route.h): for each route, exactly which stages run and
 * the reasons of the skipped ones. */
#include <string.h>

#include "route/route.h"
#include "t.h"

/* "a,b,c": the stages that run, in order. */
static void ran(const fr_route_plan *p, char *out, size_t cap) {
    out[0] = 0;
    for (int s = 0; s < FR_STAGE_COUNT; s++)
        if (p->run[s]) {
            if (out[0]) strncat(out, ",", cap - strlen(out) - 1);
            strncat(out, fr_stage_name((fr_stage)s), cap - strlen(out) - 1);
        }
}

TEST(text_only_runs_nlu_only) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_text = true;
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "nlu,template");
    CHECK_STR(p.reason[FR_STAGE_ASR], "no audio");
    CHECK_STR(p.reason[FR_STAGE_OCR], "no image");
    CHECK_STR(p.reason[FR_STAGE_LLM], "no LLM configured: reply from templates");
}

TEST(voice_runs_asr_and_nlu) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_audio = true;
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_audio,asr,nlu,template");
    CHECK_STR(p.reason[FR_STAGE_DECODE_IMAGE], "no image");
}

TEST(text_image_runs_ocr_not_vision) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_image = true;
    fr_route_plan p;
    fr_route_plan_make(&in, &p); /* first pass: decode and measure */
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,template");
    CHECK_STR(p.reason[FR_STAGE_OCR], "needs the text density");
    in.image_decoded = true;
    in.density = 0.8;
    fr_route_plan_make(&in, &p);
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,ocr,nlu,template");
    CHECK(p.image_is_text);
    CHECK(strstr(p.reason[FR_STAGE_VISION], "mostly text") != NULL);
    CHECK_STR(p.reason[FR_STAGE_ASR], "no audio"); /* speech off without audio */
}

TEST(picture_reports_vision_unavailable_and_no_ocr) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_image = true;
    in.image_decoded = true;
    in.density = 0.05;
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,template");
    CHECK(!p.image_is_text);
    CHECK(strstr(p.reason[FR_STAGE_VISION], "unavailable") != NULL);
    CHECK(strstr(p.reason[FR_STAGE_OCR], "picture") != NULL);
    CHECK_STR(p.reason[FR_STAGE_NLU], "no text, transcript or OCR text");
}

TEST(threshold_is_respected_at_the_boundary) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_image = in.image_decoded = true;
    in.threshold = 0.6;
    in.density = 0.6;
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    CHECK(p.run[FR_STAGE_OCR]);
    in.density = 0.5999;
    fr_route_plan_make(&in, &p);
    CHECK(!p.run[FR_STAGE_OCR]);
}

TEST(unavailable_stage_and_dependants_are_skipped_with_reason) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_text = in.has_audio = true;
    in.available[FR_STAGE_ASR] = false;
    in.unavailable_reason[FR_STAGE_ASR] = "unavailable: ASR stage not built";
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_audio,nlu,template");
    CHECK_STR(p.reason[FR_STAGE_ASR], "unavailable: ASR stage not built");
    in.available[FR_STAGE_DECODE_IMAGE] = false;
    in.has_image = true;
    fr_route_plan_make(&in, &p);
    CHECK(!p.run[FR_STAGE_DENSITY] && !p.run[FR_STAGE_OCR] && !p.run[FR_STAGE_VISION]);
    CHECK_STR(p.reason[FR_STAGE_OCR], "needs the decoded image");
}

TEST(llm_route_runs_budget_and_llm) {
    fr_route_input in;
    fr_route_input_init(&in);
    in.has_text = true;
    in.llm = true;
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "nlu,budget,llm");
    CHECK_STR(p.reason[FR_STAGE_TEMPLATE], "the LLM writes the reply");
}

/* ---- pictures with a vision-language model ---- */

static void vlm_input(fr_route_input *in, double density, bool visual) {
    fr_route_input_init(in);
    in->has_text = in->has_image = in->image_decoded = true;
    in->density = density;
    in->llm = true;
    in->available[FR_STAGE_VISION] = true; /* a VLM is loaded */
    in->unavailable_reason[FR_STAGE_VISION] = NULL;
    in->question_visual = visual;
}

TEST(photo_goes_to_the_vlm_with_pruning) {
    fr_route_input in;
    vlm_input(&in, 0.05, false);
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,vision,nlu");
    CHECK_NEAR(p.vision_keep_ratio, FR_ROUTE_PHOTO_KEEP_RATIO, 0);
    CHECK(p.vision_keep_ratio < 1);
    CHECK(strstr(p.vision_why, "picture") != NULL);
    CHECK(strstr(p.reason[FR_STAGE_OCR], "picture") != NULL);
    CHECK(strstr(p.reason[FR_STAGE_LLM], "vision-language model answers") != NULL);
    CHECK(strstr(p.reason[FR_STAGE_TEMPLATE], "vision-language model answers") != NULL);
    in.nlu = FR_ROUTE_NLU_CONFIDENT; /* even a confident intent: the picture's answer */
    fr_route_plan_reply(&in, &p);
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,vision,nlu");
    CHECK(!p.handoff);
}

TEST(document_ocr_answers_stays_ocr) {
    fr_route_input in;
    vlm_input(&in, 0.8, false);
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,ocr,nlu,budget,llm");
    CHECK(strstr(p.reason[FR_STAGE_VISION], "OCR answers") != NULL);
}

TEST(document_whose_question_needs_the_picture_goes_to_the_vlm_at_a_larger_budget) {
    fr_route_input in;
    vlm_input(&in, 0.8, true);
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,vision,nlu");
    CHECK(p.image_is_text);
    CHECK_NEAR(p.vision_keep_ratio, FR_ROUTE_DOCUMENT_KEEP_RATIO, 0);
    CHECK(p.vision_keep_ratio > FR_ROUTE_PHOTO_KEEP_RATIO);
    CHECK(strstr(p.reason[FR_STAGE_OCR], "needs the picture") != NULL);
    CHECK(strstr(p.vision_why, "larger budget") != NULL);
}

TEST(without_a_vlm_the_old_routes_stay) {
    fr_route_input in;
    vlm_input(&in, 0.8, true);
    in.available[FR_STAGE_VISION] = false; /* no VLM: a document goes to OCR whatever asked */
    in.unavailable_reason[FR_STAGE_VISION] = "unavailable: no vision-language model loaded";
    fr_route_plan p;
    fr_route_plan_make(&in, &p);
    char b[256];
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,ocr,nlu,budget,llm");
    vlm_input(&in, 0.05, false);
    in.available[FR_STAGE_VISION] = false;
    in.unavailable_reason[FR_STAGE_VISION] = "unavailable: no vision-language model loaded";
    fr_route_plan_make(&in, &p);
    ran(&p, b, sizeof b);
    CHECK_STR(b, "decode_image,density,nlu,budget,llm");
    CHECK_STR(p.reason[FR_STAGE_VISION], "unavailable: no vision-language model loaded");
}

TEST(visual_questions) {
    const char *why = NULL;
    CHECK(fr_route_question_visual("What colour is the card in the photo?", &why));
    CHECK_STR(why, "colour");
    CHECK(fr_route_question_visual("Is the SIGNATURE on this cheque genuine?", &why));
    CHECK(fr_route_question_visual("what does the logo look like", NULL));
    CHECK(fr_route_question_visual("Is my card damaged?", NULL));
    CHECK(!fr_route_question_visual("What is the amount due on this invoice?", &why));
    CHECK(why == NULL);
    CHECK(!fr_route_question_visual("When is the payment date?", NULL));
    CHECK(!fr_route_question_visual("unseen", NULL)); /* word starts only */
    CHECK(!fr_route_question_visual(NULL, NULL));
}

int main(void) { return t_main(); }
