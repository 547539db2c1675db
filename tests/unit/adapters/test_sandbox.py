"""The bwrap sandbox, with the real bwrap: what a confined process can see, write and reach.

These need bubblewrap installed (``.ci/run`` installs it); without it they fail, loudly, on
purpose: the sandbox is what keeps the operator's secrets from a coder.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.sandbox_world import PATH, SECRET, World

from assay.adapters.process import EnvironmentFault, live_groups, run_process
from assay.adapters.sandbox import (
    BWRAP_ENV,
    MISSING_MESSAGE,
    bwrap_command,
    bwrap_problem,
    install_root,
    sandbox_env,
)
from assay.core.vocab import NetworkMode, SandboxMode


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    problem = bwrap_problem()
    assert problem is None, f"these tests need a working bubblewrap: {problem}"


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_only_the_allowlisted_environment_reaches_any_process_inside(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPERATOR_TOKEN", SECRET)  # in assay's own environment
    env = {"PATH": PATH, "HOME": str(world.home), "KEPT": "yes"}
    code, out, _ = world.run(
        "env; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done; echo END", env=env
    )
    assert code == 0 and out.rstrip().endswith("END")
    assert "KEPT=yes" in out
    assert SECRET not in out
    assert f"HOME={world.seat_home}" in out  # the seat's private home, not the operator's
    pid1 = world.run("tr '\\0' '\\n' < /proc/1/environ", env=env, name="pid1")[1]
    assert sorted(line.split("=")[0] for line in pid1.split()) == ["HOME", "KEPT", "PATH"]


def test_proc_shows_only_the_sandbox(world: World) -> None:
    ours = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    code, out, _ = world.run(
        "ls /proc | grep -E '^[0-9]+$'; echo =SEP=; cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
    )
    assert code == 0
    pids, cmdlines = out.split("=SEP=", 1)
    assert len(pids.split()) <= 5, pids  # bwrap's init, the shell, ls, grep
    assert ours not in cmdlines  # this test process (assay's stand-in) is not there
    # Nor can a signal reach it: its pid means nothing inside (pids there count from 1).
    probe = f"kill -0 {os.getpid()} 2>/dev/null && echo reachable || echo unreachable"
    assert world.run(probe, name="kill")[1].strip() == "unreachable"


def test_the_hidden_home_and_repository_are_empty_and_unwritable(world: World) -> None:
    script = (
        f"cat {world.home}/.ssh/id_rsa; ls -A {world.home} {world.repo}/.git; "
        f"echo EVIL > {world.home}/planted || echo refused-home; "
        f"echo EVIL > {world.repo}/.git/config || echo refused-config; "
        f"mkdir {world.repo}/.git/hooks || echo refused-hooks; "
        f"umount {world.home} || echo refused-umount"
    )
    _, out, _ = world.run(script)
    assert SECRET not in out
    assert "refused-home" in out and "refused-config" in out and "refused-hooks" in out
    assert "refused-umount" in out  # no capabilities: the tmpfs over the home stays
    assert (world.repo / ".git" / "config").read_text() == "[core]\n"
    assert not (world.home / "planted").exists()
    assert sorted(os.listdir(world.home)) == [".ssh"]


def test_writes_outside_the_writable_paths_never_land(world: World, tmp_path: Path) -> None:
    visible_ro = Path(__file__).resolve().parent  # under the read-only root
    outside_tmp = tmp_path / "outside.txt"  # under /tmp, which is private inside
    _, out, _ = world.run(
        f"echo x > {visible_ro}/planted.txt || echo refused-ro; "
        f"echo x > ../../../../outside.txt || echo refused-relative; "
        f"echo x > {outside_tmp}; echo x > /tmp/scratch && echo tmp-ok; "
        "echo ok > in-seat.txt && echo seat-ok; echo ok > $HOME/.rc && echo home-ok"
    )
    assert "refused-ro" in out and not (visible_ro / "planted.txt").exists()
    assert "refused-relative" in out
    assert not outside_tmp.exists()  # the write went to the sandbox's own /tmp
    assert "tmp-ok" in out and "seat-ok" in out and "home-ok" in out
    assert (world.seat / "in-seat.txt").read_text() == "ok\n"
    assert (world.seat_home / ".rc").read_text() == "ok\n"


def test_readable_paths_are_bound_back_read_only(world: World) -> None:
    objects = world.repo / ".git" / "objects"
    objects.mkdir()
    (objects / "pack").write_text("shared")
    spec = replace(world.spec, readable=(objects,))
    _, out, _ = world.run(f"cat {objects}/pack; echo x > {objects}/new || echo refused", spec=spec)
    assert "shared" in out and "refused" in out
    assert not (objects / "new").exists()


def test_network_none_leaves_only_loopback(world: World) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    probe = (
        f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
        "; print('connected')\" || echo unreachable"
    )
    try:
        _, out, _ = world.run(
            f"cat /proc/net/dev; {probe}", spec=replace(world.spec, network=NetworkMode.NONE)
        )
        interfaces = [line.split(":")[0].strip() for line in out.splitlines() if ":" in line]
        assert interfaces == ["lo"]
        assert "unreachable" in out and "connected" not in out
        kept = world.run(probe, spec=replace(world.spec, network=NetworkMode.HOST), name="host")[1]
        assert "connected" in kept  # network: host keeps the machine's network
    finally:
        listener.close()


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _none_left(marker: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while _host_processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_timeout_ends_everything_the_sandboxed_child_started(world: World) -> None:
    # One background sleep, one that left the group with setsid, one in the foreground.
    script = "sleep 311 & setsid sleep 312 & sleep 313"
    started = time.monotonic()
    code, _, _ = world.run(script, timeout=1.0)
    assert code is None and time.monotonic() - started < 6
    for marker in ("sleep 311", "sleep 312", "sleep 313"):
        assert _none_left(marker), marker


def test_a_stop_request_ends_the_sandbox(world: World) -> None:
    """What a stop request does to each live group (TERM), here without its global state."""
    import signal
    import threading

    def stop() -> None:
        deadline = time.monotonic() + 10
        while not live_groups() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        for pgid in live_groups():
            os.killpg(pgid, signal.SIGTERM)

    stopper = threading.Thread(target=stop)
    stopper.start()
    started = time.monotonic()
    code, _, _ = world.run("sleep 321 & sleep 322", timeout=30)
    stopper.join()
    assert time.monotonic() - started < 6
    assert code == -signal.SIGTERM  # bwrap itself ended by the TERM
    assert _none_left("sleep 321") and _none_left("sleep 322")


def test_exit_codes_pass_through(world: World) -> None:
    assert world.run("exit 7")[0] == 7
    assert world.run("true", name="t")[0] == 0


def test_python_starts_although_it_lives_under_the_hidden_home(world: World) -> None:
    # sys.executable's base installation lives in ~/.pyenv here: under the hidden home.
    spec = replace(world.spec, hidden=(*world.spec.hidden, Path.home()))
    code, out, err = world.run(
        f"{sys.executable} -c 'import sys; print(sys.version_info[:2])'", spec=spec
    )
    assert code == 0, err
    assert out.strip() == str(tuple(sys.version_info[:2]))
    # that assay starts too is tests/e2e/adapters/test_sandbox_assay.py (it is a process of assay's)


def test_a_program_found_on_path_under_the_hidden_home_starts(world: World, tmp_path: Path) -> None:
    tools = world.home / "tools" / "bin"
    tools.mkdir(parents=True)
    tool = tools / "greet"
    tool.write_text("#!/bin/sh\necho hello from greet\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tools}:{PATH}", "HOME": str(world.home)}
    ran = run_process(
        ["greet"], cwd=world.seat, env=env, timeout=20, log_path=world.logs / "g.log",
        sandbox=world.spec,
    )  # fmt: skip
    assert ran.exit_code == 0 and ran.stdout == "hello from greet\n"
    # ... while the rest of the home stays hidden.
    assert SECRET not in world.run(f"cat {world.home}/.ssh/id_rsa", env=env, name="k")[1]


def test_install_roots(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert install_root(venv / "bin" / "python") == venv
    cli = tmp_path / "npm" / "lib" / "node_modules" / "agent" / "cli.js"
    cli.parent.mkdir(parents=True)
    assert install_root(cli) == tmp_path / "npm"
    plain = tmp_path / "bin" / "tool"
    plain.parent.mkdir()
    assert install_root(plain) == tmp_path / "bin"


def test_a_user_install_finds_its_packages_and_nothing_else_of_the_home(world: World) -> None:
    local = world.home / ".local"
    (local / "bin").mkdir(parents=True)
    site = local / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    (site / "userpkg.py").write_text("WORD = 'from the user site'\n")
    (local / "share" / "keyrings").mkdir(parents=True)
    (local / "share" / "keyrings" / "login").write_text(SECRET)
    tool = local / "bin" / "usertool"
    tool.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -c "
                    "'import userpkg; print(userpkg.WORD)'\n")  # fmt: skip
    tool.chmod(0o755)
    env = {"PATH": f"{local / 'bin'}:{PATH}", "HOME": str(world.home)}
    ran = run_process(
        ["usertool"], cwd=world.seat, env=env, timeout=20, log_path=world.logs / "u.log",
        sandbox=world.spec,
    )  # fmt: skip
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == "from the user site\n"
    assert SECRET not in world.run(f"cat {local}/share/keyrings/login", env=env, name="kr")[1]


def test_a_path_entry_naming_a_hidden_folder_does_not_unhide_it(world: World) -> None:
    env = {"PATH": f"{world.home}:{world.repo}:{PATH}", "HOME": str(world.home)}
    command = bwrap_command(
        world.spec, ["/bin/true"], env=sandbox_env(world.spec, env), cwd=world.seat
    )
    binds = [command[i + 1] for i, a in enumerate(command) if a in ("--ro-bind-try", "--bind")]
    assert str(world.home) not in binds and str(world.repo) not in binds
    assert SECRET not in world.run(f"cat {world.home}/.ssh/id_rsa", env=env)[1]


def test_mode_none_runs_unconfined(world: World) -> None:
    spec = replace(world.spec, mode=SandboxMode.NONE)
    assert world.run(f"cat {world.home}/.ssh/id_rsa", spec=spec)[1] == SECRET


def test_a_missing_program_is_refused_as_unconfined(world: World) -> None:
    with pytest.raises(FileNotFoundError):
        run_process(
            ["no-such-program-xyz"], cwd=world.seat, env={"PATH": PATH}, timeout=5,
            log_path=world.logs / "m.log", sandbox=world.spec,
        )  # fmt: skip


def test_missing_bwrap_is_an_environment_fault(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(BWRAP_ENV, str(tmp_path / "no-bwrap"))
    assert bwrap_problem() == MISSING_MESSAGE
    with pytest.raises(EnvironmentFault, match="apt-get install bubblewrap"):
        world.run("true")
    broken = tmp_path / "broken-bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    monkeypatch.setenv(BWRAP_ENV, str(broken))
    problem = bwrap_problem()
    assert problem is not None and "No permissions to create new namespace" in problem
    assert "sandbox: none" in problem


def test_a_virtualenv_on_path_runs_its_base_interpreter_under_a_hidden_home(
    world: World,
) -> None:
    # a command validator is `sh -c "python3 ..."`: the virtualenv is found through PATH, not
    # argv[0], and its python links to a base interpreter (pyenv's) under the hidden home
    base = world.home / ".pyenv" / "versions" / "3.99" / "bin"
    base.mkdir(parents=True)
    (base / "python3.99").write_text("#!/bin/sh\necho base interpreter ran\n")
    (base / "python3.99").chmod(0o755)
    venv = world.home / "venvs" / "project"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}\n")
    (venv / "bin" / "python3").symlink_to(base / "python3.99")
    env = {"PATH": f"{venv / 'bin'}:{PATH}", "HOME": str(world.home)}
    ran = run_process(
        ["/bin/sh", "-c", "python3"], cwd=world.seat, env=env, timeout=20,
        log_path=world.logs / "v.log", sandbox=world.spec,
    )  # fmt: skip
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == "base interpreter ran\n"
    assert SECRET not in world.run(f"cat {world.home}/.ssh/id_rsa", env=env, name="k")[1]
