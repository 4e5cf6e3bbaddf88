"""Fixtures for the Python package's tests: files of random bytes, and a real S3-compatible
server (versitygw, installed by tools/test-servers) started on a loopback port.

Where the server is missing the tests that need it skip, naming it; with
AHEAD_REQUIRE_SERVERS=1 (CI) that is a failure instead.
"""

import os
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ACCESS_KEY = "ahead-py-test-access"
SECRET_KEY = "ahead-py-test-secret-not-real"
REGION = "us-east-1"
BUCKET = "pybucket"


def need(what: str, how: str = "run tools/test-servers to install it"):
    """Skip for a missing `what`, or fail where servers are required (CI)."""
    if os.environ.get("AHEAD_REQUIRE_SERVERS") == "1":
        pytest.fail(f"required here (AHEAD_REQUIRE_SERVERS=1): {what}")
    pytest.skip(f"{what} ({how})")


def tool(name: str):
    for d in (os.environ.get("AHEAD_TOOLS_BIN"), str(ROOT / "target/tools/bin")):
        if d and (Path(d) / name).is_file():
            return str(Path(d) / name)
    return shutil.which(name)


def random_bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def built_engines() -> int:
    """Engines whose native part this process has built."""
    import ahead
    return sum(1 for e in list(ahead._processes.engines) if e._native is not None)


def put_parquet_parts(s3, prefix: str):
    """Six Parquet files of 10,000 rows (8 int columns, row groups of 2,500) under
    BUCKET/prefix/, put through S3 with s3fs, so the objects have the ETags s3fs's own read
    asks for; returns that s3fs filesystem. Column c0 runs 0..60,000 across the files."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    s3fs = pytest.importorskip("s3fs")
    store = s3fs.S3FileSystem(**s3.s3fs_options)
    for part in range(6):
        table = pa.table({f"c{i}": pa.array(range(part * 10_000 + i, part * 10_000 + i + 10_000))
                          for i in range(8)})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=2_500)
        store.pipe(f"{BUCKET}/{prefix}/part-{part}.parquet", sink.getvalue().to_pybytes())
    return store


@pytest.fixture
def data(tmp_path):
    """A 3 MiB + 123 byte file of random bytes (the last page partial) and its bytes."""
    blob = random_bytes((3 << 20) + 123, 7)
    path = tmp_path / "data.bin"
    path.write_bytes(blob)
    return path, blob


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    """A running versitygw: its endpoint, root directory and the options to reach it."""

    def __init__(self, endpoint: str, root: Path):
        self.endpoint = endpoint
        self.root = root
        self.options = {"endpoint": endpoint, "access_key_id": ACCESS_KEY,
                        "secret_access_key": SECRET_KEY, "region": REGION, "allow_http": "true"}
        self.s3fs_options = {"key": ACCESS_KEY, "secret": SECRET_KEY,
                             "client_kwargs": {"endpoint_url": endpoint, "region_name": REGION}}

    def put(self, key: str, blob: bytes) -> str:
        """Store `blob` as BUCKET/key (the posix backend's objects are its files)."""
        path = self.root / BUCKET / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
        return f"s3://{BUCKET}/{key}"


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    binary = tool("versitygw")
    if binary is None:
        need("versitygw is not installed")
    root = tmp_path_factory.mktemp("versitygw")
    (root / BUCKET).mkdir()
    port = free_port()
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen([binary, "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--region", REGION,
                             "--quiet", "--keep-alive", "--port", f"127.0.0.1:{port}", "posix", str(root)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                need(f"versitygw did not start: {(root / 'server.log').read_text()[-500:]}")
            time.sleep(0.05)
    try:
        yield S3(f"http://127.0.0.1:{port}", root)
    finally:
        proc.kill()
        proc.wait()
        log.close()


class Web:
    """A running lighttpd: its base URL and the directory it serves."""

    def __init__(self, url: str, docs: Path):
        self.url = url
        self.docs = docs


@pytest.fixture(scope="session")
def web_unpinned(tmp_path_factory):
    """lighttpd serving files with neither ETag nor Last-Modified, as some servers do."""
    binary = tool("lighttpd")
    if binary is None:
        need("lighttpd is not installed")
    root = tmp_path_factory.mktemp("lighttpd")
    docs = root / "docs"
    docs.mkdir()
    port = free_port()
    conf = root / "lighttpd.conf"
    conf.write_text(
        f'server.document-root = "{docs}"\nserver.bind = "127.0.0.1"\nserver.port = {port}\n'
        f'server.errorlog = "{root / "error.log"}"\n'
        'mimetype.assign = ( "" => "application/octet-stream" )\n'
        'server.modules = ( "mod_setenv" )\nsetenv.set-response-header = ( "Last-Modified" => "" )\n'
        'static-file.etags = "disable"\nserver.stat-cache-engine = "disable"\n')
    proc = subprocess.Popen([binary, "-D", "-f", str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                need("lighttpd did not start")
            time.sleep(0.05)
    try:
        yield Web(f"http://127.0.0.1:{port}", docs)
    finally:
        proc.kill()
        proc.wait()
