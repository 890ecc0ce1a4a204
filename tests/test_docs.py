"""The documentation: README.md and docs/*.md name only scripts and files that exist, docs/results.md is what
benchmarks/results_index.py writes from benchmarks/results/ now, the README's headline figures are their sources',
and the layout lists name the folders that exist and setup.cfg installs."""

import configparser
import importlib.util
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def load_results_index():
    spec = importlib.util.spec_from_file_location("results_index", REPO_ROOT / "benchmarks" / "results_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


results_index = load_results_index()


def test_the_results_index_is_current():
    """After adding, changing or deleting a results file: `python benchmarks/results_index.py --write`."""
    assert (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8") == results_index.render()


def test_the_results_index_lists_every_results_file_with_a_command():
    page = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    files = sorted(path.name for path in (REPO_ROOT / "benchmarks" / "results").iterdir())
    assert len(files) > 40
    for name in files:
        assert f"[{name}](../benchmarks/results/{name})" in page, name
    tables = [name for name in files if name.endswith(".md")]
    commands = len(re.findall(r"^```bash$", page, flags=re.MULTILINE))
    assert commands + page.count("No command: ") == len(tables)


def test_a_results_table_records_its_command_or_the_index_refuses_it(tmp_path, monkeypatch):
    assert results_index.recorded_command("x\n\nCommand: `python benchmarks/a.py --b 1` (CPU)\n") == (
        "python benchmarks/a.py --b 1"
    )
    block = "Commands (two runs):\n\n```\npython a.py\npython b.py\n```\n"
    assert results_index.recorded_command(block) == "python a.py\npython b.py"
    assert results_index.recorded_command("# Checked\n\nCommand: none: read by hand.\n") is None
    with pytest.raises(ValueError, match="records no command"):
        results_index.recorded_command("# A table\n\n| a | b |\n")

    monkeypatch.setattr(results_index, "RESULTS_DIR", tmp_path)
    (tmp_path / "speed.md").write_text("Command: `python benchmarks/speed.py`\n")
    (tmp_path / "orphan.json").write_text("{}")
    with pytest.raises(ValueError, match="orphan.json: no orphan.md table"):
        results_index.results_tables()


def test_the_index_names_a_checkpoint_only_as_a_whole_name():
    names = ["hibert-minilm-cnndm", "stepwise-hibert-minilm-cnndm"]
    assert results_index.named_checkpoints("`checkpoints/stepwise-hibert-minilm-cnndm`", names) == [names[1]]
    assert results_index.named_checkpoints("hibert-minilm-cnndm and stepwise-hibert-minilm-cnndm", names) == names
    assert results_index.named_checkpoints("runs/hibert-minilm-cnndm40k/final", names) == []


def code_blocks(text: str) -> list[str]:
    """The shell blocks of a page (fenced blocks other than Python, JSON and YAML)."""
    return [body for language, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.DOTALL)
            if language not in ("python", "json", "yaml")]


SCRIPT = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|sh))(?![\w/-])")


def named_scripts(block: str) -> list[str]:
    """The .py and .sh files the block's commands name, comments left out."""
    lines = (re.sub(r"(^|\s)#.*$", "", line) for line in block.splitlines())
    return [name for line in lines for name in SCRIPT.findall(line)]


def test_script_names_are_found_in_commands():
    block = "python benchmarks/x.py --a b  # not train_y.py\nbash training_scripts/z.sh\nMODELS=a bash run.sh\n"
    assert named_scripts(block) == ["benchmarks/x.py", "training_scripts/z.sh", "run.sh"]
    assert named_scripts('accelerate launch --config_file a.yaml training_scripts/t.py --x "$(cat c.json)"') == [
        "training_scripts/t.py"
    ]


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.relative_to(REPO_ROOT).as_posix())
def test_every_command_names_a_script_that_exists(page):
    scripts = [name for block in code_blocks(page.read_text(encoding="utf-8")) for name in named_scripts(block)]
    missing = sorted({name for name in scripts if not (REPO_ROOT / name).is_file()})
    assert not missing, missing


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_resolves(page):
    targets = [target for target in LINK.findall(page.read_text(encoding="utf-8"))
               if not re.match(r"[a-z]+:", target) and not target.startswith("#")]
    missing = [target for target in targets if not (page.parent / target.split("#")[0]).exists()]
    assert not missing, missing


def anchors(page) -> set[str]:
    """GitHub's anchors for a page's headings: lowercased, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.relative_to(REPO_ROOT).as_posix())
def test_every_link_to_a_heading_finds_it(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        path, _, anchor = target.partition("#")
        if anchor and not re.match(r"[a-z]+:", target) and (not path or path.endswith(".md")):
            assert anchor in anchors(page.parent / path if path else page), target


def readme_lines() -> list[str]:
    return (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()


def test_the_readme_is_short():
    assert len(readme_lines()) <= 300


def shipped_rows() -> list[list[str]]:
    text = "\n".join(readme_lines())
    table = text.split("\n## Tasks and shipped models\n", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `")]


def test_the_readme_table_has_one_row_per_shipped_checkpoint():
    named = [re.match(r"`([\w-]+)`", row[1]).group(1) for row in shipped_rows()]
    assert sorted(named) == results_index.shipped_checkpoints()


def test_every_headline_figure_is_in_its_source():
    for task, checkpoint, _, figure, source in shipped_rows():
        path = REPO_ROOT / re.search(r"\]\(([^)]+)\)", source).group(1)
        numbers = re.findall(r"\d+\.\d+", figure)
        assert numbers and all(number in path.read_text(encoding="utf-8") for number in numbers), (checkpoint, numbers)


def package_dir_folders() -> set[str]:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    mapping = config["options"]["package_dir"].strip().splitlines()
    return {line.split("=")[1].strip() for line in mapping}


def contributing_layout() -> tuple[set[str], set[str]]:
    """The folders CONTRIBUTING.md's layout block names as installed and as not installed."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text.split("## The house", 1)[1].split("```", 2)[1]
    installed, rest = block.split("installed (", 1)[1].split("\nnot installed:", 1)
    folders = re.compile(r"^([\w-]+)/ ", flags=re.MULTILINE)
    return set(folders.findall(installed)), set(folders.findall(rest))


def test_the_contributing_layout_names_exactly_the_installed_folders():
    installed, _ = contributing_layout()
    assert installed == package_dir_folders()
    assert {"generation", "view", "demo"} <= installed


def test_the_architecture_page_names_exactly_the_installed_folders():
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w-]+)/` \| `sumformers(?:\.(\w+))?` \|", text, flags=re.MULTILINE)
    assert {folder for folder, _ in rows} == package_dir_folders()
    assert all(module in ("", folder) for folder, module in rows)


@pytest.mark.skipif(shutil.which("git") is None or not (REPO_ROOT / ".git").exists(), reason="not a git checkout")
def test_the_contributing_layout_names_every_top_level_folder():
    files = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    folders = {path.split("/")[0] for path in files.splitlines() if "/" in path and not path.startswith(".")}
    installed, other = contributing_layout()
    assert installed | other == folders
