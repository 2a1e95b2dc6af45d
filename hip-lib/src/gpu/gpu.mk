# gpu.mk: the GPU backend's rules, included by the top Makefile.
#   make GPU=cuda [ARCH=sm_90]   build/libkpick-cuda.so: nvcc (.hip as CUDA), cuBLASLt
#   make GPU=hip ARCH=gfx942     build/libkpick-hip.so: hipcc, hipBLASLt (ARCH may list several)
#   make cuda-check              nvcc compiles every kernel and the hooks for sm_90, no BLAS
#   make hip-check               Debian's hipcc compiles them for gfx90a (wave64) and gfx1030
#                                (wave32), and clang 19+ their device code for gfx942, gfx950
#                                and gfx1100; no BLAS (the rule says which compiler knows what)
# common/*.c is C, built by $(CC) with -DKPICK_BACKEND_GPU; the runtime and the BLAS are
# linked dynamically, so be_info reports the versions actually loaded.

GPU_DIR := $(SRC)/gpu
GPU_KERNELS := $(sort $(wildcard $(GPU_DIR)/*.hip))
GPU_HOOKS := $(GPU_DIR)/hooks.cpp
GPU_BLAS := $(GPU_DIR)/blaslt.cpp
GPU_HDRS := $(sort $(wildcard $(GPU_DIR)/*.h))
GPU_DEPS := $(GPU_HDRS) $(COMMON_HDRS) $(GPU_DIR)/gpu.mk

# Any change to space.def or a GPU kernel or launcher source makes old tables
# stale (the top Makefile says what the token leaves out, and why).
GPU_TOKEN = $(call token,$(KERNEL_COMMON) $(sort $(filter-out %/decode.hip %/floor.hip,$(GPU_KERNELS)) $(GPU_HOOKS) $(GPU_BLAS) $(GPU_HDRS)))
GPU_CFLAGS := -O2 -std=gnu11 -fPIC -pthread -Wall -Wextra -Wno-unused-parameter
GPU_COMMON_IDENT = -DKPICK_BACKEND_GPU -DKPICK_SPACE_TOKEN='"$(GPU_TOKEN)"' \
  -DKPICK_COMPILER='"$(GPU_COMPILER); $(CC_NAME) $(GPU_CFLAGS)"'

# ---- CUDA ----
NVCC ?= nvcc
CUDA_ARCH := $(if $(ARCH),$(ARCH),sm_90)
NVCC_FLAGS := -O3 -std=c++17 -arch=$(CUDA_ARCH) -Xcompiler -fPIC
NVCC_VERSION = $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*, V\([0-9.]*\).*/\1/p')
CUDA_DEFS := -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU -DKPICK_GPU_ARCHS='"$(CUDA_ARCH)"'
CUDA_OBJ := $(BUILD)/cuda
# wgmma.hip holds sm_90a code (wgmma, TMA): for an sm_90 target it is built for
# compute_90a (nvcc 13.0's -arch=sm_90a shorthand also runs a plain sm_90 pass
# that rejects wgmma, so the -gencode form); for any other target its kernels
# compile to a trap and kp_wgmma_has() says no.
comma := ,
WGMMA_ARCH = $(if $(filter sm_90 sm_90a,$(CUDA_ARCH)),-gencode=arch=compute_90a$(comma)code=sm_90a -DKPICK_WGMMA_BUILT,-arch=$(CUDA_ARCH))
CUDA_OBJS := $(patsubst $(GPU_DIR)/%.hip,$(CUDA_OBJ)/%.o,$(GPU_KERNELS)) $(CUDA_OBJ)/hooks.o $(CUDA_OBJ)/blaslt.o \
  $(patsubst $(SRC)/common/%.c,$(CUDA_OBJ)/common_%.o,$(COMMON_SRCS))

.PHONY: cuda hip
cuda: $(BUILD)/libkpick-cuda.so

$(CUDA_OBJ)/%.o: $(GPU_DIR)/%.hip $(GPU_DEPS)
	@mkdir -p $(CUDA_OBJ)
	$(NVCC) $(NVCC_FLAGS) $(CUDA_DEFS) -x cu -c $< -o $@

$(CUDA_OBJ)/wgmma.o: $(GPU_DIR)/wgmma.hip $(GPU_DEPS)
	@mkdir -p $(CUDA_OBJ)
	$(NVCC) $(filter-out -arch=%,$(NVCC_FLAGS)) $(WGMMA_ARCH) $(CUDA_DEFS) -x cu -c $< -o $@

$(CUDA_OBJ)/%.o: $(GPU_DIR)/%.cpp $(GPU_DEPS)
	@mkdir -p $(CUDA_OBJ)
	$(NVCC) $(NVCC_FLAGS) $(CUDA_DEFS) -x cu -c $< -o $@

$(CUDA_OBJ)/common_%.o: $(SRC)/common/%.c $(COMMON_HDRS) $(GPU_KERNELS) $(GPU_HOOKS) $(GPU_BLAS) $(GPU_HDRS)
	@mkdir -p $(CUDA_OBJ)
	$(CC) $(GPU_CFLAGS) $(GPU_COMMON_IDENT) -c $< -o $@

$(BUILD)/libkpick-cuda.so: GPU_COMPILER = nvcc $(NVCC_VERSION) $(NVCC_FLAGS) (wgmma.hip: $(WGMMA_ARCH))
$(BUILD)/libkpick-cuda.so: $(CUDA_OBJS)
	$(NVCC) -shared -o $@.tmp.so $(CUDA_OBJS) -cudart shared -lcublasLt -ldl && mv $@.tmp.so $@

# compile-only: every kernel and the hooks, no BLAS headers needed; wgmma.hip
# for sm_90a as the library builds it, and for sm_80 (its trap path)
cuda-check:
	@mkdir -p $(BUILD)/check/cuda
	@set -e; for f in $(GPU_KERNELS) $(GPU_HOOKS); do \
	  arch="-arch=sm_90"; case $$f in */wgmma.hip) arch="-gencode=arch=compute_90a,code=sm_90a -DKPICK_WGMMA_BUILT";; esac; \
	  echo "nvcc sm_90: $$f"; \
	  $(NVCC) -O3 -std=c++17 $$arch -Xcompiler -fPIC -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU \
	    -DKPICK_GPU_ARCHS='"sm_90"' -x cu -c $$f -o $(BUILD)/check/cuda/$$(basename $$f).o; \
	done
	@echo "nvcc sm_80: $(GPU_DIR)/wgmma.hip (no sm_90a pass)"
	@$(NVCC) -O3 -std=c++17 -arch=sm_80 -Xcompiler -fPIC -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU \
	  -DKPICK_GPU_ARCHS='"sm_80"' -x cu -c $(GPU_DIR)/wgmma.hip -o $(BUILD)/check/cuda/wgmma-sm80.o

# ---- HIP ----
HIPCC ?= hipcc
HIP_ARCH := $(if $(ARCH),$(ARCH),gfx942)
HIP_FLAGS := -O3 -std=c++17 -fPIC $(foreach a,$(HIP_ARCH),--offload-arch=$(a))
HIP_DEFS := -DKPICK_GPU_HIP -DKPICK_BACKEND_GPU -DKPICK_GPU_ARCHS='"$(HIP_ARCH)"'
HIP_VERSION = $(shell HIP_PLATFORM=amd $(HIPCC) --version 2>/dev/null | sed -n 's/^HIP version: *//p')
HIP_OBJ := $(BUILD)/hip
HIP_OBJS := $(patsubst $(GPU_DIR)/%.hip,$(HIP_OBJ)/%.o,$(GPU_KERNELS)) $(HIP_OBJ)/hooks.o $(HIP_OBJ)/blaslt.o \
  $(patsubst $(SRC)/common/%.c,$(HIP_OBJ)/common_%.o,$(COMMON_SRCS))

hip: $(BUILD)/libkpick-hip.so

$(HIP_OBJ)/%.o: $(GPU_DIR)/%.hip $(GPU_DEPS)
	@mkdir -p $(HIP_OBJ)
	HIP_PLATFORM=amd $(HIPCC) $(HIP_FLAGS) $(HIP_DEFS) -x hip -c $< -o $@

$(HIP_OBJ)/%.o: $(GPU_DIR)/%.cpp $(GPU_DEPS)
	@mkdir -p $(HIP_OBJ)
	HIP_PLATFORM=amd $(HIPCC) $(HIP_FLAGS) $(HIP_DEFS) -x hip -c $< -o $@

$(HIP_OBJ)/common_%.o: $(SRC)/common/%.c $(COMMON_HDRS) $(GPU_KERNELS) $(GPU_HOOKS) $(GPU_BLAS) $(GPU_HDRS)
	@mkdir -p $(HIP_OBJ)
	$(CC) $(GPU_CFLAGS) $(GPU_COMMON_IDENT) -c $< -o $@

$(BUILD)/libkpick-hip.so: GPU_COMPILER = hipcc $(HIP_VERSION) $(HIP_FLAGS)
$(BUILD)/libkpick-hip.so: $(HIP_OBJS)
	HIP_PLATFORM=amd $(HIPCC) $(HIP_FLAGS) -shared -o $@.tmp.so $(HIP_OBJS) -lhipblaslt && mv $@.tmp.so $@

# compile-only, no BLAS, in two passes:
#  1. Debian's hipcc (ROCm 5.2, clang 15) builds every kernel and the hooks, host and
#     device, for a wave64 MFMA target (gfx90a) and a wave32 one without a matrix unit
#     (gfx1030): the host pass and the HIP headers the library builds against.
#  2. clang 19 or newer in HIP mode (Debian 12: apt-get install -y clang-19) compiles the
#     device code to assembly for the cards the HIP path is written for: gfx942
#     (MI300X/MI325X, wave64 MFMA), gfx950 (MI350X, wave64 MFMA; LLVM 20 and later only)
#     and gfx1100 (RX 7900 XTX, RDNA3 wave32, no MFMA: the mma families are absent).
#     Debian's ROCm 5.2 device libraries know none of the three, so this pass links no
#     device library (-nogpulib) and stops at assembly. A target the compiler does not
#     know is named as not checked, never passed over in silence.
HIP_CHECK_CLANG ?= $(firstword $(foreach c,clang++-21 clang++-20 clang++-19,$(shell command -v $(c) 2>/dev/null)))
HIP_CHECK_NEW := gfx942 gfx950 gfx1100
HIP_CHECK_DEFS := -DKPICK_GPU_HIP -DKPICK_BACKEND_GPU

hip-check:
	@command -v $(HIPCC) >/dev/null || { echo "hip-check: hipcc not found (apt-get install -y hipcc)"; exit 2; }
	@test -n "$(HIP_CHECK_CLANG)" || { echo "hip-check: no clang 19 or newer for gfx942/gfx950/gfx1100 (apt-get install -y clang-19)"; exit 2; }
	@mkdir -p $(BUILD)/check/hip
	@set -e; for f in $(GPU_KERNELS) $(GPU_HOOKS); do \
	  echo "hipcc gfx90a+gfx1030: $$f"; \
	  HIP_PLATFORM=amd $(HIPCC) -O3 -std=c++17 -fPIC --offload-arch=gfx90a --offload-arch=gfx1030 \
	    $(HIP_CHECK_DEFS) -DKPICK_GPU_ARCHS='"gfx90a gfx1030"' \
	    -x hip -c $$f -o $(BUILD)/check/hip/$$(basename $$f).o; \
	done
	@set -e; for a in $(HIP_CHECK_NEW); do \
	  if ! echo '__global__ void k() {}' | $(HIP_CHECK_CLANG) -x hip --offload-arch=$$a --offload-device-only -nogpulib \
	      -S -o /dev/null - >/dev/null 2>&1; then \
	    echo "hip-check: NOT CHECKED $$a: $(HIP_CHECK_CLANG) does not know it"; continue; \
	  fi; \
	  for f in $(GPU_KERNELS); do \
	    echo "$(notdir $(HIP_CHECK_CLANG)) $$a (device): $$f"; \
	    $(HIP_CHECK_CLANG) -x hip --offload-arch=$$a --offload-device-only -nogpulib -O3 -std=c++17 \
	      $(HIP_CHECK_DEFS) -DKPICK_GPU_ARCHS="\"$$a\"" -S -o $(BUILD)/check/hip/$$(basename $$f .hip)-$$a.s $$f; \
	  done; \
	done
