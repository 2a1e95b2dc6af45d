import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { rotate, timeRounds, type Timeable } from '../lib/time-rounds.ts';

/** a problem that logs what was timed and returns the id (floor: -1) as each sample */
function logging(): Timeable & { log: number[] } {
  const log: number[] = [];
  return {
    log,
    time: (id, n) => (log.push(id), new Float64Array(n).fill(id)),
    timeFloor: (n) => (log.push(-1), new Float64Array(n).fill(-1)),
  };
}

test('rotate starts each round at the next member', () => {
  assert.equal(rotate([1, 2, 3], 0), [1, 2, 3]);
  assert.equal(rotate([1, 2, 3], 1), [2, 3, 1]);
  assert.equal(rotate([1, 2, 3], 4), [2, 3, 1]);
  assert.equal(rotate([], 3), []);
});

test('each round times every candidate and the floor once, the order rotated a step a round', () => {
  const p = logging();
  timeRounds(p, [7, 9], 1, 3);
  assert.equal(p.log, [7, 9, -1, 9, -1, 7, -1, 7, 9]);
});

test('samples land with their own candidate, in the order the ids were given', () => {
  const p = logging();
  const t = timeRounds(p, [4, 2], 2, 2);
  assert.equal(t.cands, [[4, 4, 4, 4], [2, 2, 2, 2]]);
  assert.equal(t.floor, [-1, -1, -1, -1]);
});

test.run();
