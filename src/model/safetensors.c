/* safetensors.c — see safetensors.h.
 *
 * Design: the JSON header is parsed with cJSON into a flat, name-sorted array of fr_st_tensor
 * whose data pointers point into the caller's buffer; nothing is copied. All arithmetic on values
 * from the file is done in uint64 with explicit overflow checks before any pointer is formed.
 */
#include "model/safetensors.h"

#include "model/quote.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest exact integer a JSON number (a double) holds. */
#define ST_MAX_EXACT 9007199254740992.0 /* 2^53 */

typedef struct st_dtype_info {
    const char *name; /* as spelled in safetensors headers */
    int size;         /* bytes per element */
    int dtype;        /* fr_dtype, or -1 if the model can't use it */
} st_dtype_info;

static const st_dtype_info st_dtypes[] = {
    {"F32", 4, FR_DTYPE_F32},  {"F16", 2, FR_DTYPE_F16}, {"BF16", 2, FR_DTYPE_BF16},
    {"F64", 8, -1},            {"I64", 8, -1},           {"U64", 8, -1},
    {"I32", 4, -1},            {"U32", 4, -1},           {"I16", 2, -1},
    {"U16", 2, -1},            {"I8", 1, -1},            {"U8", 1, -1},
    {"BOOL", 1, -1},           {"F8_E4M3", 1, -1},       {"F8_E5M2", 1, -1},
    {"F8_E8M0", 1, -1},
};

const char *fr_st_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap) {
    size_t k = 0;
    if (cap == 0) return buf;
    buf[0] = 0;
    k += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n_dims && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const fr_st_tensor *)a)->name, ((const fr_st_tensor *)b)->name);
}

static void st_free_tensors(fr_st_file *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    f->tensors = NULL;
    f->n_tensors = 0;
}

/* A JSON number that is a non-negative integer <= 2^53; -1 otherwise. */
static int64_t json_uint(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= ST_MAX_EXACT) || d != (double)(int64_t)d) return -1;
    return (int64_t)d;
}

/* Parse one tensor entry; returns 0 or -1 with err set. */
static int st_parse_entry(const char *path, const cJSON *e, fr_st_tensor *t, size_t data_size,
                          uint64_t *begin, fr_err *err) {
    char qname[160];
    const char *name = fr_quotez(e->string, qname, sizeof qname);
    if (!cJSON_IsObject(e)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': header entry is not an object", path, name);
        return -1;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': header entry needs string 'dtype', array 'shape' and "
                        "array 'data_offsets'", path, name);
        return -1;
    }
    const st_dtype_info *info = NULL;
    for (size_t i = 0; i < FR_ARRAY_LEN(st_dtypes); i++)
        if (!strcmp(dt->valuestring, st_dtypes[i].name)) info = &st_dtypes[i];
    if (!info) {
        char qd[48];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: tensor '%s': unknown dtype '%s' (supported: F32, F16, BF16)",
                   path, name, fr_quotez(dt->valuestring, qd, sizeof qd));
        return -1;
    }
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", info->name);
    t->dtype = info->dtype;
    int nd = cJSON_GetArraySize(sh);
    if (nd > FR_ST_MAX_DIMS) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", path, name, nd,
                   FR_ST_MAX_DIMS);
        return -1;
    }
    t->n_dims = nd;
    uint64_t n = 1;
    for (int i = 0; i < nd; i++) {
        int64_t d = json_uint(cJSON_GetArrayItem(sh, i));
        if (d <= 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': shape dimension %d is not a positive integer", path,
                       name, i);
            return -1;
        }
        if ((uint64_t)d > (UINT64_C(1) << 62) / n) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': shape is too large", path, name);
            return -1;
        }
        n *= (uint64_t)d;
        t->shape[i] = d;
    }
    for (int i = nd; i < FR_ST_MAX_DIMS; i++) t->shape[i] = 1;
    t->n_elem = (int64_t)n;
    if (cJSON_GetArraySize(off) != 2) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': data_offsets must be [begin, end]", path, name);
        return -1;
    }
    int64_t b = json_uint(cJSON_GetArrayItem(off, 0)), en = json_uint(cJSON_GetArrayItem(off, 1));
    if (b < 0 || en < 0 || b > en) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': data_offsets are not integers 0 <= begin <= end", path,
                   name);
        return -1;
    }
    if ((uint64_t)en > data_size) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': data_offsets [%lld, %lld] run past the end of the data "
                        "section (%zu bytes; file truncated?)", path, name, (long long)b,
                   (long long)en, data_size);
        return -1;
    }
    uint64_t want = n * (uint64_t)info->size; /* n < 2^62 / 1; size <= 8: checked below */
    if (n > UINT64_MAX / (uint64_t)info->size || (uint64_t)(en - b) != want) {
        char sb[96];
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but shape %s "
                        "of %s needs %llu", path, name, (long long)b, (long long)en,
                   (long long)(en - b), fr_st_shape_str(t->shape, nd, sb, sizeof sb), info->name,
                   (unsigned long long)want);
        return -1;
    }
    t->nbytes = (size_t)(en - b);
    *begin = (uint64_t)b; /* the caller points data at the data section + begin */
    return 0;
}

int fr_st_parse(fr_st_file *f, const char *path, const uint8_t *data, size_t size, fr_err *err) {
    memset(f, 0, sizeof *f);
    f->path = fr_xstrdup(path);
    f->data = data;
    f->size = size;
    if (size < 8) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a safetensors file (%zu bytes, shorter than the 8-byte header "
                        "length)", path, size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > FR_ST_MAX_HEADER) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: safetensors header length %llu exceeds the %u-byte limit (not a "
                        "safetensors file?)", path, (unsigned long long)hlen, FR_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: safetensors header length %llu runs past the end of the file (%zu "
                        "bytes; truncated?)", path, (unsigned long long)hlen, size);
        goto fail;
    }
    if (hlen < 2 || data[8] != '{') {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: safetensors header is not a JSON object (not a safetensors file?)",
                   path);
        goto fail;
    }
    cJSON *root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: safetensors header is not valid JSON", path);
        goto fail;
    }
    const uint8_t *base = data + 8 + hlen;
    size_t data_size = size - 8 - (size_t)hlen;
    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next) n++;
    f->tensors = fr_xcalloc((size_t)(n ? n : 1), sizeof *f->tensors);
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) continue;
        if (!strcmp(e->string, "__metadata__")) continue;
        fr_st_tensor *t = &f->tensors[f->n_tensors];
        memset(t, 0, sizeof *t);
        uint64_t begin = 0;
        if (st_parse_entry(path, e, t, data_size, &begin, err) != 0) {
            cJSON_Delete(root);
            goto fail;
        }
        t->data = base + begin;
        t->name = fr_xstrdup(e->string);
        f->n_tensors++;
    }
    cJSON_Delete(root);
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_tensor);
    for (int i = 1; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, f->tensors[i - 1].name)) {
            char q[160];
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' appears twice in the header", path,
                       fr_quotez(f->tensors[i].name, q, sizeof q));
            goto fail;
        }
    return 0;
fail:
    fr_st_close(f);
    return -1;
}

int fr_st_open(fr_st_file *f, const char *path, fr_err *err) {
    fr_mmap map;
    if (fr_mmap_open(&map, path, err) != 0) {
        memset(f, 0, sizeof *f);
        return -1;
    }
    if (fr_st_parse(f, path, map.data, map.size, err) != 0) {
        fr_mmap_close(&map);
        return -1;
    }
    f->map = map;
    return 0;
}

void fr_st_close(fr_st_file *f) {
    st_free_tensors(f);
    fr_mmap_close(&f->map);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const fr_st_tensor *fr_st_find(const fr_st_file *f, const char *name) {
    int lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (!c) return &f->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* ---- folders ---- */

static int st_set_add(fr_st_set *s, const char *path, fr_err *err) {
    s->files = fr_xrealloc(s->files, (size_t)(s->n_files + 1) * sizeof *s->files);
    if (fr_st_open(&s->files[s->n_files], path, err) != 0) return -1;
    s->n_files++;
    return 0;
}

/* A shard name from the index: a plain, printable UTF-8 file name (no directories, no "..", no
 * hidden files). */
static bool st_shard_name_ok(const char *n) {
    for (const unsigned char *p = (const unsigned char *)n; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return false;
    return n[0] && n[0] != '.' && !strchr(n, '/') && !strchr(n, '\\') && strlen(n) < 256 &&
           fr_utf8_valid(n, strlen(n));
}

static int st_set_open_index(fr_st_set *s, const char *dir, const char *index, fr_err *err) {
    size_t len;
    char *txt = fr_read_file(index, 64u * 1024 * 1024, &len, err);
    if (!txt) return -1;
    cJSON *root = cJSON_ParseWithLength(txt, len);
    free(txt);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %s", index,
                   root ? "no \"weight_map\" object" : "invalid JSON");
        cJSON_Delete(root);
        return -1;
    }
    /* unique shard names in first-seen order */
    const char **names = NULL;
    int n_names = 0, rc = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !st_shard_name_ok(e->valuestring)) {
            char q[160];
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: weight_map entry '%s' is not a plain file name", index,
                       fr_quotez(e->string ? e->string : "?", q, sizeof q));
            rc = -1;
            break;
        }
        int k = 0;
        while (k < n_names && strcmp(names[k], e->valuestring)) k++;
        if (k == n_names) {
            names = fr_xrealloc(names, (size_t)(n_names + 1) * sizeof *names);
            names[n_names++] = e->valuestring;
        }
    }
    if (!rc && n_names == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: weight_map is empty", index);
        rc = -1;
    }
    for (int i = 0; !rc && i < n_names; i++) {
        char *p = fr_path_join(dir, names[i]);
        if (st_set_add(s, p, err) != 0) rc = -1;
        free(p);
    }
    /* every entry must be in the shard the index names */
    for (const cJSON *e = wm->child; !rc && e; e = e->next) {
        for (int i = 0; i < s->n_files; i++) {
            const char *base = strrchr(s->files[i].path, '/');
            base = base ? base + 1 : s->files[i].path;
            if (strcmp(base, e->valuestring)) continue;
            if (!fr_st_find(&s->files[i], e->string)) {
                char q[160];
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' is listed in %s but not found there", index,
                           fr_quotez(e->string, q, sizeof q), e->valuestring);
                rc = -1;
            }
            break;
        }
    }
    free(names);
    cJSON_Delete(root);
    return rc;
}

int fr_st_set_open(fr_st_set *s, const char *dir, fr_err *err) {
    memset(s, 0, sizeof *s);
    char *index = fr_path_join(dir, "model.safetensors.index.json");
    char *single = fr_path_join(dir, "model.safetensors");
    int rc;
    if (fr_path_exists(index)) {
        s->where = index;
        rc = st_set_open_index(s, dir, index, err);
        free(single);
    } else if (fr_path_exists(single)) {
        s->where = single;
        rc = st_set_add(s, single, err);
        free(index);
    } else {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: no model.safetensors or model.safetensors.index.json", dir);
        free(index);
        free(single);
        rc = -1;
    }
    if (rc != 0) fr_st_set_close(s);
    return rc;
}

const fr_st_tensor *fr_st_set_find(const fr_st_set *s, const char *name, const fr_st_file **file) {
    for (int i = 0; i < s->n_files; i++) {
        const fr_st_tensor *t = fr_st_find(&s->files[i], name);
        if (t) {
            if (file) *file = &s->files[i];
            return t;
        }
    }
    return NULL;
}

size_t fr_st_set_bytes(const fr_st_set *s) {
    size_t n = 0;
    for (int i = 0; i < s->n_files; i++) n += s->files[i].size;
    return n;
}

void fr_st_set_close(fr_st_set *s) {
    for (int i = 0; i < s->n_files; i++) fr_st_close(&s->files[i]);
    free(s->files);
    free(s->where);
    memset(s, 0, sizeof *s);
}
