"""S3 objects through the engine, from Python, against a real S3-compatible server
(versitygw on loopback): bytes, metadata, listings and the errors Python code expects."""

import random
import threading

import pytest

import ahead
from conftest import ACCESS_KEY, BUCKET, random_bytes


@pytest.fixture(scope="module")
def engine(s3):
    return ahead.Engine(budget="32m", storage_options=s3.options)


@pytest.fixture(scope="module")
def obj(s3):
    blob = random_bytes((5 << 20) + 777, 11)
    return s3.put("dir/obj.bin", blob), blob


def test_an_object_reads_as_its_bytes(engine, obj):
    url, blob = obj
    with engine.open(url) as f:
        assert f.read() == blob
    rng = random.Random(5)
    with engine.open(url, buffering=0) as f:
        assert len(f) == len(blob) and f.name == url
        for _ in range(200):
            at, n = rng.randrange(len(blob) + 5), rng.choice([1, 4096, 70000, 1 << 20])
            if rng.random() < 0.5:
                assert f.pread(n, at) == blob[at:at + n]
            else:
                f.seek(at)
                buf = bytearray(n)
                got = f.readinto(buf)
                assert bytes(buf[:got]) == blob[at:at + n]


def test_threads_read_one_object(engine, obj):
    url, blob = obj
    bad = []
    with engine.open(url, buffering=0) as f:
        def reader(seed):
            rng = random.Random(seed)
            for _ in range(50):
                at = rng.randrange(len(blob))
                if f.pread(4096, at) != blob[at:at + 4096]:
                    bad.append(at)
        threads = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert bad == []


def test_info_and_listing(engine, obj, s3):
    url, blob = obj
    s3.put("dir/sub/other.bin", b"x" * 10)
    info = engine.info(url)
    assert info["name"] == url and info["size"] == len(blob) and info["type"] == "file"
    assert engine.info(f"s3://{BUCKET}/dir")["type"] == "directory"
    names = {e["name"]: e for e in engine.ls(f"s3://{BUCKET}/dir/")}
    assert names[url]["size"] == len(blob)
    assert names[f"s3://{BUCKET}/dir/sub/"]["type"] == "directory"
    assert any(e["name"] == f"s3://{BUCKET}/dir/" for e in engine.ls(f"s3://{BUCKET}"))


def test_missing_objects_and_bad_credentials(engine, s3):
    with pytest.raises(FileNotFoundError) as missing:
        engine.open(f"s3://{BUCKET}/no-such-key")
    assert missing.value.filename == f"s3://{BUCKET}/no-such-key"
    with pytest.raises(FileNotFoundError):
        engine.open("s3://no-such-bucket/key")
    with pytest.raises(FileNotFoundError):
        engine.info(f"s3://{BUCKET}/nothing/here")
    wrong = dict(s3.options, secret_access_key="not-the-secret-xyzzy")
    with pytest.raises(PermissionError) as denied:
        ahead.Engine(storage_options=wrong).open(f"s3://{BUCKET}/dir/obj.bin")
    assert "not-the-secret-xyzzy" not in str(denied.value)
    with pytest.raises(OSError) as bad_url:
        engine.open("s3://just-a-bucket")
    assert bad_url.value.errno == 22
    with pytest.raises(OSError) as unknown:
        ahead.Engine(storage_options=dict(s3.options, no_such_option="1")).open(f"s3://{BUCKET}/dir/obj.bin")
    assert "no_such_option" in str(unknown.value)
    assert ACCESS_KEY  # the access key may show; the secret never does


def test_an_object_nothing_pins_warns_once_and_reads_right(web_unpinned):
    """A server that gives neither ETag nor Last-Modified: a same-size replacement mid-read
    could not be seen, so opening says so with an UnpinnedWarning; the bytes still read right."""
    blob = random_bytes((1 << 20) + 5, 41)
    (web_unpinned.docs / "plain.bin").write_bytes(blob)
    engine = ahead.Engine(budget="8m")
    url = f"{web_unpinned.url}/plain.bin"
    with pytest.warns(ahead.UnpinnedWarning, match="no ETag and no Last-Modified"):
        f = engine.open(url, buffering=0)
    with f:
        assert f.read() == blob
    assert any(fb["kind"] == "unpinned" for fb in engine.stats()["fallbacks"])
