# Cross build for 64-bit ARM Linux on a Debian/Ubuntu x86-64 host, with the
# arm64 libraries installed through multiarch (`dpkg --add-architecture arm64`,
# `apt-get install libhwy-dev:arm64 ...`; see scripts/install-arm64-deps.sh).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# Test binaries run under qemu-user, so ctest and gtest_discover_tests work too.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ANYMOE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${ANYMOE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ANYMOE_CROSS_TRIPLE}-g++)
# Debian multiarch: arm64 libraries live in /usr/lib/aarch64-linux-gnu (found
# through CMAKE_LIBRARY_ARCHITECTURE), the cross libc in /usr/aarch64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${ANYMOE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${ANYMOE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # build tools are the host's
# BOTH: the multiarch dirs are outside the root path; CMAKE_LIBRARY_ARCHITECTURE
# puts lib/aarch64-linux-gnu ahead of plain lib/ so the host's x86-64 copies
# (in lib/x86_64-linux-gnu) are never searched.
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config: only the arm64 .pc files (and arch-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${ANYMOE_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# Run target binaries (gtest_discover_tests' listing, ctest) under qemu-user;
# -L is QEMU_LD_PREFIX: where qemu finds the aarch64 dynamic loader and libc.
find_program(ANYMOE_QEMU_AARCH64 qemu-aarch64)
if(ANYMOE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ANYMOE_QEMU_AARCH64};-L;/usr/${ANYMOE_CROSS_TRIPLE}")
endif()
