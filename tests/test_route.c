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

int main(void) { return t_main(); }
