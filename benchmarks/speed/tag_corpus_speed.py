#!/usr/bin/env python
"""
`nerzoo-tag` over the raw text of CoNLL-2003's three files (a sentence a line), variants taking turns: in
this process, on Ray Data (`--ray local`) with 1 and 2 workers, two plain runs side by side on the halves (this
machine's ceiling), and `allennlp predict`.  Start-up: to the first output; "once started": the words of the
shards written after each worker's first, over the time from its end to the last one's; peak memory: a
variant's processes together (RSS every 0.1 s).  Figures and command: docs/scale.md.
"""

import argparse
import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import harness  # noqa: E402


def session_rss_mb(sessions):
    """The resident memory of every process in `sessions` (a command started as a session holds its children), MB."""
    pages = 0
    for path in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # a process that ended meanwhile
            fields = open(path).read().rsplit(") ", 1)[1].split()  # proc(5): from the 3rd field, state
            pages += int(fields[21]) if int(fields[3]) in sessions else 0  # rss (24th) of the session (6th)
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def timed(commands, outputs, threads):
    """`commands` started together: seconds to the first output, seconds in all, peak MB."""
    started, first, peak = time.time(), None, 0.0
    env = harness.thread_env(threads)
    processes = [subprocess.Popen(command, env=env, start_new_session=True) for command in commands]
    while any(process.poll() is None for process in processes):
        peak = max(peak, session_rss_mb({process.pid for process in processes}))
        if first is None and any(glob.glob(f"{path}/*.jsonl") or os.path.isfile(path) for path in outputs):
            first = time.time() - started
        time.sleep(0.1)
    if any(process.returncode for process in processes):
        raise SystemExit(f"failed: {commands}")
    return first, time.time() - started, peak


def steady_rate(outputs, workers):
    """Words/s of the shards in `outputs` after each worker's first, from its end to the last one's."""
    shards = sorted((os.path.getmtime(path), path) for output in outputs for path in glob.glob(f"{output}/*.jsonl"))
    if len(shards) <= workers:
        return None
    words = sum(len(json.loads(line).get("tokens", [])) for _, path in shards[workers:] for line in open(path))
    return words / (shards[-1][0] - shards[workers - 1][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True, help="a bilstm_crf model.tar.gz trained on CoNLL-2003")
    parser.add_argument("--threads", type=int, default=2, help="also the workers and the runs side by side")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    files = [os.path.join(harness.SHARED_DATA, "conll2003", name) for name in ("eng.train", "eng.testa", "eng.testb")]
    texts = [" ".join(words) for path in files for words in harness.read_sentences(path)]
    n, scratch = args.threads, tempfile.mkdtemp()
    harness.allennlp(["export", args.archive, f"{scratch}/export"], f"{scratch}/export.log")
    for name, part in {"all": texts, "half1": texts[: len(texts) // 2], "half2": texts[len(texts) // 2 :]}.items():
        with open(f"{scratch}/{name}.txt", "w") as out:
            out.writelines(text + "\n" for text in part)
    with open(f"{scratch}/all.jsonl", "w") as out:
        out.writelines(json.dumps({"sentence": text}) + "\n" for text in texts)
    tag = [os.path.join(os.path.dirname(sys.executable), "nerzoo-tag"), f"{scratch}/export", "--shard-lines", "1000"]
    ray = [*tag, f"{scratch}/all.txt", "--ray", "local"]
    predict = [harness.ALLENNLP, "predict", args.archive, f"{scratch}/all.jsonl", "--batch-size", "64", "--silent"]
    halves = [[*tag, f"{scratch}/half{k}.txt", "--threads", "1", "--output"] for k in (1, 2)]
    variants = {  # name: (workers, commands); a command's output is its last argument
        f"in-process, {n} threads": (1, [[*tag, f"{scratch}/all.txt", "--threads", str(n), "--output"]]),
        f"Ray, 1 worker of {n} CPUs": (1, [[*ray, "--worker-cpus", str(n), "--output"]]),
        f"Ray, {n} workers of 1 CPU": (n, [[*ray, "--workers", str(n), "--output"]]),
        f"{n} in-process runs of 1 thread on halves": (2, halves),
        "allennlp predict, batches of 64": (1, [[*predict, "--include-package", "nerzoo", "--output-file"]]),
    }
    best = {}
    for number in range(args.rounds):
        for key, (name, (workers, commands)) in list(enumerate(variants.items()))[:: -1 if number % 2 else 1]:
            outputs = [f"{scratch}/out-{number}-{key}-{index}" for index in range(len(commands))]
            measured = timed([command + [output] for command, output in zip(commands, outputs)], outputs, n)
            measured += (steady_rate(outputs, workers),)
            best[name] = min(best.get(name, measured), measured, key=lambda row: row[1])
    shutil.rmtree(scratch)
    words = sum(len(text.split()) for text in texts)
    print(f"{harness.machine_description()}; {len(texts)} sentences, {words} words, best of {args.rounds}")
    print("| variant | start-up s | words/s | words/s once started | peak MB |\n|---|---|---|---|---|")
    for name, (first, total, peak, steady) in best.items():
        steady = f"{steady:,.0f}" if steady else "-"
        print(f"| {name} | {first:.2f} | {words / total:,.0f} | {steady} | {peak:,.0f} |")


if __name__ == "__main__":
    main()
