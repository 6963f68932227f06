"""Every ctypes declaration of the package against its prototype in include/linformer.h."""
import ctypes
import os
import re

import pytest

from linformer_cl import _native as n
from conftest import ROOT

HEADER = os.path.join(ROOT, "include", "linformer.h")
PROTOTYPE = re.compile(r"LF_API\s+([^;(]*?)\b(lf_\w+)\s*\(([^)]*)\)\s*;", re.S)
STRUCTS = {"lf_device_info": n.DeviceInfo, "lf_attention_config": n.AttentionConfig, "lf_load_options": n.LoadOptions,
           "lf_tensor_info": n.TensorInfo, "lf_model_options": n.ModelOptions, "lf_model_info": n.ModelInfo,
           "lf_model_config": n.ModelConfig, "lf_stage_time": n.StageTime, "lf_layout_tensor": n.LayoutTensor}
ENUMS = {"lf_status", "lf_mode", "lf_model_kind", "lf_activation", "lf_norm", "lf_dtype", "lf_proj_kind",
         "lf_layout_part"}
HANDLES = {"lf_context", "lf_attention", "lf_model", "lf_tensor_file", "lf_projection"}
SCALARS = {"int": ctypes.c_int, "unsigned": ctypes.c_uint, "size_t": ctypes.c_size_t, "float": ctypes.c_float,
           "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "double": ctypes.c_double}


def prototypes():
    text = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
    return {m.group(2): (m.group(1), [a for a in m.group(3).split(",") if a.strip() not in ("", "void")])
            for m in PROTOTYPE.finditer(text)}


def ctype_of(decl, is_result=False):
    """The ctypes type a C declaration (type and, for an argument, its name) maps to."""
    words = decl.replace("*", " * ").replace("const", " ").split()
    stars = words.count("*")
    words = [w for w in words if w != "*"]
    base = words[0]
    if base == "char" and stars == 1:
        return ctypes.c_char_p
    if base == "char" and stars == 2:
        return ctypes.POINTER(ctypes.c_char_p)
    if base in HANDLES and stars == 1:
        return n.handle
    if base in HANDLES and stars == 2:
        return ctypes.POINTER(n.handle)
    if base == "void" and stars == 0:
        return None
    target = STRUCTS.get(base) or (ctypes.c_int if base in ENUMS else SCALARS[base])
    for _ in range(stars):
        target = ctypes.POINTER(target)
    return target


PROTOS = prototypes()


def test_the_header_parses():
    assert len(PROTOS) > 60 and "lf_model_forward" in PROTOS


@pytest.mark.parametrize("name", sorted(n.FUNCTIONS))
def test_declaration_matches_prototype(name):
    assert name in PROTOS, f"{name} is not in include/linformer.h"
    result, args = PROTOS[name]
    declared_result, declared_args = n.FUNCTIONS[name]
    assert declared_result == ctype_of(result + " x", True), f"{name}: result"
    assert len(declared_args) == len(args), f"{name}: {len(declared_args)} arguments, the header has {len(args)}"
    for i, (got, arg) in enumerate(zip(declared_args, args)):
        assert got == ctype_of(arg), f"{name}: argument {i} ({arg.strip()})"
