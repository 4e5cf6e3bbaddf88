"""Out to a cluster: ``ahead::`` in ``dask.dataframe.read_parquet`` on a
``distributed.LocalCluster`` of worker processes reads the frame s3fs reads, and each worker
builds one engine for it, at its first read (the filesystem travels pickled as its
configuration)."""

import pytest

import ahead
from conftest import BUCKET


def built_engines() -> int:
    """Engines whose native part this process has built."""
    return sum(1 for e in list(ahead._processes.engines) if e._native is not None)


def test_dask_reads_parquet_through_ahead_on_a_cluster_of_processes(s3):
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    s3fs = pytest.importorskip("s3fs")
    # Put through S3 (s3fs), so the objects have the ETags s3fs's own read asks for.
    store = s3fs.S3FileSystem(**s3.s3fs_options)
    for part in range(6):
        table = pa.table({f"c{i}": pa.array(range(part * 10_000 + i, part * 10_000 + i + 10_000))
                          for i in range(8)})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=2_500)
        store.pipe(f"{BUCKET}/dask/part-{part}.parquet", sink.getvalue().to_pybytes())
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
