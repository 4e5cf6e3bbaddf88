#!/usr/bin/env python3
"""One pattern of reads through a mounted directory, as tools/bench-mount runs them: prints one
JSON line (bytes, seconds, MB/s, read latency p50/p99, and with --hash a SHA-256 of the bytes
where the pattern reads an object whole, so two mounts can be checked to give the same bytes).
The bench does not hash: on its 2 CPUs the hash (0.8 CPU s a GiB) would take from the link's
proxy and gateway, and its yardstick, `ahead cat > /dev/null`, hashes nothing; the bytes of
every mount are compared by the programs' results (sqlite3, tar, pyarrow) instead.

Patterns (mountpoint-s3's fio jobs and the issue's own):
  seq-256k       one thread, 256 KiB reads in order over the object
  seq-256k-x4    four threads, each a quarter of the object in order
  rand-256k      256 KiB reads at random aligned offsets
  rand-4k        4 KiB reads at random aligned offsets
  back-64k       64 KiB reads backwards from the end
  skip-17m       read 48 MiB, skip 17 MiB, to the end
  files-5m       every file of a directory in turn, 256 KiB reads
  seq-4k         4 KiB reads in order
  many-open      every file of a directory open at once, 16 threads reading 64 KiB at random
                 places of random files (the opens timed apart: `opens_s`, then the cap)
Each stops at --cap-s seconds (the bytes read so far are what is counted).
"""
import argparse
import hashlib
import json
import os
import random
import threading
import time

KIB, MIB = 1 << 10, 1 << 20


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pattern")
    p.add_argument("path", help="the object (a file of the mount), or a directory for files-5m")
    p.add_argument("--cap-s", type=float, default=20.0)
    p.add_argument("--reads", type=int, default=400, help="reads of the random patterns")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hash", action="store_true", help="SHA-256 of the bytes of seq-256k and seq-4k")
    a = p.parse_args()
    deadline = time.monotonic() + a.cap_s
    lat = []
    total = [0]
    lock = threading.Lock()
    digest = None

    def read_range(fd, off, bs, h=None):
        t = time.monotonic()
        b = os.pread(fd, bs, off)
        dt = time.monotonic() - t
        with lock:
            lat.append(dt)
            total[0] += len(b)
        if h is not None:
            h.update(b)
        return len(b)

    def sequential(path, bs, start=0, end=None, h=None):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size if end is None else end
            off = start
            while off < size and time.monotonic() < deadline:
                n = read_range(fd, off, min(bs, size - off), h)
                if n == 0:
                    break
                off += n
            return off >= size
        finally:
            os.close(fd)

    began = time.monotonic()
    opens_s = None
    whole = False
    if a.pattern in ("seq-256k", "seq-4k"):
        h = hashlib.sha256() if a.hash else None
        whole = sequential(a.path, 256 * KIB if a.pattern == "seq-256k" else 4 * KIB, h=h)
        digest = h.hexdigest() if whole and h is not None else None
    elif a.pattern == "seq-256k-x4":
        size = os.stat(a.path).st_size
        q = -(-size // 4)
        ts = [threading.Thread(target=sequential, args=(a.path, 256 * KIB, i * q, min(size, (i + 1) * q)))
              for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    elif a.pattern in ("rand-256k", "rand-4k"):
        bs = 256 * KIB if a.pattern == "rand-256k" else 4 * KIB
        fd = os.open(a.path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        rng = random.Random(a.seed)
        for _ in range(a.reads):
            if time.monotonic() >= deadline:
                break
            read_range(fd, rng.randrange(size // bs) * bs, bs)
        os.close(fd)
    elif a.pattern == "back-64k":
        fd = os.open(a.path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        off = size - size % (64 * KIB)
        while off > 0 and time.monotonic() < deadline:
            off -= 64 * KIB
            read_range(fd, off, 64 * KIB)
        os.close(fd)
    elif a.pattern == "skip-17m":
        fd = os.open(a.path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        off = 0
        while off < size and time.monotonic() < deadline:
            end = min(size, off + 48 * MIB)
            while off < end and time.monotonic() < deadline:
                off += read_range(fd, off, min(256 * KIB, end - off)) or (end - off)
            off += 17 * MIB
        os.close(fd)
    elif a.pattern == "many-open":
        names = sorted(os.listdir(a.path))
        fds = [os.open(os.path.join(a.path, n), os.O_RDONLY) for n in names]
        sizes = [os.fstat(fd).st_size for fd in fds]
        # The opens are timed on their own (a mount that asks the store at each open takes a
        # round trip or more a file); the reads get the whole cap after them.
        opens_s = time.monotonic() - began
        began = time.monotonic()
        deadline = began + a.cap_s

        def reader(seed):
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                i = rng.randrange(len(fds))
                read_range(fds[i], rng.randrange(max(1, sizes[i] // (64 * KIB))) * 64 * KIB, 64 * KIB)

        ts = [threading.Thread(target=reader, args=(a.seed + t,)) for t in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for fd in fds:
            os.close(fd)
    elif a.pattern == "files-5m":
        for name in sorted(os.listdir(a.path)):
            if time.monotonic() >= deadline:
                break
            sequential(os.path.join(a.path, name), 256 * KIB)
    else:
        raise SystemExit(f"unknown pattern {a.pattern}")
    seconds = time.monotonic() - began
    lat.sort()
    pick = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3, 3) if lat else None
    print(json.dumps({
        "pattern": a.pattern, "bytes": total[0], "seconds": round(seconds, 3),
        "mb_per_s": round(total[0] / seconds / 1e6, 1) if seconds > 0 else 0,
        "reads": len(lat), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "sha256": digest,
        **({"opens_s": round(opens_s, 2)} if opens_s is not None else {}),
    }))


if __name__ == "__main__":
    main()
