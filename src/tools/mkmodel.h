/* mkmodel.h — `frugal mkmodel`: write a random-weight Qwen2/Llama model of a given shape, in HF
 * layout (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) or as one GGUF
 * file, for benchmarks and tests that need a model of a realistic size without downloading one.
 */
#ifndef FRUGAL_MKMODEL_H
#define FRUGAL_MKMODEL_H

/* Returns 0 on success, 1 on a failure (message printed), 2 on a usage error. */
int fr_cmd_mkmodel(int argc, char **argv);

#endif
