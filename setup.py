"""The one installed package, ``ttft``: the repository's ``telemetry/``, ``backends/`` and ``tui/`` folders
install as ``ttft.telemetry``, ``ttft.backends`` and ``ttft.tui`` (the package-directory mapping in
pyproject.toml), beside ``ttft/`` itself, the Python API. Nothing else is installed at the top level.
The sub-packages are listed here, found in each folder, so a new one can never be left out of the wheel."""

from setuptools import find_packages, setup

FOLDERS = ("telemetry", "backends", "tui")

setup(
    packages=[
        "ttft",
        *(
            f"ttft.{pkg}"
            for folder in FOLDERS
            for pkg in [folder, *(f"{folder}.{sub}" for sub in find_packages(folder))]
        ),
    ]
)
