/* lora_reg.c — the server's LoRA adapters by name (lora_reg.h). */
#include "serve/lora_reg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fr_lora_reg {
    pthread_mutex_t mu;
    fr_hparams hp;
    fr_lora *a[FR_LORA_REG_MAX]; /* one reference each, in load order */
    int n;
};

fr_lora_reg *fr_lora_reg_new(const fr_hparams *hp) {
    fr_lora_reg *g = fr_xcalloc(1, sizeof *g);
    g->hp = *hp;
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

void fr_lora_reg_free(fr_lora_reg *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) fr_lora_free(g->a[i]);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static bool name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= FR_LORA_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':' || c == '/'))
            return false;
    }
    return true;
}

/* Under mu: the index of name, or -1. */
static int find(const fr_lora_reg *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->a[i]->name, name)) return i;
    return -1;
}

int fr_lora_reg_load(fr_lora_reg *g, const char *name, const char *dir, fr_err *err) {
    if (!name_ok(name)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA adapter name '%.140s': 1 to %d bytes of "
                    "letters, digits and . _ - : /", name ? name : "", FR_LORA_MAX_NAME - 1);
        return -1;
    }
    pthread_mutex_lock(&g->mu);
    const bool taken = find(g, name) >= 0, full = g->n >= FR_LORA_REG_MAX;
    pthread_mutex_unlock(&g->mu);
    if (taken || full) {
        fr_err_setc(err, taken ? FR_ERR_BAD_REQUEST : FR_ERR_TOO_LARGE,
                    taken ? "LoRA adapter '%s' is already loaded" : "LoRA adapter '%s': %d adapters "
                    "are loaded, the most there may be", name, FR_LORA_REG_MAX);
        return -1;
    }
    fr_lora *a = fr_lora_load(dir, name, &g->hp, err); /* outside the lock: it reads files */
    if (!a) return -1;
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    if (find(g, name) >= 0 || g->n >= FR_LORA_REG_MAX) { /* raced with another load */
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "LoRA adapter '%s' is already loaded", name);
        rc = -1;
    } else {
        g->a[g->n++] = a;
    }
    pthread_mutex_unlock(&g->mu);
    if (rc) fr_lora_free(a);
    return rc;
}

int fr_lora_reg_load_spec(fr_lora_reg *g, const char *spec, fr_err *err) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq || eq == spec || !eq[1]) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "--lora wants NAME=PATH, not '%.200s'",
                    spec ? spec : "");
        return -1;
    }
    char name[FR_LORA_MAX_NAME];
    size_t n = (size_t)(eq - spec);
    if (n >= sizeof name) n = sizeof name - 1; /* then refused by the name check */
    memcpy(name, spec, n);
    name[n] = 0;
    if ((size_t)(eq - spec) >= sizeof name) name[0] = 0;
    return fr_lora_reg_load(g, name, eq + 1, err);
}

int fr_lora_reg_unload(fr_lora_reg *g, const char *name, fr_err *err) {
    pthread_mutex_lock(&g->mu);
    int i = name ? find(g, name) : -1;
    fr_lora *a = NULL;
    if (i >= 0) {
        a = g->a[i];
        memmove(&g->a[i], &g->a[i + 1], sizeof g->a[0] * (size_t)(g->n - i - 1));
        g->n--;
    }
    pthread_mutex_unlock(&g->mu);
    if (!a) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "LoRA adapter '%.140s' is not loaded", name ? name : "");
        return -1;
    }
    fr_lora_free(a); /* requests running with it hold their own references */
    return 0;
}

fr_lora *fr_lora_reg_get(fr_lora_reg *g, const char *name) {
    pthread_mutex_lock(&g->mu);
    int i = name ? find(g, name) : -1;
    fr_lora *a = i >= 0 ? fr_lora_ref(g->a[i]) : NULL;
    pthread_mutex_unlock(&g->mu);
    return a;
}

int fr_lora_reg_names(fr_lora_reg *g, char (*names)[FR_LORA_MAX_NAME], int cap) {
    pthread_mutex_lock(&g->mu);
    int n = g->n;
    for (int i = 0; i < n && i < cap; i++) snprintf(names[i], FR_LORA_MAX_NAME, "%s", g->a[i]->name);
    pthread_mutex_unlock(&g->mu);
    return n;
}
