# The Python package index's versions pinned for the Python environments
# (scripts/python-env.sh, scripts/install-python-test.sh), in this one place.
SAFETENSORS_VERSION=0.8.0
PYTEST_VERSION=8.3.4
LINFORMER_VERSION=0.2.3 # lucidrains' package, as tests/data/make_*_fixtures.py used it
BUILD_BACKEND="scikit-build-core==0.10.7 packaging==24.2 pathspec==0.12.1"
