"""Whose the search index's folder is. An index answers searches without the files being read,
so whoever can write its folder decides what a search finds (and reads the words it holds): a
folder another user made first (a shared ``/tmp`` or ``XDG_CACHE_HOME``) or may write into is
never read, written, built in or cleaned (``location.SearchIndex``); the search reads the files.

The rule, like OpenSSH's for ``authorized_keys`` and the resident reader's for its socket folder
(``adapters.read_socket``): the index's folder and the one above it (``search-vN/`` and the cache
root, which dream-memory makes ``0700``) must be a real folder owned by the user and writable by
nobody else; every folder above those must belong to the user or to root and may be writable by
others only with the sticky bit (``/tmp``), since whoever can rename entries of an ancestor can
swap in a folder of their own below it. The index files must be the user's and writable by nobody
else (``mark.stamp``).

One case is repaired instead of refused (``secure``): either of those two folders is the user's
own but writable by others (made by an older version under umask 002, or chmod'ed), and every
folder above passes. Refused, every search would read the files until the user ran chmod. The
folder is made ``0700`` again and the index files in it are removed, since anyone could have
planted or changed them while it was open: an index that sat in an open folder never answers;
the search builds it again from the files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import NamedTuple

# The index's folder and its parent: made by dream-memory, so the user's own and private.
_MADE_LEVELS = 2
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_PRIVATE = 0o700
# Opened without following a last-component symlink: a folder swapped for one after it was
# looked at fails (ELOOP, ENOTDIR) instead of having its target changed.
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Secured(NamedTuple):
    """What ``secure`` found: why the folder is still not trusted (None: it is), and what it
    repaired, as a warning for the user (None: nothing)."""

    problem: str | None
    repaired: str | None = None


class _Survey(NamedTuple):
    problem: str | None  # what no repair of ours fixes: another user's folder, a symlink, an open ancestor
    loose: list[tuple[str, str]]  # the user's own made folders that others may write, and why each is not trusted


def owned_private(st: os.stat_result) -> bool:
    """A file the user owns and nobody else may write."""
    return st.st_uid == os.geteuid() and not st.st_mode & _OTHERS_WRITE


def folder_problem(folder: str) -> str | None:
    """Why the index folder ``folder`` (a resolved path; it and its parent may not exist yet)
    cannot be trusted as it is, or None when it can (see the module docstring)."""
    survey = _survey(folder)
    if survey.problem is not None:
        return survey.problem
    return survey.loose[0][1] if survey.loose else None


def unfixable_problem(folder: str) -> str | None:
    """``folder_problem`` without what ``secure`` would repair: looks, changes nothing."""
    return _survey(folder).problem


def _survey(folder: str) -> _Survey:
    uid = os.geteuid()
    loose: list[tuple[str, str]] = []
    current = folder
    level = 0
    while True:
        try:
            st: os.stat_result | None = os.lstat(current)
        except FileNotFoundError:
            st = None  # made by the first build, 0700
        except OSError as exc:
            return _Survey(f"{current} cannot be looked at ({exc.strerror})", loose)
        made = level < _MADE_LEVELS
        if st is not None and made and _ours_but_open(st, uid):
            loose.append((current, f"{current} may be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"))
        elif st is not None and (problem := _problem(current, st, uid, made=made)) is not None:
            return _Survey(problem, loose)
        parent = os.path.dirname(current)
        if parent == current:
            return _Survey(None, loose)
        current = parent
        level += 1


def _ours_but_open(st: os.stat_result, uid: int) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and bool(st.st_mode & _OTHERS_WRITE)


def _problem(path: str, st: os.stat_result, uid: int, *, made: bool) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"  # a symlink swapped in after the path was resolved, say
    if st.st_uid != uid and (made or st.st_uid != 0):
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})"
    if st.st_mode & _OTHERS_WRITE and (made or not st.st_mode & stat.S_ISVTX):
        return f"{path} may be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def secure(folder: str) -> Secured:
    """``folder_problem`` of the index folder ``folder``, after repairing what is the user's own:
    the cache root and ``folder`` made ``0700`` and the index files in them removed (the module
    docstring says why). Done only when nothing else is wrong with the path."""
    survey = _survey(folder)
    if survey.problem is not None or not survey.loose:
        return Secured(survey.problem)
    root = os.path.dirname(folder)
    why = "; ".join(reason for _, reason in survey.loose)
    try:
        _tighten(root, os.path.basename(folder), every_version=any(path == root for path, _ in survey.loose))
    except OSError as exc:
        return Secured(f"{why}, and could not be made private ({exc.strerror})")
    repaired = (
        f"{why}: made private (0700); the search index files in it were removed"
        " (anyone could have changed them) and are built again from the files"
    )
    return Secured(folder_problem(folder), repaired)


def _tighten(root: str, index_folder: str, *, every_version: bool) -> None:
    """Make ``root`` and its index folder ``0700`` and remove the files in the index folder (in
    every ``search-v*`` folder when ``root`` itself was open: any of them could have been
    swapped). The root first: from then on nobody else may rename what is in it."""
    fd = os.open(root, _OPEN_DIR)
    try:
        if not _made_private(fd):
            return  # not the user's after all: ``folder_problem`` refuses it
        with os.scandir(fd) as entries:
            names = [e.name for e in entries if e.name.startswith("search-v") and e.is_dir(follow_symlinks=False)]
        for name in names:
            if name == index_folder or every_version:
                _empty(fd, name)
    finally:
        os.close(fd)


def _made_private(fd: int) -> bool:
    """The open folder ``fd`` made ``0700`` when it is the user's own (False when it is not)."""
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if st.st_mode & _OTHERS_WRITE:
        os.fchmod(fd, _PRIVATE)
    return True


def _empty(root_fd: int, name: str) -> None:
    """Remove everything in the user's own index folder ``name`` (an index, its log and record,
    a leftover build; a folder planted there too, as far as the user may)."""
    import shutil

    fd = os.open(name, _OPEN_DIR, dir_fd=root_fd)
    try:
        if not _made_private(fd):
            return  # another user's: refused, never emptied
        with os.scandir(fd) as entries:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for entry, is_dir in found:
            if is_dir:
                shutil.rmtree(entry, dir_fd=fd, ignore_errors=True)  # never one of ours: only in the way
                continue
            # A file that cannot be removed fails the repair: this search refuses the folder.
            with contextlib.suppress(FileNotFoundError):  # removed by another search repairing it too
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)


def make_private(folder: str) -> str | None:
    """Make ``folder`` and its missing parents ``0700`` (never through the default mode, which the
    umask may leave group-writable), then look again: another user may have made one first.
    Returns the problem, or None when the folder is there and trusted."""
    missing: list[str] = []
    current = folder
    while not os.path.lexists(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    return folder_problem(folder)


def not_used(problem: str) -> str:
    """The warning of a search that would have used an index in an untrusted folder (the face
    that ran the search says it: stderr of the command, or of the client a server answered)."""
    return (
        f"search index not used: {problem}; searching the files instead"
        " (remove or fix that folder, or point XDG_CACHE_HOME at a folder of your own)"
    )
