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

Files read in turn (a dataset, a Dask worker's partitions) are read for the same columns, and
pyarrow reads each file's chunks one after another, a round trip each. So the engine keeps, for
each schema, which columns its last files were read for (``Projections``), and the next
file's chunks of those columns are asked for (``willneed``) as soon as its footer is read, so
they land together. A guess is the last file's columns until a guess misses (a file read for
other columns than guessed); from then on only columns the last two files agree on. A reader
that changes its columns costs one file's guess each time; one that reads footers only (a
metadata scan) costs at most two (guesses not yet read stop the guessing).
"""

from __future__ import annotations

import bisect
import struct
import sys
import threading
from collections import deque
from typing import Deque, Dict, FrozenSet, List, Optional, Set, Tuple

MAGIC = b"PAR1"


class FileReads:
    """Which columns of one Parquet file were read (through any of its opens), and which were
    guessed from the files before it."""

    __slots__ = ("columns", "guessed")

    def __init__(self) -> None:
        self.columns: Set[int] = set()
        self.guessed: FrozenSet[int] = frozenset()


class ParquetReadahead:
    """Column chunks of one Parquet file, and which of them were asked for ahead."""

    def __init__(self, chunks: Dict[int, Tuple[int, int, int]], columns: Dict[int, List[int]],
                 schema: Tuple[str, ...] = (), reads: Optional[FileReads] = None):
        # chunk start -> (column, row group, length); column -> chunk starts in row-group order
        self.chunks = chunks
        self.columns = columns
        self.starts = sorted(chunks)
        self.schema = schema  # the columns' paths: files alike share their readers' projections
        self.reads = reads if reads is not None else FileReads()
        self.asked: Dict[int, int] = {}  # chunk start -> length, asked for and not yet read
        self.ahead_bytes = 0
        self.first_start = self.starts[0] if chunks else 0

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
        schema = tuple(meta.schema.column(i).path for i in range(len(meta.schema)))
        return cls(chunks, columns, schema)

    def fresh(self) -> "ParquetReadahead":
        """The same index for another open of the file (pyarrow reads the footer through one
        and the columns through another), with nothing asked for yet."""
        return ParquetReadahead(self.chunks, self.columns, self.schema, self.reads)

    def note_read(self, offset: int, length: int) -> None:
        """A read of `length` bytes at `offset`: the columns whose chunks start in it were read
        (pyarrow merges chunks a few KiB apart into one read)."""
        starts = self.starts
        i = bisect.bisect_left(starts, offset)
        end = offset + length
        while i < len(starts) and starts[i] < end:
            self.reads.columns.add(self.chunks[starts[i]][0])
            i += 1

    def ask_columns(self, columns: FrozenSet[int], limit: int) -> List[Tuple[int, int]]:
        """The first row group's chunks of `columns`, to ask for ahead (within `limit` bytes);
        the later groups' follow as each is read (`to_ask`)."""
        firsts = [self.columns[column][0] for column in sorted(columns) if column in self.columns]
        out = self._ask_within(firsts, limit)
        self.reads.guessed = frozenset(self.chunks[start][0] for start, _ in out)
        return out

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
        return self._ask_within(self.columns[column][group + 1:], limit)

    def _ask_within(self, starts: List[int], limit: int) -> List[Tuple[int, int]]:
        """The chunks at `starts` not yet asked for, in order, as ranges to ask for ahead, as
        far as `limit` bytes asked for and not yet read allow; recorded as asked."""
        out = []
        for start in starts:
            if start in self.asked:
                continue
            length = self.chunks[start][2]
            if self.ahead_bytes + length > limit:
                break
            self.asked[start] = length
            self.ahead_bytes += length
            out.append((start, length))
        return out


class Projections:
    """The columns the files of each schema were read for, by schema (the last 16), each as
    the last few files' ``FileReads`` in the order their footers were read."""

    KEPT_FILES = 8
    KEPT_SCHEMAS = 16
    # Guesses not yet read (footers read, chunks not) after which no more are made.
    UNREAD_GUESSES_MAX = 2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: Dict[Tuple[str, ...], Deque[FileReads]] = {}
        self._missed: Set[Tuple[str, ...]] = set()  # schemas a guess missed on

    def guess(self, index: ParquetReadahead) -> FrozenSet[int]:
        """The columns a reader of `index`'s file (its footer just read) will read: those the
        last file of its schema was read for, or after a miss those the last two agree on;
        none otherwise. The file is then one of its schema's files."""
        schema = index.schema
        with self._lock:
            files = self._files.get(schema)
            if files is None:
                if len(self._files) >= self.KEPT_SCHEMAS:
                    self._files.pop(next(iter(self._files)))
                    self._missed &= set(self._files)
                files = self._files[schema] = deque(maxlen=self.KEPT_FILES)
            # A file that read some of its columns but not all those guessed for it is a miss
            # (or is still being read: the safer guess then follows).
            if any(f.guessed and f.columns and not f.guessed <= f.columns for f in files):
                self._missed.add(schema)
            read = [f.columns for f in files if f.columns]
            unread_guesses = sum(1 for f in files if f.guessed and not f.columns)
            guess: FrozenSet[int] = frozenset()
            if read and unread_guesses < self.UNREAD_GUESSES_MAX:
                if schema not in self._missed:
                    guess = frozenset(read[-1])
                elif len(read) >= 2 and read[-1] == read[-2]:
                    guess = frozenset(read[-1])
            files.append(index.reads)
            return guess
