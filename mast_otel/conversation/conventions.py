"""Which convention reads a span when it carries several: the one place that decides.

Instrumentations mix conventions (OpenLLMetry adds `gen_ai.*` to its own `traceloop.*`, OpenInference
sits next to GenAI attributes when two instrumentors wrap one client), so the order matters:

1. GenAI JSON messages (`gen_ai.input.messages` / `gen_ai.output.messages`): the current
   specification and the most complete record of a call, whoever wrote it (our SDK, OpenLLMetry
   0.62, openai-v2 with the latest conventions).
2. OpenInference (`openinference.span.kind`): its own complete vocabulary, never partial.
3. OpenLLMetry's numbered `gen_ai.prompt.N.*` / `traceloop.span.kind`: older spans that may also
   carry a bare `gen_ai.operation.name`, which alone would hide their messages.
4. GenAI per-message span events: the older GenAI form, messages outside the attributes.
5. GenAI attributes without messages, and the `mast.*` extensions (`GenAiNormalizer`).
"""

from __future__ import annotations

from mast_otel import semconv as sc
from mast_otel.conversation.genai_events import GenAiEventsNormalizer
from mast_otel.conversation.normalize import GenAiNormalizer, Normalizer, SpanView
from mast_otel.conversation.openinference import OpenInferenceNormalizer
from mast_otel.conversation.traceloop import TraceloopNormalizer
from mast_otel.spans import Span


class GenAiMessagesNormalizer:
    """`GenAiNormalizer`, claiming only spans that carry the JSON message attributes."""

    def __init__(self) -> None:
        self._genai = GenAiNormalizer()

    def accepts(self, span: Span) -> bool:
        attributes = span.attributes
        return sc.GEN_AI_INPUT_MESSAGES in attributes or sc.GEN_AI_OUTPUT_MESSAGES in attributes

    def view(self, span: Span) -> SpanView:
        return self._genai.view(span)


def ordered_normalizers() -> list[Normalizer]:
    """Every convention's normalizer, first match wins (see the module docstring for why this order)."""
    return [
        GenAiMessagesNormalizer(),
        OpenInferenceNormalizer(),
        TraceloopNormalizer(),
        GenAiEventsNormalizer(),
        GenAiNormalizer(),
    ]
