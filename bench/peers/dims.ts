// The decode-model dimensions serve-bench builds for each preset, as JSON
// lines, so the PyTorch peer (decode_step.py) reads the same numbers rather
// than a second copy of lib/models.ts.
//   node --import tsx bench/peers/dims.ts --models Llama-3.1-8B,Qwen3-0.6B --max-batch 64 --context 256 --max-new 32
import { findModel } from '../../lib/models.ts';
import { dimsOf } from '../../lib/serve.ts';

function option(argv: readonly string[], name: string, fallback: string): string {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1]! : fallback;
}

function main(argv: readonly string[]): number {
  const int = (name: string, fallback: number) => {
    const v = Number(option(argv, name, String(fallback)));
    if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a whole number`);
    return v;
  };
  const models = option(argv, '--models', 'Llama-3.1-8B,Qwen3-8B,Qwen3-0.6B').split(',');
  const shape = { maxBatch: int('--max-batch', 64), context: int('--context', 256), maxNew: int('--max-new', 32), dtype: 'bf16' as const };
  for (const name of models) {
    const model = findModel(name.trim());
    process.stdout.write(JSON.stringify({ model: model.name, ...dimsOf(model, { ...shape, layers: model.layers }) }) + '\n');
  }
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`dims: ${(err as Error).message}\n`);
  process.exitCode = 2;
}
