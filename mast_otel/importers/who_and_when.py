"""Who&When logs -> Conversations: the failure-attribution benchmark of Zhang, Yin et al. (ICML 2025).

The format, as published: a JSON object with `question`, `history` (a list of `{content, role,
name?}`), optionally `is_correct` (or `is_corrected`), `ground_truth`, `question_ID`, and the human
labels `mistake_agent`, `mistake_step` (the 0-based index into `history`) and `mistake_reason`.
Each history entry becomes one turn whose index is its position in `history`, so blame and labels
count steps alike.

Who speaks: `name` when present, else `role`. Speakers may carry a note in parentheses, as the
benchmark's hand-crafted (Magentic-One) half writes them: `Orchestrator (thought)` is the
Orchestrator reasoning, `Orchestrator (-> WebSurfer)` is the Orchestrator handing WebSurfer an
instruction, any other note (`Orchestrator (termination condition)`) a plain message; the agent is
always the bare name, as the labels write it. `human` / `user` (without a name) is the user,
`system` the system. An entry whose first line reports an exit code (`exitcode: 1 (execution
failed)`, `... (POSIX exit code: 1)`) is a code executor's result: a tool call by the agent whose
message held the code (it ran its code through the executor), named after the executor, with that
code as arguments, failed when the exit code is not 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mast_otel.conversation.model import Conversation, Outcome, ToolCall, Turn, TurnKind
from mast_otel.importers.base import FileRead, ImportFileError, content_trace_id, load_json, read_bytes

FORMAT = "who-and-when"
SERVICE_NAME = "who-and-when"

_NOTED_SPEAKER = re.compile(r"^(?P<agent>.*?\S)\s*\((?P<note>[^()]*)\)\s*$")
_USER_SPEAKERS = frozenset({"human", "user"})
_SYSTEM_SPEAKERS = frozenset({"system"})
_EXIT_CODE = re.compile(r"exit\s*(?:code|status)\s*[:=]?\s*(-?\d+)", re.IGNORECASE)
_OUTPUT_HEADER = re.compile(r"^\s*(?:code\s+)?output\s*(?:was)?\s*:\s*", re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_MAX_HEADER_CHARS = 200


@dataclass(frozen=True, slots=True)
class Speaker:
    """A history entry's speaker, parsed: the bare agent, what kind of turn it is, whom it addresses."""

    agent: str
    kind: TurnKind
    target: str = ""


def parse_speaker(raw: str, *, named: bool = False) -> Speaker:
    """`Orchestrator (-> WebSurfer)` -> Speaker("Orchestrator", HANDOFF, "WebSurfer"), and so on.

    `named` says the speaker came from an entry's `name`, which always names an agent (a speaker
    called "user" by name is still an agent; by role it is the user).
    """
    text = raw.strip()
    noted = _NOTED_SPEAKER.match(text)
    if noted is not None:
        agent, note = noted.group("agent"), noted.group("note").strip()
        if note.lower() == "thought":
            return Speaker(agent, TurnKind.REASONING)
        if note.startswith("->"):
            return Speaker(agent, TurnKind.HANDOFF, note[2:].strip())
        return Speaker(agent, TurnKind.AGENT_MESSAGE)
    if not named and text.lower() in _USER_SPEAKERS:
        return Speaker("user", TurnKind.USER)
    if not named and text.lower() in _SYSTEM_SPEAKERS:
        return Speaker("system", TurnKind.SYSTEM)
    return Speaker(text, TurnKind.AGENT_MESSAGE)


def bare_agent(name: str) -> str:
    """The agent a speaker or a label names, without its note: `Orchestrator (thought)` -> `Orchestrator`."""
    noted = _NOTED_SPEAKER.match(name.strip())
    return noted.group("agent") if noted is not None else name.strip()


@dataclass(frozen=True, slots=True)
class AttributionLabel:
    """The benchmark's human label: which agent made the decisive mistake, at which step, and why."""

    agent: str
    step: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LabelledLog:
    """One Who&When file: its conversation, its label (None when absent or unusable, with the reason)
    and each history entry's raw speaker, which the random baselines are computed from."""

    path: Path
    conversation: Conversation
    speakers: tuple[str, ...]
    label: AttributionLabel | None
    label_problem: str = ""


class WhoAndWhenReader:
    """The `Reader` for Who&When JSON logs: one run per file."""

    format_name = FORMAT
    description = "Who&When failure-attribution logs (JSON: question, history, mistake_agent/step labels)"
    suffixes = (".json",)

    def read(self, path: Path) -> FileRead:
        return FileRead((read_log(path).conversation,))


def read_log(path: Path) -> LabelledLog:
    """Parse one Who&When file; raises `ImportFileError` naming what is wrong with it."""
    content = read_bytes(path)
    document = load_json(path, content)
    if not isinstance(document, dict):
        raise ImportFileError(path, f"expected a JSON object, got {type(document).__name__}")
    history = document.get("history")
    if not isinstance(history, list) or not history:
        raise ImportFileError(path, "no `history`: expected a non-empty list of {content, role, name?}")
    question = document.get("question")
    task = question if isinstance(question, str) else ""
    turns: list[Turn] = []
    speakers: list[str] = []
    participants: dict[str, None] = {}  # everyone who speaks, code executors included, in order
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise ImportFileError(path, f"history[{index}] is a {type(entry).__name__}, not an object")
        name, role = entry.get("name"), entry.get("role")
        named = isinstance(name, str) and bool(name.strip())
        raw = name if named else role
        if not isinstance(raw, str) or not raw.strip():
            raise ImportFileError(path, f"history[{index}] has neither a `name` nor a `role`")
        speakers.append(raw.strip())
        speaker = parse_speaker(raw, named=named)
        if speaker.kind not in (TurnKind.USER, TurnKind.SYSTEM):
            participants.setdefault(speaker.agent)
        turns.append(_turn(index, speaker, _text(entry.get("content")), turns))
    label, problem = _label(document, len(history))
    agents = tuple(participants)
    conversation = Conversation(
        trace_id=content_trace_id(content),
        turns=tuple(turns),
        service_name=SERVICE_NAME,
        task_id=str(document.get("question_ID") or ""),
        task=task or next((turn.content for turn in turns if turn.kind is TurnKind.USER), ""),
        root_agent=agents[0] if agents else "",
        agents=agents,
        outcome=_outcome(document, label),
        attributes=_attributes(path, label),
    )
    return LabelledLog(path, conversation, tuple(speakers), label, problem)


def _text(content: object) -> str:
    """An entry's content as text: strings as they are, multimodal part lists joined, null empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part if isinstance(part, str) else str(part.get("text") or "")
            for part in content
            if isinstance(part, (str, dict))
        ]
        return "\n".join(part for part in parts if part)
    return "" if content is None else str(content)


def _turn(index: int, speaker: Speaker, content: str, earlier: list[Turn]) -> Turn:
    if speaker.kind is TurnKind.AGENT_MESSAGE:
        exit_code = _exit_code(content)
        if exit_code is not None:
            author = _author_of_code(earlier)
            return Turn(
                index=index,
                # The code's author ran it through the executor, as an agent calls a tool.
                kind=TurnKind.TOOL_CALL,
                agent=author.agent if author is not None else speaker.agent,
                content=content,
                tool=ToolCall(
                    name=speaker.agent,
                    arguments=_code_blocks(author.content) if author is not None else "",
                    result=_output(content),
                    error=f"exit code {exit_code}" if exit_code else "",
                ),
            )
    return Turn(
        index=index, kind=speaker.kind, agent=speaker.agent, content=content, target_agent=speaker.target
    )


def _exit_code(content: str) -> int | None:
    first_line = content.lstrip()[:_MAX_HEADER_CHARS].partition("\n")[0]
    match = _EXIT_CODE.search(first_line)
    return int(match.group(1)) if match else None


def _output(content: str) -> str:
    """What the executed code printed: the entry without its exit-code line and output header."""
    _, _, rest = content.lstrip().partition("\n")
    return _OUTPUT_HEADER.sub("", rest, count=1).strip()


def _author_of_code(earlier: list[Turn]) -> Turn | None:
    """The message whose code an executor ran: the latest one since the previous result that has a
    code block (the message right before may only pass the request on)."""
    for turn in reversed(earlier):
        if turn.kind is TurnKind.TOOL_CALL:
            return None
        if "```" in turn.content and _CODE_BLOCK.search(turn.content):
            return turn
    return None


def _code_blocks(text: str) -> str:
    return "\n".join(block.strip() for block in _CODE_BLOCK.findall(text))


# The benchmark's label fields, named once (tests refer to them through these names).
LABEL_AGENT, LABEL_STEP, LABEL_REASON = "mistake_agent", "mistake_step", "mistake_reason"


def _label(document: dict[str, object], steps: int) -> tuple[AttributionLabel | None, str]:
    agent, step = document.get(LABEL_AGENT), document.get(LABEL_STEP)
    if agent is None and step is None:
        return None, f"no `{LABEL_AGENT}` / `{LABEL_STEP}`"
    if not isinstance(agent, str) or not agent.strip():
        return None, f"`{LABEL_AGENT}` is not an agent name: {agent!r}"
    try:
        index = int(str(step).strip())
    except ValueError:
        return None, f"`{LABEL_STEP}` is not a step number: {step!r}"
    if not 0 <= index < steps:
        return None, f"`{LABEL_STEP}` {index} is outside the history (0..{steps - 1})"
    reason = document.get(LABEL_REASON)
    return AttributionLabel(agent.strip(), index, reason if isinstance(reason, str) else ""), ""


def _outcome(document: dict[str, object], label: AttributionLabel | None) -> Outcome:
    for key in ("is_correct", "is_corrected"):
        value = document.get(key)
        if isinstance(value, bool):
            return Outcome.SUCCESS if value else Outcome.FAILURE
    # A labelled mistake means the run failed: that is what the benchmark collects.
    return Outcome.FAILURE if label is not None else Outcome.UNKNOWN


def _attributes(path: Path, label: AttributionLabel | None) -> dict[str, str]:
    attributes = {"mast.import.format": FORMAT, "mast.import.file": path.name}
    if label is not None:
        attributes["who_and_when.mistake_agent"] = label.agent
        attributes["who_and_when.mistake_step"] = str(label.step)
    return attributes
