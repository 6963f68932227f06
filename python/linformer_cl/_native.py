"""The C library through ctypes: its structs and the prototypes of include/linformer.h.

Every function the package calls is declared in FUNCTIONS, so that one test can
hold each declaration against the header. ctypes.CDLL releases the GIL during
every call, so forwards on two contexts run at the same time.
"""
import ctypes
import os
from ctypes import POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t
from ctypes import c_uint, c_uint64, c_void_p

HERE = os.path.dirname(os.path.abspath(__file__))


class DeviceInfo(Structure):
    _fields_ = [("platform_index", c_uint), ("device_index", c_uint), ("type", c_int),
                ("platform_name", c_char * 128), ("platform_version", c_char * 128),
                ("platform_vendor", c_char * 128), ("device_name", c_char * 128), ("vendor", c_char * 128),
                ("driver_version", c_char * 128), ("global_mem_bytes", c_uint64), ("max_alloc_bytes", c_uint64),
                ("local_mem_bytes", c_uint64), ("compute_units", c_uint), ("max_work_group_size", c_size_t),
                ("fp16", c_int), ("fp64", c_int), ("float_vector_width", c_uint)]


class AttentionConfig(Structure):
    _fields_ = [("d_model", c_int), ("heads", c_int), ("d_head", c_int), ("kv_heads", c_int),
                ("max_seq_len", c_int), ("k", c_int), ("bias_q", c_int), ("bias_k", c_int), ("bias_v", c_int),
                ("bias_out", c_int), ("scale", c_float), ("mode", c_int), ("sharing", c_int),
                ("proj_kind", c_int), ("position", c_int), ("share_kv", c_int), ("seed", c_uint64),
                ("path", c_int), ("causal", c_int)]


class LoadOptions(Structure):
    _fields_ = [("heads", c_int), ("mode", c_int), ("causal", c_int), ("projection", c_int), ("k", c_int),
                ("seed", c_uint64)]


class TensorInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * 8), ("count", c_size_t)]


class ModelOptions(Structure):
    _fields_ = [("heads", c_int), ("activation", c_int), ("norm", c_int), ("prefix", c_char_p)]


class ModelInfo(Structure):
    _fields_ = [("kind", c_int), ("layout", c_char_p), ("layers", c_int), ("d_model", c_int), ("heads", c_int),
                ("d_ff", c_int), ("vocab", c_int), ("max_seq_len", c_int), ("norm", c_int), ("activation", c_int),
                ("glu", c_int), ("layerwise", c_int)]


class ModelConfig(Structure):
    _fields_ = [("kind", c_int), ("layers", c_int), ("d_model", c_int), ("d_ff", c_int), ("vocab", c_int),
                ("norm", c_int), ("activation", c_int), ("glu", c_int), ("bias_ff1", c_int), ("bias_ff2", c_int),
                ("positions", c_int), ("pos_offset", c_int), ("embed_scale", c_float), ("eps", c_float),
                ("emb_norm", c_int), ("final_norm", c_int), ("head_bias", c_int)]


class LayoutTensor(Structure):
    _fields_ = [("weight", c_char_p), ("name", c_char * 128), ("ndim", c_int), ("required", c_int),
                ("transposed", c_int)]


class StageTime(Structure):
    _fields_ = [("stage", c_char_p), ("ms", c_double), ("commands", c_uint), ("flops", c_double), ("bytes", c_double)]


P = POINTER
status = c_int
handle = c_void_p  # lf_context *, lf_attention *, lf_model *, lf_tensor_file *: opaque
floats, tokens_p, lengths_p, sizes = P(c_float), P(c_int64), P(c_int32), P(c_size_t)

# name: (result, arguments), in the header's order.
FUNCTIONS = {
    "lf_version_string": (c_char_p, []),
    "lf_status_string": (c_char_p, [status]),
    "lf_devices_list": (status, [P(DeviceInfo), c_size_t, sizes, c_char_p, c_size_t]),
    "lf_devices_unloaded": (c_char_p, []),
    "lf_devices_select": (status, [c_char_p, P(DeviceInfo), c_size_t, sizes, c_char_p, c_size_t]),
    "lf_context_create": (status, [c_char_p, P(handle), c_char_p, c_size_t]),
    "lf_kernel_cache_dir": (status, [c_char_p, c_size_t]),
    "lf_context_set_cache_dir": (status, [handle, c_char_p]),
    "lf_context_free": (None, [handle]),
    "lf_context_last_error": (c_char_p, [handle]),
    "lf_context_device_info": (status, [handle, P(DeviceInfo)]),
    "lf_context_gemm_backend": (c_char_p, [handle]),
    "lf_context_host_blas": (c_char_p, [handle]),
    "lf_attention_config_init": (None, [P(AttentionConfig), c_int, c_int, c_int, c_int]),
    "lf_attention_create": (status, [handle, P(AttentionConfig), handle, P(handle)]),
    "lf_attention_free": (None, [handle]),
    "lf_attention_config_get": (status, [handle, P(AttentionConfig)]),
    "lf_attention_set_weight_shaped": (status, [handle, c_char_p, sizes, c_size_t, floats]),
    "lf_attention_forward": (status, [handle, floats, floats, c_int, c_int, lengths_p]),
    "lf_attention_last_profile": (status, [handle, P(StageTime), c_size_t, sizes]),
    "lf_attention_device_bytes": (status, [handle, sizes, sizes]),
    "lf_load_options_init": (None, [P(LoadOptions)]),
    "lf_attention_load_with": (status, [handle, c_char_p, P(LoadOptions), P(handle)]),
    "lf_tensor_file_open": (status, [c_char_p, P(handle), c_char_p, c_size_t]),
    "lf_tensor_file_free": (None, [handle]),
    "lf_tensor_file_find": (status, [handle, c_char_p, P(TensorInfo)]),
    "lf_mode_name": (c_char_p, [c_int]),
    "lf_mode_parse": (status, [c_char_p, P(c_int)]),
    "lf_model_load": (status, [handle, c_char_p, P(ModelOptions), P(handle)]),
    "lf_layout_tensors": (status, [c_char_p, c_int, P(LayoutTensor), c_size_t, sizes, c_char_p, c_size_t]),
    "lf_model_config_init": (None, [P(ModelConfig), c_int, c_int, c_int, c_int, c_int]),
    "lf_model_create": (status, [handle, P(ModelConfig), P(AttentionConfig), P(handle)]),
    "lf_model_set_weight_shaped": (status, [handle, c_int, c_char_p, sizes, c_size_t, floats]),
    "lf_model_free": (None, [handle]),
    "lf_model_info_get": (status, [handle, P(ModelInfo)]),
    "lf_model_forward": (status, [handle, floats, tokens_p, floats, c_int, c_int, lengths_p]),
    "lf_model_layer_attention": (status, [handle, c_int, P(LoadOptions), P(handle)]),
    "lf_model_device_bytes": (status, [handle, sizes, sizes]),
    "lf_model_last_profile": (status, [handle, P(StageTime), c_size_t, sizes]),
    "lf_model_kind_name": (c_char_p, [c_int]),
    "lf_activation_name": (c_char_p, [c_int]),
    "lf_activation_parse": (status, [c_char_p, P(c_int)]),
    "lf_norm_name": (c_char_p, [c_int]),
    "lf_norm_parse": (status, [c_char_p, P(c_int)]),
    "lf_host_blas_core": (c_char_p, [P(c_char_p)]),
    "lf_host_blas_library": (status, [P(c_char_p), P(c_char_p), c_char_p, c_size_t]),
}


def library_path():
    """The library installed beside this module; LINFORMER_LIBRARY overrides it (a build tree's)."""
    path = os.environ.get("LINFORMER_LIBRARY")
    return path if path else os.path.join(HERE, "liblinformer.so")


def open_library(path=None):
    # The host BLAS (OpenBLAS) reads OPENBLAS_THREAD_TIMEOUT only as it loads, with the library: its idle
    # threads otherwise yield for 2^28 cycles after each GEMM, on the cores that the OpenCL runtime's kernels
    # then run on (docs/gemm.md). A value already set is kept, and an OpenBLAS this process loaded
    # before keeps what it read then.
    if not os.environ.get("OPENBLAS_THREAD_TIMEOUT"):
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
    lib = ctypes.CDLL(path or library_path())
    for name, (result, arguments) in FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = result, arguments
    return lib


lib = open_library()


def host_blas():
    """The kernel set the host BLAS (OpenBLAS) runs, and a faster one this CPU takes when OpenBLAS fell back
    to an older set (None otherwise): OPENBLAS_CORETYPE, set before Python starts, selects it."""
    faster = c_char_p()
    core = lib.lf_host_blas_core(ctypes.byref(faster))
    return core.decode(), faster.value.decode() if faster.value else None
