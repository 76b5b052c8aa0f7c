/* budget.c — the token budget assembler (budget.h): pieces with priorities, greedy fill by
 * priority, emission in the original order, exact re-count and trimming. */
#include "stages/budget/budget.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TICKET_LEAVES 4096
#define MAX_OCR_LINES 4096
#define MAX_PATH 256

enum { SEC_TICKET, SEC_DOC, SEC_HIST, SEC_QUESTION, SEC_N };
static const char *const sec_header[SEC_N] = {"Ticket:\n", "Document (OCR):\n",
                                              "Conversation:\n", "Question: "};

typedef struct piece {
    int section;   /* SEC_* */
    int pos;       /* order inside its section */
    int prio;      /* 0 = most important */
    int rank;      /* tie-break inside a priority (lower first) */
    char *text;    /* one line, without the trailing newline (owned) */
    size_t tokens; /* counted alone */
    int kept;      /* chosen */
} piece;

typedef struct plist {
    piece *v;  /* pieces */
    int n;     /* used */
    int cap;   /* allocated */
} plist;

size_t fr_budget_estimate(const char *s, size_t n) {
    size_t t = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80 && isalnum(c)) {
            run++;
            continue;
        }
        t += (run + 3) / 4;
        run = 0;
        if (c < 0x80) {
            if (!isspace(c)) t++;
        } else if ((c & 0xC0) != 0x80) {
            t++; /* a code point's lead byte */
        }
    }
    return t + (run + 3) / 4;
}

static size_t count(const fr_budget_input *in, const char *s, size_t n) {
    return in->count ? in->count(in->count_ctx, s, n) : fr_budget_estimate(s, n);
}

/* Normalised key: lowercase alnum only. */
static void norm_key(const char *k, char *out, size_t cap) {
    size_t j = 0;
    for (; *k && j + 1 < cap; k++) {
        unsigned char c = (unsigned char)*k;
        if (c < 0x80 && isalnum(c)) out[j++] = (char)tolower(c);
    }
    out[j] = 0;
}

static const char *const key_words[] = {
    "invoice", "amount", "total", "sum", "date", "due", "payee", "merchant", "vendor", "seller",
    "beneficiary", "recipient", "creditor", "iban", "account", "currency", "reference", "ref",
    "checksum", "signature", "hash", "transactionid", "txid", "billno", "receipt"};

int fr_budget_is_key_name(const char *key) {
    char k[128];
    norm_key(key, k, sizeof k);
    if (!k[0]) return 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(key_words); i++)
        if (strstr(k, key_words[i])) return 1;
    return 0;
}

/* OCR line that names a key field (English words, any case, or Chinese). */
static int is_key_line(const char *s) {
    static const char *const zh[] = {"发票", "金额", "合计", "总计", "日期", "收款", "付款",
                                     "校验", "签名", "账号", "账户", "编号", "税号"};
    for (size_t i = 0; i < FR_ARRAY_LEN(zh); i++)
        if (strstr(s, zh[i])) return 1;
    static const char *const en[] = {"invoice", "amount", "total", "date", "due", "payee",
                                     "pay to", "iban", "account", "checksum", "signature",
                                     "reference", "receipt no", "balance"};
    char low[512];
    size_t j = 0;
    for (; s[j] && j + 1 < sizeof low; j++) low[j] = (char)tolower((unsigned char)s[j]);
    low[j] = 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(en); i++)
        if (strstr(low, en[i])) return 1;
    return 0;
}

static void add(plist *l, int section, int prio, int rank, char *text) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->v = fr_xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n] = (piece){.section = section, .pos = l->n, .prio = prio, .rank = rank, .text = text};
    l->n++;
}

/* One line: newlines inside a value become spaces. */
static char *one_line(const char *s) {
    char *t = fr_xstrdup(s);
    for (char *p = t; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return t;
}

static void ticket_walk(plist *l, const cJSON *it, char *path, size_t plen, int key_ctx,
                        int *n_leaves) {
    if (*n_leaves >= MAX_TICKET_LEAVES) return;
    if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
        int idx = 0;
        const cJSON *ch;
        cJSON_ArrayForEach(ch, it) {
            size_t n;
            if (cJSON_IsObject(it))
                n = (size_t)snprintf(path + plen, MAX_PATH - plen, "%s%s", plen ? "." : "",
                                     ch->string ? ch->string : "");
            else
                n = (size_t)snprintf(path + plen, MAX_PATH - plen, "[%d]", idx);
            size_t np = plen + n < MAX_PATH ? plen + n : MAX_PATH - 1;
            int kc = key_ctx || (cJSON_IsObject(it) && ch->string &&
                                 fr_budget_is_key_name(ch->string));
            ticket_walk(l, ch, path, np, kc, n_leaves);
            path[plen] = 0;
            idx++;
        }
        return;
    }
    char *val = NULL;
    if (cJSON_IsString(it)) {
        val = one_line(it->valuestring);
    } else {
        char *p = cJSON_PrintUnformatted(it);
        val = p ? p : fr_xstrdup("null");
    }
    size_t n = strlen(path) + strlen(val) + 3;
    char *line = fr_xmalloc(n);
    snprintf(line, n, "%s: %s", path[0] ? path : "value", val);
    free(val);
    add(l, SEC_TICKET, key_ctx ? 1 : 4, 0, line); /* ticket key fields before OCR lines */
    (*n_leaves)++;
}

static int cmp_prio(const void *a, const void *b) {
    const piece *x = *(const piece *const *)a, *y = *(const piece *const *)b;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void emit(const plist *l, fr_buf *o) {
    o->len = 0;
    for (int s = 0; s < SEC_N; s++) {
        int any = 0;
        for (int i = 0; i < l->n; i++) {
            const piece *p = &l->v[i];
            if (p->section != s || !p->kept) continue;
            if (!any) {
                if (o->len) fr_buf_puts(o, "\n");
                fr_buf_puts(o, sec_header[s]);
            }
            any = 1;
            fr_buf_puts(o, p->text);
            fr_buf_puts(o, "\n");
        }
    }
    if (!o->len) fr_buf_puts(o, "");
}

/* The question cut to fit `budget` tokens (keeps its start; whole UTF-8 characters). */
static char *cut_to(const fr_budget_input *in, const char *q, size_t budget) {
    size_t lo = 0, hi = strlen(q);
    while (lo < hi) { /* longest prefix that fits */
        size_t mid = (lo + hi + 1) / 2;
        while (mid > lo && ((unsigned char)q[mid] & 0xC0) == 0x80) mid--;
        if (mid == lo) break;
        if (count(in, q, mid) <= budget) lo = mid;
        else hi = mid - 1;
    }
    while (lo > 0 && ((unsigned char)q[lo] & 0xC0) == 0x80) lo--;
    return fr_xstrndup(q, lo);
}

int fr_budget_assemble(const fr_budget_input *in, fr_budget_result *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    if (in->budget_tokens < 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "token budget must be at least 1 (got %d)",
                    in->budget_tokens);
        return -1;
    }
    size_t budget = (size_t)in->budget_tokens;
    plist l = {0};
    /* ticket */
    if (in->ticket) {
        char path[MAX_PATH] = {0};
        int leaves = 0;
        ticket_walk(&l, in->ticket, path, 0, 0, &leaves);
    }
    /* OCR lines */
    if (in->ocr_text) {
        const char *s = in->ocr_text;
        int nl = 0;
        while (*s && nl < MAX_OCR_LINES) {
            const char *e = strchr(s, '\n');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            while (n && (s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
            if (n) {
                char *line = fr_xstrndup(s, n);
                add(&l, SEC_DOC, is_key_line(line) ? 1 : 5, 1, line);
                nl++;
            }
            if (!e) break;
            s = e + 1;
        }
    }
    /* history: the two latest first, then newer before older */
    for (int i = 0; i < in->n_history; i++) {
        const fr_budget_turn *t = &in->history[i];
        if (!t->text) continue;
        const char *role = t->role && t->role[0] ? t->role : "user";
        char *v = one_line(t->text);
        size_t n = strlen(role) + strlen(v) + 3;
        char *line = fr_xmalloc(n);
        snprintf(line, n, "%s: %s", role, v);
        free(v);
        int age = in->n_history - 1 - i; /* 0 = latest */
        add(&l, SEC_HIST, age < 2 ? 2 : 3, age, line);
    }
    int q_idx = -1;
    if (in->question && in->question[0]) {
        q_idx = l.n;
        add(&l, SEC_QUESTION, 0, 0, one_line(in->question));
    }
    for (int i = 0; i < l.n; i++) {
        l.v[i].tokens = count(in, l.v[i].text, strlen(l.v[i].text)) + 1; /* + the newline */
        if (l.v[i].prio == 1) out->key_fields_total++;
    }
    out->pieces_total = l.n;

    /* the question first: cut it if it alone is too long (header + text) */
    size_t used = 0;
    if (q_idx >= 0) {
        size_t head = count(in, sec_header[SEC_QUESTION], strlen(sec_header[SEC_QUESTION]));
        piece *q = &l.v[q_idx];
        if (q->tokens + head > budget) {
            char *c = cut_to(in, q->text, budget > head + 1 ? budget - head - 1 : 0);
            free(q->text);
            q->text = c;
            q->tokens = count(in, c, strlen(c)) + 1;
            out->question_truncated = 1;
        }
        q->kept = 1;
        used = q->tokens + head;
    }
    /* greedy by priority; headers are charged when a section gets its first piece */
    piece **order = fr_xmalloc((size_t)(l.n ? l.n : 1) * sizeof *order);
    for (int i = 0; i < l.n; i++) order[i] = &l.v[i];
    qsort(order, (size_t)l.n, sizeof *order, cmp_prio);
    size_t head_cost[SEC_N];
    int sec_used[SEC_N] = {0};
    for (int s = 0; s < SEC_N; s++)
        head_cost[s] = count(in, sec_header[s], strlen(sec_header[s])) + 1;
    if (q_idx >= 0) sec_used[SEC_QUESTION] = 1;
    int hist_closed = 0;
    for (int i = 0; i < l.n; i++) {
        piece *p = order[i];
        if (p->kept) continue;
        if (p->section == SEC_HIST && p->prio == 3 && hist_closed) continue;
        size_t need = p->tokens + (sec_used[p->section] ? 0 : head_cost[p->section]);
        if (used + need <= budget) {
            p->kept = 1;
            used += need;
            sec_used[p->section] = 1;
        } else if (p->section == SEC_HIST && p->prio == 3) {
            hist_closed = 1; /* keep a contiguous recent window */
        }
    }
    /* exact count of the whole text; drop the least important kept pieces while over */
    fr_buf o = {0};
    for (;;) {
        emit(&l, &o);
        size_t total = count(in, o.data ? o.data : "", o.len);
        out->tokens = (int)total;
        if (total <= budget) break;
        piece *victim = NULL;
        for (int i = l.n - 1; i >= 0; i--)
            if (order[i]->kept && order[i]->prio > 0) {
                victim = order[i];
                break;
            }
        if (!victim) break; /* only the (already cut) question remains */
        victim->kept = 0;
    }
    for (int i = 0; i < l.n; i++) {
        if (!l.v[i].kept) continue;
        out->pieces_kept++;
        if (l.v[i].prio == 1) out->key_fields_kept++;
        if (l.v[i].section == SEC_HIST) out->turns_kept++;
    }
    out->text = fr_buf_cstr(&o);
    for (int i = 0; i < l.n; i++) free(l.v[i].text);
    free(l.v);
    free(order);
    return 0;
}

void fr_budget_result_free(fr_budget_result *r) {
    if (!r) return;
    free(r->text);
    r->text = NULL;
}
