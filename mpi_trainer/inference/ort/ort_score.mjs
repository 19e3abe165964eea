#!/usr/bin/env node
// Scores rows with an exported model in ONNX Runtime (onnxruntime-node, CPU),
// or times session.run at one batch size. Used by the ONNX tests and the
// inference benchmark; it is not part of hpcml-infer.
//
//   node ort_score.mjs score --model m.onnx --input rows.f32 --output out.f32
//        [--strings values.json] [--threads 1] [--batch 4096] [--features F]
//        [--ort-dir DIR]
//   node ort_score.mjs bench --model m.onnx --batch 256 [--threads 1]
//        [--iters 200] [--warmup 20] [--input rows.f32] [--profile] [--json]
//
// Files are raw little-endian float32, row-major: input rows x F, output
// rows x the model's outputs. F is read from the model's input shape unless
// --features gives it. A model with string inputs (an encoded hpcml model:
// one [batch, 1] string input per category feature, docs/inference.md) gets
// them from --strings, a JSON object {"<input name>": [one string per row]};
// its float input, if it has one, from --input. ONNX Runtime is loaded from
// DIR/node_modules (default: $HPCML_ORT_DIR, else build/ort in the
// repository), where scripts/install-deps.sh installs it.
//
// bench reports wall time per session.run (JS and N-API included) and, with
// --profile, ORT's own per-run time from its profiler ("model_run" events),
// which excludes them. Warm-up runs are not counted.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function fail(message, code = 1) {
  process.stderr.write(`ort_score: ${message}\n`);
  process.exit(code);
}

function loadOrt(dir) {
  const pkg = path.join(dir, 'node_modules', 'onnxruntime-node', 'package.json');
  if (!fs.existsSync(pkg)) {
    fail(`onnxruntime-node is not installed in ${dir}: run scripts/install-deps.sh as root`, 2);
  }
  return createRequire(path.join(dir, 'package.json'))('onnxruntime-node');
}

function positiveInt(name, text) {
  const v = Number(text);
  if (!Number.isInteger(v) || v < 1) fail(`--${name} ${text}: expected a positive integer`);
  return v;
}

async function openSession(ort, opts, extra = {}, oneInput = true) {
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    ...extra,
  });
  if ((oneInput && session.inputNames.length !== 1) || session.outputNames.length !== 1) {
    fail(`${opts.model}: expected ${oneInput ? 'one input' : 'inputs'} and one output`);
  }
  return session;
}

// F from --features or the shape [batch, F] of the model's input `index`.
function featureCount(session, opts, index = 0) {
  if (opts.features) return positiveInt('features', opts.features);
  const meta = session.inputMetadata?.[index];
  const f = meta?.shape?.[1];
  if (typeof f !== 'number' || f < 1) fail(`${opts.model}: input width unknown; pass --features`);
  return f;
}

function readRows(file, f) {
  const buf = fs.readFileSync(file);
  if (buf.length % (4 * f) !== 0) fail(`${file}: ${buf.length} bytes is not rows of ${f} float32`);
  // Copy: the Buffer's offset in its pool need not be 4-byte aligned.
  return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
}

async function runBatch(ort, session, x, rows, f) {
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', x, [rows, f]) };
  const out = await session.run(feeds);
  return out[session.outputNames[0]];
}

// The model's inputs: at most one float input (rows from --input) and any
// string inputs (from --strings). Returns {float: {name, f, x} | null,
// strings: [{name, values}], rows}.
function readInputs(session, opts) {
  const meta = session.inputMetadata ?? [];
  let float = null;
  const strings = [];
  const table = opts.strings ? JSON.parse(fs.readFileSync(opts.strings, 'utf8')) : {};
  session.inputNames.forEach((name, i) => {
    if (meta[i]?.type === 'string') {
      const values = table[name];
      if (!Array.isArray(values)) {
        fail(`${opts.strings ?? '--strings'}: no values for input ${name}`);
      }
      strings.push({ name, values });
    } else {
      if (float) fail(`${opts.model}: more than one float input`);
      if (!opts.input) fail(`${opts.model}: input ${name} needs --input`);
      const f = featureCount(session, opts, i);
      float = { name, f, x: readRows(opts.input, f) };
    }
  });
  const counts = strings.map((s) => s.values.length);
  if (float) counts.unshift(float.x.length / float.f);
  if (counts.length === 0 || counts.some((c) => c !== counts[0])) {
    fail(`${opts.model}: the inputs have different row counts (${counts.join(', ')})`);
  }
  return { float, strings, rows: counts[0] };
}

async function score(ort, opts) {
  if (!opts.output) fail('score needs --output');
  const session = await openSession(ort, opts, {}, false);
  const { float, strings, rows } = readInputs(session, opts);
  const fd = fs.openSync(opts.output, 'w');
  for (let r = 0; r < rows; r += opts.batch) {
    const n = Math.min(opts.batch, rows - r);
    const feeds = {};
    if (float) {
      const x = float.x.subarray(r * float.f, (r + n) * float.f);
      feeds[float.name] = new ort.Tensor('float32', x, [n, float.f]);
    }
    for (const s of strings) {
      feeds[s.name] = new ort.Tensor('string', s.values.slice(r, r + n), [n, 1]);
    }
    const y = (await session.run(feeds))[session.outputNames[0]];
    fs.writeSync(fd, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
  }
  fs.closeSync(fd);
  await session.release();
}

// Deterministic rows in [-2, 2) when bench has no --input.
function syntheticRows(rows, f) {
  const x = new Float32Array(rows * f);
  let s = 12345;
  for (let i = 0; i < x.length; ++i) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    x[i] = (s / 2 ** 32) * 4 - 2;
  }
  return x;
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { mean_ms: mean, p50_ms: at(0.5), p90_ms: at(0.9), p99_ms: at(0.99), min_ms: s[0] };
}

// Per-run durations (ms) of ORT's "model_run" events, in run order.
function profiledRuns(file) {
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  return events.filter((e) => e.cat === 'Session' && e.name === 'model_run').map((e) => e.dur / 1e3);
}

async function bench(ort, opts) {
  let profileDir = null;
  const extra = {};
  if (opts.profile) {
    profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
    extra.enableProfiling = true;
    extra.profileFilePrefix = path.join(profileDir, 'ort');
  }
  const session = await openSession(ort, opts, extra);
  const f = featureCount(session, opts);
  const src = opts.input ? readRows(opts.input, f) : syntheticRows(opts.batch, f);
  if (src.length < opts.batch * f) fail(`${opts.input}: fewer than ${opts.batch} rows`);
  const x = src.subarray(0, opts.batch * f);
  for (let i = 0; i < opts.warmup; ++i) await runBatch(ort, session, x, opts.batch, f);
  const wall = [];
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < opts.iters; ++i) {
    const t = process.hrtime.bigint();
    await runBatch(ort, session, x, opts.batch, f);
    wall.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  const totalS = Number(process.hrtime.bigint() - t0) / 1e9;
  const result = {
    model: opts.model,
    batch: opts.batch,
    threads: opts.threads,
    iters: opts.iters,
    rows_per_s: (opts.batch * opts.iters) / totalS,
    wall: summary(wall),
  };
  if (opts.profile) {
    session.endProfiling();
    await session.release();
    const files = fs.readdirSync(profileDir).filter((n) => n.endsWith('.json'));
    if (files.length !== 1) fail(`ORT wrote ${files.length} profile files in ${profileDir}`);
    const runs = profiledRuns(path.join(profileDir, files[0])).slice(opts.warmup);
    fs.rmSync(profileDir, { recursive: true });
    if (runs.length !== opts.iters) fail(`ORT profiled ${runs.length} runs, expected ${opts.iters}`);
    result.ort = summary(runs);
  } else {
    await session.release();
  }
  printBench(result, opts.json);
}

function printBench(r, json) {
  if (json) {
    process.stdout.write(`${JSON.stringify(r)}\n`);
    return;
  }
  const line = (s) =>
    `mean ${s.mean_ms.toFixed(4)} ms, p50 ${s.p50_ms.toFixed(4)}, ` +
    `p90 ${s.p90_ms.toFixed(4)}, p99 ${s.p99_ms.toFixed(4)}, min ${s.min_ms.toFixed(4)}`;
  process.stdout.write(
    `${r.model}: batch ${r.batch}, ${r.threads} thread(s), ${r.iters} runs: ` +
      `${r.rows_per_s.toFixed(0)} rows/s\n`,
  );
  process.stdout.write(`  wall per session.run (JS + N-API included): ${line(r.wall)}\n`);
  if (r.ort) process.stdout.write(`  inside ORT (profiler, model_run): ${line(r.ort)}\n`);
}

function parse(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      model: { type: 'string' },
      input: { type: 'string' },
      output: { type: 'string' },
      features: { type: 'string' },
      strings: { type: 'string' },
      threads: { type: 'string', default: '1' },
      batch: { type: 'string' },
      iters: { type: 'string', default: '200' },
      warmup: { type: 'string', default: '20' },
      profile: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      'ort-dir': { type: 'string' },
    },
  });
  const mode = positionals[0];
  if (positionals.length !== 1 || !['score', 'bench'].includes(mode)) {
    fail('usage: ort_score.mjs score|bench --model FILE ... (see the top of this file)');
  }
  if (!values.model) fail('--model is required');
  const defaultDir = process.env.HPCML_ORT_DIR || path.resolve(here, '../../../build/ort');
  return {
    mode,
    model: values.model,
    input: values.input,
    output: values.output,
    features: values.features,
    strings: values.strings,
    threads: positiveInt('threads', values.threads),
    batch: positiveInt('batch', values.batch ?? (mode === 'score' ? '4096' : '256')),
    iters: positiveInt('iters', values.iters),
    warmup: Number.isInteger(Number(values.warmup)) ? Math.max(0, Number(values.warmup)) : 20,
    profile: values.profile,
    json: values.json,
    ortDir: values['ort-dir'] ?? defaultDir,
  };
}

let opts;
try {
  opts = parse(process.argv.slice(2));
} catch (e) {
  fail(e.message);
}
const ort = loadOrt(opts.ortDir);
try {
  await (opts.mode === 'score' ? score(ort, opts) : bench(ort, opts));
} catch (e) {
  fail(`${opts.model}: ${e.message}`);
}
