"""The coordinator of bench/infer_vs_peers.sh (run with Debian's /usr/bin/python3; needs numpy).

    driver.py --dir D --worker BUILD/bench/tfserve-infer-bench --ort-dir O [--models ...]

Starts the three workers (tfserve-infer-bench, torch_worker.py, ort_worker.mjs; protocol in
bench/infer/main.c) in that order (tfserve writes the weights, PyTorch loads them and exports the
ONNX files that ONNX Runtime opens), prints their kernel sets, checks every (model, batch) output
against tfserve's (error = max |peer - tfserve| / max |tfserve|, must be < --tolerance), then
times each (model, batch) in rounds: in every round each framework runs --warmup s untimed and at
least --duration s (and 3 runs), one after the other, the order rotating from round to round so
that load from other processes hits all three alike. Prints per-round samples/s and the medians
with tfserve's ratio to the faster peer and each framework's model GFLOP/s (2 x multiply-adds per
sample x samples/s). Exit status 1 when a worker fails or an output disagrees.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ('tfserve', 'torch', 'ort')


class Worker:
    def __init__(self, name, argv, env):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, bufsize=1)
        self.ready = self.read()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f'{self.name} worker exited (status {self.proc.wait()})')
        line = line.strip()
        if line.startswith('error'):
            raise RuntimeError(f'{self.name}: {line}')
        return line

    def ask(self, cmd):
        self.proc.stdin.write(cmd + '\n')
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('quit\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def load():
    return '/'.join(f'{x:.2f}' for x in os.getloadavg())


def start_workers(a, workers):
    env = dict(os.environ)
    torch_env = dict(env)
    # PyTorch's best configuration here: its OpenMP threads only, OpenBLAS single-threaded.
    torch_env['OPENBLAS_NUM_THREADS'] = a.torch_openblas_threads
    torch_env['PYTHONWARNINGS'] = 'ignore'   # the ONNX exporter's warnings, not ours
    models = ','.join(a.models)
    argv = [a.worker, f'--threads={a.threads}'] + (['--rewrite'] if a.rewrite else [])
    workers['tfserve'] = Worker('tfserve', argv + [a.dir, models], env)
    workers['torch'] = Worker('torch', [sys.executable, os.path.join(HERE, 'torch_worker.py'),
                                        a.dir, models, str(a.threads)]
                              + (['jit'] if a.torch_jit else []), torch_env)
    workers['ort'] = Worker('ort', ['node', os.path.join(HERE, 'ort_worker.mjs'), a.dir, models,
                                    str(a.threads), a.ort_dir], env)
    macs = dict(kv.split('=') for kv in workers['tfserve'].ready.split()[1:])
    return {k: float(v) for k, v in macs.items()}


def check(a, workers, configs):
    print(f'\noutputs (error = max|peer - tfserve| / max|tfserve|, tolerance {a.tolerance:g}):')
    ok = True
    for model, batch in configs:
        for fw in FRAMEWORKS:
            reply = workers[fw].ask(f'check {model} {batch}')
            if reply != 'ok':
                raise RuntimeError(f'{fw} check {model} {batch}: {reply}')
        ref = np.load(os.path.join(a.dir, model, f'y_{batch}.tfserve.npy'))
        errs, bad = [], False
        for fw in FRAMEWORKS[1:]:
            y = np.load(os.path.join(a.dir, model, f'y_{batch}.{fw}.npy'))
            err = float(np.abs(y - ref).max() / np.abs(ref).max()) if y.shape == ref.shape \
                else float('inf')
            bad |= not err < a.tolerance
            errs.append(f'{fw} {err:.2e}')
        print(f'  {model:9s} batch {batch:3d}: output {list(ref.shape)}, max|y| '
              f'{np.abs(ref).max():.3g}; ' + ', '.join(errs) + ('  FAIL' if bad else ''))
        ok &= not bad
    return ok


def measure(a, workers, configs):
    rates = {(m, b, fw): [] for m, b in configs for fw in FRAMEWORKS}
    lat = {(m, b, fw): [] for m, b in configs for fw in FRAMEWORKS}
    print(f'\ntiming: {a.runs} round(s); per framework {a.warmup:g} s warm-up + '
          f'>= {a.duration:g} s '
          f'(and >= 3 runs); order rotates per round')
    for r in range(a.runs):
        print(f'  round {r + 1} (load {load()}):')
        for i, (model, batch) in enumerate(configs):
            k = (r + i) % 3
            order = FRAMEWORKS[k:] + FRAMEWORKS[:k]
            line = {}
            for fw in order:
                time.sleep(0.2)   # let the last framework's spinning threads go to sleep
                reply = workers[fw].ask(f'time {model} {batch} {a.duration} {a.warmup}')
                f = reply.split()
                if f[0] != 'time':
                    raise RuntimeError(f'{fw} time {model} {batch}: {reply}')
                n, secs, med = int(f[1]), float(f[2]), float(f[3])
                rates[model, batch, fw].append(n * batch / secs)
                lat[model, batch, fw].append(med)
                line[fw] = f'{fw} {n * batch / secs:10.1f}'
            print(f'    {model:9s} b{batch:<3d} ' + '  '.join(line[fw] for fw in FRAMEWORKS)
                  + f'   (first: {order[0]})')
    return rates, lat


def fmt_ms(secs):
    ms = 1e3 * secs
    return f'{ms:.0f}' if ms >= 100 else f'{ms:.3g}'


def report(a, configs, macs, rates, lat):
    print(f'\nmedians over {a.runs} round(s): samples/s; ratio = tfserve / faster peer (target);'
          f' p50 ms per run, and the ratio from those; GFLOP/s = 2 x multiply-adds x samples/s')
    print(f'{"model":9s} {"batch":>5s} {"tfserve":>10s} {"torch":>10s} {"ort":>10s} '
          f'{"ratio":>6s} {"(target)":>8s}  {"p50 ms tfserve/torch/ort":>26s} {"ratio":>6s}  '
          f'GFLOP/s tfserve/torch/ort')
    for model, batch in configs:
        med = {fw: statistics.median(rates[model, batch, fw]) for fw in FRAMEWORKS}
        best = max(med['torch'], med['ort'])
        target = 0.9 if batch == 1 else 1.0
        ratio = med['tfserve'] / best
        rate = ' '.join(f'{med[fw]:10.1f}' for fw in FRAMEWORKS)
        p50 = {fw: statistics.median(lat[model, batch, fw]) for fw in FRAMEWORKS}
        ratio50 = min(p50['torch'], p50['ort']) / p50['tfserve']
        ms = '/'.join(fmt_ms(p50[fw]) for fw in FRAMEWORKS)
        gf = '/'.join(f'{2 * macs[model] * med[fw] / 1e9:.1f}' for fw in FRAMEWORKS)
        print(f'{model:9s} {batch:5d} {rate} {ratio:6.3f} {f"({target:.1f})":>8s}  {ms:>26s} '
              f'{ratio50:6.3f}  {gf}' + ('' if ratio >= target else '  missed'))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--dir', required=True)
    p.add_argument('--worker', required=True)
    p.add_argument('--ort-dir', required=True)
    p.add_argument('--models', default='mlp,cnn,resnet50')
    p.add_argument('--batches', default='1,8,64')
    p.add_argument('--resnet-batches', default='1,8')
    p.add_argument('--runs', type=int, default=3)
    p.add_argument('--duration', type=float, default=2.0)
    p.add_argument('--warmup', type=float, default=0.5)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--tolerance', type=float, default=1e-4)
    p.add_argument('--torch-openblas-threads', default='1')
    p.add_argument('--torch-jit', action='store_true',
                   help='PyTorch runs traced, frozen TorchScript instead of eager modules')
    p.add_argument('--rewrite', action='store_true',
                   help="run tfserve's graphs through the runtime's rewrites (where it has them)")
    a = p.parse_args()
    a.models = a.models.split(',')
    configs = [(m, int(b)) for m in a.models
               for b in (a.resnet_batches if m == 'resnet50' else a.batches).split(',')]
    print(f'infer_vs_peers: {",".join(a.models)}, {a.threads} thread(s) per framework, '
          f'{os.cpu_count()} CPUs, load {load()}, '
          f'{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}')
    workers = {}
    try:
        macs = start_workers(a, workers)
        print('kernels:')
        for fw in FRAMEWORKS:
            print(f'  {fw:7s} {workers[fw].ask("info")[5:]}')
        ok = check(a, workers, configs)
        if not ok:
            print('outputs disagree: not timing', file=sys.stderr)
            return 1
        rates, lat = measure(a, workers, configs)
        report(a, configs, macs, rates, lat)
        print(f'load average at the end: {load()}')
        return 0
    except (RuntimeError, OSError, ValueError) as e:
        print(f'infer_vs_peers: {e}', file=sys.stderr)
        return 1
    finally:
        for w in workers.values():
            w.close()


if __name__ == '__main__':
    sys.exit(main())
