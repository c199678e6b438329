"""The registry of the audit's output formats: `@output(name, file)` on the function that renders a format, in
the module that implements it (outputs/report.py, which imports any other). `gpu-auditor audit` and `report`
write and print these formats; their `--format` choices and the docs are tested against this registry
(tests/test_registries.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Render = Callable[..., str]  # (audit or its audit.json dict[, team]) -> the format's text


@dataclass(frozen=True)
class Output:
    name: str  # what --format names it by
    file: str  # the file it is written to in an audit folder
    render: Render
    per_team: bool  # renders one team's view (audit.json is always the whole audit)


_OUTPUTS: dict[str, Output] = {}


def output(name: str, file: str, per_team: bool = True) -> Callable[[Render], Render]:
    """Register the function it decorates as the renderer of format `name`, written to `file`."""
    def register(render: Render) -> Render:
        if name in _OUTPUTS and _OUTPUTS[name].render is not render:
            raise ValueError(f"output format {name!r} registered twice")
        _OUTPUTS[name] = Output(name, file, render, per_team)
        return render
    return register


def outputs() -> dict[str, Output]:
    """Every output format registered so far, in the order they are registered (and written). They register as
    their modules load: import `auditor.outputs.report` (which the commands do) for all of them; it names the
    result FORMATS and FILE_NAMES."""
    return dict(_OUTPUTS)





# The gate's formats (outputs/ci_formats.py): each a function of the gate's verdict, named by `gate --format`.
_GATE_OUTPUTS: dict[str, Callable[..., str]] = {}


def gate_output(name: str) -> Callable[[Render], Render]:
    """Register the function it decorates as the gate's format `name` (a GateResult -> the format's text)."""
    def register(render: Render) -> Render:
        if name in _GATE_OUTPUTS and _GATE_OUTPUTS[name] is not render:
            raise ValueError(f"gate format {name!r} registered twice")
        _GATE_OUTPUTS[name] = render
        return render
    return register


def gate_outputs() -> dict[str, Render]:
    """The gate's formats registered so far, in the order they are registered (outputs/ci_formats.py loads them
    all; it names them FORMATS)."""
    return dict(_GATE_OUTPUTS)
