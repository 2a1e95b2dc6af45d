/* route.h: the compact table (decode_gemm.route) and the route through it.
 *
 * lib/route.ts writes the compact form beside the JSON table and reads it with
 * the same rules; route.c is the C twin an engine uses without Node. Both give
 * the same verdict line and the same candidate for every lookup (the tests
 * compare them). The format, version KPICK_ROUTE_VERSION, is printable ASCII,
 * one record per line, each ending in '\n':
 *
 *   kpick-route 2
 *   json 3b1f...(64 hex digits)      sha256 of the JSON table's bytes it was made from
 *   format 1                         the JSON table's format version
 *   backend cpu                      then arch, device, runtime, blas,
 *   ...                              compiler, space: "key value", in this order
 *   entries 2
 *   linear bf16 4096 4096 8 rowblk.r4 ok pass 0
 *   gated fp16 14336 4096 1 gated.plain ok pass 0
 *   moe bf16 128 8 768 2048 1 moe.grouped.r4 ok pass 0
 *   end 9c04...(64 hex digits)       sha256 of every byte above this line
 *
 * One table, one truth: the route is the compiled form of one JSON table and
 * is used only beside it. The loader refuses a route whose JSON (same name,
 * .json) is missing or hashes differently, or whose own text does not match
 * its end line (a hand edit): `npx tsx scripts/promote.ts --route-only
 * --table X.json` compiles it again from the JSON. The JSON's refusals apply
 * through the header (identity, compiler, space, format) and the knobs.
 *
 * An entry line is: op dtype n k bucket choice status parity stack (dtype
 * bf16, fp16 or fp8), where
 * status and parity are those of candidates[choice] in the JSON table
 * ("unmeasured none" when it has none) and stack its stack_bound (0/1). A moe
 * entry's key has its experts and topk too, after the dtype: moe dtype
 * experts topk n k bucket choice status parity stack (11 fields). A table
 * without moe entries reads as before; a reader older than the moe op refuses
 * a moe line as invalid ("op must be linear or gated").
 */
#ifndef KPICK_ROUTE_H
#define KPICK_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "../../include/kpick.h"

/* Larger than any real compact table (a line is ~45 bytes: ~90k entries). */
#define KP_ROUTE_MAX_BYTES (4 << 20)
#define KP_TABLE_MAX_BYTES (32 << 20) /* the JSON beside it: MAX_TABLE_BYTES of lib/guard.ts */
#define KP_ROUTE_MAX_ENTRIES (1 << 20)
#define KP_ROUTE_MAX_VALUE 255 /* header value bytes */
#define KP_ROUTE_MAX_NAME 47   /* a candidate name, as kpick_candidate.name holds */
#define KP_ROUTE_MAX_DIM (1 << 24)
#define KP_ROUTE_VERDICT_MAX 16384 /* two paths and two header values fit */

/* The smallest rows bucket (1, 2, 4, ... KPICK_MAX_ROWS) that holds m; -1
 * outside 1..KPICK_MAX_ROWS. */
static inline int32_t kp_route_bucket(int32_t m) {
  if (m < 1 || m > KPICK_MAX_ROWS) return -1;
  int32_t b = 1;
  while (b < m) b *= 2;
  return b;
}

#endif
