"""`mast-otel report --html`: one self-contained page whose plots render in headless Chromium.

Chromium comes from Debian's `chromium` package (.ci/run installs it). Without it this test fails,
on purpose, saying how to install it: CI must never skip the rendering check silently.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.image import imread

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PLOTS = ("plot-heatmap", "plot-prevalence", "plot-modes", "plot-rates")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    demo = cli("demo", "--runs", "45", "--seed", "5", "--json", "--data", str(root / "data"))
    assert demo.returncode == 0, demo.stderr
    page = root / "report.html"
    made = cli(
        "report",
        "--store",
        str(root / "data"),
        "--html",
        str(page),
        "--since",
        "1h",
        "--compare",
        "sim-looping",
        "sim-cascading",
    )
    assert made.returncode == 0, made.stderr
    return page


def chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed to check the report renders: `apt-get install -y chromium`")
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={user_data}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_page_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    # Nothing to fetch: no scripts, no external sources (XML namespace URIs are names, not links).
    assert "<script" not in text
    assert not re.search(r"""(src|href)=["']https?://""", text)
    for plot in PLOTS:
        assert f'id="{plot}"' in text
    # The numbers are the CLI's: the models and the comparison are there.
    for model in ("sim-overconfident", "sim-looping", "sim-cascading"):
        assert model in text
    assert "sim-looping vs sim-cascading" in text
    assert re.search(r"(fatal|benign|inconclusive)", text)


def test_chromium_renders_every_plot(report: Path, tmp_path: Path) -> None:
    dumped = chromium("--dump-dom", report.as_uri(), user_data=tmp_path / "profile")
    assert dumped.returncode == 0, dumped.stderr
    dom = dumped.stdout
    for plot in PLOTS:
        start = dom.index(f'id="{plot}"')
        section = dom[start : dom.index("</svg>", start)]
        assert "<svg" in section, plot
        # Data drawn, not just axes: heatmap cells, bars and lines are paths or images.
        assert section.count("<path") + section.count("<image") >= 10, plot
    shot = tmp_path / "page.png"
    taken = chromium(
        f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri(), user_data=tmp_path / "profile2"
    )
    assert taken.returncode == 0 and shot.is_file(), taken.stderr
    pixels = imread(shot)
    assert pixels.shape[0] >= 1000
    # A rendered page with red/green bars is far from uniform: many distinct colours.
    colours = {tuple(row) for row in pixels[::7, ::7, :3].reshape(-1, 3).round(2).tolist()}
    assert len(colours) > 30


def test_analyze_json_gains_verdicts_insights_and_comparison(report: Path) -> None:
    data = report.parent / "data"
    result = cli(
        "analyze",
        "--store",
        str(data),
        "--json",
        "--since",
        "2h",
        "--compare",
        "sim-looping",
        "sim-cascading",
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [m["model"] for m in document["models"]]  # the documented shape is intact
    looping = next(m for m in document["models"] if m["model"] == "sim-looping")
    assert looping["modes"]["FM-1.5"]["verdict"] in ("fatal", "benign", "inconclusive")
    assert "odds_ratio_ci95" in looping["modes"]["FM-1.5"]
    assert document["comparison"]["a"] == "sim-looping"
    assert set(document["insights"]) == {m["model"] for m in document["models"]}
    unknown = cli("analyze", "--store", str(data), "--compare", "sim-looping", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    future = cli("analyze", "--store", str(data), "--json", "--until", "2001-01-01")
    assert (
        json.loads(future.stdout) == {"models": [], "insights": {}}
        or json.loads(future.stdout)["models"] == []
    )
