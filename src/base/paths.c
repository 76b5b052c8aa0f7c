/* paths.c — folder creation (mkdir -p) and the data root shipped files are found under; see
 * base.h. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

int fr_mkdir_p(const char *path, unsigned mode, fr_err *err) {
    if (!path || !*path) {
        fr_err_set(err, "cannot create a folder with an empty name");
        return -1;
    }
    size_t n = strlen(path);
    if (n >= PATH_MAX) {
        fr_err_set(err, "%.200s...: path too long", path);
        return -1;
    }
    char buf[PATH_MAX];
    memcpy(buf, path, n + 1);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    for (char *p = buf + 1;; p++) {
        bool end = *p == 0;
        if (*p != '/' && !end) continue;
        *p = 0;
        if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) {
            fr_err_set(err, "%s: cannot create folder: %s", buf, strerror(errno));
            return -1;
        }
        if (!fr_path_is_dir(buf)) {
            fr_err_set(err, "%s: exists and is not a folder", buf);
            return -1;
        }
        if (end) break;
        *p = '/';
    }
    return 0;
}

int fr_mkdir_parent(const char *file, unsigned mode, fr_err *err) {
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (!slash || slash == file) return 0;
    char *dir = fr_xstrndup(file, (size_t)(slash - file));
    int rc = fr_mkdir_p(dir, mode, err);
    free(dir);
    return rc;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_root[PATH_MAX]; /* the data root, without a trailing '/' */

static void find_root(void) {
    const char *env = getenv("FRUGAL_DATA_DIR");
    if (env && *env) {
        snprintf(g_root, sizeof g_root, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(g_root, sizeof g_root, "/usr/local/share/frugal"); /* nothing better to name */
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0; /* exe = the executable's folder */
    char cand[PATH_MAX + 32];
    snprintf(cand, sizeof cand, "%s/../share/frugal", exe);
    char *installed = realpath(cand, NULL);
    if (installed && fr_path_is_dir(installed)) {
        snprintf(g_root, sizeof g_root, "%s", installed);
        free(installed);
        return;
    }
    free(installed);
    static const char *const up[] = {"/..", "/../.."};
    for (size_t i = 0; i < FR_ARRAY_LEN(up); i++) {
        snprintf(cand, sizeof cand, "%s%s/models", exe, up[i]);
        if (!fr_path_is_dir(cand)) continue;
        snprintf(cand, sizeof cand, "%s%s", exe, up[i]);
        char *tree = realpath(cand, NULL);
        if (tree) {
            snprintf(g_root, sizeof g_root, "%s", tree);
            free(tree);
            return;
        }
    }
    snprintf(g_root, sizeof g_root, "%.*s/../share/frugal", PATH_MAX - 20, exe);
}

const char *fr_data_dir(void) {
    pthread_once(&g_once, find_root);
    return g_root;
}

char *fr_data_path(const char *rel) {
    if (rel[0] == '/') return fr_xstrdup(rel);
    return fr_path_join(fr_data_dir(), rel);
}

const char *fr_cancel_reason_name(fr_cancel_reason r) {
    switch (r) {
    case FR_CANCEL_CLIENT_GONE: return "client_gone";
    case FR_CANCEL_SHUTDOWN: return "shutting_down";
    case FR_CANCEL_DEADLINE: return "deadline_exceeded";
    case FR_CANCEL_TIMEOUT: return "timeout";
    case FR_CANCEL_NONE: break;
    }
    return "";
}
