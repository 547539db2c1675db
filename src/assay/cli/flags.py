"""The flags that build a contract, shared by ``assay run`` and ``assay task add``.

Declared apart from both commands, with bounds from :mod:`assay.core.limits`, so that building
a command's options imports neither the run machinery nor the contract's models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from assay.cli.coder_flags import FLAG_KINDS
from assay.cli.completion import coder_kinds
from assay.core.limits import MAX_ATTEMPTS_LIMIT, MAX_RECOVERY_LIMIT
from assay.core.vocab import LandMode, SandboxMode

_KINDS = [k.value for k in FLAG_KINDS]

ContractFlag = Annotated[
    Path | None, typer.Option("--contract", "-c", help="A dispatch contract (YAML).")
]
CoderFlag = Annotated[
    str | None,
    typer.Option(
        metavar="KIND[:MODEL]",
        help=f"The coder: {', '.join(_KINDS[:-1])} or {_KINDS[-1]} (default claude; command "
        "with --coder-command). KIND:MODEL also picks its model, like --model.",
        autocompletion=coder_kinds,
    ),
]
CoderCommandFlag = Annotated[
    str | None, typer.Option(help="For --coder command: the command line to run.")
]
ModelFlag = Annotated[
    str | None,
    typer.Option(
        "--model",
        metavar="NAME",
        help="The coder's model (--coder llm needs one); the coder's own default without it.",
    ),
]
BaseUrlFlag = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="The model endpoint: for --coder llm an OpenAI-compatible URL (e.g. "
        "http://localhost:8000/v1; default $OPENAI_BASE_URL, else api.openai.com); claude, "
        "codex, aider and mini are given it as their API base.",
    ),
]
ApiKeyEnvFlag = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        metavar="VAR",
        help="For --coder llm or codex: the environment variable that holds the API key "
        "(default OPENAI_API_KEY).",
    ),
]
ValidatorFlag = Annotated[
    list[str] | None,
    typer.Option(
        "--validator",
        "-v",
        metavar="[NAME=]COMMAND",
        help='A validator command, e.g. "pytest -q" (repeat it for more); named v1, v2 and so '
        'on in the output, or give the name: tests="pytest -q".',
    ),
]
LandFlag = Annotated[
    LandMode,
    typer.Option(
        help="Where a passing change goes: merge (one commit on the base branch), branch "
        "(left on assay/<run>/<seat>), pr (pushed, a pull request opened) or none."
    ),
]
SeatsFlag = Annotated[int, typer.Option(min=1, max=16, help="Competing coders per attempt.")]
MaxAttemptsFlag = Annotated[
    int, typer.Option(min=1, max=MAX_ATTEMPTS_LIMIT, help="Runs before the task is Held.")
]
SandboxFlag = Annotated[
    SandboxMode | None,
    typer.Option(
        help="bwrap (the default) or none: run the seat's processes unconfined. Overrides the "
        "contract's `sandbox:`."
    ),
]
MaxRecoveryFlag = Annotated[
    int, typer.Option(min=0, max=MAX_RECOVERY_LIMIT, help="Recovery waves per run.")
]
MaxCostFlag = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        help="Cap the run's spending in US dollars (budgets.max_cost_usd); overrides the "
        "contract's. Spent: the coders are stopped and the task held (halt-budget-exhausted).",
    ),
]
MaxTokensFlag = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        metavar="N",
        help="Cap the run's tokens (budgets.max_tokens), the same way.",
    ),
]
TaskMaxCostFlag = Annotated[
    float | None,
    typer.Option(
        "--task-max-cost",
        metavar="USD",
        help="Cap the task's spending in US dollars across all its runs, refunded ones too "
        "(budgets.task_max_cost_usd).",
    ),
]
TaskMaxTokensFlag = Annotated[
    int | None,
    typer.Option(
        "--task-max-tokens",
        min=1,
        metavar="N",
        help="Cap the task's tokens across all its runs (budgets.task_max_tokens).",
    ),
]
