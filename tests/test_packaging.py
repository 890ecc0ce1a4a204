"""What setup.cfg ships besides the packages: the license and the console script's module."""

import configparser
import hashlib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the verbatim Apache License 2.0 text
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    return config


def test_license_is_the_apache_2_text_and_ships():
    text = (REPO_ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256
    config = setup_cfg()
    assert config["metadata"]["license"] == "Apache-2.0"
    assert config["metadata"]["license_files"].split() == ["LICENSE"]


def test_console_script_module_ships():
    config = setup_cfg()
    assert config["options"]["py_modules"].split() == ["sumformers_cli", "sumformers_model_names"]
    assert (REPO_ROOT / "sumformers_cli.py").is_file()
    assert config["options.entry_points"]["console_scripts"].split() == ["sumformers", "=", "sumformers_cli:main"]
