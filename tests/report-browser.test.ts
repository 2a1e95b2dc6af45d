// The report in a real browser: Debian's chromium, headless and offline, opens
// the page written by writeReport, and the test checks what it rendered: the
// DOM after parsing (charts and marks where they belong) and a screenshot
// decoded to pixels (the parity crosses and series colours were painted).
// Chromium is the one thing a test needs that npm install does not bring:
// without it (CHROMIUM names the binary, else chromium or chromium-browser on
// PATH) these tests are skipped with the command that enables them, except
// in CI (CI or KPICK_CI set, as .ci/run does), where a missing browser fails.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { inflateSync } from 'node:zlib';
import { test as uvuTest } from 'uvu';
import * as assert from 'uvu/assert';
import { PARITY_COLOR, writeReport } from '../lib/html-report.ts';
import { fixtureTable } from './helpers/report-fixture.ts';

const WIDTH = 1200;
const HEIGHT = 2000;

const ENABLE = "apt-get install -y chromium (Debian's package), or set CHROMIUM to a chromium binary";

/** The chromium binary: $CHROMIUM when set, else the first chromium or chromium-browser on PATH. */
function findChromium(): { path: string } | { missing: string } {
  const wanted = process.env.CHROMIUM;
  const tried = wanted
    ? [wanted]
    : (process.env.PATH ?? '').split(path.delimiter).filter(Boolean).flatMap((dir) => ['chromium', 'chromium-browser'].map((name) => path.join(dir, name)));
  const found = tried.find((p) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  });
  return found ? { path: found } : { missing: wanted ? `CHROMIUM=${wanted} is not an executable file` : 'no chromium or chromium-browser on PATH' };
}

const isSet = (name: string) => !['', '0', 'false'].includes(process.env[name] ?? '');
const inCi = isSet('CI') || isSet('KPICK_CI');
const browser = findChromium();
const missing = 'missing' in browser ? `chromium not found (${browser.missing}); ${ENABLE}` : null;
if (missing !== null && !inCi) console.log(`report-browser: skipped, ${missing}`);

/** Runs headless chromium offline with a fresh profile; returns stdout. */
function chromium(args: string[]): string {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-chromium-'));
  try {
    const flags = [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--hide-scrollbars',
      `--user-data-dir=${profile}`,
    ];
    if ('missing' in browser) throw new Error(`${missing}; CI runs these tests, it never skips them`);
    const run = spawnSync(browser.path, [...flags, ...args], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20 });
    if (run.error) throw new Error(`chromium did not run: ${run.error.message}`);
    if (run.status !== 0) throw new Error(`chromium exited ${run.status}: ${run.stderr.split('\n').slice(-3).join(' ')}`);
    return run.stdout;
  } finally {
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

interface Image {
  width: number;
  height: number;
  /** RGBA, 4 bytes a pixel */
  rgba: Uint8Array;
}

/** A minimal PNG decoder: 8-bit RGB or RGBA, not interlaced (what chromium writes). */
function decodePng(buf: Buffer): Image {
  assert.equal([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  for (let at = 8; at < buf.length; ) {
    const len = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    const data = buf.subarray(at + 8, at + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colorType, , , interlace] = [data[8], data[9], data[10], data[11], data[12]];
      assert.is(depth, 8, 'bit depth');
      assert.is(interlace, 0, 'interlace');
      channels = colorType === 6 ? 4 : colorType === 2 ? 3 : 0;
      assert.ok(channels > 0, `colour type ${colorType}`);
    } else if (type === 'IDAT') idat.push(data);
    at += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  assert.is(raw.length, height * (stride + 1), 'image data size');
  const out = new Uint8Array(width * height * 4);
  let prev = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = Uint8Array.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? line[i - channels]! : 0;
      const b = prev[i]!;
      const c = i >= channels ? prev[i - channels]! : 0;
      let add = 0;
      if (filter === 1) add = a;
      else if (filter === 2) add = b;
      else if (filter === 3) add = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const [pa, pb, pc] = [Math.abs(p - a), Math.abs(p - b), Math.abs(p - c)];
        add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else assert.is(filter, 0, 'PNG filter type');
      line[i] = (line[i]! + add) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      for (let ch = 0; ch < 4; ch++) out[(y * width + x) * 4 + ch] = ch < channels ? line[x * channels + ch]! : 255;
    }
    prev = line;
  }
  return { width, height, rgba: out };
}

function pixelsOf(img: Image, hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < img.rgba.length; i += 4) if (img.rgba[i] === r && img.rgba[i + 1] === g && img.rgba[i + 2] === b) n++;
  return n;
}

function screenshot(html: string, png: string): Image {
  chromium([`--screenshot=${png}`, `--window-size=${WIDTH},${HEIGHT}`, pathToFileURL(html).href]);
  const bytes = fs.readFileSync(png);
  assert.ok(bytes.length > 10_000, `screenshot is only ${bytes.length} bytes`);
  return decodePng(bytes);
}

// without a browser, outside CI, every test is reported skipped (uvu counts them), not passed
const test = missing === null || inCi ? uvuTest : Object.assign(uvuTest.skip, { before: () => {}, after: () => {}, run: uvuTest.run });

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kpick-browser-'));
const failingPage = path.join(dir, 'failing.html');
const cleanPage = path.join(dir, 'clean.html');

test.before(() => {
  assert.ok('path' in writeReport(fixtureTable(), failingPage));
  assert.ok('path' in writeReport(fixtureTable({ clean: true }), cleanPage));
});

test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('chromium parses the page into 2 charts with their marks inside them', () => {
  const dom = chromium(['--dump-dom', pathToFileURL(failingPage).href]);
  const charts = dom.split('<svg class="chart"').slice(1).map((s) => s.slice(0, s.indexOf('</svg>')));
  assert.is(charts.length, 2);
  const marks = (svg: string, re: RegExp) => (svg.match(new RegExp(re.source, 'g')) ?? []).length;
  // gated first (shapes sort by op): 2 + 2 + 1 marks, 2 picks, 1 cross; linear: 16, 4, 1
  assert.equal(
    charts.map((c) => [marks(c, /<circle class="pt"/), marks(c, /<circle class="pick"/), marks(c, /<path class="parity-fail"/), marks(c, /<path class="floor"/), marks(c, /<path class="ceiling"/)]),
    [
      [5, 2, 1, 1, 1],
      [16, 4, 1, 1, 1],
    ],
  );
  assert.ok(dom.includes('Parity failures: 2'));
});

test('the screenshot shows the painted charts: series colours everywhere, red crosses only where parity failed', () => {
  const failing = screenshot(failingPage, path.join(dir, 'failing.png'));
  const clean = screenshot(cleanPage, path.join(dir, 'clean.png'));
  for (const img of [failing, clean]) {
    assert.is(img.width, WIDTH);
    assert.is(img.height, HEIGHT);
    assert.ok(pixelsOf(img, '#1f77b4') > 50, 'first series colour painted'); // default's line and marks
    assert.ok(pixelsOf(img, '#ff7f0e') > 50, 'second series colour painted');
    const white = pixelsOf(img, '#ffffff');
    assert.ok(white < img.width * img.height * 0.98, 'page is not blank');
  }
  assert.ok(pixelsOf(failing, PARITY_COLOR) > 20, `parity crosses painted (${pixelsOf(failing, PARITY_COLOR)} px)`);
  assert.is(pixelsOf(clean, PARITY_COLOR), 0);
});

test.run();
