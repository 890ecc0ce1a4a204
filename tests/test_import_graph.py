"""The house's rules, drawn as tests: imports run one way (the face -> pipelines -> processing and modeling -> the
shared blocks: configuration, generation, text), `import sumformers` loads no torch and no model code, and no modeling
file grows past `MAX_MODELING_LINES` (a model's parts go beside it, split by concern, as WikiSum's `wikisum_*.py`)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# setup.cfg's package_dir: each folder is a subpackage of `sumformers`; `sumformers/` itself is the face
FOLDERS = ("configuration", "modeling", "processing", "text", "pipelines", "generation", "checkpoints")
# A module may import its own folder and any folder of a lower layer; processing and modeling are peers that never
# import each other (a model's processor is bound in the registry), and so are configuration and generation.
LAYERS = {
    "text": 0,
    "checkpoints": 0,
    "configuration": 1,
    "generation": 1,
    "processing": 2,
    "modeling": 2,
    "pipelines": 3,
    "face": 4,
}
MAX_MODELING_LINES = 800


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    modules = {}
    for folder in ("sumformers", *FOLDERS):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT / folder).with_suffix("").parts
            package = "sumformers" if folder == "sumformers" else f"sumformers.{folder}"
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else "face"


def imported_modules(name: str, path: Path) -> set[str]:
    """The package modules `name` imports anywhere in its file (at module level or inside functions)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {module for module in found if module.split(".")[0] == "sumformers"}


def test_imports_run_one_way():
    modules = package_modules()
    wrong_way = []
    for name, path in modules.items():
        source = layer_of(name)
        for target in imported_modules(name, path):
            if target not in modules:  # `from . import x` names a module or an attribute: keep the modules
                continue
            destination = layer_of(target)
            if destination != source and LAYERS[destination] >= LAYERS[source]:
                wrong_way.append(f"{name} -> {target}")
    assert wrong_way == []


def root_imports(path: Path) -> set[str]:
    """The top-level modules a file imports (at module level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_the_console_script_is_the_top_and_its_name_check_the_bottom():
    """`sumformers_cli` (the console script) imports the package (its commands, once the arguments are valid) and no
    package module imports it back; `sumformers_model_names`, which both read, imports neither: no circle."""
    importers = sorted(name for name, path in package_modules().items() if "sumformers_cli" in root_imports(path))
    assert importers == []
    assert "sumformers" in root_imports(REPO_ROOT / "sumformers_cli.py")
    assert root_imports(REPO_ROOT / "sumformers_model_names.py") & {"sumformers", "sumformers_cli"} == set()
    assert "sumformers_model_names" in root_imports(REPO_ROOT / "sumformers" / "hub.py")


def test_no_modeling_file_exceeds_the_line_limit():
    files = REPO_ROOT.glob("modeling/*.py")
    lengths = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in files}
    assert lengths and {name: lines for name, lines in lengths.items() if lines > MAX_MODELING_LINES} == {}


def test_the_check_sees_an_arrow_running_the_wrong_way(tmp_path):
    """The graph check itself: a modeling file importing its processor, a text file importing a model."""
    (tmp_path / "modeling_x.py").write_text("from ..processing.processing_x import XProcessor\n")
    (tmp_path / "words.py").write_text("def f():\n    from sumformers.modeling import modeling_x\n")
    modeling = imported_modules("sumformers.modeling.modeling_x", tmp_path / "modeling_x.py")
    text = imported_modules("sumformers.text.words", tmp_path / "words.py")
    assert "sumformers.processing.processing_x" in modeling and "sumformers.modeling.modeling_x" in text
    assert layer_of("sumformers.processing.processing_x") == "processing" and layer_of("sumformers.hub") == "face"


def run_python(code: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=600, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


LOADED = "json.dumps({'torch': 'torch' in sys.modules, 'models': sorted(m for m in sys.modules if m.startswith(" \
         "('sumformers.modeling', 'sumformers.pipelines', 'sumformers.processing')))})"


def test_import_sumformers_loads_no_torch_and_no_model_code():
    loaded = run_python(f"import json, sys\nimport sumformers\nprint({LOADED})")
    assert loaded == {"torch": False, "models": []}


@pytest.mark.parametrize("first_use", [
    "sumformers.BertSumForExtractiveSummarization",  # a name of the package
    "transformers.AutoConfig.from_pretrained(str(sumformers.checkpoints.shipped_checkpoints()['bertsum-minilm-cnndm']))",
])
def test_the_architectures_are_registered_at_first_use(first_use):
    """Used through the package's names or through transformers' Auto classes, the architectures are registered:
    the shipped BERTSum folder loads as BertSumConfig, and its processor is the registry's."""
    code = f"""import json, sys
import sumformers
import transformers, sumformers.checkpoints
before = {LOADED}
{first_use}
from transformers import AutoConfig, AutoProcessor
folder = str(sumformers.checkpoints.shipped_checkpoints()['bertsum-minilm-cnndm'])
config = AutoConfig.from_pretrained(folder)
model_class = sumformers.ARCHITECTURES['bertsum'].model_class
print(json.dumps({{'before': json.loads(before), 'config': type(config).__name__,
                  'processor': type(AutoProcessor.from_pretrained(folder)).__name__,
                  'model_processor': model_class.processor_class.__name__}}))
"""
    result = run_python(code)
    assert result["before"]["models"] == [] and result["config"] == "BertSumConfig"
    assert result["processor"] == result["model_processor"] == "BertSumProcessor"


def test_a_model_module_imported_on_its_own_finds_its_processor():
    code = """import json
from sumformers.modeling.modeling_stepwise_hibert import StepwiseHiBertForContentPlanning as planner
print(json.dumps(planner.processor_class.__name__))
"""
    assert run_python(code) == "HiBertPlannerProcessor"
