"""Two machines that share only an origin, a ledger and a Temporal server.

Each worker runs in a clone of its own (its own home), both cloned from one bare origin; the
tasks are queued from a third clone, the user's. Every change lands on the origin, once, each
on the tip the one before it left (pushed by compare-and-swap; a lost push combines and
revalidates); the workers' own branches never move; the user sees every landing by fetching.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from support.repo import Repo, git, make_repo_with_origin
from support.services import require_temporal_executor
from support.temporal import DevServer, ExternalServer
from support.workers import Worker, add_task, serve_once, service_env, show

TASKS = 4


def contract(repo: Repo, n: int) -> Path:
    # Each task adds a file of its own: no two conflict, every one must land.
    return repo.contract(
        f"note-{n}.yaml",
        f"""task: Add note {n}.
scope: {{allow: ["notes/**"]}}
coder: {{kind: command, command: "mkdir -p notes && echo {n} > notes/n{n}.txt"}}
validators: [{{id: note, kind: command, run: "test -s notes/n{n}.txt"}}]
land: merge
""",
    )


def test_two_machines_land_every_change_on_the_origin_once(
    tmp_path: Path, temporal_server: DevServer | ExternalServer, postgres_url: str
) -> None:
    require_temporal_executor()
    user = make_repo_with_origin(tmp_path)
    origin = tmp_path / "origin.git"
    git(origin, "symbolic-ref", "HEAD", "refs/heads/main")
    clones = [tmp_path / f"clone-{n}" for n in (1, 2)]
    for clone in clones:
        git(tmp_path, "clone", "-q", str(origin), str(clone))
    base = git(user.root, "rev-parse", "main")
    env = service_env(postgres_url)
    queue = f"origin-{uuid.uuid4().hex[:10]}"
    workers = [
        Worker(temporal_server.address, clone, tmp_path / f"home-{n}", postgres_url, queue)
        for n, clone in enumerate(clones, 1)
    ]
    try:
        for worker in workers:
            worker.start()
        ids = [add_task(user.root, contract(user, n), env) for n in range(TASKS)]
        done = serve_once(user.root, temporal_server.address, queue, env, timeout=300)
        assert done.returncode == 0, done.stderr + "\n".join(w.tail() for w in workers)
    finally:
        for worker in workers:
            worker.stop()

    git(user.root, "fetch", "-q", "origin")
    landed = git(user.root, "log", "--format=%(trailers:key=Assay-Task,valueonly)", "origin/main")
    reasons = [
        (t["id"], t["status"], t.get("last_error"))
        for t in show(user.root, "task", "list", env=env)
    ]
    assert sorted(line for line in landed.splitlines() if line.strip()) == sorted(ids), reasons
    # One straight line of landings on the origin, each on the one before it.
    line = git(user.root, "rev-list", "--first-parent", f"{base}..origin/main").split()
    assert len(line) == TASKS and git(user.root, "rev-list", "--merges", "origin/main") == ""
    files = git(user.root, "ls-tree", "-r", "--name-only", "origin/main", "notes").split()
    assert files == [f"notes/n{n}.txt" for n in range(TASKS)]
    for clone in clones:  # a worker's clone is a workspace: its own main never moved
        assert git(clone, "rev-parse", "main") == base
