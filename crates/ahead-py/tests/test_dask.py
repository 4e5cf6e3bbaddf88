"""Out to a cluster: ``ahead::`` in ``dask.dataframe.read_parquet`` on a
``distributed.LocalCluster`` of worker processes reads the frame s3fs reads, and each worker
builds one engine for it, at its first read (the filesystem travels pickled as its
configuration)."""

import pytest

from conftest import BUCKET, built_engines, put_parquet_parts


def test_dask_reads_parquet_through_ahead_on_a_cluster_of_processes(s3):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    pd = pytest.importorskip("pandas")
    put_parquet_parts(s3, "dask")
    columns = ["c0", "c3", "c7"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        got = dd.read_parquet(f"ahead::s3://{BUCKET}/dask/", columns=columns,
                              storage_options={"s3": s3.s3fs_options}).compute()
        engines = client.run(built_engines)
    want = dd.read_parquet(f"s3://{BUCKET}/dask/", columns=columns,
                           storage_options=s3.s3fs_options).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got.sort_values("c0").reset_index(drop=True),
                                  want.sort_values("c0").reset_index(drop=True))
    assert len(got) == 60_000
    assert len(engines) == 2 and all(n <= 1 for n in engines.values()) and sum(engines.values()) >= 1, engines
