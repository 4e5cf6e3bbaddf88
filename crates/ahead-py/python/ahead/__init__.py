"""ahead: userspace readahead for local files and S3/HTTP objects.

Reads go through an :class:`Engine`: one cache under one memory budget, io_uring over
O_DIRECT for local files and ranged GETs for objects, and a readahead policy per open file
(``adaptive`` by default: windows sized from the latency and bandwidth it measures).

    >>> import ahead
    >>> with ahead.open("/var/log/syslog") as f:      # or "s3://bucket/key", "https://..."
    ...     head = f.read(4096)

``ahead.open`` returns what Python's ``open`` would: an ``io.BufferedReader`` over an
:class:`File` (an ``io.RawIOBase``), or the raw file itself with ``buffering=0``. Every read
releases the GIL; ``File.pread`` reads at an offset without moving the position, for thread
pools. Errors are ``OSError`` subclasses with ``errno`` and ``filename``, as Python's own.

fsspec: the protocol ``ahead`` (``ahead::s3://bucket/key``, ``ahead::/local/path``), see
:mod:`ahead.fs`. The simulator: :func:`sim` and :func:`replay` return the CLI's JSON records.

Processes: an :class:`Engine` pickles as its configuration, and is unpickled as the receiving
process's engine of that configuration, built at its first use there (so a Dask or Ray worker
builds one engine, however many tasks carry it). A process forked after an engine exists (a
``multiprocessing`` pool or a PyTorch ``DataLoader`` with ``fork``) never uses the parent's
engine, whose threads it does not have: its engines are built anew at their first use, and a
file opened before the fork is opened again (pinned to the same version) at its first read.
"""

from __future__ import annotations

import io
import json
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, Optional, Tuple, Union

from . import _ahead
from ._formats import ParquetReadahead, Projections

__all__ = ["Engine", "File", "UnpinnedWarning", "open", "default_engine", "sim", "replay", "policies", "readers",
           "reader_reads"]

Size = Union[int, str]
PathLike = Union[str, "os.PathLike[str]"]


class UnpinnedWarning(RuntimeWarning):
    """An object opened with nothing to pin its version by (its server gives neither ETag nor
    Last-Modified): a same-size replacement while it is read may mix two versions' bytes."""


class Engine:
    """One cache under one memory budget, its I/O backend, and the files opened through it.

    budget: bytes, or a size such as ``"1g"`` (a hard limit on the cache's memory).
    policy: ``"adaptive"`` (default), ``"linux-ondemand"``, ``"fixed"``, ``"none"``, ...
    backend: ``"auto"`` (io_uring if it works), ``"uring"``, ``"threads"`` or ``"sync"``.
    direct: read local files with O_DIRECT (past the kernel's page cache) where possible.
    budget_over_memory: take a budget above the memory this process can have (the machine's
        RAM or its memory cgroup's limit), which is refused (``ValueError``) otherwise.
    storage_options: settings for remote objects, object_store's keys (``endpoint``,
        ``region``, ``access_key_id``, ``secret_access_key``, ``allow_http``, ...); the
        ``AWS_*`` environment variables are read as AWS tools read them.
    **settings: any other of the engine's settings by name, as ``ahead cat -o KEY=VALUE`` and
        ``EngineBuilder::set`` take them (one table: sizes in bytes or as text, switches as
        bools): ``window_max``, ``request_max``, ``threads``, ``leases``, ``drop_behind``,
        ``pretouch``, ``fault_ahead``, ``keep_memory``.
    """

    def __init__(
        self,
        budget: Optional[Size] = None,
        policy: Optional[str] = None,
        backend: Optional[str] = None,
        direct: bool = True,
        storage_options: Optional[Dict[str, Any]] = None,
        budget_over_memory: bool = False,
        **settings: Any,
    ) -> None:
        self._start(_config_of(budget=budget, policy=policy, backend=backend, direct=direct,
                               storage_options=storage_options, budget_over_memory=budget_over_memory,
                               **settings))
        self._engine  # built here, so a setting it refuses is an error now

    def _start(self, config: "_Config") -> None:
        """An engine of ``config``, its native part not built yet (see ``_engine``)."""
        self._config = config
        self._native: "Optional[_ahead.Engine]" = None
        self._build_lock = threading.Lock()
        # The indexes read so far, by name and size (_formats).
        self._indexes = _Indexes()
        _processes.engines.add(self)

    @classmethod
    def _of_config(cls, config: "_Config") -> "Engine":
        """This process's engine of ``config`` (what an unpickled engine is): one per
        configuration and process, its native part built at its first use."""
        with _processes.lock:
            engine = _processes.by_config.get(config)
            if engine is None:
                engine = cls.__new__(cls)
                engine._start(config)
                _processes.by_config[config] = engine
            return engine

    def __reduce__(self):
        return (Engine._of_config, (self._config,))

    @property
    def _engine(self) -> "_ahead.Engine":
        """The native engine, built at first use in this process."""
        native = self._native
        if native is None:
            with self._build_lock:
                native = self._native
                if native is None:
                    settings, options = self._config
                    native = _ahead.Engine(list(settings), dict(options) or None)
                    # What a file may ask for ahead from its format's index: half the budget.
                    self._format_ahead = native.budget // 2
                    self._native = native
        return native

    def open(self, path: PathLike, mode: str = "rb", buffering: int = -1, encoding: Optional[str] = None,
             errors: Optional[str] = None, newline: Optional[str] = None, *, policy: Optional[str] = None):
        """Open ``path`` (a local path, ``s3://bucket/key`` or ``http(s)://host/path``) for
        reading, as Python's ``open`` does: ``"rb"`` gives an ``io.BufferedReader`` (or, with
        ``buffering=0``, the raw :class:`File`), ``"r"`` an ``io.TextIOWrapper``. ``policy``
        picks another readahead policy for this file."""
        return _open(self, path, mode, buffering, encoding, errors, newline, policy)

    def _open_known(self, info: Dict[str, Any]) -> "File":
        """The raw file of the object ``info`` (from :meth:`info`) describes, opened without
        asking the store again (its ETag, or its size and mtime, pin the version)."""
        name, size, etag, mtime_ns = info["name"], info["size"], info.get("ETag"), info.get("mtime_ns", 0)
        return self._file(lambda native: native.open_known(name, size, etag, mtime_ns))

    def _file(self, opener: "Callable[[_ahead.Engine], _ahead.RawFile]") -> "File":
        """The :class:`File` ``opener`` opens on this engine (its format readahead included).
        A process forked later opens it again with ``opener``, pinned to the version opened."""
        raw = opener(self._engine)
        file = File(raw, "rb", self._format_ahead, self._indexes)
        pinned = raw.pinned()
        if pinned is not None:
            # An object: opened again at the version this open found (a change since is an
            # error on read, never the other version's bytes).
            opener = lambda native: native.open_known(*pinned)  # noqa: E731
        file._reopen = (self, opener)
        return file

    def stats(self) -> Dict[str, Any]:
        """What the engine has done so far: the Rust ``Stats``'s fields, by the same names."""
        return json.loads(self._engine.stats_json())

    def info(self, name: str) -> Dict[str, Any]:
        """``{"name", "size", "type", "mtime", "ETag"}`` of what ``name`` is: a local path or an
        object URL (a prefix is a ``"directory"``), as the engine's one table of sources says."""
        return _info_of(self._engine.stat(os.fspath(name)))

    def ls(self, name: str):
        """What is directly under ``name`` (a local directory, ``s3://bucket/dir/``), as
        :meth:`info` gives it; a file lists as itself."""
        return [_info_of(entry) for entry in self._engine.list(os.fspath(name))]

    def __repr__(self) -> str:
        stats = self.stats()
        # The address too, as Python's default repr: fsspec tells filesystems apart by their
        # arguments' text, and two engines alike are still two caches.
        return (f"<ahead.Engine at {id(self):#x} budget={stats['budget_bytes']} policy={stats['policy']!r} "
                f"backend={stats['backend']!r}>")


class _Indexes:
    """Format indexes (Parquet footers) read through an engine's files, by (name, size): the
    last 64, so a reopen finds what the first open read; and the columns each schema's files
    were read for (``projections``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: "Dict[Any, ParquetReadahead]" = {}
        self.projections = Projections()

    def get(self, key):
        with self._lock:
            return self._known.get(key)

    def remember(self, key, index: ParquetReadahead) -> None:
        with self._lock:
            if len(self._known) >= 64:
                self._known.pop(next(iter(self._known)))
            self._known[key] = index


def _setting_text(key: str, value: Any) -> str:
    """An engine setting as the library's table takes it: text (a store's option is
    written alike, without the type check)."""
    if not isinstance(value, (bool, int, str)):
        raise TypeError(f"{key} must be a number of bytes, a size such as '256m', a name or a bool")
    return _option_text(value)


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _info_of(entry) -> Dict[str, Any]:
    name, size, is_dir, etag, mtime_ns = entry
    info: Dict[str, Any] = {"name": name, "size": size, "type": "directory" if is_dir else "file"}
    if etag is not None:
        info["ETag"] = etag
    if mtime_ns:
        info["mtime"] = mtime_ns / 1e9
        info["mtime_ns"] = mtime_ns
    return info


class File(io.RawIOBase):
    """A file or object read through an engine: a real ``io.RawIOBase``.

    ``readinto`` fills the caller's buffer in place; ``pread(n, offset)`` reads at an
    offset without moving the position (safe from many threads at once); ``advise`` tells
    the policy what is coming. ``len(f)`` is the size as opened.
    """

    def __init__(self, raw: "_ahead.RawFile", mode: str = "rb", ahead_limit: int = 0,
                 indexes: Optional["_Indexes"] = None) -> None:
        super().__init__()
        self._raw = raw
        self._name = raw.name
        # (engine, opener): how a process forked after this open opens it again.
        self._reopen: "Optional[Tuple[Engine, Callable[[_ahead.Engine], _ahead.RawFile]]]" = None
        _processes.files.add(self)
        self._pos = 0
        self._size = raw.size()
        self.mode = mode
        # Readahead from the file's own index (a Parquet footer, see _formats), within this
        # many bytes; 0: none. An index read through an earlier open of the same file is used.
        self._ahead_limit = ahead_limit
        self._indexes = indexes
        known = indexes.get((raw.name, self._size)) if indexes is not None else None
        self._format: Optional[ParquetReadahead] = known.fresh() if known else None
        # Where the last read of a column chunk ended (None: none yet), and whether this open
        # reads only what the index says (a reader that skips chunks: see _formats).
        self._chunk_read_end: Optional[int] = None
        self._only_indexed = False
        unpinned = raw.unpinned()
        if unpinned is not None:
            warnings.warn(unpinned, UnpinnedWarning, stacklevel=3)

    def _observe(self, offset: int, data) -> None:
        """A read of `data` at `offset` happened (the reads call this only while looking for
        an index, once the index is known or on the read that reaches the end): learn the
        footer it held, or ask ahead for what the format says comes next."""
        if self._format is None:
            if len(data) < 8:
                return  # too little of the tail to tell
            self._format = ParquetReadahead.from_tail(bytes(data))
            if self._format is None:
                self._ahead_limit = 0  # not a format with an index: stop looking
            elif self._indexes is not None:
                self._indexes.remember((self.name, self._size), self._format)
                # The columns this file's schema was last read for, asked for now (_formats).
                guess = self._indexes.projections.guess(self._format)
                if guess:
                    for start, length in self._format.ask_columns(guess, self._ahead_limit):
                        self._raw.advise("willneed", start, length)
            return
        self._format.note_read(offset, len(data))
        if offset in self._format.chunks:
            self._chunk_read_end = offset + len(data)
        for start, length in self._format.to_ask(offset, self._ahead_limit):
            self._raw.advise("willneed", start, length)

    def _before(self, offset: int) -> None:
        """A read at `offset` is about to happen and the index is known: a reader that skips
        chunks gets no speculation past them (_formats)."""
        if not self._only_indexed and self._format.skips_to(offset, self._chunk_read_end):
            self._only_indexed = True
            self._raw.advise("random", 0, 0)

    @property
    def name(self) -> str:
        return self._name

    def readable(self) -> bool:
        self._checkClosed()
        return True

    def seekable(self) -> bool:
        self._checkClosed()
        return True

    def writable(self) -> bool:
        self._checkClosed()
        return False

    # The hot paths: a closed file is the native side's error (ValueError, as Python's);
    # the format index is looked at only once known, or on the read that reaches the end.

    def readinto(self, buffer) -> int:
        view = memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        pos = self._pos
        if self._format is not None and self._ahead_limit:
            self._before(pos)
        n = self._raw.readinto(view, pos)
        self._pos = pos + n
        if self._ahead_limit and (self._format is not None or pos + n >= self._size):
            self._observe(pos, view[:n])
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        pos = self._pos
        if self._format is not None and self._ahead_limit:
            self._before(pos)
        data = self._raw.pread(size, pos)
        self._pos = pos + len(data)
        if self._ahead_limit and (self._format is not None or self._pos >= self._size):
            self._observe(pos, data)
        return data

    def readall(self) -> bytes:
        self._checkClosed()
        data = self._raw.pread(max(self._size - self._pos, 0), self._pos)
        self._pos += len(data)
        return data

    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer at the end), as ``os.pread``; the position
        does not move."""
        self._checkClosed()
        if n < 0 or offset < 0:
            raise ValueError("pread() takes a length and an offset of 0 or more")
        if self._format is not None and self._ahead_limit:
            self._before(offset)
        data = self._raw.pread(n, offset)
        if self._ahead_limit and (self._format is not None or offset + len(data) >= self._size):
            self._observe(offset, data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            at = offset
        elif whence == io.SEEK_CUR:
            at = self._pos + offset
        elif whence == io.SEEK_END:
            at = self._size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if at < 0:
            raise OSError(22, "Invalid argument", self.name)
        self._pos = at
        return at

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def advise(self, advice: str, offset: int = 0, length: int = 0) -> None:
        """``"normal"``, ``"sequential"``, ``"random"``, ``"willneed"`` or ``"dontneed"``
        (the last two for ``length`` bytes from ``offset``), as ``os.posix_fadvise``."""
        self._checkClosed()
        self._raw.advise(advice, offset, length)

    def stats(self) -> Dict[str, Any]:
        """This file's figures (reads, hit and miss pages, requests, pages read and wasted,
        stall time, ...): the engine's counters, for this file alone."""
        self._checkClosed()
        return json.loads(self._raw.stats_json())

    def is_direct(self) -> bool:
        """Whether reads bypass the kernel's page cache (O_DIRECT)."""
        self._checkClosed()
        return self._raw.is_direct()

    def fileno(self) -> int:
        raise io.UnsupportedOperation("an ahead file has no descriptor of its own to share")

    def truncate(self, size=None):
        raise io.UnsupportedOperation("ahead files are read-only")

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        if not self.closed and not isinstance(self._raw, _Reopening):
            self._raw.close()
        super().close()

    def __repr__(self) -> str:
        return f"<ahead.File name={self.name!r} size={self._size}>"


_default_engine: Optional[Engine] = None
_default_lock = threading.Lock()

# An engine's configuration: its settings as text, and its store's options as text, sorted.
_Config = Tuple[Tuple[Tuple[str, str], ...], Tuple[Tuple[str, str], ...]]


def _config_of(budget: Optional[Size] = None, policy: Optional[str] = None, backend: Optional[str] = None,
               direct: bool = True, storage_options: Optional[Dict[str, Any]] = None,
               budget_over_memory: bool = False, **settings: Any) -> _Config:
    """The configuration of an engine made with these arguments, :class:`Engine`'s, with its
    defaults (types checked here)."""
    given = dict(budget=budget, policy=policy, backend=backend, direct=direct,
                 budget_over_memory=budget_over_memory, **settings)
    options = {str(k): _option_text(v) for k, v in (storage_options or {}).items()}
    settings = tuple((key, _setting_text(key, value)) for key, value in given.items() if value is not None)
    return settings, tuple(sorted(options.items()))


class _Processes:
    """What a forked child must not inherit: the engines and files of this process (weakly),
    the engines unpickled here by configuration, and the parent's native parts the child keeps
    but never uses or frees (their threads are not in it; their locks may be held by them)."""

    def __init__(self) -> None:
        self.engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()
        self.files: "weakref.WeakSet[File]" = weakref.WeakSet()
        self.by_config: Dict[Any, Engine] = {}
        self.lock = threading.Lock()
        self.inherited: list = []

    def after_fork_in_child(self) -> None:
        global _default_lock
        self.lock = threading.Lock()
        _default_lock = threading.Lock()
        for engine in list(self.engines):
            if engine._native is not None:
                self.inherited.append(engine._native)
                engine._native = None
            engine._build_lock = threading.Lock()
            engine._indexes = _Indexes()
        for file in list(self.files):
            if file._raw is not None and not file.closed:
                self.inherited.append(file._raw)
                file._raw = _Reopening(file)
                if file._reopen is not None:
                    file._indexes = file._reopen[0]._indexes


class _Reopening:
    """A file's raw part in a process forked after it was opened: its first use opens the file
    again through this process's engine (pinned to the version first opened) and stands aside."""

    def __init__(self, file: "File") -> None:
        self._file = file

    def __getattr__(self, name: str):
        file = self._file
        if file._reopen is None:
            raise OSError(f"{file.name}: opened before this process was forked, and cannot be opened again here")
        engine, opener = file._reopen
        raw = opener(engine._engine)
        file._raw = raw
        return getattr(raw, name)


_processes = _Processes()
os.register_at_fork(after_in_child=_processes.after_fork_in_child)


def default_engine() -> Engine:
    """The engine behind :func:`open` and the fsspec filesystem, made at first use with the
    default settings (256 MiB, ``adaptive``, io_uring where it works)."""
    global _default_engine
    with _default_lock:
        if _default_engine is None:
            _default_engine = Engine()
        return _default_engine


def _open(engine: Engine, path: PathLike, mode: str, buffering: int, encoding, errors, newline, policy):
    if not isinstance(mode, str) or set(mode) - set("rbt") or "r" not in mode or ("b" in mode and "t" in mode):
        raise ValueError(f"invalid mode {mode!r}: ahead opens files for reading ('rb' or 'r')")
    name = os.fspath(path)
    raw = engine._file(lambda native: native.open(name, policy))
    binary = "b" in mode
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
    if buffering == 0:
        if not binary:
            raise ValueError("can't have unbuffered text I/O")
        return raw
    size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
    buffered = io.BufferedReader(raw, size)
    if binary:
        return buffered
    return io.TextIOWrapper(buffered, encoding, errors, newline)


def open(path: PathLike, mode: str = "rb", buffering: int = -1, encoding: Optional[str] = None,
         errors: Optional[str] = None, newline: Optional[str] = None, *, policy: Optional[str] = None,
         engine: Optional[Engine] = None):
    """Open ``path`` (a local path, ``s3://bucket/key`` or ``http(s)://host/path``) for
    reading through ``engine`` (the default engine if none), as Python's ``open`` does."""
    return _open(engine or default_engine(), path, mode, buffering, encoding, errors, newline, policy)


def sim(pattern: str, policy: str = "all", device: str = "nvme", cache: Optional[Size] = None, ra_max: Optional[Size] = None,
        io_max: Optional[Size] = None, compute_us: float = 0.0, eviction: str = "lru") -> Dict[str, Any]:
    """``ahead sim --pattern PATTERN --json``: every policy (and the oracle) on a pattern
    such as ``"seq:size=256m,bs=4k"``, modelled; ``result["results"]`` holds a record per
    policy with the CLI's field names. ``device``: ``nvme``, ``hdd``, ``remote`` or the path
    of a profile ``ahead calibrate`` measured."""
    model = dict(policy=policy, device=device, cache=cache, ra_max=ra_max, io_max=io_max, compute_us=float(compute_us),
                 eviction=eviction)
    return json.loads(_ahead.sim_json(pattern, model))


def replay(path: PathLike, policy: str = "all", device: str = "nvme", cache: Optional[Size] = None, ra_max: Optional[Size] = None,
           io_max: Optional[Size] = None, compute_us: float = 0.0, eviction: str = "lru") -> Dict[str, Any]:
    """``ahead replay PATH --json``: a recorded trace (strace log, CSV, or a directory of
    ``ahead trace --kernel``) through every policy; ``device`` as :func:`sim` takes it."""
    model = dict(policy=policy, device=device, cache=cache, ra_max=ra_max, io_max=io_max, compute_us=float(compute_us),
                 eviction=eviction)
    return json.loads(_ahead.replay_json(os.fspath(path), model))


def policies():
    """The registered policies' names."""
    return list(_ahead.policy_names())


def readers():
    """The named readers every bench reads (``ahead bench``, ``ahead bench --remote``, this
    package's bench): ``[(name, about), ...]``."""
    return list(_ahead.readers())


def reader_reads(name: str, size: int):
    """The reads of the reader ``name`` over a file of ``size`` bytes, lazily: ``(offset,
    length)`` pairs, the same reads the Rust benches make (``ValueError`` for an unknown name)."""
    return _ahead.reader_reads(name, size)
