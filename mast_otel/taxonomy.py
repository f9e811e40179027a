"""The MAST failure taxonomy: the 14 failure modes, their categories and the reference study's priors.

Single source of truth for every other module: annotators name modes by ``FailureMode.code``,
the store writes codes and categories from here, the analysis reads priors from here.

Sources:
- Cemri et al., "Why Do Multi-Agent LLM Systems Fail?" (NeurIPS 2025 Datasets & Benchmarks): the
  modes, categories and definitions. Public MAST artefacts swap the names of FM-3.2 and FM-3.3 in
  places; we follow the paper (3.2 = no or incomplete verification, 3.3 = incorrect verification).
- IBM Research's application of MAST to 310 ITBench SRE traces of three models: the priors. It saw
  incorrect verification (+52% in failed runs), termination failures and context loss as fatal,
  and step repetition as benign (present in >90% of one model's *successful* runs).

Whether a mode is fatal or benign for *your* agents is measured from your data by the analysis;
the priors here are what the study found, shown when data is thin.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Category(str, Enum):
    """The three MAST failure categories."""

    SYSTEM_DESIGN = "FC1"
    INTER_AGENT_MISALIGNMENT = "FC2"
    TASK_VERIFICATION = "FC3"

    @property
    def label(self) -> str:
        return _CATEGORY_LABELS[self]


_CATEGORY_LABELS = {
    Category.SYSTEM_DESIGN: "System design issues",
    Category.INTER_AGENT_MISALIGNMENT: "Inter-agent misalignment",
    Category.TASK_VERIFICATION: "Task verification",
}


class Prior(str, Enum):
    """What the reference study concluded about a mode's link to failure."""

    FATAL = "fatal"
    BENIGN = "benign"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class FailureMode:
    """One MAST failure mode."""

    code: str  # "FM-1.3"
    name: str  # "Step repetition"
    category: Category
    definition: str  # the paper's definition
    prior: Prior = Prior.UNKNOWN
    prior_note: str = ""  # what the reference study observed, when it said something
    # The definition in a few words, for prompts that must stay short (the LLM judge's default).
    gist: str = ""

    @property
    def number(self) -> str:
        """The bare number, "1.3"."""
        return self.code.removeprefix("FM-")

    @property
    def evaluation_name(self) -> str:
        """The `gen_ai.evaluation.name` findings of this mode carry, "mast.FM-1.3"."""
        return f"mast.{self.code}"


MODES: tuple[FailureMode, ...] = (
    FailureMode(
        "FM-1.1",
        "Disobey task specification",
        Category.SYSTEM_DESIGN,
        "Failure to adhere to the specified constraints or requirements of a given task, "
        "leading to suboptimal or incorrect outcomes.",
        gist="ignores the task's constraints or requirements",
    ),
    FailureMode(
        "FM-1.2",
        "Disobey role specification",
        Category.SYSTEM_DESIGN,
        "Failure to adhere to the defined responsibilities and constraints of an assigned role, "
        "potentially leading to an agent behaving like another.",
        gist="an agent oversteps its role or acts as another agent",
    ),
    FailureMode(
        "FM-1.3",
        "Step repetition",
        Category.SYSTEM_DESIGN,
        "Unnecessary reiteration of previously completed steps in a process, potentially causing "
        "delays or errors in task completion.",
        Prior.BENIGN,
        "Present in over 90% of one model's successful ITBench runs: repetition alone rarely decides a run.",
        gist="needlessly redoes steps already completed",
    ),
    FailureMode(
        "FM-1.4",
        "Loss of conversation history",
        Category.SYSTEM_DESIGN,
        "Unexpected context truncation, disregarding recent interaction history and reverting to "
        "an antecedent conversational state.",
        Prior.FATAL,
        "Part of the cascading collapse profile: lost context precedes derailment and many modes at once.",
        gist="loses recent context, reverts to an earlier state",
    ),
    FailureMode(
        "FM-1.5",
        "Unaware of termination conditions",
        Category.SYSTEM_DESIGN,
        "Lack of recognition or understanding of the criteria that should trigger the termination "
        "of the agents' interaction, potentially leading to unnecessary continuation.",
        Prior.FATAL,
        "The termination crisis profile: runs that loop until an external limit stops them.",
        gist="misses when to stop, keeps going needlessly",
    ),
    FailureMode(
        "FM-2.1",
        "Conversation reset",
        Category.INTER_AGENT_MISALIGNMENT,
        "Unexpected or unwarranted restarting of a dialogue, potentially losing context and "
        "progress made in the interaction.",
        gist="dialogue restarts without reason, losing progress",
    ),
    FailureMode(
        "FM-2.2",
        "Fail to ask for clarification",
        Category.INTER_AGENT_MISALIGNMENT,
        "Inability to request additional information when faced with unclear or incomplete data, "
        "potentially resulting in incorrect actions.",
        gist="acts on unclear or missing information instead of asking",
    ),
    FailureMode(
        "FM-2.3",
        "Task derailment",
        Category.INTER_AGENT_MISALIGNMENT,
        "Deviation from the intended objective or focus of a given task, potentially resulting in "
        "irrelevant or unproductive actions.",
        gist="drifts away from the task's objective",
    ),
    FailureMode(
        "FM-2.4",
        "Information withholding",
        Category.INTER_AGENT_MISALIGNMENT,
        "Failure to share or communicate important data or insights that an agent possesses and "
        "that could impact the decision-making of other agents if shared.",
        gist="an agent keeps back information others need",
    ),
    FailureMode(
        "FM-2.5",
        "Ignored other agent's input",
        Category.INTER_AGENT_MISALIGNMENT,
        "Disregarding or failing to adequately consider input or recommendations provided by "
        "other agents in the system, potentially leading to bad decisions or missed opportunities.",
        gist="disregards another agent's input or advice",
    ),
    FailureMode(
        "FM-2.6",
        "Reasoning-action mismatch",
        Category.INTER_AGENT_MISALIGNMENT,
        "Discrepancy between the logical reasoning process and the actual actions taken by the "
        "agent, potentially resulting in unexpected or undesired behaviors.",
        Prior.FATAL,
        "Acting against its own stated plan accompanied the termination crisis and the cascades.",
        gist="actions contradict the agent's own stated reasoning",
    ),
    FailureMode(
        "FM-3.1",
        "Premature termination",
        Category.TASK_VERIFICATION,
        "Ending a dialogue, interaction or task before all necessary information has been "
        "exchanged or objectives have been met, potentially resulting in incomplete or incorrect outcomes.",
        Prior.FATAL,
        "Stopping before the objective is met ends runs as failures; the study pairs it with FM-1.5.",
        gist="stops before the objective is met or all information is exchanged",
    ),
    FailureMode(
        "FM-3.2",
        "No or incomplete verification",
        Category.TASK_VERIFICATION,
        "Omission of proper checking or confirmation of task outcomes or system outputs, "
        "potentially allowing errors or inconsistencies to propagate undetected.",
        gist="outcomes or outputs are not checked, or only partly",
    ),
    FailureMode(
        "FM-3.3",
        "Incorrect verification",
        Category.TASK_VERIFICATION,
        "Failure to adequately validate or cross-check crucial information or decisions during "
        "the iterations, potentially leading to errors or vulnerabilities in the system.",
        Prior.FATAL,
        "The strongest differentiator in the study: +52% prevalence in failed runs.",
        gist="a check is done but is wrong or misses crucial errors",
    ),
)

BY_CODE: dict[str, FailureMode] = {mode.code: mode for mode in MODES}
CODES: tuple[str, ...] = tuple(BY_CODE)


def mode(code: str) -> FailureMode:
    """Look a mode up by "FM-1.3", "1.3" or "mast.FM-1.3"; raises KeyError naming the valid codes."""
    key = code.strip().removeprefix("mast.")
    if not key.startswith("FM-"):
        key = f"FM-{key}"
    try:
        return BY_CODE[key]
    except KeyError:
        raise KeyError(f"unknown MAST mode {code!r}; expected one of {', '.join(CODES)}") from None


def modes_in(category: Category) -> tuple[FailureMode, ...]:
    return tuple(m for m in MODES if m.category is category)
