"""Readahead from a file format's own index: what a Parquet reader will read next is written
in the file's footer, so the engine need not guess it.

pyarrow reads a Parquet file through a Python file object one range at a time (its
``PythonFile`` holds a lock around each read), so a reader of three columns of seven row
groups waits a round trip per column chunk, one after another: pyarrow's own S3 client gets
them all at once (pre_buffer). Here, once a read has brought in the footer, every read that
starts a column chunk asks the engine (``willneed``) for the same column's chunks in the row
groups after it, as far as half the engine's budget allows, so their GETs overlap. Nothing
is read that a reader of those columns will not read; a reader that stops early wastes at
most that half budget.

A reader that skips chunks (a projection: the first chunk it reads is not the file's first, or
a chunk starts past where its last read ended) reads what the footer says and nothing between:
from then on the file's own policy speculates no further (``random``), since what follows a
chunk is another column, which that reader skips. Measured on files of one row group, where
no later chunk is asked for: the policy read on into the 17 columns not read, 4.1 bytes
fetched a byte read (docs/bench-log/issue-47-remote-cluster.md). A reader of every column
reads chunk after chunk and keeps the policy's readahead.
"""

from __future__ import annotations

import struct
import sys
from typing import Dict, List, Optional, Tuple

MAGIC = b"PAR1"


class ParquetReadahead:
    """Column chunks of one Parquet file, and which of them were asked for ahead."""

    def __init__(self, chunks: Dict[int, Tuple[int, int, int]], columns: Dict[int, List[int]]):
        # chunk start -> (column, row group, length); column -> chunk starts in row-group order
        self.chunks = chunks
        self.columns = columns
        self.asked: Dict[int, int] = {}  # chunk start -> length, asked for and not yet read
        self.ahead_bytes = 0
        self.first_start = min(chunks) if chunks else 0

    @classmethod
    def from_tail(cls, tail: bytes) -> Optional["ParquetReadahead"]:
        """From the file's last bytes (the footer and its length), if they hold a footer that
        pyarrow (already imported by the reader) can parse."""
        pq = sys.modules.get("pyarrow.parquet")
        if pq is None or len(tail) < 8 or tail[-4:] != MAGIC:
            return None
        (length,) = struct.unpack("<i", tail[-8:-4])
        if length <= 0 or length + 8 > len(tail):
            return None
        try:
            import pyarrow as pa
            meta = pq.read_metadata(pa.BufferReader(tail[-(length + 8):]))
        except Exception:  # not a footer after all: no hints, nothing else changes
            return None
        chunks: Dict[int, Tuple[int, int, int]] = {}
        columns: Dict[int, List[int]] = {}
        for r in range(meta.num_row_groups):
            group = meta.row_group(r)
            for c in range(group.num_columns):
                col = group.column(c)
                start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
                if start is None:
                    continue
                chunks[start] = (c, r, col.total_compressed_size)
                columns.setdefault(c, []).append(start)
        return cls(chunks, columns)

    def fresh(self) -> "ParquetReadahead":
        """The same index for another open of the file (pyarrow reads the footer through one
        and the columns through another), with nothing asked for yet."""
        return ParquetReadahead(self.chunks, self.columns)

    def skips_to(self, offset: int, read_end: Optional[int]) -> bool:
        """Whether a read at ``offset`` starts a column chunk past unread ones: past the file's
        first chunk for a first read (``read_end`` None), else past where the last one ended."""
        if offset not in self.chunks:
            return False
        return offset > (self.first_start if read_end is None else read_end)

    def to_ask(self, offset: int, limit: int) -> List[Tuple[int, int]]:
        """A read at `offset`: the ranges to ask for ahead (the same column's later chunks,
        within `limit` bytes asked for and not yet read)."""
        got = self.asked.pop(offset, None)
        if got is not None:
            self.ahead_bytes -= got
        chunk = self.chunks.get(offset)
        if chunk is None:
            return []
        column, group, _ = chunk
        out = []
        for start in self.columns[column][group + 1:]:
            if start in self.asked:
                continue
            length = self.chunks[start][2]
            if self.ahead_bytes + length > limit:
                break
            self.asked[start] = length
            self.ahead_bytes += length
            out.append((start, length))
        return out
