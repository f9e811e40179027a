"""The judge's parts without a server: redaction, configuration, answer parsing, verdict merging,
chunk planning (property-based), sampling and the token budget."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mast_otel.annotate.base import Evidence, Finding
from mast_otel.annotate.llm import JudgeConfig, JudgeConfigError, load_judge_config
from mast_otel.annotate.llm.chunking import RenderedStep, TokenEstimator, compact, split_steps
from mast_otel.annotate.llm.config import SamplingConfig
from mast_otel.annotate.llm.policy import HourlyTokenBudget, SamplingPolicy
from mast_otel.annotate.llm.prompt import FORMAT_NOTE, system_prompt
from mast_otel.annotate.llm.schema import AnswerError, extract_json_object, parse_answer, response_format
from mast_otel.annotate.llm.verdict import ChunkAnswer, Detection, ModeVerdict, RunVerdict, merge_answers
from mast_otel.conversation.model import Conversation, Outcome
from mast_otel.redact import RedactionConfig, RedactionPattern, Redactor
from mast_otel.taxonomy import CODES, MODES, mode

# --- redaction -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret", "placeholder"),
    [
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwx", "sk-ant-api03-abcdefghijklmnopqrstuvwx", "<SECRET_1>"),
        ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "<SECRET_1>"),
        (
            "use ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "<SECRET_1>",
        ),
        ('{"password": "hunter2!"}', "hunter2!", "<SECRET_1>"),
        ("client_secret = 'q8Zr-0b1x'", "q8Zr-0b1x", "<SECRET_1>"),
        (
            "Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJlX3g",
            "eyJhbGciOi.eyJzdWIiOiIx",
            "<SECRET_1>",
        ),
        ("redis://:topsecretpw@cache:6379", "topsecretpw", "<URL_PASSWORD_1>"),
        ("https://bob:pa55@git.example.org/repo", "pa55", "<URL_PASSWORD_1>"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow", "<SECRET_1>"),
        (
            "write to First.Last+tag@mail.example.co.uk today",
            "First.Last+tag@mail.example.co.uk",
            "<EMAIL_1>",
        ),
        ("ping 192.168.1.254.", "192.168.1.254", "<IP_1>"),
        ("listen on [fe80::1ff:fe23:4567:890a]:80", "fe80::1ff:fe23:4567:890a", "<IP_1>"),
    ],
)
def test_built_in_rules_replace_secrets_and_personal_data(text: str, secret: str, placeholder: str) -> None:
    redacted = Redactor().redact(text)
    assert secret not in redacted
    assert placeholder in redacted


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 1500 and input_tokens=12",
        "std::vector<int> a::b; at 12:30:45",
        "version 1.2.3 of the chart",
        "the password field was empty",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().redact(text) == text


def test_a_session_maps_one_value_to_one_placeholder_and_restores_only_what_is_allowed() -> None:
    redactor = Redactor(RedactionConfig(restorable=("email",)))
    session = redactor.session()
    first = session.redact("mail a@example.com, key sk-abcdefghijklmnopqrstuvwxyz")
    second = session.redact("again a@example.com and b@example.com")
    assert first == "mail <EMAIL_1>, key <SECRET_1>"
    assert second == "again <EMAIL_1> and <EMAIL_2>"
    assert (
        session.restore("told <EMAIL_2> the <SECRET_1> <EMAIL_9>")
        == "told b@example.com the <SECRET_1> <EMAIL_9>"
    )
    assert "a@example.com" not in repr(session)


def test_user_patterns_and_switches() -> None:
    pattern = RedactionPattern("ticket", r"TCK-(\d+)")  # with a group, only the group is replaced
    redactor = Redactor(RedactionConfig(emails=False, patterns=(pattern,)))
    assert redactor.redact("TCK-4242 from a@example.com") == "TCK-<TICKET_1> from a@example.com"
    assert Redactor(RedactionConfig(enabled=False)).redact("sk-abcdefghijklmnopqrstuvwxyz") == (
        "sk-abcdefghijklmnopqrstuvwxyz"
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"restorable": ["secret"]}, "never restored"),
        ({"restorable": ["nope"]}, "unknown"),
        ({"patterns": [{"name": "x y", "regex": "a"}]}, "letters"),
        ({"patterns": [{"name": "x", "regex": "("}]}, "not a valid regex"),
    ],
)
def test_redaction_config_is_validated(section: dict[str, object], message: str) -> None:
    with pytest.raises(JudgeConfigError, match=message):
        JudgeConfig.from_mapping({"model": "m", "redaction": section})


# --- configuration ----------------------------------------------------------------------------------


def test_unknown_keys_and_bad_values_name_their_path() -> None:
    with pytest.raises(JudgeConfigError, match=r"judge\.request\.timout_s: unknown key"):
        JudgeConfig.from_mapping({"model": "m", "request": {"timout_s": 3}})
    with pytest.raises(JudgeConfigError, match=r"judge\.sampling"):
        JudgeConfig.from_mapping({"model": "m", "sampling": {"other_fraction": 2}})
    with pytest.raises(JudgeConfigError, match="needs a model"):
        load_judge_config(environ={})


def test_the_key_is_read_where_the_config_points_and_never_shown(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-test-FILEKEY0123456789abcdef\n")
    config = JudgeConfig.from_mapping({"model": "m", "api_key_file": str(key_file)})
    assert config.api_key({}) == "sk-test-FILEKEY0123456789abcdef"
    assert JudgeConfig.from_mapping({"model": "m"}).api_key({"OPENAI_API_KEY": "sk-env"}) == "sk-env"
    assert "FILEKEY" not in repr(config)
    with pytest.raises(JudgeConfigError) as error:
        JudgeConfig.from_mapping({"model": "m", "api_key": "sk-pasted-secret-value"})
    assert "sk-pasted-secret-value" not in str(error.value)  # values are never echoed


def test_yaml_env_and_overrides_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "collector.yaml"
    path.write_text("judge:\n  model: from-yaml\n  base_url: http://yaml:8000/v1\n  concurrency: 2\n")
    env = {"MAST_OTEL_JUDGE_MODEL": "from-env", "MAST_OTEL_JUDGE_HOURLY_TOKENS": "1000"}
    config = load_judge_config(path, environ=env, overrides={"concurrency": 7, "base_url": None})
    assert (config.model, config.base_url, config.concurrency) == ("from-env", "http://yaml:8000/v1", 7)
    assert config.budget.hourly_tokens == 1000


def test_few_shot_examples_must_carry_a_usable_answer(tmp_path: Path) -> None:
    from mast_otel.annotate.llm import LLMJudge

    good = {
        "run": "[0] a: hi\n[1] a: hi",
        "answer": {
            "modes": {"FM-1.3": {"detected": True, "steps": [1], "explanation": "again"}},
            "task_completed": "unknown",
        },
    }
    path = tmp_path / "examples.yaml"
    path.write_text(json.dumps([good]))
    config = JudgeConfig.from_mapping(
        {"model": "m", "base_url": "http://127.0.0.1:9/v1", "few_shot_file": str(path)}
    )
    judge = LLMJudge(config)  # builds without any request
    judge.close()
    path.write_text(json.dumps([{"run": "x", "answer": "not json"}]))
    with pytest.raises(JudgeConfigError, match="example 1"):
        LLMJudge(
            JudgeConfig.from_mapping(
                {"model": "m", "base_url": "http://127.0.0.1:9/v1", "few_shot_file": str(path)}
            )
        )
    with pytest.raises(JudgeConfigError, match="cannot read"):
        JudgeConfig.from_mapping({"model": "m", "few_shot_file": str(tmp_path / "missing.yaml")})


def test_no_key_for_openai_itself_is_a_config_error() -> None:
    from mast_otel.annotate.llm import LLMJudge

    with pytest.raises(JudgeConfigError, match="no API key"):
        LLMJudge(JudgeConfig.from_mapping({"model": "m", "api_key_env": "MAST_OTEL_TEST_UNSET_KEY"}))


# --- parsing and merging ------------------------------------------------------------------------------


def test_extraction_skips_objects_that_are_not_answers() -> None:
    text = 'Context {"note": 1} then the answer {"modes": {"FM-1.1": {"detected": false}}} done'
    assert "modes" in extract_json_object(text)
    with pytest.raises(AnswerError):
        extract_json_object("no braces at all")


@pytest.mark.parametrize(
    "reply",
    [
        '{"modes": {"FM-1.1": {"detected": "maybe"}}}',  # not a yes/no
        '{"modes": "all fine"}',
        '{"verdict": "ok"}',
        "[1, 2, 3]",
    ],
)
def test_replies_without_a_single_valid_mode_are_invalid(reply: str) -> None:
    with pytest.raises(AnswerError):
        parse_answer(reply, range(10))


def test_top_level_codes_and_bare_booleans_are_accepted() -> None:
    parsed = parse_answer('{"1.1": "no", "FM-3.3": true, "task_completed": true}', range(10))
    assert [(a.mode.code, a.detection) for a in parsed.modes] == [
        ("FM-1.1", Detection.NO),
        ("FM-3.3", Detection.YES),
    ]
    assert parsed.task_completed is Detection.YES


def test_merging_chunks_yes_wins_no_needs_every_chunk_and_the_end_decides_completion() -> None:
    def chunk(task: Detection, codes: dict[str, Detection]) -> ChunkAnswer:
        steps = {Detection.YES: (1,)}
        return ChunkAnswer(tuple(ModeVerdict(mode(c), d, steps.get(d, ())) for c, d in codes.items()), task)

    yes, no = Detection.YES, Detection.NO
    first = chunk(Detection.UNKNOWN, {"FM-1.3": yes, "FM-2.1": no, "FM-3.1": no})
    last = chunk(Detection.NO, {"FM-1.3": no, "FM-2.1": no})
    verdict = merge_answers([first, None, last])
    assert verdict.mode("FM-1.3").detection is Detection.YES
    assert verdict.mode("FM-2.1").detection is Detection.UNKNOWN  # the middle chunk never answered
    assert merge_answers([first, last]).mode("FM-2.1").detection is Detection.NO
    assert merge_answers([first, last]).mode("FM-3.1").detection is Detection.UNKNOWN  # last chunk silent
    assert verdict.task_completed is Detection.NO
    assert (verdict.chunks, verdict.chunks_answered, verdict.complete) == (3, 2, False)


def test_a_verdict_survives_its_stored_form() -> None:
    verdict = merge_answers(
        [
            parse_answer(
                '{"modes": {"FM-2.4": {"detected": true, "steps": [2], '
                '"explanation": "kept <EMAIL_1> to itself"}}}',
                range(5),
            )
        ]
    )
    assert RunVerdict.from_json(verdict.to_json()) == replace(verdict, problems=())  # problems: in the reason
    with pytest.raises(ValueError):
        RunVerdict.from_json('{"modes": {}}')


# --- the prompt ---------------------------------------------------------------------------------------

# What every request carries whatever the run: the default system prompt and the JSON schema, in
# tokens at 4 characters each (how the benchmark counts). Raise only knowingly: on short runs this
# fixed part is most of what the judge sends.
PROMPT_TOKEN_BUDGET = 480
PROMPT_AND_SCHEMA_TOKEN_BUDGET = 700


def test_the_default_prompt_stays_short_and_names_all_14_modes() -> None:
    prompt = system_prompt()
    schema = json.dumps(response_format("json_schema"))
    assert len(prompt) / 4 <= PROMPT_TOKEN_BUDGET
    assert (len(prompt) + len(schema)) / 4 <= PROMPT_AND_SCHEMA_TOKEN_BUDGET
    for failure_mode in MODES:
        assert f"{failure_mode.code} {failure_mode.name}: {failure_mode.gist}" in prompt
    assert FORMAT_NOTE not in prompt and "additionalProperties" not in prompt  # the schema says it


def test_the_full_definitions_stay_available() -> None:
    full = system_prompt("full")
    assert all(f"{m.code} {m.name}: {m.definition}" in full for m in MODES)
    assert len(full) > 1.5 * len(system_prompt())
    assert all(m.gist and len(m.gist) < len(m.definition) / 2 for m in MODES)


def test_the_judge_names_its_definitions_in_its_cache_identity() -> None:
    from mast_otel.annotate.llm.cache import judge_identity

    gist = JudgeConfig(model="m")
    assert judge_identity(gist) != judge_identity(replace(gist, definitions="full"))


# --- the compact answer ----------------------------------------------------------------------------------


def test_a_compact_answer_names_detected_and_absent_modes() -> None:
    reply = json.dumps(
        {
            "detected": [
                {"mode": "2.5 Ignored other agent's input", "steps": [3, 99], "explanation": "ignored"},
                {"mode": "FM-3.2", "steps": [4], "explanation": "no check"},
            ],
            "not_detected": [*(c for c in CODES if c not in ("FM-2.5", "FM-3.2", "FM-1.4")), "FM-3.2"],
            "task_completed": "no",
        }
    )
    chunk = parse_answer(f"Here you go:\n```json\n{reply}\n```", range(1, 6))
    assert chunk.get(mode("FM-2.5")) == ModeVerdict(mode("FM-2.5"), Detection.YES, (3,), "ignored")
    assert chunk.get(mode("FM-3.2")) is None  # in both lists: contradictory, so unknown
    assert chunk.get(mode("FM-1.4")) is None  # in neither list: unknown, never "no"
    assert chunk.get(mode("FM-1.1")) == ModeVerdict(mode("FM-1.1"), Detection.NO)
    assert chunk.task_completed is Detection.NO
    assert any("99" in problem for problem in chunk.problems)  # evidence it was not shown


def test_the_schema_allows_only_the_14_codes() -> None:
    schema = response_format("json_schema")
    assert schema is not None
    body = schema["json_schema"]["schema"]
    assert body["$defs"]["code"]["enum"] == list(CODES)
    assert set(body["required"]) == {"detected", "not_detected", "task_completed"}


# --- chunking -----------------------------------------------------------------------------------------


def test_compaction_keeps_head_and_tail() -> None:
    text = "HEAD " + "lorem ipsum " * 1_000 + "TAIL"
    short = compact(text, 300)
    assert short.startswith("HEAD") and short.endswith("TAIL")
    assert "chars omitted" in short and len(short) <= 330


def test_compaction_collapses_layout_but_keeps_words() -> None:
    assert compact("short\n\n\n\n\nbody  \n", 300) == "short\nbody"
    layout = "def f(x):\n\n        return   x\t+ 1\n----------------\n=====\nwait... done"
    assert compact(layout, 300) == "def f(x):\nreturn x + 1\n---\n===\nwait... done"


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=3000), min_size=0, max_size=60),
    budget=st.integers(min_value=50, max_value=2000),
    overlap=st.integers(min_value=0, max_value=5),
)
def test_every_step_lands_in_a_chunk_and_the_last_chunk_ends_the_run(
    sizes: list[int], budget: int, overlap: int
) -> None:
    estimator = TokenEstimator(3.0)
    steps = [
        RenderedStep(i, f"[{i}] " + "x" * size, estimator.tokens("x" * size) + 2)
        for i, size in enumerate(sizes)
    ]
    chunks = split_steps(steps, budget_tokens=budget, overlap_steps=overlap, estimator=estimator)
    seen = [index for chunk in chunks for index in chunk.indexes]
    assert set(seen) == set(range(len(sizes)))
    if sizes:
        assert chunks[-1].indexes[-1] == len(sizes) - 1
    for chunk in chunks:
        assert list(chunk.indexes) == sorted(chunk.indexes)  # in run order
        assert chunk.tokens <= budget or len(chunk.steps) == 1  # a lone step is compacted to fit
        assert chunk.steps[0].tokens <= budget if chunk.steps else True
    assert all(a.indexes[0] < b.indexes[0] for a, b in itertools.pairwise(chunks))  # progress


# --- sampling and budget -----------------------------------------------------------------------------


def test_sampling_judges_failures_and_rule_hits_and_a_stable_fraction_of_the_rest() -> None:
    policy = SamplingPolicy(SamplingConfig(other_fraction=0.25))
    ok = Conversation("1" * 32, (), outcome=Outcome.SUCCESS)
    assert policy.decide(Conversation("1" * 32, (), outcome=Outcome.FAILURE), (), "f" * 32).judge
    finding = Finding(mode("FM-1.3"), Evidence((1,)), 0.5, "x", "rules/x")
    assert "FM-1.3" in policy.decide(ok, (finding,), "f" * 32).reason
    hashes = [f"{n:032x}" for n in range(0, 2**128, 2**121)]  # spread over the hash space
    chosen = [policy.decide(ok, (), key).judge for key in hashes]
    assert chosen == [policy.decide(ok, (), key).judge for key in hashes]  # same run, same decision
    assert sum(chosen) == len(hashes) // 4


def test_the_budget_is_a_sliding_hour() -> None:
    now = [1000.0]
    budget = HourlyTokenBudget(1000, clock=lambda: now[0])
    first = budget.reserve(600)
    assert first is not None and budget.reserve(600) is None
    first.settle(300)  # the server reported less than estimated
    assert budget.used() == 300 and budget.reserve(600) is not None
    assert budget.exhausted() is False and budget.reserve(200) is None
    assert budget.seconds_until_room(200) == pytest.approx(3600.0)
    now[0] += 3600.5
    assert budget.used() == 0 and not budget.exhausted()
    assert HourlyTokenBudget(0).reserve(10**9) is not None  # 0: unlimited
