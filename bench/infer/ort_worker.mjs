// The ONNX Runtime worker of bench/infer_vs_peers.sh (npm's onnxruntime-node, CPU provider).
//
//     node ort_worker.mjs DIR MODEL[,MODEL...] THREADS ORT_DIR
//
// ORT_DIR is the folder where `npm install onnxruntime-node` ran. Opens DIR/<model>/model.onnx
// (exported by torch_worker.py) with intraOpNumThreads THREADS, sequential execution and every
// graph optimization, answers "ready", then speaks the protocol of bench/infer/main.c: info,
// check MODEL BATCH (reads x_<batch>.npy, NHWC, transposes it to NCHW, writes
// y_<batch>.ort.npy), time MODEL BATCH SECS WARM, quit.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import readline from 'node:readline';

const [dir, modelList, threadsArg, ortDir] = process.argv.slice(2);
const ort = createRequire(join(ortDir, 'package.json'))('onnxruntime-node');
const threads = Number(threadsArg);

// A float32 C-order .npy file -> {shape, data}.
function readNpy(path) {
  const buf = readFileSync(path);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  if (!header.includes("'<f4'") || header.includes("'fortran_order': True"))
    throw new Error(`${path}: not a C-order float32 array`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map((s) => s.trim())
    .filter((s) => s.length).map(Number);
  const bytes = buf.subarray(start + hlen);
  const data = new Float32Array(bytes.length / 4);
  new Uint8Array(data.buffer).set(bytes);
  return { shape, data };
}

function writeNpy(path, shape, data) {
  const dims = shape.join(', ') + (shape.length === 1 ? ',' : '');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, 0, 0]);
  pre.writeUInt16LE(header.length, 8);
  writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function nchw({ shape, data }) {
  if (shape.length !== 4) return new ort.Tensor('float32', data, shape);
  const [n, h, w, c] = shape;
  const out = new Float32Array(data.length);
  for (let b = 0; b < n; b++)
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++)
        for (let k = 0; k < c; k++)
          out[((b * c + k) * h + y) * w + x] = data[((b * h + y) * w + x) * c + k];
  return new ort.Tensor('float32', out, [n, c, h, w]);
}

async function timeRuns(session, feeds, secs, warm) {
  const t0 = performance.now();
  do await session.run(feeds); while (performance.now() - t0 < warm * 1000);
  const times = [];
  const start = performance.now();
  let t = start;
  while (times.length < 3 || t - start < secs * 1000) {
    await session.run(feeds);
    const t1 = performance.now();
    times.push(t1 - t);
    t = t1;
  }
  times.sort((a, b) => a - b);
  const median = times[times.length >> 1] / 1000;
  return `time ${times.length} ${((t - start) / 1000).toFixed(6)} ${median.toFixed(9)}`;
}

const sessions = {};
const inputs = {};
for (const name of modelList.split(',')) {
  sessions[name] = await ort.InferenceSession.create(join(dir, name, 'model.onnx'), {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
}
console.log('ready');

const rl = readline.createInterface({ input: process.stdin, terminal: false });
for await (const line of rl) {
  const f = line.trim().split(/\s+/);
  if (!f[0]) continue;
  if (f[0] === 'quit') break;
  try {
    if (f[0] === 'info') {
      console.log(`info onnxruntime-node ${ort.env.versions?.node ?? '?'}, CPU provider (MLAS), ` +
        `intraOpNumThreads ${threads}, interOpNumThreads 1, sequential`);
      continue;
    }
    const [cmd, name, batch] = [f[0], f[1], Number(f[2])];
    const session = sessions[name];
    if (!session) throw new Error(`no model '${name}'`);
    if (cmd === 'check') {
      const x = nchw(readNpy(join(dir, name, `x_${batch}.npy`)));
      inputs[`${name}/${batch}`] = { x };
      const y = (await session.run({ x })).y;
      writeNpy(join(dir, name, `y_${batch}.ort.npy`), y.dims, y.data);
      console.log('ok');
    } else if (cmd === 'time') {
      const feeds = inputs[`${name}/${batch}`];
      if (!feeds) throw new Error(`no input for ${name} batch ${batch}: check it first`);
      console.log(await timeRuns(session, feeds, Number(f[3]), Number(f[4])));
    } else {
      throw new Error(`bad command: ${line}`);
    }
  } catch (e) {
    console.log(`error ${e.message.replace(/\n/g, ' ')}`);
  }
}
rl.close();
