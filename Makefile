# frugal — build
#   make              release build: build/frugal, build/libfrugal.a (server + public API),
#                     build/libfrugal-tools.a (CLI commands and offline tools: frugal and tests)
#   make test         build and run the test suite (ends with "N passed, N failed")
#   make SANITIZE=address,undefined test   the same under ASan+UBSan (objects in build-san/)
#   make WERROR=1     warnings are errors (CI sets this)
#   make cuda         also compile src/backend/cuda with nvcc (never needed for the CPU build)
#   make dev          the standalone kernel experiments of dev/cuda (nvcc; build-dev/)
#   make install      build/frugal → $(DESTDIR)$(PREFIX)/bin; models, templates, data, dashboards
#                     and the bundled tiny model → $(PREFIX)/share/frugal (the data root the
#                     binary finds by itself); docs → $(PREFIX)/share/doc/frugal. PREFIX defaults
#                     to /usr/local. `make uninstall` removes exactly those.

CC       ?= cc
BUILD    ?= build
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter
OPT      ?= -O3 -fno-omit-frame-pointer -g
ARCHFLAGS?= -mavx2 -mfma -mf16c
ifeq ($(WERROR),1)
WARN += -Werror
endif
ifneq ($(SANITIZE),)
override BUILD := $(BUILD)-san
OPT      := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
LDSAN    := -fsanitize=$(SANITIZE)
endif
PKGS     := libpcre2-8 libcjson libmicrohttpd sqlite3 libcurl zlib libcrypto \
            tesseract lept libpng libjpeg libwebp libtiff-4 \
            pocketsphinx sphinxbase sndfile samplerate vorbisfile libprotobuf-c
TOOL_PKGS:= cairo
CFLAGS   += $(CSTD) $(WARN) $(OPT) $(ARCHFLAGS) -pthread -Iinclude -Isrc \
            -I/usr/include/openblas -I$(BUILD)/gen $(shell pkg-config --cflags $(PKGS) $(TOOL_PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lpcre2-8 -lcjson -lmicrohttpd -lsqlite3 -lcurl -lz -lcrypto) \
            -lutf8proc -lopenblas -lm -pthread $(LDSAN)
# what the offline tools add (linked into build/frugal and the tests, never needed by libfrugal.a)
TOOL_LDLIBS := $(shell pkg-config --libs $(TOOL_PKGS) 2>/dev/null || echo -lcairo)

# Two archives. libfrugal.a: what the server and the public API need (include/frugal.h).
# libfrugal-tools.a: the CLI commands (src/tools) and the offline tools they run, the document
# generator (cairo), the intent-model trainer and its calibration, the ARPA LM builder; only the
# `frugal` binary and the tests link it.
TOOL_SRC := $(sort $(shell find src/tools -name '*.c')) src/stages/ocr/docgen.c \
            src/stages/nlu/intent_train.c src/stages/nlu/intent_calib.c src/stages/nlu/intent_multi.c \
            src/stages/asr/lm.c
LIB_SRC  := $(filter-out $(TOOL_SRC),$(shell find src -name '*.c' ! -name main.c ! -path 'src/backend/cuda/*' | sort))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
# generated at build time by protoc-c (protobuf-c-compiler) from src/model/onnx/onnx.proto
PROTO    := src/model/onnx/onnx.proto
GEN_OBJ  := $(BUILD)/gen/onnx.pb-c.o
LIB_OBJ  += $(GEN_OBJ)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/frugal

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# onnx.proto → onnx.pb-c.{c,h} (protoc-c writes both); only onnx.c includes the header
define proto_rules
$(1)/gen/onnx.pb-c.c: $(PROTO)
	@mkdir -p $(1)/gen
	protoc-c --c_out=$(1)/gen --proto_path=$(dir $(PROTO)) $(notdir $(PROTO))
$(1)/gen/onnx.pb-c.h: $(1)/gen/onnx.pb-c.c
	@test -f $$@
$(1)/src/model/onnx/onnx.o: | $(1)/gen/onnx.pb-c.h
# the tests that write models through protobuf-c (tests/onnx_build.h)
$(1)/tests/test_onnx.o $(1)/tests/test_onnx_exec.o $(1)/tests/test_onnx_seq.o: | $(1)/gen/onnx.pb-c.h
endef
$(eval $(call proto_rules,$(BUILD)))
$(BUILD)/gen/onnx.pb-c.o: $(BUILD)/gen/onnx.pb-c.c
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libfrugal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/libfrugal-tools.a: $(TOOL_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/frugal: $(BUILD)/src/main.o $(BUILD)/libfrugal-tools.a $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(TOOL_LDLIBS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libfrugal-tools.a $(BUILD)/libfrugal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(TOOL_LDLIBS) $(LDLIBS)

# libfrugal.a links whole with the library's own LDLIBS (no cairo, no tools archive): a program
# that uses only the server and the public API never needs the offline tools.
$(BUILD)/lib-alone: $(BUILD)/libfrugal.a
	@printf 'int main(void) { return 0; }\n' >$@.c
	$(CC) $(CFLAGS) -o $@ $@.c -Wl,--whole-archive $(BUILD)/libfrugal.a -Wl,--no-whole-archive $(LDLIBS)

# bench/bench_onnx.c: the ONNX executor on the PP-OCR models (bench/RESULTS.md)
$(BUILD)/bench_onnx: $(BUILD)/bench/bench_onnx.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/bench_ocr_cpu.c: OCR pages/s per core, tesseract against PP-OCR, warm engines
$(BUILD)/bench_ocr_cpu: $(BUILD)/bench/bench_ocr_cpu.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/bench_grammar.c: token-mask cost of constrained decoding on a Qwen2.5-size vocabulary
$(BUILD)/bench_grammar: $(BUILD)/bench/bench_grammar.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/bench_vad_whisper.c: Whisper's CPU cost with and without the VAD (bench/RESULTS.md)
$(BUILD)/bench_vad_whisper: $(BUILD)/bench/bench_vad_whisper.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/bench_prefix.c: TTFT per turn with and without the prefix cache (bench/RESULTS.md)
$(BUILD)/bench_prefix: $(BUILD)/bench/bench_prefix.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

tests: $(TEST_BIN) $(BUILD)/frugal $(BUILD)/lib-alone

test: tests
	BUILD=$(BUILD) sh tests/run.sh

clean:
	rm -rf build build-san build-fuzz build-dev

# ---- install (PREFIX, DESTDIR): the binary finds <prefix>/share/frugal from /proc/self/exe ----
PREFIX   ?= /usr/local
BINDIR   := $(PREFIX)/bin
DATADIR  := $(PREFIX)/share/frugal
DOCDIR   := $(PREFIX)/share/doc/frugal
DATA_TREES := models data dashboards
INSTALL_BIN ?= $(BUILD)/frugal
install: $(INSTALL_BIN)
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(DATADIR)/models" "$(DESTDIR)$(DOCDIR)"
	install -m 0755 $(INSTALL_BIN) "$(DESTDIR)$(BINDIR)/frugal"
	find $(DATA_TREES) -type f | while IFS= read -r f; do \
	    install -D -m 0644 "$$f" "$(DESTDIR)$(DATADIR)/$$f" || exit 1; done
	find tests/fixtures/qwen2-tiny -type f | while IFS= read -r f; do \
	    install -D -m 0644 "$$f" "$(DESTDIR)$(DATADIR)/models/qwen2-tiny/$${f##*/}" || exit 1; done
	install -m 0644 README.md docs/*.md docs/*.json "$(DESTDIR)$(DOCDIR)/"
	@echo "installed $(DESTDIR)$(BINDIR)/frugal (data root $(DATADIR))"

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/frugal"
	rm -rf "$(DESTDIR)$(DATADIR)" "$(DESTDIR)$(DOCDIR)"

.PHONY: all tests test clean install uninstall
.SECONDARY:
-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(BUILD)/src/main.d $(TEST_BIN:=.d) $(wildcard $(BUILD)/bench/*.d)

# ---- metering tests: the scripted fake NVML (tests/fakenvml), loaded by the meter via dlopen ----
$(BUILD)/libfakenvml.so: tests/fakenvml/fakenvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O1 -g -fPIC -shared -Wall -Wextra -o $@ $< -pthread
tests: $(BUILD)/libfakenvml.so

# ---- gguf-spec: the independent GGUF checker tests/cli_gguf.sh runs (libc only, no libfrugal) ----
$(BUILD)/gguf-spec: tests/gguf_spec.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -o $@ $< $(LDSAN)
tests: $(BUILD)/gguf-spec
# test_sp_tokenizer runs the same checker on the GGUF it writes
$(BUILD)/tests/gguf_spec_check.o: tests/gguf_spec.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DGGUF_SPEC_NO_MAIN -c $< -o $@
$(BUILD)/tests/test_sp_tokenizer: $(BUILD)/tests/gguf_spec_check.o

# ---- CUDA backend (optional; the CPU build above never needs CUDA) ----------------------------
#   make cuda        nvcc-compiles src/backend/cuda (sm_90 + compute_90 PTX) into build-cuda/ and
#                    links build-cuda/gpu-check (kernels and decoder vs CPU references),
#                    gpu-bench (Llama-3-8B-shape benchmarks), gpu-e2e (fixtures vs HF through
#                    backend.h), gpu-vision (the CUDA vision tower vs the CPU tower and HF),
#                    gpu-whisper (the CUDA Whisper vs the CPU reference, and --bench),
#                    gpu-vl-bench (frugal's side of bench/gpu/vl_bench.sh), gpu-onnx (the CUDA
#                    ONNX executor vs onnxruntime and the CPU executor, and the PP-OCR bench;
#                    links -lcudnn), gpu-ppocr (the PP-OCR page pipeline on CPU and CUDA over
#                    page images, and its pages/s) and frugal-cuda (the CLI with the CUDA
#                    backend linked in).
#   make cuda-tools  only gpu-check and gpu-bench (no libfrugal dependencies: base.o, and for
#                    gpu-bench the meter's NVML loader nvml.o; what a bare GPU host can build).
NVCC         ?= $(or $(shell command -v nvcc 2>/dev/null),/usr/local/cuda/bin/nvcc)
CUDA_HOME    ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_BUILD   ?= build-cuda
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS    ?= -std=c++17 -O3 -g -lineinfo $(CUDA_GENCODE) -Xcompiler -Wall -Iinclude -Isrc
CUDA_CFLAGS  := $(CSTD) $(WARN) -O2 -g -pthread -Iinclude -Isrc -Itests -I$(CUDA_HOME)/include \
                $(shell pkg-config --cflags libcjson 2>/dev/null)
CUDA_SRC     := $(sort $(wildcard src/backend/cuda/*.cu))
CUDA_OBJ     := $(CUDA_SRC:%.cu=$(CUDA_BUILD)/%.o)
# the vision tower (vision.cu) calls backend/vision_plan.c (libfrugal): only the
# programs that link libfrugal take it (whisper.cu too: it reads model/whisper.h's model);
# gpu-check and gpu-bench link the kernels alone
CUDA_KOBJ    := $(filter-out $(CUDA_BUILD)/src/backend/cuda/vision.o $(CUDA_BUILD)/src/backend/cuda/k_onnx.o $(CUDA_BUILD)/src/backend/cuda/whisper.o,$(CUDA_OBJ))
# the ONNX executor on the device (onnx_cuda.c: host code over cuDNN / cuBLAS, k_onnx.cu: its
# kernels) runs the CPU executor's prepared schedule: programs that link libfrugal take it
ONNX_CUDA_OBJ := $(CUDA_BUILD)/src/backend/cuda/onnx_cuda.o $(CUDA_BUILD)/src/backend/cuda/k_onnx.o
CUDA_LIBS    := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static \
                -ldl -lrt -lpthread -lstdc++ -lm

$(CUDA_BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@
$(CUDA_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -MMD -MP -c $< -o $@

$(CUDA_BUILD)/gpu-check: $(CUDA_BUILD)/tests/gpu/gpu_check.o $(CUDA_BUILD)/tests/gpu/ref.o \
                         $(CUDA_BUILD)/tests/gpu/vit_check.o $(BUILD)/src/base/base.o \
                         $(BUILD)/src/model/gguf.o $(CUDA_KOBJ)
	$(CC) -o $@ $^ $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-bench: $(CUDA_BUILD)/bench/gpu/bench.o $(BUILD)/src/base/base.o \
                         $(BUILD)/src/meter/nvml.o $(BUILD)/src/model/gguf.o $(CUDA_KOBJ)
	$(CC) -o $@ $^ $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-e2e: $(CUDA_BUILD)/tests/gpu/e2e.o $(CUDA_BUILD)/tests/gpu/vl_e2e.o $(CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-vision: $(CUDA_BUILD)/tests/gpu/vision.o $(CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-whisper: $(CUDA_BUILD)/tests/gpu/whisper_check.o $(CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-vl-bench: $(CUDA_BUILD)/bench/gpu/vl_bench.o $(CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)
$(CUDA_BUILD)/gpu-onnx: $(CUDA_BUILD)/tests/gpu/onnx_check.o $(ONNX_CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ -Wl,--as-needed $(LDLIBS) $(CUDA_LIBS) -lcudnn
$(CUDA_BUILD)/gpu-ppocr: $(CUDA_BUILD)/tests/gpu/ppocr_pages.o $(ONNX_CUDA_OBJ) $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ -Wl,--as-needed $(LDLIBS) $(CUDA_LIBS) -lcudnn
$(CUDA_BUILD)/frugal-cuda: $(BUILD)/src/main.o $(sort $(CUDA_OBJ) $(ONNX_CUDA_OBJ)) $(BUILD)/libfrugal-tools.a $(BUILD)/libfrugal.a
	$(CC) -o $@ $^ $(TOOL_LDLIBS) $(LDLIBS) $(CUDA_LIBS) -lcudnn

cuda-tools: $(CUDA_BUILD)/gpu-check $(CUDA_BUILD)/gpu-bench
cuda: cuda-tools $(CUDA_BUILD)/gpu-e2e $(CUDA_BUILD)/gpu-vision $(CUDA_BUILD)/gpu-whisper $(CUDA_BUILD)/gpu-vl-bench \
      $(CUDA_BUILD)/gpu-onnx $(CUDA_BUILD)/gpu-ppocr $(CUDA_BUILD)/frugal-cuda
.PHONY: cuda cuda-tools
-include $(CUDA_OBJ:.o=.d) $(ONNX_CUDA_OBJ:.o=.d) $(wildcard $(CUDA_BUILD)/tests/gpu/*.d $(CUDA_BUILD)/bench/gpu/*.d)

# ---- dev/cuda: standalone kernel experiments (llm.c style; never linked into frugal) --------
#   make dev         nvcc-compiles each dev/cuda/<op>.cu (with dev/cuda/common.h only: nothing from
#                    src/) into build-dev/<op>; `sh dev/cuda/run_all.sh` runs every variant of each
#                    briefly on a GPU (dev/cuda/README.md). Not built by `make`, `make cuda` or CI.
DEV_BUILD    ?= build-dev
DEV_NVCCFLAGS ?= -std=c++17 -O3 -lineinfo $(CUDA_GENCODE) -Xcompiler -Wall
DEV_SRC      := $(sort $(wildcard dev/cuda/*.cu))
DEV_BIN      := $(DEV_SRC:dev/cuda/%.cu=$(DEV_BUILD)/%)

$(DEV_BUILD)/%: dev/cuda/%.cu dev/cuda/common.h
	@mkdir -p $(dir $@)
	$(NVCC) $(DEV_NVCCFLAGS) -o $@ $<

dev: $(DEV_BIN)
.PHONY: dev

# ---- fuzzing: every libFuzzer harness in tests/fuzz (see tests/fuzz/README.md) ----------------
#   make fuzz        clang-compiles the library with ASan + UBSan + fuzzer coverage into
#                    build-fuzz/ and links build-fuzz/fuzz_<name> for each tests/fuzz/fuzz_<name>.c
#   sh tests/fuzz/run.sh [seconds]   runs each over its seed corpus tests/fuzz/corpus/<name>/
FUZZ_BUILD  ?= build-fuzz
FUZZ_CC     ?= clang
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := $(CSTD) -Wall -Wextra -Wno-unused-parameter -O1 -g -fno-omit-frame-pointer $(ARCHFLAGS) \
               -pthread -Iinclude -Isrc -I/usr/include/openblas -I$(FUZZ_BUILD)/gen \
               $(shell pkg-config --cflags $(PKGS) $(TOOL_PKGS) 2>/dev/null) $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_LIBS   := $(TOOL_LDLIBS) $(filter-out $(LDSAN),$(LDLIBS))
FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN    := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_OBJ    := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/gen/onnx.pb-c.o
FUZZ_TOOL_OBJ := $(TOOL_SRC:%.c=$(FUZZ_BUILD)/%.o)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(eval $(call proto_rules,$(FUZZ_BUILD)))
$(FUZZ_BUILD)/gen/onnx.pb-c.o: $(FUZZ_BUILD)/gen/onnx.pb-c.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(FUZZ_BUILD)/gen -c $< -o $@
$(FUZZ_BUILD)/libfrugal.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BUILD)/libfrugal-tools.a: $(FUZZ_TOOL_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/libfrugal-tools.a $(FUZZ_BUILD)/libfrugal.a
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

fuzz: $(FUZZ_BIN)
.PHONY: fuzz
-include $(FUZZ_OBJ:.o=.d) $(FUZZ_TOOL_OBJ:.o=.d) $(FUZZ_SRC:%.c=$(FUZZ_BUILD)/%.d)
print-ldlibs:
	@echo $(LDLIBS)
print-tool-ldlibs:
	@echo $(TOOL_LDLIBS)
.PHONY: print-ldlibs print-tool-ldlibs
