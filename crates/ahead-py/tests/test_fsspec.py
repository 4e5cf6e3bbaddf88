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


def int_columns(path, rows: int, row_group_size: int):
    """A Parquet file at `path` of 20 int64 columns c0..c19 of `rows` rows in row groups of
    `row_group_size`, uncompressed; its table."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({f"c{i}": pa.array(range(i * rows, (i + 1) * rows)) for i in range(20)})
    pq.write_table(table, path, row_group_size=row_group_size, compression="none")
    return table


@pytest.fixture
def six_row_groups(tmp_path):
    """A Parquet file of 20 int64 columns in 6 row groups of 10,000 rows, uncompressed, and its
    table."""
    path = tmp_path / "t.parquet"
    return path, int_columns(path, 60_000, 10_000)


def test_a_parquet_footer_names_the_chunks_to_read_ahead(six_row_groups):
    """The footer's index: a read that starts a column chunk asks for the same column's chunks
    in the later row groups, in order, within the limit, each once."""
    import pyarrow.parquet as pq
    from ahead._formats import ParquetReadahead
    path, _ = six_row_groups
    blob = path.read_bytes()
    meta = pq.read_metadata(path)

    def start(group, column):
        c = meta.row_group(group).column(column)
        return c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset

    def size(group, column):
        return meta.row_group(group).column(column).total_compressed_size
    assert ParquetReadahead.from_tail(blob[:-1]) is None  # no magic: no index
    index = ParquetReadahead.from_tail(blob[-65536:])
    assert index is not None
    later = [(start(g, 7), size(g, 7)) for g in range(1, 6)]
    assert index.to_ask(start(0, 7), 1 << 30) == later
    assert index.to_ask(start(0, 7), 1 << 30) == []  # each once
    assert index.to_ask(start(1, 7), 1 << 30) == []  # read: nothing new to ask
    limited = index.fresh()
    assert limited.to_ask(start(2, 3), 2 * size(3, 3)) == [(start(g, 3), size(g, 3)) for g in (3, 4)]
    assert limited.to_ask(start(3, 3), 2 * size(3, 3)) == [(start(5, 3), size(5, 3))]  # one read, one more
    assert limited.to_ask(12345, 1 << 30) == []  # not a chunk's start


def test_a_parquet_footer_guides_readahead(six_row_groups):
    """Reading 3 of 20 columns through the engine: the later chunks are asked for ahead, the
    table is the same, and no more is read than without the index. (The file is larger than
    the engine's budget: one that fits is adaptive's to read whole once its reads land on
    cached pages.)"""
    import pyarrow.parquet as pq
    path, table = six_row_groups
    picked = ["c1", "c7", "c19"]
    stats = {}
    for guided in (True, False):
        engine = ahead.Engine(budget="4m", direct=False)
        if not guided:
            engine._format_ahead = 0
        got = pq.read_table(str(path), columns=picked, filesystem=AheadFileSystem(engine=engine))
        assert got.equals(table.select(picked))
        stats[guided] = engine.stats()
    with_index, without = stats[True], stats[False]
    assert with_index["ahead_requests"] > 0, with_index
    assert with_index["pages_read"] <= without["pages_read"] * 1.01 + 8, (with_index, without)


def test_a_projection_of_one_row_group_reads_its_chunks_and_a_full_scan_reads_ahead(tmp_path, s3):
    """One row group of 20 int64 columns (as a Dask partition often is), an S3 object: reading
    3 columns, the engine fetches those chunks and the footer, not the columns after each
    (without the index's guide it reads on into them); reading every column, it still reads
    ahead."""
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "one.parquet"
    table = int_columns(path, 400_000, 400_000)
    s3.put("tables/one.parquet", path.read_bytes())
    key = f"{BUCKET}/tables/one.parquet"
    meta = pq.read_metadata(path)
    picked = ["c2", "c9", "c17"]
    chunk_bytes = sum(meta.row_group(0).column(int(c[1:])).total_compressed_size for c in picked)
    fetched = {}
    for guided in (True, False):
        engine = ahead.Engine(budget="256m", storage_options=s3.options)
        if not guided:
            engine._format_ahead = 0
        fs = AheadFileSystem(target_protocol="s3", engine=engine)
        # As dask's reader reads a partition: its own open, pyarrow's pre-buffered reads.
        with fs.open(key, "rb", cache_type="none") as f:
            got = pq.ParquetFile(f, pre_buffer=True).read(columns=picked, use_threads=False)
        assert got.equals(table.select(picked))
        fetched[guided] = engine.stats()["pages_read"] * 4096
    footer_and_rounding = 256 << 10
    assert fetched[True] <= chunk_bytes * 1.05 + footer_and_rounding, (fetched, chunk_bytes)
    assert fetched[False] > fetched[True] * 1.5, (fetched, chunk_bytes)
    engine = ahead.Engine(budget="256m", storage_options=s3.options)
    with AheadFileSystem(target_protocol="s3", engine=engine).open(key, "rb", cache_type="none") as f:
        got = pq.ParquetFile(f, pre_buffer=False).read(use_threads=False)
    assert got.equals(table)
    assert engine.stats()["ahead_requests"] > 0, engine.stats()


def test_files_read_in_turn_for_the_same_columns_get_them_asked_for_from_the_footer(tmp_path, s3):
    """Files of one schema read in turn, as a Dask worker reads its partitions (an open each,
    pyarrow's pre-buffered reads): from the second on, the columns the last file was read for
    are asked for as soon as the footer is read, one read ahead each, and nothing more is read
    than without the guess. A reader that changes its columns costs one file's guess, then
    guesses only what the last two files agree on; footers read alone cost at most two."""
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "part.parquet"
    table = int_columns(path, 50_000, 50_000)
    meta = pq.read_metadata(path)
    chunk = {c: meta.row_group(0).column(c).total_compressed_size for c in range(20)}
    keys = [f"{BUCKET}/turns/part-{i}.parquet" for i in range(9)]
    for key in keys:
        s3.put(key.split("/", 1)[1], path.read_bytes())
    engine = ahead.Engine(budget="256m", storage_options=s3.options)
    fs = AheadFileSystem(target_protocol="s3", engine=engine)

    def read(key, picked):
        """(read ahead requests, bytes fetched) of one file read for `picked`."""
        with fs.open(key, "rb", cache_type="none") as f:
            got = pq.ParquetFile(f, pre_buffer=True).read(columns=picked, use_threads=False)
            stats = f.stats()
        assert got.equals(table.select(picked))
        return stats["ahead_requests"], stats["pages_read"] * 4096

    def fetched_at_most(picked):
        """The chunks of `picked` and the footer's read, rounded to pages."""
        return sum(chunk[int(c[1:])] for c in picked) + 64 * 1024 + 4096 * (len(picked) + 1)
    three, one = ["c2", "c9", "c17"], ["c4"]
    first = read(keys[0], three)
    assert first[0] == 0 and first[1] <= fetched_at_most(three), first
    for key in keys[1:3]:
        asked, fetched = read(key, three)
        assert asked == 3 and fetched == first[1], (key, asked, fetched, first)
    # Other columns: the guess of the last file's three is read for nothing, once.
    asked, fetched = read(keys[3], one)
    assert asked == 3 and fetched <= fetched_at_most(one) + fetched_at_most(three), (asked, fetched)
    asked, fetched = read(keys[4], one)  # the last two disagree: no guess
    assert asked == 0 and fetched <= fetched_at_most(one), (asked, fetched)
    asked, fetched = read(keys[5], one)  # they agree again
    assert asked == 1 and fetched <= fetched_at_most(one), (asked, fetched)
    # Footers alone (a metadata scan): two guesses unread, then none.
    guessed = []
    for key in keys[6:9]:
        with fs.open(key, "rb", cache_type="none") as f:
            assert pq.ParquetFile(f).metadata.num_columns == 20
            guessed.append(f.stats()["ahead_requests"])
    assert guessed == [1, 1, 0], guessed


def test_an_open_after_a_stat_is_pinned_to_what_the_stat_saw(s3):
    """pyarrow asks `info`, then opens: the open reuses the stat (no second round trip), and an
    object changed in between is an error on read, never the other version's bytes."""
    fs = AheadFileSystem(target_protocol="s3", **s3.s3fs_options)
    s3.put("pin/obj.bin", b"a" * 100_000)
    key = f"{BUCKET}/pin/obj.bin"
    assert fs.info(key)["size"] == 100_000
    s3.put("pin/obj.bin", b"b" * 200_000)
    with fs.open(key, "rb") as f:
        with pytest.raises(OSError) as changed:
            f.read()
    assert "changed" in str(changed.value)
    fs.invalidate_cache(key)  # fsspec's way to see a change: the next open asks again
    assert fs.cat_file(key) == b"b" * 200_000


def test_a_stat_opens_the_object_and_the_open_after_it_is_that_file(s3):
    """pyarrow's `PyFileSystem` (Ray Data's way in) asks `info`, then opens, then reads the
    footer: `info` opens the object by name, which brings its last bytes with its size and
    version in one round trip (a HEAD brought only those), and the open after it is that file,
    so the footer is there (the engine's own tests time it: `an_objects_last_bytes_come_with_
    its_open`). A second open, or one after the stat is forgotten, is a file of its own."""
    fs = AheadFileSystem(target_protocol="s3", budget="16m", **s3.s3fs_options)
    blob = random_bytes(1 << 20, 11)
    s3.put("stat-open/obj.bin", blob)
    key = f"{BUCKET}/stat-open/obj.bin"
    info = fs.info(key)
    assert info["size"] == len(blob) and info["type"] == "file"
    stated = fs._opened[fs._url(key)][1]
    with fs.open(key, "rb", cache_type="none") as f:
        assert f is stated and not fs._opened
        f.seek(len(blob) - (64 << 10))  # a footer's read (the first read takes the tail)
        assert f.read(64 << 10) == blob[-(64 << 10):]
        f.seek(0)
        assert f.read() == blob
    with fs.open(key, "rb", cache_type="none") as f:  # the stat's file was taken: a new one
        assert f is not stated and f.read() == blob
    # A prefix is stated as a directory (no object by that name), a missing name is an error.
    assert fs.info(f"{BUCKET}/stat-open")["type"] == "directory"
    with pytest.raises(FileNotFoundError):
        fs.info(f"{BUCKET}/stat-open/missing.bin")
    fs.invalidate_cache()
    fs.info(key)
    fs.invalidate_cache(key)  # forgets the stat and closes the file it opened
    assert not fs._opened
    assert fs.cat_file(key) == blob


def test_cat_ranges_reads_every_range_as_the_bytes_say(data, s3):
    path, blob = data
    remote = random_bytes(5 << 20, 41)
    url = s3.put("fs/ranges.bin", remote)
    local = AheadFileSystem()
    starts, ends = [0, 4095, -100, 1 << 20, len(blob) - 10, 7], [100, 8193, None, (1 << 20) + 3, len(blob) + 50, 7]
    got = local.cat_ranges([str(path)] * len(starts), starts, ends)
    assert got == [blob[s:e] for s, e in zip(starts, ends)]
    fs = AheadFileSystem(target_protocol="s3", **s3.s3fs_options)
    key = url[len("s3://"):]
    starts, ends = [3 << 20, 0, 1 << 20, 12345], [(3 << 20) + 4096, 1 << 20, 2 << 20, 99999]
    assert fs.cat_ranges([key] * 4, starts, ends) == [remote[s:e] for s, e in zip(starts, ends)]
    missing = fs.cat_ranges([f"{BUCKET}/fs/missing.bin", key], [0, 0], [10, 10])
    assert isinstance(missing[0], FileNotFoundError) and missing[1] == remote[:10]
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([f"{BUCKET}/fs/missing.bin"], [0], [10], on_error="raise")
