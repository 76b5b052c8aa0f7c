/* attach.c — see attach.h: word-class rule for "the message refers to its attachment". */
#include "stages/nlu/attach.h"

#include <string.h>

#define MAX_WORDS 256
#define WORD_MAX 24

static const char *const DEICTIC[] = {"this", "these", "that", "those", "here", "heres",
                                      "attached", "enclosed", "uploaded", "following", "above",
                                      "below", "scanned", "included"};
static const char *const MEDIA[] = {
    "invoice", "bill", "receipt", "statement", "document", "doc", "file", "attachment",
    "photo", "picture", "pic", "image", "screenshot", "screen", "scan", "page", "letter",
    "form", "copy", "recording", "audio", "voice", "voicemail", "message", "memo", "note",
    "snapshot", "shot", "quote", "estimate", "contract", "payslip", "slip", "ticket", "pdf",
    "jpg", "png", "one"};
static const char *const ACT[] = {"attached", "attaching", "attach", "enclosed", "enclosing",
                                  "uploaded", "uploading", "listen", "listening", "hear"};
static const char *const LOOK[] = {"see", "look", "check", "view", "read", "find"};
static const char *const PREP[] = {"on", "in", "from", "of"};
static const char *const CJK[] = {
    "\xe8\xbf\x99\xe5\xbc\xa0", /* 这张 */
    "\xe8\xbf\x99\xe4\xb8\xaa", /* 这个 */
    "\xe8\xbf\x99\xe4\xbb\xbd", /* 这份 */
    "\xe9\x99\x84\xe4\xbb\xb6", /* 附件 */
    "\xe9\x99\x84\xe4\xb8\x8a", /* 附上 */
    "\xe5\x9b\xbe\xe7\x89\x87", /* 图片 */
    "\xe7\x85\xa7\xe7\x89\x87", /* 照片 */
    "\xe6\x88\xaa\xe5\x9b\xbe", /* 截图 */
    "\xe5\x8f\x91\xe7\xa5\xa8", /* 发票 */
    "\xe6\x94\xb6\xe6\x8d\xae", /* 收据 */
    "\xe5\xbd\x95\xe9\x9f\xb3", /* 录音 */
    "\xe5\x90\xac",             /* 听 */
};

static bool in(const char *w, const char *const *set, size_t n, bool plural) {
    size_t wl = strlen(w);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(set[i]);
        if (wl == l && !memcmp(w, set[i], l)) return true;
        if (plural && wl == l + 1 && w[l] == 's' && !memcmp(w, set[i], l)) return true;
    }
    return false;
}
#define IN(w, set, pl) in(w, set, sizeof set / sizeof *set, pl)

bool fr_nlu_refers_to_attachment(const char *text, size_t len) {
    if (!text) return false;
    for (size_t i = 0; i < sizeof CJK / sizeof *CJK; i++) {
        size_t l = strlen(CJK[i]);
        for (size_t j = 0; j + l <= len; j++)
            if (!memcmp(text + j, CJK[i], l)) return true;
    }
    /* words: ASCII letters lowered; apostrophes dropped ("here's" → "heres") */
    static const char *const skip_det[] = {"the", "a", "an", "my", "your", "our"};
    char words[MAX_WORDS][WORD_MAX];
    int n = 0;
    size_t i = 0;
    while (i < len && n < MAX_WORDS) {
        unsigned char c = (unsigned char)text[i];
        bool alpha = (c | 32) >= 'a' && (c | 32) <= 'z';
        if (!alpha) {
            i++;
            continue;
        }
        size_t k = 0;
        while (i < len) {
            c = (unsigned char)text[i];
            if ((c | 32) >= 'a' && (c | 32) <= 'z') {
                if (k < WORD_MAX - 1) words[n][k++] = (char)(c | 32);
            } else if (c != '\'' ) {
                break;
            }
            i++;
        }
        words[n][k] = 0;
        n++;
    }
    for (int w = 0; w < n; w++) {
        const char *x = words[w];
        if (IN(x, ACT, false)) return true;                      /* (b) attaching, listening */
        bool deictic = IN(x, DEICTIC, false), look = IN(x, LOOK, false),
             prep = IN(x, PREP, false);
        if (!deictic && !look && !prep) continue;
        /* (a) deictic + media noun within three words; (b) look + [det] media noun;
         * (c) preposition + determiner + media noun */
        int seen_det = 0;
        for (int k = w + 1; k < n && k <= w + 3; k++) {
            const char *y = words[k];
            if (IN(y, MEDIA, true) && strcmp(y, "one") && strcmp(y, "ones")) {
                if (deictic) return true;
                if ((look || prep) && seen_det) return true;
                if (look && k == w + 1) return true;
            }
            if (!strcmp(y, "one") && deictic && k == w + 1) return true; /* "this one" */
            if (IN(y, skip_det, false) || IN(y, DEICTIC, false)) {
                seen_det++;
                if (prep && IN(y, DEICTIC, false)) deictic = true; /* "on this invoice" */
                continue;
            }
            if (prep) break; /* "on the ..." needs the noun right after the determiner(s) */
        }
    }
    return false;
}
