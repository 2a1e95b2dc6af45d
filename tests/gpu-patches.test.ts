// bench/gpu/patches/: code held off main until a device re-sweep can land it. Each
// patch must still apply to this tree, or the next session's one-call A/B
// (bench/gpu/ab-patch.sh) or re-sweep starts with a patch that rotted while main moved.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const root = join(import.meta.dirname, '..');
const dir = join(root, 'bench', 'gpu', 'patches');
// git keeps no empty folder: with every patch landed there is none
const patches = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.patch')) : [];

for (const name of patches) {
  test(`${name} applies to this tree (git apply --check)`, () => {
    try {
      execFileSync('git', ['apply', '--check', join(dir, name)], { cwd: root, stdio: 'pipe' });
    } catch (e) {
      const err = e as { stderr?: Buffer };
      assert.unreachable(`${name} does not apply: ${err.stderr?.toString().trim() ?? String(e)}`);
    }
  });

  test(`${name} says what it is, why it is off main and how it lands, above its diff`, () => {
    const text = readFileSync(join(dir, name), 'utf8');
    const header = text.slice(0, text.indexOf('\ndiff --git '));
    // a header whose last line runs into the first diff hides that file's diff from tools that split at line starts
    assert.is(text.indexOf('diff --git '), header.length + 1, `${name}: the first diff starts a line of its own`);
    assert.ok(header.length > 200, `${name}: a header of its own before the first diff`);
    assert.match(header, /Not on main/, `${name}: why it is held off main`);
    assert.match(header, /space token with it [0-9a-f]{16}/, `${name}: the space token it makes`);
  });
}

test.run();
