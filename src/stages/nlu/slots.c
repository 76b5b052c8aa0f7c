/* slots.c — see slots.h. Pattern table → candidates (normalised by per-pattern handlers) →
 * longest-first overlap resolution → roles → output. */
#include "stages/nlu/slots.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <math.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mask.h"
#include "stages/nlu/common_words.h"

/* ---------- calendar ---------- */

static long days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(long z, int *y, int *m, int *d) {
    z += 719468;
    long era = (z >= 0 ? z : z - 146096) / 146097;
    long doe = z - era * 146097;
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int days_in_month(int y, int m) {
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return dm[m - 1];
}

static bool valid_date(int y, int m, int d) {
    return y >= 1900 && y <= 2200 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m);
}

/* 0 = Monday */
static int weekday(long days) { return (int)(((days % 7) + 7 + 3) % 7); }

static void add_months(int *y, int *m, int delta) {
    int t = *y * 12 + (*m - 1) + delta;
    *y = t / 12;
    *m = t % 12 + 1;
}

/* ---------- small parsers ---------- */

static int month_of(const char *s, size_t n) {
    static const char *names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                  "jul", "aug", "sep", "oct", "nov", "dec"};
    if (n < 3) return 0;
    char b[4] = {(char)tolower((unsigned char)s[0]), (char)tolower((unsigned char)s[1]),
                 (char)tolower((unsigned char)s[2]), 0};
    for (int i = 0; i < 12; i++)
        if (!strcmp(b, names[i])) return i + 1;
    return 0;
}

static int weekday_of(const char *s, size_t n) {
    static const char *names[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
    if (n < 3) return -1;
    char b[4] = {(char)tolower((unsigned char)s[0]), (char)tolower((unsigned char)s[1]),
                 (char)tolower((unsigned char)s[2]), 0};
    for (int i = 0; i < 7; i++)
        if (!strcmp(b, names[i])) return i;
    return -1;
}

static bool ieq(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    if (l != n) return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != (unsigned char)lit[i]) return false;
    return true;
}

static bool istarts(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    if (l > n) return false;
    for (size_t i = 0; i < l; i++)
        if (tolower((unsigned char)s[i]) != (unsigned char)lit[i]) return false;
    return true;
}

static long atoin(const char *s, size_t n) {
    long v = 0;
    for (size_t i = 0; i < n && i < 9; i++)
        if (s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i] - '0');
    return v;
}

/* Number words: "a", "one" .. "ninety", "few" (3), "couple" (2). -1 if not one. */
static int word_number(const char *s, size_t n) {
    static const struct { const char *w; int v; } t[] = {
        {"a", 1}, {"an", 1}, {"one", 1}, {"two", 2}, {"three", 3}, {"four", 4}, {"five", 5},
        {"six", 6}, {"seven", 7}, {"eight", 8}, {"nine", 9}, {"ten", 10}, {"eleven", 11},
        {"twelve", 12}, {"thirteen", 13}, {"fourteen", 14}, {"fifteen", 15}, {"sixteen", 16},
        {"seventeen", 17}, {"eighteen", 18}, {"nineteen", 19}, {"twenty", 20}, {"thirty", 30},
        {"forty", 40}, {"fifty", 50}, {"sixty", 60}, {"seventy", 70}, {"eighty", 80},
        {"ninety", 90}, {"few", 3}, {"couple", 2}, {"couple of", 2}, {"several", 3}};
    for (size_t i = 0; i < FR_ARRAY_LEN(t); i++)
        if (ieq(s, n, t[i].w)) return t[i].v;
    return -1;
}

/* A count: digits or a number word. -1 if neither. */
static long count_of(const char *s, size_t n) {
    if (n > 0 && s[0] >= '0' && s[0] <= '9') return n > 6 ? -1 : atoin(s, n);
    if (n > 7 && istarts(s, n, "couple")) return 2;
    return word_number(s, n);
}

/* "1,200.50", "1.200,50", "1 200", "12,50", "1200" → value. */
static double parse_amount_number(const char *s, size_t n) {
    char digits[64];
    size_t o = 0;
    /* decimal separator: the last '.' or ',' followed by 1–2 digits to the end */
    size_t dec = n;
    for (size_t i = n; i-- > 0;) {
        if (s[i] == '.' || s[i] == ',') {
            if (n - i - 1 >= 1 && n - i - 1 <= 2) dec = i;
            break;
        }
        if (!(s[i] >= '0' && s[i] <= '9')) break;
    }
    for (size_t i = 0; i < n && o + 2 < sizeof digits; i++) {
        if (i == dec) digits[o++] = '.';
        else if (s[i] >= '0' && s[i] <= '9') digits[o++] = s[i];
    }
    digits[o] = 0;
    return strtod(digits, NULL);
}

/* ---------- masking ---------- */

size_t fr_slot_mask(const char *s, size_t n, char *out, size_t cap) {
    return fr_mask_span(s, n, 4, out, cap);
}

/* ---------- patterns ---------- */

#define MON                                                                                   \
    "(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
    "oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\\b(?:\\.(?=\\s*\\d))?"
#define MONFULL "(january|february|march|april|may|june|july|august|september|october|november|december)"
#define WD "(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
/* an optional leading weekday of a calendar date ("Friday 7 January 2016"), no capture */
#define WDPRE "(?:(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\\.?,?\\s+(?:the\\s+)?)?"
#define NUMW                                                                                   \
    "(\\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"  \
    "fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|"   \
    "couple(?:\\s+of)?|few|several)"
#define MOD                                                                                     \
    "(a\\.\\s?m\\.?|p\\.\\s?m\\.?|am\\b|pm\\b|in\\s+the\\s+morning\\b|in\\s+the\\s+afternoon\\b|" \
    "in\\s+the\\s+evening\\b|at\\s+night\\b|in\\s+the\\s+night\\b|morning\\b|afternoon\\b|"       \
    "evening\\b|night\\b|o'?clock\\b|o’clock\\b)"
#define UNITS                                                                                   \
    "(?:days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|seconds?|times?|pounds?|euros?|" \
    "dollars?|quid|bucks|pence|cents?|£|\\$|€|¥|percent|people|persons?|transactions?|"        \
    "payments?|transfers?|cards?|accounts?|digits?|pins?|items?|of\\b|or\\s+more|x\\b)"
#define NUM                                                                                \
    "(\\d{1,3}(?:,\\d{3})+(?:\\.\\d{1,2})?|\\d{1,3}(?:\\.\\d{3})+(?:,\\d{1,2})?|"              \
    "\\d{1,3}(?:[ \\x{a0}\\x{202f}']\\d{3})+(?:[.,]\\d{1,2})?|\\d+(?:[.,]\\d{1,2})?)(?![\\d])"
#define MULT "(?:\\s?(k\\b|thousand\\b|grand\\b|million\\b|mn\\b|bn\\b|billion\\b|百万|万|千|亿))?"
#define SYM "(US\\$|A\\$|AU\\$|C\\$|CA\\$|HK\\$|S\\$|NZ\\$|R\\$|\\$|£|€|¥|￥|₹|₩|₽|₺|₪|₫|฿)"
#define CODE                                                                                     \
    "(USD|EUR|GBP|JPY|CNY|RMB|CHF|AUD|CAD|HKD|SGD|INR|KRW|SEK|NOK|DKK|PLN|CZK|HUF|RUB|TRY|ZAR|" \
    "BRL|MXN|NZD|AED|SAR|THB|TWD)"
#define WORDC                                                                                    \
    "(dollars?|bucks|pounds?(?:\\s+sterling)?|quid|sterling|euros?|yen|yuan|renminbi|rupees?|"  \
    "swiss\\s+francs?|francs?|pence|cents?|rubles?|roubles?|pesos?|zloty|kronor|kroner|krona)\\b"
#define WORDC_CJK "(块钱|块|人民币|元|美元|美金|欧元|歐元|英镑|英鎊|日元|日圓|港币|港幣|円)"

enum {
    P_D_ISO, P_D_NUM, P_D_CJK, P_D_DM, P_D_MD, P_D_MY, P_D_MTY, P_D_ORD, P_D_MON, P_D_YEAR,
    P_D_REL, P_D_REL_CJK, P_D_WD, P_D_WWD, P_D_OFF, P_D_EDGE, P_P_REL, P_P_DUR, P_P_FORU, P_P_EACH,
    P_P_LATELY, P_P_LASTN,
    P_T_HM, P_T_HMD, P_T_HSM, P_T_PT, P_T_HMOD, P_T_BARE, P_T_WORD, P_T_REL, P_T_HALFHOUR,
    P_T_ATHM, P_T_RANGE1, P_T_CJK,
    P_A_SYM, P_A_CODE, P_A_NSYM, P_A_NWORD, P_A_NWORD_CJK, P_A_WORDNUM, P_A_PENCE, P_A_CTX,
    P_A_CMP, P_A_CTX2,
    P_C_DIGITS, P_C_ENDING, P_AC_IBAN, P_AC_CTX, P_AC_CJK,
    P_I_INV, P_I_CTX, P_I_CJK,
    P_K_SUFFIX, P_K_CJK, P_K_PREP, P_K_LC, P_K_GAZ,
    P_PN_CTX, P_PN_NAME, P_PN_SPEAK, P_PN_ALONE, P_SC_GAZ, P_SC_CTX, P_TP_REL, P_TP_DAY, P_TP_FOR, P_NUM_BARE,
    P_N
};

typedef struct {
    const char *re;  /* pattern */
    uint32_t opts;   /* extra compile options */
    int prio;        /* tie-break between equally long overlapping candidates */
} pat_def;

/* What a text must contain for a pattern to have a chance (a cheap pre-filter). */
enum { NEED_DIGIT = 1, NEED_NONASCII = 2, NEED_UPPER = 4 };

#define CI PCRE2_CASELESS

static const pat_def defs[P_N] = {
    [P_D_ISO] = {"\\b(\\d{4})[-/.](\\d{1,2})[-/.](\\d{1,2})\\b", 0, 5},
    [P_D_NUM] = {"\\b(\\d{1,2})([/.-])(\\d{1,2})\\2(\\d{4}|\\d{2})\\b", 0, 5},
    [P_D_CJK] = {"(?:(\\d{4})\\s*年\\s*)?(\\d{1,2})\\s*月\\s*(\\d{1,2})\\s*[日号號]", 0, 5},
    [P_D_DM] = {"\\b" WDPRE "(\\d{1,2})(st|nd|rd|th)?(?:\\s+of)?\\s+" MON "(?:,?\\s+(\\d{4})\\b)?", CI, 5},
    [P_D_MD] = {"\\b" WDPRE MON "\\s+(?:the\\s+)?(\\d{1,2})(st|nd|rd|th)?\\b(?![:.]?\\d)(?:,?\\s+(\\d{4})\\b)?", CI, 5},
    [P_D_MY] = {"\\b" MON "\\s+(\\d{4})\\b", CI, 4},
    [P_D_MTY] = {"\\b" MONFULL "\\s+(this|last|next)\\s+year\\b", CI, 4},
    [P_D_ORD] = {"\\b(?:the|on|from|to|until|till|by|since|before|after)\\s+\\K(\\d{1,2})(st|nd|rd|th)\\b"
                 "(?!\\s+(?:of\\s+)?(?:each|every|the\\s+month)\\b)(?:\\s+(?:of\\s+)?(this|next|last)\\s+month\\b)?", CI, 3},
    [P_D_MON] = {"\\b(?:since|until|till|in|from|to|by|before|after|during|of|through|on|and)\\s+\\K" MONFULL
                 "\\b(?!\\s*\\d)(?!\\s+(?:this|last|next)\\s+year)", CI, 2},
    [P_D_YEAR] = {"\\b(?:in|on|since|from|until|till|by|of)\\s+\\K((?:19|20)\\d{2})\\b"
                  "(?!\\s*(?:[-/.]\\d|pounds?|euros?|dollars?|quid|£|\\$|€|%|usd|eur|gbp))", CI, 1},
    [P_D_REL] = {"\\b(day\\s+after\\s+tomorrow|day\\s+before\\s+yesterday|today|tomorrow|tonight|yesterday|"
                 "last\\s+night|this\\s+(?:morning|afternoon|evening))\\b", CI, 4},
    [P_D_REL_CJK] = {"(今天|明天|后天|後天|昨天|前天|今晚)", 0, 4},
    [P_D_WD] = {"\\b(?:(next|last|this|coming|past|previous)\\s+)?" WD
                "\\b(?!\\s+of\\s+(?:each|every|the)\\b)(?:\\s+(next\\s+week|last\\s+week|in\\s+a\\s+week|after\\s+next)\\b)?", CI, 4},
    [P_D_WWD] = {"\\b(last|next|this)\\s+week\\s+" WD "\\b", CI, 4},
    [P_D_OFF] = {"\\b(?:in\\s+" NUMW "\\s+(day|week|month|year)s?|" NUMW
                 "\\s+(day|week|month|year)s?\\s+(ago|from\\s+now|later)|(some)\\s+(day|week|month|year)s\\s+ago)\\b", CI, 4},
    /* the first / last day of a calendar period: "by the end of this year" */
    [P_D_EDGE] = {"\\b(end|beginning|start)\\s+of\\s+(?:(?:(this|next|last|the)\\s+)(week|month|year)|" MONFULL ")\\b",
                  CI, 4},
    [P_P_REL] = {"\\b(this|next|last|previous|current|coming|past)\\s+(week(?:end)?|month|year|quarter)\\b", CI, 3},
    /* a length of time, not anchored to the calendar ("a loan for 11 years", "after 3 days") */
    [P_P_DUR] = {"\\b(?:(for|after|over|within|than|about|almost|nearly)\\s+)?" NUMW "\\s+(day|week|month|year)s?\\b"
                 "(?!\\s+(?:ago|from|later|earlier|before|after|old|of)\\b)", CI, 2},
    [P_P_FORU] = {"\\bfor\\s+(days|weeks|months|years|ages)\\b", CI, 2},
    /* a recurring day or period: "the 4th of each month", "first Wednesday of each month" */
    [P_P_EACH] = {"\\b(?:(\\d{1,2})(?:st|nd|rd|th)\\s+of\\s+|(first|second|third|fourth|last)\\s+" WD "\\s+of\\s+)?"
                  "(?:each|every)\\s+(day|week|month|year)\\b", CI, 4},
    [P_P_LATELY] = {"\\blately\\b", CI, 2},
    [P_P_LASTN] = {"\\b(last|past|next|previous|coming)\\s+" NUMW "\\s+(day|week|month|year)s?\\b", CI, 4},
    [P_T_HM] = {"\\b(\\d{1,2})[:h](\\d{2})\\b(?:\\s*" MOD ")?", CI, 5},
    [P_T_HMD] = {"\\b(\\d{1,2})\\.(\\d{2})\\s*" MOD, CI, 5},
    [P_T_HSM] = {"\\b(\\d{1,2})\\s(\\d{2})\\s*" MOD, CI, 5},
    [P_T_PT] = {"\\b(half|quarter|\\d{1,2})\\s+(past|to)\\s+(\\d{1,2})\\b(?!\\s*(?:(?:st|nd|rd|th)\\b|[:.,]\\d|%|-|/|"
                UNITS "))(?:\\s*" MOD ")?", CI, 5},
    [P_T_HMOD] = {"\\b(\\d{1,2})(?:ish)?\\s*" MOD, CI, 4},
    [P_T_BARE] = {"\\b(?:at|after|before|by|until|till|later\\s+than|earlier\\s+than)\\s+\\K(\\d{1,2})\\b"
                  "(?![:.,]?\\d)(?!\\s*(?:st\\b|nd\\b|rd\\b|th\\b|%|-|/|" UNITS "))", CI, 1},
    [P_T_WORD] = {"\\b(noon|midday|midnight)\\b", CI, 3},
    [P_T_REL] = {"\\b(?:in\\s+" NUMW "\\s+(hour|minute|min)s?|" NUMW "\\s+(hour|minute|min)s?\\s+ago)\\b", CI, 4},
    [P_T_HALFHOUR] = {"\\bin\\s+half\\s+an\\s+hour\\b", CI, 4},
    /* "at 13 50": hour and minutes split by a space after a time preposition, no modifier */
    [P_T_ATHM] = {"\\b(?:at|from|until|till|before|after|by)\\s+\\K(\\d{1,2})\\s(\\d{2})\\b(?![.,:]\\d)(?!\\s*(?:%|" UNITS "))", CI, 4},
    /* the first end of a clock range that names its modifier once: "between 2 and 4 pm" */
    [P_T_RANGE1] = {"\\b(?:between|from)\\s+\\K(\\d{1,2})(?=\\s*(?:and|to|-|until|till)\\s*(\\d{1,2})(?:[:.]\\d{2})?\\s*"
                    "(a\\.\\s?m\\.?|p\\.\\s?m\\.?|am\\b|pm\\b))", CI, 4},
    [P_T_CJK] = {"(上午|早上|中午|下午|晚上|凌晨|傍晚)?\\s*(\\d{1,2})\\s*(?:点|點|时|時)\\s*(?:(\\d{1,2})\\s*分?|(半)|(一刻)|(三刻))?", 0, 5},
    [P_A_SYM] = {SYM "\\s?" NUM MULT, CI, 6},
    [P_A_CODE] = {"\\b" CODE "\\s?" NUM MULT, CI, 6},
    [P_A_NSYM] = {NUM MULT "\\s?" SYM, CI, 6},
    [P_A_NWORD] = {NUM MULT "\\s?(?:" CODE "\\b|" WORDC ")", CI, 6},
    [P_A_NWORD_CJK] = {NUM MULT "\\s?" WORDC_CJK, CI, 6},
    [P_A_WORDNUM] = {"\\b((?:(?:an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
                     "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million)[\\s-]+)*"
                     "(?:an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
                     "thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|grand))\\s+" WORDC,
                     CI, 5},
    [P_A_PENCE] = {"\\b(\\d{1,3})p\\b(?!\\.?\\s?m\\b)", CI, 5},
    [P_A_CTX] = {"\\b(?:amount|payment|transfer|withdrawal|deposit|refund|charge|fee|limit|balance|sum)\\s+"
                 "(?:of|to|for)\\s+\\K" NUM "(?!\\s*(?:%|[:.]\\d|" UNITS "))", CI, 2},
    /* a bare number compared or spent: "did I spend less than 5885", "not more than 800" */
    [P_A_CMP] = {"\\b(?:(?:more|less|higher|lower|greater|bigger|smaller)\\s+than|over|under|above|below|exceed(?:ing|s)?|"
                 "spen[dt]|paid)\\s+\\K" NUM "(?![\\w.,:]?\\d)(?!\\s*(?:%|[:.]\\d|" UNITS "|a\\.?m\\b|p\\.?m\\b|o'?clock|in\\s+the\\s+(?:morning|afternoon|evening)))", CI, 2},
    [P_A_CTX2] = {"\\ban?\\s+\\K" NUM "(?=\\s+(?:transfer|payment|refund|withdrawal|deposit|charge)\\b)", CI, 2},
    [P_C_DIGITS] = {"(?<![\\d-])(?:\\d[ -]?){12,18}\\d(?!\\d)", 0, 7},
    [P_C_ENDING] = {"\\b(?:card|visa|mastercard|amex)\\b[^.\\d\\n]{0,24}?\\b(?:ending|ends|last\\s+(?:4|four)\\s+digits?)"
                    "(?:\\s+(?:in|with|is|are|of))?\\s*:?\\s*\\K(\\d{4})\\b(?!\\d)", CI, 7},
    [P_AC_IBAN] = {"\\b[A-Z]{2}\\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\\b", 0, 7},
    [P_AC_CTX] = {"\\b(?:account|acct|a/c)\\s*(?:number|no\\.?|num(?:ber)?|#)?\\s*(?:is\\s*)?[:#]?\\s*\\K"
                  "(\\d(?:[\\d -]{4,22})\\d)\\b", CI, 6},
    [P_AC_CJK] = {"(?:账号|帳號|帐号|账户|帳戶|卡号|卡號)\\s*(?:是|为|為)?\\s*[:：]?\\s*\\K(\\d(?:[\\d -]{4,22})\\d)", 0, 6},
    [P_I_INV] = {"\\bINV(?:OICE)?[-_/#.]?\\s?(?=[A-Z0-9/_-]*\\d)[A-Z0-9]+(?:[-_/][A-Z0-9]+)*\\b", 0, 6},
    [P_I_CTX] = {"\\b(?:invoice|bill|receipt)\\s*(?:no\\.?|number|num\\.?|nr\\.?|#|id|ref(?:erence)?)?\\s*[:#]?\\s*\\K"
                 "(?=[A-Z0-9/-]*\\d)([A-Z0-9]+(?:[-/][A-Z0-9]+)*)\\b(?!\\s*(?:" UNITS "))", CI, 6},
    [P_I_CJK] = {"(?:发票|發票)\\s*(?:号码|號碼|编号|編號|号|號)\\s*(?:是|为|為)?\\s*[:：]?\\s*\\K([A-Za-z0-9-]+)", 0, 6},
    [P_K_SUFFIX] = {"\\b((?:[A-Z][\\w&'.-]*\\s+){0,4}[A-Z][\\w&'.-]*),?\\s+(?:Ltd|Limited|Inc|LLC|GmbH|AG|PLC|plc|"
                    "Corp|Corporation|Co|S\\.A|SA|SAS|BV|B\\.V|Pty|KG|SE|Group|Holdings)\\b\\.?", 0, 4},
    [P_K_CJK] = {"\\p{Han}{2,12}?(?:股份有限公司|有限责任公司|有限公司|有限公司|集团|集團|公司|银行|銀行)", 0, 4},
    [P_K_PREP] = {"\\b(?:from|to|at|with|for|in|on|paid|pay|via|by)\\s+\\K((?:[A-Z][\\w&'’.-]*|M&S)"
                  "(?:\\s+(?:&|and|of|[A-Z][\\w&'’.-]*))*)", 0, 2},
    [P_K_LC] = {"\\b(?:direct\\s+debits?(?:\\s+payments?)?\\s+(?:to|with|for|from)|(?:i|you|we)\\s+have\\s+with|"
                "set\\s+up\\s+with|(?:spend|spent|bought\\s+anything|buy\\s+anything|shop|shopped|paid|pay)\\s+(?:at|in))\\s+\\K([a-z][a-z'&-]*)",
                0, 1},
    [P_K_GAZ] = {NULL, CI, 3}, /* built from the gazetteer at init */
    /* person names after a payment cue (checked against the common words in h_person) */
    [P_PN_CTX] = {"\\b(?:to|from|pay|paid|payee|for)\\s+\\K([a-z][a-z'.-]*(?:\\s+[a-z][a-z'.-]*){0,2})", CI, 2},
    [P_PN_NAME] = {"\\b(?:my\\s+name\\s+is|name\\s+is|under\\s+the\\s+(?:same\\s+)?name(?:\\s+of)?|on\\s+the\\s+name(?:\\s+of)?|"
                   "in\\s+the\\s+name\\s+of|named|called)\\s+\\K([a-z][a-z'.-]*(?:\\s+[a-z][a-z'.-]*){0,2})", CI, 3},
    /* "it's jo smith speaking"; a reply that is only a name of rare words ("lilith danaher") */
    [P_PN_SPEAK] = {"\\b(?:it'?s|it\\s+is|this\\s+is)\\s+\\K([a-z][a-z'.-]*(?:\\s+[a-z][a-z'.-]*){0,2})(?=\\s+speaking\\b)", CI, 3},
    [P_PN_ALONE] = {"^\\s*\\K([a-z][a-z'-]*(?:\\s+[a-z][a-z'-]*){1,2})(?=\\s*[.!]?\\s*$)", CI, 2},
    [P_SC_GAZ] = {"\\b(bars\\s+and\\s+restaurants|eating\\s+out|take\\s*out|takeaways?|video\\s+games|groceries|grocery|"
                  "supermarkets?|petrol|fuel|pharmacy|pharmacies|medicine|medication|dentist|doctors?|health|"
                  "restaurants?|bars?|pubs?|coffee|cafes?|clothes|clothing|shoes|fashion|holidays?|travel|flights?|"
                  "hotels?|rent|utilities|electricity|gas\\s+bill|water\\s+bill|internet|phone\\s+bill|"
                  "subscriptions?|streaming|music|games|gaming|books|newspapers?|magazines?|education|tuition|"
                  "gym|fitness|beauty|hair(?:dresser|cut)?|cosmetics|entertainment|cinema|movies|concerts?|"
                  "taxis?|transport|parking|insurance|tax(?:es)?|charity|donations?|donate|gifts?|pets?|"
                  "childcare|family|delivery|deliveries|food|dining|drinking|alcohol|shopping|electronics|"
                  "furniture|gardening|sports?)\\b", CI, 3},
    [P_SC_CTX] = {"\\b(?:spen[dt]|spending|expenses?)\\s+(?:[a-z]+\\s+){0,3}?(?:on|for)\\s+\\K([a-z]+(?:\\s+(?:and\\s+)?[a-z]+)?)",
                  CI, 1},
    [P_TP_REL] = {"\\b(last|past|next|coming|previous)\\s+(?:(\\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|"
                  "ten|eleven|twelve|couple\\s+of|few)\\s+)?(hours?|minutes?|mins?)(\\s+and\\s+a\\s+half)?\\b", CI, 4},
    /* the part of a day named after a day word: "yesterday afternoon", "this morning" */
    [P_TP_DAY] = {"\\b(this|yesterday|tomorrow|today)\\s+\\K(morning|afternoon|evening)\\b", CI, 3},
    [P_TP_FOR] = {"\\b(?:for|during|within|over)\\s+\\K(\\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|"
                  "eleven|twelve|couple\\s+of|few)\\s+(hours?|minutes?|mins?)\\b", CI, 3},
    [P_NUM_BARE] = {"(?<![\\w.,:/£$€¥#-])(\\d{1,6})(?![\\w%£$€¥]|[.,:/-]\\d|\\s*(?:st|nd|rd|th)\\b)", 0, 0},
};

/* Pre-filter per pattern (NEED_* bits). */
static const int needs[P_N] = {
    [P_D_ISO] = NEED_DIGIT,
    [P_D_NUM] = NEED_DIGIT,
    [P_D_CJK] = NEED_DIGIT | NEED_NONASCII,
    [P_D_DM] = NEED_DIGIT,
    [P_D_MD] = NEED_DIGIT,
    [P_D_MY] = NEED_DIGIT,
    [P_D_ORD] = NEED_DIGIT,
    [P_D_YEAR] = NEED_DIGIT,
    [P_D_REL_CJK] = NEED_NONASCII,
    [P_T_HM] = NEED_DIGIT,
    [P_T_HMD] = NEED_DIGIT,
    [P_T_HSM] = NEED_DIGIT,
    [P_T_ATHM] = NEED_DIGIT,
    [P_T_RANGE1] = NEED_DIGIT,
    [P_T_HMOD] = NEED_DIGIT,
    [P_T_BARE] = NEED_DIGIT,
    [P_T_CJK] = NEED_DIGIT | NEED_NONASCII,
    [P_A_SYM] = NEED_DIGIT,
    [P_A_CODE] = NEED_DIGIT,
    [P_A_NSYM] = NEED_DIGIT,
    [P_A_NWORD] = NEED_DIGIT,
    [P_A_NWORD_CJK] = NEED_DIGIT | NEED_NONASCII,
    [P_A_PENCE] = NEED_DIGIT,
    [P_A_CTX] = NEED_DIGIT,
    [P_A_CTX2] = NEED_DIGIT,
    [P_A_CMP] = NEED_DIGIT,
    [P_C_DIGITS] = NEED_DIGIT,
    [P_C_ENDING] = NEED_DIGIT,
    [P_AC_IBAN] = NEED_DIGIT | NEED_UPPER,
    [P_AC_CTX] = NEED_DIGIT,
    [P_AC_CJK] = NEED_DIGIT | NEED_NONASCII,
    [P_I_INV] = NEED_DIGIT | NEED_UPPER,
    [P_I_CTX] = NEED_DIGIT,
    [P_I_CJK] = NEED_NONASCII,
    [P_K_SUFFIX] = NEED_UPPER,
    [P_K_CJK] = NEED_NONASCII,
    [P_K_PREP] = NEED_UPPER,
    [P_NUM_BARE] = NEED_DIGIT,
};

/* Well-known merchants and service providers (matched case-insensitively on word boundaries). */
static const char *const gazetteer[] = {
    "amazon prime video", "amazon prime", "amazon video", "amazon", "prime video", "netflix",
    "spotify", "uber eats", "uber", "lyft", "bolt", "deliveroo", "just eat", "waitrose", "tesco",
    "sainsbury's", "sainsburys", "asda", "morrisons", "lidl", "aldi", "co-op", "m&s",
    "marks and spencer", "marks & spencer", "boots", "argos", "currys", "john lewis", "primark",
    "ikea", "zara", "h&m", "asos", "ebay", "paypal", "apple", "google", "microsoft", "steam",
    "playstation", "xbox", "nintendo", "disney+", "youtube", "facebook", "instagram", "twitter",
    "tiktok", "airbnb", "booking.com", "expedia", "ryanair", "easyjet", "british airways",
    "lufthansa", "vodafone", "virgin media", "shell", "esso", "starbucks", "costa", "pret",
    "greggs", "mcdonald's", "mcdonalds", "kfc", "burger king", "domino's", "pizza hut", "nando's",
    "chipotle", "wetherspoons", "godaddy", "post office", "hmrc", "tfl", "trainline", "revolut",
    "monzo", "barclays", "hsbc", "lloyds", "natwest", "santander", "halifax", "nationwide",
    "wells fargo", "bank of america", "alipay", "wechat pay", "taobao", "alibaba", "jd.com",
    "京东", "淘宝", "天猫", "支付宝", "微信支付", "美团", "饿了么", "滴滴", "拼多多"};

/* Capitalised words that are not company names on their own. */
static const char *const k_stop[] = {
    "I", "I'm", "I've", "I'll", "I'd", "Im", "The", "A", "An", "My", "Our", "Your", "This", "That",
    "It", "We", "You", "He", "She", "They", "Monday", "Tuesday", "Wednesday", "Thursday",
    "Friday", "Saturday", "Sunday", "January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December", "Jan", "Feb", "Mar", "Apr", "Jun",
    "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec", "EU", "UK", "US", "USA", "ATM", "ATMs", "SWIFT",
    "IBAN", "PIN", "OK", "Ok", "Hi", "Hello", "Thanks", "Please", "Yes", "No", "Can", "Could",
    "Would", "Will", "What", "When", "Why", "How", "Where", "Who", "Is", "Are", "Do", "Does",
    "Did", "Visa", "Mastercard", "Google Pay", "Apple Pay", "Europe", "America", "England",
    "London", "Spain", "France", "Germany", "China", "Italy", "Canada", "Mexico", "Japan", "India",
    "Australia", "Ireland", "Scotland", "Wales", "Portugal", "Greece", "Turkey", "Poland", "Hong",
    "Singapore", "Dubai", "Paris", "Berlin", "Madrid", "Rome", "Tokyo", "Beijing", "Shanghai",
    "New", "Asia", "Africa", "Switzerland", "Netherlands", "Belgium", "Austria", "Sweden",
    "Norway", "Denmark", "Finland", "Russia", "Brazil", "Thailand", "Vietnam", "Korea", "Bulgaria",
    "Romania", "Hungary", "Croatia", "Serbia", "Ukraine", "Czechia", "Slovakia", "Slovenia", "Estonia",
    "Latvia", "Lithuania", "Iceland", "Luxembourg", "Malta", "Cyprus", "Egypt", "Morocco", "Nigeria",
    "Kenya", "Israel", "Pakistan", "Bangladesh", "Indonesia", "Malaysia", "Philippines", "Argentina",
    "Chile", "Colombia", "Peru", "Venezuela", "Cuba", "Jamaica", "Qatar", "Kuwait", "Lebanon", "Iran",
    "Iraq", "Taiwan", "Nepal", "Amsterdam", "Barcelona", "Lisbon", "Dublin", "Vienna", "Prague",
    "Warsaw", "Budapest", "Athens", "Istanbul", "Moscow", "Sydney", "Toronto", "Brussels", "Zurich",
    "Geneva", "Munich", "Milan", "Edinburgh", "Manchester", "Express", "Christmas", "Easter", "USD",
    "EUR", "GBP", "CNY", "RMB", "Mr", "Mrs", "Ms", "Dr"};

static struct {
    pthread_once_t once;        /* compile guard */
    pcre2_code *re[P_N];        /* compiled patterns */
    char err[256];              /* compile error, "" when fine */
    char *gaz_re;               /* the gazetteer pattern text */
} G = {PTHREAD_ONCE_INIT, {0}, "", NULL};

static void compile_all(void) {
    fr_buf b = {0};
    fr_buf_puts(&b, "(?<![\\w&])(");
    bool first = true;
    for (size_t i = 0; i < FR_ARRAY_LEN(gazetteer); i++) {
        if ((unsigned char)gazetteer[i][0] >= 0x80) continue;
        if (!first) fr_buf_puts(&b, "|");
        first = false;
        for (const char *p = gazetteer[i]; *p; p++) {
            if (strchr("\\^$.|?*+()[]{}", *p)) fr_buf_puts(&b, "\\");
            if (*p == ' ') fr_buf_puts(&b, "\\s+");
            else fr_buf_append(&b, p, 1);
        }
    }
    fr_buf_puts(&b, ")(?:'s)?(?![\\w&+])");
    for (size_t i = 0; i < FR_ARRAY_LEN(gazetteer); i++) {
        if ((unsigned char)gazetteer[i][0] < 0x80) continue;
        fr_buf_puts(&b, "|");
        fr_buf_puts(&b, gazetteer[i]);
    }
    G.gaz_re = fr_buf_cstr(&b);
    for (int i = 0; i < P_N; i++) {
        const char *re = i == P_K_GAZ ? G.gaz_re : defs[i].re;
        int ec;
        PCRE2_SIZE eo;
        G.re[i] = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | defs[i].opts, &ec, &eo, NULL);
        if (!G.re[i]) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            snprintf(G.err, sizeof G.err, "slot pattern %d: %s at offset %zu", i, (char *)msg, (size_t)eo);
            return;
        }
        pcre2_jit_compile(G.re[i], PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    }
}

/* ---------- candidates ---------- */

typedef struct {
    fr_slot s;       /* the slot */
    int prio;        /* pattern priority */
    int period_only; /* DATE_PERIOD made from a month / relative period: becomes a date with a role */
    int no_role;     /* deictic words (today, yesterday, this evening) never get a from/to role */
    int companion;   /* kept beside an overlapping slot ("morning" inside the date "this morning") */
    char vval[24];   /* a value that replaces the formatted one ("P3D", "R/P1M", "" + vague) */
    int vset;        /* vval is set */
    int partial;     /* DATE guessed from a part: PART_ORD "the 5th", PART_WD "Friday", PART_DM "5 May" */
} cand;

enum { PART_NONE, PART_ORD, PART_WD, PART_DM };

typedef struct {
    const char *t;            /* input */
    size_t n;                 /* input length */
    fr_slot_ref ref;          /* reference moment */
    long today;               /* ref date as days since 1970-01-01 */
    const PCRE2_SIZE *ov;     /* current match */
    int ng;                   /* groups in the current match */
    cand *c;                  /* candidates */
    size_t nc, cap;           /* count, capacity */
    int past;                 /* the sentence speaks of the past (past_tense) */
} ctx;

static bool has(const ctx *x, int g) { return g < x->ng && x->ov[2 * g] != PCRE2_UNSET; }
static const char *gs(const ctx *x, int g) { return x->t + x->ov[2 * g]; }
static size_t gl(const ctx *x, int g) { return has(x, g) ? x->ov[2 * g + 1] - x->ov[2 * g] : 0; }
static long gi(const ctx *x, int g) { return has(x, g) ? atoin(gs(x, g), gl(x, g)) : -1; }

static cand *new_cand(ctx *x, fr_slot_kind kind, size_t start, size_t end, int prio) {
    if (x->nc == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 32;
        x->c = fr_xrealloc(x->c, x->cap * sizeof *x->c);
    }
    cand *c = &x->c[x->nc++];
    memset(c, 0, sizeof *c);
    c->s.kind = kind;
    c->s.start = start;
    c->s.end = end;
    c->prio = prio;
    return c;
}

static void set_date(cand *c, long days) {
    civil_from_days(days, &c->s.year, &c->s.month, &c->s.day);
}

static cand *date_cand(ctx *x, long days, int prio) {
    cand *c = new_cand(x, FR_SLOT_DATE, x->ov[0], x->ov[1], prio);
    set_date(c, days);
    return c;
}

static cand *period_cand(ctx *x, long from, long to, int prio) {
    cand *c = new_cand(x, FR_SLOT_DATE_PERIOD, x->ov[0], x->ov[1], prio);
    civil_from_days(from, &c->s.year, &c->s.month, &c->s.day);
    civil_from_days(to, &c->s.year2, &c->s.month2, &c->s.day2);
    return c;
}

static cand *time_cand(ctx *x, int h, int m, int prio) {
    if (h < 0 || h > 24 || m < 0 || m > 59) return NULL;
    if (h == 24) h = 0;
    cand *c = new_cand(x, FR_SLOT_TIME, x->ov[0], x->ov[1], prio);
    c->s.hour = h;
    c->s.minute = m;
    return c;
}

/* Year for a day-month without a year: this year unless the month is already past. */
static int infer_year(const ctx *x, int m) {
    if (x->past) return m <= x->ref.month ? x->ref.year : x->ref.year - 1;
    return m >= x->ref.month ? x->ref.year : x->ref.year + 1;
}

/* The year of day d of month m without a year: the next such day, or in a sentence about the
 * past the most recent one on or before the reference date. */
static int infer_year_d(const ctx *x, int m, int d) {
    if (x->past) return (m < x->ref.month || (m == x->ref.month && d <= x->ref.day)) ? x->ref.year : x->ref.year - 1;
    return m >= x->ref.month ? x->ref.year : x->ref.year + 1;
}

/* The word ending right before byte offset `at` (skipping spaces), lowercased into buf. */
static void prev_word(const ctx *x, size_t at, char *buf, size_t cap, size_t *word_start) {
    size_t e = at;
    while (e > 0 && (x->t[e - 1] == ' ' || x->t[e - 1] == '\t')) e--;
    size_t s = e;
    while (s > 0 && (isalnum((unsigned char)x->t[s - 1]) || x->t[s - 1] == '\'')) s--;
    size_t n = FR_MIN(e - s, cap - 1);
    for (size_t i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)x->t[s + i]);
    buf[n] = 0;
    if (word_start) *word_start = s;
}

/* Apply a 12-hour modifier to an hour. */
static int apply_mod(const char *m, size_t n, int h) {
    if (!n) return h;
    char c = (char)tolower((unsigned char)m[0]);
    if (c == 'a' && (n < 2 || m[1] == '.' || tolower((unsigned char)m[1]) == 'm'))
        return h == 12 ? 0 : h; /* a.m. */
    if (c == 'p') return h < 12 ? h + 12 : h;
    if (istarts(m, n, "in the morning") || istarts(m, n, "morning")) return h == 12 ? 0 : h;
    if (istarts(m, n, "in the afternoon") || istarts(m, n, "afternoon") || istarts(m, n, "in the evening") ||
        istarts(m, n, "evening"))
        return h < 12 ? h + 12 : h;
    if (istarts(m, n, "at night") || istarts(m, n, "in the night") || istarts(m, n, "night")) {
        if (h >= 6 && h < 12) return h + 12;
        if (h == 12) return 0;
        return h;
    }
    return h; /* o'clock */
}

/* Is the modifier a.m./p.m. (not "afternoon", "at night", ...)? */
static bool is_ampm(const char *m, size_t n) {
    char c = (char)tolower((unsigned char)m[0]);
    return n >= 2 && (c == 'a' || c == 'p') && (m[1] == '.' || tolower((unsigned char)m[1]) == 'm');
}

/* ---------- handlers ---------- */

static void h_date(ctx *x, int id) {
    const int p = defs[id].prio;
    switch (id) {
    case P_D_ISO: {
        int y = (int)gi(x, 1), m = (int)gi(x, 2), d = (int)gi(x, 3);
        if (valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p);
        break;
    }
    case P_D_NUM: {
        int a = (int)gi(x, 1), b = (int)gi(x, 3), y = (int)gi(x, 4), d, m;
        if (gl(x, 4) == 2) y += 2000;
        char sep = *gs(x, 2);
        if (sep == '.' || a > 12) { d = a; m = b; }
        else if (b > 12) { m = a; d = b; }
        else { d = a; m = b; } /* day-first when ambiguous */
        if (valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p);
        break;
    }
    case P_D_CJK: {
        int m = (int)gi(x, 2), d = (int)gi(x, 3);
        int y = has(x, 1) ? (int)gi(x, 1) : infer_year_d(x, m, d);
        if (valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p);
        break;
    }
    case P_D_DM:
    case P_D_MD: {
        int d = (int)gi(x, id == P_D_DM ? 1 : 2), m = month_of(gs(x, id == P_D_DM ? 3 : 1), gl(x, id == P_D_DM ? 3 : 1));
        bool ord = has(x, id == P_D_DM ? 2 : 3), year = has(x, 4);
        const char *mw = gs(x, id == P_D_DM ? 3 : 1);
        size_t mwl = gl(x, id == P_D_DM ? 3 : 1);
        /* "may"/"march" in lower case are usually verbs: demand an ordinal or a year */
        if ((ieq(mw, mwl, "may") || ieq(mw, mwl, "march")) && islower((unsigned char)mw[0]) && !ord && !year) break;
        int y = year ? (int)gi(x, 4) : infer_year_d(x, m, d);
        /* a leading weekday without a year picks the year it falls on ("Friday, October the
         * 16th"): the nearest one, within seven years, in the direction the sentence looks */
        int wd = weekday_of(x->t + x->ov[0], x->ov[1] - x->ov[0]);
        if (!year && m && wd >= 0 && isalpha((unsigned char)x->t[x->ov[0]])) {
            for (int k = 0; k < 8; k++) {
                int yy = x->past ? y - k : y + k;
                if (valid_date(yy, m, d) && weekday(days_from_civil(yy, m, d)) == wd) {
                    y = yy;
                    break;
                }
            }
        }
        if (m && valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p)->partial = year ? PART_NONE : PART_DM;
        break;
    }
    case P_D_MY: {
        int m = month_of(gs(x, 1), gl(x, 1)), y = (int)gi(x, 2);
        if (m && y >= 1900 && y <= 2200) {
            cand *c = period_cand(x, days_from_civil(y, m, 1), days_from_civil(y, m, days_in_month(y, m)), p);
            c->period_only = 1;
        }
        break;
    }
    case P_D_MTY: {
        int m = month_of(gs(x, 1), gl(x, 1)), y = x->ref.year;
        if (istarts(gs(x, 2), gl(x, 2), "last")) y--;
        else if (istarts(gs(x, 2), gl(x, 2), "next")) y++;
        if (m) {
            cand *c = period_cand(x, days_from_civil(y, m, 1), days_from_civil(y, m, days_in_month(y, m)), p);
            c->period_only = 1;
        }
        break;
    }
    case P_D_ORD: {
        int d = (int)gi(x, 1), y = x->ref.year, m = x->ref.month;
        bool this_month = has(x, 3); /* "the 20th of this / next / last month" */
        if (d < 1 || d > 31) break;
        if (this_month && istarts(gs(x, 3), gl(x, 3), "next")) add_months(&y, &m, 1);
        if (this_month && istarts(gs(x, 3), gl(x, 3), "last")) add_months(&y, &m, -1);
        if (!this_month && !x->past && d < x->ref.day) add_months(&y, &m, 1);
        if (!this_month && x->past && d > x->ref.day) add_months(&y, &m, -1);
        for (int k = 0; k < 3 && d > days_in_month(y, m); k++) add_months(&y, &m, 1);
        if (valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p)->partial = this_month ? PART_NONE : PART_ORD;
        break;
    }
    case P_D_MON: {
        const char *mw = gs(x, 1);
        if (ieq(mw, gl(x, 1), "may") && islower((unsigned char)mw[0])) break;
        int m = month_of(mw, gl(x, 1)), y = infer_year(x, m);
        cand *c = period_cand(x, days_from_civil(y, m, 1), days_from_civil(y, m, days_in_month(y, m)), p);
        c->period_only = 1;
        break;
    }
    case P_D_YEAR: {
        int y = (int)gi(x, 1);
        cand *c = period_cand(x, days_from_civil(y, 1, 1), days_from_civil(y, 12, 31), p);
        c->period_only = 2; /* a bare year reads as its first day when not a range end */
        break;
    }
    case P_D_REL: {
        const char *w = gs(x, 1);
        size_t n = gl(x, 1);
        long d = x->today;
        if (istarts(w, n, "day after")) d += 2;
        else if (istarts(w, n, "day before")) d -= 2;
        else if (istarts(w, n, "tomorrow")) d += 1;
        else if (istarts(w, n, "yesterday") || istarts(w, n, "last")) d -= 1;
        date_cand(x, d, p)->no_role = 1;
        break;
    }
    case P_D_REL_CJK: {
        const char *w = gs(x, 1);
        long d = x->today;
        if (!strncmp(w, "明天", 6)) d += 1;
        else if (!strncmp(w, "后天", 6) || !strncmp(w, "後天", 6)) d += 2;
        else if (!strncmp(w, "昨天", 6)) d -= 1;
        else if (!strncmp(w, "前天", 6)) d -= 2;
        date_cand(x, d, p)->no_role = 1;
        break;
    }
    case P_D_WD:
    case P_D_WWD: {
        int wd = weekday_of(gs(x, 2), gl(x, 2)), tw = weekday(x->today);
        const char *mod = has(x, 1) ? gs(x, 1) : "";
        size_t ml = gl(x, 1);
        const char *post = id == P_D_WD && has(x, 3) ? gs(x, 3) : "";
        size_t pl = id == P_D_WD ? gl(x, 3) : 0;
        long monday = x->today - tw, d;
        if (id == P_D_WWD || (pl && (istarts(post, pl, "next") || istarts(post, pl, "last")))) {
            const char *which = id == P_D_WWD ? mod : post;
            size_t wl = id == P_D_WWD ? ml : pl;
            long base = monday + (istarts(which, wl, "next") ? 7 : istarts(which, wl, "last") ? -7 : 0);
            d = base + wd;
        } else if (ml && istarts(mod, ml, "next")) {
            d = monday + 7 + wd;
        } else if (ml && (istarts(mod, ml, "last") || istarts(mod, ml, "past") || istarts(mod, ml, "previous"))) {
            d = x->today - ((tw - wd + 7) % 7 ? (tw - wd + 7) % 7 : 7);
        } else if (ml && istarts(mod, ml, "this")) {
            d = monday + wd;
            if (d < x->today) d += 7;
        } else if (!ml && x->past) { /* bare, in a sentence about the past: the last such day */
            d = x->today - ((tw - wd + 7) % 7 ? (tw - wd + 7) % 7 : 7);
        } else { /* bare or "coming": the next such day after today */
            d = x->today + ((wd - tw + 7) % 7 ? (wd - tw + 7) % 7 : 7);
        }
        if (pl && istarts(post, pl, "in a week")) d += 7;
        if (pl && istarts(post, pl, "after next")) d += 7;
        date_cand(x, d, p)->partial = !ml && !pl ? PART_WD : PART_NONE;
        break;
    }
    case P_D_OFF: {
        if (has(x, 6)) { /* "some days ago": a past date of unknown distance, value "" */
            cand *c = date_cand(x, x->today, p);
            c->vset = 1;
            break;
        }
        bool in = has(x, 1);
        long k = count_of(gs(x, in ? 1 : 3), gl(x, in ? 1 : 3));
        const char *u = gs(x, in ? 2 : 4);
        bool ago = !in && istarts(gs(x, 5), gl(x, 5), "ago");
        if (k < 0 || k > 2000) break;
        long sign = ago ? -1 : 1;
        if (u[0] == 'd' || u[0] == 'D') date_cand(x, x->today + sign * k, p);
        else if (u[0] == 'w' || u[0] == 'W') date_cand(x, x->today + sign * 7 * k, p);
        else {
            int y = x->ref.year, m = x->ref.month;
            add_months(&y, &m, (int)(sign * k * ((u[0] == 'y' || u[0] == 'Y') ? 12 : 1)));
            int d = FR_MIN(x->ref.day, days_in_month(y, m));
            if (valid_date(y, m, d)) date_cand(x, days_from_civil(y, m, d), p);
        }
        break;
    }
    case P_D_EDGE: {
        /* the first or last day of this/next/last week, month, year, or of a month */
        bool end = istarts(gs(x, 1), gl(x, 1), "end");
        long from, to;
        if (has(x, 4)) {
            int m = month_of(gs(x, 4), gl(x, 4)), y = infer_year(x, m);
            from = days_from_civil(y, m, 1);
            to = days_from_civil(y, m, days_in_month(y, m));
        } else {
            const char *w = gs(x, 2);
            size_t wn = gl(x, 2);
            int dir = istarts(w, wn, "next") ? 1 : istarts(w, wn, "last") ? -1 : 0;
            char uc = (char)tolower((unsigned char)*gs(x, 3));
            int y = x->ref.year, m = x->ref.month;
            if (uc == 'w') {
                from = x->today - weekday(x->today) + 7 * dir;
                to = from + 6;
            } else if (uc == 'm') {
                add_months(&y, &m, dir);
                from = days_from_civil(y, m, 1);
                to = days_from_civil(y, m, days_in_month(y, m));
            } else {
                from = days_from_civil(y + dir, 1, 1);
                to = days_from_civil(y + dir, 12, 31);
            }
        }
        date_cand(x, end ? to : from, p);
        break;
    }
    case P_P_DUR:
    case P_P_FORU: {
        /* a duration: ISO 8601 "P3D", "P2W", "P11Y" ("for days": no count, value "") */
        cand *c;
        if (id == P_P_FORU) {
            c = new_cand(x, FR_SLOT_DATE_PERIOD, x->ov[0], x->ov[1], p);
        } else {
            long k = count_of(gs(x, 2), gl(x, 2));
            bool one = k == 1 && !isdigit((unsigned char)*gs(x, 2));
            if (k < 1 || k > 2000 || (one && !has(x, 1))) break; /* "call it a day" */
            c = new_cand(x, FR_SLOT_DATE_PERIOD, x->ov[4], x->ov[1], p);
            snprintf(c->vval, sizeof c->vval, "P%ld%c", k, (char)toupper((unsigned char)*gs(x, 3)));
        }
        c->no_role = 1;
        c->vset = 1;
        break;
    }
    case P_P_EACH: {
        /* a recurrence: "R/P1M" (ISO 8601 repeating interval), the day of the month kept in day */
        char uc = (char)toupper((unsigned char)*gs(x, 4));
        cand *c = new_cand(x, FR_SLOT_DATE_PERIOD, x->ov[0], x->ov[1], p);
        c->no_role = 1;
        c->vset = 1;
        if (has(x, 1)) {
            long d = gi(x, 1);
            if (d < 1 || d > 31) { x->nc--; break; }
            snprintf(c->vval, sizeof c->vval, "R/P1%c/D%ld", uc, d);
        } else {
            snprintf(c->vval, sizeof c->vval, "R/P1%c", uc);
        }
        break;
    }
    case P_P_LATELY: {
        cand *c = new_cand(x, FR_SLOT_DATE_PERIOD, x->ov[0], x->ov[1], p); /* vague: value "" */
        c->no_role = 1;
        c->vset = 1;
        break;
    }
    case P_P_REL: {
        const char *w = gs(x, 1), *u = gs(x, 2);
        size_t wn = gl(x, 1);
        int dir = (istarts(w, wn, "next") || istarts(w, wn, "coming")) ? 1
                  : (istarts(w, wn, "last") || istarts(w, wn, "previous") || istarts(w, wn, "past")) ? -1 : 0;
        long from, to;
        int y = x->ref.year, m = x->ref.month;
        char uc = (char)tolower((unsigned char)u[0]);
        if (uc == 'w' && gl(x, 2) == 7) { /* weekend: Saturday and Sunday of that week */
            from = x->today - weekday(x->today) + 7 * dir + 5;
            to = from + 1;
        } else if (uc == 'w') {
            from = x->today - weekday(x->today) + 7 * dir;
            to = from + 6;
        } else if (uc == 'm') {
            add_months(&y, &m, dir);
            from = days_from_civil(y, m, 1);
            to = days_from_civil(y, m, days_in_month(y, m));
        } else if (uc == 'q') {
            int q0 = (m - 1) / 3 * 3 + 1;
            m = q0;
            add_months(&y, &m, 3 * dir);
            int y2 = y, m2 = m;
            add_months(&y2, &m2, 2);
            from = days_from_civil(y, m, 1);
            to = days_from_civil(y2, m2, days_in_month(y2, m2));
        } else {
            y += dir;
            from = days_from_civil(y, 1, 1);
            to = days_from_civil(y, 12, 31);
        }
        cand *c = period_cand(x, from, to, p);
        c->period_only = 1;
        break;
    }
    case P_P_LASTN: {
        const char *w = gs(x, 1), *u = gs(x, 3);
        long k = count_of(gs(x, 2), gl(x, 2));
        if (k < 1 || k > 2000) break;
        bool next = istarts(w, gl(x, 1), "next") || istarts(w, gl(x, 1), "coming");
        char uc = (char)tolower((unsigned char)u[0]);
        long span = uc == 'd' ? k : uc == 'w' ? 7 * k : -1;
        long from, to;
        /* NLU++: the next N days run from tomorrow for N days (end exclusive); the last N days
         * end today; months count whole calendar months up to / from the current one */
        if (span > 0) {
            if (next) { from = x->today + 1; to = x->today + 1 + span; }
            else { from = x->today - span; to = x->today; }
        } else {
            int y = x->ref.year, m = x->ref.month;
            int months = (int)(uc == 'y' ? 12 * k : k);
            if (uc == 'y') m = 1; /* years count whole calendar years */
            if (next) {
                add_months(&y, &m, 1);
                from = days_from_civil(y, m, 1);
                add_months(&y, &m, months);
                to = days_from_civil(y, m, 1);
            } else {
                to = days_from_civil(y, m, 1);
                add_months(&y, &m, -months);
                from = days_from_civil(y, m, 1);
            }
        }
        period_cand(x, from, to, p);
        break;
    }
    default:
        break;
    }
}

static void h_time(ctx *x, int id) {
    const int p = defs[id].prio;
    switch (id) {
    case P_T_HM:
    case P_T_HMD:
    case P_T_HSM:
    case P_T_ATHM: {
        int h = (int)gi(x, 1), m = (int)gi(x, 2);
        if (h > 24) break;
        if (has(x, 3)) {
            if (h > 12 && is_ampm(gs(x, 3), gl(x, 3))) break; /* "15:00 p.m." */
            h = apply_mod(gs(x, 3), gl(x, 3), h);
        }
        time_cand(x, h, m, p);
        break;
    }
    case P_T_RANGE1: {
        /* "between 2 and 4 pm": 14:00; "from 10 to 2 pm": 10:00 (the range crosses noon) */
        int h = (int)gi(x, 1), h2 = (int)gi(x, 2);
        if (h > 12 || h2 > 12 || h < 1) break;
        if (tolower((unsigned char)*gs(x, 3)) == 'p' && h < h2) h += 12;
        time_cand(x, h, 0, p);
        break;
    }
    case P_T_PT: {
        char w[32];
        prev_word(x, x->ov[0], w, sizeof w, NULL);
        const char *a = gs(x, 1);
        size_t an = gl(x, 1);
        int mins = istarts(a, an, "half") ? 30 : istarts(a, an, "quarter") ? 15 : (int)gi(x, 1);
        int h = (int)gi(x, 3);
        bool to = istarts(gs(x, 2), gl(x, 2), "to");
        /* "from 5 to 7", "between 5 to 7", "5 to 7 days" are ranges, not clock times */
        if (to && !has(x, 4) && (!strcmp(w, "from") || !strcmp(w, "between"))) break;
        if (mins < 1 || mins > 59 || h > 24) break;
        if (has(x, 4)) h = apply_mod(gs(x, 4), gl(x, 4), h);
        if (to) {
            h = (h + 23) % 24;
            mins = 60 - mins;
        }
        time_cand(x, h, mins, p);
        break;
    }
    case P_T_HMOD: {
        int h = (int)gi(x, 1);
        if (h > 24) break;
        const char *m = gs(x, 2);
        if (h > 12 && is_ampm(m, gl(x, 2))) break;
        time_cand(x, apply_mod(m, gl(x, 2), h), 0, p);
        break;
    }
    case P_T_BARE: {
        int h = (int)gi(x, 1);
        if (h <= 24) time_cand(x, h, 0, p);
        break;
    }
    case P_T_WORD:
        time_cand(x, istarts(gs(x, 1), gl(x, 1), "midn") ? 0 : 12, 0, p);
        break;
    case P_T_REL:
    case P_T_HALFHOUR: {
        long mins;
        bool ago = false;
        if (id == P_T_HALFHOUR) mins = 30;
        else {
            bool in = has(x, 1);
            long k = count_of(gs(x, in ? 1 : 3), gl(x, in ? 1 : 3));
            if (k < 0 || k > 10000) break;
            mins = tolower((unsigned char)*gs(x, in ? 2 : 4)) == 'h' ? 60 * k : k;
            ago = !in;
        }
        long t = (long)x->ref.hour * 60 + x->ref.minute + (ago ? -mins : mins);
        t = ((t % 1440) + 1440) % 1440;
        time_cand(x, (int)(t / 60), (int)(t % 60), p);
        break;
    }
    case P_T_CJK: {
        int h = (int)gi(x, 2), m = has(x, 3) ? (int)gi(x, 3) : has(x, 4) ? 30 : has(x, 5) ? 15 : has(x, 6) ? 45 : 0;
        if (has(x, 1)) {
            const char *pre = gs(x, 1);
            if ((!strncmp(pre, "下午", 6) || !strncmp(pre, "晚上", 6) || !strncmp(pre, "傍晚", 6)) && h < 12) h += 12;
            if (!strncmp(pre, "中午", 6) && h < 6) h += 12;
        }
        time_cand(x, h, m, p);
        break;
    }
    default:
        break;
    }
}

static const struct { const char *k; const char *code; } currencies[] = {
    {"us$", "USD"}, {"a$", "AUD"}, {"au$", "AUD"}, {"c$", "CAD"}, {"ca$", "CAD"}, {"hk$", "HKD"},
    {"s$", "SGD"}, {"nz$", "NZD"}, {"r$", "BRL"}, {"$", "USD"}, {"£", "GBP"}, {"€", "EUR"},
    {"¥", "CNY"}, {"￥", "CNY"}, {"₹", "INR"}, {"₩", "KRW"}, {"₽", "RUB"}, {"₺", "TRY"},
    {"₪", "ILS"}, {"₫", "VND"}, {"฿", "THB"}, {"rmb", "CNY"}, {"dollar", "USD"}, {"buck", "USD"},
    {"pound", "GBP"}, {"quid", "GBP"}, {"sterling", "GBP"}, {"pence", "GBP"}, {"euro", "EUR"},
    {"cent", "USD"}, {"yen", "JPY"}, {"yuan", "CNY"}, {"renminbi", "CNY"}, {"rupee", "INR"},
    {"swiss franc", "CHF"}, {"franc", "CHF"}, {"ruble", "RUB"}, {"rouble", "RUB"}, {"peso", "MXN"},
    {"zloty", "PLN"}, {"kronor", "SEK"}, {"krona", "SEK"}, {"kroner", "NOK"}, {"块钱", "CNY"},
    {"块", "CNY"}, {"人民币", "CNY"}, {"元", "CNY"}, {"美元", "USD"}, {"美金", "USD"},
    {"欧元", "EUR"}, {"歐元", "EUR"}, {"英镑", "GBP"}, {"英鎊", "GBP"}, {"日元", "JPY"},
    {"日圓", "JPY"}, {"港币", "HKD"}, {"港幣", "HKD"}, {"円", "JPY"}};

/* ISO code of a currency symbol / code / word. "" if unknown. */
static const char *currency_code(const char *s, size_t n) {
    if (n == 3 && isalpha((unsigned char)s[0]) && isalpha((unsigned char)s[1]) && isalpha((unsigned char)s[2])) {
        static char codes[][4] = {"USD", "EUR", "GBP", "JPY", "CNY", "CHF", "AUD", "CAD", "HKD", "SGD",
                                  "INR", "KRW", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "RUB", "TRY",
                                  "ZAR", "BRL", "MXN", "NZD", "AED", "SAR", "THB", "TWD"};
        for (size_t i = 0; i < FR_ARRAY_LEN(codes); i++)
            if (toupper((unsigned char)s[0]) == codes[i][0] && toupper((unsigned char)s[1]) == codes[i][1] &&
                toupper((unsigned char)s[2]) == codes[i][2])
                return codes[i];
    }
    for (size_t i = 0; i < FR_ARRAY_LEN(currencies); i++)
        if (istarts(s, n, currencies[i].k)) return currencies[i].code;
    return "";
}

static double mult_of(const ctx *x, int g) {
    if (!has(x, g)) return 1;
    const char *m = gs(x, g);
    size_t n = gl(x, g);
    if (ieq(m, n, "k") || ieq(m, n, "thousand") || ieq(m, n, "grand") || !strncmp(m, "千", 3)) return 1e3;
    if (ieq(m, n, "million") || ieq(m, n, "mn") || !strncmp(m, "百万", 6)) return 1e6;
    if (ieq(m, n, "bn") || ieq(m, n, "billion")) return 1e9;
    if (!strncmp(m, "万", 3)) return 1e4;
    if (!strncmp(m, "亿", 3)) return 1e8;
    return 1;
}

static void amount_cand(ctx *x, double v, const char *code, int prio) {
    if (!(v >= 0) || v > 1e15) return;
    cand *c = new_cand(x, FR_SLOT_AMOUNT, x->ov[0], x->ov[1], prio);
    c->s.amount = v;
    snprintf(c->s.currency, sizeof c->s.currency, "%s", code);
}

/* "a thousand", "two hundred", "fifty" → value; -1 on nonsense. */
static double words_value(const char *s, size_t n) {
    double total = 0, cur = 0;
    size_t i = 0;
    bool any = false;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '-' || s[i] == '\t')) i++;
        size_t b = i;
        while (i < n && isalpha((unsigned char)s[i])) i++;
        if (i == b) break;
        const char *w = s + b;
        size_t wl = i - b;
        int v = word_number(w, wl);
        if (v > 0 && !ieq(w, wl, "few") && !istarts(w, wl, "couple") && !ieq(w, wl, "several")) cur += v;
        else if (ieq(w, wl, "hundred")) cur = (cur ? cur : 1) * 100;
        else if (ieq(w, wl, "thousand") || ieq(w, wl, "grand")) { total += (cur ? cur : 1) * 1000; cur = 0; }
        else if (ieq(w, wl, "million")) { total += (cur ? cur : 1) * 1e6; cur = 0; }
        else return -1;
        any = true;
    }
    return any ? total + cur : -1;
}

static void h_amount(ctx *x, int id) {
    const int p = defs[id].prio;
    switch (id) {
    case P_A_SYM:
    case P_A_CODE:
        amount_cand(x, parse_amount_number(gs(x, 2), gl(x, 2)) * mult_of(x, 3), currency_code(gs(x, 1), gl(x, 1)), p);
        break;
    case P_A_NSYM:
    case P_A_NWORD_CJK:
        amount_cand(x, parse_amount_number(gs(x, 1), gl(x, 1)) * mult_of(x, 2), currency_code(gs(x, 3), gl(x, 3)), p);
        break;
    case P_A_NWORD: {
        int g = has(x, 3) ? 3 : 4;
        double v = parse_amount_number(gs(x, 1), gl(x, 1)) * mult_of(x, 2);
        const char *w = gs(x, g);
        size_t wl = gl(x, g);
        if (istarts(w, wl, "pence") || istarts(w, wl, "cent")) v /= 100;
        amount_cand(x, v, currency_code(w, wl), p);
        break;
    }
    case P_A_WORDNUM: {
        double v = words_value(gs(x, 1), gl(x, 1));
        const char *w = gs(x, 2);
        size_t wl = gl(x, 2);
        if (v <= 0) break;
        if (istarts(w, wl, "pence") || istarts(w, wl, "cent")) v /= 100;
        amount_cand(x, v, currency_code(w, wl), p);
        break;
    }
    case P_A_PENCE:
        amount_cand(x, (double)gi(x, 1) / 100.0, "GBP", p);
        break;
    case P_A_CTX:
    case P_A_CMP:
    case P_A_CTX2:
        amount_cand(x, parse_amount_number(gs(x, 1), gl(x, 1)), "", p);
        break;
    default:
        break;
    }
}

static bool luhn_ok(const char *d, size_t n) {
    int sum = 0;
    for (size_t i = 0; i < n; i++) {
        int v = d[n - 1 - i] - '0';
        if (i % 2) {
            v *= 2;
            if (v > 9) v -= 9;
        }
        sum += v;
    }
    return sum % 10 == 0;
}

static bool iban_ok(const char *s, size_t n) {
    char a[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m < sizeof a; i++)
        if (s[i] != ' ') a[m++] = (char)toupper((unsigned char)s[i]);
    if (m < 15 || m > 34) return false;
    unsigned rem = 0;
    for (size_t k = 0; k < m; k++) {
        char c = a[(k + 4) % m];
        if (c >= '0' && c <= '9') rem = (rem * 10 + (unsigned)(c - '0')) % 97;
        else if (c >= 'A' && c <= 'Z') rem = (rem * 100 + (unsigned)(c - 'A' + 10)) % 97;
        else return false;
    }
    return rem == 1;
}

/* Is one of the words within `back` bytes before `at`? (case-insensitive) */
static bool context_has(const ctx *x, size_t at, size_t back, const char *const *words, size_t nw) {
    size_t s = at > back ? at - back : 0;
    for (size_t i = s; i < at; i++)
        for (size_t k = 0; k < nw; k++) {
            size_t l = strlen(words[k]);
            if (i + l <= at && istarts(x->t + i, at - i, words[k])) return true;
        }
    return false;
}

static void h_number(ctx *x, int id) {
    const int p = defs[id].prio;
    size_t s = x->ov[0], e = x->ov[1];
    char digits[40];
    size_t nd = 0;
    for (size_t i = s; i < e && nd + 1 < sizeof digits; i++)
        if (isdigit((unsigned char)x->t[i])) digits[nd++] = x->t[i];
    digits[nd] = 0;
    fr_slot_kind kind;
    static const char *const card_words[] = {"card", "visa", "mastercard", "amex", "卡"};
    static const char *const acct_words[] = {"account", "acct", "a/c", "iban", "账", "帳"};
    switch (id) {
    case P_C_DIGITS:
        if (nd < 13 || nd > 19) return;
        if (luhn_ok(digits, nd) || context_has(x, s, 32, card_words, FR_ARRAY_LEN(card_words))) kind = FR_SLOT_CARD_NUMBER;
        else if (context_has(x, s, 32, acct_words, FR_ARRAY_LEN(acct_words))) kind = FR_SLOT_ACCOUNT_NUMBER;
        else return;
        break;
    case P_C_ENDING:
        kind = FR_SLOT_CARD_NUMBER;
        break;
    case P_AC_IBAN:
        if (!iban_ok(x->t + s, e - s)) return;
        kind = FR_SLOT_ACCOUNT_NUMBER;
        break;
    case P_AC_CTX:
    case P_AC_CJK:
        if (nd < 6 || nd > 24) return;
        kind = (id == P_AC_CJK && context_has(x, s, 16, card_words + 4, 1)) ? FR_SLOT_CARD_NUMBER
                                                                              : FR_SLOT_ACCOUNT_NUMBER;
        break;
    default:
        return;
    }
    new_cand(x, kind, s, e, p);
}

static void h_invoice(ctx *x, int id) {
    new_cand(x, FR_SLOT_INVOICE_NUMBER, x->ov[0], x->ov[1], defs[id].prio);
}

static bool is_stop_company(const char *s, size_t n) {
    for (size_t i = 0; i < FR_ARRAY_LEN(k_stop); i++)
        if (strlen(k_stop[i]) == n && !memcmp(k_stop[i], s, n)) return true;
    return false;
}

/* Words that end (or cannot start) a lower-case merchant name. */
static bool lc_stop(const char *w, size_t n) {
    static const char *const stop[] = {
        "my", "your", "the", "a", "an", "this", "that", "these", "those", "his", "her", "our", "their",
        "some", "any", "every", "each", "all", "it", "them", "me", "him", "us", "you", "i", "on", "in",
        "at", "for", "to", "from", "with", "since", "between", "during", "last", "next", "yesterday",
        "today", "tomorrow", "ago", "overall", "so", "but", "or", "because", "please", "then", "when",
        "via", "using", "straightaway", "anymore", "again", "before", "after", "until", "till", "is",
        "was", "are", "were", "be", "been", "has", "have", "had", "do", "does", "did", "will", "would",
        "can", "could", "should", "not", "more", "less", "than", "much", "many", "abroad", "online",
        "cash", "total", "account", "accounts", "card", "cards", "atm", "atms", "shops", "stores",
        "restaurants", "supermarkets", "person", "people", "someone", "anyone", "advance", "full",
        "time", "once", "twice", "which", "what", "who", "where", "how", "why", "if", "as", "by", "of",
        "up", "out", "off", "too", "also", "just", "only", "already", "still", "yet", "here", "there",
        "now", "lately", "recently", "and"};
    for (size_t i = 0; i < FR_ARRAY_LEN(stop); i++)
        if (strlen(stop[i]) == n && !memcmp(stop[i], w, n)) return true;
    return false;
}

static void h_company(ctx *x, int id) {
    size_t s = x->ov[0], e = x->ov[1];
    if (id == P_K_LC) {
        /* up to five lower-case words after a payment cue; "and" only between two words */
        size_t q = s, words = 0;
        e = s;
        while (q < x->n && words < 5) {
            size_t b = q;
            while (q < x->n && (islower((unsigned char)x->t[q]) || x->t[q] == '\'' || x->t[q] == '&' || x->t[q] == '-')) q++;
            if (q == b) break;
            bool stop = lc_stop(x->t + b, q - b);
            if (stop && !(q - b == 3 && !memcmp(x->t + b, "and", 3) && words > 0)) break;
            if (!stop) {
                e = q;
                words++;
            }
            if (q < x->n && x->t[q] == ' ') q++;
            else break;
        }
        if (e <= s || lc_stop(x->t + s, e - s)) return;
    } else if (id == P_K_PREP) {
        /* a name ends with its sentence: "in Leeds.  What ..." */
        for (size_t i = s; i + 1 < e; i++)
            if ((x->t[i] == '.' || x->t[i] == '!' || x->t[i] == '?') && x->t[i + 1] == ' ') {
                e = i;
                break;
            }
        /* trim trailing connectors and possessive-less punctuation */
        for (;;) {
            while (e > s && (x->t[e - 1] == '.' || x->t[e - 1] == '-' || x->t[e - 1] == '\'')) e--;
            size_t w = e;
            while (w > s && x->t[w - 1] != ' ') w--;
            if (w > s && (!strncmp(x->t + w, "and", e - w) || !strncmp(x->t + w, "of", e - w) ||
                          !strncmp(x->t + w, "&", e - w))) {
                e = w;
                while (e > s && x->t[e - 1] == ' ') e--;
                continue;
            }
            break;
        }
        /* a trailing stop word is no part of the name: "Barclay's ATMs" */
        for (;;) {
            size_t w = e;
            while (w > s && x->t[w - 1] != ' ') w--;
            if (w <= s || !is_stop_company(x->t + w, e - w)) break;
            e = w;
            while (e > s && (x->t[e - 1] == ' ' || x->t[e - 1] == '.' || x->t[e - 1] == ',')) e--;
        }
        if (e <= s) return;
        /* the first word decides: stop words (weekdays, months, pronouns...) are not companies */
        size_t fw = s;
        while (fw < e && x->t[fw] != ' ') fw++;
        if (is_stop_company(x->t + s, fw - s) || is_stop_company(x->t + s, e - s)) {
            /* "to The Body Shop" keeps going after "The"; anything else is dropped */
            if (!(fw - s == 3 && !strncmp(x->t + s, "The", 3) && fw < e)) return;
        }
        /* a single capitalised word at the end of a sentence start is weak: keep all-caps or
         * multi-word names, or any single word not at the start of the text */
    } else if (id == P_K_GAZ) {
        /* extend over following capitalised words: "Amazon Shopping", "Hyatt Gift" */
        size_t q = e;
        while (q + 1 < x->n && x->t[q] == ' ' && isupper((unsigned char)x->t[q + 1])) {
            size_t b = q + 1;
            while (b < x->n && (isalnum((unsigned char)x->t[b]) || x->t[b] == '&' || x->t[b] == '\'')) b++;
            if (is_stop_company(x->t + q + 1, b - q - 1)) break;
            q = b;
        }
        e = q;
    } else if (id == P_K_SUFFIX) {
        /* drop leading capitalised non-names: "Thanks Acme Ltd" */
        for (;;) {
            size_t fw = s;
            while (fw < e && x->t[fw] != ' ') fw++;
            if (fw >= e || !is_stop_company(x->t + s, fw - s)) break;
            s = fw;
            while (s < e && x->t[s] == ' ') s++;
        }
    } else if (id == P_K_CJK) {
        static const char *const lead[] = {"我", "你", "他", "她", "在", "从", "向", "给", "和", "与",
                                           "到", "于", "是", "的", "了", "请", "把", "被", "对", "跟"};
        for (bool again = true; again;) {
            again = false;
            for (size_t i = 0; i < FR_ARRAY_LEN(lead); i++)
                if (e - s > 9 && !strncmp(x->t + s, lead[i], 3)) {
                    s += 3;
                    again = true;
                }
        }
    }
    if (e <= s) return;
    new_cand(x, FR_SLOT_COMPANY_NAME, s, e, defs[id].prio);
}

/* ---------- person names, shopping categories, periods, numbers ---------- */

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Is w[0..n) (any case) one of the common lower-case words (common_words.h)? */
static bool common_word(const char *w, size_t n) {
    char b[32];
    if (n == 0 || n >= sizeof b) return false;
    for (size_t i = 0; i < n; i++) b[i] = (char)tolower((unsigned char)w[i]);
    b[n] = 0;
    const char *key = b;
    return bsearch(&key, fr_common_words, FR_ARRAY_LEN(fr_common_words), sizeof fr_common_words[0], cmp_cstr) != NULL;
}

/* Words a name never continues with (function and time words, units). */
static bool name_stop(const char *w, size_t n) {
    char b[16];
    if (n >= sizeof b) return false;
    for (size_t i = 0; i < n; i++) b[i] = (char)tolower((unsigned char)w[i]);
    static const char *const cal[] = {"january", "february", "march", "april", "may", "june", "july",
                                      "august", "september", "october", "november", "december", "jan",
                                      "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov",
                                      "dec", "monday", "tuesday", "wednesday", "thursday", "friday",
                                      "saturday", "sunday", "mon", "tue", "wed", "thu", "fri", "sat", "sun"};
    for (size_t i = 0; i < FR_ARRAY_LEN(cal); i++)
        if (ieq(w, n, cal[i])) return true;
    /* people named by their relation, not by a name */
    static const char *const rel[] = {"partner", "wife", "husband", "mum", "mom", "mother", "dad", "father",
                                      "friend", "friends", "landlord", "landlady", "brother", "sister", "son",
                                      "daughter", "boss", "family", "kids", "children", "girlfriend",
                                      "boyfriend", "colleague", "employer", "grandma", "grandpa", "parents"};
    for (size_t i = 0; i < FR_ARRAY_LEN(rel); i++)
        if (ieq(w, n, rel[i])) return true;
    return lc_stop(b, n) || ieq(w, n, "speaking") ||
           ieq(w, n, "lately") || ieq(w, n, "account") || ieq(w, n, "please") || ieq(w, n, "instead");
}

static void h_person(ctx *x, int id) {
    size_t s = x->ov[2], q = s, e = s;
    int words = 0;
    static const char *const money[] = {"transf", "send", "sent", "pay", "paid", "payment", "transaction", "order",
                                        "debit", "money", "receiv", "owe", "cheque", "£", "$", "€", "euro",
                                        "dollar", "pound", "refund", "recipient", "beneficiary"};
    bool need_two = id == P_PN_ALONE; /* a bare reply must be a full name */
    if (id == P_PN_CTX) {
        char cue[8];
        prev_word(x, s, cue, sizeof cue, NULL);
        bool lead_for = !strcmp(cue, "for") && s == 4; /* "for jodie bienaime" as the whole answer */
        bool money_near = context_has(x, s, 96, money, FR_ARRAY_LEN(money));
        /* "the standing order I set up for charis klinefelter": "for" needs money and a full name */
        if (!strcmp(cue, "for") && !lead_for) {
            if (!money_near) return;
            need_two = true;
        }
        /* a short reply "to hogan on the 5th", "at 2 00 afternoon to jalynn" names a payee
         * without a money word: "to" opens it or follows a time ("I want to quit" does not) */
        int words_in_text = 0;
        for (size_t i = 0; i < x->n; i++)
            if ((i == 0 || x->t[i - 1] == ' ') && x->t[i] != ' ') words_in_text++;
        bool short_to = false;
        if (!strcmp(cue, "to") && words_in_text <= 6) {
            char before[16];
            size_t cs;
            prev_word(x, s, cue, sizeof cue, &cs);
            prev_word(x, cs, before, sizeof before, NULL);
            short_to = !before[0] || isdigit((unsigned char)before[0]) || !strcmp(before, "morning") ||
                       !strcmp(before, "afternoon") || !strcmp(before, "evening") || !strcmp(before, "night") ||
                       !strcmp(before, "am") || !strcmp(before, "pm") || !strcmp(before, "m");
        }
        if (!lead_for && !short_to && strcmp(cue, "pay") && strcmp(cue, "paid") && strcmp(cue, "payee") && !money_near)
            return;
    }
    while (q < x->ov[3] && words < 3) {
        size_t b = q;
        while (q < x->ov[3] && x->t[q] != ' ') q++;
        size_t wl = q - b;
        while (wl > 1 && (x->t[b + wl - 1] == '.' || x->t[b + wl - 1] == '\'')) wl--;
        if (words == 0) {
            /* the first word is not a common word, unless the next one is a rare one */
            if (name_stop(x->t + b, wl) || wl < 2 || is_stop_company(x->t + b, wl)) return;
            if (common_word(x->t + b, wl)) {
                size_t c = q;
                while (c < x->ov[3] && x->t[c] == ' ') c++;
                size_t d = c;
                while (d < x->ov[3] && x->t[d] != ' ') d++;
                if (d == c || common_word(x->t + c, d - c) || name_stop(x->t + c, d - c) || id == P_PN_CTX ||
                    id == P_PN_ALONE)
                    return;
            }
        } else if (name_stop(x->t + b, wl) || (common_word(x->t + b, wl) && !(wl <= 2 && x->t[b + wl] == '.'))) {
            break;
        }
        e = b + wl;
        words++;
        while (q < x->ov[3] && x->t[q] == ' ') q++;
    }
    if (!words || (need_two && words < 2)) return;
    if (id == P_PN_ALONE && e != x->ov[3]) return; /* every word of the reply is part of the name */
    /* "to elia greek restaurant", "to passport office": a business noun makes it a company */
    static const char *const biz[] = {"restaurant", "office", "shop", "store", "cafe", "bar", "pub", "hotel",
                                      "ltd", "inc", "bank", "services", "club", "market", "garage", "salon"};
    size_t q2 = e, lw = e;
    while (q2 < x->n && x->t[q2] == ' ') q2++;
    size_t we = q2;
    while (we < x->n && isalpha((unsigned char)x->t[we])) we++;
    while (lw > s && x->t[lw - 1] != ' ') lw--;
    for (size_t i = 0; i < FR_ARRAY_LEN(biz); i++) {
        if (ieq(x->t + lw, e - lw, biz[i])) {
            new_cand(x, FR_SLOT_COMPANY_NAME, s, e, defs[id].prio);
            return;
        }
        if (we > q2 && ieq(x->t + q2, we - q2, biz[i])) {
            new_cand(x, FR_SLOT_COMPANY_NAME, s, we, defs[id].prio);
            return;
        }
    }
    new_cand(x, FR_SLOT_PERSON_NAME, s, e, defs[id].prio);
}

static void h_category(ctx *x, int id) {
    size_t s = x->ov[2], e = x->ov[3];
    if (id == P_SC_GAZ) {
        static const char *const cue[] = {"spen", "expense", "price", "cost", "total", "analytic", "budget",
                                          "bought", "paid", "pay for", "outgoing"};
        bool near = context_has(x, s, 64, cue, FR_ARRAY_LEN(cue));
        size_t after = e + 40 < x->n ? e + 40 : x->n;
        for (size_t i = e; i < after && !near; i++) near = istarts(x->t + i, x->n - i, "spend") || istarts(x->t + i, x->n - i, "expense");
        if (!near) return;
        /* a rare word before a singular category noun names a merchant: "santore restaurant" */
        char pw[32];
        size_t ps;
        prev_word(x, s, pw, sizeof pw, &ps);
        size_t pl = strlen(pw);
        bool alpha = pl >= 3;
        for (size_t i = 0; i < pl && alpha; i++) alpha = isalpha((unsigned char)pw[i]);
        bool singular = tolower((unsigned char)x->t[e - 1]) != 's'; /* "video games" stays a category */
        if (alpha && singular && islower((unsigned char)x->t[ps]) && !common_word(pw, pl) && !name_stop(pw, pl)) {
            new_cand(x, FR_SLOT_COMPANY_NAME, ps, e, defs[id].prio);
            return;
        }
    } else {
        /* the captured words, without a trailing time or function word */
        size_t b = s, q = s, last = s;
        int words = 0;
        while (q < e) {
            b = q;
            while (q < e && x->t[q] != ' ') q++;
            if (name_stop(x->t + b, q - b) && !(words && ieq(x->t + b, q - b, "and"))) break;
            if (words && q - b > 4 && istarts(x->t + q - 2, 2, "ed")) break; /* "news decreased" */
            if (words && !ieq(x->t + b, q - b, "and") && common_word(x->t + b, q - b)) break;
            if (!ieq(x->t + b, q - b, "and")) last = q;
            words++;
            while (q < e && x->t[q] == ' ') q++;
        }
        e = last;
        if (e <= s) return;
        /* "spent on eon": a rare word is a merchant, not a category; a plural ("rental bikes",
         * "news") names a kind of thing */
        size_t fw = s;
        while (fw < e && x->t[fw] != ' ') fw++;
        bool plural = e - s > 3 && tolower((unsigned char)x->t[e - 1]) == 's' && x->t[e - 2] != 's' &&
                      x->t[e - 2] != '\'';
        if (!common_word(x->t + s, fw - s) && !plural) {
            new_cand(x, FR_SLOT_COMPANY_NAME, s, e, defs[id].prio);
            return;
        }
    }
    new_cand(x, FR_SLOT_SHOPPING_CATEGORY, s, e, defs[id].prio);
}

static void h_period(ctx *x, int id) {
    if (id == P_TP_DAY) {
        /* NLU++'s parts of the day: morning 00-12, afternoon 12-19, evening 18-24 */
        char w = (char)tolower((unsigned char)*gs(x, 2));
        cand *c = new_cand(x, FR_SLOT_TIME_PERIOD, x->ov[4], x->ov[5], defs[id].prio);
        c->s.hour = w == 'm' ? 0 : w == 'a' ? 12 : 18;
        c->s.hour2 = w == 'm' ? 12 : w == 'a' ? 19 : 0;
        /* "this morning" is also a date (P_D_REL): the period stands beside it */
        c->companion = istarts(gs(x, 1), gl(x, 1), "this");
        return;
    }
    bool forp = id == P_TP_FOR;
    int gk = forp ? 1 : 2, gu = forp ? 2 : 3;
    long k = has(x, gk) ? count_of(gs(x, gk), gl(x, gk)) : 1;
    if (k < 1 || k > 1000) return;
    bool hours = tolower((unsigned char)*gs(x, gu)) == 'h';
    long dur = hours ? 60 * k : k;
    if (!forp && has(x, 4)) dur += hours ? 30 : 0;
    size_t s = forp ? x->ov[2] : x->ov[0];
    cand *c = new_cand(x, FR_SLOT_TIME_PERIOD, s, x->ov[1], defs[id].prio);
    long now = (long)x->ref.hour * 60 + x->ref.minute, from, to;
    if (forp) { /* a duration, not anchored: from now */
        from = now;
        to = now + dur;
    } else if (istarts(gs(x, 1), gl(x, 1), "next") || istarts(gs(x, 1), gl(x, 1), "coming")) {
        /* NLU++: whole next hours start at the next hour, minutes at the next minute */
        from = now + (hours && !has(x, 4) ? 60 - x->ref.minute : 1);
        to = from + dur;
    } else {
        from = now - dur;
        to = now;
    }
    from = ((from % 1440) + 1440) % 1440;
    to = ((to % 1440) + 1440) % 1440;
    c->s.hour = (int)(from / 60);
    c->s.minute = (int)(from % 60);
    c->s.hour2 = (int)(to / 60);
    c->s.minute2 = (int)(to % 60);
}

static void h_bare_number(ctx *x, int id) {
    long v = atoin(gs(x, 1), gl(x, 1));
    /* a number "without context": a short answer ("make it 3", "40"), or a count of things */
    int words = 0;
    for (size_t i = 0; i < x->n; i++)
        if ((i == 0 || x->t[i - 1] == ' ') && x->t[i] != ' ') words++;
    static const char *const things[] = {"new", "more", "times", "transactions", "pins", "cards", "payments",
                                         "transfers", "standing", "accounts", "pin", "card", "orders"};
    size_t q = x->ov[3], b;
    while (q < x->n && x->t[q] == ' ') q++;
    b = q;
    while (q < x->n && isalpha((unsigned char)x->t[q])) q++;
    bool thing = false;
    for (size_t i = 0; i < FR_ARRAY_LEN(things) && !thing; i++) thing = ieq(x->t + b, q - b, things[i]);
    if (words > 5 && !thing) return;
    cand *c = new_cand(x, FR_SLOT_NUMBER, x->ov[2], x->ov[3], defs[id].prio);
    c->s.amount = (double)v;
}

/* Does the sentence speak of the past? A past-tense verb or a backward time word anywhere. */
static bool past_tense(const char *t, size_t n) {
    static const char *const words[] = {
        "was", "were", "wasn't", "weren't", "did", "didn't", "had", "hadn't", "got", "paid", "spent",
        "sent", "made", "bought", "took", "went", "withdrew", "received", "charged", "happened", "ago",
        "yesterday", "lost", "stole", "stolen", "saw", "came", "gave", "told", "tried", "forgot",
        "noticed", "ordered", "transferred", "deposited", "applied", "opened", "closed", "cancelled",
        "canceled", "requested", "submitted", "changed", "used", "tapped", "topped", "visited",
        "purchased", "booked", "arrived", "attempted", "declined", "refunded", "billed", "debited",
        "credited", "happened", "occurred", "appeared", "showed", "left", "last", "earlier"};
    size_t i = 0;
    while (i < n) {
        while (i < n && !isalpha((unsigned char)t[i])) i++;
        size_t b = i;
        while (i < n && (isalpha((unsigned char)t[i]) || t[i] == '\'')) i++;
        for (size_t k = 0; k < FR_ARRAY_LEN(words); k++)
            if (ieq(t + b, i - b, words[k])) return true;
    }
    return false;
}

/* ---------- driver ---------- */

/* A from/to pair of dates read as one range (serving only: NLU++'s annotations resolve each end
 * alone): "from the 1st to the 7 June" starts on 1 June, "from Monday to Sunday" ends on the
 * Sunday after that Monday, "from 17 Feb to 4 Mar" does not end before it starts. */
static void make_ranges_consistent(cand *c, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (c[i].s.kind != FR_SLOT_DATE || c[i].s.role != FR_SLOT_ROLE_FROM || c[i].vset) continue;
        size_t j = i + 1;
        while (j < n && j < i + 4 && !(c[j].s.kind == FR_SLOT_DATE && c[j].s.role == FR_SLOT_ROLE_TO)) j++;
        if (j >= n || j >= i + 4 || c[j].vset) continue;
        cand *a = &c[i], *b = &c[j];
        if (a->partial == PART_ORD && b->partial != PART_ORD && b->partial != PART_WD) {
            /* the bare day takes the month of the other end, or the month before it */
            int y = b->s.year, m = b->s.month;
            if (a->s.day > b->s.day) add_months(&y, &m, -1);
            if (valid_date(y, m, a->s.day)) {
                a->s.year = y;
                a->s.month = m;
            }
        }
        long da = days_from_civil(a->s.year, a->s.month, a->s.day);
        long db = days_from_civil(b->s.year, b->s.month, b->s.day);
        if (db >= da) continue;
        if (b->partial == PART_WD) {
            while (db < da) db += 7;
        } else if (b->partial == PART_ORD) {
            int y = b->s.year, m = b->s.month;
            for (int k = 0; k < 12 && db < da; k++) {
                add_months(&y, &m, 1);
                if (valid_date(y, m, b->s.day)) db = days_from_civil(y, m, b->s.day);
            }
        } else if (b->partial == PART_DM && valid_date(b->s.year + 1, b->s.month, b->s.day)) {
            db = days_from_civil(b->s.year + 1, b->s.month, b->s.day);
        }
        if (db >= da) civil_from_days(db, &b->s.year, &b->s.month, &b->s.day);
    }
}

static int cand_cmp_len(const void *a, const void *b) {
    const cand *x = a, *y = b;
    size_t lx = x->s.end - x->s.start, ly = y->s.end - y->s.start;
    if (lx != ly) return lx > ly ? -1 : 1;
    if (x->prio != y->prio) return x->prio > y->prio ? -1 : 1;
    if (x->s.start != y->s.start) return x->s.start < y->s.start ? -1 : 1;
    return (int)x->s.kind - (int)y->s.kind;
}

static int cand_cmp_start(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->s.start != y->s.start) return x->s.start < y->s.start ? -1 : 1;
    return 0;
}

static const char *slot_name(fr_slot_kind k, fr_slot_role r) {
    switch (k) {
    case FR_SLOT_AMOUNT: return "amount";
    case FR_SLOT_DATE: return r == FR_SLOT_ROLE_FROM ? "date_from" : r == FR_SLOT_ROLE_TO ? "date_to" : "date";
    case FR_SLOT_DATE_PERIOD: return "date_period";
    case FR_SLOT_TIME: return r == FR_SLOT_ROLE_FROM ? "time_from" : r == FR_SLOT_ROLE_TO ? "time_to" : "time";
    case FR_SLOT_CARD_NUMBER: return "card_number";
    case FR_SLOT_ACCOUNT_NUMBER: return "account_number";
    case FR_SLOT_INVOICE_NUMBER: return "invoice_number";
    case FR_SLOT_COMPANY_NAME: return "company_name";
    case FR_SLOT_PERSON_NAME: return "person_name";
    case FR_SLOT_SHOPPING_CATEGORY: return "shopping_category";
    case FR_SLOT_TIME_PERIOD: return "time_period";
    case FR_SLOT_NUMBER: return "number";
    default: return "unknown";
    }
}

/* Role of a date/time from the words before it; *strong gets whether the cue word marks a
 * range end point for sure (since, until, between ... and) rather than a plain "from"/"to". */
static fr_slot_role role_of(const ctx *x, const cand *c, const cand *all, size_t n_all, bool *strong) {
    char w[32];
    size_t ws;
    *strong = false;
    prev_word(x, c->s.start, w, sizeof w, &ws);
    for (int k = 0; k < 2 && (!strcmp(w, "the") || !strcmp(w, "on") || !strcmp(w, "at")); k++)
        prev_word(x, ws, w, sizeof w, &ws); /* "starting on the 7th" */
    if (!strcmp(w, "since") || !strcmp(w, "starting") || !strcmp(w, "beginning") || !strcmp(w, "between")) {
        *strong = true;
        return FR_SLOT_ROLE_FROM;
    }
    if (!strcmp(w, "from")) {
        /* "from September on(wards)" is an open range: a start point for sure */
        char nx[16] = {0};
        size_t e = c->s.end, k = 0;
        while (e < x->n && x->t[e] == ' ') e++;
        while (e < x->n && k + 1 < sizeof nx && isalpha((unsigned char)x->t[e])) nx[k++] = (char)tolower((unsigned char)x->t[e++]);
        if (!strcmp(nx, "on") || !strcmp(nx, "onwards") || !strcmp(nx, "onward")) *strong = true;
        return FR_SLOT_ROLE_FROM;
    }
    if (!strcmp(w, "than") && c->s.kind != FR_SLOT_TIME) { /* "no later than next Sunday" */
        char w2[16];
        prev_word(x, ws, w2, sizeof w2, NULL);
        if (!strcmp(w2, "later")) {
            *strong = true;
            return FR_SLOT_ROLE_TO;
        }
    }
    if (!strcmp(w, "until") || !strcmp(w, "till") || !strcmp(w, "til") || !strcmp(w, "through") ||
        !strcmp(w, "ending")) {
        *strong = true;
        return FR_SLOT_ROLE_TO;
    }
    if (!strcmp(w, "to")) return FR_SLOT_ROLE_TO;
    if (!strcmp(w, "and")) { /* "between X and Y": a from-slot of the same family shortly before */
        for (size_t i = n_all; i-- > 0;) {
            const cand *o = &all[i];
            if (o->s.start + 160 < c->s.start) break;
            if (o->s.end <= c->s.start && o->s.role == FR_SLOT_ROLE_FROM &&
                (o->s.kind == FR_SLOT_TIME) == (c->s.kind == FR_SLOT_TIME)) {
                *strong = true;
                return FR_SLOT_ROLE_TO;
            }
        }
    }
    return FR_SLOT_ROLE_NONE;
}

static void copy_text(const ctx *x, fr_slot *s) {
    size_t n = s->end - s->start;
    if (s->kind == FR_SLOT_CARD_NUMBER || s->kind == FR_SLOT_ACCOUNT_NUMBER) {
        fr_slot_mask(x->t + s->start, n, s->text, sizeof s->text);
        char digits[48];
        size_t nd = 0;
        for (size_t i = s->start; i < s->end && nd + 1 < sizeof digits; i++)
            if (isalnum((unsigned char)x->t[i])) digits[nd++] = (char)toupper((unsigned char)x->t[i]);
        fr_slot_mask(digits, nd, s->value, sizeof s->value);
        return;
    }
    if (n >= sizeof s->text) {
        n = sizeof s->text - 1;
        while (n > 0 && ((unsigned char)x->t[s->start + n] & 0xC0) == 0x80) n--; /* whole chars */
    }
    memcpy(s->text, x->t + s->start, n);
    s->text[n] = 0;
}

static void format_value(fr_slot *s) {
    switch (s->kind) {
    case FR_SLOT_AMOUNT:
        if (s->currency[0]) snprintf(s->value, sizeof s->value, "%.2f %s", s->amount, s->currency);
        else snprintf(s->value, sizeof s->value, "%.2f", s->amount);
        break;
    case FR_SLOT_DATE:
        snprintf(s->value, sizeof s->value, "%04d-%02d-%02d", s->year, s->month, s->day);
        break;
    case FR_SLOT_DATE_PERIOD:
        snprintf(s->value, sizeof s->value, "%04d-%02d-%02d/%04d-%02d-%02d", s->year, s->month, s->day,
                 s->year2, s->month2, s->day2);
        break;
    case FR_SLOT_TIME:
        snprintf(s->value, sizeof s->value, "%02d:%02d", s->hour, s->minute);
        break;
    case FR_SLOT_TIME_PERIOD:
        snprintf(s->value, sizeof s->value, "%02d:%02d/%02d:%02d", s->hour, s->minute, s->hour2, s->minute2);
        break;
    case FR_SLOT_NUMBER:
        snprintf(s->value, sizeof s->value, "%.0f", s->amount);
        break;
    case FR_SLOT_INVOICE_NUMBER:
    case FR_SLOT_PERSON_NAME:
    case FR_SLOT_SHOPPING_CATEGORY:
    case FR_SLOT_COMPANY_NAME: {
        /* the text with whitespace runs collapsed; invoice ids lose inner spaces */
        size_t o = 0;
        bool sp = false;
        for (const char *p = s->text; *p && o + 1 < sizeof s->value; p++) {
            if (isspace((unsigned char)*p)) {
                sp = true;
                continue;
            }
            if (sp && o && s->kind != FR_SLOT_INVOICE_NUMBER) s->value[o++] = ' ';
            sp = false;
            if (o + 1 < sizeof s->value) s->value[o++] = *p;
        }
        s->value[o] = 0;
        break;
    }
    default:
        break; /* card / account: set (masked) by copy_text */
    }
}

void fr_slot_ref_now(fr_slot_ref *ref) {
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    ref->year = tm.tm_year + 1900;
    ref->month = tm.tm_mon + 1;
    ref->day = tm.tm_mday;
    ref->hour = tm.tm_hour;
    ref->minute = tm.tm_min;
    ref->forward_only = 0;
}

int fr_slots_extract(const char *text, size_t len, const fr_slot_ref *ref, fr_slot *out, int cap,
                     fr_err *err) {
    pthread_once(&G.once, compile_all);
    if (G.err[0]) {
        fr_err_set(err, "%s", G.err);
        return -1;
    }
    if (!text) len = 0;
    if (len > FR_SLOTS_MAX_INPUT) len = FR_SLOTS_MAX_INPUT;
    ctx x = {0};
    x.t = text ? text : "";
    x.n = len;
    if (ref) x.ref = *ref;
    else fr_slot_ref_now(&x.ref);
    if (!valid_date(x.ref.year, x.ref.month, x.ref.day)) {
        fr_err_set(err, "slots: bad reference date %04d-%02d-%02d", x.ref.year, x.ref.month, x.ref.day);
        return -1;
    }
    x.today = days_from_civil(x.ref.year, x.ref.month, x.ref.day);
    x.past = x.ref.forward_only ? 0 : past_tense(x.t, len);
    int have = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)x.t[i];
        have |= (ch >= '0' && ch <= '9') ? NEED_DIGIT : ch >= 0x80 ? NEED_NONASCII : (ch >= 'A' && ch <= 'Z') ? NEED_UPPER : 0;
    }
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    for (int id = 0; id < P_N; id++) {
        if ((needs[id] & have) != needs[id]) continue;
        size_t start = 0;
        while (start < len) {
            int rc = pcre2_match(G.re[id], (PCRE2_SPTR)x.t, len, start, 0, md, NULL);
            if (rc <= 0) break;
            x.ov = pcre2_get_ovector_pointer(md);
            x.ng = rc;
            if (x.ov[1] > x.ov[0] && x.ov[0] >= start) {
                if (id <= P_P_LASTN) h_date(&x, id);
                else if (id <= P_T_CJK) h_time(&x, id);
                else if (id <= P_A_CTX2) h_amount(&x, id);
                else if (id <= P_AC_CJK) h_number(&x, id);
                else if (id <= P_I_CJK) h_invoice(&x, id);
                else if (id <= P_K_GAZ) h_company(&x, id);
                else if (id <= P_PN_ALONE) h_person(&x, id);
                else if (id <= P_SC_CTX) h_category(&x, id);
                else if (id <= P_TP_FOR) h_period(&x, id);
                else h_bare_number(&x, id);
            }
            /* continue one character after this match's start, so overlapping matches are
             * seen too (resolution picks the best) */
            size_t next = (x.ov[0] >= start ? x.ov[0] : start) + 1;
            while (next < len && ((unsigned char)x.t[next] & 0xC0) == 0x80) next++;
            start = next;
        }
    }
    pcre2_match_data_free(md);

    /* resolve overlaps: longest first, then priority; a byte map of taken bytes keeps this
     * linear in the input size */
    if (x.nc) qsort(x.c, x.nc, sizeof *x.c, cand_cmp_len);
    size_t kept = 0;
    uint8_t *taken = fr_xcalloc(len + 1, 1);
    for (size_t i = 0; i < x.nc; i++) {
        if (x.c[i].companion) { /* beside the slot it sits in; never blocks another */
            x.c[kept++] = x.c[i];
            continue;
        }
        bool clash = false;
        for (size_t b = x.c[i].s.start; b < x.c[i].s.end && !clash; b++) clash = taken[b];
        if (clash) continue;
        memset(taken + x.c[i].s.start, 1, x.c[i].s.end - x.c[i].s.start);
        x.c[kept++] = x.c[i];
    }
    free(taken);
    if (kept) qsort(x.c, kept, sizeof *x.c, cand_cmp_start);
    /* roles, left to right (so "between X and Y" sees X's role) */
    bool *strong = fr_xcalloc(kept + 1, sizeof *strong);
    for (size_t i = 0; i < kept; i++) {
        cand *c = &x.c[i];
        if ((c->s.kind == FR_SLOT_DATE || c->s.kind == FR_SLOT_TIME || c->s.kind == FR_SLOT_DATE_PERIOD) &&
            !c->no_role)
            c->s.role = role_of(&x, c, x.c, i, &strong[i]);
    }
    for (size_t i = 0; i < kept; i++) {
        cand *c = &x.c[i];
        if (c->s.kind == FR_SLOT_DATE_PERIOD) {
            /* a month / calendar period used as a range end point is a date (first or last day);
             * a plain "from"/"to" counts as an end point only when the other end is there too */
            bool other = false;
            for (size_t j = i >= 8 ? i - 8 : 0; j < kept && j <= i + 8; j++)
                if (j != i && x.c[j].s.kind == FR_SLOT_DATE && x.c[j].s.role != FR_SLOT_ROLE_NONE &&
                    x.c[j].s.role != c->s.role)
                    other = true;
            if (c->s.role != FR_SLOT_ROLE_NONE && !strong[i] && !other) c->s.role = FR_SLOT_ROLE_NONE;
            if (c->period_only && c->s.role == FR_SLOT_ROLE_TO) {
                c->s.kind = FR_SLOT_DATE;
                c->s.year = c->s.year2;
                c->s.month = c->s.month2;
                c->s.day = c->s.day2;
            } else if (c->period_only && (c->s.role == FR_SLOT_ROLE_FROM || c->period_only == 2)) {
                c->s.kind = FR_SLOT_DATE;
            } else {
                c->s.role = FR_SLOT_ROLE_NONE;
            }
        }
    }
    free(strong);
    if (!x.ref.forward_only) make_ranges_consistent(x.c, kept);
    int n = 0;
    for (size_t i = 0; i < kept && n < cap; i++) {
        fr_slot *s = &out[n++];
        *s = x.c[i].s;
        s->name = slot_name(s->kind, s->role);
        copy_text(&x, s);
        format_value(s);
        if (x.c[i].vset) snprintf(s->value, sizeof s->value, "%s", x.c[i].vval);
    }
    free(x.c);
    return n;
}
