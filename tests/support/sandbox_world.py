"""A fake operator home and user repository around a seat, to run scripts in the real sandbox."""

from __future__ import annotations

import os
from pathlib import Path

from assay.adapters.process import run_process
from assay.adapters.sandbox_spec import SandboxSpec

SECRET = "op-secret-8d1f0c"
PATH = os.environ.get("PATH", "/usr/bin:/bin")


class World:
    """A fake operator home and user repository (hidden), and a seat inside the repository."""

    def __init__(self, root: Path) -> None:
        self.home = root / "operator-home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(SECRET)
        self.repo = root / "user-repo"
        (self.repo / ".git" / "hooks").mkdir(parents=True)
        (self.repo / ".git" / "config").write_text("[core]\n")
        self.seat = self.repo / ".assay" / "seats" / "r1" / "seat-1"
        self.seat.mkdir(parents=True)
        self.seat_home = self.repo / ".assay" / "seats" / "r1" / "seat-1.home"
        self.logs = root / "logs"
        self.spec = SandboxSpec(
            writable=(self.seat,),
            hidden=(self.home, self.repo),
            home=self.seat_home,
        )

    def run(
        self,
        script: str,
        *,
        spec: SandboxSpec | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 20.0,
        name: str = "p",
    ) -> tuple[int | None, str, str]:
        ran = run_process(
            ["/bin/sh", "-c", script],
            cwd=self.seat,
            env=env if env is not None else {"PATH": PATH, "HOME": str(self.home)},
            timeout=timeout,
            log_path=self.logs / f"{name}.log",
            sandbox=spec or self.spec,
        )
        return ran.exit_code, ran.stdout, ran.stderr
