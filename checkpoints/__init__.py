"""The trained checkpoints that ship with the package, one folder each (see README's table)."""

from importlib import resources
from pathlib import Path


def shipped_checkpoints() -> dict[str, Path]:
    """The trained checkpoints bundled with the package, by name."""
    root = Path(str(resources.files(__name__)))
    return {path.name: path for path in sorted(root.iterdir()) if (path / "config.json").is_file()}
