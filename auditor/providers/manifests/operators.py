"""Workloads of the batch and serving operators teams run on Kubernetes: Volcano Job, KubeRay RayJob, RayCluster
and RayService, JobSet, LeaderWorkerSet, Argo Workflow (and its templates and cron form) and Tekton
PipelineRun and TaskRun. Each becomes the pod templates it runs; pods.py makes the jobs."""

from __future__ import annotations

from typing import Any

from auditor.providers.manifests.common import Context, as_int, as_list, as_map, go_duration, tags_of
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.pods import Workload
from auditor.providers.manifests.registry import kinds


@kinds("batch.volcano.sh", "Job", others_pass=True)
def volcano(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    tasks = as_list(spec.get("tasks"), doc, "spec.tasks")
    templates = [(as_int(as_map(t, doc, "task").get("replicas"), doc, "tasks[].replicas") or 1, t.get("template"))
                 for t in tasks]
    return [Workload(templates, platform="volcano")]


# ---- KubeRay ------------------------------------------------------------------------------------------------


def _ray_templates(cluster: dict, doc: Document) -> list[tuple[int, Any]]:
    """The head and every worker group; an autoscaling group counted at its maximum, multi-host groups per host."""
    head = as_map(cluster.get("headGroupSpec"), doc, "headGroupSpec")
    templates: list[tuple[int, Any]] = [(1, head.get("template"))]
    autoscaling = bool(cluster.get("enableInTreeAutoscaling"))
    for g in as_list(cluster.get("workerGroupSpecs"), doc, "workerGroupSpecs"):
        g = as_map(g, doc, "workerGroupSpecs[]")
        counts = {k: as_int(g.get(k), doc, f"workerGroupSpecs[].{k}") for k in ("replicas", "minReplicas",
                                                                                  "maxReplicas")}
        n = counts["maxReplicas"] if autoscaling and counts["maxReplicas"] is not None else \
            next((c for c in (counts["replicas"], counts["minReplicas"]) if c is not None), 1)
        hosts = as_int(g.get("numOfHosts"), doc, "workerGroupSpecs[].numOfHosts") or 1
        templates.append((n * hosts, g.get("template")))
    return templates


@kinds("ray.io", "RayJob")
def ray_job(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    cluster = spec.get("rayClusterSpec")
    if cluster is None:  # runs on an existing RayCluster (clusterSelector): that cluster's manifest is judged
        return []
    deadline = as_int(spec.get("activeDeadlineSeconds"), doc, "spec.activeDeadlineSeconds")
    return [Workload(_ray_templates(as_map(cluster, doc, "spec.rayClusterSpec"), doc), platform="kuberay",
                     deadline=deadline)]


@kinds("ray.io", "RayCluster")
def ray_cluster(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    return [Workload(_ray_templates(spec, doc), platform="kuberay")]


@kinds("ray.io", "RayService")
def ray_service(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    cluster = as_map(spec.get("rayClusterConfig"), doc, "spec.rayClusterConfig")
    return [Workload(_ray_templates(cluster, doc), platform="kuberay", workload="inference", kind="server")]


# ---- JobSet and LeaderWorkerSet -----------------------------------------------------------------------------


def replicated_jobs(doc: Document, spec: dict) -> list[tuple[str, int, dict]]:
    """(name, pods, Job spec) of each of a JobSet spec's replicatedJobs: its replicas times the Job's parallelism.
    A Trainer runtime's template is a JobSet spec too (kubeflow.py)."""
    out = []
    for rj in as_list(spec.get("replicatedJobs"), doc, "replicatedJobs"):
        rj = as_map(rj, doc, "replicatedJobs[]")
        job_spec = as_map(as_map(rj.get("template"), doc, "replicatedJobs[].template").get("spec"), doc,
                          "replicatedJobs[].template.spec")
        pods = (as_int(rj.get("replicas"), doc, "replicatedJobs[].replicas") or 1) * \
            (as_int(job_spec.get("parallelism"), doc, "replicatedJobs[].template.spec.parallelism") or 1)
        out.append((str(rj.get("name")), pods, job_spec))
    return out


@kinds("jobset.x-k8s.io", "JobSet")
def jobset(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    templates, deadline = [], None
    for _, pods, job_spec in replicated_jobs(doc, spec):
        templates.append((pods, job_spec.get("template")))
        deadline = deadline or as_int(job_spec.get("activeDeadlineSeconds"), doc, "activeDeadlineSeconds")
    return [Workload(templates, deadline=deadline)]


@kinds("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
def leader_worker_set(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    """Groups of one leader and size-1 workers, `replicas` groups: multi-host serving (vLLM, SGLang)."""
    replicas = as_int(spec.get("replicas"), doc, "spec.replicas")
    replicas = 1 if replicas is None else replicas
    lwt = as_map(spec.get("leaderWorkerTemplate"), doc, "spec.leaderWorkerTemplate")
    size = as_int(lwt.get("size"), doc, "leaderWorkerTemplate.size") or 1
    worker = lwt.get("workerTemplate")
    leader = lwt.get("leaderTemplate") or worker
    name = str(as_map(doc.data.get("metadata"), doc, "metadata").get("name"))
    templates = [(replicas, _labelled(leader, name, doc)), (replicas * (size - 1), _labelled(worker, name, doc))]
    return [Workload([t for t in templates if t[0] > 0], workload="inference", kind="server")]


def _labelled(template: Any, name: str, doc: Document) -> dict:
    """A LeaderWorkerSet pod template with the label the controller gives its pods (what budgets select)."""
    t = dict(as_map(template, doc, "template"))
    meta = dict(as_map(t.get("metadata"), doc, "template.metadata"))
    meta["labels"] = {"leaderworkerset.sigs.k8s.io/name": name, **tags_of(meta.get("labels"))}
    t["metadata"] = meta
    return t


# ---- Argo Workflows -----------------------------------------------------------------------------------------

ARGO_KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")


@kinds("argoproj.io", *ARGO_KINDS)
def argo(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    """Each template that runs a container (container, script, containerSet) is one step: one job per step,
    with the workflow's node placement and volumes unless the step sets its own."""
    if str(doc.data["kind"]) == "CronWorkflow":
        spec = as_map(spec.get("workflowSpec"), doc, "spec.workflowSpec")
    claims = {c.get("metadata", {}).get("name") for c in as_list(spec.get("volumeClaimTemplates"), doc,
                                                                  "spec.volumeClaimTemplates") if isinstance(c, dict)}
    deadline = as_int(spec.get("activeDeadlineSeconds"), doc, "spec.activeDeadlineSeconds")
    pod_meta = as_map(spec.get("podMetadata"), doc, "spec.podMetadata")
    out = []
    for t in as_list(spec.get("templates"), doc, "spec.templates"):
        t = as_map(t, doc, "templates[]")
        if "container" in t or "script" in t:
            containers = [as_map(t.get("container") or t.get("script"), doc, "templates[].container")]
        elif "containerSet" in t:
            containers = as_list(as_map(t["containerSet"], doc, "containerSet").get("containers"), doc,
                                 "containerSet.containers")
        else:
            continue  # steps, dag, resource, suspend: run no container of their own
        pod: dict[str, Any] = {"containers": containers,
               "volumes": as_list(spec.get("volumes"), doc, "spec.volumes") + as_list(t.get("volumes"), doc,
                                                                                      "templates[].volumes")}
        for key in ("nodeSelector", "affinity", "tolerations"):
            if t.get(key) or spec.get(key):
                pod[key] = t.get(key) or spec.get(key)
        t_meta = as_map(t.get("metadata"), doc, "templates[].metadata")
        labels = tags_of(pod_meta.get("labels")) | tags_of(t_meta.get("labels"))
        step_deadline = as_int(t.get("activeDeadlineSeconds"), doc, "templates[].activeDeadlineSeconds")
        out.append(Workload([(1, {"metadata": {"labels": labels}, "spec": pod})], platform="argo",
                            deadline=step_deadline or deadline, part=str(t.get("name")), claim_templates=claims))
    return out


# ---- Tekton -------------------------------------------------------------------------------------------------


def _tekton_pod(task_spec: dict, pod_template: dict, doc: Document, step_resources: dict[str | None, Any],
                compute: Any) -> dict:
    """A Tekton task's pod: its steps as containers (run one after another), under the run's pod template."""
    steps = []
    for s in as_list(task_spec.get("steps"), doc, "taskSpec.steps") + as_list(task_spec.get("sidecars"), doc,
                                                                              "taskSpec.sidecars"):
        s = dict(as_map(s, doc, "steps[]"))
        resources = step_resources.get(s.get("name")) or s.get("computeResources") or s.get("resources") or compute
        s["resources"] = resources
        steps.append(s)
    pod = {"containers": steps, "volumes": as_list(task_spec.get("volumes"), doc, "taskSpec.volumes") +
           as_list(pod_template.get("volumes"), doc, "podTemplate.volumes")}
    for key in ("nodeSelector", "affinity", "tolerations"):
        if pod_template.get(key):
            pod[key] = pod_template[key]
    return pod


def _step_resources(run_spec: dict, doc: Document) -> dict[str | None, Any]:
    specs = as_list(run_spec.get("stepSpecs") or run_spec.get("stepOverrides"), doc, "stepSpecs")
    return {s.get("name"): s.get("computeResources") or s.get("resources") for s in specs if isinstance(s, dict)}


@kinds("tekton.dev", "PipelineRun")
def pipeline_run(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    """Each task with its spec embedded is one job (a task named by taskRef is defined elsewhere)."""
    pipeline = as_map(spec.get("pipelineSpec"), doc, "spec.pipelineSpec")
    base = as_map(as_map(spec.get("taskRunTemplate"), doc, "spec.taskRunTemplate").get("podTemplate") or
                  spec.get("podTemplate"), doc, "podTemplate")
    run_specs = {r.get("pipelineTaskName"): r for r in as_list(spec.get("taskRunSpecs"), doc, "spec.taskRunSpecs")
                 if isinstance(r, dict)}
    timeouts = as_map(spec.get("timeouts"), doc, "spec.timeouts")
    deadline = go_duration(timeouts.get("pipeline") or spec.get("timeout"), doc, "spec.timeouts.pipeline")
    out = []
    for task in as_list(pipeline.get("tasks"), doc, "pipelineSpec.tasks") + \
            as_list(pipeline.get("finally"), doc, "pipelineSpec.finally"):
        task = as_map(task, doc, "tasks[]")
        if task.get("taskSpec") is None:
            continue
        name = str(task.get("name"))
        run = as_map(run_specs.get(name), doc, "taskRunSpecs[]")
        pod_template = as_map(run.get("podTemplate") or run.get("taskPodTemplate"), doc, "podTemplate") or base
        pod = _tekton_pod(as_map(task["taskSpec"], doc, "taskSpec"), pod_template, doc, _step_resources(run, doc),
                          run.get("computeResources"))
        task_deadline = go_duration(task.get("timeout"), doc, "tasks[].timeout")
        out.append(Workload([(1, {"spec": pod})], platform="tekton", deadline=task_deadline or deadline, part=name,
                            sequential=True))
    return out


@kinds("tekton.dev", "TaskRun")
def task_run(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    task_spec = as_map(spec.get("taskSpec"), doc, "spec.taskSpec")
    pod = _tekton_pod(task_spec, as_map(spec.get("podTemplate"), doc, "spec.podTemplate"), doc,
                      _step_resources(spec, doc), spec.get("computeResources"))
    return [Workload([(1, {"spec": pod})], platform="tekton", sequential=True,
                     deadline=go_duration(spec.get("timeout"), doc, "spec.timeout"))]
