"""Imports the official Wan code (PyPI `wan22`, installed with --no-deps) on a machine without a
GPU, for the reference scripts of tools/reference/.

The package's top-level `wan/__init__.py` imports every pipeline (and with them torchvision,
opencv and flash_attn); `wan/modules/t5.py` evaluates `torch.cuda.current_device()` as a default
argument when it is imported. This module registers an empty `wan` package so that only the
submodules a script asks for are imported, and makes `current_device` answer 0 while they are.
Nothing else in the official code is changed here; a script that needs more (attention on the
CPU, say) says so itself.

    from wan_reference import wan_module
    model = wan_module("wan.modules.model")
"""

import importlib
import importlib.util
import sys
import types

import torch


def _register_package():
    if "wan" in sys.modules:
        return
    spec = importlib.util.find_spec("wan")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("the official Wan code is missing: pip install --no-deps -r "
                         "tools/reference/requirements-nodeps.txt")
    package = types.ModuleType("wan")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["wan"] = package


def wan_module(name):
    """The official module `name` (e.g. "wan.modules.vae2_2")."""
    _register_package()
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: 0
    try:
        return importlib.import_module(name)
    finally:
        torch.cuda.current_device = saved
