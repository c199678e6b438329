from __future__ import annotations

import functools
import re

from auditor.model import Job, Severity
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class JobMissingLabels(Rule):
    """Training job that lacks the policy's required tags or labels.

    ## What it does
    Flags a job (from a manifest, or from the inventory) that lacks any of `required_tags` among
    its tags or labels: a key that is absent or has an empty value; keys match ignoring case.
    Kubernetes labels of the object and of its pod template, SageMaker `Tags`, Vertex AI `labels`,
    Azure ML `tags` and SkyPilot `resources.labels` all count. A label named in `label_patterns`
    whose value does not match its regular expression (the whole value, case-sensitive) is flagged
    too. The rule shares the `tagging` clause with TAG001, so one sentence of the policy governs
    resources and jobs alike.

    ## Why it matters
    A job launched without team and owner labels bills to nobody: its spend turns up as untagged
    in the next audit (TAG001), after the money is spent. Caught at deploy time it costs one line.

    ## Example
    ```yaml
    - {id: "k8s:ml/Job/bert-ft", platform: kubernetes, tags: {team: nlp}}
    ```

    ## How to fix
    Add the missing labels to the manifest.
    - Kubernetes: in `metadata.labels` of the object.
    - SageMaker: in `Tags` of the request.
    - Vertex AI: in `labels` of the job.
    - Azure ML: in `tags` of the job.
    - SkyPilot: in `labels` of the task's resources.
    """

    id = "TAG002"
    name = "job-missing-labels"
    severity = Severity.MEDIUM
    entity = Job
    clause = "tagging"
    options = {
        "required_tags": Field("list", item=Field("tag"), default=["team", "owner", "project"],
                               doc="tag keys every resource must carry"),
        "label_patterns": Field("map", default={}, item=Field("regex"), keys=Field("tag"),
                                doc="label -> regular expression its whole value must match, e.g. owner: "
                                    "'[a-z.]+@example\\.com'"),
    }

    def check(self, job: Job, ctx):
        missing = [k for k in self.opt("required_tags") if ctx.tag(job.tags, [k]) is None]
        patterns = self.opt("label_patterns") or {}
        wrong = {k: v for k, p in patterns.items()
                 if (v := ctx.tag(job.tags, [k])) is not None and not _pattern(p).fullmatch(v)}
        if not missing and not wrong:
            return
        problems = ([f"lacks required labels {', '.join(missing)}"] if missing else []) + \
            [f"label {k} {v!r} does not match '{patterns[k]}'" for k, v in wrong.items()]
        yield self.finding(
            job, ctx, f"{job.platform} job {job.name or job.id} {'; '.join(problems)}",
            evidence={"missing_tags": missing, "tags": dict(job.tags), "required_tags": list(self.opt("required_tags")),
                      "labels_not_matching": wrong, "manifest_kind": job.manifest_kind})


@functools.cache
def _pattern(text: str) -> re.Pattern:
    """A label pattern compiled once (the policy checked it when it loaded: schema.TYPED)."""
    return re.compile(text)
