/* vqa_score.c — VQA exact match and DocVQA's ANLS (vqa_score.h says the rules). */
#include "tools/vqa_score.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/base.h"

/* ------------------------------------------------------------------ code points */

/* s as code points, lowercased when lower; invalid bytes count one each. *n set; malloc'd. */
static uint32_t *codepoints(const char *s, bool lower, size_t *n) {
    size_t len = strlen(s), k = 0;
    uint32_t *cp = fr_xmalloc((len + 1) * sizeof *cp);
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                              (utf8proc_ssize_t)(len - i), &c);
        if (r < 1) {
            c = (unsigned char)s[i];
            r = 1;
        } else if (lower) {
            c = utf8proc_tolower(c);
        }
        cp[k++] = (uint32_t)c;
        i += (size_t)r;
    }
    *n = k;
    return cp;
}

static bool is_space(uint32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
           (c > 127 && utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_ZS);
}

size_t fr_levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    if (na < nb) {
        const uint32_t *t = a;
        a = b;
        b = t;
        size_t tn = na;
        na = nb;
        nb = tn;
    }
    size_t *row = fr_xmalloc((nb + 1) * sizeof *row); /* (nb + 1): distances to b's prefixes */
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    size_t d = row[nb];
    free(row);
    return d;
}

/* DocVQA's normal form: lowercased, trimmed, whitespace runs collapsed. */
static uint32_t *anls_form(const char *s, size_t *n) {
    size_t m = 0, k = 0;
    uint32_t *cp = codepoints(s, true, &m);
    bool space = false;
    for (size_t i = 0; i < m; i++) {
        if (is_space(cp[i])) {
            space = k > 0;
            continue;
        }
        if (space) cp[k++] = ' ';
        space = false;
        cp[k++] = cp[i];
    }
    *n = k;
    return cp;
}

double fr_anls_pair(const char *pred, const char *gt, double tau) {
    size_t np, ng;
    uint32_t *p = anls_form(pred, &np), *g = anls_form(gt, &ng);
    size_t mx = np > ng ? np : ng;
    double nl = mx ? (double)fr_levenshtein(p, np, g, ng) / (double)mx : 0.0;
    free(p);
    free(g);
    return nl < tau ? 1.0 - nl : 0.0;
}

double fr_anls(const char *pred, const char *const *answers, int n, double tau) {
    double best = 0;
    for (int i = 0; i < n; i++) {
        double s = fr_anls_pair(pred, answers[i], tau);
        best = s > best ? s : best;
    }
    return best;
}

/* ------------------------------------------------------------------ VQA normal form */

static const char PUNCT[] = ";/[]\"{}()=+\\_-><@`,?!";

static const char *const NUMBERS[][2] = {
    {"none", "0"}, {"zero", "0"}, {"one", "1"}, {"two", "2"}, {"three", "3"}, {"four", "4"},
    {"five", "5"}, {"six", "6"}, {"seven", "7"}, {"eight", "8"}, {"nine", "9"}, {"ten", "10"}};

/* Part of vqaEval.py's contractions table: the forms without an apostrophe that answers use. */
static const char *const CONTRACTIONS[][2] = {
    {"aint", "ain't"}, {"arent", "aren't"}, {"cant", "can't"}, {"couldnt", "couldn't"},
    {"couldve", "could've"}, {"didnt", "didn't"}, {"doesnt", "doesn't"}, {"dont", "don't"},
    {"hadnt", "hadn't"}, {"hasnt", "hasn't"}, {"havent", "haven't"}, {"hed", "he'd"},
    {"hes", "he's"}, {"im", "i'm"}, {"ive", "i've"}, {"isnt", "isn't"}, {"itd", "it'd"},
    {"itll", "it'll"}, {"lets", "let's"}, {"mightnt", "mightn't"}, {"mustnt", "mustn't"},
    {"shant", "shan't"}, {"shes", "she's"}, {"shouldnt", "shouldn't"}, {"shouldve", "should've"},
    {"thats", "that's"}, {"theres", "there's"}, {"theyd", "they'd"}, {"theyll", "they'll"},
    {"theyre", "they're"}, {"theyve", "they've"}, {"wasnt", "wasn't"}, {"werent", "weren't"},
    {"weve", "we've"}, {"whats", "what's"}, {"wheres", "where's"}, {"whos", "who's"},
    {"wont", "won't"}, {"wouldnt", "wouldn't"}, {"wouldve", "would've"}, {"youd", "you'd"},
    {"youll", "you'll"}, {"youre", "you're"}, {"youve", "you've"}};

static bool has_comma_number(const char *s) {
    if (!s[0]) return false;
    for (size_t i = 1; s[i] && s[i + 1]; i++)
        if (s[i] == ',' && s[i - 1] >= '0' && s[i - 1] <= '9' && s[i + 1] >= '0' && s[i + 1] <= '9')
            return true;
    return false;
}

/* vqaEval's processPunctuation on s (ASCII punctuation only; other bytes pass). */
static char *punctuation(const char *s) {
    size_t n = strlen(s);
    char *a = fr_xstrdup(s), *b = fr_xmalloc(n + 1);
    bool comma_num = has_comma_number(s);
    for (const char *p = PUNCT; *p; p++) {
        /* the test looks at the original text, as vqaEval does (inText, not outText) */
        bool touch = comma_num;
        for (size_t i = 0; s[i] && !touch; i++)
            if (s[i] == *p && ((s[i + 1] == ' ') || (i > 0 && s[i - 1] == ' '))) touch = true;
        size_t k = 0;
        for (size_t i = 0; a[i]; i++) {
            if (a[i] != *p) b[k++] = a[i];
            else if (!touch) b[k++] = ' ';
        }
        b[k] = 0;
        char *t = a;
        a = b;
        b = t;
    }
    /* periodStrip: a period not followed by a digit goes */
    size_t k = 0;
    for (size_t i = 0; a[i]; i++)
        if (a[i] != '.' || (a[i + 1] >= '0' && a[i + 1] <= '9')) b[k++] = a[i];
    b[k] = 0;
    free(a);
    return b;
}

static void lower_utf8(const char *s, fr_buf *out) {
    size_t n;
    uint32_t *cp = codepoints(s, true, &n);
    for (size_t i = 0; i < n; i++) {
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t r = utf8proc_encode_char((utf8proc_int32_t)cp[i], enc);
        if (r < 1) { /* an invalid byte kept as it was */
            char c = (char)cp[i];
            fr_buf_append(out, &c, 1);
        } else {
            fr_buf_append(out, enc, (size_t)r);
        }
    }
    free(cp);
}

char *fr_vqa_normalize(const char *s) {
    char *t = fr_xstrdup(s);
    for (char *p = t; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' ';
    char *pu = punctuation(t);
    free(t);
    fr_buf low = {0}, out = {0};
    lower_utf8(pu, &low);
    free(pu);
    char *w = fr_buf_cstr(&low);
    char *save = NULL;
    for (char *tok = w ? strtok_r(w, " \f\v\r\n\t", &save) : NULL; tok;
         tok = strtok_r(NULL, " \f\v\r\n\t", &save)) {
        const char *word = tok;
        for (size_t i = 0; i < sizeof NUMBERS / sizeof NUMBERS[0]; i++)
            if (!strcmp(word, NUMBERS[i][0])) word = NUMBERS[i][1];
        if (!strcmp(word, "a") || !strcmp(word, "an") || !strcmp(word, "the")) continue;
        for (size_t i = 0; i < sizeof CONTRACTIONS / sizeof CONTRACTIONS[0]; i++)
            if (!strcmp(word, CONTRACTIONS[i][0])) word = CONTRACTIONS[i][1];
        if (out.len) fr_buf_append(&out, " ", 1);
        fr_buf_puts(&out, word);
    }
    fr_buf_free(&low);
    char *r = fr_buf_cstr(&out);
    return r ? r : fr_xstrdup("");
}

bool fr_vqa_exact(const char *pred, const char *const *answers, int n) {
    char *p = fr_vqa_normalize(pred);
    bool hit = false;
    for (int i = 0; i < n && !hit; i++) {
        char *a = fr_vqa_normalize(answers[i]);
        hit = !strcmp(p, a);
        free(a);
    }
    free(p);
    return hit;
}
