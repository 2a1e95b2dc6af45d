// JSON lines as the scripts read them from a file another run wrote: blank
// lines skipped, a line that is not JSON an error naming its source and line.

/** One parsed line and where it was ("run.jsonl:3"), for errors about its content. */
export interface JsonLine {
  value: unknown;
  at: string;
}

/** Every non-blank line of text, parsed; throws "name:N: not JSON" at the first that is not. */
export function jsonLines(name: string, text: string): JsonLine[] {
  const out: JsonLine[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const at = `${name}:${i + 1}`;
    try {
      out.push({ value: JSON.parse(line), at });
    } catch {
      throw new Error(`${at}: not JSON`);
    }
  });
  return out;
}

/** A parsed line's "kind" field, where it is an object that has one. */
export const kindOf = (value: unknown): unknown => (typeof value === 'object' && value !== null ? (value as { kind?: unknown }).kind : undefined);
