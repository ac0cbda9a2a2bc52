"""The GPU suite's kernel cache archive (isaaclab_suspend.benchmarks.kernel_cache): a kernel cache is native code,
so only a trusted one (saved by this machine's run, or named by its SHA-256) is restored, and even that is read as
untrusted data. Each crafted archive is refused in one line, and nothing is written outside the cache nor left in
it; the suite itself refuses with exit status 2 before any part runs."""

import hashlib
import io
import lzma
import os
import tarfile

import pytest
from helpers import load_script

from isaaclab_suspend.benchmarks import kernel_cache
from isaaclab_suspend.benchmarks.kernel_cache import (ArchiveLimits, KernelCacheRefused, restore_kernel_cache,
                                                      save_kernel_cache, saved_hashes)


@pytest.fixture
def place(tmp_path, monkeypatch):
    """``tmp_path`` with a kernel cache that holds one module (``cache/wp_old/k.o``), a file beside the cache
    (``outside.o``, what an escaping archive would overwrite) and this machine's record of saved caches
    (``state/``)."""
    (tmp_path / "cache" / "wp_old").mkdir(parents=True)
    (tmp_path / "cache" / "wp_old" / "k.o").write_bytes(b"old kernel")
    (tmp_path / "outside.o").write_bytes(b"mine")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(kernel_cache, "kernel_cache_dir", lambda: str(tmp_path / "cache"))
    return tmp_path


def _tree(root) -> dict:
    """Every path under ``root`` (not following links) with its bytes, a link's target or None for a folder; the
    archives the test writes left out."""
    tree = {}
    for folder, dirs, files in os.walk(root):
        for name in [name for name in dirs + files if not name.endswith(".tar.xz")]:
            path = os.path.join(folder, name)
            tree[os.path.relpath(path, root)] = (os.readlink(path) if os.path.islink(path) else None
                                                 if os.path.isdir(path) else open(path, "rb").read())
    return tree


def _file(name: str, data: bytes = b"\x7fELF") -> tuple[tarfile.TarInfo, io.BytesIO]:
    """A regular file member holding ``data``."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, io.BytesIO(data)


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    """A member of ``kind`` (a symlink, a hard link, a fifo) without data."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _folder(name: str) -> tuple[tarfile.TarInfo, None]:
    """A folder member."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def _archive(path, members) -> str:
    """A tar.xz of ``members`` (TarInfo and file object pairs) at ``path``; returns its SHA-256."""
    with tarfile.open(path, "w:xz") as tar:
        for info, data in members:
            tar.addfile(info, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cve_2025_4517(outside: str) -> list:
    """CVE-2025-4517's archive: a chain of symlinks whose resolved path is longer than PATH_MAX, so that the
    ``data`` filter's ``realpath`` stops resolving and sees a path inside; ``escape`` then points at ``outside``
    (relative to the cache's folder), and a file is written through it. Python 3.12.1's ``extractall(...,
    filter="data")`` writes ``outside.o`` beside the cache with it."""
    members, path, steps = [], "", "abcdefghijklmnop"
    for step in steps:
        members += [_folder(os.path.join(path, "d" * 247)), _link(os.path.join(path, step), "d" * 247)]
        path = os.path.join(path, "d" * 247)
    chain = os.path.join(*steps, "l" * 254)
    members += [_link(chain, os.path.join(*[".."] * len(steps))), _link("escape", f"{chain}/../{outside}"),
                _file("escape/outside.o", b"pwned")]
    return members


def _bomb_header(name: str, claimed: int, data: int) -> bytes:
    """A tar whose member ``name`` claims ``claimed`` bytes and carries ``data`` zero bytes (then ends)."""
    info = tarfile.TarInfo(name)
    info.size = claimed
    return lzma.compress(info.tobuf(tarfile.PAX_FORMAT) + bytes(data), preset=9)


CRAFTED = {
    "a ../ member": ([_file("wp_mod/../../outside.o", b"pwned")], "'wp_mod/../../outside.o' leads out of the cache"),
    "an absolute path": ([_file("{outside}", b"pwned")], "is an absolute path"),
    "a symlink": ([_folder("wp_mod"), _link("wp_mod/k.o", "{outside}")], "'wp_mod/k.o' is a symbolic link"),
    "a hardlink": ([_folder("wp_mod"), _link("wp_mod/k.o", "../../outside.o", tarfile.LNKTYPE)],
                   "'wp_mod/k.o' is a hard link (to '../../outside.o')"),
    "CVE-2025-4517's symlink chain": (_cve_2025_4517(".."), "is a symbolic link (to 'dddd"),
    "a fifo": ([_link("wp_mod/fifo", "", tarfile.FIFOTYPE)], "'wp_mod/fifo' is a fifo, not a regular file"),
    "a member twice": ([_file("wp_mod/k.o"), _file("wp_mod/k.o")], "'wp_mod/k.o' is in it twice"),
    "a file in place of a folder": ([_file("wp_mod"), _file("wp_mod/k.o")], "goes through 'wp_mod', which is not a"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_archive_writes_nothing_outside_and_leaves_nothing(case, place):
    """Each crafted archive, named with its right hash (trusted, so that it is read at all): refused in one line
    naming the member, the cache as it was, the file beside it untouched."""
    members, message = CRAFTED[case]
    for info, _ in members:
        info.name = info.name.format(outside=place / "outside.o")
        info.linkname = info.linkname.format(outside=place / "outside.o")
    archive = place / "warp_cache.tar.xz"
    digest = _archive(archive, members)
    before = _tree(place)
    with pytest.raises(KernelCacheRefused) as refused:
        restore_kernel_cache(str(archive), digest)
    line = str(refused.value)
    assert "\n" not in line and message in line and line.endswith("nothing of it was kept"), line
    assert _tree(place) == before


def test_a_bomb_never_writes_past_the_cap(place):
    """A member that claims 64 GiB is refused from its header, before a byte of it is written; an archive that
    decompresses past the ratio (a real 3 MiB of zeros) or a header past the cap (a pax header of 2 MiB) is
    stopped while it is read, a chunk at a time."""
    archive = place / "bomb.tar.xz"
    archive.write_bytes(_bomb_header("wp_mod/k.o", 64 * 2**30, 2**20))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    before = _tree(place)
    with pytest.raises(KernelCacheRefused, match="'wp_mod/k.o' claims 68719476736 bytes, past the 1073741824 bytes"):
        restore_kernel_cache(str(archive), digest)
    assert _tree(place) == before
    limits = ArchiveLimits(max_bytes=2**20, max_members=8, max_ratio=1e9, chunk=2**16)
    digest = _archive(archive, [_file("wp_mod/a.o", b"\x7fELF"), _file("wp_mod/zeros.o", bytes(3 * 2**20))])
    with pytest.raises(KernelCacheRefused, match=r"decompresses to more than 100 times its \d+ bytes"):
        restore_kernel_cache(str(archive), digest, limits=ArchiveLimits(ratio_floor=2**20, max_ratio=100))
    assert _tree(place) == before
    header = tarfile.TarInfo("wp_mod/k.o")
    header.pax_headers = {"comment": "x" * 2 * 2**20}
    digest = _archive(archive, [(header, io.BytesIO())])
    with pytest.raises(KernelCacheRefused, match=f"decompresses to more than {2**20 + 8 * 1024} bytes"):
        restore_kernel_cache(str(archive), digest, limits=limits)
    assert _tree(place) == before
    digest = _archive(archive, [_file(f"wp_mod/{i}.o") for i in range(9)])
    with pytest.raises(KernelCacheRefused, match="it has more than 8 members"):
        restore_kernel_cache(str(archive), digest, limits=limits)
    assert _tree(place) == before


def test_only_a_trusted_cache_is_restored(place):
    """A cache is restored when this machine's run saved it (its hash in the record outside the output folder)
    or when its hash is named; any other (an unnamed archive, another hash, a damaged file) is not, and the
    cache stays as it was. What the cache holds already is kept."""
    (place / "cache" / "wp_new").mkdir()
    (place / "cache" / "wp_new" / "k.o").write_bytes(b"new kernel")
    archive = place / "out" / "warp_cache.tar.xz"
    archive.parent.mkdir()
    digest = save_kernel_cache(str(archive))
    assert saved_hashes() == [digest] == [hashlib.sha256(archive.read_bytes()).hexdigest()]
    (place / "cache" / "wp_new" / "k.o").unlink()
    (place / "cache" / "wp_new").rmdir()
    (place / "cache" / "wp_old" / "k.o").write_bytes(b"rebuilt")
    said = restore_kernel_cache(str(archive))  # this machine saved it: restored
    assert f"(sha256 {digest}) restored: 2 files" in said and "the cache held 1 of its entries already" in said
    assert (place / "cache" / "wp_new" / "k.o").read_bytes() == b"new kernel"
    assert (place / "cache" / "wp_old" / "k.o").read_bytes() == b"rebuilt"
    assert [name for name in os.listdir(place / "cache") if name.startswith(".")] == []

    # another archive (the same kernels, packed by someone else): not restored unless named by its hash
    other = place / "shared.tar.xz"
    named = _archive(other, [_folder("wp_shared"), _file("wp_shared/k.o", b"someone's kernel")])
    before = _tree(place)
    said = restore_kernel_cache(str(other))
    assert f"not restored (sha256 {named}): no run of this machine saved it" in said and "\n" not in said
    assert "--kernel-cache FILE --kernel-cache-sha256 HEX" in said and _tree(place) == before
    with pytest.raises(KernelCacheRefused, match=f"has sha256 {named}, not {'0' * 64}: not restored"):
        restore_kernel_cache(str(other), "0" * 64)
    assert _tree(place) == before
    assert "restored: 1 files" in restore_kernel_cache(str(other), named.upper())
    assert (place / "cache" / "wp_shared" / "k.o").read_bytes() == b"someone's kernel"

    damaged = place / "damaged.tar.xz"
    damaged.write_bytes(b"not an archive")
    before = _tree(place)
    with pytest.raises(KernelCacheRefused, match="refused: not a readable tar.xz"):
        restore_kernel_cache(str(damaged), hashlib.sha256(b"not an archive").hexdigest())
    assert "not restored" in restore_kernel_cache(str(damaged))
    assert "no kernel cache at" in restore_kernel_cache(str(place / "missing.tar.xz"))
    with pytest.raises(KernelCacheRefused, match="is not a file"):
        restore_kernel_cache(str(place / "missing.tar.xz"), named)
    assert _tree(place) == before


GPU_SUITE_REFUSALS = {
    ("--kernel-cache-sha256", "0" * 64): "--kernel-cache-sha256 goes with the --kernel-cache FILE",
    ("--kernel-cache", "none", "--kernel-cache-sha256", "0" * 64): "--kernel-cache-sha256 goes with",
    ("--kernel-cache", "{archive}", "--kernel-cache-sha256", "beef"): "'beef' is not a SHA-256",
    ("--kernel-cache", "{archive}", "--kernel-cache-sha256", "0" * 64): "has sha256 {digest}, not 000",
    ("--kernel_cache", "{archive}", "--kernel-cache-sha256", "{digest}"): "'wp_mod/../../outside.o' leads out",
    ("--kernel-cache", "{missing}", "--kernel-cache-sha256", "{digest}"): "missing.tar.xz' is not a file",
}


@pytest.mark.parametrize("argv", list(GPU_SUITE_REFUSALS), ids=[" ".join(a[::2]) for a in GPU_SUITE_REFUSALS])
def test_the_suite_refuses_a_cache_in_one_line_before_any_part(argv, place, capsys, monkeypatch):
    """scripts/benchmarks/gpu_suite.py: a cache it is told to trust but cannot is exit status 2 and one line, before
    any part runs (``run_part`` fails the test if it is reached) and with the cache as it was."""
    suite = load_script("benchmarks/gpu_suite")
    monkeypatch.setattr(suite, "run_part", lambda *a: pytest.fail("a part ran"))
    archive = place / "warp_cache.tar.xz"
    digest = _archive(archive, [_file("wp_mod/../../outside.o", b"pwned")])
    names = {"archive": archive, "digest": digest, "missing": place / "missing.tar.xz"}
    before = _tree(place)
    with pytest.raises(SystemExit) as exit_info:
        suite.main(["--device", "cpu", "--out", str(place / "suite.json"), *(a.format(**names) for a in argv)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    assert len(lines) == 1 and GPU_SUITE_REFUSALS[argv].format(**names) in lines[0], err
    assert _tree(place) == before
