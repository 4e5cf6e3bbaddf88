"""The file API against Python's own `open`: the same bytes, positions and exceptions."""

import io
import os
import random
import threading
import time

import pytest

import ahead


@pytest.fixture(scope="module")
def engine():
    return ahead.Engine(budget="16m")


def test_open_gives_what_pythons_open_gives(data, engine):
    path, blob = data
    with engine.open(path) as f, open(path, "rb") as g:
        assert type(f) is io.BufferedReader and type(g) is io.BufferedReader
        assert isinstance(f.raw, ahead.File) and isinstance(f.raw, io.RawIOBase)
        assert f.read(10) == g.read(10)
        assert f.seek(-5, io.SEEK_END) == g.seek(-5, io.SEEK_END)
        assert f.read() == g.read() == blob[-5:]
        assert f.tell() == g.tell() == len(blob)
        assert f.read(1) == b""
    with engine.open(path, buffering=0) as raw:
        assert type(raw) is ahead.File
        assert len(raw) == len(blob)
        assert raw.readable() and raw.seekable() and not raw.writable()
        assert raw.readall() == blob
    with engine.open(path, "r", encoding="latin-1") as text, open(path, "r", encoding="latin-1") as theirs:
        assert text.read(1000) == theirs.read(1000)
        assert text.readline() == theirs.readline()


def test_readinto_fills_the_callers_buffer(data, engine):
    path, blob = data
    with engine.open(path, buffering=0) as f:
        buf = bytearray(100_000)
        f.seek(12345)
        assert f.readinto(buf) == len(buf)
        assert bytes(buf) == blob[12345:12345 + len(buf)]
        view = memoryview(buf)[10:20]
        assert f.readinto(view) == 10
        assert bytes(buf[10:20]) == blob[112345:112355]
        # A buffer of another item type is filled byte for byte, as FileIO fills it.
        import array
        words = array.array("I", [0] * 4)
        f.seek(0)
        assert f.readinto(words) == 16
        assert words.tobytes() == blob[:16]
        f.seek(len(blob) - 3)
        assert f.readinto(bytearray(10)) == 3
        with pytest.raises(TypeError):
            f.readinto(b"read-only")


def test_random_reads_equal_the_files_bytes(data, engine):
    """Random seeks and reads of random sizes, against the bytes: every policy, seeded."""
    path, blob = data
    for policy in ["adaptive", "linux-ondemand", "fixed", "none"]:
        rng = random.Random(policy)
        with engine.open(path, buffering=0, policy=policy) as f:
            for _ in range(300):
                at = rng.randrange(len(blob) + 10)
                n = rng.choice([1, 7, 4096, 5000, 65536, 300_000])
                if rng.random() < 0.5:
                    f.seek(at)
                    got = f.read(n)
                    assert got == blob[at:at + n], (policy, at, n)
                    assert f.tell() == at + len(got)
                else:
                    assert f.pread(n, at) == blob[at:at + n], (policy, at, n)


def test_threads_share_one_file(data, engine):
    path, blob = data
    errors = []
    with engine.open(path, buffering=0) as f:
        def reader(seed):
            rng = random.Random(seed)
            for _ in range(200):
                at, n = rng.randrange(len(blob)), rng.choice([4096, 65536])
                if f.pread(n, at) != blob[at:at + n]:
                    errors.append((at, n))
        threads = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert errors == []


def test_close_while_threads_read_returns_and_ends_every_reader(tmp_path):
    """close() while four threads are in pread: it returns at once, and every reader ends,
    with its right bytes or ValueError, never a hang (a lock held across the read once
    deadlocked them all: a reader waiting behind the close held the GIL the others needed)."""
    from conftest import random_bytes
    blob = random_bytes(8 << 20, 11)
    path = tmp_path / "closing.bin"
    path.write_bytes(blob)
    engine = ahead.Engine(budget="4m")
    for round_ in range(5):
        f = engine.open(path, buffering=0)
        wrong, closed = [], []
        started = threading.Barrier(5)

        def reader(seed):
            rng = random.Random(seed)
            started.wait()
            while True:
                at, n = rng.randrange(len(blob)), rng.choice([4096, 65536, 1 << 20])
                try:
                    got = f.pread(n, at)
                except ValueError:
                    closed.append(seed)
                    return
                if got != blob[at:at + n]:
                    wrong.append((at, n))

        threads = [threading.Thread(target=reader, args=(round_ * 10 + s,), daemon=True) for s in range(4)]
        [t.start() for t in threads]
        started.wait()
        time.sleep(0.05)
        closer = threading.Thread(target=f.close, daemon=True)
        closer.start()
        closer.join(10)
        assert not closer.is_alive(), "close() did not return"
        for t in threads:
            t.join(10)
            assert not t.is_alive(), "a reader hung after close()"
        assert wrong == [] and sorted(closed) == [round_ * 10 + s for s in range(4)]
        assert f.closed
        with pytest.raises(ValueError):
            f.pread(1, 0)


def test_a_budget_above_the_memory_there_is_is_refused_unless_insisted():
    """Twice this machine's RAM: ValueError naming the memory there is; with
    budget_over_memory=True it is taken (the cache faults memory in only as it fills)."""
    twice = 2 * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with pytest.raises(ValueError, match="more than this process can have"):
        ahead.Engine(budget=twice)
    engine = ahead.Engine(budget=twice, budget_over_memory=True)
    assert engine.stats()["budget_bytes"] == twice


def test_a_device_model_is_a_setting(data):
    """``device=`` (a preset or a profile ``ahead calibrate`` wrote) is what the engine's
    meter starts from; the bytes are the file's either way, and an unknown device is a
    ValueError naming the setting."""
    path, blob = data
    engine = ahead.Engine(budget="16m", device="hdd")
    with engine.open(path, buffering=0) as f:
        assert f.read(8192) == blob[:8192]
    with pytest.raises(ValueError, match="device"):
        ahead.Engine(budget="16m", device="floppy")


def test_advise_and_stats(data):
    path, blob = data
    engine = ahead.Engine(budget="16m", policy="adaptive", backend="threads")
    with engine.open(path, buffering=0) as f:
        f.advise("sequential")
        f.advise("willneed", 0, 1 << 20)
        assert f.read(4096) == blob[:4096]
        f.advise("random")
        f.advise("dontneed", 0, len(blob))
        f.advise("normal")
        with pytest.raises(ValueError):
            f.advise("soon")
        own = f.stats()
        assert own["reads"] >= 1 and own["bytes_returned"] >= 4096
        assert own["hit_pages"] + own["miss_pages"] >= 1 and own["path"] == str(path)
    stats = engine.stats()
    assert stats["backend"] == "threads" and stats["policy"] == "adaptive"
    assert stats["reads"] >= own["reads"] and stats["read_latency"]["count"] == stats["reads"]
    assert stats["budget_bytes"] == 16 << 20
    assert stats["reads"] >= 1 and stats["bytes_returned"] >= 4096 and stats["pages_read"] >= 1


def test_sizes_give_the_windows_the_cli_and_the_builder_give(data):
    """One table of settings behind every door: window_max=5000 is two pages here as it is
    through ``ahead cat --ra-max 5000`` and ``EngineBuilder::window_max(5000)`` (the CLI's and
    the library's tests hold those to the same figures)."""
    path, _ = data
    for window, request in [(5000, 8193), ("5000", "8193"), ("8m", "1m")]:
        engine = ahead.Engine(budget="64m", window_max=window, request_max=request)
        with engine.open(path, buffering=0) as f:
            st = f.stats()
        as_bytes = {5000: 8192, "5000": 8192, 8193: 12288, "8193": 12288, "8m": 8 << 20, "1m": 1 << 20}
        assert (st["window_max_bytes"], st["request_max_bytes"]) == (as_bytes[window], as_bytes[request])
    assert ahead.Engine(budget="64m").stats()["budget_bytes"] == 64 << 20
    with pytest.raises(ValueError, match="unknown setting 'windowmax'"):
        ahead.Engine(windowmax="4m")
    with pytest.raises(ValueError, match="window_max"):
        ahead.Engine(window_max="lots")
    with pytest.raises(TypeError):
        ahead.Engine(window_max=4.5)


def test_empty_file(tmp_path, engine):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with engine.open(path) as f:
        assert f.read() == b"" and f.read(10) == b""


def test_bad_input_raises_pythons_exceptions(tmp_path, data, engine):
    path, _ = data
    with pytest.raises(FileNotFoundError) as missing:
        engine.open(tmp_path / "no-such-file")
    assert missing.value.errno == 2 and missing.value.filename == str(tmp_path / "no-such-file")
    with pytest.raises(IsADirectoryError):
        engine.open(tmp_path)
    secret = tmp_path / "secret"
    secret.write_bytes(b"x")
    secret.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(PermissionError):
            engine.open(secret)
    for mode in ["wb", "ab", "r+b", "rbt", "x"]:
        with pytest.raises(ValueError):
            engine.open(path, mode)
    f = engine.open(path, buffering=0)
    f.close()
    assert f.closed
    for call in [lambda: f.read(1), lambda: f.pread(1, 0), lambda: f.seek(0), lambda: f.readinto(bytearray(1))]:
        with pytest.raises(ValueError):
            call()
    f.close()  # twice is fine, as for Python's files
    with engine.open(path, buffering=0) as g:
        with pytest.raises(OSError):
            g.seek(-1)
        with pytest.raises(ValueError):
            g.pread(-1, 0)
        with pytest.raises(io.UnsupportedOperation):
            g.fileno()
    with pytest.raises(ValueError):
        ahead.Engine(budget="lots")
    with pytest.raises(ValueError):
        ahead.Engine(policy="psychic")
    with pytest.raises(ValueError):
        ahead.Engine(policy="oracle")
    with pytest.raises(ValueError):
        ahead.Engine(backend="floppy")


def test_default_engine_and_module_open(data):
    path, blob = data
    with ahead.open(path) as f:
        assert f.read() == blob
    assert ahead.default_engine() is ahead.default_engine()
    assert "adaptive" in ahead.policies()
