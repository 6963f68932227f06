# Sourced by the bundle's scripts (bin/linformer, run-tests.sh, scripts/gpu-run.sh)
# and by scripts/bundle.sh: the environment the bundle's programs need on a
# machine that has an OpenCL driver and nothing else. lf_compat_libs and
# lf_bundle_env need LF_BUNDLE, the bundle's folder.
#
# OpenCL drivers: the bundled ICD loader (ocl-icd) reads the system's
# /etc/OpenCL/vendors/*.icd files, as an installed program would. A driver that
# installed no .icd file is named by its library instead: ocl-icd takes a
# library path in OCL_ICD_VENDORS (which then replaces the .icd files).
#
# C++ runtime: CLBlast needs libstdc++ and libgcc_s. The system's are used when
# they have every symbol version the bundle needs (lib/compat/needs); else the
# bundled ones in lib/compat/ (which need the glibc of the build machine).
# LINFORMER_BUNDLE_COMPAT=1 forces the bundled ones, =0 the system's.

# lf_use_icd LIB: use the OpenCL driver library LIB (a path) and no other.
lf_use_icd() {
    case $1 in
    /*) lf_icd_lib=$1 ;;
    *) lf_icd_lib=$(pwd)/$1 ;;
    esac
    if [ ! -f "$lf_icd_lib" ]; then
        echo "linformer: --icd $1: no such file; give the driver's OpenCL library," \
            "e.g. /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1" >&2
        exit 2
    fi
    export OCL_ICD_VENDORS="$lf_icd_lib"
}

# lf_icd_option "$@": applies a leading --icd LIB / --icd=LIB, else LINFORMER_ICD;
# sets lf_icd_shift to the number of arguments it used.
lf_icd_option() {
    lf_icd_shift=0
    case ${1-} in
    --icd)
        [ $# -ge 2 ] || { echo "linformer: --icd needs a library path" >&2; exit 2; }
        lf_use_icd "$2"
        lf_icd_shift=2 ;;
    --icd=*)
        lf_use_icd "${1#--icd=}"
        lf_icd_shift=1 ;;
    *)
        if [ -n "${LINFORMER_ICD-}" ]; then lf_use_icd "$LINFORMER_ICD"; fi ;;
    esac
}

# lf_system_icds: true when the loader has a driver to read without --icd.
lf_system_icds() {
    [ -n "${OCL_ICD_VENDORS-}" ] && return 0
    for f in /etc/OpenCL/vendors/*.icd; do
        [ -e "$f" ] && return 0
    done
    return 1
}

# lf_system_lib NAME: prints where the system's 64-bit library NAME is (the
# folders drivers and distributions install into, then the dynamic linker's
# cache); fails when it has none.
lf_system_lib() {
    for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/lib; do
        if [ -e "$d/$1" ]; then
            printf '%s\n' "$d/$1"
            return 0
        fi
    done
    lf_found=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }')
    [ -n "$lf_found" ] || return 1
    printf '%s\n' "$lf_found"
}

# lf_glibc_lib SONAME: true for glibc's own libraries, which stay the system's:
# they go with the system's dynamic loader.
lf_glibc_lib() {
    case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | libdl.so.* | \
        libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | \
        libBrokenLocale.so.* | libthread_db.so.*) return 0 ;;
    esac
    return 1
}

# lf_compat_libs: puts lib/compat/ first on the library path when the system's
# C++ runtime is missing or older than the bundle needs (see above).
lf_compat_libs() {
    lf_compat=${LINFORMER_BUNDLE_COMPAT:-auto}
    if [ "$lf_compat" = auto ]; then
        lf_compat=0
        while read -r lf_lib lf_versions; do
            lf_sys=$(lf_system_lib "$lf_lib") || { lf_compat=1; break; }
            for v in $lf_versions; do
                grep -qaF "$v" "$lf_sys" || { lf_compat=1; break 2; }
            done
        done <"$LF_BUNDLE/lib/compat/needs"
    fi
    if [ "$lf_compat" = 1 ]; then
        export LD_LIBRARY_PATH="$LF_BUNDLE/lib/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
}

# lf_bundle_env "$@": both of the above, and a PATH even from an empty
# environment (a driver may run tools: PoCL runs the linker); sets
# lf_icd_shift like lf_icd_option.
lf_bundle_env() {
    lf_icd_option "$@"
    lf_compat_libs
    export PATH="${PATH:-/usr/bin:/bin}"
}
