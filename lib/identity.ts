// The identity of a build on a machine, read from the library actually loaded
// (kpick_get_info), never from headers: it keys the store and heads a table.
import { createHash } from 'node:crypto';
import * as v from 'valibot';
import type { Info } from './ffi.ts';
import { Identity, issuesLine } from './schema.ts';

/** The Identity of lib/schema.ts from kpick_info; throws naming any empty field. */
export function identityFromInfo(info: Info): Identity {
  const fields = {
    backend: info.backend,
    arch: info.arch,
    device: info.device,
    runtime: info.runtime,
    blas: info.blas,
    compiler: info.compiler,
    space: info.space,
  };
  const parsed = v.safeParse(Identity, fields);
  if (!parsed.success) throw new Error(`the library reports an invalid identity: ${issuesLine(parsed.issues)}`);
  return parsed.output;
}

/** JSON with keys sorted at every level: one text per value, whatever the key order. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${stableJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function identityKey(identity: Identity): string {
  return stableJson(identity);
}

/** A short name of one identity, for `promote --identity`: 12 hex digits of its key's sha256. */
export function identityTag(identity: Identity): string {
  return createHash('sha256').update(identityKey(identity)).digest('hex').slice(0, 12);
}

/** The fields two identities differ in, "compiler ("a" vs "b")", for one line. */
export function identityDifference(a: Identity, b: Identity): string {
  const fields = (Object.keys(a) as (keyof Identity)[]).filter((f) => a[f] !== b[f]);
  return fields.map((f) => `${f} (${JSON.stringify(a[f])} vs ${JSON.stringify(b[f])})`).join(', ');
}

/** One line for humans: "cpu x86_64 Intel(R) Xeon(R) (space aa72b7a7)". */
export function describeIdentity(identity: Identity): string {
  return `${identity.backend} ${identity.arch} ${identity.device} (runtime ${identity.runtime}, blas ${identity.blas}, space ${identity.space})`;
}
