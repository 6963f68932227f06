"""One exception class per lf_status, all under Error; each carries the library's message."""


class Error(Exception):
    """A call of the library failed: .status names the lf_status, str() is the library's message."""
    status = "LF_ERR"

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class ArgumentError(Error, ValueError):
    """An argument is missing, out of range or of the wrong dtype or shape."""
    status = "LF_ERR_ARGUMENT"


class NoDeviceError(Error):
    """No OpenCL device, or none matches the selector."""
    status = "LF_ERR_NO_DEVICE"


class OutOfMemoryError(Error, MemoryError):
    """Host or device memory ran out."""
    status = "LF_ERR_OUT_OF_MEMORY"


class OpenCLError(Error):
    """An OpenCL call failed; the message names the CL error."""
    status = "LF_ERR_OPENCL"


class BuildError(Error):
    """A kernel failed to compile; the message holds the build log."""
    status = "LF_ERR_BUILD"


class BlasError(Error):
    """A GEMM of CLBlast or the host BLAS failed."""
    status = "LF_ERR_BLAS"


class FileError(Error):
    """A file could not be opened, read or written."""
    status = "LF_ERR_IO"


class FormatError(Error):
    """A file is malformed or holds no model the library knows."""
    status = "LF_ERR_FORMAT"


class StateError(Error):
    """The object is not ready (a weight never set) or already closed."""
    status = "LF_ERR_STATE"


class UnsupportedError(Error):
    """Valid, but not supported by this build or device."""
    status = "LF_ERR_UNSUPPORTED"


# In lf_status order: LF_ERR_ARGUMENT is 1.
BY_CODE = (None, ArgumentError, NoDeviceError, OutOfMemoryError, OpenCLError, BuildError, BlasError, FileError,
           FormatError, StateError, UnsupportedError)


def raise_for(code, message):
    """Raises the class of status `code` (an int) with message; LF_OK returns."""
    if code == 0:
        return
    cls = BY_CODE[code] if 0 < code < len(BY_CODE) else Error
    raise cls(message or f"status {code}")
