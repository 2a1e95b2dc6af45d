# tracer.sh: sourced by the device scripts. build_tracer LOGDIR builds kernel-trace.c
# against the toolkit's CUPTI where one is found, else takes the prebuilt one in
# $KPTRACE_PREBUILT; it sets $tracer (the injection library, empty: none) and
# $trace_libs (where its libcupti is). Run a program under it with
#   LD_LIBRARY_PATH="$trace_libs:$LD_LIBRARY_PATH" CUDA_INJECTION64_PATH=$tracer KPTRACE_OUT=file ...
build_tracer() {
  local logdir=$1 cuda_home cupti_h cupti_so
  cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  cupti_h=$(ls "$cuda_home"/include/cupti.h "$cuda_home"/extras/CUPTI/include/cupti.h 2>/dev/null | head -1)
  cupti_so=$(ls "$cuda_home"/lib64/libcupti.so "$cuda_home"/extras/CUPTI/lib64/libcupti.so "$cuda_home"/targets/*/lib/libcupti.so 2>/dev/null | head -1)
  echo "nsys: $(command -v nsys || echo none); cupti.h: ${cupti_h:-none}; libcupti: ${cupti_so:-none}" > "$logdir/build-trace.log"
  tracer= trace_libs=
  if [ -n "$cupti_h" ] && [ -n "$cupti_so" ] && gcc -O2 -shared -fPIC -I"$(dirname "$cupti_h")" -I"$cuda_home/include" \
       -o build/kernel-trace.so bench/gpu/kernel-trace.c -L"$(dirname "$cupti_so")" -lcupti >> "$logdir/build-trace.log" 2>&1; then
    tracer=$PWD/build/kernel-trace.so trace_libs=$(dirname "$cupti_so")
  elif [ -f "${KPTRACE_PREBUILT:-}/kernel-trace.so" ]; then
    tracer=$(cd "$KPTRACE_PREBUILT" && pwd)/kernel-trace.so trace_libs=$(cd "$KPTRACE_PREBUILT" && pwd)
  fi
}
