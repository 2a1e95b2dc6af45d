// Every script speaks the same CLI: --help with examples, --version, --json,
// --quiet, one red line and exit 2 on an unknown option, no colour under NO_COLOR.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPTS = readdirSync(join(ROOT, 'scripts')).filter((f) => f.endsWith('.ts'));
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function run(script: string, args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join('scripts', script), ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1' },
    encoding: 'utf8',
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

test('there are scripts to check', () => {
  for (const s of ['sweep.ts', 'parity.ts', 'promote.ts', 'refuse-check.ts', 'check.ts', 'info.ts', 'report.ts']) assert.ok(SCRIPTS.includes(s), s);
});

for (const script of SCRIPTS) {
  test(`${script}: --help lists examples, --json and --quiet, and exits 0`, () => {
    const r = run(script, ['--help']);
    assert.is(r.code, 0, r.out);
    assert.match(r.out, 'Examples:');
    assert.match(r.out, '--json');
    assert.match(r.out, '--quiet');
    assert.match(r.out, '--version');
  });

  test(`${script}: --version prints the package version`, () => {
    const r = run(script, ['--version']);
    assert.is(r.code, 0, r.out);
    assert.match(r.out, VERSION);
  });

  test(`${script}: an unknown option is one line and exit 2`, () => {
    const r = run(script, ['--bogus']);
    assert.is(r.code, 2, r.out);
    assert.is(r.out.trim().split('\n').length, 1, r.out);
    assert.match(r.out, 'bogus');
    assert.not.match(r.out, '\u001b[');
  });
}

test.run();
