// The recipes under deploy/ (and the GPU pipeline): the options they pass are
// options the scripts accept, the shell parses, the Kubernetes manifests hold
// together, and the one-host launcher runs one shard per GPU (CPU backend,
// a fake GPU list) and names a shard that failed.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readStore, recordKey } from '../lib/store.ts';
import { OPTIONS as agreeOptions } from '../scripts/agree.ts';
import { OPTIONS as checkOptions } from '../scripts/check.ts';
import { OPTIONS as fleetOptions } from '../scripts/fleet.ts';
import { OPTIONS as promoteOptions } from '../scripts/promote.ts';
import { OPTIONS as sweepOptions } from '../scripts/sweep.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const scratch = mkdtempSync(join(tmpdir(), 'kpick-deploy-'));
test.after(() => rmSync(scratch, { recursive: true, force: true }));

const RECIPES = ['deploy/one-host.sh', 'deploy/slurm/sweep.sbatch', 'deploy/slurm/promote.sbatch', 'deploy/slurm/submit.sh', 'deploy/k8s/sweep.yaml', 'deploy/k8s/promote.yaml', 'deploy/k8s/run.sh', 'bench/gpu/pipeline.sh'];
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const flagsOf = (options: Record<string, { flag: string }>) => new Set(['--help', '--version', ...Object.values(options).map((o) => o.flag.split(' ')[0]!)]);
/** what each way of starting a script accepts */
const ACCEPTS: Record<string, Set<string>> = {
  'scripts/sweep.ts': flagsOf(sweepOptions),
  'scripts/promote.ts': flagsOf(promoteOptions),
  'scripts/check.ts': flagsOf(checkOptions),
  'scripts/fleet.ts': flagsOf(fleetOptions),
  'scripts/agree.ts': flagsOf(agreeOptions),
  'deploy/slurm/sweep.sbatch': flagsOf(sweepOptions),
  'deploy/slurm/promote.sbatch': flagsOf(promoteOptions),
  'deploy/one-host.sh': flagsOf(sweepOptions),
};
const BASH = spawnSync('bash', ['-c', 'command -v bash'], { encoding: 'utf8' }).stdout.trim();
const STARTS = /(scripts\/[\w-]+\.ts|deploy\/slurm\/\w+\.sbatch|deploy\/one-host\.sh)/g;

test('every option a recipe passes to a kpick script is one that script accepts', () => {
  let checked = 0;
  for (const file of RECIPES) {
    const lines = read(file).replace(/\\\n/g, ' ').split('\n');
    for (const line of lines) {
      const starts = [...line.matchAll(STARTS)];
      starts.forEach((m, i) => {
        const script = m[1]!;
        if (!(script in ACCEPTS)) {
          // a script the recipes start but this test does not know: it must at least exist
          accessSync(join(ROOT, script), constants.R_OK);
          return;
        }
        const tail = line.slice(m.index! + script.length, starts[i + 1]?.index ?? line.length);
        for (const [, flag] of tail.matchAll(/(?:^|[\s"'])(--[a-z][a-z-]*)/g)) {
          assert.ok(ACCEPTS[script]!.has(flag!), `${file}: ${script} does not accept ${flag}\n  ${line.trim()}`);
          checked++;
        }
      });
    }
  }
  assert.ok(checked >= 20, `only ${checked} options found: is the scan still reading the recipes?`);
});

test('the shell recipes parse, are executable, and the sbatch headers name real sbatch options', () => {
  const SBATCH = new Set(['job-name', 'ntasks', 'gpus-per-task', 'cpus-per-task', 'time', 'output', 'array', 'dependency', 'partition', 'account', 'gres', 'mem']);
  for (const file of RECIPES.filter((f) => /\.(sh|sbatch)$/.test(f))) {
    const run = spawnSync('bash', ['-n', join(ROOT, file)], { encoding: 'utf8' });
    assert.is(run.status, 0, `${file}: ${run.stderr}`);
    if (file.startsWith('deploy/')) accessSync(join(ROOT, file), constants.X_OK);
    const options = [...read(file).matchAll(/^#SBATCH --([a-z-]+)/gm)].map((m) => m[1]!);
    if (file.endsWith('.sbatch')) assert.ok(options.length > 0, `${file}: no #SBATCH header found: is the scan still reading it?`);
    for (const option of options) assert.ok(SBATCH.has(option), `${file}: #SBATCH --${option}`);
  }
  // the array task's shard is its index within the array, of the array's size
  assert.match(read('deploy/slurm/sweep.sbatch'), /--shard "\$i\/\$n"/);
  assert.match(read('deploy/slurm/sweep.sbatch'), /i=\$\(\( SLURM_ARRAY_TASK_ID - \$\{SLURM_ARRAY_TASK_MIN:-0\} \)\)/);
  assert.match(read('deploy/slurm/submit.sh'), /--dependency=afterok:"\$array" deploy\/slurm\/promote\.sbatch/);
});

test('the Kubernetes manifests hold together: Indexed, completions = parallelism = SHARDS, one shared volume', () => {
  const sweep = read('deploy/k8s/sweep.yaml');
  const promote = read('deploy/k8s/promote.yaml');
  for (const [name, text] of [['sweep.yaml', sweep], ['promote.yaml', promote]] as const) {
    assert.not.match(text, /\t/, `${name} has a tab`);
    for (const line of text.split('\n')) assert.is((/^ */.exec(line)![0].length) % 2, 0, `${name}: odd indent: ${line}`);
    const claims = [...text.matchAll(/claimName: (\S+)/g)].map((m) => m[1]);
    assert.equal(claims, ['kpick-store'], name);
    const mounts = [...text.matchAll(/volumeMounts:\n\s+- name: (\S+)/g)].map((m) => m[1]);
    const volumes = [...text.matchAll(/volumes:\n\s+- name: (\S+)/g)].map((m) => m[1]);
    assert.is(volumes.length, 1, `${name}: one volume`);
    assert.equal(mounts, volumes, `${name}: mounts name the volumes`);
  }
  assert.match(sweep, /kind: PersistentVolumeClaim\nmetadata:\n  name: kpick-store\n/);
  assert.match(sweep, /accessModes: \["ReadWriteMany"\]/);
  assert.match(sweep, /completionMode: Indexed/);
  const completions = /completions: (\d+)/.exec(sweep)?.[1];
  const parallelism = /parallelism: (\d+)/.exec(sweep)?.[1];
  const shards = /- name: SHARDS\n\s+value: "(\d+)"/.exec(sweep)?.[1];
  assert.ok(completions !== undefined);
  assert.equal([parallelism, shards], [completions, completions]);
  assert.match(sweep, /--shard "\$JOB_COMPLETION_INDEX\/\$SHARDS"/);
  // both Jobs use the same store folder on the volume
  assert.match(sweep, /--store \/store\/sweep /);
  assert.match(promote, /--store \/store\/sweep /);
});

function launch(args: string[], env: Record<string, string>) {
  const base: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', KPICK_LOG_DIR: join(scratch, 'logs') };
  for (const name of ['KPICK_LIB', 'KPICK_GPUS', 'KPICK_SWEEP', 'KPICK_GPU_VAR', 'CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES']) delete base[name];
  const run = spawnSync(BASH, [join(ROOT, 'deploy/one-host.sh'), ...args], { cwd: scratch, env: { ...base, ...env }, encoding: 'utf8' });
  return { code: run.status, stderr: run.stderr };
}

test('one-host.sh runs one real sweep shard per listed GPU (CPU backend) into one store', () => {
  const store = join(scratch, 'store');
  const run = launch(['--model', 'tiny', '--rows', '1,2', '--copies', '2', '--samples', '2', '--rounds', '1', '--store', store], { KPICK_GPUS: 'a,b', KPICK_BACKEND: 'cpu' });
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stderr, /one-host: shard 0\/2 on CUDA_VISIBLE_DEVICES=a /);
  assert.match(run.stderr, /one-host: all 2 shards done\n$/);
  const files = readdirSync(store).sort();
  assert.equal(files.map((f) => f.replace(/^sweep-\d{8}T\d{6}Z-\d+-/, '')).sort(), ['shard0of2.jsonl', 'shard1of2.jsonl']);
  const keys = readStore(store).records.map(recordKey);
  // tiny: 4 linear shapes x (6 candidates + floor) + 1 gated x (4 + floor), at 2 rows buckets
  assert.is(keys.length, 2 * (4 * 7 + 5));
  assert.is(new Set(keys).size, keys.length);
});

test('one-host.sh gives each process its own GPU and shard, keeps the arguments, and names the shard that failed', () => {
  const fake = join(scratch, 'fake-sweep.sh');
  const seen = join(scratch, 'seen');
  mkdirSync(seen, { recursive: true });
  // records what it was given; the process on GPU "b" fails with exit 3
  writeFileSync(fake, `printf '%s|' "$CUDA_VISIBLE_DEVICES" "$HIP_VISIBLE_DEVICES" "$@" > "${seen}/$CUDA_VISIBLE_DEVICES$HIP_VISIBLE_DEVICES"\n[ "$CUDA_VISIBLE_DEVICES" != b ]\n[ $? -eq 0 ] || exit 3\n`);
  const run = launch(['--model', 'tiny', '--store', 'two words'], { KPICK_GPUS: 'a,b,c', KPICK_SWEEP: `bash ${fake}` });
  assert.is(run.code, 1, run.stderr);
  assert.match(run.stderr, /one-host: shard 1\/3 \(CUDA_VISIBLE_DEVICES=b\) exited 3, see .*shard-1of3\.log\n$/);
  assert.not.match(run.stderr, /shard [02]\/3 \(CUDA_VISIBLE_DEVICES=[ac]\) exited/);
  assert.is(readFileSync(join(seen, 'a'), 'utf8'), 'a||--model|tiny|--store|two words|--shard|0/3|');
  assert.is(readFileSync(join(seen, 'c'), 'utf8'), 'c||--model|tiny|--store|two words|--shard|2/3|');

  // AMD: HIP_VISIBLE_DEVICES instead; the list from the variable already set
  const hip = launch(['--x'], { HIP_VISIBLE_DEVICES: 'c', KPICK_SWEEP: `bash ${fake}` });
  assert.is(hip.code, 0, hip.stderr);
  assert.is(readFileSync(join(seen, 'c'), 'utf8'), '|c|--x|--shard|0/1|');
});

test('one-host.sh with no GPU to find exits 2 and says how to name them', () => {
  const bin = join(scratch, 'bin');
  mkdirSync(bin, { recursive: true });
  for (const tool of ['dirname', 'mkdir', 'env', 'paste', 'sed', 'sort']) {
    const where = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(where, join(bin, tool));
  }
  const run = launch([], { PATH: bin });
  assert.is(run.code, 2, run.stderr);
  assert.is(run.stderr, 'one-host: no GPU found (set KPICK_GPUS=0,1,... or CUDA_VISIBLE_DEVICES)\n');
});

test.run();
