# Builds hip-lib into build/libkpick-<backend>.so.
#   make                  cpu backend (gcc), plus the test-only build
#   make GPU=cuda [ARCH=sm_90]    nvcc + cuBLASLt     (rules in hip-lib/src/gpu/gpu.mk)
#   make GPU=hip ARCH=gfx942      hipcc + hipBLASLt
#   make hip-check / cuda-check   compile-check the GPU kernels without the BLAS
BUILD := build
SRC := hip-lib/src
INC := hip-lib/include
GPU ?=
BACKEND := $(if $(GPU),$(GPU),cpu)

CC ?= gcc
CPU_CFLAGS := -O3 -march=native -ffp-contract=fast -std=gnu11 -fPIC -pthread -Wall -Wextra -Wno-unused-parameter
COMMON_SRCS := $(wildcard $(SRC)/common/*.c)
COMMON_HDRS := $(wildcard $(SRC)/common/*.h) $(INC)/kpick.h $(SRC)/space.def
CPU_SRCS := $(wildcard $(SRC)/cpu/*.c)
CPU_HDRS := $(wildcard $(SRC)/cpu/*.h)

# The space token: any change to the candidate list or a kernel source of the
# backend makes old tables stale, without anyone bumping a number. It hashes
# space.def, the describer, the numeric helpers the kernels use, the fp8 and
# moe layout helpers both backends' kernels find their data through, and the
# backend's kernel and launcher sources; not the decode-step ops of serve-bench
# (decode.*), the read floors (gpu/floor.hip), the route or the ABI glue, which
# choose no kernel.
token = $(shell cat $(1) | sha256sum | cut -c1-16)
KERNEL_COMMON := $(SRC)/space.def $(SRC)/common/space.h $(SRC)/common/space.c $(SRC)/common/numeric.h \
  $(SRC)/common/fp8.h $(SRC)/common/moe.h
CPU_TOKEN := $(call token,$(KERNEL_COMMON) $(sort $(filter-out %/decode.c,$(CPU_SRCS)) $(CPU_HDRS)))
# The compiler by what it reports, not by the name it was invoked as: `cc`,
# `gcc` and `/opt/gcc/bin/gcc` of one gcc give one identity (a table made by
# one is used by the others). Family from its macros, version, and the vendor
# build in the parentheses of its --version line ("(Debian 12.2.0-14)").
CC_FAMILY := $(shell $(CC) -dM -E -x c /dev/null 2>/dev/null | grep -q __clang__ && echo clang || echo gcc)
CC_VERSION := $(shell $(CC) -dumpfullversion 2>/dev/null || $(CC) -dumpversion)
CC_BUILD := $(shell $(CC) --version 2>/dev/null | head -1 | sed -n 's/^[^(]*\(([^)]*)\).*/\1/p')
CC_NAME := $(strip $(CC_FAMILY) $(CC_VERSION) $(CC_BUILD))
CPU_IDENT := -DKPICK_BACKEND_CPU -DKPICK_SPACE_TOKEN='"$(CPU_TOKEN)"' \
  -DKPICK_COMPILER='"$(CC_NAME) $(CPU_CFLAGS)"'

.PHONY: all cpu clean hip-check cuda-check compiler-id
all: $(BACKEND)

# what the identity's compiler field starts with (tests/table.test.ts checks cc and gcc agree)
compiler-id:
	@echo '$(CC_NAME)'

cpu: $(BUILD)/libkpick-cpu.so $(BUILD)/libkpick-cpu-test.so

$(BUILD)/libkpick-cpu.so: $(COMMON_SRCS) $(CPU_SRCS) $(COMMON_HDRS) $(CPU_HDRS) Makefile
	@mkdir -p $(BUILD)
	$(CC) $(CPU_CFLAGS) $(CPU_IDENT) -shared -o $@.tmp $(COMMON_SRCS) $(CPU_SRCS) -lm && mv $@.tmp $@

# Test-only build: adds the deliberately wrong candidates of space.def.
$(BUILD)/libkpick-cpu-test.so: $(COMMON_SRCS) $(CPU_SRCS) $(COMMON_HDRS) $(CPU_HDRS) Makefile
	@mkdir -p $(BUILD)
	$(CC) $(CPU_CFLAGS) $(CPU_IDENT) -DKPICK_TESTING -shared -o $@.tmp $(COMMON_SRCS) $(CPU_SRCS) -lm && mv $@.tmp $@

-include $(SRC)/gpu/gpu.mk

clean:
	rm -rf $(BUILD)
