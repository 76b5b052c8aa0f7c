/* test_budget.c — the token budget assembler keeps the key fields, the latest turns and the
 * question at tight budgets, instead of cutting the tail. */
#include <cjson/cJSON.h>
#include <string.h>

#include "stages/budget/budget.h"
#include "t.h"

static cJSON *ticket(void) {
    cJSON *t = cJSON_CreateObject();
    for (int i = 0; i < 40; i++) {
        char k[32], v[96];
        snprintf(k, sizeof k, "line_item_%02d", i);
        snprintf(v, sizeof v, "Office supplies, assorted, batch %d of the quarterly order", i);
        cJSON_AddStringToObject(t, k, v);
    }
    cJSON_AddStringToObject(t, "invoice_number", "INV-2024-00123");
    cJSON_AddStringToObject(t, "total_amount", "1,240.50 EUR");
    cJSON_AddStringToObject(t, "issue_date", "2024-03-15");
    cJSON_AddStringToObject(t, "payee", "Acme Supplies Ltd");
    cJSON *sig = cJSON_AddObjectToObject(t, "security");
    cJSON_AddStringToObject(sig, "checksum", "9f8e7d6c");
    cJSON_AddStringToObject(sig, "signature", "MEUCIQDx");
    return t;
}

static const char *ocr_text =
    "ACME SUPPLIES LTD\n12 Long Road, Springfield\nThank you for your business\n"
    "Invoice No: INV-2024-00123\nItem one .... 10.00\nItem two .... 20.00\nItem three .... 30.00\n"
    "Total: 1,240.50 EUR\nWe appreciate prompt payment\nPlease recycle this paper\n";

TEST(key_fields_survive_tight_budget) {
    cJSON *t = ticket();
    fr_budget_turn hist[8];
    char buf[8][96];
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], sizeof buf[i], "turn %d: some earlier chit-chat about delivery times", i);
        hist[i].role = i % 2 ? "assistant" : "user";
        hist[i].text = buf[i];
    }
    hist[7].text = "The latest turn: I only see one payment in my account";
    int budgets[] = {200, 150, 100};
    for (size_t b = 0; b < FR_ARRAY_LEN(budgets); b++) {
        fr_budget_input in = {.question = "Why was I charged twice for this invoice?",
                              .ocr_text = ocr_text,
                              .ticket = t,
                              .history = hist,
                              .n_history = 8,
                              .budget_tokens = budgets[b]};
        fr_budget_result r;
        fr_err err = {0};
        CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), 0);
        CHECK(r.tokens <= budgets[b]);
        CHECK(fr_budget_estimate(r.text, strlen(r.text)) <= (size_t)budgets[b]);
        CHECK(strstr(r.text, "INV-2024-00123") != NULL);
        CHECK(strstr(r.text, "1,240.50 EUR") != NULL);
        CHECK(strstr(r.text, "2024-03-15") != NULL);
        CHECK(strstr(r.text, "Acme Supplies Ltd") != NULL);
        CHECK(strstr(r.text, "9f8e7d6c") != NULL);
        CHECK(strstr(r.text, "MEUCIQDx") != NULL);
        CHECK(strstr(r.text, "Why was I charged twice") != NULL);
        if (budgets[b] >= 150) CHECK(strstr(r.text, "The latest turn") != NULL);
        CHECK(strstr(r.text, "batch 39") == NULL); /* filler went first */
        CHECK(!strstr(r.text, "turn 0:"));         /* the oldest turn went too */
        fr_budget_result_free(&r);
    }
    cJSON_Delete(t);
}

TEST(everything_fits_in_a_large_budget_in_original_order) {
    cJSON *t = ticket();
    fr_budget_turn h[2] = {{"user", "hello"}, {"assistant", "hi, how can I help?"}};
    fr_budget_input in = {.question = "Where is my refund?", .ocr_text = ocr_text, .ticket = t,
                          .history = h, .n_history = 2, .budget_tokens = 100000};
    fr_budget_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), 0);
    CHECK_EQ_INT(r.pieces_kept, r.pieces_total);
    const char *a = strstr(r.text, "line_item_00"), *b = strstr(r.text, "line_item_39");
    CHECK(a && b && a < b);
    const char *q = strstr(r.text, "Question: Where is my refund?");
    CHECK(q && q > strstr(r.text, "Conversation:"));
    fr_budget_result_free(&r);
    cJSON_Delete(t);
}

TEST(question_alone_over_budget_is_cut_not_dropped) {
    char q[4000];
    memset(q, 0, sizeof q);
    for (int i = 0; i < 300; i++) strcat(q, "word ");
    fr_budget_input in = {.question = q, .budget_tokens = 50};
    fr_budget_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), 0);
    CHECK(r.question_truncated);
    CHECK(r.tokens <= 50 && r.tokens > 30);
    fr_budget_result_free(&r);
    in.budget_tokens = 0;
    CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), -1);
}

TEST(chinese_key_lines_and_estimate) {
    const char *zh = "谢谢惠顾\n发票号码: 12345678\n合计: ¥520.00\n地址: 上海市\n";
    fr_budget_input in = {.question = "为什么扣了两次款?", .ocr_text = zh, .budget_tokens = 40};
    fr_budget_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), 0);
    CHECK(strstr(r.text, "12345678") && strstr(r.text, "520.00"));
    fr_budget_result_free(&r);
    CHECK_EQ_INT(fr_budget_estimate("hello world", 11), 4); /* 2 + 2 */
    CHECK_EQ_INT(fr_budget_estimate("发票", strlen("发票")), 2);
    CHECK(fr_budget_is_key_name("Invoice-No") && fr_budget_is_key_name("payee_name"));
    CHECK(!fr_budget_is_key_name("notes"));
}

static size_t words(void *ctx, const char *s, size_t n) {
    (void)ctx;
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\n')) w++;
    return w;
}

TEST(tokenizer_callback_is_used) {
    cJSON *t = ticket();
    fr_budget_input in = {.question = "charged twice?", .ticket = t, .budget_tokens = 30,
                          .count = words};
    fr_budget_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_budget_assemble(&in, &r, &err), 0);
    CHECK(words(NULL, r.text, strlen(r.text)) <= 30);
    CHECK(strstr(r.text, "INV-2024-00123") != NULL);
    fr_budget_result_free(&r);
    cJSON_Delete(t);
}

int main(void) { return t_main(); }
