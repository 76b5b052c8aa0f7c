/* loader.h — the weight loader's job list, shared by model.c (the text decoder's weights) and
 * vision.c (the vision tower's). Private to src/model.
 *
 * A job names one weight: where it goes, its name in the file, the shape the hyperparameters
 * imply, whether it is required and whether it must be F32. fr_ld_run_jobs resolves and checks
 * every job (presence, shape, storage type) before it converts or points anything, so a bad
 * checkpoint fails with one line naming the file and the tensor.
 */
#ifndef FRUGAL_LOADER_H
#define FRUGAL_LOADER_H

#include "model/gguf.h"
#include "model/model.h"
#include "model/safetensors.h"

#define SRC_UNSUPPORTED UINT32_MAX

/* A tensor as found in a file. */
typedef struct fr_ld_src {
    const char *file;        /* file holding it (messages) */
    const char *name;        /* its name there */
    bool hf_order;           /* print shapes outermost-first (safetensors) in messages */
    int n_dims;              /* dimensions (a safetensors tensor of more than FR_MAX_DIMS has its
                                innermost ones folded into ne[0]) */
    int64_t ne[FR_MAX_DIMS]; /* ne[0] innermost */
    int64_t n_elem;          /* elements */
    uint32_t type;           /* storage as a ggml type id, or SRC_UNSUPPORTED */
    const char *type_name;   /* storage type name for messages */
    const uint8_t *data;     /* bytes in the map */
    size_t nbytes;           /* their count */
} fr_ld_src;

/* One weight to load. */
typedef struct fr_ld_job {
    fr_tensor *dst;          /* where it goes */
    char canon[64];          /* GGUF-style canonical name */
    char file_name[128];     /* name in the file */
    int n_dims;              /* expected dims */
    int64_t ne[FR_MAX_DIMS]; /* expected shape (dims past n_dims are 1) */
    bool required;           /* missing -> error; else the tensor stays absent */
    bool force_f32;          /* norms, biases, rope factors, vision weights */
    bool flatten;            /* any stored shape whose outermost dimension is ne[n_dims-1] and
                                whose other dimensions multiply to the rest (a Conv3d kernel
                                [O, C, T, P, P] read as the matrix (C*T*P*P, O)) */
    bool found;              /* resolved in the file */
    fr_ld_src src;           /* the resolved tensor */
} fr_ld_job;

typedef struct fr_loader {
    fr_model *m;             /* model being built */
    const char *where;       /* file named in "tensor not found" messages */
    const fr_st_set *st;     /* HF checkpoint, or NULL */
    const fr_gguf *gg;       /* GGUF file, or NULL */
    fr_ld_job *jobs;         /* weights to load */
    int n_jobs, cap_jobs;    /* count / capacity */
    size_t conv_total;       /* bytes of F32 output that conversions produce */
    size_t conv_done;        /* ... produced so far */
    int last_pct;            /* last progress percentage printed, -1 before the first */
    bool progress;           /* print progress (files over 1 GiB) */
    bool tty;                /* stderr is a terminal: redraw one line */
} fr_loader;

/* Append a job (ne of dims past n_dims are 1); the returned pointer is valid until the next add. */
fr_ld_job *fr_ld_add_job(fr_loader *L, fr_tensor *dst, const char *canon, const char *file_name,
                         int n_dims, int64_t ne0, int64_t ne1, bool required, bool force_f32);
/* Resolve all jobs, then convert / point them. file_bytes sizes the progress line. 0 or -1. */
int fr_ld_run_jobs(fr_loader *L, size_t file_bytes, fr_err *err);
/* Whether the checkpoint (HF set or GGUF) holds a tensor of this name. */
bool fr_ld_has(const fr_loader *L, const char *name);

/* Keep a memory map alive until fr_model_free. */
void fr_model_add_map(fr_model *m, fr_mmap map);
/* Free p now if the model owns it (a buffer fr_model_own took), else nothing. */
void fr_model_release(fr_model *m, const void *p);

struct fr_vision;
/* Add the vision tower's HF tensors (prefix model.visual. or visual.) to the job list; v->hp is
 * set, v->blocks is allocated here. */
void fr_vision_plan_hf(fr_loader *L, struct fr_vision *v);
/* Derived fields (n_params) once the tensors are loaded. */
void fr_vision_finish(struct fr_vision *v);

#endif
