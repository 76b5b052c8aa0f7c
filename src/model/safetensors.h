/* safetensors.h — reader for the safetensors format (HF checkpoints), single files and sharded
 * folders.
 *
 * File layout: an 8-byte little-endian header length N, N bytes of JSON, then the data section.
 * The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
 * to the data section); "__metadata__" is ignored. The parser works on a byte buffer (the memory
 * map of the file, or a fuzzer's input) and validates everything before anything points into it:
 * the header length (capped, within the buffer), each dtype (a known safetensors dtype), shape
 * (at most FR_ST_MAX_DIMS dims, each > 0, element count overflow-checked), and offsets (inside the
 * data section, end - begin == elements x element size). Tensors of dtypes the model cannot use
 * (I8, F64, ...) parse fine and are rejected only if the loader asks for one of them.
 *
 * A folder holds either model.safetensors, or model.safetensors.index.json whose weight_map
 * names the shard of each tensor; fr_st_set opens whichever is there.
 *
 * Every error is one line naming the file.
 */
#ifndef FRUGAL_SAFETENSORS_H
#define FRUGAL_SAFETENSORS_H

#include "model/model.h"

/* Dimensions a stored tensor may have (Conv3d kernels have 5); the loader folds the innermost ones
 * when a tensor has more than FR_MAX_DIMS. */
#define FR_ST_MAX_DIMS 6

/* Largest JSON header accepted (real headers are well under 10 MB). */
#define FR_ST_MAX_HEADER (100u * 1024u * 1024u)

typedef struct fr_st_tensor {
    char *name;                 /* tensor name (owned, NUL-terminated) */
    char dtype_name[8];         /* dtype as written in the file, e.g. "BF16" */
    int dtype;                  /* FR_DTYPE_F32/F16/BF16, or -1 for a dtype the model can't use */
    int n_dims;                 /* 0..FR_ST_MAX_DIMS (0 = scalar) */
    int64_t shape[FR_ST_MAX_DIMS]; /* HF / torch order: shape[0] outermost */
    int64_t n_elem;             /* product of shape */
    const uint8_t *data;        /* nbytes of tensor data inside the parsed buffer */
    size_t nbytes;              /* data_offsets end - begin */
} fr_st_tensor;

typedef struct fr_st_file {
    char *path;              /* file name used in messages (owned) */
    fr_mmap map;             /* the mapping when opened with fr_st_open; zeroed for fr_st_parse */
    const uint8_t *data;     /* the whole file */
    size_t size;             /* its size in bytes */
    fr_st_tensor *tensors;   /* sorted by name */
    int n_tensors;           /* entries in tensors */
} fr_st_file;

/* Parse a safetensors image of `size` bytes at `data` (kept alive by the caller). `path` is used
 * in messages. Returns 0, or -1 with err set (f is then empty). */
int fr_st_parse(fr_st_file *f, const char *path, const uint8_t *data, size_t size, fr_err *err);
/* Map and parse a file. */
int fr_st_open(fr_st_file *f, const char *path, fr_err *err);
/* Unmap (if mapped) and free. Safe on a zeroed or already closed file. */
void fr_st_close(fr_st_file *f);
/* Tensor by exact name, or NULL. */
const fr_st_tensor *fr_st_find(const fr_st_file *f, const char *name);
/* "[a, b]" into buf (for messages). */
const char *fr_st_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap);

/* The checkpoint of an HF folder: one file, or the shards of an index. */
typedef struct fr_st_set {
    char *where;          /* the file that lists the tensors (index or model.safetensors), for
                             "tensor not found" messages (owned) */
    fr_st_file *files;    /* opened files */
    int n_files;          /* entries in files */
} fr_st_set;

/* Open dir/model.safetensors.index.json and its shards, else dir/model.safetensors. Shard names
 * must be plain file names inside dir. Returns 0 or -1 with err. */
int fr_st_set_open(fr_st_set *s, const char *dir, fr_err *err);
/* Find a tensor in any file; *file (if not NULL) gets the file holding it. */
const fr_st_tensor *fr_st_set_find(const fr_st_set *s, const char *name, const fr_st_file **file);
/* Total bytes of all files. */
size_t fr_st_set_bytes(const fr_st_set *s);
void fr_st_set_close(fr_st_set *s);

#endif
