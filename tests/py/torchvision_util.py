"""Imports a piece of torchvision beside the CPU build of torch.

PyPI's torchvision is built against PyPI's torch; beside the CPU build of
torch its C++ ops (nms, roi_align) do not load and `import torchvision` fails
registering fake kernels for them ("operator torchvision::nms does not
exist"). The pieces the tests use (functional transforms, tv_tensors, the
detection heads' losses) are plain PyTorch, so they are imported without
those registrations."""
import importlib
import sys
import types

import pytest


def import_torchvision(name: str):
    """The module `name` (a torchvision submodule); skips without torchvision."""
    pytest.importorskip("torch")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        pytest.skip("torchvision is not installed (tests/requirements.txt)")
    except RuntimeError:
        for mod in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[mod]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType(
            "torchvision._meta_registrations")
        return importlib.import_module(name)
