"""The bubblewrap command line that confines one seat's process, built from a :class:`SandboxSpec`.

What a sandboxed process gets (``bwrap`` 0.8, Debian's ``bubblewrap``):

* bwrap itself is started with only the allowlisted environment (the caller's ``env``), so no
  process inside, PID 1 included, holds a variable of the operator's shell;
* its own PID namespace (``/proc`` shows the sandbox's processes only), IPC and UTS namespaces,
  no capabilities (``--cap-drop ALL``: as root, bwrap would otherwise keep them, and a process
  holding CAP_SYS_ADMIN could unmount what hides the operator's home);
* ``/`` read-only, a fresh ``/proc`` and ``/dev``, a private tmpfs ``/tmp``; every hidden path
  (the operator's home, the user's repository) covered by an empty tmpfs, remounted read-only;
  then the readable paths bound back read-only and the writable ones read-write, at the same
  paths as outside, parents before children, so logs and prompts name the real paths;
* ``$HOME`` is the seat's private home;
* a network namespace of its own (only ``lo``, nothing of the host's listening on it; abstract
  unix sockets are per namespace), unless the network is ``host``; ``/run`` and every other
  unix socket the host has bound (databases, D-Bus, Docker: read from ``/proc/net/unix``) are
  hidden (one bound by a relative name, in the folder its server runs in), and ``/var/tmp`` is
  a private tmpfs like ``/tmp``. A ``network: on`` sandbox reaches out only through its proxy
  (:mod:`assay.adapters.seat_network`), whose socket folder is bound in read-only;
* ``--die-with-parent``: if assay dies, the sandbox dies with it.

Not ``--new-session``: the sandbox has no controlling terminal to inject into (the runner
starts bwrap in a session of its own), and staying in bwrap's process group lets a timeout or
a stop request TERM every process inside gracefully. A process that leaves the group with
``setsid`` still ends with the sandbox: when bwrap's PID 1 goes, the kernel kills the namespace.

What a program needs to start is bound back read-only when it lies under a hidden path (or in
``/tmp``, which is private): the Python installation and the assay package, the install root of
``argv[0]`` as found on the env's ``PATH`` (a venv with its base Python, an npm prefix, a pyenv
root), the interpreter of a ``#!`` script, and the ``PATH`` entries themselves.

``ASSAY_BWRAP`` names the bwrap executable to use (default: ``bwrap`` on assay's own ``PATH``);
a path that does not exist makes bwrap missing, which is how the tests simulate a machine
without it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeGuard

import assay
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.vocab import NetworkMode, SandboxMode

BWRAP_ENV = "ASSAY_BWRAP"
MISSING_MESSAGE = (
    "bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or set `sandbox: none` "
    "in the contract to run unconfined"
)
PROBE_TIMEOUT = 10.0
_PRIVATE_TMP = Path("/tmp")
_RUN = Path("/run")
# Where any user of the host may create a socket at any time (after the sandbox started,
# too): a private tmpfs inside, like /tmp, when the sandbox has a network of its own.
_SHARED_TMP = Path("/var/tmp")
_UNIX_TABLE = "/proc/net/unix"
_SHEBANG_BYTES = 256

# Mount kinds, in the order they are applied at the same path: a tmpfs first, binds on top.
_TMPFS, _HIDE, _READ, _WRITE = 0, 1, 2, 3


def bwrap_path(environ: Mapping[str, str] | None = None) -> str | None:
    """The bwrap executable assay would run (``$ASSAY_BWRAP``, else ``bwrap`` on ``PATH``)."""
    environ = os.environ if environ is None else environ
    override = environ.get(BWRAP_ENV)
    if override is not None:
        found = shutil.which(override) if override else None
        return found
    return shutil.which("bwrap", path=environ.get("PATH"))


def bwrap_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why bwrap cannot confine a process here, or None when it can (probed once per path)."""
    path = bwrap_path(environ)
    if path is None:
        return MISSING_MESSAGE
    return _probe(path)


def bwrap_available(environ: Mapping[str, str] | None = None) -> bool:
    return bwrap_problem(environ) is None


@functools.cache
def _probe(path: str) -> str | None:
    """Run ``bwrap --ro-bind / / true`` once: a bwrap that is there but cannot create its
    namespaces (a container without user namespaces) is as good as missing."""
    try:
        done = subprocess.run(
            [path, "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            env={"PATH": os.defpath},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap (bwrap) at {path} cannot start: {exc}; {_ADVICE}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"bubblewrap (bwrap) at {path} cannot create a sandbox here: {why[0]}; {_ADVICE}"
    return None


_ADVICE = "fix it, or set `sandbox: none` in the contract to run unconfined"


def confines(spec: SandboxSpec | None) -> TypeGuard[SandboxSpec]:
    """Whether ``spec`` asks for a bwrap sandbox (None and ``mode: none`` run unconfined)."""
    return spec is not None and spec.mode is SandboxMode.BWRAP


def sandbox_env(spec: SandboxSpec, env: Mapping[str, str]) -> dict[str, str]:
    """The environment bwrap starts with (and hands on): ``env``, ``spec.extra_env``, ``HOME``
    the seat's home and a ``TMPDIR`` inside the sandbox."""
    inner = dict(env)
    inner.update(spec.extra_env)
    if spec.home is not None:
        inner["HOME"] = str(spec.home)
    tmpdir = inner.get("TMPDIR")
    if tmpdir is not None and not _is_writable_inside(Path(tmpdir), spec):
        inner["TMPDIR"] = str(_PRIVATE_TMP)
    return inner


def bwrap_command(
    spec: SandboxSpec,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    bwrap: str = "bwrap",
    wrapper: Sequence[str] = (),
) -> list[str]:
    """The whole command line: ``bwrap <confinement> --chdir cwd -- wrapper argv``.

    ``env`` is the environment the process will have (see :func:`sandbox_env`); its ``PATH``
    decides where ``argv[0]`` and its install root are looked up. ``wrapper`` starts first
    inside and runs ``argv`` itself (the network forwarder).
    """
    args = [
        bwrap,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    if spec.network is not NetworkMode.HOST:
        args.append("--unshare-net")
    args += mount_args(spec, argv, env)
    args += ["--chdir", str(cwd), "--", *wrapper, *argv]
    return args


def mount_args(spec: SandboxSpec, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The tmpfs and bind arguments, parents before children, tmpfs before binds at one path."""
    ordered = _mounts(spec, argv, env)
    bound = {path for path, kind in ordered if kind in (_READ, _WRITE)}
    args: list[str] = []
    remount: list[str] = []
    for path, kind in ordered:
        where = str(path)
        if kind == _HIDE and not path.is_dir():
            args += ["--ro-bind", os.devnull, where]  # a hidden file reads as empty
        elif kind in (_TMPFS, _HIDE):
            args += ["--tmpfs", where]
            if kind == _HIDE and path not in bound:
                remount += ["--remount-ro", where]
        elif kind == _READ:
            args += ["--ro-bind-try", where, where]
        else:
            args += ["--bind", where, where]
    # Read-only last, once every bind under it has its mount point: a hidden folder shows
    # empty and nobody can write to it (a write there would only vanish; it fails loudly).
    return args + remount


def hidden_by(
    path: Path, spec: SandboxSpec, argv: Sequence[str], env: Mapping[str, str]
) -> Path | None:
    """What hides ``path`` from a process started as ``argv`` with ``env`` in ``spec``'s
    sandbox: the hidden or private folder (the operator's home, the repository, ``/tmp``...)
    whose mount is the nearest above it, when no bind shows it again; None when the process
    sees it. Read from the very mounts :func:`mount_args` makes (host sockets aside)."""
    real = _real(path)
    nearest: tuple[Path, int] | None = None
    for mount in _mounts(spec, argv, env, sockets=False):  # parents first: the last one wins
        if _under_any(real, [mount[0]]):
            nearest = mount
    if nearest is None or nearest[1] in (_READ, _WRITE):
        return None
    return nearest[0]


def _mounts(
    spec: SandboxSpec, argv: Sequence[str], env: Mapping[str, str], *, sockets: bool = True
) -> list[tuple[Path, int]]:
    """Every mount of the sandbox as (path, kind), parents before children, tmpfs before binds
    at one path; ``sockets`` False leaves the host's sockets out (a look that starts nothing)."""
    hidden = _existing(spec.hidden)
    writable = [*_existing(spec.writable), *_existing([spec.home] if spec.home else [])]
    own_network = spec.network is not NetworkMode.HOST
    shared_tmp = [_real(_SHARED_TMP)] if own_network and _SHARED_TMP.is_dir() else []
    covered = [*hidden, _PRIVATE_TMP, *shared_tmp, *([_RUN] if own_network else [])]
    # Bound back only when hidden, and never a hidden path itself or a folder holding one
    # (a PATH entry naming the operator's home must not show the home).
    needed = [
        p
        for p in needed_paths(argv, env, covered)
        if _under_any(p, covered) and not any(_under_any(h, [p]) for h in hidden)
    ]
    mounts: dict[tuple[Path, int], None] = {(_PRIVATE_TMP, _TMPFS): None}
    mounts.update({(path, _TMPFS): None for path in shared_tmp})
    if own_network and _RUN.is_dir():
        mounts[(_RUN, _HIDE)] = None
    mounts.update({(path, _HIDE): None for path in hidden})
    if own_network and sockets:
        # Every host socket the sandbox would see, but one under a path granted by name (a
        # halt relay's folder): under a hidden path bound back (an install root) too.
        granted = _existing(spec.readable)
        shown = [*needed, *writable]
        for socket_path in host_sockets():
            if _under_any(socket_path, granted):
                continue
            if not _under_any(socket_path, covered) or _under_any(socket_path, shown):
                mounts[(socket_path, _HIDE)] = None
    mounts.update({(path, _READ): None for path in [*_existing(spec.readable), *needed]})
    mounts.update({(path, _WRITE): None for path in writable})
    return sorted(mounts, key=lambda m: (len(m[0].parts), m[1], str(m[0])))


def host_sockets() -> list[Path]:
    """Every unix socket the host has bound at a path (resolved, still a socket there)."""
    try:
        with open(_UNIX_TABLE, encoding="utf-8", errors="surrogateescape") as table:
            lines = table.read().splitlines()[1:]
    except OSError:
        return []
    found: dict[Path, None] = {}
    relative: dict[str, list[str]] = {}
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or fields[7].startswith("@"):
            continue  # unbound, or abstract (those stay in the host's network namespace)
        if not fields[7].startswith("/"):
            # Bound by a relative name: the table shows the name, not the folder it is in.
            relative.setdefault(fields[6], []).append(fields[7])
            continue
        _add_socket(found, fields[7])
    if relative:
        for inode, folder in _owners_folders(set(relative)):
            for name in relative[inode]:
                _add_socket(found, os.path.join(folder, name))
    return list(found)


def _add_socket(found: dict[Path, None], name: str) -> None:
    path = _real(name)
    if path in found:
        return
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            found[path] = None
    except OSError:
        pass


def _owners_folders(inodes: set[str]) -> list[tuple[str, str]]:
    """``(inode, working folder)`` of every process holding one of the sockets ``inodes``
    (where a relative name was most likely bound: the folder a server runs in)."""
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    found: list[tuple[str, str]] = []
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return found
    for pid in pids:
        held = {wanted[link] for link in _fd_links(pid) if link in wanted}
        if held:
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{pid}/cwd")
                found += [(inode, cwd) for inode in sorted(held)]
    return found


def _fd_links(pid: str) -> list[str]:
    """What process ``pid``'s descriptors point at (``socket:[inode]`` for a socket)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []  # gone, or not ours to look at
    links = []
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return links


def prepare(spec: SandboxSpec) -> None:
    """Create the writable folders and the home, so each can be bound (bwrap needs a source)."""
    for path in [*spec.writable, *([spec.home] if spec.home else [])]:
        if not os.path.lexists(path):
            Path(path).mkdir(parents=True, exist_ok=True)


def needed_paths(
    argv: Sequence[str], env: Mapping[str, str], covered: Sequence[Path] | None = None
) -> list[Path]:
    """What a program needs to start: the Python installation and assay, the install root of
    ``argv[0]`` (and of its ``#!`` interpreter) on the env's ``PATH``, and the ``PATH`` entries.

    With ``covered``, a ``PATH`` entry outside it is skipped before its install root is sought
    (it is visible anyway), which keeps this cheap for a long ``PATH``."""
    paths = list(_own_paths())
    search = env.get("PATH", os.defpath)
    if argv:
        paths += _program_roots(argv[0], search)
    for entry in search.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = _real(entry)
        if (covered is None or _under_any(real, covered)) and real.is_dir():
            root = install_root(real)  # a virtualenv runs its base interpreter: that too
            paths += [root, *_venv_base(root)]
    return list(dict.fromkeys(paths))


@functools.cache
def _own_paths() -> tuple[Path, ...]:
    """The Python installation this assay runs on and the folder it imports assay from."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found = [_real(prefix) for prefix in sorted(prefixes)]
    found.append(_real(Path(assay.__file__).parent.parent))
    return tuple(dict.fromkeys(found))


def install_root(path: Path) -> Path:
    """The folder a program at ``path`` (resolved) needs whole: a venv root, an npm prefix, a
    pyenv root; else the program's own folder."""
    folder = path if path.is_dir() else path.parent
    for parent in (folder, *folder.parents):
        if len(parent.parts) <= 2:  # never a top-level folder ("/root", "/home") whole
            break
        if (parent / "pyvenv.cfg").is_file():
            return parent
        if parent.name == "node_modules":
            prefix = parent.parent
            return prefix.parent if prefix.name == "lib" else prefix
        if (parent / "libexec" / "pyenv").exists():
            return parent
    return folder


def _program_roots(program: str, search: str) -> list[Path]:
    found = shutil.which(program, path=search)
    if found is None:
        return []
    real = _real(found)
    roots = [install_root(real), *_venv_base(install_root(real)), *_user_site(real)]
    interpreter = _shebang(real, search)
    if interpreter is not None:
        roots += [install_root(interpreter), *_venv_base(install_root(interpreter))]
    return roots


def _user_site(program: Path) -> list[Path]:
    """A ``pip install --user`` script in ``~/.local/bin`` imports from ``~/.local/lib``; only
    that is bound, not ``~/.local/share`` (keyrings, agents' credentials)."""
    base = program.parent.parent
    if program.parent.name == "bin" and base.name == ".local" and (base / "lib").is_dir():
        return [base / "lib"]
    return []


def _venv_base(root: Path) -> list[Path]:
    """A venv's base Python installation (``home`` in its pyvenv.cfg), which it runs from."""
    try:
        lines = (root / "pyvenv.cfg").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = _real(value.strip())
            return [home.parent if home.name == "bin" else home]
    return []


def _shebang(path: Path, search: str) -> Path | None:
    """The interpreter a ``#!`` script names (through ``/usr/bin/env``), resolved."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not words:
            return None
    found = shutil.which(words[0], path=search)
    return _real(found) if found else None


def _existing(paths: Iterable[Path]) -> list[Path]:
    return [_real(p) for p in paths if os.path.lexists(p)]


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _under_any(path: Path, roots: Iterable[Path]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one (by name: both are resolved)."""
    text = str(path)
    return any(text == str(root) or text.startswith(f"{str(root).rstrip('/')}/") for root in roots)


def _is_writable_inside(path: Path, spec: SandboxSpec) -> bool:
    writable = [*spec.writable, *([spec.home] if spec.home else []), _PRIVATE_TMP]
    return _under_any(_real(path), [_real(p) for p in writable])
