"""fsspec filesystem ``ahead``: anything that takes an fsspec URL reads through the engine.

    pd.read_parquet("ahead::s3://bucket/table.parquet")
    pyarrow.dataset.dataset("bucket/dir/", filesystem=AheadFileSystem(target_protocol="s3"))
    fsspec.open("ahead::/data/big.bin").open().read()

A chained URL ``ahead::s3://bucket/key`` (or ``ahead::https://host/path``,
``ahead::/local/path``) names the store after ``::``; fsspec parses that part with the store's
own filesystem class (so ``s3://`` needs s3fs importable, ``https://`` aiohttp, as for any
fsspec chain), and every byte is then read by the engine. Without a chain,
``fsspec.filesystem("ahead")`` takes full URLs and local paths.

Options (``storage_options``, or ``{"s3": {...}}`` for a chain's inner part): the engine's
``budget``, ``policy`` and ``backend`` (a filesystem with none of them shares the default
engine), and the store's: s3fs's names (``key``, ``secret``, ``token``, ``endpoint_url``,
``client_kwargs={"endpoint_url", "region_name"}``, ``anon``) or object_store's own
(``endpoint``, ``region``, ``access_key_id``, ...). An option neither knows is an error that
names it. Read-only: writing modes raise.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

try:  # fsspec 2025.3 and later mark chaining filesystems with this class
    from fsspec.implementations.chained import ChainedFileSystem as _Base
except ImportError:  # pragma: no cover - older fsspec
    from fsspec import AbstractFileSystem as _Base

from . import Engine, _config_of, _info_of, default_engine

# s3fs's tuning options with no meaning here (the engine sizes its own reads).
_IGNORED = {
    "default_block_size", "default_fill_cache", "default_cache_type", "use_listings_cache",
    "listings_expiry_time", "max_paths", "skip_instance_cache", "asynchronous", "loop",
    "cache_regions", "use_ssl", "config_kwargs", "s3_additional_kwargs", "session",
    "version_aware", "fixed_upload_size", "max_concurrency",
}
# How long a remote object's stat is reused (an open after it pins the version by ETag, so a
# change after that is an error on read, never mixed data).
STAT_SECONDS = 5.0
# Objects `info` opened to state them (an open by name brings the object's last bytes with its
# size and ETag in one round trip, where a HEAD brings only those), each kept for the open that
# usually follows (pyarrow's `PyFileSystem` asks `info`, then opens): at most this many, for
# STAT_SECONDS. Each holds at most the engine's tail (68 KiB, within its process-wide bound).
OPENED_KEPT = 32
# s3fs's names for object_store's.
_RENAMED = {"key": "access_key_id", "secret": "secret_access_key", "token": "token",
            "endpoint_url": "endpoint", "region_name": "region", "region": "region"}


def _store_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options by object_store's names (values as given: the Engine makes them text)."""
    out: Dict[str, Any] = {}
    for name, value in options.items():
        if value is None or name in _IGNORED:
            continue
        if name == "client_kwargs":
            out.update(_store_options(dict(value)))
        elif name == "anon":
            if value:
                out["skip_signature"] = True
        else:
            out[_RENAMED.get(name, name)] = value
    return out


class AheadFileSystem(_Base):
    """Reads local files, S3 objects and HTTP(S) objects through an :class:`ahead.Engine`."""

    protocol = "ahead"
    root_marker = ""

    def __init__(
        self,
        target_protocol: Optional[str] = None,
        target_options: Optional[Dict[str, Any]] = None,
        fo: Optional[str] = None,
        engine: Optional[Engine] = None,
        budget=None,
        policy: Optional[str] = None,
        backend: Optional[str] = None,
        **storage_options: Any,
    ) -> None:
        super().__init__()
        protocol = (target_protocol or "").lower()
        if protocol in ("s3a", "s3n"):
            protocol = "s3"
        if protocol in ("file", "local"):
            protocol = ""
        if protocol not in ("", "s3", "http", "https"):
            raise ValueError(f"ahead reads local files, s3:// and http(s):// objects, not {target_protocol}://")
        self.target_protocol = protocol
        options = dict(target_options or {})
        options.update(storage_options)
        store = _store_options(options)
        # The engine: the one given, or this process's engine of these settings, or the default
        # one; found at first use, so a filesystem unpickled in a worker process (Dask, Ray)
        # builds no engine until it reads, and every one alike there shares one.
        self._engine = engine
        self._engine_config = None
        if engine is None and (budget is not None or policy is not None or backend is not None or store):
            self._engine_config = _config_of(budget=budget, policy=policy, backend=backend, storage_options=store)
        # Objects stated in the last STAT_SECONDS, by URL: (when, info). pyarrow asks `info`
        # two or three times and opens twice per file read; each was a round trip.
        self._stats: Dict[str, Any] = {}
        # Objects `info` opened, by URL: (when, File), for the next `_open` of the URL.
        self._opened: Dict[str, Any] = {}

    @property
    def engine(self) -> Engine:
        if self._engine is not None:
            return self._engine
        if self._engine_config is not None:
            return Engine._of_config(self._engine_config)
        return default_engine()

    # -- names ------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = os.fspath(path)
        for prefix in ("ahead::", "ahead://"):
            if path.startswith(prefix):
                path = path[len(prefix):]
        return path

    def _url(self, path: str) -> str:
        """The engine's name for ``path``: a URL, or a local path."""
        path = self._strip_protocol(path)
        if self.target_protocol == "s3":
            return path if path.startswith("s3://") else "s3://" + path.lstrip("/")
        if self.target_protocol in ("http", "https"):
            return path if "://" in path else f"{self.target_protocol}://{path}"
        return path

    def _name(self, url: str) -> str:
        """``url`` as this filesystem names its paths (what ``ls`` and ``info`` return)."""
        if self.target_protocol == "s3" and url.startswith("s3://"):
            return url[len("s3://"):].rstrip("/")
        return url.rstrip("/") if url.endswith("/") and len(url) > 1 else url

    # -- reading ----------------------------------------------------------------------------

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError(f"ahead is read-only: cannot open {path!r} with mode {mode!r}")
        url = self._url(path)
        opened = self._opened.pop(url, None)
        if opened is not None and time.monotonic() - opened[0] < STAT_SECONDS:
            # Stated by opening it (with its last bytes): that file, unread, is this open.
            return opened[1]
        if opened is not None:
            opened[1].close()
        known = self._kept(url)
        if known is not None and known["type"] == "file":
            # Just stated (pyarrow asks `info`, then opens): no second round trip.
            return self.engine._open_known(known)
        return self.engine.open(url, "rb", buffering=0)

    def cat_file(self, path, start=None, end=None, **kwargs):
        with self._open(path) as f:
            start, end = self._bounds(len(f), start, end)
            if end <= start:
                return b""
            return f.pread(end - start, start)

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        # fsspec's own reads them one after another (a round trip each, where s3fs's async
        # client sends them at once); fsspec.parquet asks for a file's column chunks this way.
        # Here every range is asked for ahead first (`willneed`: the engine's GETs all go out
        # at once, under its budget), then each is read as it lands.
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("cat_ranges: paths, starts and ends differ in length")
        files, out = {}, []
        try:
            for path, start, end in zip(paths, starts, ends):
                f = files.get(path)
                if f is None:
                    try:
                        f = files[path] = self._open(path)
                    except Exception as e:  # noqa: BLE001 - fsspec returns or raises it, as asked
                        if on_error == "raise":
                            raise
                        files[path] = e
                        continue
                if isinstance(f, Exception):
                    continue
                lo, hi = self._bounds(len(f), start, end)
                if hi > lo:
                    f.advise("willneed", lo, hi - lo)
            for path, start, end in zip(paths, starts, ends):
                f = files[path]
                if isinstance(f, Exception):
                    out.append(f)
                    continue
                lo, hi = self._bounds(len(f), start, end)
                try:
                    out.append(f.pread(hi - lo, lo) if hi > lo else b"")
                except Exception as e:  # noqa: BLE001
                    if on_error == "raise":
                        raise
                    out.append(e)
        finally:
            for f in files.values():
                if not isinstance(f, Exception):
                    f.close()
        return out

    @staticmethod
    def _bounds(size: int, start, end):
        """`start` and `end` (None, or negative from the end) as offsets within `size`."""
        start = 0 if start is None else (start if start >= 0 else max(size + start, 0))
        end = size if end is None else (end if end >= 0 else max(size + end, 0))
        return min(start, size), min(end, size)

    # -- metadata ---------------------------------------------------------------------------

    def info(self, path, **kwargs):
        # The engine says what a name is, local or remote (its one table of sources). A remote
        # answer is kept STAT_SECONDS, as pyarrow asks `info` and then opens: one round trip.
        url = self._url(path)
        known = self._kept(url)
        if known is None:
            known = self._state_by_opening(url) or self.engine.info(url)
            self._keep([(url, known)])
        return dict(known, name=self._name(known["name"]))

    def _state_by_opening(self, url: str):
        """The stat of the object ``url`` names, got by opening it, the file kept for the open
        that follows; None for what is not an object's name (a prefix, a local path, a name
        that ends in ``/``), which the engine's stat then answers."""
        if not self.target_protocol or url.endswith("/"):
            return None
        try:
            f = self.engine.open(url, "rb", buffering=0)
        except FileNotFoundError:
            return None  # a prefix (a directory), or nothing: the stat says which
        pinned = f._raw.pinned()
        if pinned is None:
            f.close()
            return None
        name, size, etag, mtime_ns = pinned
        now = time.monotonic()
        for old_url, (when, old) in list(self._opened.items()):
            if now - when >= STAT_SECONDS or len(self._opened) >= OPENED_KEPT:
                if self._opened.pop(old_url, None) is not None:
                    old.close()
        previous = self._opened.pop(url, None)
        if previous is not None:
            previous[1].close()
        self._opened[url] = (now, f)
        return _info_of((name, size, False, etag, mtime_ns))

    def ls(self, path, detail=True, **kwargs):
        url = self._url(path)
        info = self.info(path)  # the stat kept for an open, or one made now
        if info["type"] == "file":
            entries = [info]
        else:
            listed = self.engine.ls(url)
            # A listing states its objects: an `info` or open of one soon after asks nothing
            # again (a Parquet dataset is listed, then each file opened).
            self._keep([(e["name"], e) for e in listed if e["type"] == "file"])
            entries = [dict(e, name=self._name(e["name"])) for e in listed]
        return entries if detail else [e["name"] for e in entries]

    def _kept(self, url: str):
        """The stat of ``url`` kept in the last STAT_SECONDS, or None."""
        known = self._stats.get(url)
        return known[1] if known is not None and time.monotonic() - known[0] < STAT_SECONDS else None

    def _keep(self, stats) -> None:
        """Keep remote objects' stats, ``(url, info)`` pairs (the last 1,024 or so)."""
        if not self.target_protocol or not stats:
            return
        if len(self._stats) + len(stats) > 1024:
            self._stats.clear()
        now = time.monotonic()
        for url, info in stats:
            self._stats[url] = (now, info)

    def invalidate_cache(self, path=None):
        """Forget the stats kept for `path` (every path if None), as fsspec's listings caches
        do: the next open asks the store again."""
        if path is None:
            self._stats.clear()
            opened, self._opened = self._opened, {}
        else:
            self._stats.pop(self._url(path), None)
            one = self._opened.pop(self._url(path), None)
            opened = {path: one} if one is not None else {}
        for _, f in opened.values():
            f.close()
        super().invalidate_cache(path)

    def ukey(self, path):
        info = self.info(path)
        return info.get("ETag") or f"{info['name']}:{info['size']}:{info.get('mtime')}"

    # -- read-only --------------------------------------------------------------------------

    def _read_only(self, *args, **kwargs):
        raise NotImplementedError("ahead is read-only")

    mkdir = makedirs = rm_file = rm = rmdir = mv = cp_file = put_file = pipe_file = touch = _read_only
