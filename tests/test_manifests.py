"""Manifests to Job entities: every kind the gate reads, what each fixture parses to, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from auditor.errors import InputError
from auditor.providers.catalog import load_catalog
from auditor.providers.manifests import (
    Document,
    UnknownKind,
    expand,
    gpu_model_named,
    load_jobs,
    parse,
    read_documents,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "manifests"
CATALOG = load_catalog()


def jobs_of(rel: str) -> list:
    loaded = load_jobs([FIXTURES / rel], CATALOG)
    assert loaded.files == [str(FIXTURES / rel)] and loaded.failures == []
    return loaded.jobs


def job_of(rel: str):
    jobs = jobs_of(rel)
    assert len(jobs) == 1, [j.id for j in jobs]
    return jobs[0]


# What each fixture says, read by hand from the file: the fields the rules judge.
# (file, id, line, platform, kind, provider, region, instance type, instances, GPU model, GPUs each, spot,
#  checkpoint, max runtime s)
EXPECTED = [
    ("kubernetes/job-good.yaml", "k8s:nlp/Job/bert-finetune", 2, "kubernetes", "Job", "aws", "us-west-2",
     "g6.12xlarge", 1, "L4", 4, True, "pvc://nlp-checkpoints/bert", 86400),
    ("kubernetes/job-bad.yaml", "k8s:vision/Job/resnet-train", 2, "kubernetes", "Job", "aws", "us-east-1",
     "p4d.24xlarge", 1, "A100", 8, True, None, 172800),
    ("kubernetes/cronjob-good.yaml", "k8s:vision/CronJob/nightly-eval", 2, "kubernetes", "CronJob", "gcp",
     "us-central1", None, 1, "L4", 1, True, "gs://example-vision-ckpt/nightly-eval/", 14400),
    ("kubernetes/cronjob-bad.yaml", "k8s:vision/CronJob/weekly-retrain", 2, "kubernetes", "CronJob", "gcp", None,
     None, 1, "A100", 2, True, None, 43200),
    ("kubernetes/pod-good.yaml", "k8s:vision/Pod/notebook-chen", 2, "kubernetes", "Pod", None, None, None, 1,
     "A100", 1, False, None, 28800),
    ("kubernetes/pod-bad.yaml", "k8s:nlp/Pod/llm-sft-debug", 2, "kubernetes", "Pod", "azure", None,
     "Standard_ND96isr_H100_v5", 1, "H100", 8, True, None, 36000),
    ("kubernetes/deployment-good.yaml", "k8s:vision/Deployment/detector-api", 2, "kubernetes", "Deployment", "aws",
     "us-east-1", "g4dn.xlarge", 3, "T4", 1, False, None, None),
    ("kubernetes/deployment-bad.yaml", "k8s:nlp/Deployment/chat-api", 2, "kubernetes", "Deployment", "aws", None,
     None, 2, "H100", 1, False, None, None),
    ("kubernetes/statefulset-good.yaml", "k8s:vision/StatefulSet/ray-workers", 3, "kubernetes", "StatefulSet", "aws",
     "us-west-2", "g5.12xlarge", 2, "A10G", 4, True, "pvc://checkpoints", None),
    ("kubernetes/statefulset-bad.yaml", "k8s:vision/StatefulSet/feature-workers", 2, "kubernetes", "StatefulSet",
     "aws", "eu-west-1", "g5.xlarge", 1, "A10G", 1, False, None, None),
    ("kubeflow/pytorchjob-good.yaml", "k8s:vision/PyTorchJob/detector-v4", 2, "kubeflow", "PyTorchJob", "aws",
     "us-east-1", "p4d.24xlarge", 4, "A100", 8, False, None, 172800),
    ("kubeflow/pytorchjob-bad.yaml", "k8s:nlp/PyTorchJob/llm-pretrain", 2, "kubeflow", "PyTorchJob", "aws", None,
     "p5.48xlarge", 4, "H100", 8, False, "csi://s3.csi.aws.com/nlp-ckpt", 2592000),
    ("kubeflow/tfjob-good.yaml", "k8s:vision/TFJob/ranker", 2, "kubeflow", "TFJob", "gcp", "us-central1", None, 2,
     "A100", 4, True, "csi://gcsfuse.csi.storage.gke.io/example-ranker/ranker/ckpt", 43200),
    ("kubeflow/tfjob-bad.yaml", "k8s:vision/TFJob/ranker-nightly", 2, "kubeflow", "TFJob", "gcp", None, None, 2,
     "L4", 1, True, None, 43200),
    ("kubeflow/trainjob-good.yaml", "k8s:nlp/TrainJob/llama-sft", 2, "kubeflow", "TrainJob", "aws", "us-east-1",
     "p4de.24xlarge", 2, "A100-80GB", 8, False, "pvc://nlp-ckpt/llama-sft", 12 * 3600),
    ("kubeflow/trainjob-bad.yaml", "k8s:nlp/TrainJob/llama-pretrain", 2, "kubeflow", "TrainJob", "aws", None,
     "p5e.48xlarge", 1, "H200", 8, True, None, None),
    ("volcano/job-good.yaml", "k8s:vision/VolcanoJob/mpi-bench-train", 2, "volcano", "Job", "aws", "us-west-2",
     "g5.48xlarge", 2, "A10G", 8, False, "nfs://fs.example.internal/exports/vision/ckpt", 21600),
    ("volcano/job-bad.yaml", "k8s:vision/VolcanoJob/quick-sweep", 2, "volcano", "Job", "aws", None, "g5.xlarge", 4,
     "A10G", 1, True, None, 7200),
    ("sagemaker/create-training-job-good.json", "sagemaker:nlp-summarizer-v5", 1, "sagemaker", "CreateTrainingJob",
     "aws", "us-east-1", "ml.g5.12xlarge", 2, "A10G", 4, True, "s3://nlp-training-checkpoints/summarizer-v5/",
     86400),
    ("vertex/customjob-good.yaml", "vertex:ranker-v7", 3, "vertex", "CustomJob", "gcp", "us-central1",
     "a2-highgpu-4g", 1, "A100", 4, True, "gs://example-vision-vertex/ranker-v7/checkpoints/", 43200),
    ("vertex/customjob-good.json", "vertex:embedder-l4", 1, "vertex", "CustomJob", "gcp", "us-central1",
     "g2-standard-8", 1, "L4", 1, False, None, 7200),
    ("vertex/customjob-bad.yaml", "vertex:llm-pretrain-asia", 3, "vertex", "CustomJob", "gcp", "asia-southeast1",
     "a3-highgpu-8g", 2, "H100", 8, True, None, 86400),
    ("azureml/command-good.yml", "azureml:detector-finetune-42", 1, "azureml", "command", "azure", "eastus",
     "Standard_NC24ads_A100_v4", 2, "A100-80GB", 1, True,
     "azureml://datastores/workspaceblobstore/outputs/checkpoints", 36000),
    ("azureml/command-bad.yml", "azureml:detector-train-spot", 1, "azureml", "command", "azure", None,
     "Standard_NC96ads_A100_v4", 1, "A100-80GB", 4, True, None, 172800),
    # 20 trials, 4 at a time, an hour each: 5 rounds; 4 concurrent trials x 1 node
    ("azureml/sweep-good.yml", "azureml:detector-lr-sweep", 1, "azureml", "sweep", "azure", None,
     "Standard_NC24ads_A100_v4", 4, "A100-80GB", 1, False, "azureml://datastores/vision/paths/sweeps/lr/", 18000),
    ("azureml/sweep-bad.yml", "azureml:llm-hparam-sweep", 3, "azureml", "sweep", "azure", None,
     "Standard_NC80adis_H100_v5", 16, "H100-NVL", 2, False, None, 345600),
    ("skypilot/task-good.yaml", "skypilot:vision-sam-ft", 2, "skypilot", "task", "aws", "us-east-1", None, 1, "A100",
     8, True, "s3://example-vision-ckpt/sam", 24 * 3600),
    ("skypilot/task-bad.yaml", "skypilot:nlp-mistral-ft", 3, "skypilot", "task", "gcp", "us-central1", None, 1, "L4",
     4, True, None, None),
]


@pytest.mark.parametrize("row", EXPECTED, ids=[r[0] for r in EXPECTED])
def test_fixture_parses_to_the_job_it_describes(row) -> None:
    rel, jid, line, platform, kind, provider, region, itype, count, model, gpus, spot, ckpt, runtime = row
    j = job_of(rel)
    got = (j.id, j.source_line, j.platform, j.manifest_kind, j.provider, j.region, j.instance_type,
           j.instance_count, j.gpu_model, j.gpu_count, j.spot, j.checkpoint_uri, j.max_runtime_s)
    assert got == (jid, line, platform, kind, provider, region, itype, count, model, gpus, spot, ckpt, runtime)
    assert j.source_file == str(FIXTURES / rel)


def test_every_manifest_kind_has_a_good_and_a_bad_fixture() -> None:
    kinds: dict[tuple, set] = {}
    for path in sorted(FIXTURES.glob("*/*-*.*")):
        if path.stem.endswith(("-good", "-bad")):
            for j in load_jobs([path], CATALOG).jobs:
                kinds.setdefault((j.platform, j.manifest_kind), set()).add(path.stem.rsplit("-", 1)[1])
    wanted = {("kubernetes", k) for k in ("Job", "CronJob", "Pod", "Deployment", "StatefulSet")} | \
        {("kubeflow", k) for k in ("PyTorchJob", "TFJob", "TrainJob", "Experiment")} | {("volcano", "Job"),
                                                                           ("sagemaker", "CreateTrainingJob"),
                                                                           ("vertex", "CustomJob"),
                                                                           ("azureml", "command"),
                                                                           ("azureml", "sweep"), ("skypilot", "task")}
    assert set(kinds) == wanted
    assert all(v == {"good", "bad"} for v in kinds.values()), kinds


def test_multi_document_file_keeps_each_jobs_line_and_skips_what_runs_nothing() -> None:
    jobs = jobs_of("kubernetes/multi-doc.yaml")
    # Namespace, PVC, Service and a CPU-only Job run nothing on a GPU
    assert [(j.name, j.source_line) for j in jobs] == [("segmenter-train", 14), ("segmenter-sweep", 48)]
    lines = (FIXTURES / "kubernetes/multi-doc.yaml").read_text().splitlines()
    assert lines[13] == lines[47] == "apiVersion: batch/v1"


def test_json_array_of_requests_gives_each_its_line() -> None:
    jobs = jobs_of("sagemaker/create-training-job-bad.json")
    assert [(j.name, j.source_line, j.spot, j.region, j.account) for j in jobs] == [
        ("nlp-llama-ft-spot", 2, True, "eu-central-1", "444455556666"),
        ("nlp-embeddings", 14, False, "us-east-1", "444455556666")]


def test_labels_annotations_and_workload() -> None:
    j = job_of("kubernetes/job-good.yaml")
    assert j.tags == {"team": "nlp", "owner": "ana", "workload": "fine-tuning"}
    assert j.checkpoint_interval_min == 30.0
    assert j.annotations == {"gpu-auditor.dev/checkpoint-interval-min": "30"}
    assert job_of("kubernetes/deployment-good.yaml").workload == "inference"
    assert job_of("kubernetes/job-good.yaml").workload == "training"
    assert job_of("sagemaker/create-training-job-good.json").tags["workload"] == "fine-tuning"


def test_mig_slice_is_recorded() -> None:
    j = job_of("kubernetes/pod-good.yaml")
    assert (j.mig_profile, j.gpu_count, j.gpu_model, j.accelerator) == ("1g.5gb", 1, "A100", "NVIDIA-A100-SXM4-40GB")


def test_unknown_gpu_type_is_kept_for_a_finding_not_a_crash() -> None:
    j = job_of("kubernetes/unknown-gpu.yaml")
    assert (j.accelerator, j.gpu_model, j.gpu_count) == ("nvidia-tesla-p100", None, 1)


# --- spot and checkpoints from every place a manifest can say them ------------------------------------------


def k8s_job(pod_spec: dict, **meta) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", **meta},
            "spec": {"template": {"spec": pod_spec}}}


GPU_CONTAINER = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}


def parse_one(data: dict):
    jobs = parse(Document(data, "<test>", 1), CATALOG)
    assert len(jobs) == 1
    return jobs[0]


@pytest.mark.parametrize("selector, spot, provider", [
    ({"eks.amazonaws.com/capacityType": "SPOT"}, True, "aws"),
    ({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, False, "aws"),
    ({"karpenter.sh/capacity-type": "spot"}, True, None),
    ({"karpenter.sh/capacity-type": "on-demand"}, False, None),
    ({"cloud.google.com/gke-spot": "true"}, True, "gcp"),
    ({"cloud.google.com/gke-preemptible": "true"}, True, "gcp"),
    ({"kubernetes.azure.com/scalesetpriority": "spot"}, True, "azure"),
    ({"kubernetes.azure.com/scalesetpriority": "regular"}, False, "azure"),
    ({}, False, None),
])
def test_spot_from_node_selector(selector: dict, spot: bool, provider: str | None) -> None:
    j = parse_one(k8s_job({"nodeSelector": selector, "containers": [GPU_CONTAINER]}))
    assert (j.spot, j.provider) == (spot, provider)


@pytest.mark.parametrize("op, values, spot", [("In", ["spot"], True), ("In", ["on-demand", "spot"], True),
                                              ("In", ["on-demand"], False), ("NotIn", ["spot"], False),
                                              ("Exists", None, True)])
def test_spot_from_node_affinity(op: str, values: list | None, spot: bool) -> None:
    expr = {"key": "karpenter.sh/capacity-type", "operator": op, **({"values": values} if values else {})}
    for where in ("required", "preferred"):
        affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [expr]}]}} if where == "required" else \
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
                "matchExpressions": [expr]}}]}
        j = parse_one(k8s_job({"affinity": {"nodeAffinity": affinity}, "containers": [GPU_CONTAINER]}))
        assert j.spot is spot, where


@pytest.mark.parametrize("toleration, spot", [
    ({"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot"}, True),
    ({"key": "cloud.google.com/gke-spot", "operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, False),
])
def test_spot_from_tolerations(toleration: dict, spot: bool) -> None:
    assert parse_one(k8s_job({"tolerations": [toleration], "containers": [GPU_CONTAINER]})).spot is spot


def with_volume(volume: dict, env: list | None = None, args: list | None = None, mount: str = "/work") -> dict:
    c = {**GPU_CONTAINER, "volumeMounts": [{"name": "v", "mountPath": mount}], "env": env or [], "args": args or []}
    return k8s_job({"containers": [c], "volumes": [{"name": "v", **volume}]})


@pytest.mark.parametrize("volume, env, args, mount, expected", [
    ({"persistentVolumeClaim": {"claimName": "ckpt"}}, [{"name": "CHECKPOINT_DIR", "value": "/work/run1"}], None,
     "/work", "pvc://ckpt/run1"),
    ({"persistentVolumeClaim": {"claimName": "data"}}, None, ["--ckpt-path", "/work/c"], "/work", "pvc://data/c"),
    ({"csi": {"driver": "blob.csi.azure.com", "volumeAttributes": {"containerName": "ckpt"}}}, None,
     ["--checkpoint_dir=/work"], "/work", "csi://blob.csi.azure.com/ckpt"),
    ({"emptyDir": {}}, [{"name": "CHECKPOINT_DIR", "value": "/work/run1"}], None, "/work", None),
    ({"hostPath": {"path": "/mnt"}}, None, ["--save-dir", "/work"], "/work", None),
    ({"persistentVolumeClaim": {"claimName": "shared"}}, None, None, "/checkpoints", "pvc://shared"),
    ({"persistentVolumeClaim": {"claimName": "data"}}, None, None, "/data", None),
    ({"emptyDir": {}}, [{"name": "CKPT_URI", "value": "s3://bucket/run"}], None, "/work", "s3://bucket/run"),
    ({"emptyDir": {}}, [{"name": "CHECKPOINT_DIR", "value": "relative/dir"}], None, "/work", None),
])
def test_checkpoint_location(volume, env, args, mount, expected) -> None:
    assert parse_one(with_volume(volume, env, args, mount)).checkpoint_uri == expected


def test_checkpoint_args_given_as_one_shell_command() -> None:
    data = with_volume({"persistentVolumeClaim": {"claimName": "c"}},
                       args=["bash", "-c", "python train.py --checkpoint-dir /work/x --epochs 3"])
    assert parse_one(data).checkpoint_uri == "pvc://c/x"


@pytest.mark.parametrize("accelerators, model, count", [("A100:8", "A100", 8), ("H100", "H100", 1),
                                                         ({"L4": 2}, "L4", 2), (["A100-80GB:4", "H100:4"],
                                                                                "A100-80GB", 4)])
def test_skypilot_accelerator_spellings(accelerators, model: str, count: int) -> None:
    j = parse_one({"resources": {"accelerators": accelerators}, "run": "python train.py"})
    assert (j.gpu_model, j.gpu_count) == (model, count)


@pytest.mark.parametrize("name, model", [
    ("nvidia-tesla-a100", "A100"), ("nvidia-a100-80gb", "A100-80GB"), ("NVIDIA_A100_80GB", "A100-80GB"),
    ("NVIDIA_H100_80GB", "H100"), ("nvidia-h100-mega-80gb", "H100"), ("NVIDIA_H200_141GB", "H200"),
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB"), ("NVIDIA-A100-SXM4-40GB", "A100"), ("Tesla-T4", "T4"),
    ("NVIDIA-H100-NVL", "H100-NVL"), ("a10g", "A10G"), ("nvidia-l4", "L4"), ("nvidia-tesla-p100", None),
    ("A1000", None), ("", None)])
def test_gpu_names_as_the_platforms_write_them(name: str, model: str | None) -> None:
    assert gpu_model_named(CATALOG, name) == model


# --- bad input: one line, file and line ---------------------------------------------------------------------


@pytest.mark.parametrize("rel, line, message", [
    ("invalid/malformed.yaml", 10, "not valid YAML"),
    ("invalid/malformed.json", 3, "not valid JSON"),
    ("invalid/unknown-kind.yaml", 10, "unknown manifest kind SeldonDeployment (machinelearning.seldon.io/v1): it "
                                      "asks for GPUs at spec.predictors[0].componentSpecs[0].spec.containers[0]."
                                      "resources.limits"),
    ("invalid/not-a-manifest.yaml", 2, "unknown manifest kind"),
    ("invalid/alias.yaml", 9, "aliases"),
    ("invalid/bad-gpu-count.yaml", 1, "expected a whole number, got '0.5'"),
    # one message for an unrendered template, whatever the field: a count, a type, a Helm value
    ("invalid/unrendered-count.yaml", 1, "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu: "
                                         "'${ACCELERATOR_QUANTITY}' is an unrendered template placeholder; render"),
    ("invalid/unrendered-type.yaml", 1, "spec.template.spec.nodeSelector.cloud.google.com/gke-accelerator: "
                                        "'${ACCELERATOR_TYPE}' is an unrendered template placeholder; render"),
    ("invalid/helm-template.yaml", 12, "nvidia.com/gpu: '{{ .Values.gpus }}' is an unrendered template "
                                       "placeholder; render"),
])
def test_bad_input_names_file_and_line(rel: str, line: int, message: str) -> None:
    loaded = load_jobs([FIXTURES / rel], CATALOG)
    assert loaded.jobs == [] and len(loaded.failures) == 1
    e = loaded.failures[0]
    assert e.path == str(FIXTURES / rel) and e.line == line
    assert message in str(e) and "\n" not in str(e)


def test_unknown_kind_is_skipped_when_asked() -> None:
    loaded = load_jobs([FIXTURES / "invalid/unknown-kind.yaml"], CATALOG, skip_unknown=True)
    assert [j.name for j in loaded.jobs] == ["fine"] and len(loaded.skipped) == 1
    assert "SeldonDeployment" in loaded.skipped[0] and loaded.failures == []
    failures = load_jobs([FIXTURES / "invalid/unknown-kind.yaml"], CATALOG).failures
    assert len(failures) == 1 and isinstance(failures[0], UnknownKind)


def test_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"] + \
        [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(8)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="aliases") as e:
        read_documents(bomb)
    assert e.value.line == 2


def test_missing_file_and_folder_expansion(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        expand([tmp_path / "nope.yaml"])
    (tmp_path / "a").mkdir()
    for name in ("a/x.yaml", "a/y.yml", "a/z.json", "a/notes.txt", "b.YAML"):
        (tmp_path / name).write_text("{}")
    assert [p.relative_to(tmp_path).as_posix() for p in expand([tmp_path])] == \
        ["a/x.yaml", "a/y.yml", "a/z.json", "b.YAML"]


def test_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    f = tmp_path / "latin1.yaml"
    f.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        read_documents(f)


# --- every GPU workload judged or named ----------------------------------------------------------------------


def job_summary(rel: str) -> list[tuple]:
    return [(j.id, j.kind, j.platform, j.instance_count, j.gpu_model, j.gpu_count, j.spot, j.checkpoint_uri,
             j.max_runtime_s) for j in jobs_of(rel)]


@pytest.mark.parametrize("rel, expected", [
    # 3 trials at once of a 1-node, 4-GPU PyTorchJob; 48 trials of at most 4 h: 16 rounds = 64 h
    ("katib/experiment-bad.yaml", [("k8s:nlp/Experiment/llm-lr-search", "sweep", "kubeflow", 3, "A100", 4, True, None,
                                    16 * 14400)]),
    ("katib/grid-bad.yaml", [("k8s:nlp/Experiment/bert-grid", "sweep", "kubeflow", 8, "L4", 1, False, None,
                              15 * 3600)]),
    # the runtime's spot g5.12xlarge placement, the TrainJob's 3 nodes of 4 GPUs
    ("kubeflow/trainjob-with-runtime.yaml", [("k8s:vision/TrainJob/whisper-ft", "job", "kubeflow", 3, "A10G", 4, True,
                                              None, None)]),
    # the CPU head has no GPU; the autoscaling group at its maximum of 4
    ("kuberay/rayjob-spot.yaml", [("k8s:nlp/RayJob/llama-lora", "job", "kuberay", 4, "A10G", 4, True, None, 21600)]),
    ("kuberay/rayservice-spot.yaml", [("k8s:nlp/RayService/chat-serve", "server", "kuberay", 1, "L4", 1, True, None,
                                       None)]),
    ("operators/jobset-on-demand.yaml", [("k8s:nlp/JobSet/gpt-pretrain", "job", "kubernetes", 8, "A100", 8, False,
                                          "pvc://fsx-nlp/gpt-pretrain", 14400)]),
    # 2 groups of a leader and one worker
    ("operators/lws-spot.yaml", [("k8s:nlp/LeaderWorkerSet/vllm-70b", "server", "kubernetes", 4, "H100", 8, True,
                                  None, None)]),
    ("operators/argo-workflow.yaml", [("k8s:vision/Workflow/segmenter-*/train", "job", "argo", 1, "A10G", 1, True,
                                       None, 28800)]),
    ("operators/tekton-pipelinerun.yaml", [("k8s:vision/PipelineRun/ranker-train-*/train", "job", "tekton", 1, "L4",
                                            1, False, "gs://example-vision-ckpt/ranker/", 14400)]),
    # 6 trials at once of 2 instances; 60 trials of 4 h: 10 rounds = 40 h
    ("hpo/sagemaker-tuning.json", [("sagemaker:nlp-summarizer-hpo", "sweep", "sagemaker", 12, "A10G", 4, False, None,
                                    144000)]),
    ("hpo/vertex-tuning.yaml", [("vertex:ranker-hpo", "sweep", "vertex", 4, "L4", 1, False,
                                 "gs://example-vision-ckpt/ranker-hpo/", 4 * 7200)]),
    # the pipeline's CPU prep step runs nothing on a GPU
    ("skypilot/pipeline-bad.yaml", [("skypilot:mistral-pipeline/train", "job", "skypilot", 1, "A100", 8, True, None,
                                     None)]),
    ("kubernetes/server-spot-bad.yaml", [("k8s:nlp/Deployment/tgi-mistral", "server", "kubernetes", 1, "L4", 1, True,
                                          None, None)]),
    # issue 29: Master 1 GPU + 3 Workers of 8 (25 in all: gpus_in_all); the PyTorchJob an Argo step creates
    ("kubeflow/pytorchjob-mixed-replicas.yaml", [("k8s:nlp/PyTorchJob/llm-continued-pretrain", "job", "kubeflow", 4,
                                                  "H100", 8, False, None, 2592000)]),
    ("operators/argo-resource-pytorchjob.yaml", [("k8s:nlp/PyTorchJob/llama-ft", "job", "kubeflow", 3, "A100", 8,
                                                  True, None, 86400)]),
    # on spot A100s by its ResourceFlavor, its own pod spec naming neither
    ("kueue/queued-job-spot.yaml", [("k8s:vision/Job/detector-train", "job", "kubernetes", 2, "A100", 4, True, None,
                                     43200)]),
    ("kserve/inferenceservice-spot.yaml", [("k8s:nlp/InferenceService/llama3-chat", "server", "kserve", 1, "L4", 1,
                                            True, None, None)]),
    # 4 trials at once of one node; 6 h
    ("azureml/automl-image.yml", [("azureml:fridge-items-detector", "sweep", "azureml", 4, "A100-80GB", 1, False,
                                   None, 21600)]),
    ("azureml/finetuning.yml", [("azureml:llama-7b-summarize-ft", "job", "azureml", 1, "A100-80GB", 4, False, None,
                                 36000)]),
    # the CPU prep step runs nothing on a GPU
    ("azureml/pipeline.yml", [("azureml:detector-pipeline/train", "job", "azureml", 2, "A100-80GB", 1, True, None,
                               28800)]),
    ("skypilot/job-group.yaml", [("skypilot:rl-post-training/trainer", "job", "skypilot", 2, "A100", 8, True, None,
                                  43200),
                                 ("skypilot:rl-post-training/rollout", "job", "skypilot", 1, "L4", 1, False, None,
                                  43200)]),
    ("skypilot/candidates.yaml", [("skypilot:nlp-candidates-ft", "job", "skypilot", 1, "A100", 8, True, None,
                                   21600)]),
    # 2 slices of 4 hosts, 4 TPU chips each
    ("accelerators/tpu-jobset-spot.yaml", [("k8s:nlp/JobSet/maxtext-multislice", "job", "kubernetes", 8, None, 4,
                                            True, None, 86400)]),
    ("accelerators/inferentia-deployment.yaml", [("k8s:nlp/Deployment/bert-neuron", "server", "kubernetes", 2, None,
                                                  1, False, None, None)]),
    # one trial: one at once, though Katib's default is three
    ("katib/experiment-one-trial.yaml", [("k8s:vision/Experiment/lr-search-smoke", "sweep", "kubeflow", 1, "L4", 1,
                                          False, None, 3600)]),
])
def test_new_workloads_parse_to_the_jobs_they_run(rel: str, expected: list[tuple]) -> None:
    assert job_summary(rel) == expected


@pytest.mark.parametrize("rel, fields", [
    ("katib/experiment-bad.yaml", (48, 3, None, "random", None)),
    ("katib/experiment-good.yaml", (24, 4, "medianstop", "bayesianoptimization", None)),
    ("katib/grid-bad.yaml", (120, 8, None, "grid", 5 * 4 * 6)),  # no cap: the grid runs every point
    ("hpo/sagemaker-tuning.json", (60, 6, None, "bayesian", None)),
    ("hpo/vertex-tuning.yaml", (16, 4, "medianautomatedstopping", "bayesian", None)),
    ("azureml/sweep-good.yml", (20, 4, "bandit", "random", None)),
    ("azureml/automl-image.yml", (20, 4, None, "random", None)),
    ("katib/experiment-one-trial.yaml", (1, 1, None, "random", None)),
])
def test_sweep_limits_and_policies(rel: str, fields: tuple) -> None:
    j = job_of(rel)
    assert (j.sweep_max_trials, j.sweep_parallel_trials, j.sweep_early_stopping, j.sweep_algorithm,
            j.sweep_grid_size) == fields


def test_server_grace_period_and_disruption_budget() -> None:
    j = job_of("kubernetes/statefulset-good.yaml")
    assert (j.kind, j.grace_period_s, j.disruption_budget) == ("server", 90, "ray-workers")
    assert (job_of("operators/lws-spot.yaml").grace_period_s, job_of("operators/lws-spot.yaml").disruption_budget) \
        == (60, None)


def test_a_budget_in_another_file_covers_the_server(tmp_path: Path) -> None:
    pdb = tmp_path / "pdb.yaml"
    pdb.write_text("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: tgi, namespace: nlp}\n"
                   "spec: {minAvailable: 1, selector: {matchLabels: {app: tgi-mistral}}}\n")
    jobs = load_jobs([FIXTURES / "kubernetes/server-spot-bad.yaml", pdb], CATALOG).jobs
    assert [j.disruption_budget for j in jobs] == ["tgi"]


@pytest.mark.parametrize("data, where", [
    ({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "x"},
      "spec": {"template": {"spec": {"containers": [{"name": "c",
                                                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}},
     "spec.template.spec.containers[0].resources.limits"),
    ({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"},
      "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"amd.com/gpu": 2}}}]}}},
     "template.spec.containers[0].resources.requests"),
    ({"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {"name": "t"},
      "spec": {"runSpec": {"spec": {"template": {"spec": {"containers": [
          {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}}},
     "spec.runSpec.spec.template.spec.containers[0].resources.limits"),
])
def test_any_other_object_asking_for_gpus_is_named(data: dict, where: str) -> None:
    with pytest.raises(UnknownKind, match=f"unknown manifest kind {data['kind']}") as e:
        parse(Document(data, "<test>", 1), CATALOG)
    assert f"asks for GPUs at {where}" in str(e.value)


def test_a_kubeflow_kind_not_read_is_no_longer_silent() -> None:
    with pytest.raises(UnknownKind, match="unknown manifest kind Suggestion"):
        parse(Document({"apiVersion": "kubeflow.org/v1beta1", "kind": "Suggestion", "spec": {}}, "<t>", 1), CATALOG)
    assert parse(Document({"apiVersion": "v1", "kind": "Service", "spec": {}}, "<t>", 1), CATALOG) == []


def test_a_known_kind_asking_for_gpus_where_the_gate_does_not_look_is_named() -> None:
    # an Argo step's GPUs in a podSpecPatch string are not read; in an initContainer they are not either
    data = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "w"},
            "spec": {"templates": [{"name": "t", "initContainers": [
                {"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}], "container": {"image": "x"}}]}}
    with pytest.raises(UnknownKind, match=r"Workflow \(argoproj.io/v1alpha1\) asks for GPUs at spec.templates\[0\]"):
        parse(Document(data, "<test>", 1), CATALOG)


def test_tekton_steps_run_one_after_another() -> None:
    step = {"name": "s", "image": "x", "computeResources": {"limits": {"nvidia.com/gpu": 2}}}
    data = {"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "metadata": {"name": "tr"},
            "spec": {"taskSpec": {"steps": [step, {**step, "name": "s2"}]}, "timeout": "1h30m"}}
    [j] = parse(Document(data, "<test>", 1), CATALOG)
    assert (j.gpu_count, j.max_runtime_s) == (2, 5400)


@pytest.mark.heavy
@pytest.mark.parametrize("levels", [1000, 100_000])
def test_deep_nesting_is_an_input_error_not_a_recursion_error(tmp_path: Path, levels: int) -> None:
    for suffix in (".yaml", ".json"):
        f = tmp_path / f"deep{suffix}"
        f.write_text("[" * levels + "]" * levels)
        with pytest.raises(InputError, match="nested more than 100 levels deep"):
            read_documents(f)


# --- issue 29 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rel, total, family, accelerator", [
    ("kubeflow/pytorchjob-mixed-replicas.yaml", 25, None, "p5.48xlarge"),  # 1 + 3 x 8, not 4 x 8
    ("operators/argo-resource-pytorchjob.yaml", 24, None, "p4d.24xlarge"),  # the CPU Master asks for none
    ("accelerators/tpu-jobset-spot.yaml", 32, "TPU", "tpu-v5p-slice"),
    ("accelerators/inferentia-deployment.yaml", 2, "Inferentia", "Inferentia"),
    ("katib/experiment-one-trial.yaml", 1, None, "nvidia-l4"),
])
def test_gpus_in_all_and_accelerators_that_are_not_gpus(rel: str, total: int, family, accelerator) -> None:
    [j] = jobs_of(rel)
    assert (j.gpus_in_all(), j.accelerator_family, j.accelerator) == (total, family, accelerator)


@pytest.mark.parametrize("key, family", [("google.com/tpu", "TPU"), ("habana.ai/gaudi", "Gaudi"),
                                         ("amd.com/gpu", "AMD-Instinct"), ("aws.amazon.com/neuroncore", "Neuron"),
                                         ("gpu.intel.com/i915", "Intel-GPU")])
def test_every_other_accelerator_is_counted_with_its_family(key: str, family: str) -> None:
    j = parse_one(k8s_job({"containers": [{"name": "c", "resources": {"limits": {key: 2}}}]}))
    assert (j.gpu_count, j.accelerator_family, j.gpu_model) == (2, family, None)


def test_trainium_and_inferentia_are_told_apart_by_the_instance_family() -> None:
    for itype, family in (("trn1.32xlarge", "Trainium"), ("inf2.48xlarge", "Inferentia"), (None, "Neuron")):
        spec = {"containers": [{"name": "c", "resources": {"limits": {"aws.amazon.com/neuron": 16}}}]}
        if itype:
            spec["nodeSelector"] = {"node.kubernetes.io/instance-type": itype}
        j = parse_one(k8s_job(spec))
        assert j.accelerator_family == family


def test_kueue_objects_alone_are_no_workloads_and_an_unknown_queue_places_nothing(tmp_path: Path) -> None:
    text = (FIXTURES / "kueue/queued-job-spot.yaml").read_text()
    flavors, job = text.split("---\napiVersion: batch/v1")[0], "apiVersion: batch/v1" + \
        text.split("---\napiVersion: batch/v1")[1].split("---")[0]
    (tmp_path / "queues.yaml").write_text(flavors)
    assert load_jobs([tmp_path / "queues.yaml"], CATALOG).jobs == []
    (tmp_path / "job.yaml").write_text(job)
    alone = load_jobs([tmp_path / "job.yaml"], CATALOG)
    assert [(j.spot, j.gpu_model) for j in alone.jobs] == [(False, None)]  # where it runs is not in the file
    both = load_jobs([tmp_path / "queues.yaml", tmp_path / "job.yaml"], CATALOG)  # the queues in another file
    assert [(j.spot, j.gpu_model) for j in both.jobs] == [(True, "A100")]


def test_a_serving_runtime_carries_the_gpus_its_services_do_not_ask_for(tmp_path: Path) -> None:
    runtime = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
               "metadata": {"name": "vllm-runtime", "namespace": "nlp"},
               "spec": {"supportedModelFormats": [{"name": "huggingface"}],
                        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
                        "containers": [{"name": "kserve-container", "image": "vllm/vllm-openai",
                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    service = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "chat", "namespace": "nlp"},
               "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}, "runtime": "vllm-runtime"}}}}
    j = parse_one(runtime)
    assert (j.kind, j.gpu_model, j.gpu_count, j.manifest_kind) == ("server", "L4", 1, "ServingRuntime")
    service["spec"]["predictor"]["model"]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    f = tmp_path / "both.yaml"
    f.write_text(yaml.safe_dump_all([runtime, service]))
    assert [(j.manifest_kind, j.gpu_count) for j in load_jobs([f], CATALOG).jobs] == [("InferenceService", 2)]


def test_an_embedded_manifest_that_cannot_be_read_is_named_with_its_field(tmp_path: Path) -> None:
    f = tmp_path / "wf.yaml"
    f.write_text("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec:\n  templates:\n"
                 "    - name: t\n      resource:\n        action: create\n        manifest: |\n"
                 "          apiVersion: kubeflow.org/v1\n          kind: PyTorchJob\n          spec: [\n")
    [e] = load_jobs([f], CATALOG).failures
    assert e.line == 1 and "spec.templates[0].resource.manifest: the manifest it holds cannot be read: not valid " \
        "YAML" in str(e)


def test_a_placeholder_in_shell_text_is_the_shells_and_azure_bindings_are_azures() -> None:
    """`${VAR}` in a command, an argument or an environment value is expanded by the shell in the container, and
    Azure ML's `${{inputs.x}}` by Azure ML: neither is an unrendered template."""
    spec = {"containers": [{"name": "c", "command": ["bash", "-c", "python train.py --out ${OUT_DIR}"],
                            "env": [{"name": "RUN", "value": "${RUN_ID}"}],
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert parse_one(k8s_job(spec)).gpu_count == 1
    assert [j.id for j in jobs_of("azureml/pipeline.yml")] == ["azureml:detector-pipeline/train"]


def test_vertex_pools_and_sagemaker_groups_count_their_own_accelerators() -> None:
    """A Vertex AI chief of 1 A100 and 4 workers of 8 are 33 GPUs; a TPU pool is a TPU, not an unknown GPU; a
    SageMaker Trainium instance is Trainium."""
    pools = {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1},
         "replicaCount": 1, "containerSpec": {"imageUri": "x"}},
        {"machineSpec": {"machineType": "a2-highgpu-8g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 8},
         "replicaCount": 4, "containerSpec": {"imageUri": "x"}}]}
    j = parse_one({"displayName": "mixed", "jobSpec": pools})
    assert (j.instance_count, j.gpu_count, j.gpus_in_all()) == (5, 8, 33)
    tpu = {"workerPoolSpecs": [{"machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"},
                                "replicaCount": 1, "containerSpec": {"imageUri": "x"}}]}
    j = parse_one({"displayName": "tpu", "jobSpec": tpu})
    assert (j.accelerator_family, j.gpu_model) == ("TPU", None)
    j = parse_one({"TrainingJobName": "trn", "AlgorithmSpecification": {"TrainingImage": "x"},
                   "ResourceConfig": {"InstanceType": "ml.trn1.32xlarge", "InstanceCount": 2}})
    assert (j.accelerator_family, j.accelerator, j.instance_count) == ("Trainium", "ml.trn1.32xlarge", 2)


def test_skypilot_fills_in_its_own_envs_elsewhere_an_unset_one_is_unrendered(tmp_path: Path) -> None:
    f = tmp_path / "task.yaml"
    task = ("name: ft\nenvs: {BUCKET: nlp-ckpt}\nresources: {accelerators: A100:8, use_spot: true}\n"
            "file_mounts:\n  /ckpt: {name: '${BUCKET}', mode: MOUNT}\nrun: python train.py --checkpoint-dir /ckpt\n")
    f.write_text(task)
    loaded = load_jobs([f], CATALOG)
    assert loaded.failures == [] and [j.gpu_count for j in loaded.jobs] == [8]
    f.write_text(task.replace("accelerators: A100:8", "accelerators: '${GPU}:8'"))
    [e] = load_jobs([f], CATALOG).failures
    assert "resources.accelerators: '${GPU}' is an unrendered template placeholder" in str(e)


def test_an_argo_step_that_deletes_a_job_starts_nothing(tmp_path: Path) -> None:
    text = (FIXTURES / "operators/argo-resource-pytorchjob.yaml").read_text()
    f = tmp_path / "wf.yaml"
    f.write_text(text.replace("action: create", "action: delete"))
    loaded = load_jobs([f], CATALOG)
    assert loaded.jobs == [] and loaded.failures == []
    f.write_text(text.replace("action: create", "action: apply"))
    assert [j.id for j in load_jobs([f], CATALOG).jobs] == ["k8s:nlp/PyTorchJob/llama-ft"]


def test_a_reference_to_an_object_is_no_embedded_manifest() -> None:
    """A KEDA ScaledObject names its Deployment ({apiVersion, kind, name}); it carries no manifest, so it stays an
    unknown kind, named; a wrapper that carries a GPU job whole is judged by that job."""
    ref = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "s"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}}}
    with pytest.raises(UnknownKind):
        parse(Document(ref, "<test>", 1), CATALOG)
    wrapper = {"apiVersion": "example.com/v1", "kind": "JobTemplate", "metadata": {"name": "w"},
               "spec": {"job": k8s_job({"containers": [GPU_CONTAINER]}, namespace="ml")}}
    assert [j.id for j in parse(Document(wrapper, "<test>", 1), CATALOG)] == ["k8s:ml/Job/j"]


def test_a_queue_with_an_on_demand_and_a_spot_flavor_may_place_on_spot(tmp_path: Path) -> None:
    """Kueue admits to the first flavor with quota left, then the next: a job whose ClusterQueue lists a spot
    flavor may run on spot. The queue named by the older annotation counts too."""
    text = (FIXTURES / "kueue/queued-job-spot.yaml").read_text()
    on_demand = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: on-demand-a100}\n"
                 "spec:\n  nodeLabels: {cloud.google.com/gke-accelerator: nvidia-tesla-a100}\n---\n")
    text = on_demand + text.replace("      flavors:\n", "      flavors:\n        - name: on-demand-a100\n"
                                    "          resources: [{name: nvidia.com/gpu, nominalQuota: 8}]\n")
    text = text.replace("  labels:\n    kueue.x-k8s.io/queue-name: user-queue\n",
                        "  annotations: {kueue.x-k8s.io/queue-name: user-queue}\n  labels:\n")
    assert "annotations: {kueue.x-k8s.io/queue-name" in text and "- name: on-demand-a100" in text
    f = tmp_path / "q.yaml"
    f.write_text(text)
    assert [(j.spot, j.gpu_model) for j in load_jobs([f], CATALOG).jobs] == [(True, "A100")]
