#!/usr/bin/env bash
# Makes .deps/ (git-ignored) for the GPU machine, which lacks some of the project's libraries: the
# headers and shared objects of cpp-httplib (with the brotli libraries it links), PCRE2, utf8proc and
# toml++, each once under its soname, and a toml++ CMake config that points into .deps. device_run.sh
# turns them into what the build finds (pkg-config files, the linker's names). With WITH_CUPTI=1 (and
# the CUDA toolkit here), also CUPTI's headers and library as .deps/cupti.tar.xz (~1.2 MB), for
# bench/cuda/kernel_trace.cpp on a GPU machine whose toolkit has no CUPTI (device_run.sh unpacks it and
# points the build at it; the current GPU machine's toolkit has CUPTI, so it is not needed there): off by
# default, since the tree (~59 MiB) and .deps share the carry's 64 MiB; with it, .deps has no room left for
# ab_run.sh's baseline archive (a trace then takes a call of its own).
# Run it here, on the development machine, after scripts/install-deps.sh; carry .deps with the device
# call (~4 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEPS=.deps
LIBDIR=/usr/lib/x86_64-linux-gnu
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '/.deps/' >> .git/info/exclude; }
rm -rf "${DEPS:?}/include" "${DEPS:?}/lib" "${DEPS:?}/cmake" "${DEPS:?}/cupti" "${DEPS:?}/cupti.tar.xz"
mkdir -p "$DEPS/include" "$DEPS/lib" "$DEPS/cmake/tomlplusplus"
cp /usr/include/httplib.h /usr/include/pcre2.h /usr/include/utf8proc.h "$DEPS/include/"
cp -r /usr/include/toml++ "$DEPS/include/"
toml_so=""
for lib in libcpp-httplib libpcre2-8 libutf8proc libtomlplusplus libbrotlidec libbrotlienc libbrotlicommon; do
  f=$(readlink -f "$LIBDIR/$lib.so")
  soname=$(objdump -p "$f" | awk '/SONAME/ {print $2}')
  cp "$f" "$DEPS/lib/$soname"
  if [ "$lib" = libtomlplusplus ]; then toml_so=$soname; fi
done
cat > "$DEPS/cmake/tomlplusplus/tomlplusplusConfig.cmake" << EOF
# toml++ as carried in .deps (bench/cuda/make_deps.sh)
if(NOT TARGET tomlplusplus::tomlplusplus)
  get_filename_component(_infx_deps "\${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
  add_library(tomlplusplus::tomlplusplus UNKNOWN IMPORTED)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "\${_infx_deps}/include"
    IMPORTED_LOCATION "\${_infx_deps}/lib/$toml_so")
  target_compile_features(tomlplusplus::tomlplusplus INTERFACE cxx_std_17)
  target_compile_options(tomlplusplus::tomlplusplus INTERFACE -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1)
endif()
EOF
CUDA_INC=/usr/local/cuda/include
if [ "${WITH_CUPTI:-0}" = 1 ]; then
  [ -f "$CUDA_INC/cupti.h" ] || { echo "make_deps.sh: no CUPTI in /usr/local/cuda to carry" >&2; exit 1; }
  cupti=$(readlink -f "$(ls /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/lib/libcupti.so 2>/dev/null | head -1)")
  stage=$(mktemp -d)
  mkdir -p "$stage/cupti/include" "$stage/cupti/lib"
  cp "$CUDA_INC"/cupti*.h "$CUDA_INC"/generated_*meta.h "$stage/cupti/include/"
  for d in Openacc Openmp; do [ -d "$CUDA_INC/$d" ] && cp -r "$CUDA_INC/$d" "$stage/cupti/include/"; done
  cp "$cupti" "$stage/cupti/lib/$(objdump -p "$cupti" | awk '/SONAME/ {print $2}')"
  tar -cJf "$DEPS/cupti.tar.xz" -C "$stage" cupti
  rm -rf "$stage"
fi
du -sh "$DEPS"
ls "$DEPS/lib"
