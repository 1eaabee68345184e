"""Packaging hook (the metadata is in pyproject.toml): the wheel carries the SAM template and
the functions' entry points inside ``cirrusmq_local/stack/``, so ``cirrusmq dev`` and
``LocalStack`` work from an installed ``cirrusmq[local]`` as from a checkout."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLE = ("template.yaml", "functions/*/*.py", "functions/*/*.json")


class BuildPyWithStack(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "cirrusmq_local" / "stack"
        for pattern in BUNDLE:
            for source in sorted(ROOT.glob(pattern)):
                relative = source.relative_to(ROOT)
                self.mkpath(str((target / relative).parent))
                self.copy_file(str(source), str(target / relative))


setup(cmdclass={"build_py": BuildPyWithStack})
