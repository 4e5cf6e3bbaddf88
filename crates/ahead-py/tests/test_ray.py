"""Out to a cluster, the other way users go: ``ray.data.read_parquet`` with the ``ahead``
filesystem (Ray takes an fsspec filesystem as ``filesystem=``; it does not parse ``ahead::``
URLs) reads the frame s3fs reads, in Ray's worker processes, each building at most one engine
(the filesystem travels pickled as its configuration)."""

import fsspec
import pytest

from ahead.fs import AheadFileSystem
from conftest import BUCKET, built_engines, need, put_parquet_parts


def test_ray_data_reads_parquet_through_ahead_in_worker_processes(s3):
    try:
        import ray
        import ray.data
    except ImportError:
        need("ray[data] is not installed", "tools/python-env installs it where pip has its wheel")
    pq = pytest.importorskip("pyarrow.parquet")
    pd = pytest.importorskip("pandas")
    store = put_parquet_parts(s3, "ray")
    columns = ["c0", "c3", "c7"]
    fs, path = fsspec.core.url_to_fs(f"ahead::s3://{BUCKET}/ray/", s3=s3.s3fs_options)
    assert isinstance(fs, AheadFileSystem)
    built_before = built_engines()  # by the tests before this one, in this process

    @ray.remote
    def engines_in_worker():
        # Self-contained (conftest's built_engines, inline): Ray's workers cannot import the
        # tests' modules.
        import os
        import ahead as in_worker
        return os.getpid(), sum(1 for e in list(in_worker._processes.engines) if e._native is not None)

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 << 20,
             log_to_driver=False)
    try:
        got = ray.data.read_parquet(path, filesystem=fs).select_columns(columns).to_pandas()
        workers = dict(ray.get([engines_in_worker.remote() for _ in range(8)]))
    finally:
        ray.shutdown()
    want = pq.read_table(f"{BUCKET}/ray/", filesystem=store, columns=columns).to_pandas()
    pd.testing.assert_frame_equal(got.sort_values("c0").reset_index(drop=True),
                                  want.sort_values("c0").reset_index(drop=True),
                                  check_dtype=False)  # Ray's frames hold Arrow-backed int64
    assert len(got) == 60_000
    # Every process that read built one engine at most; some worker read through one.
    assert all(n <= 1 for n in workers.values()) and sum(workers.values()) >= 1, workers
    assert built_engines() - built_before <= 1
