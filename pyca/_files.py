"""Output files written whole or not at all, and output folders that hold one run.

    with atomic_path("out/phi.nii.gz") as tmp:   # write to tmp with any library
        nib.save(img, tmp)
    with atomic_open("out/summary.json") as fh:  # the same for a text file
        json.dump(summary, fh)

The block writes into a fresh hidden folder beside the final file (``.pyca-tmp-*``: the same file
system, so the move is a rename). When the block ends normally, every file written there is renamed
into place (the named file last, so that a format writing a header and a data file, .hdr/.img or
.mhd/.raw, keeps its names and finds its data); when it raises (Ctrl-C's KeyboardInterrupt included)
the hidden folder is removed and nothing under the final name changes. A reader never sees a
half-written file under an output's name.

check_out_dir() and clear_previous() implement the ``--out`` rules of the command line: an existing,
non-empty folder is refused unless ``--overwrite``; with it, what the previous run wrote (the files
its summary.json lists, the command's own output names, leftover ``.pyca-tmp-*`` folders) is removed
just before the new outputs are written, and anything else in the folder is left alone.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import tempfile
import threading
import zlib

__all__ = ["TMP_PREFIX", "atomic_path", "atomic_open", "write_parallel", "GzipWriter", "zlib_compress",
           "write_json", "check_out_dir", "clear_previous", "PathError", "confined", "safe_name", "fingerprint", "claim_out_dir",
           "LOCK_NAME"]

TMP_PREFIX = ".pyca-tmp-"
LOCK_NAME = ".pyca-lock"  # in an output folder while a command writes to it: its process id


class PathError(ValueError):
    """A path read from a file or an argument that would leave the folder it must stay in."""


def safe_name(name, what="name"):
    """`name` when it can be one entry of a folder: a non-empty string, no separator, not '.' or '..',
    no NUL; PathError otherwise. Names read from a file (a subject name in summary.json) go through
    this before they become part of a path."""
    if not isinstance(name, str) or not name or name in (".", "..") or "\0" in name \
            or "/" in name or (os.sep != "/" and os.sep in name) or (os.altsep and os.altsep in name):
        raise PathError(f"{what} {name!r} is not a plain file name (no folders, '..' or absolute paths)")
    return name


def confined(root, *parts, what="path"):
    """os.path.join(root, *parts), resolved (symbolic links followed, '..' removed), when it lies
    inside `root` (resolved too); PathError naming `what` otherwise. The one place where a path made
    from untrusted pieces (summary.json's names, a command line) is checked before it is written to or
    removed: every output path of the atlas and batch commands is made here."""
    base = os.path.realpath(os.fspath(root))
    for p in parts:
        if not isinstance(p, str) or os.path.isabs(p) or "\0" in p:
            raise PathError(f"{what} {p!r} must be a relative path inside {os.fspath(root)!r}")
    full = os.path.realpath(os.path.join(base, *parts))
    if os.path.commonpath([base, full]) != base:
        raise PathError(f"{what} {os.path.join(*parts)!r} leads outside {os.fspath(root)!r} (to {full!r})")
    return full


def fingerprint(path, chunk=1 << 20):
    """'sha256:<hex>' of a file's bytes (read in chunks): what a resumed run compares its inputs with."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(chunk)
            if not b:
                break
            h.update(b)
    return "sha256:" + h.hexdigest()


@contextlib.contextmanager
def atomic_path(path):
    """Yields the path to write instead of `path` (same name, in a hidden folder beside it); the
    file(s) written there replace their final names when the block succeeds, and are removed when
    it raises."""
    path = os.fspath(path)
    final = os.path.abspath(path)
    folder, name = os.path.split(final)
    if os.path.isdir(final):
        raise IsADirectoryError(f"cannot write {path!r}: it is a folder")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {path!r}: folder {folder!r} does not exist")
    try:
        tmpdir = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=folder)
    except OSError as e:
        raise OSError(e.errno, f"cannot write {path!r}: {e.strerror}") from None
    try:
        yield os.path.join(tmpdir, name)
        written = sorted(os.listdir(tmpdir), key=lambda n: (n == name, n))  # the named file last
        for n in written:
            os.replace(os.path.join(tmpdir, n), os.path.join(folder, n))
    except OSError as e:  # a full disk, a folder made read-only meanwhile: named by the final file, not tmpdir
        if str(e).startswith("cannot write"):
            raise
        raise OSError(e.errno, f"cannot write {path!r}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


@contextlib.contextmanager
def atomic_open(path, mode="w", **kwargs):
    """open() whose file appears under `path` only once it is complete and closed."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


def write_json(obj, path):
    """obj as indented JSON (floats for NumPy numbers), complete or absent under its final name."""
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, default=float)


def write_parallel(jobs, workers=None):
    """Runs `jobs` (callables, each writing its file(s) through atomic_path) on a pool of threads:
    zlib and PNG encoding release the GIL, so the files compress side by side. Returns their results
    in order. When one raises, or the caller is interrupted (Ctrl-C), the jobs not yet started are
    cancelled and the running ones finish (their files are complete) before the exception goes on.
    workers: default one per job, at most 4 and the CPU count (the jobs' Python parts share the GIL;
    the compression runs on compress_pool(): pyca lddmm's outputs took 56 ms at 4 and 60 ms at 8
    threads, medians of 15 on an H100 host, docs/performance.md)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = list(jobs)
    workers = workers or min(len(jobs), os.cpu_count() or 1, 4)
    if workers <= 1:
        return [job() for job in jobs]
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pyca-write")
    try:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# gzip in parallel, as pigz does: the data is cut into chunks deflated side by side, each primed with
# the 32 KiB before it (so the ratio is that of one stream) and ended by a sync flush (a byte-aligned
# empty block), which makes their concatenation one valid deflate stream; one gzip member, its CRC-32
# and length over the whole data. Any gzip reader reads it; decompressed, it is the same bytes.
_CHUNK = 1 << 18  # bytes of input per task
_WINDOW = 1 << 15  # deflate's window: the dictionary each chunk is primed with
_pool, _pool_lock = None, threading.Lock()


def compress_pool():
    """The threads GzipWriter deflates on (one per core, started once; zlib releases the GIL)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, 32), thread_name_prefix="pyca-gzip")
    return _pool


def _deflate(chunk, zdict, level, strategy, last):
    co = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy, *([zdict] if zdict else []))
    return co.compress(chunk) + co.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class _ParallelDeflate:
    """One deflate stream written to `fh` from data written in any pieces: chunks of _CHUNK bytes
    deflated on compress_pool()'s threads (each primed with the _WINDOW bytes before it, ended by a
    sync flush), written in order, a bounded number in flight. `check` (zlib.crc32 for gzip,
    zlib.adler32 for zlib) runs over the data as it comes: `self.check`. The framing is the caller's."""

    def __init__(self, fh, level, strategy, check):
        self._fh, self._args, self._check = fh, (level, strategy), check
        self.check, self.size = check(b""), 0
        self._buf, self._prev, self._pending = bytearray(), b"", []
        workers = os.cpu_count() or 1
        self._pool = compress_pool() if workers > 1 else None
        self._window = 2 * workers  # chunks in flight

    def write(self, data):
        mv = memoryview(data).cast("B")
        self.check = self._check(mv, self.check)
        self.size += len(mv)
        i = 0
        if self._buf:  # top up the partial chunk first
            i = min(_CHUNK - len(self._buf), len(mv))
            self._buf += mv[:i]
            if len(self._buf) < _CHUNK:
                return len(mv)
            self._submit(bytes(self._buf), False)
            self._buf.clear()
        whole = (len(mv) - i) // _CHUNK  # whole chunks straight from the caller's data
        for k in range(i, i + whole * _CHUNK, _CHUNK):
            self._submit(bytes(mv[k:k + _CHUNK]), False)
        self._buf += mv[i + whole * _CHUNK:]
        return len(mv)

    def _submit(self, chunk, last):
        args = (chunk, self._prev, *self._args, last)
        self._prev = chunk[-_WINDOW:]
        if self._pool is None:
            self._fh.write(_deflate(*args))
            return
        self._pending.append(self._pool.submit(_deflate, *args))
        while len(self._pending) > self._window:
            self._fh.write(self._pending.pop(0).result())

    def finish(self):
        """Deflates what is left, ends the stream and writes every chunk still in flight."""
        self._submit(bytes(self._buf), True)
        self._buf.clear()
        try:
            for f in self._pending:
                self._fh.write(f.result())
        finally:
            self._pending = []

    def abort(self):
        for f in self._pending:
            f.cancel()
        self._pending = []


def zlib_compress(data, level=1, strategy=zlib.Z_DEFAULT_STRATEGY):
    """zlib.compress(data, level) in the zlib format (RFC 1950), deflated on all cores as GzipWriter
    does (pigz -z): one stream any zlib reader decompresses to data (report.png's pixel rows)."""
    import io

    out = io.BytesIO()
    # header: deflate with a 32 KiB window, the fastest level's flag, no preset dictionary (a chunk's
    # priming is the data before it, which the reader has), check bits; trailer: Adler-32 of the data
    out.write(b"\x78\x01")
    stream = _ParallelDeflate(out, level, strategy, zlib.adler32)
    stream.write(data)
    stream.finish()
    out.write(struct.pack(">I", stream.check & 0xFFFFFFFF))
    return out.getvalue()


class GzipWriter:
    """A binary file that gzip-compresses what is written to it (zlib `level` and `strategy`; level 1,
    nibabel's, by default) through _ParallelDeflate, so memory stays small whatever the size. The
    header is nibabel's (no name, mtime 0): the same data gives the same file. nibabel writes a NIfTI
    image into it as into any stream (`img.to_stream(writer)`)."""

    def __init__(self, path, level=1, strategy=zlib.Z_DEFAULT_STRATEGY):
        self._fh = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + {1: b"\x04", 9: b"\x02"}.get(level, b"\x00") + b"\xff")
        self._stream = _ParallelDeflate(self._fh, level, strategy, zlib.crc32)

    def write(self, data):
        return self._stream.write(data)

    def read(self, size=-1):  # a write-only stream (nibabel tells streams by their read and write)
        raise OSError("GzipWriter is write-only")

    def tell(self):
        return self._stream.size

    def seek(self, offset, whence=0):  # nibabel asks for the position it is at; anything else is refused
        if whence != 0 or offset != self._stream.size:
            raise OSError("GzipWriter cannot seek")
        return self._stream.size

    def close(self):
        if self._fh.closed:
            return
        try:
            self._stream.finish()
            self._fh.write(struct.pack("<II", self._stream.check & 0xFFFFFFFF, self._stream.size & 0xFFFFFFFF))
        finally:
            self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:  # the file is discarded (atomic_path) or incomplete anyway: no more compressing
            self._stream.abort()
            self._fh.close()


def check_out_dir(out, overwrite, flag="--out"):
    """Checks, before any work, that `out` can receive a run's outputs: its parent folder exists,
    it is not a file, and it is absent or empty unless `overwrite`. Raises FileNotFoundError or
    FileExistsError with a one-line message."""
    out_abs = os.path.abspath(out)
    parent = os.path.dirname(out_abs)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"the parent folder of {flag} ({parent}) does not exist")
    if os.path.exists(out_abs) and not os.path.isdir(out_abs):
        raise FileExistsError(f"{flag} {out!r} exists and is not a folder")
    entries = [e for e in os.listdir(out_abs) if not (e == LOCK_NAME and _lock_owner(out_abs) is None)] \
        if os.path.isdir(out_abs) else []
    if entries and not overwrite:
        n = len(entries)
        raise FileExistsError(f"{flag} {out!r} already holds {n} file{'s' if n != 1 else ''}; pass --overwrite "
                              f"to replace the previous run's outputs, or choose another folder")


def clear_previous(out, names=(), folders=()):
    """Removes what a previous run left in `out`: the files its summary.json lists (and summary.json),
    files called one of `names` (the command's own outputs), leftover temporary folders, and in each
    subfolder of `folders` (plain names: a cohort command's per-subject folders) the same, the subfolder
    itself when that leaves it empty. Returns the names of the other entries, which are kept."""
    if not os.path.isdir(out):
        return []
    for f in folders:
        sub = confined(out, safe_name(f, "output folder"), what="output folder")
        if os.path.isdir(sub) and not os.path.islink(sub):
            if not clear_previous(sub, names):
                with contextlib.suppress(OSError):
                    os.rmdir(sub)
    stale = set(names) | {"summary.json"}
    try:
        with open(os.path.join(out, "summary.json")) as fh:
            listed = json.load(fh).get("files", [])
        stale |= {os.path.basename(str(f)) for f in listed if isinstance(f, str)}
    except (OSError, ValueError, AttributeError):
        pass  # no readable summary: only the known names are the previous run's
    kept = []
    for entry in sorted(os.listdir(out)):
        if entry == LOCK_NAME:
            continue
        p = os.path.join(out, entry)
        if entry.startswith(TMP_PREFIX) and os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif entry in stale and not os.path.isdir(p):
            os.remove(p)
        else:
            kept.append(entry)
    return kept


def _lock_owner(out):
    """The process id in out/.pyca-lock when that process is alive, else None."""
    try:
        with open(os.path.join(out, LOCK_NAME)) as fh:
            pid = int(fh.read().strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


@contextlib.contextmanager
def claim_out_dir(out, overwrite, outputs=(), folders=(), inputs=(), need_bytes=0, flag="--out"):
    """The checks of an output folder before any work, and its claim for the duration of the block:
    check_out_dir's rules; no input file among the files an --overwrite would remove or replace (its
    own `outputs` names, the previous summary's files, inside `folders` too); the folder is created,
    locked against a second command writing to it at the same time (.pyca-lock: the process id), and
    shown writable, with `need_bytes` free on its file system. Every failure is one line: FileExistsError,
    PermissionError, OSError (ENOSPC). A folder this call created is removed again at the end if it is
    still empty (a run refused after the claim leaves nothing)."""
    import errno

    check_out_dir(out, overwrite, flag)
    out_abs = os.path.abspath(out)
    if overwrite and os.path.isdir(out_abs):
        doomed = {os.path.realpath(os.path.join(out_abs, n)) for n in set(outputs) | {"summary.json"}}
        subs = [os.path.realpath(os.path.join(out_abs, f)) for f in folders]
        for i in inputs:
            if i is None:
                continue
            r = os.path.realpath(os.fspath(i))
            inside = any(os.path.dirname(r) == d and os.path.basename(r) in set(outputs) | {"summary.json"}
                         for d in subs)
            if r in doomed or inside:
                raise FileExistsError(f"{flag} {out!r}: the input {os.fspath(i)!r} would be replaced by an output of "
                                      "the same name; move it out of the output folder first")
    created = not os.path.isdir(out_abs)
    try:
        os.makedirs(out_abs, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, f"cannot create {flag} {out!r}: {e.strerror}") from None
    lock = os.path.join(out_abs, LOCK_NAME)
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        owner = _lock_owner(out_abs)
        if owner is not None and owner != os.getpid():
            raise FileExistsError(f"{flag} {out!r} is being written by another pyca command (process {owner}); "
                                  "wait for it or choose another folder") from None
        os.remove(lock)  # a stale lock: its process is gone
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(out_abs)
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise PermissionError(e.errno, f"{flag} {out!r} is not writable ({e.strerror})") from None
        raise OSError(e.errno, f"cannot write to {flag} {out!r}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        free = shutil.disk_usage(out_abs).free
        if need_bytes and free < need_bytes:
            raise OSError(errno.ENOSPC, f"{flag} {out!r}: {free / 2**20:.0f} MiB free on its file system, the outputs "
                          f"need about {need_bytes / 2**20:.0f} MiB")
        yield out_abs
    finally:
        with contextlib.suppress(OSError):
            os.remove(lock)
        if created:  # a folder this claim made and nothing was written to goes again
            with contextlib.suppress(OSError):
                os.rmdir(out_abs)
