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

/* text has a slot name with this span text (not necessarily the first of its name). */
static void expect_span(const char *text, const char *name, const char *span, const char *value) {
    fr_slot out[32];
    int n;
    find(text, name, out, &n);
    for (int i = 0; i < n; i++)
        if (!strcmp(out[i].name, name) && !strcmp(out[i].text, span)) {
            CHECK_STR(out[i].value, value);
            return;
        }
    fprintf(stderr, "  '%s': no %s '%s'\n", text, name, span);
    CHECK(0);
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

TEST(durations_and_recurrences) {
    /* a length of time is a date_period with an ISO 8601 duration, not a date */
    expect("can I get a loan for 7 years?", "date_period", "7 years", "P7Y");
    expect("the refund is still not here after 4 days", "date_period", "4 days", "P4D");
    expect("it has been more than three weeks", "date_period", "three weeks", "P3W");
    expect("can I extend the overdraft for a month", "date_period", "a month", "P1M");
    expect("my transfer has been stuck for weeks", "date_period", "for weeks", "");
    expect_none("let's call it a day", "date_period");
    expect("the money arrives in 3 days", "date", "in 3 days", "2026-12-05"); /* anchored: a date */
    expect("I paid it 2 weeks ago", "date", "2 weeks ago", "2026-11-18");
    /* recurring days are periods, never dates */
    expect("a standing order on the 9th of each month", "date_period", "9th of each month", "R/P1M/D9");
    expect("pay my rent on the last Friday of every month", "date_period", "last Friday of every month", "R/P1M");
    expect("how much can I save each month?", "date_period", "each month", "R/P1M");
    expect_none("a standing order on the 9th of each month", "date");
    expect("have I been charged twice lately?", "date_period", "lately", "");
    expect("I lost it some days ago", "date", "some days ago", ""); /* past, distance unknown */
}

TEST(period_edges_and_parts_of_day) {
    expect("can I open it before the end of this year", "date", "end of this year", "2026-12-31");
    expect("pay it at the beginning of next month", "date", "beginning of next month", "2027-01-01");
    expect("pay it on the 20th of next month", "date", "20th of next month", "2027-01-20");
    expect("what did I spend last weekend", "date_period", "last weekend", "2026-11-28/2026-11-29");
    expect_span("how much did I spend in March and April", "date_period", "April", "2026-04-01/2026-04-30");
    expect("call me any time between 2 and 4 pm", "time_from", "2", "14:00");
    expect("call me any time between 2 and 4 pm", "time_to", "4 pm", "16:00");
    expect_none("it takes between 2 and 4 days", "time_from");
    expect("I lost it yesterday afternoon", "time_period", "afternoon", "12:00/19:00");
    expect("I lost it yesterday afternoon", "date", "yesterday", "2026-12-01");
    /* "this morning" is a date and its part of the day a period, side by side */
    expect("the payment I made this morning", "date", "this morning", "2026-12-02");
    expect("the payment I made this morning", "time_period", "morning", "00:00/12:00");
    expect_none("the payment at 10 in the morning", "time_period");
}

TEST(weekday_fixes_the_year) {
    /* 16 October: a Saturday in 2027, a Monday in 2028 (the next such year), a Friday in 2026 */
    expect("my appointment is on Monday, October the 16th", "date", "Monday, October the 16th", "2028-10-16");
    expect("I was charged on Friday, October the 16th", "date", "Friday, October the 16th", "2026-10-16");
    expect("can we meet on Tuesday 5 January", "date", "Tuesday 5 January", "2027-01-05");
    /* no match within seven years: the plain rule (the next 16 October) */
    expect("my appointment is on Friday, October the 16th", "date", "Friday, October the 16th", "2027-10-16");
    /* whole calendar years */
    expect("how much did I spend in the last 2 years", "date_period", "last 2 years", "2024-01-01/2026-01-01");
}

TEST(bare_amounts_and_split_times) {
    expect("did I spend less than 5885 at the bookshop", "amount", "5885", "5885.00");
    expect("No, definitely not more than 800", "amount", "800", "800.00");
    expect("when did I spend 158.16 at the bakery", "amount", "158.16", "158.16");
    expect_none("can I have more than 2 cards", "amount");
    expect_none("is later than 9 ok", "amount");
    expect("why is there a payment today at 13 50", "time", "13 50", "13:50");
    expect_none("why is there a payment today at 13 50", "number");
}

TEST(company_and_role_details) {
    expect("I cannot withdraw money at Lindqvist's ATMs", "company_name", "Lindqvist's", NULL);
    /* a name ends with its sentence; a weekday or a place left alone is no company */
    expect("my card did not work at Marrowby Stores. What now?", "company_name", "Marrowby Stores", NULL);
    expect_none("can it be delivered on Saturday. Is that possible?", "company_name");
    expect_none("I need to transfer something to China. It is urgent.", "company_name");
    expect("it should be starting on the 7th May 2027", "date_from", "7th May 2027", "2027-05-07");
    expect("change the recipient to ignatius brumfield", "person_name", "ignatius brumfield", NULL);
}

TEST(names_by_reply_and_relation) {
    expect("it's dorian ashgrove speaking, I need help", "person_name", "dorian ashgrove", NULL);
    expect("oriel vantassel", "person_name", "oriel vantassel", NULL); /* a reply that is a name */
    expect("to quillon on the 5th", "person_name", "quillon", NULL);     /* a short reply */
    expect("the standing order I set up for mirela okafor", "person_name", "mirela okafor", NULL);
    expect("open an account under the same name tobiah renwick", "person_name", "tobiah renwick", NULL);
    expect_none("I want to quit", "person_name");
    expect_none("sounds good", "person_name");
    expect_none("I transferred some money to partner overseas", "person_name");
    expect_none("I paid the standing order for rent", "person_name");
    expect_none("Can I send a SWIFT transfer to Bulgaria?", "person_name");
    expect_none("Can I send a SWIFT transfer to Bulgaria?", "company_name");
}

TEST(merchants_and_categories_in_context) {
    /* a rare word before a singular category noun is a merchant */
    expect("did I spend more than 90 pounds in brovetti restaurant", "company_name", "brovetti restaurant", NULL);
    expect_none("did I spend more than 90 pounds in brovetti restaurant", "shopping_category");
    expect("how much did I spend on video games", "shopping_category", "video games", NULL);
    /* after "spend on": a plural names a kind of thing, a verb ends it */
    expect("did I spend less on rental bikes", "shopping_category", "rental bikes", NULL);
    expect("has my spending on magazines decreased", "shopping_category", "magazines", NULL);
    expect("I cancelled the direct debit I set up with zembla last week", "company_name", "zembla", NULL);
}

TEST(ranges_read_as_one) {
    /* serving (tense-aware) reads a from/to pair as one range */
    expect("show my transactions from the 1st to the 7 June", "date_from", "1st", "2027-06-01");
    expect("list the transactions from Monday to Sunday", "date_from", "Monday", "2026-12-07");
    expect("list the transactions from Monday to Sunday", "date_to", "Sunday", "2026-12-13");
    /* 28 Oct read forward is 2027-10-28: its end is the 3rd after it */
    expect("show me the payments from the 28 Oct to the 3rd", "date_to", "3rd", "2027-11-03");
    /* NLU++'s convention resolves each end alone */
    fr_slot_ref fwd = REF;
    fwd.forward_only = 1;
    fr_slot out[32];
    fr_err err;
    const char *t = "list the transactions from Monday to Sunday";
    int n = fr_slots_extract(t, strlen(t), &fwd, out, 32, &err);
    CHECK(n == 2);
    if (n == 2) CHECK_STR(out[1].value, "2026-12-06");
}

int main(void) { return t_main(); }
