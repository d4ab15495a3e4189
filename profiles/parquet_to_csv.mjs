// Writes a Parquet table of the aiconfigurator data set as CSV on standard output, its columns
// unchanged (header first), for `servesim profiles import aiconfigurator` (profiles/README.md,
// aiconfigurator_trtllm). Not part of the build.
//
// Usage: npm install hyparquet hyparquet-compressors
//        node profiles/parquet_to_csv.mjs gemm_perf.parquet > trtllm_1.2.0rc5/gemm_perf.csv
import fs from 'fs';
import { parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';

const bytes = fs.readFileSync(process.argv[2]);
const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
const rows = await parquetReadObjects({ file, compressors });
const columns = Object.keys(rows[0]);
const lines = [columns.join(',')];
for (const row of rows) lines.push(columns.map((c) => row[c]).join(','));
process.stdout.write(lines.join('\n') + '\n');
