// The as-of join in DuckDB, the baseline of bench/featurecache/asof_bench.py:
// both CSVs read, ASOF LEFT JOIN, the result written to an uncompressed
// Parquet file (COPY ... TO), as hpcml writes a version. Prints one JSON line:
// {"seconds": read + join + write, "rows": ..., "matched": ...}.
//
//   node asof.mjs --features F.csv --requests R.csv --entity E --feature-time T
//        --time T --columns c1,c2,... [--label L] --out OUT.parquet --threads N
//        [--duckdb-dir build/duckdb]
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: a } = parseArgs({
  options: {
    features: { type: 'string' }, requests: { type: 'string' }, entity: { type: 'string' },
    'feature-time': { type: 'string' }, time: { type: 'string' }, columns: { type: 'string' },
    label: { type: 'string' }, out: { type: 'string' }, threads: { type: 'string', default: '1' },
    'duckdb-dir': { type: 'string', default: path.join(here, '../../../build/duckdb') },
  },
});
for (const k of ['features', 'requests', 'entity', 'feature-time', 'time', 'columns', 'out']) {
  if (!a[k]) {
    console.error(`asof.mjs: --${k} is required`);
    process.exit(2);
  }
}
const { DuckDBInstance } = createRequire(path.join(a['duckdb-dir'], 'package.json'))(
  '@duckdb/node-api');
const q = (s) => `'${s.replaceAll("'", "''")}'`;
const id = (s) => `"${s.replaceAll('"', '""')}"`;
const cols = a.columns.split(',').map((c) => `f.${id(c)}`).join(', ');
const label = a.label ? `, r.${id(a.label)}` : '';
const t0 = performance.now();
const db = await DuckDBInstance.create(':memory:', { threads: a.threads });
const c = await db.connect();
await c.run(
  `COPY (SELECT r.${id(a.entity)}, r.${id(a.time)}${label}, ${cols} ` +
    `FROM read_csv(${q(a.requests)}) r ASOF LEFT JOIN read_csv(${q(a.features)}) f ` +
    `ON r.${id(a.entity)} = f.${id(a.entity)} AND r.${id(a.time)} >= f.${id(a['feature-time'])}) ` +
    `TO ${q(a.out)} (FORMAT parquet, COMPRESSION uncompressed)`);
const seconds = (performance.now() - t0) / 1000;
const first = a.columns.split(',')[0];
const r = await c.runAndReadAll(
  `SELECT count(*), count(${id(first)}) FROM read_parquet(${q(a.out)})`);
const [rows, matched] = r.getRows()[0].map(Number);
console.log(JSON.stringify({ seconds, rows, matched }));
