"""The README's two commands are the ones CI runs and the demo needs; its facts match the code."""

from __future__ import annotations

import re
from pathlib import Path

from mast_otel import semconv

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def fenced_commands() -> list[str]:
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", README, re.S)]


def test_readme_opens_with_the_demo_and_the_test_command() -> None:
    demo, tests = fenced_commands()[:2]
    assert "\n" not in demo and "\n" not in tests
    assert demo.endswith("mast-otel demo") and "[embedded]" in demo
    assert tests.endswith("&& pytest") and "[embedded,test]" in tests
    assert README.index(demo) < README.index(tests) < README.index("---")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert ci[-1] == fenced_commands()[1]


def test_readme_names_the_pinned_semconv_version() -> None:
    assert f"GenAI semantic conventions v{semconv.SEMCONV_VERSION}" in README
