"""Findings as GitHub Actions workflow commands, so a pull request shows them on the spec's lines.

``::error file=F,line=L,title=T::message`` (and ``::warning``, ``::notice``), documented in
docs.github.com/en/actions/reference/workflow-commands-for-github-actions. Escaping follows
actions/toolkit ``packages/core/src/command.ts``: in the message ``%``, CR and LF become ``%25``,
``%0D``, ``%0A``; property values also escape ``:`` and ``,`` (``%3A``, ``%2C``).
"""

from __future__ import annotations

from clusterforge.spec.loader import Finding

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    """One workflow command line for one finding; the key path leads the message."""
    props = []
    if finding.file:
        props.append(f"file={escape_property(finding.file)}")
    if finding.line:
        props.append(f"line={finding.line}")
    props.append(f"title={escape_property(finding.check_id)}")
    message = f"{finding.path}: {finding.message}" if finding.path else finding.message
    return f"::{COMMANDS.get(finding.level, 'notice')} {','.join(props)}::{escape_data(message)}"
