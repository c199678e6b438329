"""A finding's fix speaks of its own platform: a Kubernetes job is never told to set a SageMaker field. A rule's
`## How to fix` holds the advice for every job and one `- Platform: ...` line per platform (auditor/rule.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.gate import run_gate
from auditor.policy import load_policy
from auditor.registry import all_rules
from auditor.rule import PLATFORM_NAMES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"
PLATFORMS = set(PLATFORM_NAMES.values())


def test_every_manifest_finding_names_no_other_platform():
    """The gate over every bad manifest of the fixtures: each fix names no platform but the job's own."""
    paths = [p for p in FIXTURES.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and "invalid" not in p.parts
             and p.name not in ("policy.yml",) and "waivers" not in p.parts]
    result = run_gate(load_policy(FIXTURES / "policy.yml"), paths, fail_on=None, skip_unknown=True)
    jobs = {j.id: j for j in result.jobs}
    seen = set()
    for f in result.findings:
        own = PLATFORM_NAMES[jobs[f.resource].platform] if f.resource in jobs else None
        others = {p for p in PLATFORMS - {own} if p in f.remediation}
        assert not others, (f.rule, f.resource, others, f.remediation)
        seen.add(own)
    assert {"Kubernetes", "SageMaker", "Vertex AI", "Azure ML"} <= seen  # the fixtures cover them


@pytest.mark.parametrize("rule", [r for r in all_rules() if "\n    - " in (r.__doc__ or "").split("## How to fix")[-1]],
                         ids=lambda r: r.id)
def test_a_platform_fix_is_the_general_advice_and_its_own_line(rule):
    everything = rule.remediation()
    for key, name in PLATFORM_NAMES.items():
        mine = rule.remediation(key)
        assert everything.startswith(mine.split(". ")[0])  # the general advice first, for every platform
        assert not {p for p in PLATFORMS - {name} if f"{p}:" in mine}
    assert all(f"{name}:" in everything for name in PLATFORMS if name in (rule.__doc__ or "").split("How to fix")[-1])


def test_spot001_fix_for_kubernetes_and_sagemaker():
    [rule] = [r for r in all_rules() if r.id == "SPOT001"]
    k8s, sm = rule.remediation("kubernetes"), rule.remediation("sagemaker")
    assert "SageMaker" not in k8s and "CheckpointConfig" not in k8s and "PersistentVolumeClaim" in k8s
    assert "CheckpointConfig.S3Uri" in sm and "PersistentVolumeClaim" not in sm
    assert rule.remediation("kuberay") == k8s  # every platform on Kubernetes gets Kubernetes' advice
