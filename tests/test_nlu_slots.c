/* test_nlu_slots.c — the NLU++ slot types the extractor added: person names by context,
 * shopping categories, hour/minute periods, bare numbers, lower-case companies, dates that keep a
 * leading weekday, from/to roles of times, and tense-aware resolution of partial dates against a
 * fixed reference moment. Every sentence is written for this test (none comes from NLU++). */
#include <string.h>

#include "stages/nlu/slots.h"
#include "t.h"

/* Wednesday 2 December 2026, 09:00 */
static const fr_slot_ref REF = {2026, 12, 2, 9, 0, 0};

/* The slot named `name` in text (its index into out), or -1; out holds all n slots. */
static int find(const char *text, const char *name, fr_slot *out, int *n) {
    fr_err err;
    *n = fr_slots_extract(text, strlen(text), &REF, out, 32, &err);
    for (int i = 0; i < *n; i++)
        if (!strcmp(out[i].name, name)) return i;
    return -1;
}

/* text has slot name with exactly this span text and value. */
static void expect(const char *text, const char *name, const char *span, const char *value) {
    fr_slot out[32];
    int n, i = find(text, name, out, &n);
    if (i < 0) {
        fprintf(stderr, "  '%s': no %s (got", text, name);
        for (int k = 0; k < n; k++) fprintf(stderr, " %s='%s'", out[k].name, out[k].text);
        fprintf(stderr, ")\n");
        CHECK(i >= 0);
        return;
    }
    CHECK_STR(out[i].text, span);
    if (value) CHECK_STR(out[i].value, value);
}

static void expect_none(const char *text, const char *name) {
    fr_slot out[32];
    int n, i = find(text, name, out, &n);
    if (i >= 0) fprintf(stderr, "  '%s': unexpected %s '%s'\n", text, name, out[i].text);
    CHECK(i < 0);
}

TEST(person_names_by_context) {
    expect("please send 50 pounds to marisol quintanilla tomorrow", "person_name", "marisol quintanilla",
           "marisol quintanilla");
    expect("I want to open an account under the name oberon fairweather", "person_name", "oberon fairweather", NULL);
    expect("did I get the money from ezekiel yet?", "person_name", "ezekiel", NULL);
    expect("set up a standing order to thaddeus p. okonkwo every month", "person_name", "thaddeus p. okonkwo", NULL);
    expect_none("transfer money to my savings account", "person_name");
    expect_none("I want to go to the branch", "person_name");
    expect_none("how do I pay by card", "person_name");
}

TEST(shopping_categories) {
    expect("how much did I spend on groceries last month", "shopping_category", "groceries", "groceries");
    expect("has my spending on petrol gone up", "shopping_category", "petrol", NULL);
    expect("what did I spend on car repairs this week", "shopping_category", "car repairs", NULL);
    /* a rare word after "spend on" is a merchant */
    expect("how much did I spend on zorblex this week", "company_name", "zorblex", NULL);
    expect_none("I like groceries", "shopping_category"); /* a category word without a spending cue */
}

TEST(time_periods) {
    expect("nothing has moved in the last 3 hours", "time_period", "last 3 hours", "06:00/09:00");
    expect("block all payments for the next 2 hours", "time_period", "next 2 hours", "10:00/12:00");
    expect("wait for the next 8 minutes", "time_period", "next 8 minutes", "09:01/09:09");
    expect("it has been like that for the last hour", "time_period", "last hour", "08:00/09:00");
    expect("hold it for the next hour and a half", "time_period", "next hour and a half", "09:01/10:31");
}

TEST(bare_numbers) {
    expect("make it 4", "number", "4", "4");
    expect("I tried like 5 times", "number", "5", "5");
    expect_none("send 40 euros to my mum", "number");   /* an amount */
    expect_none("call me at 5 pm", "number");           /* a time */
    expect_none("on the 5th of May", "number");         /* a date */
}

TEST(companies_lower_case_and_places) {
    expect("I paid netflix twice this month", "company_name", "netflix", "netflix");
    expect("why did deliveroo charge me", "company_name", "deliveroo", NULL);
    expect_none("I was charged in Paris", "company_name");
    expect_none("I used my card in Spain", "company_name");
}

TEST(dates_keep_the_weekday) {
    expect("the charge on Friday 7 January 2016 is wrong", "date", "Friday 7 January 2016", "2016-01-07");
    expect("it was Tuesday, 3 March 2020", "date", "Tuesday, 3 March 2020", "2020-03-03");
}

TEST(time_roles_from_the_sentence) {
    expect("I am free from 3:35 night until 5 am", "time_from", "3:35 night", "03:35");
    expect("I am free from 3:35 night until 5 am", "time_to", "5 am", "05:00");
    expect("between 9 05 in the morning and 25 to 7 p.m.", "time_to", "25 to 7 p.m.", "18:35");
}

TEST(tense_aware_dates) {
    /* reference Wednesday 2026-12-02: the past tense looks back, the future forward */
    expect("I was charged twice on 3 March", "date", "3 March", "2026-03-03");
    expect("I will pay on 3 March", "date", "3 March", "2027-03-03");
    expect("did I pay anything on Friday", "date", "Friday", "2026-11-27");
    expect("can I pay on Friday", "date", "Friday", "2026-12-04");
    expect("the payment on the 15th went through twice", "date", "15th", "2026-11-15");
    expect("schedule it on the 15th", "date", "15th", "2026-12-15");
    expect("I was charged on 1 December", "date", "1 December", "2026-12-01");
    expect("what did I spend in March", "date_period", "March", "2026-03-01/2026-03-31");
}

int main(void) { return t_main(); }
