"""Manifest files to documents: multi-document YAML or JSON (one request, or an array of them), each document
with its file and the line it starts on."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from auditor.errors import InputError
from auditor.readable import files_under, kind_of, read_text, unique_keys
from auditor.safeyaml import NoAliasLoader, control_character

SUFFIXES = (".yaml", ".yml", ".json")
MAX_DEPTH = 100  # levels of nesting; real manifests use under 30, and the YAML and JSON readers recurse per level


class UnknownKind(InputError):
    """A document that is no manifest the gate reads (exit 2, unless --skip-unknown)."""


@dataclass
class Document:
    data: Any
    path: str
    line: int

    def error(self, message: str, kind: type[InputError] = InputError) -> InputError:
        return kind(message, path=self.path, line=self.line)

    def part(self, data: Any) -> Document:
        """A piece of this document (a List item, a trial template), read as a document of its own."""
        return Document(data, self.path, self.line)


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, and folders as the *.yaml, *.yml and *.json files under them, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        # a folder it cannot list, a dangling or looping link: named (an unreadable file: by its reader)
        if kind_of(p, "manifest", open_file=False) == "folder":
            out += files_under(p, lambda f: f.suffix.lower() in SUFFIXES, "manifest", open_files=False)
        else:
            out.append(p)
    return out


class _Loader(NoAliasLoader):
    what = "a manifest"
    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise InputError(f"nested more than {MAX_DEPTH} levels deep; no manifest is",
                                 line=self.peek_event().start_mark.line + 1)
            node: yaml.Node | None = super().compose_node(parent, index)
            return node
        finally:
            self.depth -= 1


def read_documents(path: str | Path) -> list[Document]:
    name = str(path)
    try:
        text = read_text(path, "manifest")
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=name) from None
    if name.lower().endswith(".json"):
        return _json_documents(text, name)
    return yaml_documents(text, name)


def yaml_documents(text: str, path: str) -> list[Document]:
    try:
        loader = _Loader(text)  # checks every character first
    except yaml.reader.ReaderError as e:
        raise control_character(e, text, path) from None
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node said a document follows
            data = loader.construct_document(node)
            if data is not None:
                docs.append(Document(data, path, node.start_mark.line + 1))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        context = f" ({e.context} from line {e.context_mark.line + 1})" if e.context and e.context_mark else ""
        line = min(mark.line + 1, text.count("\n") or 1) if mark else None  # the end of the stream is no line
        held = text.splitlines()[line - 1] if line and text.strip() else ""
        if m := PLACEHOLDER.search(held):  # `gpus: {{ .Values.gpus }}`: a Helm template, not YAML until rendered
            key = re.match(r"^\s*(?:-\s+)?([^\s:{}]+)\s*:", held)
            raise InputError(_unrendered_message(m.group(0), key.group(1) if key else "a value"), path=path,
                             line=line) from None
        raise InputError(f"not valid YAML: {e.problem or e.context}{context}", path=path, line=line) from None
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML: {e}", path=path) from None
    except InputError as e:
        e.path = path
        raise
    finally:
        loader.dispose()
    return docs


def _json_documents(text: str, path: str) -> list[Document]:
    deep = InputError(f"nested more than {MAX_DEPTH} levels deep; no manifest is", path=path)
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", path=path, line=e.lineno) from None
    except ValueError as e:  # a key twice
        raise InputError(f"not valid JSON: {e}", path=path) from None
    except RecursionError:  # the decoder recurses once a level: deeper than Python's stack
        raise deep from None
    if _depth(data) > MAX_DEPTH:
        raise deep
    start = len(text) - len(text.lstrip())
    if not isinstance(data, list):
        return [Document(data, path, text.count("\n", 0, start) + 1)]
    # a JSON array of requests: find where each element starts, for its line
    decoder, pos, docs = json.JSONDecoder(), start + 1, []
    for item in data:
        while text[pos] in " \t\r\n,":
            pos += 1
        _, end = decoder.raw_decode(text, pos)
        docs.append(Document(item, path, text.count("\n", 0, pos) + 1))
        pos = end
    return docs


def _depth(data: Any) -> int:
    """How deeply lists and mappings nest, counted without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            stack += [(v, level + 1) for v in (value.values() if isinstance(value, dict) else value)]
    return deepest


# A value still holding a template's placeholder: `${NAME}` (envsubst, Terraform, Katib's trial parameters) or
# `{{ name }}` (Helm, Jinja, Argo parameters). Not Azure ML's and GitHub's `${{ ... }}` bindings, which the platform
# fills in at run time. Text the shell or the platform evaluates at run time keeps its placeholders, and the gate
# reads none of it as a count or a type: commands, arguments, scripts, environment variables, inputs and
# parameters, and Argo's conditions and loops.
PLACEHOLDER = re.compile(r"\$\{(?!\{)[^}]*\}|(?<!\$)\{\{.*?\}\}")
SHELL_KEYS = {"command", "args", "script", "run", "setup", "source", "env", "envs", "environment_variables",
              "environment", "code", "inputs", "outputs", "search_space", "trialParameters", "parameters",
              "arguments", "when", "withParam", "withItems", "withSequence", "expression", "depends",
              "successCondition", "failureCondition"}


def unrendered(doc: Document) -> None:
    """Refuse a document holding a template's placeholder where the gate reads values, naming the first such field:
    the same message for a GPU count, a GPU type, a node label or a name. A SkyPilot task fills in its own `envs`
    (and SKYPILOT_ variables) wherever they appear: those are rendered by the platform."""
    data = doc.data
    own = set(map(str, data["envs"])) if isinstance(data, dict) and isinstance(data.get("envs"), dict) else set()

    def held(text: str) -> str | None:
        for m in PLACEHOLDER.finditer(text):
            name = m.group(0)[2:-1].strip() if m.group(0).startswith("${") else None
            if name is None or (name not in own and not name.startswith("SKYPILOT_")):
                return m.group(0)
        return None

    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                if isinstance(k, str) and (found := held(k)):
                    raise doc.error(_unrendered_message(found, f"{path}.{k}".lstrip(".")))
                if k not in SHELL_KEYS:
                    stack.append((v, f"{path}.{k}"))
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]") for i, v in reversed(list(enumerate(value)))]
        elif isinstance(value, str) and (found := held(value)):
            raise doc.error(_unrendered_message(found, path.lstrip(".")))


def _unrendered_message(placeholder: str, field: str) -> str:
    return (f"{field}: {placeholder[:60]!r} is an unrendered template placeholder; render the manifest (helm "
            "template, kustomize, envsubst) and check what would be applied")
