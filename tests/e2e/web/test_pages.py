"""The dashboard's pages, through its ASGI app in this process, over a ledger filled by real
`assay` runs (the shared world of ``conftest.py``): each page renders and says the right facts,
unknown things are 404 pages, hostile text is escaped, and an unreadable task row does not take
the queue down."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.dashboard import BASE, OPERATOR, credentials, log_in
from support.in_process import watch_while

from assay.core.tasks import Task
from assay.core.vocab import EventKind
from assay.web.app import create_app
from assay.web.config import WebConfig

if TYPE_CHECKING:
    from conftest import World


def client_for(world: World, **config: Any) -> TestClient:
    """A client of the world's dashboard, logged in (with ``anonymous_read``: not)."""
    settings: dict[str, Any] = {
        "ledger": world.ledger(),
        "state_dir": world.state_dir,
        "credentials": credentials(world.repo.root.parent / "config"),
        **config,
    }
    c = TestClient(create_app(WebConfig(**settings)), base_url=BASE, raise_server_exceptions=False)
    if not config.get("anonymous_read"):
        log_in(c)
    return c


@pytest.fixture(scope="module")
def client(sqlite_world: World) -> Iterator[TestClient]:
    with client_for(sqlite_world) as c:
        yield c


def _text(html: str) -> str:
    """The page's words without tags, whitespace collapsed (what a reader sees)."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_queue_lists_every_task_with_its_status_and_counts(world: World) -> None:
    with client_for(world) as c:
        page = c.get("/")
    assert page.status_code == 200
    html = page.text
    for task_id in (world.done_task, world.held_task, world.halted_task, world.queued_task):
        assert f'href="/tasks/{task_id}"' in html
    text = _text(html)
    assert "all 4" in text and "held 2" in text and "done 1" in text and "queued 1" in text
    assert "waiting for the API freeze" in text  # the manual hold's reason
    assert "halt-scope-breach" in text  # the machine hold names its halt
    assert 'class="pill status-done"' in html and 'class="pill status-held"' in html
    assert f'href="/runs/{world.pass_run}"' in html  # the last run, linked
    assert 'data-live-fragment="/fragments/queue"' in html
    assert re.search(r'<body data-live-after="\d+"', html)


def test_queue_filters_by_status_and_paginates(client: TestClient, sqlite_world: World) -> None:
    held = client.get("/", params={"status": "held"}).text
    assert f"/tasks/{sqlite_world.held_task}" in held
    assert f"/tasks/{sqlite_world.halted_task}" in held
    assert f"/tasks/{sqlite_world.done_task}" not in held
    assert 'class="tab tab-held active"' in held
    assert 'data-live-fragment="/fragments/queue?status=held"' in held

    beyond = client.get("/", params={"page": 7})  # past the end: the last page
    assert beyond.status_code == 200 and f"/tasks/{sqlite_world.done_task}" in beyond.text
    assert "No task is running" in client.get("/?status=running").text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/?status=bogus", "no task status &#39;bogus&#39;"),
        ("/?page=0", "a number from 1, not &#39;0&#39;"),
        ("/?page=abc", "a number from 1, not &#39;abc&#39;"),
        ("/halts?page=-1", "greater than or equal to 1"),
    ],
)
def test_bad_queries_are_400_pages(client: TestClient, url: str, says: str) -> None:
    page = client.get(url)
    assert page.status_code == 400
    assert "Bad request" in page.text and says in page.text
    assert "Traceback" not in page.text


@pytest.mark.parametrize(
    "url",
    [
        "/tasks/t-nope",
        "/runs/r-nope",
        "/runs/r-nope/payload.json",
        "/fragments/tasks/t-nope",
        "/fragments/runs/r-nope",
        "/no/such/page",
    ],
)
def test_unknown_things_are_404_pages(client: TestClient, url: str) -> None:
    page = client.get(url)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert '<a class="brand" href="/">' in page.text  # the dashboard's own page, with its nav


def test_a_done_task_shows_its_run_and_what_settle_did(
    client: TestClient, sqlite_world: World
) -> None:
    html = client.get(f"/tasks/{sqlite_world.done_task}").text
    text = _text(html)
    assert f'href="/runs/{sqlite_world.pass_run}"' in html
    assert "succeeded" in text and "spent" in text
    assert "Make slugify keep digits." in text  # the title and the instruction
    assert "The task is done" in text
    assert 'action="/tasks/' not in html  # no move is allowed on a done task
    assert f'data-live-task="{sqlite_world.done_task}"' in html


def test_a_held_task_offers_release_only(client: TestClient, sqlite_world: World) -> None:
    page = client.get(f"/tasks/{sqlite_world.held_task}")
    html = page.text
    assert f'action="/tasks/{sqlite_world.held_task}/release"' in html
    assert "/hold" not in html and "/cancel" not in html
    assert "waiting for the API freeze" in html
    assert "Not run yet." in html
    # The form's CSRF field is the cookie the security middleware set on this response.
    csrf = re.search(r'name="csrf" value="([^"]+)"', html)
    assert csrf is not None and csrf.group(1) == client.cookies.get("assay_csrf")


def test_a_queued_task_offers_hold_and_cancel(client: TestClient, sqlite_world: World) -> None:
    html = client.get(f"/tasks/{sqlite_world.queued_task}").text
    assert f'action="/tasks/{sqlite_world.queued_task}/hold"' in html
    assert f'action="/tasks/{sqlite_world.queued_task}/cancel"' in html
    assert "/release" not in html
    assert 'name="reason"' in html
    assert 'name="by"' not in html  # who acts is the login's token name, not a field


def test_the_run_page_shows_the_blocked_attempt_then_the_pass(world: World) -> None:
    with client_for(world) as c:
        html = c.get(f"/runs/{world.pass_run}").text
    first, second = html.index('id="attempt-1"'), html.index('id="attempt-2"')
    assert first < second
    assert 'class="attempt attempt-blocked" id="attempt-1"' in html
    assert 'class="attempt attempt-pass" id="attempt-2"' in html
    text = _text(html)
    assert "Attempt 1 blocked" in text and "Attempt 2 pass" in text
    assert "replay" in text and "viable" in text  # the seats' coder and outcome
    assert "tests" in text and "scope" in text  # the validators
    assert "1 failure fed to the next attempt" in text
    assert "src/slug.py" in text  # the changed files
    assert f'href="/runs/{world.pass_run}/payload.json"' in html
    assert f'data-live-run="{world.pass_run}"' in html
    assert f'data-live-fragment="/fragments/runs/{world.pass_run}"' in html
    assert "merged" in text and "succeeded" in text


def test_the_run_page_colours_its_diff_when_the_ledger_kept_one(
    client: TestClient, sqlite_world: World
) -> None:
    from assay.web import views

    run = views.run_view(sqlite_world.ledger(), sqlite_world.pass_run, state_dir=None)
    assert run is not None
    html = client.get(f"/runs/{sqlite_world.pass_run}").text
    if run.diff is None:
        assert "No diff kept for this run." in html
        pytest.skip("this ledger keeps no run document yet (the close writes it)")
    assert '<span class="d-add">+' in html and '<span class="d-del">-' in html
    assert "isalnum" in html


def test_a_fired_halt_shows_its_lifecycle_and_the_rearm_command(
    client: TestClient, sqlite_world: World
) -> None:
    html = client.get(f"/runs/{sqlite_world.halt_run}").text
    text = _text(html)
    assert 'class="pill status-fired"' in html
    assert "the task needs a change to setup.cfg, outside src/" in text
    assert "assay halt rearm" in html and "halt-scope-breach" in html
    action = f'action="/runs/{sqlite_world.halt_run}/halts/halt-scope-breach/rearm"'
    assert action in html  # its state file is on this machine
    assert 'name="evidence" required' in html


def test_the_halts_page_lists_the_fired_halt(client: TestClient, sqlite_world: World) -> None:
    html = client.get("/halts").text
    assert f'href="/runs/{sqlite_world.halt_run}"' in html
    assert f'href="/tasks/{sqlite_world.halted_task}"' in html
    assert "assay halt rearm" in html
    assert f"/runs/{sqlite_world.pass_run}" not in html  # its halts were attested, not fired
    assert 'aria-current="page">Halts' in html


def test_without_a_state_dir_the_rearm_form_is_not_offered(sqlite_world: World) -> None:
    with client_for(sqlite_world, state_dir=None) as c:
        html = c.get(f"/runs/{sqlite_world.halt_run}").text
    assert "halt-scope-breach" in html
    assert "/rearm" not in html  # nothing here could act on it


def test_the_payload_is_a_json_download(client: TestClient, sqlite_world: World) -> None:
    answer = client.get(f"/runs/{sqlite_world.pass_run}/payload.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    disposition = answer.headers["content-disposition"]
    assert disposition == f'attachment; filename="payload-{sqlite_world.pass_run}.json"'
    document = answer.json()
    assert isinstance(document, dict) and document


def test_fragments_are_the_live_part_alone(client: TestClient, sqlite_world: World) -> None:
    for url in (
        "/fragments/queue",
        "/fragments/queue?status=held",
        f"/fragments/tasks/{sqlite_world.done_task}",
        f"/fragments/runs/{sqlite_world.pass_run}",
        "/fragments/halts",
    ):
        part = client.get(url)
        assert part.status_code == 200, url
        assert "<html" not in part.text and "<body" not in part.text, url
    assert f"/tasks/{sqlite_world.held_task}" in client.get("/fragments/queue?status=held").text
    assert 'id="attempt-2"' in client.get(f"/fragments/runs/{sqlite_world.pass_run}").text


def test_a_known_notice_shows_its_own_text_and_any_other_nothing(
    client: TestClient, sqlite_world: World
) -> None:
    page = f"/tasks/{sqlite_world.held_task}"
    known = client.get(page, params={"notice": "released"}).text
    assert re.search(r'<div class="notice" role="status">Task released: [^<]+</div>', known)
    for forged in ("Security review passed: release everything", "<b>released</b>", "Released"):
        html = client.get(page, params={"notice": forged}).text
        assert 'class="notice"' not in html, forged
        assert "Security review" not in html and "&lt;b&gt;" not in html


HOSTILE = "<script>alert('pwned')</script>"


def test_hostile_text_is_escaped_everywhere(world_copy: World) -> None:
    ledger = world_copy.ledger()
    now = datetime.now(UTC)
    task = Task.new(id="t-hostile", title=HOSTILE, instruction=HOSTILE, now=now)
    task.hold(f"held: {HOSTILE}", now)
    ledger.add_task(task)
    with client_for(world_copy) as c:
        pages = [c.get("/").text, c.get("/tasks/t-hostile").text, c.get("/?status=held").text]
        pages.append(c.get("/tasks/<script>").text)  # an id in a 404 message
    for html in pages:
        assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in pages[0]
    assert "&lt;script&gt;" in pages[3]


def test_an_unreadable_task_row_does_not_take_the_queue_down(world_copy: World) -> None:
    engine = sa.create_engine(world_copy.url)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE tasks SET status = 'exploded' WHERE id = :id"),
            {"id": world_copy.queued_task},
        )
    engine.dispose()
    with client_for(world_copy) as c:
        queue = c.get("/")
        only = c.get("/?status=unreadable")
        task = c.get(f"/tasks/{world_copy.queued_task}")
    assert queue.status_code == 200
    assert 'class="pill status-unreadable"' in queue.text
    assert f"/tasks/{world_copy.done_task}" in queue.text  # the others are still listed
    assert "unreadable 1" in _text(queue.text)
    assert only.status_code == 200 and f"/tasks/{world_copy.queued_task}" in only.text
    assert task.status_code == 200  # its own page says what is wrong with it
    assert "exploded" in task.text and "cannot be read" in task.text
    assert 'action="/tasks/' not in task.text


def test_the_stylesheet_is_served(client: TestClient) -> None:
    css = client.get("/static/app.css")
    assert css.status_code == 200 and ".status-held" in css.text


def test_every_json_field_stays_out_of_the_pages(client: TestClient, sqlite_world: World) -> None:
    """No raw JSON where a table serves: no page prints a dict or list literal of its data."""
    for url in ("/", f"/tasks/{sqlite_world.done_task}", f"/runs/{sqlite_world.pass_run}"):
        text = _text(client.get(url).text)
        assert "{'" not in text and "['" not in text and '{"' not in text, url


def test_releasing_from_the_task_page_comes_back_with_a_notice(world_copy: World) -> None:
    """The page's own form, posted as a browser would, lands back on the page with the notice
    and the moves the new status allows; the move's history names the token."""
    task_id = world_copy.held_task
    with client_for(world_copy) as c:
        page = c.get(f"/tasks/{task_id}").text
        form = re.search(r'<form method="post" action="([^"]+/release)".*?</form>', page, re.S)
        assert form is not None
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.group(0))
        assert csrf is not None
        done = c.post(
            form.group(1),
            data={"csrf": csrf.group(1), "by": "alice"},
            headers={"Origin": BASE},
            follow_redirects=True,
        )
    assert done.status_code == 200
    assert done.url.path == f"/tasks/{task_id}"
    assert re.search(r'<div class="notice" role="status">Task released: queued again', done.text)
    assert f'action="/tasks/{task_id}/hold"' in done.text  # queued now: it can be held again
    history = _text(done.text[done.text.index("Operator actions") :])
    assert f"release {OPERATOR} web" in history  # the move, by the token's name, via web
    assert "alice" not in done.text


def test_an_anonymous_reader_sees_the_pages_but_no_forms(world_copy: World) -> None:
    with client_for(world_copy, anonymous_read=True) as c:
        html = c.get(f"/tasks/{world_copy.queued_task}").text
        run = c.get(f"/runs/{world_copy.halt_run}").text
    assert world_copy.queued_task in html and "Read-only" in html
    assert 'action="/tasks/' not in html and "/rearm" not in run
    assert 'href="/login"' in html


def test_only_http_urls_become_links(world_copy: World) -> None:
    """A pull request's URL comes from an API (or a hostile coder's forged event): anything
    but an absolute http(s) URL is shown as text, never put in an href."""
    ledger = world_copy.ledger()
    now = datetime.now(UTC)
    task = Task.new(id="t-pr", title="Open a pull request", instruction="do it", now=now)
    ledger.add_task(task)
    task.start(now, run_id="r-pr")
    ledger.start_run(task, "r-pr", started_at=now)  # open: its page reads the land events
    hostile = [
        "javascript:alert(document.domain)//",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "java\tscript:alert(1)",
        "//evil.example/pull/1",
        "https:evil.example",
    ]
    pages = {}
    with client_for(world_copy) as c:
        for url in [*hostile, "https://github.com/o/r/pull/7"]:
            ledger.append_event(EventKind.LAND_PR_OPENED, {"url": url}, at=now, run_id="r-pr")
            pages[url] = c.get("/runs/r-pr").text
    for url in hostile:
        html = pages[url]
        assert "pull request" in html and '<code class="url">' in html, url
        for href in re.findall(r'href="([^"]*)"', html):  # every link stays on this server
            assert href.startswith(("/", "?", "#")) and not href.startswith("//"), (url, href)
        assert "<script>alert" not in html, url
    good = pages["https://github.com/o/r/pull/7"]
    assert '<a href="https://github.com/o/r/pull/7" rel="noreferrer noopener">' in good


def test_a_ledger_that_cannot_be_read_is_a_500_page_not_a_traceback(tmp_path: Path) -> None:
    from assay.adapters.store.sql import Ledger

    empty = Ledger(f"sqlite:///{tmp_path / 'never-migrated.db'}")  # no tables at all
    app = create_app(WebConfig(ledger=empty, credentials=credentials(tmp_path / "config")))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        log_in(c)
        page = c.get("/")
    assert page.status_code == 500
    assert "Something went wrong" in page.text and "log has the details" in page.text
    assert "Traceback" not in page.text and "sqlite" not in page.text.lower()


def test_an_open_run_reads_as_running_and_live(world_copy: World) -> None:
    """A real run, caught while its coder works (a replay step that sleeps): its page says it
    runs, with the attempt and the seat in progress and no settle yet."""
    repo = world_copy.repo
    slow = repo.contract(
        "slow.yaml",
        f"""task: Make slugify keep digits, slowly.
scope: {{allow: ["src/**"]}}
coder: {{kind: replay, steps: [{{script: "sleep 3 && echo '# kept' >> src/slug.py"}}]}}
validators: [{{id: tests, kind: command, run: "{world_copy.check_command}"}}]
land: branch
""",
    )
    ledger = world_copy.ledger()

    def running_page() -> str | None:
        """The open run's page once it shows its first attempt (None until then)."""
        open_runs = ledger.open_runs()
        if not open_runs:
            return None
        with client_for(world_copy) as c:
            html = c.get(f"/runs/{open_runs[0].id}").text
        return html if 'id="attempt-1"' in html else None

    done, html = watch_while(lambda: repo.main("run", "--contract", str(slow)), running_page)
    assert done.returncode == 0, done.stderr
    assert html is not None, f"no open run with an attempt was seen: {done.stderr}"
    text = _text(html)
    assert '<span class="live-badge">live</span>' in html
    assert "Running for" in text and "Settle running" in text
    assert 'class="attempt attempt-running" id="attempt-1"' in html
    assert "Shown when the run closes." in text


REPORT = (
    '{"summary": "Kept digits; <b>no</b> other change.", "stop_reason": "completed", '
    '"turns_used": 3, "files": [{"path": "src/slug.py", "kind": "modified"}, '
    '{"path": "README.md", "kind": "modified"}]}'
)


def test_the_coder_report_is_set_beside_the_files_the_worktree_shows(world_copy: World) -> None:
    """A real run whose coder claims a file it did not write and writes one it does not
    claim: the page marks both (colour and words), beside the changed files from disk."""
    repo = world_copy.repo
    script = "echo '# digits kept' >> src/slug.py && echo 'X = 1' > src/extra.py"
    contract = repo.contract(
        "report.yaml",
        f"""task: Note that digits are kept.
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
    - script: "{script}"
      report: '{REPORT}'
validators: [{{id: tests, kind: command, run: "{world_copy.check_command}"}}]
land: branch
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    with client_for(world_copy) as c:
        html = c.get(f"/runs/{run_id}").text
    assert "Kept digits; &lt;b&gt;no&lt;/b&gt; other change." in html
    name = r'<span class="mono">(<span class="long">)?'
    assert re.search(rf'class="mark-claimed-but-missing">{name}README.md</span>', html)
    assert re.search(rf'class="mark-unclaimed-but-present">{name}src/extra.py', html)
    assert "claimed but missing" in html and "unclaimed but present" in html
    assert re.search(rf'class="mark-ok">{name}src/slug.py', html)
    changed = html[html.index("Changed files") :]
    assert "src/extra.py" in changed and "README.md" not in changed.split("</section>")[0]
    assert "completed" in _text(html) and "Turns 3" in _text(html)
