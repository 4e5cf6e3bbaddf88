"""Engines across processes: pickled as their configuration (one per worker process, built at
first use), and a process forked after an engine exists (multiprocessing, a DataLoader with
fork) reading through engines of its own, never the parent's threads: the bytes right, and
no hang, even with the parent's readers in flight at the fork."""

import multiprocessing
import os
import pickle
import signal
import threading
import time

import pytest

import ahead
from ahead.fs import AheadFileSystem
from conftest import BUCKET, random_bytes

# How long a forked child may take before it is called hung.
CHILD_SECONDS = 60


def run_in_child(work) -> None:
    """Fork; run `work()` in the child (its exceptions fail it); wait for it, bounded."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        except BaseException as e:  # noqa: BLE001 - the child reports anything, then exits
            os.write(2, f"child failed: {e!r}\n".encode())
        finally:
            os._exit(code)
    deadline = time.monotonic() + CHILD_SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung for {CHILD_SECONDS} s")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (its error is above)"


def test_an_engine_pickles_as_its_configuration_one_per_process(data):
    path, blob = data
    engine = ahead.Engine(budget="48m", policy="fixed")
    copy = pickle.loads(pickle.dumps(engine))
    assert copy is not engine
    assert copy._native is None, "an unpickled engine is built at its first use, not before"
    assert pickle.loads(pickle.dumps(engine)) is copy, "one engine per configuration in a process"
    with copy.open(path) as f:
        assert f.read() == blob
    stats = copy.stats()
    assert (stats["budget_bytes"], stats["policy"]) == (48 << 20, "fixed")
    other = pickle.loads(pickle.dumps(ahead.Engine(budget="48m", policy="none")))
    assert other is not copy


def test_a_filesystem_pickles_without_building_an_engine(data):
    path, blob = data
    fs = AheadFileSystem(budget="40m", skip_instance_cache=True)
    copy = pickle.loads(pickle.dumps(fs))
    assert copy.cat_file(str(path)) == blob
    assert copy.engine.stats()["budget_bytes"] == 40 << 20
    given = ahead.Engine(budget="36m")
    carried = pickle.loads(pickle.dumps(AheadFileSystem(engine=given, skip_instance_cache=True)))
    assert carried.engine.stats()["budget_bytes"] == 36 << 20


def test_a_child_forked_with_readers_in_flight_reads_through_engines_of_its_own(data):
    path, blob = data
    engine = ahead.Engine(budget="8m")
    before = engine.open(path, buffering=0)
    assert before.pread(4096, 1 << 20) == blob[1 << 20:(1 << 20) + 4096]
    ahead.default_engine().open(path).read(10)
    # Readers of the parent's engine in flight while it forks: their locks may be held at the
    # fork, and the child must not need them.
    stop = threading.Event()

    def read_on():
        with engine.open(path, buffering=0) as f:
            while not stop.is_set():
                for offset in range(0, len(blob), 256 << 10):
                    f.pread(64 << 10, offset)

    readers = [threading.Thread(target=read_on) for _ in range(2)]
    for r in readers:
        r.start()
    time.sleep(0.05)

    def child():
        # The file opened before the fork, opened again here; the parent's engine, built anew;
        # the default engine, too.
        assert before.pread(5000, 123) == blob[123:5123]
        before.seek(len(blob) - 100)
        assert before.read() == blob[-100:]
        with engine.open(path) as f:
            assert f.read() == blob
        with ahead.open(path) as f:
            assert f.read() == blob
        assert engine.stats()["budget_bytes"] == 8 << 20

    try:
        for _ in range(3):
            run_in_child(child)
    finally:
        stop.set()
        for r in readers:
            r.join()
    # The parent's own engine and file are untouched.
    assert before.pread(100, 0) == blob[:100]
    before.close()


def _sum_of_chunk(args):
    path, offset = args
    with ahead.open(path) as f:
        f.seek(offset)
        return sum(f.read(1 << 20))


def test_a_fork_pool_reads_through_the_default_engine_made_before_it(data):
    path, blob = data
    ahead.default_engine().open(path).read(4096)
    offsets = list(range(0, len(blob), 1 << 20))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        asked = pool.map_async(_sum_of_chunk, [(str(path), o) for o in offsets], chunksize=1)
        try:
            sums = asked.get(timeout=CHILD_SECONDS)
        except multiprocessing.TimeoutError:
            pool.terminate()
            pytest.fail(f"the pool's forked workers hung for {CHILD_SECONDS} s")
    assert sums == [sum(blob[o:o + (1 << 20)]) for o in offsets]


def test_an_object_opened_before_a_fork_is_read_at_its_version_in_the_child(s3):
    s3fs = pytest.importorskip("s3fs")
    # Put through S3, so the object has an ETag to be pinned by.
    store = s3fs.S3FileSystem(**s3.s3fs_options, skip_instance_cache=True)
    blob = random_bytes(3 << 20, 31)
    store.pipe(f"{BUCKET}/fork/obj.bin", blob)
    url = f"s3://{BUCKET}/fork/obj.bin"
    engine = ahead.Engine(budget="16m", storage_options=s3.options)
    before = engine.open(url, buffering=0)
    assert before.pread(1000, 0) == blob[:1000]

    def child():
        assert before.pread(4096, 2 << 20) == blob[2 << 20:(2 << 20) + 4096]
        with engine.open(url) as f:
            assert f.read() == blob

    run_in_child(child)
    # Replaced after the open: the child's reopen is pinned to the version first opened.
    store.pipe(f"{BUCKET}/fork/obj.bin", random_bytes(3 << 20, 32))

    def child_after_change():
        with pytest.raises(OSError):
            before.pread(4096, 0)

    run_in_child(child_after_change)
    before.close()
