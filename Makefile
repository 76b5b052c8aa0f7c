# frugal — build
#   make              release build: build/frugal, build/libfrugal.a
#   make test         build and run the test suite (ends with "N passed, N failed")
#   make SANITIZE=address,undefined test   the same under ASan+UBSan (objects in build-san/)
#   make WERROR=1     warnings are errors (CI sets this)
#   make cuda         also compile src/backend/cuda with nvcc (never needed for the CPU build)

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
BUILD    := build-san
OPT      := -O1 -g -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
LDSAN    := -fsanitize=$(SANITIZE)
endif
PKGS     := libpcre2-8 libcjson libmicrohttpd sqlite3 libcurl zlib
CFLAGS   += $(CSTD) $(WARN) $(OPT) $(ARCHFLAGS) -pthread -Iinclude -Isrc \
            -I/usr/include/openblas $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lpcre2-8 -lcjson -lsqlite3 -lcurl -lz) \
            -lutf8proc -lopenblas -lm -pthread $(LDSAN)

LIB_SRC  := $(shell find src -name '*.c' ! -name main.c ! -path 'src/backend/cuda/*' | sort)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/frugal

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libfrugal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/frugal: $(BUILD)/src/main.o $(BUILD)/libfrugal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libfrugal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

tests: $(TEST_BIN) $(BUILD)/frugal

test: tests
	BUILD=$(BUILD) sh tests/run.sh

clean:
	rm -rf build build-san

.PHONY: all tests test clean
.SECONDARY:
-include $(LIB_OBJ:.o=.d) $(BUILD)/src/main.d $(TEST_BIN:=.d)

# ---- metering tests: the scripted fake NVML (tests/fakenvml), loaded by the meter via dlopen ----
$(BUILD)/libfakenvml.so: tests/fakenvml/fakenvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O1 -g -fPIC -shared -Wall -Wextra -o $@ $< -pthread
tests: $(BUILD)/libfakenvml.so
