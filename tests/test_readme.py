"""The README's examples cannot go stale: each `$` command in a ```console block of README.md is run, in order, in
a scratch folder that sees the repository's fixtures/, and must print (stdout and stderr together, as a terminal
shows them) exactly the lines that follow it. A line `...` stands for any lines; trailing spaces are ignored. A
command's exit status is kept for the next (`echo "exit $?"`)."""

from __future__ import annotations

import email
import email.policy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def console_examples(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, command, expected output lines) for each `$` command in a ```console block."""
    examples: list[tuple[int, str, list[str]]] = []
    block: list[tuple[int, str]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if block is None:
            if line.strip() == "```console":
                block = []
            continue
        if line.strip() == "```":
            examples += _commands(block)
            block = None
        else:
            block.append((number, line))
    assert block is None, "README.md: a ```console block is not closed"
    return examples


def _commands(block: list[tuple[int, str]]) -> list[tuple[int, str, list[str]]]:
    out: list[tuple[int, str, list[str]]] = []
    lines = iter(block)
    for number, line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):  # a command continued on the next line
                command = command[:-1] + next(lines)[1].strip()
            out.append((number, command, []))
        else:
            assert out, f"README.md:{number}: a console block starts with a `$ ` command"
            out[-1][2].append(line)
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line for line, where `...` matches any run of lines (none included)."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0].rstrip() == actual[0].rstrip() and matches(expected[1:], actual[1:])


EXAMPLES = console_examples(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    (folder / "fixtures").symlink_to(REPO / "fixtures")
    return folder


@pytest.fixture(scope="module")
def shell(scratch):
    """Runs commands one after another in `scratch`, as a reader would paste them, with this checkout's
    gpu-auditor first on PATH; returns the merged output, with the scratch folder's path made relative."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_AUDITOR", "SOURCE_DATE_EPOCH"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    status = {"code": 0}

    def run(command: str) -> list[str]:
        r = subprocess.run(["bash", "--noprofile", "--norc", "-c", f"(exit {status['code']}); {command}"], cwd=scratch,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        status["code"] = r.returncode
        return r.stdout.replace(f"{scratch}/", "").splitlines()

    return run


def test_the_readme_has_runnable_examples():
    commands = [c for _, c, _ in EXAMPLES]
    assert any(c.startswith("gpu-auditor audit") for c in commands)
    assert any(c.startswith("gpu-auditor gate") for c in commands)


# One test per command, in README order (pytest keeps the order of a parametrization within a module).
@pytest.mark.heavy
@pytest.mark.parametrize("line, command, expected", EXAMPLES, ids=[f"README.md:{n}" for n, _, _ in EXAMPLES])
def test_readme_example(shell, line, command, expected):
    actual = shell(command)
    assert matches(expected, actual), (
        f"README.md:{line}: `{command}` printed:\n" + "\n".join(actual) + "\n\nthe README shows:\n"
        + "\n".join(expected))


@pytest.mark.heavy
def test_the_email_subject_in_the_readme_is_the_demos(shell, scratch):
    """The subject quoted under "Email the audit" is the one the demo's vision lead gets (a dry run)."""
    quoted = re.search(r"A subject reads like `([^`]+)`", README.read_text(encoding="utf-8"))[1]
    if not (scratch / "demo-report" / "audit.json").is_file():  # run alone: make the demo audit first
        shell("gpu-auditor audit --policy fixtures/demo/policy.yml --inventory fixtures/demo/inventory.json "
              "--quarter 2026-Q3 --quiet --out demo-report fixtures/demo/billing")
    shell("gpu-auditor email --policy fixtures/demo/policy.yml --dry-run --outbox outbox demo-report")
    subjects = {email.message_from_bytes(p.read_bytes(), policy=email.policy.default)["Subject"]
                for p in (scratch / "outbox").glob("*.eml")}
    assert quoted in subjects, subjects
