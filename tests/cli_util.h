/* cli_util.h — helpers for tests that run the frugal binary: run a command with arguments (no
 * shell), capture stdout and stderr, return the exit status; read a reference JSON file. */
#ifndef FRUGAL_CLI_UTIL_H
#define FRUGAL_CLI_UTIL_H

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

extern char **environ;

typedef struct cli_result {
    int status;  /* exit status, or 128+signal */
    char *out;   /* stdout (malloc'd, NUL-terminated) */
    char *err;   /* stderr */
} cli_result;

static inline const char *cli_bin(void) {
    const char *b = getenv("FRUGAL_BIN");
    return b ? b : "build/frugal";
}

static inline char *cli_slurp(const char *path) {
    fr_err e;
    char *s = fr_read_file(path, 1u << 30, NULL, &e);
    return s ? s : fr_xstrdup("");
}

/* argv[0] is replaced by the frugal binary; argv is NULL-terminated. */
static inline cli_result cli_run(const char **argv) {
    cli_result r = {-1, NULL, NULL};
    char out_path[] = "/tmp/frugal-cli-out-XXXXXX", err_path[] = "/tmp/frugal-cli-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    argv[0] = cli_bin();
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) == 0) {
        int st;
        waitpid(pid, &st, 0);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fo);
    close(fe);
    r.out = cli_slurp(out_path);
    r.err = cli_slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return r;
}

static inline void cli_free(cli_result *r) {
    free(r->out);
    free(r->err);
}

static inline cJSON *cli_load_json(const char *path) {
    char *s = cli_slurp(path);
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

/* True when the JSON array `a` holds exactly the integers ids[0..n). */
static inline bool cli_ids_equal(const cJSON *a, const cJSON *b) {
    if (!cJSON_IsArray(a) || !cJSON_IsArray(b)) return false;
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
    for (int i = 0; i < cJSON_GetArraySize(a); i++)
        if (cJSON_GetArrayItem(a, i)->valueint != cJSON_GetArrayItem(b, i)->valueint) return false;
    return true;
}

/* Count of lines in s (a one-line error message has 1). */
static inline int cli_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#endif
