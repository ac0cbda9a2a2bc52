"""Warp's kernel cache packed into a tar.xz archive and restored from one, so that a later run of the GPU suite on a
fresh machine of the same GPU architecture skips the compilation.

A kernel cache is executable native code: Warp loads the object file that sits at a kernel's path and runs it, so
an archive from anyone else is their code running as you. :func:`restore_kernel_cache` therefore restores an
archive only when its SHA-256 is trusted: one this machine's own run saved (:func:`save_kernel_cache` records its
hash in :func:`saved_record_path`, a file of the user's outside any output folder), or one whose hash the caller
names. Even then the archive is read as untrusted data, without ``tarfile``'s extraction (whose filters have had
bypasses: CVE-2025-4517): regular files and folders only, each path inside the target and created anew without
following a symlink, within :class:`ArchiveLimits`; a refusal removes everything it wrote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import lzma
import os
import shutil
import tarfile
import tempfile
from typing import BinaryIO


class KernelCacheRefused(ValueError):
    """An archive that is not restored, and why, in one line; nothing of it is left in the cache."""


@dataclasses.dataclass(frozen=True)
class ArchiveLimits:
    """What :func:`extract_kernel_cache` unpacks at most: a kernel cache of the GPU suite holds about a thousand
    files, some hundred MiB, compressed 5 to 10 times."""

    max_members: int = 20_000
    """Members (files and folders) of the archive."""
    max_bytes: int = 2**30
    """Bytes of the files written, and (with the headers) of the decompressed archive."""
    max_ratio: float = 100.0
    """Decompressed bytes per byte of the archive, checked once past :attr:`ratio_floor`."""
    ratio_floor: int = 16 * 2**20
    """Decompressed bytes below which the ratio is not checked (a small archive's own overhead)."""
    max_depth: int = 16
    """Folders a member's path may go down."""
    chunk: int = 2**20
    """Bytes read and written at a time."""


DEFAULT_LIMITS = ArchiveLimits()
"""The limits of the GPU suite's restore."""
RESTORE_HINT = ("a kernel cache is native code: restore only your own run's, named by its hash"
                " (--kernel-cache FILE --kernel-cache-sha256 HEX)")
"""How a user names a cache they trust, said where one is not restored."""


def kernel_cache_dir() -> str:
    """Warp's kernel cache folder of this process (``WARP_CACHE_PATH``, else Warp's default), which the GPU suite's
    parts' processes share."""
    import warp as wp

    wp.init()
    return wp.config.kernel_cache_dir


def saved_record_path() -> str:
    """This machine's record of the kernel caches its runs saved (their SHA-256):
    ``$XDG_STATE_HOME/isaaclab_suspend/kernel_caches.json`` (default ``~/.local/state/...``). It lives with the
    user's own files, not beside the archive: whoever can write it can already run code as the user."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "isaaclab_suspend", "kernel_caches.json")


def saved_hashes() -> list[str]:
    """The SHA-256 of the archives this machine's runs saved, oldest first (none if the record is unreadable)."""
    try:
        with open(saved_record_path()) as f:
            hashes = json.load(f).get("sha256", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [h for h in hashes if isinstance(h, str)] if isinstance(hashes, list) else []


def save_kernel_cache(archive: str, cache_dir: str | None = None, keep: int = 64) -> str:
    """Pack the compiled kernels (``cache_dir``, default Warp's kernel cache: its folders and regular files) into
    the tar.xz ``archive``, written whole, and add its SHA-256 to this machine's record (the last ``keep``
    kept); returns the hash."""
    cache_dir = cache_dir or kernel_cache_dir()

    def plain(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (member.isreg() or member.isdir()):
            return None
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        return member

    with tarfile.open(archive + ".part", "w:xz", preset=3) as tar:
        tar.add(cache_dir, arcname=".", filter=plain)
    os.replace(archive + ".part", archive)
    with open(archive, "rb") as f:
        digest = _sha256(f)
    record = saved_record_path()
    os.makedirs(os.path.dirname(record), mode=0o700, exist_ok=True)
    hashes = ([h for h in saved_hashes() if h != digest] + [digest])[-keep:]
    with open(record + ".part", "w") as f:
        json.dump({"sha256": hashes}, f)
    os.replace(record + ".part", record)
    return digest


def restore_kernel_cache(archive: str, sha256: str | None = None, cache_dir: str | None = None,
                         limits: ArchiveLimits = DEFAULT_LIMITS) -> str:
    """Unpack ``archive`` into ``cache_dir`` (default Warp's kernel cache) if it is trusted: its SHA-256 is
    ``sha256``, or, with ``sha256`` None, one this machine's run saved (:func:`saved_hashes`). Kernels the cache
    holds already are kept. Returns what happened, in words: restored, no archive (``sha256`` None), or not
    restored because no run of this machine saved it (the kernels then compile on first use).

    Raises:
        KernelCacheRefused: If ``sha256`` is given and the archive is missing or has another hash, or if a
            trusted archive is refused while unpacked (:func:`extract_kernel_cache`).
    """
    if not os.path.isfile(archive):
        if sha256 is not None:
            raise KernelCacheRefused(f"kernel cache '{archive}' is not a file")
        return f"no kernel cache at {archive}: kernels compile on first use"
    with open(archive, "rb") as f:  # one open file: hashed, then read, so that the file read is the one hashed
        digest = _sha256(f)
        if sha256 is not None and digest != sha256.lower():
            raise KernelCacheRefused(f"kernel cache '{archive}' has sha256 {digest}, not {sha256.lower()}: not"
                                     " restored")
        if sha256 is None and digest not in saved_hashes():
            return (f"kernel cache {archive} not restored (sha256 {digest}): no run of this machine saved it;"
                    f" {RESTORE_HINT}. Kernels compile on first use")
        f.seek(0)
        files, size, kept = extract_kernel_cache(f, os.fstat(f.fileno()).st_size, cache_dir or kernel_cache_dir(),
                                                 limits, archive)
    return (f"kernel cache {archive} (sha256 {digest}) restored: {files} files, {size / 2**20:.1f} MiB"
            + (f"; the cache held {kept} of its entries already (kept as they were)" if kept else ""))


def extract_kernel_cache(source: BinaryIO, archive_bytes: int, target: str, limits: ArchiveLimits = DEFAULT_LIMITS,
                         name: str = "archive") -> tuple[int, int, int]:
    """Unpack the tar.xz ``source`` (``archive_bytes`` long) into the folder ``target`` as untrusted data, without
    ``tarfile``'s extraction: into a new folder inside ``target`` first, each member a folder or a regular file
    (no link, device, fifo or sparse file), its path relative and inside (no ``..``), every folder opened and every
    file created anew (``O_EXCL``) without following a symlink, the bytes read and written a chunk at a time
    within ``limits``; then each top-level entry the target lacks is moved in. Returns the files and bytes written
    and the top-level entries the target held already (kept as they are).

    Raises:
        KernelCacheRefused: Naming the archive (``name``), the member and why; everything written is removed.
    """
    root = os.path.realpath(target)
    os.makedirs(root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".restore-", dir=root)
    moved: list[str] = []
    try:
        files, size = _unpack(source, archive_bytes, staging, limits)
        kept = 0
        for entry in sorted(os.listdir(staging)):
            destination = os.path.join(root, entry)
            if os.path.lexists(destination):
                kept += 1
                continue
            os.rename(os.path.join(staging, entry), destination)
            moved.append(destination)
        return files, size, kept
    except BaseException as err:
        for path in moved:
            _remove(path)
        if isinstance(err, _Refusal):
            raise KernelCacheRefused(f"kernel cache '{name}' refused: {err}; nothing of it was kept") from None
        if isinstance(err, OSError):  # the cache's disk, not the archive
            raise KernelCacheRefused(f"kernel cache '{name}' not restored: {err.strerror or err} in '{root}'; nothing"
                                     " of it was kept") from None
        if isinstance(err, (tarfile.TarError, lzma.LZMAError, EOFError, ValueError)):
            raise KernelCacheRefused(f"kernel cache '{name}' refused: not a readable tar.xz"
                                     f" ({str(err) or type(err).__name__}); nothing of it was kept") from None
        raise
    finally:
        _remove(staging)


class _Refusal(Exception):
    """A reason to refuse the archive (internal: :func:`extract_kernel_cache` turns it into its one line)."""


class _CappedReader(io.RawIOBase):
    """The decompressed archive, refused once it passes :attr:`ArchiveLimits.max_bytes` (with its headers) or
    :attr:`ArchiveLimits.max_ratio` times the archive's size: tarfile reads every header (a pax header may claim
    any size) and every file through it."""

    def __init__(self, raw: BinaryIO, archive_bytes: int, limits: ArchiveLimits):
        self.raw, self.count, self.archive_bytes, self.limits = raw, 0, archive_bytes, limits
        self.cap = limits.max_bytes + 1024 * limits.max_members  # the files, their headers and padding

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        left = self.cap + 1 - self.count  # one byte past the cap tells it is passed
        data = self.raw.read(left if size is None or size < 0 else min(size, left))
        self.count += len(data)
        if self.count > self.cap:
            raise _Refusal(f"it decompresses to more than {self.cap} bytes")
        ratio = self.count / max(self.archive_bytes, 1)
        if self.count > self.limits.ratio_floor and ratio > self.limits.max_ratio:
            raise _Refusal(f"it decompresses to more than {self.limits.max_ratio:g} times its {self.archive_bytes}"
                           " bytes (an archive bomb)")
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _unpack(source: BinaryIO, archive_bytes: int, staging: str, limits: ArchiveLimits) -> tuple[int, int]:
    """Write the members of the tar.xz ``source`` under ``staging``; returns the files and bytes written."""
    files = size = members = 0
    reader = _CappedReader(lzma.LZMAFile(source), archive_bytes, limits)
    with tarfile.open(fileobj=reader, mode="r|") as tar:  # read in order, a member at a time; nothing extracted
        for member in tar:
            members += 1
            if members > limits.max_members:
                raise _Refusal(f"it has more than {limits.max_members} members")
            parts = _parts(member.name, limits)
            if member.isdir():
                os.close(_open_folder(staging, parts, member.name))
                continue
            if not member.isreg() or member.issparse() or not parts:
                raise _Refusal(f"{_q(member.name)} is {_kind(member)}, not a regular file or a folder")
            if member.size > limits.max_bytes - size:
                raise _Refusal(f"{_q(member.name)} claims {member.size} bytes, past the {limits.max_bytes} bytes of"
                               " files a kernel cache may hold")
            data = tar.extractfile(member)
            folder = _open_folder(staging, parts[:-1], member.name)
            try:
                fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            except FileExistsError:
                raise _Refusal(f"{_q(member.name)} is in it twice") from None
            finally:
                os.close(folder)
            with os.fdopen(fd, "wb") as out:  # a chunk at a time, each read through the capped reader
                while chunk := data.read(limits.chunk):
                    out.write(chunk)
            files, size = files + 1, size + member.size
    return files, size


def _parts(name: str, limits: ArchiveLimits) -> list[str]:
    """The folders and name of a member's path, relative to the cache (``.`` and empty parts dropped)."""
    if name.startswith("/"):
        raise _Refusal(f"{_q(name)} is an absolute path")
    if "\x00" in name:
        raise _Refusal(f"{_q(name)} holds a NUL byte")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise _Refusal(f"{_q(name)} leads out of the cache (..)")
    if len(parts) > limits.max_depth or any(len(part.encode()) > 255 for part in parts):
        raise _Refusal(f"{_q(name)} is deeper than {limits.max_depth} folders or has a name over 255 bytes")
    return parts


def _open_folder(staging: str, parts: list[str], name: str) -> int:
    """A descriptor of the folder ``parts`` under ``staging``, each folder made if missing and opened without
    following a symlink."""
    fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                raise _Refusal(f"{_q(name)} goes through {_q(part)}, which is not a folder") from None
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to {_q(member.linkname)})"
    if member.islnk():
        return f"a hard link (to {_q(member.linkname)})"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a fifo"
    if member.issparse():
        return "a sparse file"
    return "a member without a name" if member.isreg() else f"of type {member.type!r}"


def _remove(path: str) -> None:
    """Remove a file or a folder with everything in it (a symlink, not what it points to)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _sha256(f: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := f.read(2**20):
        digest.update(chunk)
    return digest.hexdigest()


def _q(name: str) -> str:
    """A member's name quoted on one line, at most 200 characters of it."""
    return repr(name[:200] + ("..." if len(name) > 200 else ""))
