"""The one YAML loader for what users write (policies, manifests): safe, with no aliases, dates kept as text."""

from __future__ import annotations

import yaml

from auditor.errors import InputError


class NoAliasLoader(yaml.SafeLoader):
    """Safe loading that refuses aliases (`*name`: how a YAML bomb expands; nothing here needs them) and keeps
    dates as text, so the validators parse them and can name the line of a bad one (2027-02-30)."""

    what = "this file"  # subclasses name what they load, for the error

    yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent, index):  # noqa: D102
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise InputError(f"YAML aliases (*name) are not allowed in {self.what}", line=event.start_mark.line + 1)
        return super().compose_node(parent, index)


def control_character(e: yaml.reader.ReaderError, text: str, path: str) -> InputError:
    """A NUL byte or another control character: YAML text holds none. (Read from text, not bytes, the reader
    gives the character as its code point.)"""
    return InputError(f"not valid YAML: the character U+{e.character:04X} is not allowed in YAML text", path=path,
                      line=text[:e.position].count("\n") + 1)
