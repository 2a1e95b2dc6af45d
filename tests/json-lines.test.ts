import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { jsonLines, kindOf } from '../lib/json-lines.ts';

test('json lines: every non-blank line parsed, each with where it was', () => {
  assert.equal(jsonLines('run.jsonl', '{"kind":"a"}\n\n  \n[1,2]\n'), [
    { value: { kind: 'a' }, at: 'run.jsonl:1' },
    { value: [1, 2], at: 'run.jsonl:4' },
  ]);
  assert.equal(jsonLines('empty', ''), []);
});

test('json lines: a line that is not JSON throws, naming the source and the line', () => {
  assert.throws(() => jsonLines('run.jsonl', '{"kind":"a"}\n{"kind":'), /^run\.jsonl:2: not JSON$/);
});

test('kind: an object\'s kind field, nothing for anything else', () => {
  assert.is(kindOf({ kind: 'shape' }), 'shape');
  assert.is(kindOf({}), undefined);
  assert.is(kindOf(null), undefined);
  assert.is(kindOf('shape'), undefined);
  assert.is(kindOf([1]), undefined);
});

test.run();
