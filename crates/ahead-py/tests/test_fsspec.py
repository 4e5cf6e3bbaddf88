"""The `ahead` fsspec protocol: what fsspec's users (pandas, pyarrow.dataset) call on a
read-only filesystem, for local files and S3 objects, and a Parquet round trip."""

import fsspec
import pytest

import ahead
from ahead.fs import AheadFileSystem
from conftest import BUCKET, random_bytes


def test_the_protocol_is_registered():
    assert fsspec.get_filesystem_class("ahead") is AheadFileSystem


def test_local_files_through_a_chained_url(data, tmp_path):
    path, blob = data
    with fsspec.open(f"ahead::{path}", "rb") as f:
        assert f.read() == blob
    fs, local = fsspec.core.url_to_fs(f"ahead::{path}")
    assert isinstance(fs, AheadFileSystem) and local == str(path)
    assert fs.size(local) == len(blob)
    assert fs.info(local)["type"] == "file"
    assert fs.isfile(local) and not fs.isdir(local) and fs.exists(local)
    assert fs.isdir(str(tmp_path))
    assert str(path) in fs.ls(str(tmp_path), detail=False)
    for start, end in [(None, None), (0, 10), (100, 5000), (-10, None), (len(blob) - 3, len(blob) + 100), (50, 40)]:
        assert fs.cat_file(local, start, end) == blob[slice(start, end)], (start, end)
    assert fs.cat(local) == blob
    with fs.open(local, "rb") as f:
        f.seek(1000)
        assert f.read(10) == blob[1000:1010]
    with pytest.raises(NotImplementedError):
        fs.open(local, "wb")
    with pytest.raises(NotImplementedError):
        fs.rm(local)
    with pytest.raises(FileNotFoundError):
        fs.info(str(tmp_path / "missing"))
    assert not fs.exists(str(tmp_path / "missing"))


def test_s3_objects_through_a_chained_url(s3):
    blob = random_bytes(2 << 20, 3)
    url = s3.put("fs/obj.bin", blob)
    with fsspec.open(f"ahead::{url}", "rb", s3=s3.s3fs_options) as f:
        assert f.read() == blob
    fs = AheadFileSystem(target_protocol="s3", **s3.s3fs_options)
    key = f"{BUCKET}/fs/obj.bin"
    assert fs.size(key) == len(blob)
    assert fs.cat_file(key, 10, 20) == blob[10:20]
    assert fs.ls(f"{BUCKET}/fs", detail=False) == [key]
    assert fs.isdir(f"{BUCKET}/fs") and fs.isfile(key)
    with pytest.raises(FileNotFoundError):
        fs.info(f"{BUCKET}/fs/missing")


def test_a_parquet_file_round_trips_through_the_engine(tmp_path, s3):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    columns = {f"c{i}": pa.array(range(i, i + 50_000)) for i in range(20)}
    table = pa.table(columns)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=10_000)
    picked = ["c1", "c7", "c19"]
    local = pq.read_table(str(path), columns=picked, filesystem=AheadFileSystem())
    assert local.equals(table.select(picked))
    url = s3.put("tables/t.parquet", path.read_bytes())
    fs = AheadFileSystem(target_protocol="s3", **s3.s3fs_options)
    remote = pq.read_table(url[len("s3://"):], columns=picked, filesystem=fs)
    assert remote.equals(table.select(picked))
    with fsspec.open(f"ahead::{url}", "rb", s3=s3.s3fs_options) as f:
        assert pq.read_table(f, columns=["c3"]).column("c3").equals(table.column("c3"))
    ds = pytest.importorskip("pyarrow.dataset")
    dataset = ds.dataset(f"{BUCKET}/tables/", filesystem=fs, format="parquet")
    assert dataset.to_table(columns=picked).equals(table.select(picked))
