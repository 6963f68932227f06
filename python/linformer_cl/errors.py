"""One exception class per lf_status, all under Error; each carries the library's message."""


class Error(Exception):
    """A call of the library failed: .status names the lf_status, str() is the library's message."""
    status = "LF_ERR"

    def __init__(self, message):
        super().__init__(message)
        self.message = message


def _status_class(name, status, doc, *bases):
    return type(name, (Error, *bases), {"status": status, "__doc__": doc, "__module__": __name__})


ArgumentError = _status_class("ArgumentError", "LF_ERR_ARGUMENT",
                              "An argument is missing, out of range or of the wrong dtype or shape.", ValueError)
NoDeviceError = _status_class("NoDeviceError", "LF_ERR_NO_DEVICE", "No OpenCL device, or none matches the selector.")
OutOfMemoryError = _status_class("OutOfMemoryError", "LF_ERR_OUT_OF_MEMORY", "Host or device memory ran out.",
                                 MemoryError)
OpenCLError = _status_class("OpenCLError", "LF_ERR_OPENCL", "An OpenCL call failed; the message names the CL error.")
BuildError = _status_class("BuildError", "LF_ERR_BUILD", "A kernel failed to compile; the message holds the build log.")
BlasError = _status_class("BlasError", "LF_ERR_BLAS", "A GEMM of CLBlast or the host BLAS failed.")
FileError = _status_class("FileError", "LF_ERR_IO", "A file could not be opened, read or written.")
FormatError = _status_class("FormatError", "LF_ERR_FORMAT", "A file is malformed or holds no model the library knows.")
StateError = _status_class("StateError", "LF_ERR_STATE", "The object is not ready (a weight never set) or closed.")
UnsupportedError = _status_class("UnsupportedError", "LF_ERR_UNSUPPORTED",
                                 "Valid, but not supported by this build or device.")

# What the library's refusals in a forked child (messages naming fork()) add for Python.
FORK_WAY_OUT = ("; in Python, start the processes that use the library with multiprocessing's 'spawn' or "
                "'forkserver' method (multiprocessing.get_context('spawn')), each loading its own model, or fork "
                "them before the parent first lists devices or loads a model.")

# In lf_status order: LF_ERR_ARGUMENT is 1.
BY_CODE = (None, ArgumentError, NoDeviceError, OutOfMemoryError, OpenCLError, BuildError, BlasError, FileError,
           FormatError, StateError, UnsupportedError)


def raise_for(code, message):
    """Raises the class of status `code` (an int) with message; LF_OK returns."""
    if code == 0:
        return
    cls = BY_CODE[code] if 0 < code < len(BY_CODE) else Error
    if cls is StateError and "fork()" in (message or ""):
        message += FORK_WAY_OUT
    raise cls(message or f"status {code}")
