"""``python -m jitgrad.ops [PATH]``: write kernels/derived.py, the fused VJP kernels derived from the entries'
formulas (jitgrad/ops/_derive.py), to PATH (default: the package's own)."""
import os
import sys

from .. import kernels
from ._derive import write

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(kernels.__file__), "derived.py")
write(path)
print(path)
