/* fuzz_gguf_spec.c — libFuzzer harness for the independent GGUF checker (tests/gguf_spec.c).
 *
 * The input is a whole file image, copied to a buffer of exactly its size so that AddressSanitizer
 * sees any read past the end. gguf_spec_check must return a problem count (quietly) and never
 * crash, read out of bounds or leak, whatever the bytes. A check that reads garbage could pass a
 * bad file, so this harness guards the test as much as the tool.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_SPEC_NO_MAIN
#include "../gguf_spec.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    int problems = gguf_spec_check("fuzz.gguf", buf, size, NULL);
    if (problems < 0) abort();
    free(buf);
    return 0;
}
